"""Records NumPy's str() and JAX's repr() of many arrays for spmd's text formatting tests: every
dtype, 0-d to 4-d, empty, summarised (> 1000 elements), scientific notation, nan/inf, -0.,
wrapped rows and the 16-bit float types.

Writes tests/goldens/format/cases.txt, one block per case:
    case <name>
    dtype <numpy dtype name>
    shape <dims...>            (nothing after "shape" for 0-d)
    weak <0|1>
    data <hex>                 raw little-endian elements, row-major
  or, for large arrays, only the elements NumPy shows (the rest may hold anything):
    shown <count>
    offsets <flat element offsets...>
    data <hex of those elements in the same order>
    str <line count>
    <lines>
    repr <line count>
    <lines>
    end
Run: python3 tools/goldens/gen_format.py   (needs jax; the tests do not)
"""
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax._src.lax import lax as lax_internal

jax.config.update("jax_enable_x64", True)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "format", "cases.txt")
rng = np.random.default_rng(11)
bf16 = ml_dtypes.bfloat16
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["bfloat16", "float16", "float32", "float64"]
EDGE = 3


def npdt(name):
    return np.dtype(bf16) if name == "bfloat16" else np.dtype(name)


def shown_offsets(shape):
    """Flat offsets of the elements NumPy prints for a summarised array, in printing order."""
    axes = [list(range(EDGE)) + list(range(d - EDGE, d)) if d > 2 * EDGE else list(range(d))
            for d in shape]
    idx = np.ix_(*axes) if axes else ()
    flat = np.arange(int(np.prod(shape))).reshape(shape)
    return flat[idx].ravel()


def jax_repr(x, weak):
    a = jnp.asarray(x)
    if weak:
        a = lax_internal._convert_element_type(a, a.dtype, weak_type=True)
    return repr(a)


cases = []


def add(name, x, weak=False):
    x = np.asarray(x)
    cases.append((name, x, weak, str(x), jax_repr(x, weak)))


def block(name, x, weak, s, r):
    lines = [f"case {name}", f"dtype {x.dtype.name}",
             "shape" + "".join(f" {d}" for d in x.shape), f"weak {int(weak)}"]
    flat = np.ascontiguousarray(x).reshape(-1)
    if x.size > 1000:
        offs = shown_offsets(x.shape)
        lines += [f"shown {len(offs)}", "offsets " + " ".join(map(str, offs)),
                  "data " + flat[offs].tobytes().hex()]
    else:
        lines.append("data " + flat.tobytes().hex())
    for key, text in (("str", s), ("repr", r)):
        parts = text.split("\n")
        lines += [f"{key} {len(parts)}"] + parts
    lines.append("end")
    return "\n".join(lines) + "\n"


# Every dtype: scalars, small arrays of each rank, empty arrays.
for dt in ["bool"] + INTS + FLOATS:
    t = npdt(dt)
    base = np.arange(24) % 2 == 1 if dt == "bool" else np.arange(24).astype(t)
    add(f"{dt}_0d", base[5])
    add(f"{dt}_0d_weak", base[3], weak=True)
    add(f"{dt}_1d", base[:8])
    add(f"{dt}_1d_one", base[1:2])
    add(f"{dt}_2d", base[:12].reshape(3, 4))
    add(f"{dt}_2d_col", base[:4].reshape(4, 1))
    add(f"{dt}_3d", base.reshape(2, 3, 4))
    add(f"{dt}_4d", base.reshape(2, 2, 3, 2))
    add(f"{dt}_4d_ones", base[:1].reshape(1, 1, 1, 1))
    add(f"{dt}_empty", np.zeros((0,), t))
    add(f"{dt}_empty_0x3", np.zeros((0, 3), t))
    add(f"{dt}_empty_2x0x4", np.zeros((2, 0, 4), t), weak=True)
    add(f"{dt}_long_row", (np.arange(60) % 2 == 0) if dt == "bool" else
        (np.arange(60) * 3 % 128).astype(t))
    big = (np.arange(2000) % 3 == 0) if dt == "bool" else (np.arange(2000) % 120).astype(t)
    add(f"{dt}_summarised_1d", big)
    add(f"{dt}_summarised_2d", big.reshape(40, 50))
    add(f"{dt}_summarised_3d", big.reshape(10, 20, 10))
    if dt in ("bool", "int32", "uint8", "float32", "bfloat16", "float64"):
        add(f"{dt}_summarised_4d", np.resize(big, (11, 1, 13, 8)))

