"""Records JAX 0.10.2's vmap of shard_map and vmap with spmd_axis_name inside a shard_map body.

Batched shard_map (JAX's _shard_map_batch): the batch dim stays where in_axes put it, the specs
get it inserted there (pxla.batch_spec: None, or vmap's spmd_axis_name), the body is batched with
its own rules and the results keep the dims the body gives them (vmap's out_axes move them
after). In_axes 0, 1 and -1, out_axes 1, with and without spmd_axis_name, bodies that move the
batch dim (a reduction), a mix of batched and unbatched operands, an unbatched result.

vmap with spmd_axis_name naming manual axes inside a shard_map body (batching.py's
spmd_names_insert_pvary): the batched values are marked varying over those axes, so the result
must be split over them by out_specs (JAX's replication error otherwise). The bodies use lax's
functions, which bind primitives as spmd's operators do (jnp's are inline jits, whose batching
rule marks every batched operand varying, another path to the same types).

Writes, under tests/goldens/shard_map_batch/:
  cases.txt    "=== <case>" blocks: the jaxpr of the function (make_jaxpr), or an error
               "<ExceptionType>: <message>"
  values.npz   the result leaves, as "<case>/<leaf index>"
Run: python3 tools/goldens/gen_shard_map_batch.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

# The 4x2 Auto mesh and arrays of the open-dims goldens, and the error recorder of spmd_axis_name's.
from gen_spmd_axis_name import error_text  # noqa: E402
from gen_unconstrained import mesh, x88, x848  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "shard_map_batch")
w8 = np.arange(8.0, dtype=np.float32) / 8.0
s = np.float32(0.5)


def smap(in_specs, out_specs, body, check_vma=True):
    return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                         check_vma=check_vma)


def affine(v):
    return lax.add(lax.mul(v, 2.0), 1.0)


def column_sums(v):
    return lax.psum(lax.reduce_sum(v, (0,)), "b")


def scaled(v, w):
    return lax.mul(v, w)


def pair(v, w):
    return lax.mul(v, 2.0), lax.add(w, 1.0)


def inner(f, **kw):
    """vmap(f) with spmd_axis_name 'a', as a shard_map body."""
    return lambda v: jax.vmap(f, spmd_axis_name="a", **kw)(v)


SPMD = {"spmd_axis_name": "a"}

# name -> (function, arguments): make_jaxpr(function) gives the text, function the values.
CASES = {
    # vmap of shard_map.
    "in0": (jax.vmap(smap(P("b"), P("b"), affine)), [x88]),
    "in1": (jax.vmap(smap(P("b"), P("b"), affine), in_axes=1), [x88]),
    "inm1": (jax.vmap(smap(P("b"), P("b"), affine), in_axes=-1), [x848]),
    "in0_spmd": (jax.vmap(smap(P("b"), P("b"), affine), **SPMD), [x88]),
    "in1_spmd": (jax.vmap(smap(P("b"), P("b"), affine), in_axes=1, **SPMD), [x88]),
    "inm1_spmd": (jax.vmap(smap(P("b"), P("b"), affine), in_axes=-1, **SPMD), [x848]),
    "in1_out1": (jax.vmap(smap(P("b"), P("b"), affine), in_axes=1, out_axes=1), [x88]),
    "in1_out1_spmd": (jax.vmap(smap(P("b"), P("b"), affine), in_axes=1, out_axes=1, **SPMD),
                      [x88]),
    "sum_in1": (jax.vmap(smap(P("b"), P(), column_sums), in_axes=1), [x848]),
    "sum_in1_spmd": (jax.vmap(smap(P("b"), P(), column_sums), in_axes=1, **SPMD), [x848]),
    "sum_inm1": (jax.vmap(smap(P("b"), P(), column_sums), in_axes=-1), [x848]),
    "mixed_in1": (jax.vmap(smap((P("b"), P("b")), P("b"), scaled), in_axes=(1, None)), [x88, w8]),
    "mixed_in1_spmd": (jax.vmap(smap((P("b"), P("b")), P("b"), scaled), in_axes=(1, None), **SPMD),
                       [x88, w8]),
    "unbatched_result": (jax.vmap(smap((P("b"), P()), (P("b"), P()), pair), in_axes=(1, None),
                                  out_axes=(0, None)), [x88, w8]),
    "unbatched_result_spmd": (jax.vmap(smap((P("b"), P()), (P("b"), P()), pair),
                                       in_axes=(1, None), out_axes=(0, None), **SPMD), [x88, w8]),
    # vmap with spmd_axis_name inside a shard_map body.
    "inner_split": (smap(P("a"), P("a"), inner(lambda r: lax.mul(r, 2.0))), [x88]),
    "inner_replicated_add": (smap(P(), P("a"), inner(lambda r: lax.add(r, 1.0))), [x88]),
    "inner_replicated_sin": (smap(P(), P("a"), inner(lax.sin)), [x88]),
    "inner_in1": (smap(P(None, "b"), P(("b", "a")), inner(lambda r: lax.mul(r, 2.0), in_axes=1)),
                  [x88]),
    "inner_broadcast_operand": (smap((P("a"), P()), P("a"),
                                     lambda v, w: jax.vmap(lambda r: lax.mul(r, w),
                                                           spmd_axis_name="a")(v)), [x88, w8]),
    "inner_jit": (smap(P(), P("a"), inner(jax.jit(lax.sin))), [x88]),
    # Nested vmaps each with a name: the inner one's rules mark values varying over both.
    "inner_nested": (smap(P(), P("a", "b"),
                          lambda v: jax.vmap(jax.vmap(lambda r: lax.add(r, 1.0), spmd_axis_name="b"),
                                             spmd_axis_name="a")(v)), [x848]),
    "inner_unbatched_operand": (smap((P("b"), P()), P(("b", "a")),
                                     lambda v, t: jax.vmap(lambda r, u: lax.add(r, u),
                                                           in_axes=(0, None),
                                                           spmd_axis_name="a")(v, t)),
                                [x88, s]),
}

ERRORS = {
    "inner_replicated_add_out_unsplit": lambda: smap(
        P(), P(), inner(lambda r: lax.add(r, 1.0)))(x88),
    "inner_split_b_out_b": lambda: smap(P("b"), P("b"), inner(lambda r: lax.mul(r, 2.0)))(x88),
    "inner_jit_out_unsplit": lambda: smap(P(), P(), inner(jax.jit(lax.sin)))(x88),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    values = {f"{name}/{i}": np.asarray(leaf) for name, (fn, args) in CASES.items()
              for i, leaf in enumerate(jax.tree.leaves(fn(*args)))}
    blocks = [(name, str(jax.make_jaxpr(fn)(*args))) for name, (fn, args) in CASES.items()]
    blocks += [(name, error_text(fn)) for name, fn in ERRORS.items()]
    with open(os.path.join(OUT, "cases.txt"), "w") as out:
        out.writelines(f"=== {name}\n{text}\n" for name, text in blocks)
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
