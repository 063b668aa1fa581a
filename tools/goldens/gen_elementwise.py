"""Records jax.numpy elementwise results and type promotion for spmd's tests.

Writes tests/goldens/elementwise.npz (x64 off: every dtype up to 32 bits),
tests/goldens/elementwise_x64.npz (x64 on: int64, uint64, float64) and
tests/goldens/promotion.txt. Keys are "op|dtype|case|x", "…|y", "…|z" and "…|out".
Run: python3 tools/goldens/gen_elementwise.py   (needs jax; the tests do not)
"""
import os
import sys

X64 = len(sys.argv) > 1 and sys.argv[1] == "--x64"
import jax  # noqa: E402

jax.config.update("jax_enable_x64", X64)
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens")
rng = np.random.default_rng(1234)

FLOATS = ["float64"] if X64 else ["float32", "float16", "bfloat16"]
SINTS = ["int64"] if X64 else ["int8", "int16", "int32"]
UINTS = ["uint64"] if X64 else ["uint8", "uint16", "uint32"]


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def float_values(dt, lo=-4.0, hi=4.0, n=48):
    v = rng.uniform(lo, hi, n)
    edge = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e-3, 2.5, -2.5, 3.5]
    return np.concatenate([v, edge]).astype(npdt(dt))


def int_values(dt, n=48):
    info = np.iinfo(dt)
    lo, hi = max(info.min, -100), min(info.max, 100)
    v = rng.integers(lo, hi, n, endpoint=True)
    edge = [0, 1, 2, 3, 7, info.max, info.min] + ([-1, -2, -7] if info.min < 0 else [])
    return np.concatenate([v, edge]).astype(dt)


def values(dt, domain=None):
    if dt == "bool":
        return rng.integers(0, 2, 48).astype(bool)
    if dt in FLOATS:
        lo, hi = domain or (-4.0, 4.0)
        return float_values(dt, lo, hi)
    return int_values(dt)


UNARY_FLOAT = {
    "negative": (jnp.negative, None), "positive": (jnp.positive, None), "abs": (jnp.abs, None),
    "sign": (jnp.sign, None), "floor": (jnp.floor, None), "ceil": (jnp.ceil, None),
    "round": (jnp.round, None), "trunc": (jnp.trunc, None), "sqrt": (jnp.sqrt, (0, 10)),
    "rsqrt": (jax.lax.rsqrt, (0, 10)), "cbrt": (jnp.cbrt, None), "exp": (jnp.exp, None),
    "exp2": (jnp.exp2, None), "expm1": (jnp.expm1, None), "log": (jnp.log, (0, 10)),
    "log1p": (jnp.log1p, (-1, 10)), "log2": (jnp.log2, (0, 10)), "log10": (jnp.log10, (0, 10)),
    "sin": (jnp.sin, None), "cos": (jnp.cos, None), "tan": (jnp.tan, (-1.5, 1.5)),
    "arcsin": (jnp.arcsin, (-1, 1)), "arccos": (jnp.arccos, (-1, 1)),
    "arctan": (jnp.arctan, None), "sinh": (jnp.sinh, None), "cosh": (jnp.cosh, None),
    "tanh": (jnp.tanh, None), "arcsinh": (jnp.arcsinh, None), "arccosh": (jnp.arccosh, (1, 10)),
    "arctanh": (jnp.arctanh, (-1, 1)), "square": (jnp.square, None),
    "reciprocal": (jnp.reciprocal, None), "isnan": (jnp.isnan, None),
    "isinf": (jnp.isinf, None), "isfinite": (jnp.isfinite, None),
    "signbit": (jnp.signbit, None), "logical_not": (jnp.logical_not, None),
    "sigmoid": (jax.nn.sigmoid, None), "erf": (jax.scipy.special.erf, None),
    "erfc": (jax.scipy.special.erfc, None), "erf_inv": (jax.scipy.special.erfinv, (-1, 1)),
    "relu": (jax.nn.relu, None),
}
UNARY_INT = {
    "negative": jnp.negative, "abs": jnp.abs, "sign": jnp.sign, "square": jnp.square,
    "bitwise_not": jnp.bitwise_not, "logical_not": jnp.logical_not, "isnan": jnp.isnan,
    "isfinite": jnp.isfinite, "signbit": jnp.signbit, "floor": jnp.floor, "round": jnp.round,
    "sqrt": jnp.sqrt, "exp": jnp.exp, "sin": jnp.sin,
}
BINARY_NUMERIC = {
    "add": jnp.add, "subtract": jnp.subtract, "multiply": jnp.multiply, "divide": jnp.divide,
    "floor_divide": jnp.floor_divide, "remainder": jnp.remainder, "fmod": jnp.fmod,
    "maximum": jnp.maximum, "minimum": jnp.minimum, "equal": jnp.equal,
    "not_equal": jnp.not_equal, "less": jnp.less, "less_equal": jnp.less_equal,
    "greater": jnp.greater, "greater_equal": jnp.greater_equal,
    "logical_and": jnp.logical_and, "logical_or": jnp.logical_or,
    "logical_xor": jnp.logical_xor,
}
BINARY_FLOAT = {"power": jnp.power, "arctan2": jnp.arctan2, "hypot": jnp.hypot,
                "logaddexp": jnp.logaddexp, "nextafter": jnp.nextafter}
