"""Records jax.random and sort outputs for spmd's tests.

Writes, under tests/goldens/:
  random.npz      every jax.random function, x64 off, both threefry modes
  random_x64.npz  the same with x64 on (64-bit dtypes, and seeds of more than 32 bits)
  random_sort.npz jnp.sort / jnp.argsort / lax.sort (the sort primitive behind permutation)
Keys of the random files are "mode|case|seed|shape": mode "part" or "stable", shape "s" for ()
or the dims joined by "x" ("3x4", "0"), or "-" for cases without a shape argument. The C++ test
(tests/random/random_test.cpp) has a table with the same case names.

Run: python3 tools/goldens/gen_random.py [random] [sort]   (needs jax 0.10.2; the tests do not)
"""
import os
import sys

import jax

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens")
SEEDS = [0, 42, 2**32 + 5, 123456789]
SHAPES = [(), (1,), (5,), (3, 4), (7, 3, 2), (37,), (0,), (2, 0, 3)]
LARGE = (1000,)  # recorded for seed 0 only, to keep the files small
r = jax.random


def shape_name(shape):
    return "s" if shape == () else "x".join(str(d) for d in shape)


def sampled_x32():
    """Samplers called as f(key, shape) with x64 off."""
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
    return {
        "bits_u32": lambda k, s: r.bits(k, s),
        "bits_u8": lambda k, s: r.bits(k, s, jnp.uint8),
        "bits_u16": lambda k, s: r.bits(k, s, jnp.uint16),
        "uniform_f32": lambda k, s: r.uniform(k, s),
        "uniform_f32_range": lambda k, s: r.uniform(k, s, jnp.float32, -3.3, 5.7),
        "uniform_bf16": lambda k, s: r.uniform(k, s, jnp.bfloat16),
        "uniform_bf16_range": lambda k, s: r.uniform(k, s, jnp.bfloat16, -3.3, 5.7),
        "uniform_f16": lambda k, s: r.uniform(k, s, jnp.float16),
        "uniform_f16_range": lambda k, s: r.uniform(k, s, jnp.float16, -3.0, 5.0),
        "normal_f32": lambda k, s: r.normal(k, s),
        "normal_bf16": lambda k, s: r.normal(k, s, jnp.bfloat16),
        "normal_f16": lambda k, s: r.normal(k, s, jnp.float16),
        "truncated_normal_f32": lambda k, s: r.truncated_normal(k, -1.5, 0.5, s),
        "truncated_normal_bf16": lambda k, s: r.truncated_normal(k, -1.0, 2.0, s, jnp.bfloat16),
        "truncated_normal_f16": lambda k, s: r.truncated_normal(k, -2.0, 1.0, s, jnp.float16),
        "truncated_normal_f32_b": lambda k, s: r.truncated_normal(k, 0.25, 4.0, s),
        "truncated_normal_bf16_b": lambda k, s: r.truncated_normal(
            k, -0.3, 3.7, s, jnp.bfloat16),
        "truncated_normal_f16_b": lambda k, s: r.truncated_normal(k, -3.1, 0.2, s, jnp.float16),
        "bernoulli": lambda k, s: r.bernoulli(k, 0.3, s),
        "bernoulli_bf16": lambda k, s: r.bernoulli(k, jnp.bfloat16(0.7), s),
        "randint": lambda k, s: r.randint(k, s, 0, 10),
        "randint_i8": lambda k, s: r.randint(k, s, -5, 3, jnp.int8),
        "randint_u8_full": lambda k, s: r.randint(k, s, 0, 256, jnp.uint8),
        "randint_i16": lambda k, s: r.randint(k, s, -1000, 1000, jnp.int16),
        "randint_u16_full": lambda k, s: r.randint(k, s, 0, 65536, jnp.uint16),
        "randint_u32": lambda k, s: r.randint(k, s, 3, 2**31 - 1, jnp.uint32),
        "randint_i32_full": lambda k, s: r.randint(k, s, -(2**31), 2**31 - 1),
        "randint_empty_range": lambda k, s: r.randint(k, s, 7, 3),
        "randint_float_bounds": lambda k, s: r.randint(k, s, 2.7, 9.2),
        "categorical": lambda k, s: r.categorical(k, logits, shape=(*s, 2)),
    }


