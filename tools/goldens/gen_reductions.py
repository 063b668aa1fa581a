"""Records jax.numpy / jax.lax reductions and scans for spmd's tests.

Writes tests/goldens/reductions.npz (x64 off) and tests/goldens/reductions_x64.npz (x64 on).
Inputs are stored once as "in|<name>" ("in|<name>|y" for a second operand); every case is one
array "op|dtype|axes|keepdims|extra|<input name>" holding JAX's result, where
  axes     "all" (axis=None), "e" (an empty lax axes tuple) or comma-separated ints;
  keepdims 0/1; extra: ddof for var/std, reverse for lax scans, equal_nan for comparisons,
           the index dtype for lax.argmax/argmin.
bfloat16/float16 scans and lax.reduce_sum/prod use integer-valued inputs ("ints"): XLA
accumulates those in the 16-bit type, rounding at every step, while spmd accumulates in float32;
with integer values both are exact.
Run: python3 tools/goldens/gen_reductions.py   (needs jax; the tests do not)
"""
import os
import subprocess
import sys

X64 = len(sys.argv) > 1 and sys.argv[1] == "--x64"
import jax  # noqa: E402

jax.config.update("jax_enable_x64", X64)
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens")
rng = np.random.default_rng(2024)

FLOATS = ["float64"] if X64 else ["float32", "float16", "bfloat16"]
INTS = ["int64", "uint64", "int32", "uint8"] if X64 else ["int8", "uint8", "int32", "uint32"]
ALL = INTS + FLOATS + ([] if X64 else ["bool"])
HALF = ("float16", "bfloat16")

# (shape, axes, keepdims) layouts every reduction is recorded for.
LAYOUTS = [((), None, 0), ((7,), None, 0), ((7,), -1, 1), ((3, 5), 0, 1), ((3, 5), -1, 0),
           ((2, 3, 4), (0, 2), 1), ((2, 3, 4), (1,), 0), ((2, 3, 4), (-1, 0), 0),
           ((4, 1, 6), (0, 1), 0), ((2, 0, 3), 1, 0), ((2, 0, 3), 0, 1), ((5, 70), -1, 0),
           ((70, 5), 0, 0)]


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def is_float(dt):
    return dt in ("float64", "float32", "float16", "bfloat16")


def make_values(dt, shape, kind):
    n = int(np.prod(shape))
    if dt == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if not is_float(dt):
        info = np.iinfo(dt)
        lo, hi = (-2, 3) if kind == "unit" else (-20, 20)
        return rng.integers(max(info.min, lo), min(info.max, hi), n, endpoint=True).astype(
            dt).reshape(shape)
    if kind == "ints":
        v = rng.integers(-3, 4, n).astype(np.float64)
    elif kind == "pow2":
        v = rng.choice([-2.0, -1.0, 1.0, 2.0], n)
    elif kind == "unit":
        v = rng.uniform(0.5, 1.5, n) * rng.choice([-1.0, 1.0], n)
    else:
        v = rng.normal(0, 2, n)
    if kind == "edge":
        idx = rng.choice(n, 4, replace=False)
        v[idx] = [np.nan, np.inf, -np.inf, -0.0]
    return v.astype(npdt(dt)).reshape(shape)


arrays = {}
inputs = {}


def input_array(dt, shape, kind="normal", y=None):
    """Name of a stored input (created on first use)."""
    name = f"{dt}:{'x'.join(map(str, shape)) or 'scalar'}:{kind}"
    if name not in inputs:
        x = make_values(dt, shape, kind)
        inputs[name] = x
        arrays[f"in|{name}"] = x
        if y is not None:
            arrays[f"in|{name}|y"] = y(x)
    return name


def axes_str(axes):
    if axes is None:
        return "all"
    if isinstance(axes, (tuple, list)):
        return ",".join(str(i) for i in axes) if axes else "e"
    return str(axes)


def record(op, dt, axes, name, out, keep=0, extra=0):
    arrays[f"{op}|{dt}|{axes_str(axes)}|{int(keep)}|{extra}|{name}"] = np.asarray(out)


