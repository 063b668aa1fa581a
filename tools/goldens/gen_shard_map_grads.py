"""Records values and gradients of shard_map functions built around each collective (psum over
one axis and over a tuple, pmean, all_gather tiled and untiled, psum_scatter tiled and untiled,
ppermute as a cyclic shift, all_to_all, axis_index in arithmetic, pmax; later pshuffle,
pcast to varying and pmin) on the meshes (8,) 'i', (4, 2) ('x', 'y') and (2, 2, 2)
('a', 'b', 'c') of 8 CPU devices, for tests/transforms/shard_map_grad_test.cpp.

Writes tests/goldens/shard_map_grads/grads.npz (CASES) and grads_more_collectives.npz
(MORE_CASES) with, per case:
* <case>.x<k>: the k-th input (float32 standard normal from a fixed seed), read by the C++ test;
* <case>.w: the fixed random weight of the loss sum(f(x...) * w), so cotangents are not all ones;
* <case>.y: f(x...) (the same with check_vma on and off);
* <case>.grad_vma<k> / .grad_novma<k>: jax.grad of the loss with respect to input k, the
  shard_map built with check_vma=True / False;
* <case>.jit_grad_vma<k> / .jit_grad_novma<k>: the same through jax.jit(jax.grad(loss)).
Cases marked forward-only record .x and .y alone: JAX has no derivative for them (pmax and pmin
raise "Differentiation rule for 'pmax' not implemented"; an untiled all_to_all with split_axis !=
concat_axis fails in JAX's transpose). The out_specs are chosen to pass check_vma
(an output that varies over a mesh axis names that axis). MANIFEST.md lists every case's source.
MORE_CASES have a file and a random stream of their own: regenerating grads.npz elsewhere moves
a few results by an ulp (the dot of xy_matmul_psum_y), so the committed grads.npz need not be
rewritten to add cases. JAX 0.10.2 has no lax.pvary (removed in 0.10.0; pcast(to='varying') is
its replacement) and cannot record pbroadcast: XLA:CPU has no collective-broadcast ("HLO opcode
`collective-broadcast` is not supported by XLA:CPU ThunkEmitter"), and its transpose rule fails
for any non-scalar operand ("full must be called with scalar fill_value").
Run: python3 tools/goldens/gen_shard_map_grads.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", False)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "shard_map_grads")
rng = np.random.default_rng(20261123)

# Devices in iota order, as spmd's make_mesh lays them out; Auto axes (the tutorials' semantics).
MESHES = {
    "i": Mesh(np.array(jax.devices()).reshape(8), ("i",)),
    "xy": Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y")),
    "abc": Mesh(np.array(jax.devices()).reshape(2, 2, 2), ("a", "b", "c")),
}


def shift(n, k=1):
    return [(j, (j + k) % n) for j in range(n)]


def softmax_over(v, axes):
    # The numerically stable softmax across devices: pmax of a stop_gradient (pmax itself has no
    # derivative in JAX), then exp and a normalising psum.
    e = jnp.exp(v - lax.pmax(lax.stop_gradient(v), axes))
    return e / lax.psum(e, axes)


NAMESPACE = {"jnp": jnp, "lax": lax, "shift": shift, "softmax_over": softmax_over}

# (name, mesh, in_specs, out_specs, body source, input shapes, forward only)
CASES = [
    # ---- mesh (8,) 'i' -------------------------------------------------------------------------
    ("i_psum", "i", (P("i"),), P(), "lambda v: lax.psum(v, 'i')", [(16, 3)], False),
    ("i_psum_sin", "i", (P("i"),), P("i"), "lambda v: jnp.sin(v) * lax.psum(v * v, 'i')",
     [(16, 3)], False),
    ("i_pmean", "i", (P("i"),), P(), "lambda v: lax.pmean(jnp.exp(v), 'i')", [(16, 3)], False),
    ("i_all_gather", "i", (P("i"),), P("i"), "lambda v: lax.all_gather(v, 'i')", [(16, 3)],
     False),
    ("i_all_gather_tiled_axis1", "i", (P("i"),), P("i"),
     "lambda v: lax.all_gather(jnp.sin(v), 'i', axis=1, tiled=True)", [(16, 3)], False),
    ("i_psum_scatter", "i", (P(None, "i"),), P("i"), "lambda v: lax.psum_scatter(v, 'i')",
     [(8, 16)], False),
    ("i_psum_scatter_tiled", "i", (P("i"),), P("i"),
     "lambda v: lax.psum_scatter(v * v, 'i', scatter_dimension=1, tiled=True)", [(16, 16)],
     False),
    ("i_ppermute", "i", (P("i"),), P("i"), "lambda v: v * lax.ppermute(v, 'i', shift(8))",
     [(16, 3)], False),
    ("i_all_to_all_tiled", "i", (P("i"),), P("i"),
     "lambda v: lax.all_to_all(v, 'i', 1, 0, tiled=True)", [(8, 16)], False),
    ("i_all_to_all", "i", (P("i"),), P("i"), "lambda v: lax.all_to_all(jnp.cos(v), 'i', 1, 1)",
     [(16, 8, 3)], False),
    # JAX 0.10.2 cannot transpose an untiled all_to_all whose split and concat axes differ
    # ("Expected cotangent type float32[1,2,8,3]{V:i} but got float32[2,1,8,3]{V:i}").
    ("i_all_to_all_split1_concat0", "i", (P("i"),), P("i"),
     "lambda v: lax.all_to_all(v, 'i', 1, 0)", [(16, 8, 3)], True),
    ("i_axis_index", "i", (P("i"),), P("i"),
     "lambda v: v * (lax.axis_index('i') + 1).astype(jnp.float32) + lax.axis_index('i')",
     [(16, 3)], False),
    ("i_pmax_softmax", "i", (P("i"),), P("i"), "lambda v: softmax_over(v, 'i')", [(16, 3)],
     False),
    # A replicated input: psum of an invariant value multiplies it by the axis size.
    ("i_psum_replicated", "i", (P(),), P(), "lambda v: v * lax.psum(v, 'i')", [(2, 3)], False),
    # An invariant result under a spec that splits it: the cotangent varies over 'i'.
    ("i_psum_out_split", "i", (P("i"),), P("i"), "lambda v: lax.psum(jnp.sin(v), 'i')",
     [(16, 3)], False),
    ("i_pmax", "i", (P("i"),), P(), "lambda v: lax.pmax(v, 'i')", [(16, 3)], True),
    # ---- mesh (4, 2) ('x', 'y') ----------------------------------------------------------------
    ("xy_matmul_psum_y", "xy", (P("x", "y"), P("y", None)), P("x", None),
     "lambda a, b: lax.psum(jnp.dot(a, b), 'y')", [(8, 16), (16, 4)], False),
    ("xy_psum_xy", "xy", (P("x", "y"),), P(), "lambda v: lax.psum(v, ('x', 'y'))", [(8, 4)],
     False),
    ("xy_psum_x_sin", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: jnp.sin(lax.psum(v, 'x')) * v", [(8, 4)], False),
    ("xy_pmean_x", "xy", (P("x", "y"),), P(None, "y"), "lambda v: lax.pmean(v * v, 'x')",
     [(8, 4)], False),
    ("xy_all_gather_x_tiled", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: lax.all_gather(v, 'x', tiled=True)", [(8, 4)], False),
    ("xy_all_gather_xy", "xy", (P("x", "y"),), P("x", None, "y"),
     "lambda v: lax.all_gather(jnp.sin(v), ('x', 'y'), axis=1)", [(8, 4)], False),
    ("xy_all_gather_y_axis1_tiled", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: lax.all_gather(v, 'y', axis=1, tiled=True) * 2.0", [(8, 4)], False),
    ("xy_psum_scatter_y_tiled", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: lax.psum_scatter(v, 'y', scatter_dimension=1, tiled=True)", [(8, 8)], False),
    ("xy_psum_scatter_xy", "xy", (P(None, ("x", "y")),), P(("x", "y")),
     "lambda v: lax.psum_scatter(jnp.exp(v), ('x', 'y'))", [(8, 16)], False),
    ("xy_ppermute_x", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: v * lax.ppermute(jnp.sin(v), 'x', shift(4))", [(8, 4)], False),
    ("xy_all_to_all_y", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: lax.all_to_all(v, 'y', 1, 0, tiled=True)", [(8, 8)], False),
    ("xy_axis_index_xy", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: v + lax.axis_index(('x', 'y')).astype(jnp.float32) * v * v", [(8, 4)], False),
    ("xy_pmax_softmax_y", "xy", (P("x", "y"),), P("x", "y"), "lambda v: softmax_over(v, 'y')",
     [(8, 4)], False),
    # Inputs replicated over some axes: their cotangents are summed over those axes.
    ("xy_replicated_operand", "xy", (P("x", "y"), P(None, "y")), P("x", "y"),
     "lambda v, s: v * jnp.sin(s)", [(8, 4), (2, 4)], False),
    ("xy_psum_y_of_invariant", "xy", (P("x"),), P("x"), "lambda v: lax.psum(v * v, 'y')",
     [(8, 4)], False),
    # A result invariant over 'y' (no collective at all) under an out_spec that splits over 'y'.
    ("xy_invariant_out_split_y", "xy", (P("x"),), P("x", "y"), "lambda v: jnp.sin(v)",
     [(8, 4)], False),
    ("xy_pmax_x", "xy", (P("x", "y"),), P(None, "y"), "lambda v: lax.pmax(v, 'x')", [(8, 4)],
     True),
    # ---- mesh (2, 2, 2) ('a', 'b', 'c') --------------------------------------------------------
    ("abc_psum_ac", "abc", (P(("a", "b"), "c"),), P("b"),
     "lambda v: lax.psum(v, ('a', 'c'))", [(8, 4)], False),
    ("abc_psum_abc", "abc", (P("a", "b", "c"),), P(),
     "lambda v: lax.psum(v * v, ('a', 'b', 'c'))", [(4, 4, 2)], False),
    ("abc_pmean_b", "abc", (P("a", "b", "c"),), P("a", None, "c"),
     "lambda v: lax.pmean(jnp.sin(v) * v, 'b')", [(4, 4, 2)], False),
    ("abc_all_gather_bc", "abc", (P("a", ("b", "c")),), P("a", "b", "c"),
     "lambda v: lax.all_gather(v, ('b', 'c'), axis=1)", [(4, 8)], False),
    ("abc_all_gather_c_tiled", "abc", (P("c", "a"),), P("c", "a"),
     "lambda v: lax.all_gather(v, 'c', tiled=True)", [(4, 4)], False),
    ("abc_psum_scatter_a", "abc", (P(None, ("b", "c"), "a"),), P(("b", "c"), "a"),
     "lambda v: lax.psum_scatter(v, 'a')", [(2, 8, 2)], False),
    ("abc_psum_scatter_bc_tiled", "abc", (P("a", ("b", "c")),), P(("a", "b", "c")),
     "lambda v: lax.psum_scatter(v, ('b', 'c'), tiled=True)", [(8, 8)], False),
    ("abc_ppermute_ab", "abc", (P(("a", "b"), "c"),), P(("a", "b"), "c"),
     "lambda v: v * lax.ppermute(v, ('a', 'b'), shift(4))", [(8, 4)], False),
    ("abc_ppermute_c", "abc", (P("a", "b", "c"),), P("a", "b", "c"),
     "lambda v: jnp.exp(lax.ppermute(v, 'c', shift(2)))", [(4, 4, 2)], False),
    ("abc_all_to_all_ab", "abc", (P("c", ("a", "b")),), P("c", ("a", "b")),
     "lambda v: lax.all_to_all(v, ('a', 'b'), 0, 1, tiled=True)", [(8, 8)], False),
    ("abc_axis_index", "abc", (P("a", "b", "c"),), P("a", "b", "c"),
     "lambda v: v * (lax.axis_index(('b', 'a')) + 1).astype(jnp.float32)"
     " - lax.axis_index('c')", [(4, 4, 2)], False),
    ("abc_pmax_softmax", "abc", (P(("a", "b", "c")),), P(("a", "b", "c")),
     "lambda v: softmax_over(v, ('a', 'b', 'c'))", [(16, 3)], False),
    ("abc_pmax_ab", "abc", (P("a", "b", "c"),), P(None, None, "c"),
     "lambda v: lax.pmax(v, ('a', 'b'))", [(4, 4, 2)], True),
]

MORE_CASES = [
    # pshuffle: out_i = v_perm[i], a ppermute whose transpose is the inverse permutation.
    ("xy_pshuffle_x", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: v * lax.pshuffle(jnp.sin(v), 'x', [2, 0, 3, 1])", [(8, 4)], False),
    ("xy_pshuffle_xy", "xy", (P("x", "y"),), P(("x", "y")),
     "lambda v: lax.pshuffle(v, ('x', 'y'), [3, 1, 4, 0, 5, 7, 6, 2])", [(8, 4)], False),
    # pcast to varying of values invariant over the cast axes: the cotangent is summed over them.
    ("xy_pcast_varying_y", "xy", (P("x"),), P("x", "y"),
     "lambda v: lax.pcast(jnp.sin(v), 'y', to='varying')"
     " * (lax.axis_index('y') + 1).astype(jnp.float32)", [(8, 4)], False),
    ("xy_pcast_varying_xy", "xy", (P(),), P("x", "y"),
     "lambda v: lax.pcast(v * v, ('x', 'y'), to='varying')"
     " + lax.axis_index(('x', 'y')).astype(jnp.float32)", [(2, 4)], False),
    # pmin of a stop_gradient: differentiable around the pmin, as softmax_over is around pmax.
    ("xy_pmin_stop_gradient_y", "xy", (P("x", "y"),), P("x", "y"),
     "lambda v: jnp.exp(lax.pmin(lax.stop_gradient(v), 'y') - v)", [(8, 4)], False),
    ("xy_pmin_x", "xy", (P("x", "y"),), P(None, "y"), "lambda v: lax.pmin(v, 'x')", [(8, 4)],
     True),
    ("xy_pmin_xy", "xy", (P("x", "y"),), P(), "lambda v: lax.pmin(v, ('x', 'y'))", [(8, 4)],
     True),
]
more_rng = np.random.default_rng(20261125)


def build(case, check_vma):
    _, mesh, in_specs, out_specs, source, _, _ = case
    body = eval(source, NAMESPACE)
    return jax.shard_map(body, mesh=MESHES[mesh], in_specs=in_specs, out_specs=out_specs,
                         check_vma=check_vma)


def record(case, out, gen):
    name, _, _, _, _, shapes, forward_only = case
    xs = [gen.standard_normal(s).astype(np.float32) for s in shapes]
    for k, x in enumerate(xs):
        out[f"{name}.x{k}"] = x
    f_vma, f_novma = build(case, True), build(case, False)
    y = np.asarray(f_vma(*xs))
    np.testing.assert_allclose(np.asarray(f_novma(*xs)), y, rtol=1e-6, atol=1e-6)
    out[f"{name}.y"] = y
    if forward_only:
        return
    w = gen.standard_normal(y.shape).astype(np.float32)
    out[f"{name}.w"] = w
    argnums = tuple(range(len(xs)))
    for tag, f in (("vma", f_vma), ("novma", f_novma)):
        def loss(*args, f=f):
            return jnp.sum(f(*args) * w)
        grad = jax.grad(loss, argnums)
        for prefix, g in (("", grad), ("jit_", jax.jit(grad))):
            for k, gk in enumerate(g(*xs)):
                out[f"{name}.{prefix}grad_{tag}{k}"] = np.asarray(gk)


def manifest_rows(cases):
    rows = []
    for name, mesh, in_specs, out_specs, source, shapes, forward_only in cases:
        m = MESHES[mesh]
        mesh_text = str(tuple(m.devices.shape)) + " " + str(m.axis_names)
        ins = ", ".join(repr(s) for s in in_specs)
        shapes_text = ", ".join(str(s) for s in shapes)
        grads = "forward only (JAX cannot differentiate it)" if forward_only else "yes"
        rows.append(f"| {name} | {mesh_text} | {ins} | {out_specs!r} | `{source}` | "
                    f"{shapes_text} | {grads} |")
    return rows


def write_manifest():
    lines = ["# shard_map gradient goldens", "",
             "Written by `tools/goldens/gen_shard_map_grads.py` with JAX " + jax.__version__ +
             " on 8 CPU devices; read by `tests/transforms/shard_map_grad_test.cpp`.",
             "Loss: `sum(f(x...) * w)`; inputs and `w` are float32 standard normals stored in "
             "`grads.npz`.", "",
             "| case | mesh | in_specs | out_specs | f | input shapes | grads |",
             "|---|---|---|---|---|---|---|"]
    lines += manifest_rows(CASES)
    lines += ["", "`shift(n, k=1)` is `[(j, (j + k) % n) for j in range(n)]`; `softmax_over(v, "
              "axes)` is `e = exp(v - pmax(stop_gradient(v), axes)); e / psum(e, axes)`."]
    lines += ["", "## grads_more_collectives.npz", "",
              "The same records for pshuffle, pcast to varying (JAX 0.10's pvary) and pmin. "
              "JAX 0.10.2 cannot run pbroadcast on CPU (no collective-broadcast in XLA:CPU) "
              "and its transpose fails for non-scalar operands, so pbroadcast has no case.", "",
              "| case | mesh | in_specs | out_specs | f | input shapes | grads |",
              "|---|---|---|---|---|---|---|"]
    lines += manifest_rows(MORE_CASES)
    with open(os.path.join(OUT, "MANIFEST.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    for cases, gen, file in ((CASES, rng, "grads.npz"),
                             (MORE_CASES, more_rng, "grads_more_collectives.npz")):
        out = {}
        for case in cases:
            record(case, out, gen)
        np.savez(os.path.join(OUT, file), **out)
        print(f"wrote {len(cases)} cases, {len(out)} arrays to {file}")
    write_manifest()


if __name__ == "__main__":
    main()