def sampled_x64():
    """Samplers with x64 on: 64-bit dtypes, and 32-bit ones whose bounds need 64 bits."""
    return {
        "bits_u64": lambda k, s: r.bits(k, s, jnp.uint64),
        "bits_u32": lambda k, s: r.bits(k, s, jnp.uint32),
        "uniform_f64": lambda k, s: r.uniform(k, s, jnp.float64),
        "uniform_f64_range": lambda k, s: r.uniform(k, s, jnp.float64, -3.3, 5.7),
        "uniform_f32_range": lambda k, s: r.uniform(k, s, jnp.float32, -3.3, 5.7),
        "normal_f64": lambda k, s: r.normal(k, s, jnp.float64),
        "truncated_normal_f64": lambda k, s: r.truncated_normal(k, -1.5, 0.5, s, jnp.float64),
        "bernoulli": lambda k, s: r.bernoulli(k, 0.3, s),
        "randint_i64": lambda k, s: r.randint(k, s, -(2**40), 2**40, jnp.int64),
        "randint_u64": lambda k, s: r.randint(k, s, 5, jnp.uint64(2**63 + 12345), jnp.uint64),
        "randint_i32_wide": lambda k, s: r.randint(k, s, -(2**31), 2**31, jnp.int32),
        "randint_u32_full": lambda k, s: r.randint(k, s, 0, 2**32, jnp.uint32),
        "randint_i8": lambda k, s: r.randint(k, s, -5, 3, jnp.int8),
    }


def fixed_x32():
    """Cases without a shape argument, called as f(key)."""
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
    x2d = np.arange(12).reshape(4, 3)
    return {
        "key": lambda k: k,
        "split_0": lambda k: r.split(k, 0),
        "split_1": lambda k: r.split(k, 1),
        "split_2": lambda k: r.split(k),
        "split_5": lambda k: r.split(k, 5),
        "fold_in_0": lambda k: r.fold_in(k, 0),
        "fold_in_7": lambda k: r.fold_in(k, 7),
        "fold_in_4000000000": lambda k: r.fold_in(k, 4000000000),
        "permutation_0": lambda k: r.permutation(k, 0),
        "permutation_1": lambda k: r.permutation(k, 1),
        "permutation_10": lambda k: r.permutation(k, 10),
        "permutation_2000": lambda k: r.permutation(k, 2000),
        "permutation_scalar_array": lambda k: r.permutation(k, jnp.int32(6)),
        "permutation_floats": lambda k: r.permutation(k, jnp.arange(9.0) / 2),
        "permutation_rows": lambda k: r.permutation(k, x2d, 0),
        "permutation_columns": lambda k: r.permutation(k, x2d, 1),
        "categorical": lambda k: r.categorical(k, logits),
        "categorical_axis0": lambda k: r.categorical(k, logits, axis=0),
        "categorical_axis0_shape": lambda k: r.categorical(k, logits, axis=0, shape=(4, 3)),
        "categorical_broadcast": lambda k: r.categorical(k, logits[:1], shape=(6,)),
        "categorical_bf16": lambda k: r.categorical(k, logits.astype(jnp.bfloat16)),
        "uniform_array_bounds": lambda k: r.uniform(
            k, (3, 4), minval=jnp.arange(4.0), maxval=jnp.arange(4.0) * 2 + 1),
        "truncated_normal_array_bounds": lambda k: r.truncated_normal(
            k, jnp.array([-3.0, -1.0, 0.0]), jnp.array([[1.0], [2.0]])),
        "bernoulli_array_p": lambda k: r.bernoulli(k, jnp.array([0.1, 0.5, 0.9])),
        "bernoulli_array_p_shape": lambda k: r.bernoulli(k, jnp.array([0.1, 0.5, 0.9]), (2, 3)),
        "randint_array_bounds": lambda k: r.randint(
            k, (2, 3), jnp.array([0, 10, -5]), jnp.array([[5], [100]])),
    }


def fixed_x64():
    return {
        "key": lambda k: k,
        "split_3": lambda k: r.split(k, 3),
        "fold_in_7": lambda k: r.fold_in(k, 7),
        "permutation_10": lambda k: r.permutation(k, 10),
        "categorical": lambda k: r.categorical(
            k, np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]))),
    }


def threefry_cases(out):
    """The raw primitive on fixed words, with scalar operands broadcast."""
    from jax._src.random.threefry2x32 import threefry2x32_p

    rng = np.random.default_rng(7)
    words = [rng.integers(0, 2**32, size=(3, 5), dtype=np.uint32) for _ in range(4)]
    for i, w in enumerate(words):
        out[f"threefry|in{i}"] = w
    y1, y2 = threefry2x32_p.bind(*map(jnp.asarray, words))
    out["threefry|full|y1"], out["threefry|full|y2"] = np.asarray(y1), np.asarray(y2)
    k1, k2 = np.uint32(0x13198A2E), np.uint32(0x03707344)
    y1, y2 = threefry2x32_p.bind(jnp.asarray(k1), jnp.asarray(k2), *map(jnp.asarray, words[2:]))
    out["threefry|scalar_keys|y1"], out["threefry|scalar_keys|y2"] = np.asarray(y1), np.asarray(y2)