BINARY_INT = {"bitwise_and": jnp.bitwise_and, "bitwise_or": jnp.bitwise_or,
              "bitwise_xor": jnp.bitwise_xor, "left_shift": jnp.left_shift,
              "right_shift": jnp.right_shift, "power": jnp.power}
BINARY_BOOL = {"add": jnp.add, "multiply": jnp.multiply, "equal": jnp.equal,
               "logical_and": jnp.logical_and, "logical_xor": jnp.logical_xor,
               "bitwise_and": jnp.bitwise_and, "bitwise_or": jnp.bitwise_or,
               "bitwise_xor": jnp.bitwise_xor, "maximum": jnp.maximum}

out = {}


def record(op, dt, case, args, result):
    key = f"{op}|{dt}|{case}"
    for name, a in zip("xyz", args):
        out[f"{key}|{name}"] = np.asarray(a)
    out[f"{key}|out"] = np.asarray(result)


def record_division_by_zero():
    """Divisors of zero (and, for floats, -0 and infinities): jnp defines remainder and fmod of
    integers by 0 as 0 and floor_divide of floats by 0 as +-inf, beyond what the primitives do."""
    for dt in FLOATS + SINTS + UINTS:
        x = values(dt)[:12]
        if dt in FLOATS:
            y = np.array([0.0, -0.0, np.inf, -np.inf] * 3, dtype=npdt(dt))
        else:
            y = np.zeros(12, dtype=npdt(dt))
        for op in ("floor_divide", "remainder", "fmod"):
            f = BINARY_NUMERIC.get(op) or BINARY_FLOAT.get(op) or BINARY_INT.get(op)
            record(op, dt, "zero", [x, y], f(jnp.asarray(x), jnp.asarray(y)))


def record_power_edges():
    """jnp.power beyond small exponents: integer exponents anywhere in their dtype's range
    (binary exponentiation reads only their low 6 bits, so negative ones give what those bits
    give), zero bases, bools (computed as int32), and a floating base with an int32 exponent
    array (the pow primitive without promotion)."""
    for dt in SINTS + UINTS:
        x = (values(dt).astype(np.int64) % 7 - (3 if np.iinfo(dt).min < 0 else 0)).astype(dt)
        y = values(dt)
        record("power", dt, "wide", [x, y], jnp.power(jnp.asarray(x), jnp.asarray(y)))
    x, y = values("bool"), values("bool")
    record("power", "bool", "flat", [x, y], jnp.power(jnp.asarray(x), jnp.asarray(y)))
    for dt in FLOATS:
        x = values(dt)
        y = np.resize(np.array([0, 1, 2, 3, -1, -2, 7, -7, 31], np.int32), x.shape)
        record("power", dt, "int_exponent", [x, y], jnp.power(jnp.asarray(x), jnp.asarray(y)))


