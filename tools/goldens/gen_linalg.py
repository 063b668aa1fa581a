"""Records lax.dot_general and jnp's contractions (dot, matmul, vdot, inner, outer, tensordot)
for spmd's tests.

Writes tests/goldens/linalg.npz (x64 off) and tests/goldens/linalg_x64.npz (x64 on). Each case
"op|name" has inputs "op|name|x", "op|name|y" and the result "op|name|out"; dot_general cases
add "op|name|dims" (int32: counts and entries of lhs_contracting, rhs_contracting, lhs_batch,
rhs_batch, each list prefixed by its length) and, when set, "op|name|pref" (a 0-d array whose
dtype is preferred_element_type).
Run: python3 tools/goldens/gen_linalg.py && python3 tools/goldens/gen_linalg.py --x64
(needs jax; the tests do not)
"""
import os
import sys

X64 = len(sys.argv) > 1 and sys.argv[1] == "--x64"
import jax  # noqa: E402

jax.config.update("jax_enable_x64", X64)
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens")
rng = np.random.default_rng(20240611)
out = {}


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def values(dt, shape):
    """Random operands: floats in [-2, 2), integers over (most of) their range, random bools."""
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(npdt(dt), np.integer):
        info = np.iinfo(dt)
        lo, hi = max(info.min, -(1 << 40)), min(info.max, 1 << 40)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dt)
    return rng.uniform(-2.0, 2.0, shape).astype(npdt(dt))


def small_ints(x):
    """Integers that convert to any float type exactly (products must not depend on rounding)."""
    if np.issubdtype(x.dtype, np.integer) and x.dtype.itemsize >= 4:
        return (x % 100).astype(x.dtype)
    return x


def record(op, name, x, y, result, dims=None, pref=None):
    key = f"{op}|{name}"
    assert key + "|out" not in out, key
    out[key + "|x"] = np.asarray(x)
    out[key + "|y"] = np.asarray(y)
    out[key + "|out"] = np.asarray(result)
    if dims is not None:
        (lc, rc), (lb, rb) = dims
        flat = []
        for part in (lc, rc, lb, rb):
            flat += [len(part), *part]
        out[key + "|dims"] = np.asarray(flat, np.int32)
    if pref is not None:
        out[key + "|pref"] = np.zeros((), npdt(pref))


# (name, lhs shape, rhs shape, ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)))
LAYOUTS = [
    ("mm", (4, 5), (5, 3), (((1,), (0,)), ((), ()))),
    ("lhs_contract_first", (5, 4), (5, 3), (((0,), (0,)), ((), ()))),
    ("rhs_contract_last", (4, 5), (3, 5), (((1,), (1,)), ((), ()))),
    ("both_transposed", (5, 4), (3, 5), (((0,), (1,)), ((), ()))),
    ("batch", (2, 4, 5), (2, 5, 3), (((2,), (1,)), ((0,), (0,)))),
    ("batch_not_leading", (4, 2, 5), (5, 3, 2), (((2,), (0,)), ((1,), (2,)))),
    ("multi_contract", (3, 4, 5), (5, 4, 2), (((1, 2), (1, 0)), ((), ()))),
    ("multi_contract_swapped", (3, 4, 5), (4, 5, 2), (((2, 1), (1, 0)), ((), ()))),
    ("multi_batch", (2, 3, 4, 5), (3, 2, 5, 6), (((3,), (2,)), ((0, 1), (1, 0)))),
    ("no_contract", (3,), (4,), (((), ()), ((), ()))),
    ("vector_vector", (7,), (7,), (((0,), (0,)), ((), ()))),
    ("matrix_vector", (3, 7), (7,), (((1,), (0,)), ((), ()))),
    ("batch_only", (3, 4), (3, 4), (((), ()), ((0, 1), (0, 1)))),
    ("size_one_dims", (1, 4, 1, 5), (5, 1, 3), (((3,), (0,)), ((), ()))),
    ("k_zero", (3, 0), (0, 4), (((1,), (0,)), ((), ()))),
    ("m_zero", (0, 3), (3, 4), (((1,), (0,)), ((), ()))),
    ("batch_zero", (0, 2, 3), (0, 3, 4), (((2,), (1,)), ((0,), (0,)))),
    # Large enough for the library kernels (oneDNN / OpenBLAS) rather than the small loops.
    ("large", (24, 48), (48, 20), (((1,), (0,)), ((), ()))),
    ("large_transposed", (48, 24), (20, 48), (((0,), (1,)), ((), ()))),
    ("large_batch", (3, 20, 40), (40, 3, 24), (((2,), (0,)), ((0,), (1,)))),
]


def dot_general_cases(dtypes):
    for dt in dtypes:
        for name, ls, rs, dims in LAYOUTS:
            x, y = values(dt, ls), values(dt, rs)
            r = lax.dot_general(jnp.asarray(x), jnp.asarray(y), dims)
            record("dot_general", f"{dt}|{name}", x, y, r, dims)


