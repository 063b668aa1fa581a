"""Records JAX's mesh in context (jax.set_mesh): the shardings that PartitionSpecs given to
device_put, with_sharding_constraint, jit's in_shardings/out_shardings, reshard, auto_axes and
explicit_axes stand for, the types of Explicit-mode results, get_mesh, and the errors.

Writes tests/goldens/sharding/context_mesh.txt: "=== <case>" followed by one line per result
leaf, "<repr(sharding)> <committed 1/0>", or by a text (a type, a mesh), or by
"<ExceptionType>: <message>" for an error.
Run: python3 tools/goldens/gen_context_mesh.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sharding", "context_mesh.txt")

A, E = AxisType.Auto, AxisType.Explicit
mesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(A, A))
mesh2 = jax.make_mesh((2, 4), ("a", "b"), axis_types=(A, A))
emesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(E, E))
x = jnp.arange(32.0, dtype=jnp.float32).reshape(8, 4)
sq = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)
wsc = jax.lax.with_sharding_constraint


def under(m, fn):
    with jax.set_mesh(m):
        return fn()


def leaves(tree):
    return "\n".join(f"{leaf.sharding} {int(leaf.committed)}" for leaf in jax.tree.leaves(tree))


def typeof(tree):
    return "\n".join(str(jax.typeof(leaf)) for leaf in jax.tree.leaves(tree))


RESULTS = [
    ("device_put", lambda: under(mesh, lambda: jax.device_put(x, P("a")))),
    ("device_put_tree", lambda: under(mesh, lambda: jax.device_put(
        (x, {"w": x}), (P("a"), {"w": P(None, "b")})))),
    ("jit_out_shardings", lambda: under(mesh, lambda: jax.jit(
        lambda v: v * 2, out_shardings=P(None, "b"))(jax.device_put(x, P("a"))))),
    ("jit_in_shardings", lambda: under(mesh, lambda: jax.jit(
        lambda v: v + 1, in_shardings=P("a", "b"))(x))),
    ("jit_tree_shardings", lambda: under(mesh, lambda: jax.jit(
        lambda v, w: (v + w, v - w), in_shardings=(P("a"), P("a")),
        out_shardings=(P(), P("b")))(x, x))),
    ("wsc_in_jit", lambda: under(mesh, lambda: jax.jit(lambda v: wsc(v * 2, P("b")))(x))),
    ("nested_inner", lambda: under(mesh, lambda: under(mesh2, lambda: jax.device_put(x, P("a"))))),
    ("nested_after", lambda: under(mesh, lambda: (under(mesh2, lambda: None),
                                                  jax.device_put(x, P("a")))[1])),
    ("jit_called_under_other_mesh", lambda: (
        lambda f: (under(mesh, lambda: f(x)), under(mesh2, lambda: f(x))))(
            jax.jit(lambda v: v * 3, out_shardings=P("a")))),
]

TYPES = [
    ("explicit_device_put", lambda: under(emesh, lambda: jax.device_put(x, P("a")))),
    ("explicit_reshard", lambda: under(emesh, lambda: jax.sharding.reshard(
        jax.device_put(x, P("a")), P(None, "b")))),
    ("explicit_jit_reshard", lambda: under(emesh, lambda: jax.jit(
        lambda v: jax.sharding.reshard(v * 2, P("b")))(jax.device_put(x, P("a"))))),
    ("auto_axes_spec", lambda: under(emesh, lambda: jax.sharding.auto_axes(
        lambda u, w: u @ w, out_sharding=P("a"))(
            jax.device_put(sq, P(None, "a")), jax.device_put(sq, P("a", None))))),
    ("matmul_out_sharding", lambda: under(emesh, lambda: jnp.matmul(
        jax.device_put(sq, P(None, "a")), jax.device_put(sq, P("a", None)), out_sharding=P("a")))),
    ("einsum_out_sharding", lambda: under(emesh, lambda: jnp.einsum(
        "ij,jk->ik", jax.device_put(sq, P(None, "a")), jax.device_put(sq, P("a", None)),
        out_sharding=P(None, "b")))),
    ("reshape_out_sharding", lambda: under(emesh, lambda: jnp.reshape(
        jax.device_put(x, P("a")), (4, 8), out_sharding=P("a")))),
    ("explicit_axes_spec", lambda: under(mesh, lambda: jax.jit(lambda u: jax.sharding.explicit_axes(
        lambda v: jnp.sum(v, axis=0), in_sharding=P("a", "b"))(u))(
            jax.device_put(sq, P("a", "b"))))),
]

TEXTS = [
    ("get_mesh_inside", lambda: under(mesh, lambda: str(jax.sharding.get_mesh()))),
    ("get_mesh_outside", lambda: str(jax.sharding.get_mesh())),
]

ERRORS = [
    ("unknown_axis", lambda: under(mesh, lambda: jax.device_put(x, P("zz")))),
    ("indivisible", lambda: under(mesh, lambda: jax.device_put(jnp.ones((3, 4)), P("a")))),
    ("jit_out_without_mesh", lambda: jax.jit(lambda v: v * 2, out_shardings=P(None, "b"))(x)),
    ("jit_in_without_mesh", lambda: jax.jit(lambda v: v * 2, in_shardings=P("a"))(x)),
    ("matmul_out_sharding_without_mesh", lambda: jnp.matmul(sq, sq, out_sharding=P("a"))),
    ("reshard_auto_axis", lambda: under(mesh, lambda: jax.sharding.reshard(x, P("b")))),
    ("auto_axes_other_mesh", lambda: under(emesh, lambda: jax.sharding.auto_axes(
        lambda u: u * 2, out_sharding=NamedSharding(
            jax.make_mesh((2, 4), ("a", "b"), axis_types=(E, E)), P("a")))(
                jax.device_put(x, P("a"))))),
]


def error_text(e):
    # JAX appends the Python source line of the call; a C++ caller has none.
    return f"{type(e).__name__}: {e}".split(" This error occurs at source:")[0]


def main():
    blocks = []
    for name, fn in RESULTS:
        blocks.append((name, leaves(fn())))
    for name, fn in TYPES:
        blocks.append((name, typeof(fn())))
    for name, fn in TEXTS:
        blocks.append((name, fn()))
    for name, fn in ERRORS:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- the message is what is recorded
            blocks.append((name, error_text(e)))
        else:
            raise SystemExit(f"{name}: JAX raised nothing")
    with open(OUT, "w") as out:
        for name, text in blocks:
            out.write(f"=== {name}\n{text}\n")


if __name__ == "__main__":
    main()
