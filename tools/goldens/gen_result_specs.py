"""Records how JAX 0.10.2 prints the sharding of a result whose PartitionSpec has trailing Nones:
jit's out_shardings are kept as given (P('a', None) stays P('a', None)), device_put keeps its
spec, a jit result split like its first sharded argument takes that argument's sharding, and any
other result gets the spec JAX reads back from the compiled program, which has no trailing Nones
(results of in_shardings on uncommitted arguments among them, unless a mesh is in context).

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
