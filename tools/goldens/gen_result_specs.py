"""Records how JAX 0.10.2 prints the sharding of a result whose PartitionSpec has trailing Nones:
jit's out_shardings are kept as given (P('a', None) stays P('a', None)), device_put keeps its
spec, a jit result split like its first sharded argument takes that argument's sharding, and any
other result gets the spec JAX reads back from the compiled program, which has no trailing Nones
(results of in_shardings on uncommitted arguments among them, unless a mesh is in context).
grad and value_and_grad outside jit run op by op, each op an eager jit of one primitive, so a
gradient prints as the last op of the backward pass leaves it; under jit they follow jit's rule.
shard_map results print their out_specs as given; under jit, jit's rule. pmap results are
NamedShardings on the pmap's one-axis mesh ('_internal_pmap_axis_name' without axis_name).

Writes tests/goldens/sharding/result_specs.txt: "=== <case>" followed by one line per result
leaf, "<repr(sharding)>".
Run: /work/jaxenv/bin/python tools/goldens/gen_result_specs.py   (needs jax 0.10.2; the tests
do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sharding", "result_specs.txt")

A = AxisType.Auto
m = jax.make_mesh((8,), ("a",), axis_types=(A,))
m2 = jax.make_mesh((4, 2), ("a", "b"), axis_types=(A, A))
x = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)
x3 = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 4, 2)


def S(*spec):
    return NamedSharding(m, P(*spec))


def S2(*spec):
    return NamedSharding(m2, P(*spec))


def put(v, s):
    return jax.device_put(v, s)


def under(mesh, fn):
    with jax.set_mesh(mesh):
        return fn()


def double(v):
    return v * 2


def loss_sin(w):
    return jnp.sum(jnp.sin(w) * 2)


def loss_square(w):
    return jnp.sum(w * w)


def loss_product(u, v):
    return jnp.sum(u * v)


def sm(spec, mesh=m):
    return jax.shard_map(double, mesh=mesh, in_specs=spec, out_specs=spec)


def sm_psum(out_spec):
    return jax.shard_map(lambda v: jax.lax.psum(v, "a"), mesh=m, in_specs=P("a"),
                         out_specs=out_spec)


RESULTS = [
    # out_shardings: the given spec, as given.
    ("out_a_none", lambda: jax.jit(double, out_shardings=S("a", None))(x)),
    ("out_none_a", lambda: jax.jit(double, out_shardings=S(None, "a"))(x)),
    ("out_none_none", lambda: jax.jit(double, out_shardings=S(None, None))(x)),
    ("out_a", lambda: jax.jit(double, out_shardings=S("a"))(x)),
    ("out_empty", lambda: jax.jit(double, out_shardings=S())(x)),
    ("out_a_none_none_3d", lambda: jax.jit(double, out_shardings=S("a", None, None))(x3)),
    ("out_a_none_committed", lambda: jax.jit(double, out_shardings=S("a", None))(
        put(x, S("a")))),
    ("out_a_none_mesh2", lambda: jax.jit(double, out_shardings=S2("a", None))(x)),
    ("out_tree", lambda: jax.jit(lambda v: (v, v.sum(1)), out_shardings=(
        S("a", None), S("a")))(x)),
    # device_put: its spec.
    ("put_a_none", lambda: put(x, S("a", None))),
    ("put_none_none", lambda: put(x, S(None, None))),
    ("put_a", lambda: put(x, S("a"))),
    ("put_a_none_none_3d", lambda: put(x3, S("a", None, None))),
    ("put_moved_a_none", lambda: put(put(x, S(None, "a")), S("a", None))),
    # in_shardings on an uncommitted argument: the spec read back from the program.
    ("in_a_none", lambda: jax.jit(double, in_shardings=S("a", None))(x)),
    ("in_none_none", lambda: jax.jit(double, in_shardings=S(None, None))(x)),
    ("in_a_none_mesh2", lambda: jax.jit(double, in_shardings=S2("a", None))(x)),
    ("in_a_none_in_context", lambda: under(m, lambda: jax.jit(double, in_shardings=S("a", None))(
        x))),
    ("in_a_none_committed", lambda: jax.jit(double, in_shardings=S("a", None))(
        put(x, S("a", None)))),
    # Committed arguments: the first one's sharding when the result is split like it.
    ("committed_a_none", lambda: jax.jit(double)(put(x, S("a", None)))),
    ("committed_none_none", lambda: jax.jit(double)(put(x, S(None, None)))),
    ("committed_a", lambda: jax.jit(double)(put(x, S("a")))),
    ("committed_a_none_mesh2", lambda: jax.jit(double)(put(x, S2("a", None)))),
    ("committed_a_none_3d", lambda: jax.jit(double)(put(x3, S("a", None, None)))),
    ("committed_sum", lambda: jax.jit(lambda v: v.sum(1))(put(x, S("a", None)))),
    ("committed_transpose", lambda: jax.jit(lambda v: v.T)(put(x, S("a", None)))),
    ("committed_first_a_none", lambda: jax.jit(lambda u, v: u + v)(
        put(x, S("a", None)), put(x, S("a")))),
    ("committed_first_a", lambda: jax.jit(lambda u, v: u + v)(
        put(x, S("a")), put(x, S("a", None)))),
    ("committed_second", lambda: jax.jit(lambda u, v: u + v)(x, put(x, S("a", None)))),
    ("committed_after_scalar", lambda: jax.jit(lambda s, v: v * s)(
        jnp.float32(2.0), put(x, S("a", None)))),
    ("in_first_committed_second", lambda: jax.jit(lambda u, v: u + v, in_shardings=(
        S("a", None), None))(x, put(x, S("a")))),
    ("committed_two_results", lambda: jax.jit(lambda v: (v + 1, v.T))(put(x, S("a", None)))),
    ("eager_a_none", lambda: put(x, S("a", None)) * 2),
    ("eager_none_none", lambda: put(x, S(None, None)) + 1),
    # grad and value_and_grad: op by op outside jit, jit's rule inside.
    ("grad_sin", lambda: jax.grad(loss_sin)(put(x, S("a", None)))),
    ("grad_square", lambda: jax.grad(loss_square)(put(x, S("a", None)))),
    ("grad_square_a", lambda: jax.grad(loss_square)(put(x, S("a")))),
    ("grad_square_none_none", lambda: jax.grad(loss_square)(put(x, S(None, None)))),
    ("grad_square_mesh2", lambda: jax.grad(loss_square)(put(x, S2("a", "b")))),
    ("grad_two_args", lambda: jax.grad(loss_product, argnums=(0, 1))(
        put(x, S("a", None)), put(x, S("a")))),
    ("value_and_grad_sin", lambda: jax.value_and_grad(loss_sin)(put(x, S("a", None)))),
    ("jit_grad_sin", lambda: jax.jit(jax.grad(loss_sin))(put(x, S("a", None)))),
    ("jit_grad_sin_a", lambda: jax.jit(jax.grad(loss_sin))(put(x, S("a")))),
    ("jit_grad_sin_none_a", lambda: jax.jit(jax.grad(loss_sin))(put(x, S(None, "a")))),
    ("jit_grad_sin_mesh2", lambda: jax.jit(jax.grad(loss_sin))(put(x, S2("a", None)))),
    ("jit_grad_two_args", lambda: jax.jit(jax.grad(loss_product, argnums=(0, 1)))(
        put(x, S("a", None)), put(x, S("a")))),
    ("jit_value_and_grad_sin", lambda: jax.jit(jax.value_and_grad(loss_sin))(
        put(x, S("a", None)))),
    # shard_map: the out_specs as given; under jit, jit's rule.
    ("sm_a_none", lambda: sm(P("a", None))(x)),
    ("sm_a", lambda: sm(P("a"))(x)),
    ("sm_none_a", lambda: sm(P(None, "a"))(x)),
    ("sm_a_none_committed", lambda: sm(P("a", None))(put(x, S("a", None)))),
    ("sm_psum_empty", lambda: sm_psum(P())(x)),
    ("sm_psum_none_none", lambda: sm_psum(P(None, None))(x)),
    ("sm_mesh2_a_b", lambda: sm(P("a", "b"), m2)(x)),
    ("sm_mesh2_a_none", lambda: sm(P("a", None), m2)(x)),
    ("jit_sm_a_none", lambda: jax.jit(sm(P("a", None)))(x)),
    ("jit_sm_a_none_committed", lambda: jax.jit(sm(P("a", None)))(put(x, S("a", None)))),
    ("grad_sm_a_none", lambda: jax.grad(lambda v: jnp.sum(sm(P("a", None))(v) ** 2))(
        put(x, S("a", None)))),
    ("grad_sm_a_none_uncommitted", lambda: jax.grad(
        lambda v: jnp.sum(sm(P("a", None))(v) ** 2))(x)),
    # pmap: a NamedSharding on the pmap's mesh.
    ("pmap", lambda: jax.pmap(double)(x)),
    ("pmap_named", lambda: jax.pmap(double, axis_name="i")(x)),
    ("pmap_3d", lambda: jax.pmap(double)(x3)),
    ("pmap_committed", lambda: jax.pmap(double)(put(x, S("a", None)))),
    ("pmap_out_axes_1", lambda: jax.pmap(double, out_axes=1)(x)),
    ("pmap_out_axes_none", lambda: jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i",
                                            out_axes=None)(x)),
]


def leaves(tree):
    return "\n".join(repr(leaf.sharding) for leaf in jax.tree.leaves(tree))


def main():
    text = "".join(f"=== {name}\n{leaves(fn())}\n" for name, fn in RESULTS)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
