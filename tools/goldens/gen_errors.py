"""Records JAX's error texts for pmap, shard_map and collective misuse that spmd reports with
JAX's wording, for tests/transforms/pmap_errors_test.cpp, tests/transforms/shard_map_errors_test.cpp
and tests/prims/collective_errors_test.cpp. Writes tests/goldens/errors/api_errors.txt in the
block format of tests/goldens/seeds/extra_errors.txt: a line `=== <case>`, then
`<type(e).__name__>: <str(e)>` (possibly several lines) up to the next `=== ` line. Lines before
the first block start with `#` and say how each case was run.

A separate file from extra_errors.txt because gen_seeds.py rewrites every seed golden (its .npz
files carry timestamps), so it is not rerun to add cases.

Errors JAX 0.10.2 has no message of its own for (spmd keeps its own text and tests it exactly):
* pmap with inconsistent mapped sizes or more elements than devices: jax's IndivisibleError about
  its internal NamedSharding over '_internal_pmap_axis_name', raised while placing the input.
* pmap with a `devices` list whose length differs from the mapped size: either no error (fewer
  elements: the first devices run) or "cannot select an axis to squeeze out which has size not
  equal to one".
* ppermute with an index outside the axis: eager shard_map raises IndexError "list index out of
  range", vmap an AssertionError "Permutation doesn't match the axis size!", jit wraps indices
  modulo the axis size.
* psum with axis_index_groups inside shard_map with check_vma=True: NotImplementedError with an
  empty message.
* an in_spec naming an axis the mesh lacks: "shard_map in_specs argument must refer to an axis
  marked as manual (frozenset({'x', 'y'})), but:" followed by nothing, the set in no fixed order.
Run: python3 tools/goldens/gen_errors.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", False)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax._src import core  # noqa: E402
from jax._src.lax import parallel  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "errors")

# jax.make_mesh gives Explicit axes in 0.10; spmd's semantics are the Auto ones.
MESH_SOURCE = "mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ('x', 'y'))"

# (case, source of a zero-argument callable that raises, note)
CASES = [
    ("pmap_all_in_axes_none",
     "lambda: jax.pmap(lambda x: x * 2, in_axes=None)(jnp.zeros((8,)))", ""),
    ("vmap_in_axes_out_of_range",
     "lambda: jax.vmap(lambda x: x * 2, in_axes=2)(jnp.zeros((8, 3)))",
     "pmap in 0.10.2 raises IndexError 'tuple index out of range' here; older pmap shared this "
     "check (and wording) with vmap, so spmd's pmap uses it with 'pmap' for 'vmap'."),
    ("pmap_in_axes_count",
     "lambda: jax.pmap(lambda *args: args[0], in_axes=(0, 0, 0))(jnp.zeros((8,)), "
     "jnp.zeros((8,)))", ""),
    ("pmap_out_axes_count",
     "lambda: jax.pmap(lambda x: (x, x), out_axes=(0, 0, 0))(jnp.zeros((8,)))",
     "JAX names the prefix by an internal name, 'broadcast_prefix prefix_tree'; spmd says "
     "'pmap out_axes' (as vmap's message names its out_axes)."),
    ("shard_map_in_specs_count",
     "lambda: jax.shard_map(lambda *args: args[0], mesh=mesh, in_specs=(P('x'), P('x'), P('x')), "
     "out_specs=P('x'))(jnp.zeros((8,)), jnp.zeros((8,)))", ""),
    ("shard_map_out_specs_count",
     "lambda: jax.shard_map(lambda x: (x, x), mesh=mesh, in_specs=P('x'), "
     "out_specs=(P('x'), P('x'), P('x')))(jnp.zeros((8,)))", ""),
    ("pvary_already_varying",
     "lambda: jax.shard_map(lambda blk: core.pvary_p.bind(blk, axes=('x',)), mesh=mesh, "
     "in_specs=P('x'), out_specs=P('x'))(jnp.zeros((8,)))",
     "0.10.2 removed lax.pvary; lax.pcast(blk, 'x', to='varying') refuses earlier with "
     "\"Unsupported pcast from=varying, to='varying'\". The primitive's own check is reached by "
     "binding pvary_p."),
    ("psum_groups_positional_axes",
     "lambda: jax.shard_map(lambda blk: parallel.psum_p.bind(blk, axes=('x', 0), "
     "axis_index_groups=((0, 1), (2, 3))), mesh=mesh, in_specs=P('x'), out_specs=P('x'), "
     "check_vma=False)(jnp.zeros((8, 4)))",
     "The primitive's check; lax.psum refuses the same call earlier with 'axis_index_groups only "
     "supported for sums over just named axes'."),
    ("pbroadcast_source_out_of_range",
     "lambda: jax.vmap(lambda v: lax.pbroadcast(v, 'i', 5), axis_name='i')(jnp.zeros((4, 2)))",
     "An assertion in pbroadcast's batching rule (shard_map on CPU cannot lower pbroadcast)."),
]


def main():
    mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("x", "y"))
    ns = {"jax": jax, "jnp": jnp, "lax": lax, "P": P, "mesh": mesh, "core": core,
          "parallel": parallel}
    header = [f"# JAX {jax.__version__} on {jax.device_count()} CPU devices; {MESH_SOURCE}"]
    blocks = []
    for name, source, note in CASES:
        try:
            eval(source, ns)()
        except Exception as e:  # noqa: BLE001 -- recording whatever JAX raises
            blocks.append(f"=== {name}\n{type(e).__name__}: {e}\n")
        else:
            raise AssertionError(f"{name} did not raise")
        header.append(f"# {name}: {source}")
        if note:
            header.append(f"#   {note}")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "api_errors.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(header) + "\n" + "".join(blocks))


if __name__ == "__main__":
    main()