def record_random(x64):
    jax.config.update("jax_enable_x64", x64)
    sampled = sampled_x64() if x64 else sampled_x32()
    fixed = fixed_x64() if x64 else fixed_x32()
    shapes = [(), (5,), (3, 4), (37,)] if x64 else SHAPES
    out = {}
    for partitionable in (True, False):
        jax.config.update("jax_threefry_partitionable", partitionable)
        mode = "part" if partitionable else "stable"
        for seed in SEEDS:
            key = r.PRNGKey(seed)
            for name, f in fixed.items():
                out[f"{mode}|{name}|{seed}|-"] = np.asarray(f(key))
            for name, f in sampled.items():
                for shape in shapes + ([LARGE] if seed == 0 else []):
                    out[f"{mode}|{name}|{seed}|{shape_name(shape)}"] = np.asarray(f(key, shape))
    jax.config.update("jax_threefry_partitionable", True)
    if not x64:
        threefry_cases(out)
    return out


def special_floats(dtype, n, rng):
    """Random values mixed with every class the sort comparator treats specially."""
    info = jnp.finfo(dtype)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0,
                         float(info.tiny), -float(info.tiny), float(info.smallest_subnormal),
                         -float(info.smallest_subnormal), float(info.smallest_subnormal) * 3,
                         float(info.max), float(info.min)])
    values = np.round(rng.normal(size=n) * 4) / 2  # many ties
    values[rng.integers(0, n, size=n // 3)] = rng.choice(specials, size=n // 3)
    return np.asarray(jnp.asarray(values.astype(np.float64), dtype))


def record_sort(x64):
    jax.config.update("jax_enable_x64", x64)
    rng = np.random.default_rng(11)
    out = {}

    def add(name, x, axis=-1):
        out[f"{name}|x"] = x
        out[f"{name}|sort"] = np.asarray(jnp.sort(x, axis=axis))
        out[f"{name}|argsort"] = np.asarray(jnp.argsort(x, axis=axis))

    # With x64 on, only what x64 changes: the 64-bit types and argsort's int64 indices.
    floats = ["float64"] if x64 else ["float32", "bfloat16", "float16"]
    ints = ["int64", "uint64"] if x64 else ["int8", "uint8", "int16", "uint16", "int32", "uint32"]
    for t in floats:
        add(f"{t}|1d", special_floats(t, 200, rng))
        add(f"{t}|long", special_floats(t, 1500, rng))
        x = special_floats(t, 35, rng).reshape(5, 7)
        for axis in (0, 1):
            add(f"{t}|2d_axis{axis}", x, axis)
    for t in ints:
        info = np.iinfo(t)
        x = rng.integers(info.min, int(info.max) + 1, size=(6, 30), dtype=t)
        x[:, ::3] = x[:, :1]  # ties
        for axis in (0, 1):
            add(f"{t}|2d_axis{axis}", x, axis)
        add(f"{t}|long", rng.integers(info.min, int(info.max) + 1, size=1500, dtype=t))
        add(f"{t}|long_few_values", rng.integers(0, 4, size=1500).astype(t))
    if x64:
        return out
    add("bool|1d", rng.integers(0, 2, size=50).astype(bool))
    add("float32|3d_axis1", special_floats("float32", 60, rng).reshape(3, 4, 5), 1)

    k1 = rng.integers(0, 3, size=(4, 30)).astype(np.int32)
    k2 = special_floats("float32", 120, rng).reshape(4, 30)
    v = np.arange(120, dtype=np.int16).reshape(4, 30)
    for keys in (1, 2):
        sorted_ops = lax.sort((jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(v)), dimension=1,
                              num_keys=keys)
        for i, o in enumerate(sorted_ops):
            out[f"multi|keys{keys}|out{i}"] = np.asarray(o)
    out["multi|in0"], out["multi|in1"], out["multi|in2"] = k1, k2, v
    return out


def main(which):
    if "random" in which:
        for x64, name in ((False, "random.npz"), (True, "random_x64.npz")):
            out = record_random(x64)
            np.savez_compressed(os.path.join(OUT, name), **out)
            print(f"wrote {len(out)} arrays to {name}")
    if "sort" in which:
        out = record_sort(False)
        out.update({f"x64|{k}": v for k, v in record_sort(True).items()})
        np.savez_compressed(os.path.join(OUT, "random_sort.npz"), **out)
        print(f"wrote {len(out)} arrays to random_sort.npz")


main(sys.argv[1:] or ["random", "sort"])
