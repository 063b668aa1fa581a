"""Records JAX's float32 results for spmd's vectorised unary math kernels.

Writes tests/goldens/unary_math.npz with, per op, "<op>|x" (float32 inputs: edge values, then
magnitudes spread log-uniformly over the op's domain, then uniform values) and "<op>|y" (JAX's
results). XLA:CPU flushes subnormals to zero, so inputs stay well above the smallest normal; the
test treats results both below the smallest normal as equal.
Run: python3 tools/goldens/gen_unary_math.py   (needs jax; the tests do not)
"""
import os

import jax
import jax.numpy as jnp
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "unary_math.npz")
rng = np.random.default_rng(20240611)
F32_MAX = float(np.finfo(np.float32).max)
TINY = float(np.finfo(np.float32).tiny)

# op -> (jax function, smallest magnitude, largest magnitude, signs, uniform range)
OPS = {
    "exp": (jnp.exp, 1e-8, 104.0, "both", (-10, 10)),
    "exp2": (jnp.exp2, 1e-8, 150.0, "both", (-10, 10)),
    "expm1": (jnp.expm1, 1e-8, 104.0, "both", (-2, 2)),
    "log": (jnp.log, 1e-37, F32_MAX, "pos", (0, 4)),
    "log1p": (jnp.log1p, 1e-30, F32_MAX, "log1p", (-0.99, 4)),
    "log2": (jnp.log2, 1e-37, F32_MAX, "pos", (0, 4)),
    "log10": (jnp.log10, 1e-37, F32_MAX, "pos", (0, 4)),
    "sin": (jnp.sin, 1e-30, 1e6, "both", (-10, 10)),
    "cos": (jnp.cos, 1e-30, 1e6, "both", (-10, 10)),
    "tan": (jnp.tan, 1e-30, 1e6, "both", (-10, 10)),
    "asin": (jnp.arcsin, 1e-30, 1.0, "both", (-1, 1)),
    "acos": (jnp.arccos, 1e-30, 1.0, "both", (-1, 1)),
    "atan": (jnp.arctan, 1e-30, F32_MAX, "both", (-4, 4)),
    "sinh": (jnp.sinh, 1e-30, 89.4, "both", (-5, 5)),
    "cosh": (jnp.cosh, 1e-30, 89.4, "both", (-5, 5)),
    "tanh": (jnp.tanh, 1e-30, 20.0, "both", (-3, 3)),
    "asinh": (jnp.arcsinh, 1e-30, F32_MAX, "both", (-4, 4)),
    "acosh": (jnp.arccosh, 1.0, F32_MAX, "pos", (1, 4)),
    "atanh": (jnp.arctanh, 1e-30, 1.0, "both", (-1, 1)),
    "logistic": (jax.nn.sigmoid, 1e-30, 88.0, "both", (-10, 10)),
    "erf": (jax.lax.erf, 1e-30, 6.0, "both", (-3, 3)),
    "erfc": (jax.lax.erfc, 1e-30, 10.0, "both", (-3, 3)),
    "erf_inv": (jax.lax.erf_inv, 1e-30, 1.0, "both", (-1, 1)),
    "sqrt": (jnp.sqrt, 1e-37, F32_MAX, "pos", (0, 4)),
    "rsqrt": (jax.lax.rsqrt, 1e-37, F32_MAX, "pos", (0, 4)),
    "cbrt": (jnp.cbrt, 1e-37, F32_MAX, "both", (-8, 8)),
}
# No inputs near the smallest normal: XLA:CPU flushes their subnormal intermediates to zero.
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30,
         F32_MAX, -F32_MAX, 1e-7, -1e-7, 88.7, -88.7, 89.5, -89.5, 0.99999994, -0.99999994,
         1.0000001, 3.14159265, -3.14159265, 1.5707964, 100.0, -100.0, 1e30, -1e30]
N_LOG = 1400
N_UNIFORM = 600


def inputs(lo, hi, signs, uniform):
    mags = np.exp(rng.uniform(np.log(lo), np.log(hi), N_LOG))
    if signs == "both":
        mags *= rng.choice([-1.0, 1.0], N_LOG)
    elif signs == "log1p":  # log1p's domain reaches down to -1
        neg = rng.random(N_LOG) < 0.3
        mags = np.where(neg, -np.exp(rng.uniform(np.log(1e-30), 0, N_LOG)), mags)
    x = np.concatenate([EDGES, mags, rng.uniform(*uniform, N_UNIFORM)]).astype(np.float32)
    return x


def main():
    out = {}
    for name, (fn, lo, hi, signs, uniform) in OPS.items():
        x = inputs(lo, hi, signs, uniform)
        if name == "erf_inv":  # erf_inv must match bit for bit: sample its domain densely
            near_one = 1 - np.exp(rng.uniform(np.log(6e-8), 0, 2000))
            x = np.concatenate([x, rng.uniform(-1, 1, 4000), near_one]).astype(np.float32)
        y = np.asarray(jax.jit(fn)(x))
        assert y.dtype == np.float32, (name, y.dtype)
        out[f"{name}|x"] = x
        out[f"{name}|y"] = y
    np.savez(OUT, **out)
    count = sum(v.size for k, v in out.items() if k.endswith("|x"))
    print(f"wrote {OUT}: {len(OPS)} ops, {count} inputs")


if __name__ == "__main__":
    main()
