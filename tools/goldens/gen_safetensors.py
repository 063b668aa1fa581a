"""Writes the .safetensors files tests/io/safetensors_test.cpp reads, with safetensors.numpy.

For each <name>.safetensors in tests/goldens/safetensors/ it also writes <name>.npz: the same
arrays through np.savez (bfloat16 as ml_dtypes writes it), which the test loads with load_npz as
the expected values. The test also saves those arrays with save_safetensors and the metadata
listed in METADATA (repeated as C++ literals in the test) and compares the bytes with the file
written here, except for files with several metadata keys: safetensors writes those in the order
of a Rust HashMap, which changes from run to run.

  dtypes        every dtype safetensors and spmd share, with edge values (NaN, inf, extremes)
  model         torch-style names, a 0-d and an empty tensor, a name and metadata that need
                JSON escapes and non-ASCII UTF-8
  unpadded      a header whose length is already a multiple of 8 (no padding spaces)
  empty         no tensors
  many_metadata several metadata keys (loaded only)

Run: /work/jaxenv/bin/python tools/goldens/gen_safetensors.py   (needs safetensors and
ml_dtypes; the tests do not)
"""
import json
import os
import struct

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "safetensors")

nan, inf = float("nan"), float("inf")
VALUES = {
    "bool": [True, False, True],
    "uint8": [0, 1, 128, 255],
    "int8": [-128, -1, 0, 127],
    "int16": [-32768, -1, 0, 1000, 32767],
    "uint16": [0, 1, 32768, 65535],
    "float16": [0.0, -0.0, 1.5, 65504.0, 2.0**-24, inf, -inf, nan, 0.1],
    "bfloat16": [0.0, -0.0, 1.5, -2.25, 3.3895313892515355e38, 2.0**-133, inf, nan, 0.1],
    "int32": [-2147483648, -1, 0, 123456789, 2147483647],
    "uint32": [0, 1, 2147483648, 4294967295],
    "float32": [0.0, -0.0, -2.25, 3.4028234663852886e38, 2.0**-149, inf, -inf, nan, 0.1],
    "float64": [0.0, -0.0, -2.25, 1.7976931348623157e308, 5e-324, inf, -inf, nan, 0.1],
    "int64": [-(2**63), -1, 0, 1234567890123456789, 2**63 - 1],
    "uint64": [0, 1, 2**63, 2**64 - 1],
}

ESCAPED_NAME = 'odd name: "q" \\ / \t\u00e9\u2028\U0001F600'
METADATA = {
    "dtypes": {"format": "np"},
    "model": {'note "q"': "line1\nline2\t\u00e9 \x01\x1f\x7f \U0001F600"},
    "unpadded": {},
    "empty": {},
    "many_metadata": {"format": "pt", "step": "1200", "optimizer": "adam", "lr": "0.001"},
}


def dtype_of(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def model_tensors():
    return {
        "layers.0.weight": (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 4,
        "layers.0.bias": np.array([0.5, -1.0, 2.0], np.float32),
        "layers.1.weight": np.array([[1.5, -2.25, 0.1], [3, 4, 5]], ml_dtypes.bfloat16),
        "step": np.array(1200, np.int64),
        "scale": np.array(0.125),
        "mask": np.array([[True, False], [False, True]]),
        "empty": np.zeros((0, 3), np.float16),
        ESCAPED_NAME: np.array([7, 200], np.uint8),
    }


def unpadded_tensors():
    """One int32 tensor whose name makes the header's JSON a multiple of 8 bytes long."""
    for k in range(8):
        name = "w" + "x" * k
        header = json.dumps({name: {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}},
                            separators=(",", ":"))
        if len(header) % 8 == 0:
            return {name: np.array([-7, 9], np.int32)}
    raise AssertionError("no name gives an unpadded header")


def files():
    return {
        "dtypes": {name: np.array(v, dtype_of(name)) for name, v in VALUES.items()},
        "model": model_tensors(),
        "unpadded": unpadded_tensors(),
        "empty": {},
        "many_metadata": {"a": np.array([1, 2], np.int16), "b": np.array([0.5], np.float32)},
    }


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return f.read(n)


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, tensors in files().items():
        path = os.path.join(OUT, name + ".safetensors")
        save_file(tensors, path, metadata=METADATA[name] or None)
        # np.savez takes keys as keyword names; a dict passed with ** keeps any string.
        np.savez(os.path.join(OUT, name + ".npz"), **tensors)
        print(f"{name}: {os.path.getsize(path)} bytes, header {header_of(path)[:100]!r}...")
    assert not header_of(os.path.join(OUT, "unpadded.safetensors")).endswith(b" ")


if __name__ == "__main__":
    main()