# Integers: extremes set the column width; negative numbers.
for dt in INTS:
    info = np.iinfo(dt)
    add(f"{dt}_extremes", np.array([info.min, 0, info.max, 1], dt))
    add(f"{dt}_random_2d", rng.integers(info.min, info.max, (5, 7), dtype=dt, endpoint=True))
    add(f"{dt}_0d_max", np.array(info.max, dt))
    add(f"{dt}_0d_min", np.array(info.min, dt))
add("int32_negative_mixed", np.array([-5, 3, -120, 7], np.int32))
add("int64_wide_wrap", np.arange(-2**62, 2**62, 2**58, dtype=np.int64))
add("int32_square_5x5", np.arange(25, dtype=np.int32).reshape(5, 5) ** 3)

# Bools.
add("bool_mixed", np.array([True, False, False, True]))
add("bool_2d", rng.random((4, 5)) > 0.5)
add("bool_all_false", np.zeros((3,), bool))

# Floats: the print rules depend on the values.
special = {
    "thirds": np.arange(4) / 6,
    "halves_sq": np.arange(8) ** 2 / 2,
    "neg_zero": np.array([-0.0, 0.0, 1.5]),
    "neg_zero_only": np.array([-0.0, -0.0]),
    "zeros": np.zeros(5),
    "nan_inf": np.array([np.nan, 1.0, -np.inf, np.inf, 2.5]),
    "nan_only": np.array([np.nan, np.nan]),
    "inf_neg_only": np.array([np.nan, -np.inf]),
    "inf_pos_only": np.array([np.inf]),
    "nan_with_sci": np.array([np.nan, 1e-7, 3.0, -np.inf]),
    "small": np.array([1e-5, 0.5, 2.0]),
    "ratio_big": np.array([0.001, 1.5, 2000.0]),
    "ratio_edge": np.array([1.0, 1000.0]),
    "ratio_edge_over": np.array([1.0, 1001.0]),
    "large": np.array([1e10, 2.5e10, -3e11]),
    "large_exp3": np.array([1e-100, 1e5, 3.5]),
    "tiny": np.array([1e-30, -2e-30]),
    "just_below_1e4": np.array([9.999e-5, 1.0]),
    "at_1e4": np.array([1e-4, 1.0]),
    "hundreds": np.array([123.456, 789.01, -42.0]),
    "big_ints": np.array([123456.0, 999999.0, 1.0]),
    "million": np.array([1e6, 2.0]),
    "above_million": np.array([1.5e6, 3e7, 4.0]),
    "hundred_million": np.array([1e8, 5.0]),
    "near_million": np.array([999999.9, 1.5]),
    "pi_powers": np.pi ** np.arange(-3, 6),
    "e_multiples": np.e * np.arange(-6, 7),
    "random_normal": rng.normal(0, 1, 12),
    "random_uniform_2d": rng.random((4, 6)),
    "random_wide_2d": rng.normal(0, 1e4, (3, 9)),
    "random_3d": rng.normal(0, 3, (2, 3, 5)),
    "random_sci_3d": rng.normal(0, 1, (3, 2, 4)) * 10.0 ** rng.integers(-9, 9, (3, 2, 4)),
    "long_row": np.arange(40) / 7,
    "long_row_sci": np.arange(1, 30) * 1.234567e-7,
    "row_wrap_2d": np.arange(60).reshape(3, 20) / 3,
    "roundup_cutoff": np.array([0.999999999, 1.123456785, 2.0000000049]),
    "digits_cut": np.array([1 / 3, 2 / 3, 1e-3 / 3]),
    "sci_rounding": np.array([1.99999999999e-5, 3.0, 123456789.123456789]),
    "subnormal": np.array([1e-310, 1.0]),
    "extreme": np.array([1.7976931348623157e308, 5e-324]),
    "max_half": np.array([65504.0, 1.0, -65504.0]),
    "half_steps": np.array([0.1, 0.2, 0.3, 1 / 3, 2048.0, 2049.0, 6e-5, 6e-8]),
    "half_ratio": np.array([1.0, 999.5, 0.5]),
    "summarised_sci": np.linspace(0, 1e9, 1200),
    "summarised_nan": np.where(np.arange(1500) % 7 == 0, np.nan, np.arange(1500) / 9),
}
for name, values in special.items():
    for dt in FLOATS:
        with np.errstate(over="ignore", under="ignore"):
            x = values.astype(npdt(dt))
        add(f"{dt}_{name}", x)