def jnp_reductions():
    fns = {"sum": jnp.sum, "prod": jnp.prod, "max": jnp.max, "min": jnp.min, "mean": jnp.mean,
           "var": jnp.var, "std": jnp.std, "all": jnp.all, "any": jnp.any,
           "logsumexp": jax.nn.logsumexp}
    for dt in ALL:
        for shape, axes, keep in LAYOUTS:
            name = input_array(dt, shape, "unit")
            x = jnp.asarray(inputs[name])
            for op, fn in fns.items():
                if op == "logsumexp" and dt == "bool":
                    continue
                try:
                    record(op, dt, axes, name, fn(x, axis=axes, keepdims=bool(keep)), keep)
                except ValueError:
                    pass  # zero-size max/min: the C++ tests check the error
        if is_float(dt):  # nan, inf and -0.0 mixed in
            for shape, axes in [((40,), None), ((6, 7), 0), ((6, 7), -1)]:
                name = input_array(dt, shape, "edge")
                for op, fn in fns.items():
                    record(op, dt, axes, name, fn(jnp.asarray(inputs[name]), axis=axes))
    for dt in (["float32", "int32", "bfloat16"] if not X64 else ["float64", "int64"]):
        name = input_array(dt, (3, 4), "normal")
        for op in ("var", "std"):
            for ddof in (1, 3, 5):
                for axes in (None, 1):
                    out = getattr(jnp, op)(jnp.asarray(inputs[name]), axis=axes, ddof=ddof)
                    record(op, dt, axes, name, out, 0, ddof)
    if not X64:
        for v in ([-0.0, 0.0], [0.0, -0.0], [np.nan, 1.0], [1.0, np.nan]):
            name = "float32:signed_zero_and_nan:" + "_".join(map(str, v))
            inputs[name] = np.array(v, np.float32)
            arrays[f"in|{name}"] = inputs[name]
            for op, fn in (("max", jnp.max), ("min", jnp.min)):
                record(op, "float32", None, name, fn(jnp.asarray(inputs[name])))


def arg_reductions():
    layouts = [((7,), None, 0), ((3, 5), 0, 1), ((3, 5), -1, 0), ((2, 3, 4), 1, 0),
               ((2, 3, 4), None, 1), ((5, 70), -1, 0), ((70, 5), 0, 0), ((4, 1, 6), 1, 0)]
    for dt in ALL:
        for shape, axes, keep in layouts:
            name = input_array(dt, shape, "normal")
            x = jnp.asarray(inputs[name])
            record("argmax", dt, axes, name, jnp.argmax(x, axis=axes, keepdims=bool(keep)), keep)
            record("argmin", dt, axes, name, jnp.argmin(x, axis=axes, keepdims=bool(keep)), keep)
        specials = {"ties": np.array([[1, 3, 3, 0], [2, 2, 1, 2]])}
        if is_float(dt):
            specials["nan"] = np.array([1, np.nan, 3, np.nan, -np.inf])
            specials["zeros"] = np.array([-0.0, 0.0, 0.0, -0.0])
            name = input_array(dt, (6, 7), "edge")
            for axes in (None, 0, 1):
                x = jnp.asarray(inputs[name])
                record("argmax", dt, axes, name, jnp.argmax(x, axis=axes))
                record("argmin", dt, axes, name, jnp.argmin(x, axis=axes))
        for tag, v in specials.items():
            name = f"{dt}:{tag}"
            inputs[name] = v.astype(npdt(dt))
            arrays[f"in|{name}"] = inputs[name]
            x = jnp.asarray(inputs[name])
            for axes in ([None] if x.ndim == 1 else [0, 1]):
                record("argmax", dt, axes, name, jnp.argmax(x, axis=axes))
                record("argmin", dt, axes, name, jnp.argmin(x, axis=axes))


def cumulative():
    for dt in ALL:
        for shape, axes in [((), None), ((9,), None), ((3, 5), 0), ((2, 3, 4), None),
                            ((2, 3, 4), -1), ((2, 0, 3), 1)]:
            for op, fn in (("cumsum", jnp.cumsum), ("cumprod", jnp.cumprod)):
                kind = ("pow2" if op == "cumprod" else "ints") if dt in HALF else "unit"
                name = input_array(dt, shape, kind)
                record(op, dt, axes, name, fn(jnp.asarray(inputs[name]), axis=axes))
    scans = {"lax.cumsum": lax.cumsum, "lax.cumprod": lax.cumprod, "lax.cummax": lax.cummax,
             "lax.cummin": lax.cummin, "lax.cumlogsumexp": lax.cumlogsumexp}
    for op, fn in scans.items():
        for dt in ALL:
            if dt == "bool" or (op == "lax.cumlogsumexp" and not is_float(dt)):
                continue
            exact = dt in HALF and op in ("lax.cumsum", "lax.cumprod")
            kind = ("pow2" if op == "lax.cumprod" else "ints") if exact else "unit"
            for shape, axis, reverse in [((9,), 0, 0), ((9,), 0, 1), ((3, 5), 0, 1),
                                         ((2, 3, 4), 1, 0), ((2, 3, 4), 2, 1)]:
                name = input_array(dt, shape, kind)
                out = fn(jnp.asarray(inputs[name]), axis, reverse=bool(reverse))
                record(op, dt, axis, name, out, 0, reverse)
            if is_float(dt) and not exact:
                name = input_array(dt, (40,), "edge")
                record(op, dt, 0, name, fn(jnp.asarray(inputs[name]), 0))
    if not X64:
        name = "float32:scan_zeros_nan"
        inputs[name] = np.array([-0.0, 0.0, -0.0, np.nan, 1.0], np.float32)
        arrays[f"in|{name}"] = inputs[name]
        for op in ("lax.cummax", "lax.cummin"):
            record(op, "float32", 0, name, scans[op](jnp.asarray(inputs[name]), 0))


