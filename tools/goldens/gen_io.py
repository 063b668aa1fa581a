"""Writes the .npy/.npz files spmd's I/O tests read; checks that files spmd writes load in NumPy.

Step 1 (no build needed) writes tests/goldens/io/ with NumPy: every dtype with edge values,
0-d, empty and 3-d arrays, big-endian and Fortran-order data, .npy format versions 2.0 and 3.0,
bfloat16 through ml_dtypes, and .npz archives from np.savez and np.savez_compressed.
tests/io/npy_test.cpp holds the same values as C++ literals and checks them exactly.

Step 2 (--check-with PATH/TO/spmd_tests) runs the NpyExport tests with SPMD_IO_EXPORT_DIR set:
spmd loads every golden file and saves it again. This script then checks with NumPy that each
re-saved .npy is byte-identical to np.save of the same (little-endian, C-order) array, that the
re-saved .npz archives pass zipfile's CRC check and hold the same arrays, and that bfloat16 comes
back through np.load(...).view(ml_dtypes.bfloat16).

Run: python3 tools/goldens/gen_io.py [--check-with build/tests/spmd_tests]
"""
import argparse
import io
import os
import subprocess
import sys
import tempfile
import zipfile

import ml_dtypes
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens", "io")

nan, inf = float("nan"), float("inf")
FLOATS = {
    "float16": [0.0, -0.0, 1.5, -2.25, 65504.0, 2.0**-24, inf, -inf, nan, 0.1],
    "float32": [0.0, -0.0, 1.5, -2.25, 3.4028234663852886e38, 2.0**-149, inf, -inf, nan, 0.1],
    "float64": [0.0, -0.0, 1.5, -2.25, 1.7976931348623157e308, 5e-324, inf, -inf, nan, 0.1],
    "bfloat16": [0.0, -0.0, 1.5, -2.25, 3.3895313892515355e38, 2.0**-133, inf, -inf, nan, 0.1],
}
INTS = {
    "int8": [-128, -1, 0, 1, 42, 127],
    "int16": [-32768, -1, 0, 1, 1000, 32767],
    "int32": [-2147483648, -1, 0, 1, 123456789, 2147483647],
    "int64": [-(2**63), -1, 0, 1, 1234567890123456789, 2**63 - 1],
    "uint8": [0, 1, 127, 128, 255],
    "uint16": [0, 1, 32768, 65535],
    "uint32": [0, 1, 2147483648, 4294967295],
    "uint64": [0, 1, 2**63, 2**64 - 1],
}


def dtype_of(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def golden_arrays():
    """name -> array for every .npy golden."""
    a = {"bool": np.array([True, False, True, True, False])}
    for name, values in {**INTS, **FLOATS}.items():
        a[name] = np.array(values, dtype=dtype_of(name))
    a["int32_2x3x4"] = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    a["float64_scalar"] = np.array(3.25)
    a["float32_empty_0x3"] = np.zeros((0, 3), np.float32)
    a["int16_big_endian"] = np.array([-300, 1, 258, 32767], dtype=">i2")
    a["float64_big_endian"] = np.array([1.5, -0.1, inf], dtype=">f8")
    a["uint32_big_endian_2x2"] = np.array([[1, 2], [3, 4000000000]], dtype=">u4")
    a["int32_fortran_3x4"] = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    a["float64_fortran_2x3x4"] = np.asfortranarray(np.arange(24.0).reshape(2, 3, 4) / 8)
    a["uint16_fortran_big_endian_2x3"] = np.asfortranarray(
        np.arange(6, dtype=">u2").reshape(2, 3) * 257)
    a["bool_fortran_2x2"] = np.asfortranarray(np.array([[True, False], [False, False]]))
    return a


def npz_arrays():
    """file name -> (writer, {key: array})."""
    mixed = {
        "ints": np.arange(6, dtype=np.int64).reshape(2, 3),
        "flags": np.array([True, False]),
        "half": np.array([0.5, -1.0], np.float16),
        "bf16": np.array([1.5, -2.25, 0.1], ml_dtypes.bfloat16),
        "scalar": np.array(7, np.uint8),
        "empty": np.zeros((3, 0), np.float64),
    }
    big = {
        "ramp": np.arange(1000, dtype=np.float32) / 4,
        "codes": (np.arange(300) % 7).astype(np.int8),
        "bf16": np.array([1.5, -2.25, 0.1], ml_dtypes.bfloat16),
    }
    return {
        "savez.npz": (np.savez, mixed),
        "savez_compressed.npz": (np.savez_compressed, big),
        "savez_empty.npz": (np.savez, {}),
    }


def write_goldens():
    os.makedirs(OUT, exist_ok=True)
    for name, arr in golden_arrays().items():
        np.save(os.path.join(OUT, name + ".npy"), arr)
    # The header format versions np.save picks only for huge or non-latin-1 headers.
    for version in [(2, 0), (3, 0)]:
        path = os.path.join(OUT, f"float32_version_{version[0]}_0.npy")
        with open(path, "wb") as f:
            np.lib.format.write_array(f, np.array([[1.0, -2.0], [0.5, 8.0]], np.float32), version)
    for name, (writer, arrays) in npz_arrays().items():
        writer(os.path.join(OUT, name), **arrays)
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"wrote {len(os.listdir(OUT))} files, {total} bytes, to {os.path.normpath(OUT)}")