def main():
    for dt in FLOATS:
        for op, (f, dom) in UNARY_FLOAT.items():
            x = values(dt, dom)
            record(op, dt, "flat", [x], f(jnp.asarray(x)))
        for op, f in {**BINARY_NUMERIC, **BINARY_FLOAT}.items():
            x, y = values(dt), values(dt)
            if op == "power":
                x = np.abs(x)
            record(op, dt, "flat", [x, y], f(jnp.asarray(x), jnp.asarray(y)))
            a = values(dt)[:3].reshape(3, 1)
            b = values(dt)[:4].reshape(1, 4)
            record(op, dt, "bcast", [a, b], f(jnp.asarray(a), jnp.asarray(b)))
        x = values(dt)
        record("where", dt, "flat", [x > 0, x, -x], jnp.where(x > 0, x, -x))
        record("clip", dt, "flat", [x, np.asarray(-1, x.dtype), np.asarray(2, x.dtype)],
               jnp.clip(jnp.asarray(x), -1, 2))
    for dt in SINTS + UINTS:
        for op, f in UNARY_INT.items():
            x = values(dt)
            record(op, dt, "flat", [x], f(jnp.asarray(x)))
        for op, f in {**BINARY_NUMERIC, **BINARY_INT}.items():
            x, y = values(dt), values(dt)
            if op in ("divide", "floor_divide", "remainder", "fmod"):
                y = np.where(y == 0, 3, y).astype(y.dtype)  # XLA leaves x/0 unspecified
            if op in ("left_shift", "right_shift"):
                y = (np.abs(y.astype(np.int64)) % (8 * x.itemsize)).astype(y.dtype)
            if op == "power":
                x = (x.astype(np.int64) % 5).astype(x.dtype)
                y = (np.abs(y.astype(np.int64)) % 6).astype(y.dtype)
            record(op, dt, "flat", [x, y], f(jnp.asarray(x), jnp.asarray(y)))
    for op, f in BINARY_BOOL.items():
        x, y = values("bool"), values("bool")
        record(op, "bool", "flat", [x, y], f(jnp.asarray(x), jnp.asarray(y)))
    for op in ("logical_not", "bitwise_not", "abs"):
        x = values("bool")
        f = UNARY_INT.get(op, jnp.abs if op == "abs" else jnp.sign)
        record(op, "bool", "flat", [x], f(jnp.asarray(x)))
    record_division_by_zero()
    record_power_edges()
    name = "elementwise_x64.npz" if X64 else "elementwise.npz"
    np.savez(os.path.join(OUT, name), **out)
    print(f"wrote {len(out)} arrays to {name}")
    if not X64:
        write_promotion()


def write_promotion():
    names = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "bfloat16",
             "float16", "float32"]
    scalars = {"int": 1, "float": 1.0}
    lines = []
    for a in names:
        for b in names:
            r = jnp.zeros((), npdt(a)) + jnp.zeros((), npdt(b))
            lines.append(f"{a} {b} {r.dtype} {int(r.weak_type)}")
        for s, v in scalars.items():
            r = jnp.zeros((), npdt(a)) + v
            lines.append(f"{a} weak_{s} {r.dtype} {int(r.weak_type)}")
    for s, v in scalars.items():
        for t, w in scalars.items():
            r = jnp.asarray(v) + w
            lines.append(f"weak_{s} weak_{t} {r.dtype} {int(r.weak_type)}")
    with open(os.path.join(OUT, "promotion.txt"), "w") as f:
        f.write("# lhs rhs result_dtype result_weak (jnp: lhs + rhs)\n" + "\n".join(lines) + "\n")


main()
