"""Records JAX's sharding API around the partitioner: the jaxprs of with_sharding_constraint
under jit, grad, jvp and vmap, the shardings eager calls commit to, and the messages for bad
shardings (ranks, prefixes, PartitionSpecs without a mesh, reshard's Auto-axis rule).

Writes tests/goldens/sharding/:
  api_jaxprs.txt    "=== <case>" followed by the exact make_jaxpr text
  api_results.txt   "=== <case>" followed by one line per result leaf: its repr(sharding) and
                    whether it is committed (1/0)
  api_errors.txt    "=== <case>" followed by "<ExceptionType>: <message>"
Run: python3 tools/goldens/gen_sharding_api.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_pprint_use_color", False)
import jax.numpy as jnp  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sharding")

# Auto axes, as spmd's meshes (jax.make_mesh gives Explicit axes since 0.9).
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("x", "y"))
sx = NamedSharding(mesh, P("x"))
sy = NamedSharding(mesh, P(None, "y"))
rep = NamedSharding(mesh, P())
dev1 = SingleDeviceSharding(jax.devices()[1])
wsc = jax.lax.with_sharding_constraint

a = jnp.arange(16.0, dtype=jnp.float32).reshape(8, 2)
v = jnp.arange(4.0, dtype=jnp.float32)
u = jnp.ones((6, 2), jnp.float32)


def scaled(x):
    return wsc(x * 2.0, sx)


sxy = NamedSharding(mesh, P("x", "y"))
# jit with in/out shardings called inside another trace: JAX keeps them as pjit params.
inner_in = jax.jit(lambda x: jnp.sin(x) * 2.0, in_shardings=sxy, out_shardings=sy)
inner_out = jax.jit(lambda x: x * 2.0, out_shardings=sxy)
inner_pair = jax.jit(lambda x, w: (x * 2.0, w), in_shardings=(sxy, None))
m = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)
emesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
exy = NamedSharding(emesh, P("x", "y"))


JAXPRS = [
    ("jit", lambda: jax.make_jaxpr(jax.jit(scaled))(a)),
    ("grad", lambda: jax.make_jaxpr(jax.grad(lambda x: scaled(x).sum()))(a)),
    ("jvp", lambda: jax.make_jaxpr(lambda x: jax.jvp(scaled, (x,), (x,)))(a)),
    ("vmap0", lambda: jax.make_jaxpr(jax.vmap(scaled))(jnp.ones((3, 8, 2), jnp.float32))),
    ("vmap1", lambda: jax.make_jaxpr(jax.vmap(lambda x: wsc(x, sy), in_axes=1))(
        jnp.ones((8, 3, 2), jnp.float32))),
    ("single", lambda: jax.make_jaxpr(lambda x: wsc(x, dev1))(a)),
    ("copy", lambda: jax.make_jaxpr(jnp.copy)(a)),
    ("nested_jit", lambda: jax.make_jaxpr(lambda x: inner_in(x) + 1.0)(m)),
    ("nested_jit_pair", lambda: jax.make_jaxpr(lambda x, w: inner_pair(x, w))(m, v)),
    ("nested_jit_vmap", lambda: jax.make_jaxpr(jax.vmap(inner_out))(jnp.ones((3, 8, 8)))),
    ("device_put_in_jit", lambda: jax.make_jaxpr(lambda x: jax.device_put(x, sxy) * 2.0)(m)),
    ("device_put_tree_in_jit", lambda: jax.make_jaxpr(
        lambda x, w: jax.device_put((x, w), (sxy, None)))(m, v)),
    ("device_put_device_in_jit", lambda: jax.make_jaxpr(
        lambda x: jax.device_put(x, jax.devices()[1]))(m)),
    ("device_put_explicit", lambda: jax.make_jaxpr(lambda x: jax.device_put(x, exy) * 2.0)(m)),
    ("device_put_vmap", lambda: jax.make_jaxpr(jax.vmap(
        lambda x: jax.device_put(x, jax.devices()[1])))(jnp.ones((3, 8, 8)))),
    ("device_put_grad", lambda: jax.make_jaxpr(jax.grad(
        lambda x: jax.device_put(x, sxy).sum()))(m)),
]

RESULTS = [
    ("wsc_eager", lambda: wsc(a, sx)),
    ("wsc_eager_single", lambda: wsc(a, dev1)),
    ("wsc_tree", lambda: wsc({"a": a, "b": (a, v)}, {"a": sy, "b": (sx, rep)})),
    ("wsc_jit", lambda: jax.jit(scaled)(a)),
    ("device_put_tree", lambda: jax.device_put({"a": a, "b": (a, v)}, {"a": sx, "b": rep})),
    ("copy_sharded", lambda: jnp.copy(jax.device_put(a, sy))),
    ("reshard_no_axes_committed", lambda: jax.sharding.reshard(jax.device_put(a, sx), rep)),
    ("nested_jit_out_shardings", lambda: jax.jit(lambda x: inner_in(x) + 1.0)(m)),
    ("nested_jit_in_shardings_only", lambda: jax.jit(lambda x: jax.jit(
        lambda y: y * 2.0, in_shardings=sxy)(x))(m)),
    ("nested_jit_constraint", lambda: jax.jit(lambda x: jax.jit(
        lambda y: wsc(y * 2.0, sxy))(x))(m)),
    ("device_put_in_jit", lambda: jax.jit(lambda x: jax.device_put(x, sxy) * 2.0)(m)),
    ("device_put_device_in_jit", lambda: jax.jit(
        lambda x: jax.device_put(x, jax.devices()[1]))(m)),
    ("device_put_explicit", lambda: jax.jit(lambda x: jax.device_put(x, exy) * 2.0)(m)),
    ("grad_nested_jit", lambda: jax.jit(jax.grad(lambda x: inner_in(x).sum()))(m)),
]

ERRORS = [
    ("wsc_rank", lambda: wsc(v, NamedSharding(mesh, P("x", "y")))),
    ("wsc_rank_scalar", lambda: wsc(jnp.float32(1), sx)),
    ("wsc_indivisible_eager", lambda: wsc(u, sx)),
    ("wsc_spec_without_mesh", lambda: wsc(v, P("x"))),
    ("wsc_spec_without_mesh_jit", lambda: jax.jit(lambda x: wsc(x, P("x")))(v)),
    ("wsc_none", lambda: wsc(v, None)),
    ("wsc_prefix_too_long", lambda: wsc((v, v), (sx, sx, sx))),
    ("wsc_prefix_tuple_for_leaf", lambda: wsc(v, (sx,))),
    ("wsc_prefix_nested", lambda: wsc({"a": v, "b": (v, v)}, {"a": sx, "b": (rep,)})),
    ("device_put_prefix_too_long", lambda: jax.device_put((v, v), (sx, sx, sx))),
    ("device_put_prefix_tuple_for_leaf", lambda: jax.device_put(v, (sx,))),
    ("device_put_spec_without_mesh", lambda: jax.device_put(v, P("x"))),
    ("reshard_spec_without_mesh", lambda: jax.sharding.reshard(v, P("x"))),
    ("reshard_auto_axes", lambda: jax.sharding.reshard(v, sx)),
    ("reshard_single_device", lambda: jax.sharding.reshard(v, dev1)),
]


def error_text(e):
    # JAX appends the Python source line of the call; a C++ caller has none.
    return f"{type(e).__name__}: {e}".split(" This error occurs at source:")[0]


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "api_jaxprs.txt"), "w") as out:
        for name, fn in JAXPRS:
            out.write(f"=== {name}\n{fn()}\n")
    with open(os.path.join(OUT, "api_results.txt"), "w") as out:
        for name, fn in RESULTS:
            out.write(f"=== {name}\n")
            for leaf in jax.tree.leaves(fn()):
                out.write(f"{leaf.sharding} {int(leaf.committed)}\n")
    lines = []
    for name, fn in ERRORS:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- the message is what is recorded
            lines += ["=== " + name, error_text(e)]
        else:
            raise SystemExit(f"{name}: JAX raised nothing")
    with open(os.path.join(OUT, "api_errors.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