def little_endian_c_order(arr):
    return np.array(arr, dtype=arr.dtype.newbyteorder("<"), order="C")


def same_array(got, want):
    """Same shape, same dtype (byte order aside) and identical bits, as np.load returns them:
    bfloat16 comes back as the 2-byte void '|V2'."""
    want = little_endian_c_order(want)
    want_str = "|V2" if want.dtype == ml_dtypes.bfloat16 else want.dtype.str
    return (got.shape == want.shape and got.dtype.str == want_str
            and got.tobytes() == want.tobytes())


def npy_bytes(arr):
    buf = io.BytesIO()
    np.save(buf, little_endian_c_order(arr))
    return buf.getvalue()


def check_exports(tests_binary):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, SPMD_IO_EXPORT_DIR=tmp)
        subprocess.run([tests_binary, "--gtest_filter=NpyExport.*"], env=env, check=True)
        for name, arr in golden_arrays().items():
            path = os.path.join(tmp, name + ".npy")
            with open(path, "rb") as f:
                data = f.read()
            if data != npy_bytes(arr):
                failures.append(f"{name}.npy is not byte-identical to np.save's output")
            if not same_array(np.load(path), arr):
                failures.append(f"{name}.npy loads differently in NumPy")
        bf16 = np.load(os.path.join(tmp, "bfloat16.npy")).view(ml_dtypes.bfloat16)
        if bf16.tobytes() != golden_arrays()["bfloat16"].tobytes():
            failures.append("bfloat16.npy does not view back as ml_dtypes.bfloat16")
        for name, (_, arrays) in npz_arrays().items():
            for variant in ["", "zip64_"]:
                path = os.path.join(tmp, variant + name)
                with zipfile.ZipFile(path) as z:
                    if z.testzip() is not None:
                        failures.append(f"{variant + name}: bad CRC")
                    if not arrays:
                        # np.load recognises a file as .npz only by "PK\x03\x04" or "PK\x05\x06";
                        # an empty ZIP64 archive starts with "PK\x06\x06" (zipfile reads it).
                        if z.namelist():
                            failures.append(f"{variant + name}: members {z.namelist()}")
                        continue
                with np.load(path) as got:
                    if sorted(got.files) != sorted(arrays):
                        failures.append(f"{variant + name}: members {got.files}")
                    for key, arr in arrays.items():
                        if key in got.files and not same_array(got[key], arr):
                            failures.append(f"{variant + name}[{key}] differs")
    for f in failures:
        print("FAIL:", f)
    print("NumPy check of spmd-written files:", "FAILED" if failures else "all passed")
    return not failures


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--check-with", help="path of the spmd_tests binary")
    args = parser.parse_args()
    write_goldens()
    if args.check_with and not check_exports(args.check_with):
        sys.exit(1)