# Scalars of every float flavour, through str() and repr().
scalars = [0.0, -0.0, 1.0, -1.0, 0.5, 1 / 3, 1e-4, 9.99e-5, 1e-5, 123.25, 999.5, 1000.0,
           1024.0, 65504.0, 99999.99, 999999.94, 1e6, 1.5e6, 1e15, 1e16, 1.5e16, 1e22, 1e-300,
           np.nan, np.inf, -np.inf, 0.1, 2.0 ** -24, 6.1e-5, 123456789.0, 2.5e-7]
for i, v in enumerate(scalars):
    for dt in FLOATS:
        with np.errstate(over="ignore", under="ignore"):
            add(f"{dt}_scalar_{i}", np.array(v, npdt(dt)), weak=(i % 3 == 0))

# Every bfloat16 and float16 value class: random bit patterns.
for dt, bits in (("float16", np.uint16), ("bfloat16", np.uint16)):
    for i in range(6):
        raw = rng.integers(0, 2**16, 20, dtype=np.uint64).astype(bits)
        x = raw.view(npdt(dt))
        finite = x[np.isfinite(x.astype(np.float32))]
        add(f"{dt}_random_bits_{i}", finite)
for i in range(4):
    raw = rng.integers(0, 2**32, 15, dtype=np.uint64).astype(np.uint32).view(np.float32)
    add(f"float32_random_bits_{i}", raw[np.isfinite(raw)])
    raw64 = rng.integers(0, 2**63, 10, dtype=np.uint64).view(np.float64)
    add(f"float64_random_bits_{i}", raw64[np.isfinite(raw64)])

# The dtype goes on the repr's last line or after a gap of "Array(" width (JAX's rule).
for n in range(8, 16):
    add(f"float32_repr_spacer_{n}", (np.arange(n, dtype=np.float32) / 7 + 1000))
    add(f"float32_repr_spacer_weak_{n}", (np.arange(n, dtype=np.float32) / 7 + 1000), weak=True)

# Large arrays: 1000x1000 float32 and odd summarised shapes.
add("float32_1000x1000", rng.normal(0, 1, (1000, 1000)).astype(np.float32))
add("int8_6x6x6x6_unsummarised_axes", (np.arange(1296) % 7).astype(np.int8).reshape(6, 6, 6, 6))
add("int32_1001", np.arange(1001, dtype=np.int32))
add("int64_summarised_neg", -np.arange(3000, dtype=np.int64).reshape(3, 1000))
add("float32_summarised_1x2000", (np.arange(2000, dtype=np.float32) / 3).reshape(1, 2000))

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    for c in cases:
        f.write(block(*c))
print(f"wrote {len(cases)} cases, {os.path.getsize(OUT)} bytes")
