"""Records jax.random outputs for spmd's tests, in both threefry modes.

Writes tests/goldens/random.npz (x64 off) and tests/goldens/random_x64.npz (x64 on: 64-bit
bits, float64 uniform/normal, int64 randint). Keys: "mode|function|seed|case".
Run: python3 tools/goldens/gen_random.py   (needs jax; the tests do not)
"""
import os
import sys

X64 = len(sys.argv) > 1 and sys.argv[1] == "--x64"
import jax  # noqa: E402

jax.config.update("jax_enable_x64", X64)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens")
SEEDS = [0, 42, 2**32 + 5, 123456789]
SHAPES = {"s": (), "1": (1,), "5": (5,), "3x4": (3, 4), "1000": (1000,), "7x3x2": (7, 3, 2)}


def cases():
    r = jax.random
    out = {}
    if X64:
        out["bits_u64"] = lambda k, s: r.bits(k, s, jnp.uint64)
        out["uniform_f64"] = lambda k, s: r.uniform(k, s, jnp.float64)
        out["normal_f64"] = lambda k, s: r.normal(k, s, jnp.float64)
        out["randint_i64"] = lambda k, s: r.randint(k, s, -(2**40), 2**40, jnp.int64)
        return out
    out.update({
        "bits_u32": lambda k, s: r.bits(k, s),
        "bits_u8": lambda k, s: r.bits(k, s, jnp.uint8),
        "bits_u16": lambda k, s: r.bits(k, s, jnp.uint16),
        "uniform_f32": lambda k, s: r.uniform(k, s),
        "uniform_bf16": lambda k, s: r.uniform(k, s, jnp.bfloat16),
        "uniform_f16_m3_5": lambda k, s: r.uniform(k, s, jnp.float16, -3.0, 5.0),
        "normal_f32": lambda k, s: r.normal(k, s),
        "normal_bf16": lambda k, s: r.normal(k, s, jnp.bfloat16),
        "truncated_normal": lambda k, s: r.truncated_normal(k, -1.5, 0.5, s),
        "bernoulli_03": lambda k, s: r.bernoulli(k, 0.3, s),
        "randint_0_10": lambda k, s: r.randint(k, s, 0, 10),
        "randint_m5_3_i8": lambda k, s: r.randint(k, s, -5, 3, jnp.int8),
        "randint_0_256_u8": lambda k, s: r.randint(k, s, 0, 256, jnp.uint8),
        "randint_big": lambda k, s: r.randint(k, s, -(2**31), 2**31 - 1),
    })
    return out


def main():
    out = {}
    for mode in (True, False):
        jax.config.update("jax_threefry_partitionable", mode)
        tag = "part" if mode else "stable"
        for seed in SEEDS:
            key = jax.random.PRNGKey(seed)
            out[f"{tag}|key|{seed}|"] = np.asarray(key)
            if not X64:
                out[f"{tag}|split|{seed}|2"] = np.asarray(jax.random.split(key))
                out[f"{tag}|split|{seed}|5"] = np.asarray(jax.random.split(key, 5))
                out[f"{tag}|fold_in|{seed}|7"] = np.asarray(jax.random.fold_in(key, 7))
                out[f"{tag}|fold_in|{seed}|4000000000"] = np.asarray(
                    jax.random.fold_in(key, 4000000000))
                out[f"{tag}|permutation|{seed}|10"] = np.asarray(jax.random.permutation(key, 10))
                out[f"{tag}|permutation|{seed}|1000"] = np.asarray(
                    jax.random.permutation(key, 1000))
                x = np.arange(12).reshape(4, 3)
                out[f"{tag}|permutation_rows|{seed}|4x3"] = np.asarray(
                    jax.random.permutation(key, x, 0))
                logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], np.float32))
                out[f"{tag}|categorical|{seed}|2"] = np.asarray(
                    jax.random.categorical(key, logits))
                out[f"{tag}|categorical|{seed}|5x2"] = np.asarray(
                    jax.random.categorical(key, logits, shape=(5, 2)))
                out[f"{tag}|categorical_axis0|{seed}|3"] = np.asarray(
                    jax.random.categorical(key, logits, axis=0))
            for name, f in cases().items():
                for sname, shape in SHAPES.items():
                    out[f"{tag}|{name}|{seed}|{sname}"] = np.asarray(f(key, shape))
    name = "random_x64.npz" if X64 else "random.npz"
    np.savez_compressed(os.path.join(OUT, name), **out)
    print(f"wrote {len(out)} arrays to {name}")


main()
