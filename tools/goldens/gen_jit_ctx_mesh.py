"""Records JAX 0.10.2's jit equations as make_jaxpr prints them, for
tests/transforms/jit_ctx_mesh_test.cpp: `jit[name=g ctx_mesh=... jaxpr={...}]`.

A jit equation names the function it calls (name=g) and, when a mesh is in context, prints it as
ctx_mesh: the mesh jax.set_mesh put in context (its repr, Auto or Explicit axes); without one,
inside a shard_map body whose mesh keeps an Explicit axis (a vmapped shard_map manual over 'b'
only), the body's abstract mesh (that axis Explicit, the manual one Manual); else nothing (a body
manual over every axis, an Auto mesh). The equations transformation makes from a call (vmap's,
jvp's, the linearized and transposed ones) keep its ctx_mesh.

Writes, under tests/goldens/jit_ctx_mesh/:
  cases.txt    "=== <case>" blocks, each a jaxpr
  values.npz   each case's result, by case name
Run: python3 tools/goldens/gen_jit_ctx_mesh.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import contextlib  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from golden_blocks import write_blocks  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

jax.config.update("jax_pprint_use_color", False)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "jit_ctx_mesh")
A = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
E = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
x8 = np.arange(8.0, dtype=np.float32)
v = np.arange(64.0, dtype=np.float32).reshape(8, 8)


def g(x):
    return lax.mul(lax.sin(x), 2.0)


def plus_one(x):
    return lax.add(jax.jit(g)(x), 1.0)


def outer(x):
    return lax.add(jax.jit(g)(x), 1.0)


def smap(mesh, in_specs, out_specs):
    return jax.shard_map(lambda t: jax.jit(g)(t), mesh=mesh, in_specs=in_specs,
                         out_specs=out_specs)


def summed_g(x):
    return lax.reduce_sum(jax.jit(g)(x), (0,))


# name -> (mesh in context or None, function made afresh, arguments made afresh)
CASES = {
    "nested_no_mesh": (None, lambda: plus_one, lambda: [x8]),
    "nested_auto": (A, lambda: plus_one, lambda: [x8]),
    "nested_explicit": (E, lambda: plus_one, lambda: [x8]),
    "nested_explicit_committed": (E, lambda: plus_one,
                                  lambda: [jax.device_put(x8, NamedSharding(E, P("a")))]),
    "outer_jit_explicit": (E, lambda: jax.jit(outer), lambda: [x8]),
    "outer_jit_committed_no_mesh": (None, lambda: jax.jit(outer),
                                    lambda: [jax.device_put(v, NamedSharding(E, P("a", "b")))]),
    "vmap_auto": (A, lambda: jax.vmap(jax.jit(g)), lambda: [v]),
    "jvp_explicit": (E, lambda: lambda x: jax.jvp(jax.jit(g), (x,), (x,)), lambda: [x8]),
    "vjp_auto": (A, lambda: lambda x: jax.vjp(jax.jit(g), x)[1](x), lambda: [x8]),
    "smap_auto": (None, lambda: smap(A, P("a"), P("a")), lambda: [x8]),
    "smap_auto_set_mesh": (A, lambda: smap(A, P("a"), P("a")), lambda: [x8]),
    "smap_explicit": (None, lambda: smap(E, P("a", "b"), P("a", "b")),
                      lambda: [jax.device_put(v, NamedSharding(E, P("a", "b")))]),
    "smap_explicit_set_mesh": (E, lambda: smap(E, P("a", "b"), P("a", "b")),
                               lambda: [jax.device_put(v, NamedSharding(E, P("a", "b")))]),
    "partial_manual": (None, lambda: jax.vmap(smap(E, P("b"), P("b"))),
                       lambda: [jax.device_put(v, NamedSharding(E, P("a", "b")))]),
    "partial_manual_set_mesh": (E, lambda: jax.vmap(smap(E, P("b"), P("b"))),
                                lambda: [jax.device_put(v, NamedSharding(E, P("a", "b")))]),
    "partial_manual_under_jit": (E, lambda: jax.jit(jax.vmap(smap(E, P("b"), P("b")))),
                                 lambda: [jax.device_put(v, NamedSharding(E, P("a", "b")))]),
}


def main():
    cases, values = {}, {}
    for name, (mesh, make, args) in CASES.items():
        with jax.set_mesh(mesh) if mesh is not None else contextlib.nullcontext():
            cases[name] = str(jax.make_jaxpr(make())(*args()))
            out = make()(*args())
        leaves = jax.tree.leaves(out)
        for i, leaf in enumerate(leaves):
            values[name if len(leaves) == 1 else f"{name}.{i}"] = np.asarray(leaf)
    write_blocks(OUT, cases, values)


if __name__ == "__main__":
    main()
