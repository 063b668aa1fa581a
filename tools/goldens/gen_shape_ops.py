"""Records jax.numpy / jax.lax shape and indexing functions for spmd's tests.

Writes tests/goldens/shape_ops.npz (x64 off) and tests/goldens/shape_ops_x64.npz (x64 on).
Every case is named; its operands are stored as "<case>|in0", "<case>|in1", … and JAX's
result as "<case>|out" (or "<case>|out0", "<case>|out1", … for functions returning a list).
tests/ops/shape_ops_test.cpp and indexing_ops_test.cpp hold the same case names with the same
calls written in C++.
Run: python3 tools/goldens/gen_shape_ops.py   (needs jax; the tests do not)
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
rng = np.random.default_rng(7)
CASES = {}


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def arr(shape, dt="float32", lo=-50, hi=50):
    """Distinct-looking values of the dtype (small integers for integer and bool types)."""
    n = int(np.prod(shape))
    if dt == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if np.issubdtype(npdt(dt), np.integer):
        info = np.iinfo(dt)
        return rng.integers(max(info.min, lo), min(info.max, hi), n, endpoint=True).astype(
            dt).reshape(shape)
    return (rng.standard_normal(n) * 10).astype(npdt(dt)).reshape(shape)


def case(name, fn, *inputs):
    inputs = [np.asarray(x) for x in inputs]
    out = fn(*[jnp.asarray(x) for x in inputs])
    for i, x in enumerate(inputs):
        CASES[f"{name}|in{i}"] = x
    if isinstance(out, (list, tuple)):
        for i, o in enumerate(out):
            CASES[f"{name}|out{i}"] = np.asarray(o)
    else:
        CASES[f"{name}|out"] = np.asarray(out)


def idx(values, dt="int32"):
    return np.asarray(values, dtype=dt)


def record_x32():
    # reshape / ravel
    case("reshape_2x3_to_3x2", lambda x: jnp.reshape(x, (3, 2)), arr((2, 3)))
    case("reshape_infer", lambda x: jnp.reshape(x, (4, -1)), arr((2, 3, 4), "int8"))
    case("reshape_0d", lambda x: jnp.reshape(x, (1, 1)), arr((), "uint32"))
    case("reshape_zero_size", lambda x: jnp.reshape(x, (3, 0)), arr((0, 3)))
    case("ravel_bf16", jnp.ravel, arr((2, 3, 4), "bfloat16"))
    # transposes (small, and large enough for the tiled kernel with partial tiles)
    case("transpose_default", jnp.transpose, arr((2, 3, 4), "int8"))
    case("transpose_axes", lambda x: jnp.transpose(x, (1, -1, 0)), arr((2, 3, 4), "uint32"))
    case("transpose_large_f32", jnp.transpose, arr((67, 130)))
    case("transpose_large_bf16", jnp.transpose, arr((45, 70), "bfloat16"))
    case("transpose_large_bool", jnp.transpose, arr((33, 100), "bool"))
    case("transpose_3d_perm", lambda x: jnp.transpose(x, (2, 0, 1)), arr((5, 40, 70), "int8"))
    case("transpose_batched", lambda x: jnp.transpose(x, (0, 2, 1)), arr((3, 37, 41)))
    case("swapaxes", lambda x: jnp.swapaxes(x, 0, -1), arr((2, 3, 4)))
    case("moveaxis_one", lambda x: jnp.moveaxis(x, 0, -1), arr((2, 3, 4)))
    case("moveaxis_many", lambda x: jnp.moveaxis(x, (0, 1), (-1, 0)), arr((2, 3, 4, 5)))
    # unit dims
    case("expand_dims", lambda x: jnp.expand_dims(x, (0, -1)), arr((2, 3)))
    case("expand_dims_0d", lambda x: jnp.expand_dims(x, 0), arr((), "int32"))
    case("squeeze_all", jnp.squeeze, arr((1, 3, 1, 2), "bool"))
    case("squeeze_axis", lambda x: jnp.squeeze(x, -2), arr((1, 3, 1, 2)))
    # broadcasting
    case("broadcast_to", lambda x: jnp.broadcast_to(x, (2, 3, 4)), arr((3, 1), "bool"))
    case("broadcast_to_0d", lambda x: jnp.broadcast_to(x, (2, 2)), arr((), "int8"))
    case("broadcast_to_zero", lambda x: jnp.broadcast_to(x, (0, 3)), arr((3,)))
    case("broadcast_arrays", lambda a, b, c: jnp.broadcast_arrays(a, b, c), arr((3, 1)),
         arr((1, 4)), arr(()))
    # joining
    case("concatenate_axis0", lambda a, b: jnp.concatenate([a, b]), arr((2, 3)), arr((1, 3)))
    case("concatenate_last", lambda a, b, c: jnp.concatenate([a, b, c], -1), arr((2, 1), "int8"),
         arr((2, 3), "int8"), arr((2, 0), "int8"))
    case("concatenate_promote", lambda a, b: jnp.concatenate([a, b], 1), arr((2, 2), "int8"),
         arr((2, 3), "bfloat16"))
    case("concatenate_uint_int", lambda a, b: jnp.concatenate([a, b]), arr((3,), "uint8"),
         arr((2,), "int8"))
    many = [arr((1, 2), "int32") for _ in range(17)]
    case("concatenate_17", lambda *xs: jnp.concatenate(xs), *many)
    case("stack_axis0", lambda a, b: jnp.stack([a, b]), arr((2, 3)), arr((2, 3)))
    case("stack_last_promote", lambda a, b, c: jnp.stack([a, b, c], -1), arr((2, 3), "int32"),
         arr((2, 3)), arr((2, 3), "uint8"))
    case("stack_0d", lambda a, b, c: jnp.stack([a, b, c]), arr(()), arr(()), arr(()))
    case("hstack_1d", lambda a, b: jnp.hstack([a, b]), arr((2,)), arr((3,)))
    case("hstack_2d", lambda a, b: jnp.hstack([a, b]), arr((2, 1)), arr((2, 3)))
    case("hstack_0d", lambda a, b: jnp.hstack([a, b]), arr(()), arr(()))
    case("vstack_1d", lambda a, b: jnp.vstack([a, b]), arr((3,)), arr((3,)))
    case("vstack_2d", lambda a, b: jnp.vstack([a, b]), arr((1, 3), "uint32"),
         arr((2, 3), "uint32"))
    # splitting
    case("split_equal", lambda x: jnp.split(x, 3), arr((6, 4)))
    case("split_indices", lambda x: jnp.split(x, [1, 3], axis=1), arr((2, 5), "int8"))
    case("split_empty_piece", lambda x: jnp.split(x, [2, 2], axis=-1), arr((2, 4)))
    # reordering
    case("flip_all", jnp.flip, arr((2, 3, 4), "int8"))
    case("flip_axes", lambda x: jnp.flip(x, (0, 2)), arr((2, 3, 4)))
    case("flip_0d", jnp.flip, arr(()))
    case("roll_flat", lambda x: jnp.roll(x, 2), arr((2, 3)))
    case("roll_axis", lambda x: jnp.roll(x, -1, axis=-1), arr((2, 3), "uint32"))
    case("roll_big_shift", lambda x: jnp.roll(x, 11, axis=0), arr((4, 2)))
    case("roll_zero_size", lambda x: jnp.roll(x, 1, axis=0), arr((0, 2)))
    # padding, tiling, repeating
    case("pad_int", lambda x: jnp.pad(x, ((1, 2), (0, 1)), constant_values=3), arr((2, 3), "int32"))
    case("pad_bf16", lambda x: jnp.pad(x, ((2, 0), (1, 1)), constant_values=0.5),
         arr((2, 2), "bfloat16"))
    case("pad_one_pair", lambda x: jnp.pad(x, ((1, 1),)), arr((2, 2), "uint32"))
    case("pad_zero_size", lambda x: jnp.pad(x, ((1, 1), (2, 0))), arr((0, 2)))
    case("tile_2d", lambda x: jnp.tile(x, (2, 2)), arr((2, 3)))
    case("tile_more_reps", lambda x: jnp.tile(x, (2, 1, 2)), arr((3,), "int8"))
    case("tile_fewer_reps", lambda x: jnp.tile(x, (3,)), arr((2, 2), "bool"))
    case("tile_0d", lambda x: jnp.tile(x, (3,)), arr(()))
    case("tile_zero", lambda x: jnp.tile(x, (0, 2)), arr((2, 3)))
    case("repeat_flat", lambda x: jnp.repeat(x, 2), arr((2, 3)))
    case("repeat_axis", lambda x: jnp.repeat(x, 3, axis=-1), arr((2, 3), "int8"))
    case("repeat_zero", lambda x: jnp.repeat(x, 0, axis=0), arr((2, 3)))
    # triangles
    case("tril", jnp.tril, arr((4, 5)))
    case("tril_k1", lambda x: jnp.tril(x, 1), arr((4, 5), "int8"))
    case("tril_batched", lambda x: jnp.tril(x, -1), arr((2, 3, 4)))
    case("triu", jnp.triu, arr((4, 5), "bool"))
    case("triu_k2", lambda x: jnp.triu(x, 2), arr((5, 4), "bfloat16"))
    case("triu_neg", lambda x: jnp.triu(x, -1), arr((2, 3, 3), "uint32"))
    # lax
    case("lax_broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)),
         arr((3, 1)))
    case("lax_squeeze", lambda x: lax.squeeze(x, (0, 2)), arr((1, 3, 1)))
    case("lax_expand_dims", lambda x: lax.expand_dims(x, (1, 3)), arr((2, 3)))
    case("lax_rev", lambda x: lax.rev(x, (1,)), arr((3, 4), "int8"))
    case("lax_concatenate", lambda a, b: lax.concatenate([a, b], 1), arr((2, 3)), arr((2, 2)))
    case("lax_pad_interior", lambda x: lax.pad(x, np.float32(-1), [(1, -1, 2), (-2, 3, 1)]),
         arr((3, 4)))
    case("lax_pad_crop", lambda x: lax.pad(x, np.int8(9), [(-3, -2, 1)]), arr((5,), "int8"))
    case("lax_pad_0d", lambda x: lax.pad(x, np.float32(2), []), arr(()))
    case("lax_slice", lambda x: lax.slice(x, (1, 0), (3, 4)), arr((4, 5)))
    case("lax_slice_strided", lambda x: lax.slice(x, (0, 1), (4, 5), (2, 3)), arr((4, 5), "bool"))
    case("lax_slice_in_dim", lambda x: lax.slice_in_dim(x, -3, None, 2, axis=1), arr((2, 6)))
    case("lax_index_in_dim", lambda x: lax.index_in_dim(x, -1, 1, False), arr((2, 3, 4)))
    case("lax_index_in_dim_keep", lambda x: lax.index_in_dim(x, 1, 0, True), arr((2, 3)))
    case("lax_dynamic_slice", lambda x: lax.dynamic_slice(x, (1, 2), (2, 3)), arr((4, 6)))
    case("lax_dynamic_slice_clamped", lambda x: lax.dynamic_slice(x, (5, -1), (2, 3)),
         arr((4, 6), "int8"))
    case("lax_dynamic_slice_negative", lambda x: lax.dynamic_slice(x, (-3,), (2,)), arr((5,)))
    case("lax_dynamic_update_slice",
         lambda x, u: lax.dynamic_update_slice(x, u, (1, 1)), arr((3, 4)), arr((2, 2)))
    case("lax_dynamic_update_slice_clamped",
         lambda x, u: lax.dynamic_update_slice(x, u, (-1, 7)), arr((3, 4), "uint32"),
         arr((2, 3), "uint32"))
    case("lax_dynamic_slice_in_dim", lambda x: lax.dynamic_slice_in_dim(x, 2, 2, axis=1),
         arr((3, 5)))
    case("lax_dynamic_index_in_dim", lambda x: lax.dynamic_index_in_dim(x, -1, 0, False),
         arr((3, 5)))
    case("getitem", lambda x: x[-2], arr((3, 4)))
    # take
    case("take_flat", lambda x, i: jnp.take(x, i), arr((3, 4)), idx([0, -1, 5, 11]))
    case("take_axis0", lambda x, i: jnp.take(x, i, axis=0), arr((5, 3)), idx([[4, 0], [-5, 2]]))
    case("take_axis1", lambda x, i: jnp.take(x, i, axis=1), arr((3, 4), "int8"), idx([3, 1, 3]))
    case("take_last_2d_idx", lambda x, i: jnp.take(x, i, axis=-1), arr((2, 3, 4), "bfloat16"),
         idx([[0, -1, 2], [1, 1, -4]]))
    case("take_middle", lambda x, i: jnp.take(x, i, axis=1), arr((2, 5, 3), "bool"),
         idx([4, 0], "uint8"))
    case("take_scalar_index", lambda x, i: jnp.take(x, i, axis=0), arr((4, 3)), idx(2))
    case("take_int8_index", lambda x, i: jnp.take(x, i), arr((20,), "int32"),
         idx([-1, -20, 19], "int8"))
    case("take_empty", lambda x, i: jnp.take(x, i, axis=0), arr((3, 2)), idx([], "int32"))
    case("take_large", lambda x, i: jnp.take(x, i, axis=0), arr((100, 24)),
         rng.integers(-100, 100, 200).astype(np.int32))
    # take_along_axis
    case("take_along_axis1", lambda x, i: jnp.take_along_axis(x, i, axis=1), arr((3, 4)),
         idx([[0, 3], [-1, 1], [2, 2]]))
    case("take_along_axis0", lambda x, i: jnp.take_along_axis(x, i, axis=0), arr((3, 4), "int8"),
         idx([[2, 1, 0, -3]]))
    case("take_along_bcast_idx", lambda x, i: jnp.take_along_axis(x, i, axis=1),
         arr((3, 4, 5)), idx(rng.integers(0, 4, (1, 2, 5))))
    case("take_along_bcast_arr", lambda x, i: jnp.take_along_axis(x, i, axis=1),
         arr((1, 4), "uint32"), idx(rng.integers(-4, 4, (3, 2))))
    case("take_along_3d_last", lambda x, i: jnp.take_along_axis(x, i, axis=-1),
         arr((2, 3, 5), "bfloat16"), idx(rng.integers(0, 5, (2, 3, 7))))
    case("take_along_argsort", lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=0), axis=0),
         arr((5, 3)))
    # one_hot
    case("one_hot", lambda x: jax.nn.one_hot(x, 4), idx([0, 3, 4, -1, 2]))
    case("one_hot_2d_int8", lambda x: jax.nn.one_hot(x, 3, dtype=jnp.int8),
         idx([[1, 2], [0, 5]], "uint8"))
    case("one_hot_float", lambda x: jax.nn.one_hot(x, 3, dtype=jnp.bfloat16),
         np.asarray([1.0, 1.5, 2.0], np.float32))
    case("one_hot_0d", lambda x: jax.nn.one_hot(x, 2), idx(1))


def record_x64():
    case("transpose_f64", jnp.transpose, arr((37, 70), "float64"))
    case("transpose_3d_u64", lambda x: jnp.transpose(x, (2, 0, 1)), arr((3, 20, 17), "uint64"))
    case("concatenate_promote_f64", lambda a, b: jnp.concatenate([a, b]), arr((2,), "int64"),
         arr((3,), "float32"))
    case("pad_f64", lambda x: jnp.pad(x, ((1, 0), (0, 2)), constant_values=-2.5),
         arr((2, 2), "float64"))
    case("take_i64_index", lambda x, i: jnp.take(x, i, axis=0), arr((4, 2), "float64"),
         idx([3, -4, 0], "int64"))
    case("take_along_i64", lambda x, i: jnp.take_along_axis(x, i, axis=0), arr((3, 2), "int64"),
         idx([[2, 0], [-1, 1]], "int64"))
    case("lax_dynamic_slice_i64", lambda x: lax.dynamic_slice(x, (np.int64(2),), (3,)),
         arr((6,), "float64"))
    case("one_hot_i64", lambda x: jax.nn.one_hot(x, 3, dtype=jnp.float64), idx([2, 0], "int64"))
    case("repeat_f64", lambda x: jnp.repeat(x, 2, axis=0), arr((2, 2), "float64"))
    case("tril_i64", lambda x: jnp.tril(x), arr((3, 3), "int64"))


def main():
    if X64:
        record_x64()
        name = "shape_ops_x64.npz"
    else:
        record_x32()
        name = "shape_ops.npz"
    np.savez_compressed(os.path.join(OUT, name), **CASES)
    print(f"wrote {len(CASES)} arrays to {name}")
    if not X64:
        subprocess.run([sys.executable, __file__, "--x64"], check=True)


if __name__ == "__main__":
    main()
