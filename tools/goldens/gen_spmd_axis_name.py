"""Records JAX 0.10.2's vmap with spmd_axis_name: the batching rules of sharding constraints,
jit's in/out shardings and shard_map split the batch dim over the named mesh axes. Cases on
Auto 1-D and 2-D meshes (a constraint inside vmap, in_axes 1, a tuple of names, nested vmaps
each with a name, jit with in/out shardings, shard_map, psum over the vmapped axis_name), on an
Explicit mesh (spmd_axis_name equal to the mapped dim's axes, or naming an unsplit mapped dim),
and JAX's errors.

Writes, under tests/goldens/sharding/:
  spmd_axis_name.txt         "=== <case>" blocks: "spec <result .sharding.spec>" per result
                             leaf of jit(f), "eager <spec>" per leaf of f run eagerly, then the
                             jaxpr of f (make_jaxpr); for Explicit cases "type <jax.typeof>" per
                             leaf; or an error "<ExceptionType>: <message>"
  spmd_axis_name_values.npz  the result leaves, as "<case>/<leaf index>"
Run: python3 tools/goldens/gen_spmd_axis_name.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

# The meshes, arrays and helpers of the open-dims goldens (S, put, c: a constraint as a function).
from gen_unconstrained import (OUT, S, c, emesh, mesh, mesh8, put, wsc, x88, x848,  # noqa: E402
                               x1616)


def twice_jit(m, spec):
    return jax.jit(lambda v: v * 2.0, in_shardings=S(m, *spec), out_shardings=S(m, *spec))


def smap(m, in_spec, out_spec, body, check_vma=True):
    return jax.shard_map(body, mesh=m, in_specs=in_spec, out_specs=out_spec, check_vma=check_vma)


# name -> (function, arguments): jit(function)(*arguments) gives the results, make_jaxpr the text.
CASES = {
    "wsc_mesh8": (jax.vmap(c(mesh8, None), spmd_axis_name="x"), [x88]),
    "wsc_2d": (jax.vmap(c(mesh, "b"), spmd_axis_name="a"), [x88]),
    "wsc_in_axes_1": (jax.vmap(c(mesh, "b"), in_axes=1, spmd_axis_name="a"), [x88]),
    "wsc_trailing_none": (jax.vmap(c(mesh, "b", None), spmd_axis_name="a"), [x848]),
    "wsc_in_axes_2": (jax.vmap(c(mesh, None, "b"), in_axes=2, spmd_axis_name="a"), [x848]),
    "wsc_committed_elsewhere": (jax.vmap(c(mesh, None), spmd_axis_name="a"),
                                [put(mesh, x88, None, "a")]),
    "wsc_tuple_name": (jax.vmap(c(mesh, None), spmd_axis_name=("a", "b")), [x88]),
    "wsc_nested": (jax.vmap(jax.vmap(c(mesh, None), spmd_axis_name="b"), spmd_axis_name="a"),
                   [x848]),
    "wsc_nested_inner_unnamed": (jax.vmap(jax.vmap(c(mesh, None)), spmd_axis_name="a"),
                                 [x848]),
    "wsc_out_axes_1": (jax.vmap(c(mesh, "b"), out_axes=1, spmd_axis_name="a"), [x88]),
    "jit_in_out_shardings": (jax.vmap(twice_jit(mesh, ("b",)), spmd_axis_name="a"), [x88]),
    "jit_replicated_shardings": (jax.vmap(twice_jit(mesh, ()), spmd_axis_name="a"), [x88]),
    "jit_trailing_none": (jax.vmap(twice_jit(mesh, ("b", None)), spmd_axis_name="a"), [x848]),
    "jit_no_shardings": (jax.vmap(jax.jit(lambda v: jnp.sin(v)), spmd_axis_name="a"), [x88]),
    "shard_map": (jax.vmap(smap(mesh, P("b"), P("b"), lambda v: v * 2.0 + 1.0),
                           spmd_axis_name="a"), [x88]),
    "shard_map_psum": (jax.vmap(smap(mesh, P("b"), P(), lambda v: jax.lax.psum(v, "b")),
                                spmd_axis_name="a"), [x88]),
    "shard_map_in_axes_1": (jax.vmap(smap(mesh8, P(), P(), lambda v: v - jnp.sum(v)),
                                     in_axes=1, spmd_axis_name="x"), [x88]),
    "psum_over_axis_name": (jax.vmap(lambda v: wsc(v - jax.lax.pmean(v, "i"), S(mesh, "b")),
                                     axis_name="i", spmd_axis_name="a"), [x88]),
}

# Explicit mesh: name -> (function, arguments); types, specs and values of f run eagerly.
EXPLICIT = {
    "explicit_same_axes": (jax.vmap(lambda v: jnp.sin(v) * 2.0, spmd_axis_name="a"),
                           [put(emesh, x1616, "a", "b")]),
    "explicit_same_tuple": (jax.vmap(lambda v: v + 1.0, spmd_axis_name=("a", "b")),
                            [put(emesh, x1616, ("a", "b"), None)]),
    "explicit_unsplit_mapped_dim": (jax.vmap(lambda v: v * 3.0, spmd_axis_name="a"),
                                    [put(emesh, x1616, None, "b")]),
}

ERRORS = {
    "explicit_other_axes": lambda: jax.vmap(lambda v: v * 2.0, spmd_axis_name="b")(
        put(emesh, x1616, "a", None)),
    "explicit_tuple_vs_one": lambda: jax.vmap(lambda v: v * 2.0, spmd_axis_name=("a", "b"))(
        put(emesh, x1616, "a", None)),
    "wsc_spec_names_it": lambda: jax.vmap(c(mesh, "a"), spmd_axis_name="a")(x88),
    "wsc_spec_names_one_of_tuple": lambda: jax.jit(jax.vmap(c(mesh, ("b",)),
                                                            spmd_axis_name=("a", "b")))(x88),
    "shard_map_in_specs_name_it": lambda: jax.vmap(
        smap(mesh, P("a"), P("a"), lambda v: v), spmd_axis_name="a")(x88),
    "shard_map_out_specs_name_it": lambda: jax.vmap(
        smap(mesh, P("b"), P("a"), lambda v: v, check_vma=False), spmd_axis_name="a")(x88),
}


def specs(word, leaves):
    return "\n".join(f"{word} {leaf.sharding.spec}" if isinstance(leaf.sharding, NamedSharding)
                     else f"{word} {'committed' if leaf.committed else 'uncommitted'} single"
                     for leaf in leaves)


def error_text(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 -- the message is what is recorded
        return f"{type(e).__name__}: {e}"
    raise SystemExit("JAX raised nothing")


def main():
    blocks, values = [], {}
    for name, (fn, args) in CASES.items():
        leaves = jax.tree.leaves(jax.jit(fn)(*args))
        eager = jax.tree.leaves(fn(*args))
        text = (specs("spec", leaves) + "\n" + specs("eager", eager) + "\n" +
                str(jax.make_jaxpr(fn)(*args)))
        blocks.append((name, text))
        for i, (leaf, e) in enumerate(zip(leaves, eager)):
            np.testing.assert_allclose(np.asarray(leaf), np.asarray(e))
            values[f"{name}/{i}"] = np.asarray(leaf)
    for name, (fn, args) in EXPLICIT.items():
        leaves = jax.tree.leaves(fn(*args))
        text = "\n".join(f"type {jax.typeof(v)}" for v in leaves) + "\n" + specs("eager", leaves)
        blocks.append((name, text))
        for i, leaf in enumerate(leaves):
            values[f"{name}/{i}"] = np.asarray(leaf)
    for name, fn in ERRORS.items():
        blocks.append((name, error_text(fn)))
    with open(os.path.join(OUT, "spmd_axis_name.txt"), "w") as out:
        for name, text in blocks:
            out.write(f"=== {name}\n{text}\n")
    np.savez(os.path.join(OUT, "spmd_axis_name_values.npz"), **values)


if __name__ == "__main__":
    main()
