"""Records JAX 0.10.2's checks of shard_map's specs on an Explicit mesh, outside and under vmap.

On a mesh whose axes are all Explicit, shard_map requires each argument's type to have its
in_spec (padded with None to the argument's rank) as its own spec. Under vmap of an argument
whose batch dim is split over an Explicit axis, that axis is vmapped away: the shard_map is
manual over the mesh's other axes only, so its specs may not name it (_check_specs), and the
arguments' types are compared without it. On a mesh with an Auto axis nothing is compared.

Writes, under tests/goldens/shard_map_explicit/:
  cases.txt    "=== <case>" blocks: "OK <jax.typeof of the result>", or an error
               "<ExceptionType>: <message>"
  values.npz   the results of the cases that run, by case name
Run: python3 tools/goldens/gen_shard_map_explicit.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "shard_map_explicit")
explicit = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
mixed = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit, AxisType.Auto))
v = np.arange(64.0, dtype=np.float32).reshape(8, 8)


def put(mesh, spec):
    return jax.device_put(v, NamedSharding(mesh, spec))


def twice(mesh, in_specs, out_specs):
    return jax.shard_map(lambda t: t * 2, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def added(mesh, in_specs, out_specs):
    return jax.shard_map(lambda s, t: s + t, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


E = explicit
CASES = {
    # Outside vmap: the in_spec against the argument's type.
    "typed_ab_spec_a": lambda: twice(E, P("a"), P("a"))(put(E, P("a", "b"))),
    "typed_ab_spec_ab": lambda: twice(E, P("a", "b"), P("a", "b"))(put(E, P("a", "b"))),
    "typed_a_spec_a": lambda: twice(E, P("a"), P("a"))(put(E, P("a"))),
    "replicated_spec_a": lambda: twice(E, P("a"), P("a"))(put(E, P())),
    "untyped_spec_a": lambda: twice(E, P("a"), P("a"))(v),
    "untyped_spec_none": lambda: twice(E, P(), P())(v),
    "second_arg_differs": lambda: added(E, (P("a"), P("a")), P("a"))(
        put(E, P("a")), put(E, P(None, "a"))),
    "mixed_mesh_not_compared": lambda: twice(mixed, P(None, "b"), P(None, "b"))(
        put(mixed, P("a"))),
    # Under vmap: the Explicit axis the batch dim is split over is not manual.
    "vmap_spec_b": lambda: jax.vmap(twice(E, P("b"), P("b")))(put(E, P("a", "b"))),
    "vmap_in_spec_vmapped_axis": lambda: jax.vmap(twice(E, P("a"), P("a")))(
        put(E, P("a", "b"))),
    "vmap_out_spec_vmapped_axis": lambda: jax.vmap(twice(E, P(), P("a")))(put(E, P("a", "b"))),
    "vmap_spec_unsplit": lambda: jax.vmap(twice(E, P(None), P(None)))(put(E, P("a", "b"))),
    "vmap_axis1_spec_b": lambda: jax.vmap(twice(E, P("b"), P("b")), in_axes=1)(
        put(E, P(None, "a"))),
    "vmap_axis1_spec_vmapped_axis": lambda: jax.vmap(twice(E, P("a"), P("a")), in_axes=1)(
        put(E, P(None, "a"))),
    "vmap_tuple_specs_vmapped_axis": lambda: jax.vmap(added(E, (P("b"), P("a")), P("b")))(
        put(E, P("a", "b")), put(E, P("a"))),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    blocks, values = [], {}
    for name, fn in CASES.items():
        try:
            r = fn()
            blocks.append(f"=== {name}\nOK {jax.typeof(r)}")
            values[name] = np.asarray(r)
        except Exception as e:  # noqa: BLE001 -- the message is what is recorded
            blocks.append(f"=== {name}\n{type(e).__name__}: {e}")
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("\n".join(blocks) + "\n")
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