# (name, lhs dtype, rhs dtype, preferred_element_type or None)
MIXED = [
    ("int8_to_int32", "int8", "int8", "int32"),
    ("uint8_to_uint32", "uint8", "uint8", "uint32"),
    ("bool_to_int32", "bool", "bool", "int32"),
    ("bfloat16_to_float32", "bfloat16", "bfloat16", "float32"),
    ("float16_to_float32", "float16", "float16", "float32"),
    ("float32_to_bfloat16", "float32", "float32", "bfloat16"),
    ("int32_to_float32", "int32", "int32", "float32"),
    ("int8_uint8", "int8", "uint8", None),
    ("uint8_int8_to_int16", "uint8", "int8", "int16"),
    ("float16_bfloat16", "float16", "bfloat16", None),
    ("int32_float16", "int32", "float16", None),
    ("bool_int8", "bool", "int8", None),
    ("float32_float16_to_float16", "float32", "float16", "float16"),
]

MIXED_X64 = [
    ("float32_to_float64", "float32", "float32", "float64"),
    ("int32_to_int64", "int32", "int32", "int64"),
    ("int64_float64", "int64", "float64", None),
]


def mixed_cases(table):
    for name, lt, rt, pref in table:
        for shape_name, ls, rs, dims in (LAYOUTS[0], LAYOUTS[4], LAYOUTS[17]):
            x, y = small_ints(values(lt, ls)), small_ints(values(rt, rs))
            r = lax.dot_general(jnp.asarray(x), jnp.asarray(y), dims,
                                preferred_element_type=pref)
            record("dot_general", f"{name}|{shape_name}", x, y, r, dims, pref)


def jnp_cases(dt):
    def rec(op, name, f, xs, ys):
        x, y = values(dt, xs), values(dt, ys)
        record(op, f"{dt}|{name}", x, y, f(jnp.asarray(x), jnp.asarray(y)))

    for name, xs, ys in [("2d_2d", (3, 4), (4, 5)), ("1d_2d", (4,), (4, 5)),
                         ("2d_1d", (3, 4), (4,)), ("1d_1d", (4,), (4,)),
                         ("3d_2d", (2, 3, 4), (4, 5)), ("1d_3d", (4,), (2, 4, 5)),
                         ("3d_1d", (2, 3, 4), (4,)), ("batch", (2, 3, 4), (2, 4, 5)),
                         ("broadcast_one", (2, 1, 3, 4), (5, 4, 6)),
                         ("broadcast_both_one", (1, 3, 4), (1, 4, 2)),
                         ("broadcast_rhs_one", (3, 2, 4), (1, 4, 5)),
                         ("k_zero", (2, 3, 0), (0, 4))]:
        rec("matmul", name, jnp.matmul, xs, ys)
    for name, xs, ys in [("0d_2d", (), (3, 4)), ("2d_0d", (2, 3), ()), ("1d_1d", (3,), (3,)),
                         ("2d_1d", (2, 3), (3,)), ("1d_2d", (3,), (3, 4)),
                         ("2d_2d", (2, 3), (3, 4)), ("3d_1d", (2, 3, 4), (4,)),
                         ("3d_3d", (2, 3, 4), (5, 4, 6))]:
        rec("dot", name, jnp.dot, xs, ys)
    rec("vdot", "2d_2d", jnp.vdot, (2, 3), (3, 2))
    for name, xs, ys in [("2d_2d", (2, 3), (4, 3)), ("1d_1d", (3,), (3,)),
                         ("3d_1d", (2, 4, 3), (3,)), ("0d_2d", (), (2, 3))]:
        rec("inner", name, jnp.inner, xs, ys)
    for name, xs, ys in [("1d_1d", (3,), (4,)), ("2d_1d", (2, 3), (4,))]:
        rec("outer", name, jnp.outer, xs, ys)
    for axes, xs, ys in [(0, (2, 3), (4,)), (1, (2, 3), (3, 4)), (2, (2, 3, 4), (3, 4, 5)),
                         (3, (2, 3, 4), (2, 3, 4))]:
        rec("tensordot", f"axes{axes}", lambda a, b, n=axes: jnp.tensordot(a, b, n), xs, ys)


def mixed_jnp_cases():
    for op, f in [("matmul", jnp.matmul), ("dot", jnp.dot), ("inner", jnp.inner),
                  ("outer", jnp.outer), ("tensordot", lambda a, b: jnp.tensordot(a, b, 1))]:
        for lt, rt in [("int8", "int32"), ("int8", "uint8"), ("bool", "int16"),
                       ("float16", "float32"), ("int32", "bfloat16")]:
            x = small_ints(values(lt, (2, 3)))
            y = small_ints(values(rt, (3, 4) if op != "inner" else (4, 3)))
            record(op, f"{lt}_{rt}|mixed", x, y, f(jnp.asarray(x), jnp.asarray(y)))


def main():
    if X64:
        dot_general_cases(["float64", "int64", "uint64"])
        mixed_cases(MIXED_X64)
        for dt in ["float64", "int64"]:
            jnp_cases(dt)
    else:
        dot_general_cases(["float32", "bfloat16", "float16", "int32", "int8", "uint8", "bool",
                           "int16", "uint32"])
        mixed_cases(MIXED)
        for dt in ["float32", "bfloat16", "float16", "int32", "int8", "bool"]:
            jnp_cases(dt)
        mixed_jnp_cases()
    name = "linalg_x64.npz" if X64 else "linalg.npz"
    np.savez_compressed(os.path.join(OUT, name), **out)
    print(f"wrote {len(out)} arrays to {name}")


main()
