"""Records what JAX gives for reshapes whose minor factor is split unevenly inside jit ([4, 6]
split on its 6 over 4 devices, blocks of 2, 2, 2 and 0, merged into [24] split 4 ways, and back):
the values, where the results are split, and the collectives of XLA's compiled program with the
bytes each device sends in them. XLA's SPMD partitioner moves the mesh axis from the padded minor
dim to the major one with one all-to-all of the padded blocks and gathers nothing. Also the
gradient through such a reshape (its transpose is the reshape back), what propagation chooses
for such reshapes without a constraint on the result, and merges whose blocks are parts of one
row of the major factor ([2, 12] split on its 12 into [24] split 4 ways: XLA's all-to-all and
collective-permute). For tests/sharding/minor_reshape_test.cpp.

Writes tests/goldens/minor_reshape/ in gen_uneven2.py's format (results.txt, values.npz,
hlo.txt).
Run: python3 tools/goldens/gen_minor_reshape.py   (needs jax 0.10.2; the tests do not)
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_uneven2 import grid, reshaped, write, wsc  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "minor_reshape")


def round_trip(u):
    """[24] split 4 ways, reshaped to [4, 6] split on its 6, squared, and back to [24]."""
    y = wsc("m4", None, "a")(wsc("m4", "a")(u * 2).reshape(4, 6))
    return wsc("m4", "a")((y * y).reshape(24))


def sub_round_trip(u):
    """[24] split 4 ways, reshaped to [2, 12] split on its 12, squared, and back to [24]."""
    y = wsc("m4", None, "a")(wsc("m4", "a")(u * 2).reshape(2, 12))
    return wsc("m4", "a")((y * y).reshape(24))


def loss(u):
    """The sum of squares of u split on its last dim, merged into one dim split 4 ways."""
    y = reshaped("m4", (u.size,), (None, "a"), ("a",))(u)
    return jnp.sum(y * y)


def unconstrained(mesh, shape, before):
    """u * 2 split as `before`, reshaped to `shape` with no constraint on the result, plus 1."""
    return lambda u: wsc(mesh, *before)(u * 2).reshape(shape) + 1


# (case, function, arguments).
CASES = [
    ("merge_4x6_m4", reshaped("m4", (24,), (None, "a"), ("a",)), (grid(4, 6),)),
    ("split_24_m4", reshaped("m4", (4, 6), ("a",), (None, "a")), (grid(24),)),
    ("round_trip_24_m4", round_trip, (grid(24),)),
    ("merge_8x6_m42", reshaped("m42", (48,), (None, "a"), ("a",)), (grid(8, 6),)),
    ("merge_8x6_ba_m42", reshaped("m42", (48,), ("b", "a"), (("a", "b"),)), (grid(8, 6),)),
    ("merge_2x3x4_m24", reshaped("m24", (6, 4), (None, "a"), ("a",)), (grid(2, 3, 4),)),
    ("merge_2x3x4_ab_m24", reshaped("m24", (6, 4), (None, "a", "b"), ("a", "b")),
     (grid(2, 3, 4),)),
    ("grad_merge_4x6_m4", jax.grad(loss), (grid(4, 6),)),
    # The merged dim's blocks are parts of one row of the major factor (Shardy's sub-axes).
    ("sub_merge_2x12_m4", reshaped("m4", (24,), (None, "a"), ("a",)), (grid(2, 12),)),
    ("sub_split_24_m4", reshaped("m4", (2, 12), ("a",), (None, "a")), (grid(24),)),
    ("sub_round_trip_24_m4", sub_round_trip, (grid(24),)),
    ("sub_merge_2x16_m8", reshaped("m8", (32,), (None, "x"), ("x",)), (grid(2, 16),)),
    ("sub_merge_4x8_m8", reshaped("m8", (32,), (None, "x"), ("x",)), (grid(4, 8),)),
    ("sub_merge_2x8_tuple_m42", reshaped("m42", (16,), (None, ("a", "b")), (("a", "b"),)),
     (grid(2, 8),)),
    ("sub_merge_2x4x3_m8", reshaped("m8", (8, 3), (None, "x", None), ("x", None)),
     (grid(2, 4, 3),)),
    ("grad_sub_merge_2x12_m4", jax.grad(loss), (grid(2, 12),)),
    ("sub_merge_2x12_rows_m4", reshaped("m4", (24,), ("a", None), ("a",)), (grid(2, 12),)),
    ("auto_merge_4x6_m4", unconstrained("m4", (24,), (None, "a")), (grid(4, 6),)),
    ("auto_split_24_m4", unconstrained("m4", (4, 6), ("a",)), (grid(24),)),
]


if __name__ == "__main__":
    write(OUT, CASES)
