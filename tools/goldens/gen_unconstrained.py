"""Records JAX 0.10.2's open (UNCONSTRAINED) dims of sharding constraints: the result specs of jit
over constraints with P.UNCONSTRAINED in several positions on 1-D and 2-D meshes, vmap of a
constraint (its batching rule makes the batch dim UNCONSTRAINED) with in_axes 0 and 1, under
grad, eagerly, and the errors where JAX refuses such a spec: jit's in/out shardings,
device_put, shard_map's in_specs and out_specs, and an op's out_sharding (refused with the
NamedSharding on an all-Explicit mesh, a KeyError on a mesh with Auto axes).

Writes, under tests/goldens/sharding/:
  unconstrained.txt         "=== <case>" blocks: "spec <result .sharding.spec>" per result leaf,
                            then the jaxpr of the function (make_jaxpr), or an error
                            "<ExceptionType>: <message>"
  unconstrained_values.npz  the result leaves, as "<case>/<leaf index>"
Run: python3 tools/goldens/gen_unconstrained.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sharding")
U = P.UNCONSTRAINED
A = AxisType.Auto
mesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(A, A))
mesh8 = jax.make_mesh((8,), ("x",), axis_types=(A,))
wsc = jax.lax.with_sharding_constraint


def S(m, *spec):
    return NamedSharding(m, P(*spec))


def put(m, v, *spec):
    return jax.device_put(v, S(m, *spec))


def c(m, *spec):
    """The constraint of `spec` on mesh `m`, as a function."""
    return lambda v: wsc(v, S(m, *spec))


x88 = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)
x164 = jnp.arange(64.0, dtype=jnp.float32).reshape(16, 4)
x848 = jnp.arange(256.0, dtype=jnp.float32).reshape(8, 4, 8)
x488 = jnp.arange(256.0, dtype=jnp.float32).reshape(4, 8, 8)

# name -> (function, arguments): jit(function)(*arguments) gives the results, make_jaxpr the text.
CASES = {
    "first_open": (c(mesh, U, "b"), [put(mesh, x88, "a", None)]),
    "second_open": (c(mesh, "a", U), [put(mesh, x88, None, "b")]),
    "both_open": (c(mesh, U, U), [put(mesh, x88, "a", "b")]),
    "open_uncommitted": (c(mesh, U, "b"), [x88]),
    "open_takes_other_axis": (c(mesh, U, "a"), [put(mesh, x88, "b", None)]),
    "open_axis_used_by_closed_dim": (c(mesh, U, "a"), [put(mesh, x88, "a", None)]),
    "mesh8_open_first": (c(mesh8, U, None), [put(mesh8, x164, "x")]),
    "mesh8_closed_first_open_second": (c(mesh8, None, U), [put(mesh8, x88, "x", None)]),
    "mesh8_open_second": (c(mesh8, None, U), [put(mesh8, x88, None, "x")]),
    "open_after_elementwise": (lambda v: wsc(jnp.sin(v) * 2.0, S(mesh, U, "b")),
                               [put(mesh, x88, "a")]),
    "open_from_consumer": (lambda v: (lambda y: (y, wsc(y * 2.0, S(mesh, "a", None))))(
        wsc(v, S(mesh, U, None))), [x88]),
    "open_3d_ends": (c(mesh, U, None, U), [put(mesh, x848, "a", None, "b")]),
    "open_3d_middle": (c(mesh, None, U, "b"), [put(mesh, x488, None, "a", None)]),
    "vmap_example": (jax.vmap(c(mesh, "b")), [put(mesh, x88, "a", None)]),
    "vmap_in_axes_1": (jax.vmap(c(mesh, "b"), in_axes=1), [put(mesh, x88, None, "a")]),
    "vmap_replicated_spec": (jax.vmap(c(mesh, )), [put(mesh, x88, "a", "b")]),
    "vmap_of_open": (jax.vmap(c(mesh, U, "b")), [put(mesh, x488, "a", None, None)]),
    "vmap_mesh8": (jax.vmap(c(mesh8, None)), [put(mesh8, x88, "x")]),
    "vmap_in_axes_1_3d": (jax.vmap(c(mesh, "b", None), in_axes=1),
                          [put(mesh, x848, None, None, "a")]),
    "open_in_loop": (lambda v: jax.lax.fori_loop(
        0, 3, lambda i, carry: wsc(carry * 2.0, S(mesh, U, "b")), v), [put(mesh, x88, "a")]),
    "grad_open": (jax.grad(lambda v: jnp.sum(jnp.sin(wsc(v, S(mesh, U, "b"))))),
                  [put(mesh, x88, "a")]),
    "grad_vmap": (jax.grad(lambda v: jnp.sum(jax.vmap(lambda r: wsc(r * r, S(mesh, "b")))(v))),
                  [put(mesh, x88, "a")]),
}

# Constraints applied outside jit: name -> (constraint, argument).
EAGER = {
    "eager_committed": (S(mesh, U, "b"), put(mesh, x88, "a", None)),
    "eager_uncommitted": (S(mesh, U, "b"), x88),
}

emesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
xmesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit, A))
x1616 = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def smap(m, in_spec, out_spec):
    return jax.shard_map(lambda v: v, mesh=m, in_specs=in_spec, out_specs=out_spec)


def in_context(m, fn):
    with jax.set_mesh(m):
        return fn()


ERRORS = {
    "in_shardings": lambda: jax.jit(lambda v: v * 2, in_shardings=S(mesh, U, "b"))(x88),
    "out_shardings": lambda: jax.jit(lambda v: v * 2, out_shardings=S(mesh, U, "b"))(x88),
    "device_put": lambda: jax.device_put(x88, S(mesh, U, "b")),
    "shard_map_in_specs": lambda: smap(mesh, P(U, "b"), P(None, "b"))(x88),
    "shard_map_out_specs": lambda: smap(mesh, P("a", "b"), P(U, "b"))(x88),
    "shard_map_tuple_in_specs": lambda: jax.shard_map(
        lambda v, w: v, mesh=mesh, in_specs=(P("a"), P(U)), out_specs=P("a"))(x88, x88),
    "explicit_reshape_out_sharding": lambda: jnp.reshape(
        put(emesh, x1616, "a"), (16, 4, 4), out_sharding=S(emesh, "a", U, None)),
    "explicit_matmul_out_spec": lambda: in_context(emesh, lambda: jnp.matmul(
        put(emesh, x1616, "a"), put(emesh, x1616, None, "b"), out_sharding=P(U, None))),
    "mixed_reshape_out_sharding": lambda: jnp.reshape(
        put(xmesh, x1616, "a"), (16, 4, 4), out_sharding=S(xmesh, "a", U, None)),
}


def specs(leaves):
    return "\n".join(f"spec {leaf.sharding.spec}" for leaf in leaves)


def main():
    blocks, values = [], {}
    for name, (fn, args) in CASES.items():
        leaves = jax.tree.leaves(jax.jit(fn)(*args))
        text = specs(leaves) + "\n" + str(jax.make_jaxpr(fn)(*args))
        blocks.append((name, text))
        for i, leaf in enumerate(leaves):
            values[f"{name}/{i}"] = np.asarray(leaf)
    for name, (sharding, arg) in EAGER.items():
        y = wsc(arg, sharding)
        blocks.append((name, specs([y]) + f"\ncommitted {int(y.committed)}"))
        values[f"{name}/0"] = np.asarray(y)
    for name, fn in ERRORS.items():
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- the message is what is recorded
            blocks.append((name, f"{type(e).__name__}: {e}"))
        else:
            raise SystemExit(f"{name}: JAX raised nothing")
    with open(os.path.join(OUT, "unconstrained.txt"), "w") as out:
        for name, text in blocks:
            out.write(f"=== {name}\n{text}\n")
    np.savez(os.path.join(OUT, "unconstrained_values.npz"), **values)


if __name__ == "__main__":
    main()
