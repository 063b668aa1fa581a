"""Records JAX's dtype conversions (astype) for spmd's tests: float → 16-bit float rounding,
float → int saturation and NaN handling, int → narrower int wrap-around, anything → bool.

Writes tests/goldens/convert.npz with keys "from|to|x" and "from|to|out".
Run: python3 tools/goldens/gen_convert.py   (needs jax; the tests do not)
"""
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

jax.config.update("jax_enable_x64", True)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "convert.npz")
rng = np.random.default_rng(7)


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


edges = [0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, 127.5, 128.0, -129.0, 255.9, 256.0, 65504.0,
         65520.0, 1e30, -1e30, 3e9, -3e9, 5e-8, 6e-5, np.inf, -np.inf, np.nan, 2.0**31,
         -(2.0**31), 2.0**32, 1e-40]
# Random float32 bit patterns exercise every rounding case of the 16-bit formats.
bits = rng.integers(0, 2**32, 1500, dtype=np.uint64).astype(np.uint32)
f32 = np.concatenate([np.array(edges, np.float32), bits.view(np.float32),
                      rng.normal(0, 100, 500).astype(np.float32)])
f64 = np.concatenate([np.array(edges), rng.normal(0, 1e3, 400),
                      rng.integers(0, 2**63, 400, dtype=np.uint64).view(np.float64)])
ints = {
    "int32": np.concatenate([np.array([0, 1, -1, 127, 128, 255, 256, -129, 2**31 - 1, -2**31],
                                      np.int32), rng.integers(-2**31, 2**31, 200, dtype=np.int64).astype(np.int32)]),
    "uint32": rng.integers(0, 2**32, 200, dtype=np.uint64).astype(np.uint32),
    "int64": np.concatenate([np.array([2**62, -2**62, 2**53 + 1], np.int64),
                             rng.integers(-2**63, 2**63 - 1, 200, dtype=np.int64)]),
    "int8": np.arange(-128, 128, dtype=np.int8),
}
targets = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "uint64", "bfloat16",
           "float16", "float32", "float64"]
out = {}
sources = {"float32": f32, "float64": f64, **ints,
           "bfloat16": f32[:800].astype(ml_dtypes.bfloat16),
           "float16": f32[:800].astype(np.float16)}
for src, x in sources.items():
    for dst in targets:
        if dst == src:
            continue
        y = jnp.asarray(x).astype(npdt(dst))
        out[f"{src}|{dst}|x"] = np.asarray(x)
        out[f"{src}|{dst}|out"] = np.asarray(y)
np.savez_compressed(OUT, **out)
print(f"wrote {len(out)} arrays")