def lax_reductions():
    fns = {"lax.reduce_sum": lax.reduce_sum, "lax.reduce_prod": lax.reduce_prod,
           "lax.reduce_max": lax.reduce_max, "lax.reduce_min": lax.reduce_min,
           "lax.reduce_and": lax.reduce_and, "lax.reduce_or": lax.reduce_or,
           "lax.reduce_xor": lax.reduce_xor}
    for op, fn in fns.items():
        arith = op in ("lax.reduce_sum", "lax.reduce_prod")
        for dt in ALL:
            if (op in ("lax.reduce_and", "lax.reduce_or", "lax.reduce_xor") and is_float(dt)) or (
                    dt == "bool" and arith):
                continue
            kind = ("pow2" if "prod" in op else "ints") if dt in HALF and arith else "unit"
            for shape, axes in [((6,), (0,)), ((3, 5), (1,)), ((2, 3, 4), (2, 0)),
                                ((2, 3, 4), ()), ((2, 0, 3), (1,)), ((0,), (0,))]:
                name = input_array(dt, shape, kind)
                record(op, dt, axes, name, fn(jnp.asarray(inputs[name]), axes))
    for dt in ["int32", "float32"] if not X64 else ["int64", "float64"]:
        name = input_array(dt, (3, 5), "normal")
        for index_dtype in ["int32", "uint8"]:
            for axis in (0, 1):
                x = jnp.asarray(inputs[name])
                record("lax.argmax", dt, axis, name, lax.argmax(x, axis, np.dtype(index_dtype)),
                       0, index_dtype)
                record("lax.argmin", dt, axis, name, lax.argmin(x, axis, np.dtype(index_dtype)),
                       0, index_dtype)


def perturbed(x):
    if x.dtype == bool:
        y = x.copy()
        y.flat[0] = not y.flat[0]
        return y
    if not is_float(str(x.dtype)):
        y = x.copy()
        y.flat[2] += 1
        return y
    scale = 1 + rng.choice([0, 1e-7, 1e-3, -1e-6, 2e-5], x.shape)
    y = (x.astype(np.float64) * scale).astype(x.dtype)
    y.flat[0] = np.nan
    y.flat[1] = np.inf
    y.flat[2] = x.flat[2] + np.asarray(1e-9, x.dtype)
    return y


def comparisons():
    for dt in (["float32", "bfloat16", "int32", "bool"] if not X64 else ["float64", "int64"]):
        name = input_array(dt, (4, 6), "edge" if is_float(dt) else "normal", y=perturbed)
        if is_float(dt):
            arrays[f"in|{name}"].flat[0] = np.nan
        x, y = arrays[f"in|{name}"], arrays[f"in|{name}|y"]
        for equal_nan in (0, 1):
            en = bool(equal_nan)
            record("isclose", dt, None, name, jnp.isclose(x, y, equal_nan=en), 0, equal_nan)
            record("allclose", dt, None, name, jnp.allclose(x, y, equal_nan=en), 0, equal_nan)
            record("array_equal", dt, None, name, jnp.array_equal(x, y, equal_nan=en), 0,
                   equal_nan)
        row = name + ":row"
        arrays[f"in|{row}"] = x
        arrays[f"in|{row}|y"] = y[:1]
        record("isclose", dt, None, row, jnp.isclose(x, y[:1]))


def main():
    jnp_reductions()
    arg_reductions()
    cumulative()
    lax_reductions()
    comparisons()
    name = "reductions_x64.npz" if X64 else "reductions.npz"
    np.savez_compressed(os.path.join(OUT, name), **arrays)
    print(f"{name}: {len(arrays)} arrays")
    if not X64:
        subprocess.run([sys.executable, __file__, "--x64"], check=True)


if __name__ == "__main__":
    main()
