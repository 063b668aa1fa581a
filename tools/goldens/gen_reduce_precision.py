"""Records JAX's lax.reduce_precision: values, the jaxpr of its gradient and of its vmap.

Writes tests/goldens/reduce_precision/values.npz with, per input dtype and (exponent_bits,
mantissa_bits), "<dtype>|<e>|<m>|x" (edge values, then random bit patterns: every class of
float, subnormals and NaNs included) and "<dtype>|<e>|<m>|y" (JAX's results), and one
tests/goldens/reduce_precision/<case>.txt per jaxpr (str(jax.make_jaxpr(...)) and a newline).
Run: python3 tools/goldens/gen_reduce_precision.py   (needs jax; the tests do not)
"""
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "reduce_precision")
rng = np.random.default_rng(20261125)

DTYPES = {"float32": (np.float32, np.uint32), "float16": (np.float16, np.uint16),
          "bfloat16": (ml_dtypes.bfloat16, np.uint16)}
CONFIGS = [(5, 10), (8, 7), (4, 3), (5, 2), (2, 1), (1, 0), (8, 23), (11, 52), (3, 30)]
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, 3.14159265, -3.14159265, 1e-3, 1e-5, 1e-8,
         65504.0, 65520.0, 65536.0, -70000.0, 1e30, 3e38, np.inf, -np.inf, np.nan, 1.0009765625,
         1.00048828125, 1.00146484375, 0.099975586, 6e-5, 6.1e-5, 6.2e-5]
N_RANDOM = 512

values = {}
for dname, (dtype, bits) in DTYPES.items():
    with np.errstate(over="ignore"):  # edges beyond float16's range become infinities
        edges = np.array(EDGES, np.float64).astype(dtype)
    nbits = np.dtype(bits).itemsize * 8
    patterns = rng.integers(0, 2**nbits, N_RANDOM, dtype=np.uint64).astype(bits).view(dtype)
    x = np.concatenate([edges, patterns])
    for e, m in CONFIGS:
        y = lax.reduce_precision(jnp.asarray(x), exponent_bits=e, mantissa_bits=m)
        key = f"{dname}|{e}|{m}"
        values[key + "|x"] = x
        values[key + "|y"] = np.asarray(y)
os.makedirs(ROOT, exist_ok=True)
np.savez(os.path.join(ROOT, "values.npz"), **values)


def rp(x):
    return lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10)


x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
texts = {
    "reduce_precision": jax.make_jaxpr(rp)(x),
    "grad_reduce_precision": jax.make_jaxpr(jax.grad(lambda x: rp(x).sum()))(x),
    "vmap_reduce_precision": jax.make_jaxpr(jax.vmap(rp, in_axes=1))(x),
    "jvp_reduce_precision": jax.make_jaxpr(lambda x, t: jax.jvp(rp, (x,), (t,)))(x, x),
}
for name, text in texts.items():
    with open(os.path.join(ROOT, name + ".txt"), "w") as f:
        f.write(f"{text}\n")
