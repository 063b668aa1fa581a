"""Records what JAX gives for reshapes whose compound dim has three or more factors, or whose
split spans its factors otherwise than the major factor's rows and a part of the next one
([2, 2, 6] merged into [24] split 8 ways over 8, 4 x 2 and 2 x 2 x 2 devices, and back; [2, 3, 4]
and [2, 6, 4] into [6, 4], [12, 4] and back with the axes crossing factor boundaries; gradients
and chains of reshapes with constraints; reshapes left unconstrained; a reshape whose result
dims are split by sub-axes, followed by elementwise ops, a transpose or another reshape up to a
constraint, or into a reduction, a dot or the output): the values, where the results are split, and the collectives of XLA's compiled
program with the bytes each device sends in them. Shardy splits such dims by sub-axes
('x':(1)2, 'x':(2)2, 'x':(4)2) and carries them on the values after the reshape.
For tests/sharding/uneven2_test.cpp (MinorReshapeSubAxes).

Writes tests/goldens/sub_axis_reshape/ in gen_uneven2.py's format (results.txt, values.npz,
hlo.txt).
Run: python3 tools/goldens/gen_sub_axis_reshape.py   (needs jax 0.10.2; the tests do not)
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_uneven2  # noqa: E402
from gen_minor_reshape import unconstrained  # noqa: E402
from gen_uneven2 import grid, reshaped, write, wsc  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sub_axis_reshape")

gen_uneven2.MESHES["m222"] = Mesh(mesh_utils.create_device_mesh((2, 2, 2)), ("a", "b", "c"))

AB, BA, ABC = ("a", "b"), ("b", "a"), ("a", "b", "c")


def round_trip(u):
    """[24] split 8 ways, reshaped to [2, 2, 6] split on its 6, squared, and back to [24]."""
    y = wsc("m8", None, None, "x")(wsc("m8", "x")(u * 2).reshape(2, 2, 6))
    return wsc("m8", "x")((y * y).reshape(24))


def chain(u):
    """[2, 2, 6] split on its 6 over 'a', to [4, 6] split P('a', 'b'), to [24] split 8 ways."""
    y = wsc("m42", "a", "b")(wsc("m42", None, None, "a")(u * 2).reshape(4, 6))
    return wsc("m42", AB)((y + 1).reshape(24))


def loss(mesh, shape, before, after):
    """The sum of squares of u split as `before`, reshaped to `shape` split as `after`."""
    def f(u):
        y = reshaped(mesh, shape, before, after)(u)
        return jnp.sum(y * y)
    return f


def chain2(mesh, shape, before, after):
    """u * 2 split as `before`, reshaped to `shape`, plus 1, at least 2, times 3, split as
    `after`."""
    return lambda u: wsc(mesh, *after)(
        jnp.maximum(wsc(mesh, *before)(u * 2).reshape(shape) + 1, 2.0) * 3)


def transposed(mesh, shape, perm, before, after):
    """u * 2 split as `before`, reshaped to `shape`, plus 1, transposed, split as `after`."""
    return lambda u: wsc(mesh, *after)(
        jnp.transpose(wsc(mesh, *before)(u * 2).reshape(shape) + 1, perm))


def reshaped_twice(mesh, shape, shape2, before, after):
    """u * 2 split as `before`, reshaped to `shape`, minus 30, its absolute value, reshaped to
    `shape2`, split as `after`."""
    return lambda u: wsc(mesh, *after)(jnp.abs(wsc(mesh, *before)(u * 2).reshape(shape) - 30)
                                       .reshape(shape2))


def base(u):
    """[12, 4] split P('b', 'a') on 2 x 4, reshaped to [2, 6, 4] (its 2 and 6 split by the
    sub-axes 'b':(1)2 and 'b':(2)2), plus 1."""
    return wsc("m24", "b", "a")(u * 2).reshape(2, 6, 4) + 1


def base222(u):
    """[8, 4] split P(('a', 'b'), 'c') on 2 x 2 x 2, reshaped to [2, 4, 4] (its 2 and 4 split by
    'a' and 'b'... as sub-axes of the tuple), plus 1."""
    return wsc("m222", AB, "c")(u * 2).reshape(2, 4, 4) + 1


W = jnp.arange(12, dtype=jnp.float32).reshape(4, 3) / 7


def grad_red(u):
    """The gradient of the sum of squares of base(u) summed over its 4, split P('a', None)."""
    return jax.grad(lambda x: jnp.sum(wsc("m24", "a", None)(base(x).sum(axis=2)) ** 2))(u)


# (case, function, arguments).
CASES = [
    # [2, 2, 6] and [24]: three factors, the merged dim split 8 ways.
    ("t3_merge_2x2x6_m8", reshaped("m8", (24,), (None, None, "x"), ("x",)), (grid(2, 2, 6),)),
    ("t3_split_24_m8", reshaped("m8", (2, 2, 6), ("x",), (None, None, "x")), (grid(24),)),
    ("t3_merge_2x2x6_rows_m8", reshaped("m8", (24,), ("x",), ("x",)), (grid(2, 2, 6),)),
    ("t3_merge_2x2x6_m42", reshaped("m42", (24,), ("b", None, "a"), (AB,)), (grid(2, 2, 6),)),
    ("t3_split_24_m42", reshaped("m42", (2, 2, 6), (AB,), (None, "b", "a")), (grid(24),)),
    ("t3_merge_2x2x6_m222", reshaped("m222", (24,), ("c", "b", "a"), (ABC,)), (grid(2, 2, 6),)),
    ("t3_split_24_m222", reshaped("m222", (2, 2, 6), (ABC,), (None, None, AB)), (grid(24),)),
    ("t3_merge_2x2x6_m4", reshaped("m4", (24,), (None, None, "a"), ("a",)), (grid(2, 2, 6),)),
    ("t3_merge_4x6_to_2x2x6_m42", reshaped("m42", (2, 2, 6), (AB, None), (None, "a", "b")),
     (grid(4, 6),)),
    ("t3_round_trip_24_m8", round_trip, (grid(24),)),
    # [2, 3, 4] and [2, 6, 4]: splits crossing factor boundaries.
    ("x_2x3x4_to_6x4_m24", reshaped("m24", (6, 4), (None, "a", "b"), ("a", "b")),
     (grid(2, 3, 4),)),
    ("x_6x4_to_2x3x4_m24", reshaped("m24", (2, 3, 4), ("a", "b"), (None, "a", "b")),
     (grid(6, 4),)),
    ("x_2x6x4_to_12x4_m42", reshaped("m42", (12, 4), (None, "a", "b"), ("a", "b")),
     (grid(2, 6, 4),)),
    ("x_12x4_to_2x6x4_m24", reshaped("m24", (2, 6, 4), ("b", "a"), ("a", None, "b")),
     (grid(12, 4),)),
    ("x_12x4_to_2x24_m24", reshaped("m24", (2, 24), ("b", "a"), (None, "a")), (grid(12, 4),)),
    ("x_2x24_to_12x4_m42", reshaped("m42", (12, 4), (None, "b"), ("a", "b")), (grid(2, 24),)),
    ("x_6x4_to_2x12_m42", reshaped("m42", (2, 12), ("b", "a"), ("b", "a")), (grid(6, 4),)),
    ("x_2x3x4_to_24_m4", reshaped("m4", (24,), (None, None, "a"), ("a",)), (grid(2, 3, 4),)),
    ("x_24_to_2x3x4_m8", reshaped("m8", (2, 3, 4), ("x",), (None, None, "x")), (grid(24),)),
    # Gradients, a chain of reshapes with constraints, and reshapes left unconstrained.
    ("grad_t3_merge_2x2x6_m8", jax.grad(loss("m8", (24,), (None, None, "x"), ("x",))),
     (grid(2, 2, 6),)),
    ("grad_x_2x3x4_m24", jax.grad(loss("m24", (6, 4), (None, "a", "b"), ("a", "b"))),
     (grid(2, 3, 4),)),
    ("t3_chain_m42", chain, (grid(2, 2, 6),)),
    ("auto_t3_merge_2x2x6_m8", unconstrained("m8", (24,), (None, None, "x")), (grid(2, 2, 6),)),
    ("auto_t3_split_24_m8", unconstrained("m8", (2, 2, 6), ("x",)), (grid(24),)),
    # Sub-axes of the reshape's result carried through the ops after it to the constraint.
    ("keep_12x4_to_2x6x4_m42", reshaped("m42", (2, 6, 4), ("a", "b"), ("b", None, "a")),
     (grid(12, 4),)),
    ("keep_8x8_to_2x4x8_m8", reshaped("m8", (2, 4, 8), ("x", None), (None, None, "x")),
     (grid(8, 8),)),
    ("keep_chain2_12x4_m24", chain2("m24", (2, 6, 4), ("b", "a"), ("a", None, "b")),
     (grid(12, 4),)),
    ("keep_chain2_8x8_m8", chain2("m8", (2, 4, 8), ("x", None), (None, None, "x")),
     (grid(8, 8),)),
    ("keep_transpose_12x4_m24",
     transposed("m24", (2, 6, 4), (2, 0, 1), ("b", "a"), ("b", "a", None)), (grid(12, 4),)),
    ("keep_reshape2_12x4_m24",
     reshaped_twice("m24", (2, 6, 4), (2, 2, 3, 4), ("b", "a"), ("a", None, None, "b")),
     (grid(12, 4),)),
    ("keep_8x4_to_2x4x4_m222", reshaped("m222", (2, 4, 4), (AB, "c"), ("c", None, AB)),
     (grid(8, 4),)),
    ("grad_keep_12x4_m24", jax.grad(loss("m24", (2, 6, 4), ("b", "a"), ("a", None, "b"))),
     (grid(12, 4),)),
    # Sub-axes kept into a reduction, a dot or the output.
    ("kred_sum2_12x4_m24", lambda u: wsc("m24", "a", None)(base(u).sum(axis=2)), (grid(12, 4),)),
    ("kred_sum1_12x4_m24", lambda u: wsc("m24", "a", "b")(base(u).sum(axis=1)), (grid(12, 4),)),
    ("kred_sum1_out_12x4_m24", lambda u: base(u).sum(axis=1), (grid(12, 4),)),
    ("kred_sum_all_12x4_m24", lambda u: base(u).sum(), (grid(12, 4),)),
    ("kred_max2_12x4_m24", lambda u: wsc("m24", "a", None)(base(u).max(axis=2)), (grid(12, 4),)),
    ("kred_grad_sum2_12x4_m24", grad_red, (grid(12, 4),)),
    ("kred_sum1_8x4_m222", lambda u: wsc("m222", "c", None)(base222(u).sum(axis=1)),
     (grid(8, 4),)),
    ("kdot_out_12x4_m24", lambda u: base(u) @ W, (grid(12, 4),)),
    ("kdot_12x4_m24", lambda u: wsc("m24", "a", None, None)(base(u) @ W), (grid(12, 4),)),
    ("kout_12x4_m24", base, (grid(12, 4),)),
    ("kmixed_12x4_m24",
     lambda u: wsc("m24", "a", None, "b")(base(u) * wsc("m24", "a", None, "b")(jnp.ones((2, 6, 4)) * 2)),
     (grid(12, 4),)),
]


if __name__ == "__main__":
    write(OUT, CASES)
