"""Records JAX's collectives under vmap with axis names, for tests/prims/collectives_test.cpp and
tests/transforms/collectives_vmap_test.cpp:

* jaxpr_<case>.txt: str(make_jaxpr(vmap(f, axis_name='i'))(x)), for cases named env_*
  str(make_jaxpr(f, axis_env=[('i', 4)])(x)) (the collective itself, unbatched), and for cases
  named shard_map_* the shard_map on a (2, 2) ('x', 'y') mesh with check_vma on and off (read by
  tests/transforms/shard_map_jaxpr_test.cpp); NumPy integer
  params (JAX's batching prints broadcast_dimensions=(np.int64(1),)) are made Python ints before
  printing, since spmd's integer params carry no such type. pbroadcast has no vmap case: JAX
  0.10.2's batching rule fails under tracing ("take requires ndarray or scalar arguments, got
  <class 'list'>");
* values.npz: <case>.x (input) and <case>.y (output) of vmapped collectives, including nested
  vmaps over axis tuples (2-D and 3-D) and several dtypes;
* grads.npz: <case>.x and <case>.g = jax.grad(lambda x: sum(vmap(f, axis_name='i')(x) * w))(x)
  with w = <case>.w, through psum, all_gather, ppermute, all_to_all and psum_scatter; cases
  named in_* take the gradient inside the vmap (vmap of grad), which transposes the collectives;
* errors.txt: `<case>: <message>` lines, JAX's texts for bad perms, unbound names, wrong sizes.
Run: python3 tools/goldens/gen_collectives.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", False)
jax.config.update("jax_pprint_use_color", False)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "collectives")
rng = np.random.default_rng(0)


def randn(shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def vm(f, name="i"):
    return jax.vmap(f, axis_name=name)


# ---- jaxpr texts ------------------------------------------------------------------------------
JAXPRS = {
    "psum": (lambda v: lax.psum(v, "i"), (4, 2)),
    "pmean": (lambda v: lax.pmean(v, "i"), (4, 2)),
    "pmax": (lambda v: lax.pmax(v, "i"), (4, 2)),
    "psum_bool": (lambda v: lax.psum(v > 1.0, "i"), (4, 2)),
    "all_gather": (lambda v: lax.all_gather(v, "i"), (4, 2)),
    "all_gather_tiled": (lambda v: lax.all_gather(v, "i", tiled=True), (4, 2)),
    "all_gather_axis1": (lambda v: lax.all_gather(v, "i", axis=1), (4, 4, 2)),
    "psum_scatter": (lambda v: lax.psum_scatter(v, "i"), (4, 4, 2)),
    "psum_scatter_tiled": (lambda v: lax.psum_scatter(v, "i", tiled=True), (4, 4, 2)),
    "all_to_all": (lambda v: lax.all_to_all(v, "i", 0, 0), (4, 4, 2)),
    "all_to_all_tiled": (lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True), (4, 4, 2)),
    "axis_index": (lambda v: v + lax.axis_index("i"), (4, 2)),
    "env_psum": (lambda v: lax.psum(v, "i"), (2,)),
    "env_pmax_groups": (lambda v: lax.pmax(v, "i", axis_index_groups=[[0, 1], [2, 3]]), (2,)),
    "env_all_gather": (lambda v: lax.all_gather(v, "i"), (2,)),
    "env_psum_scatter": (lambda v: lax.psum_scatter(v, "i", tiled=True), (4,)),
    "env_ppermute": (lambda v: lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]), (2,)),
    "env_all_to_all": (lambda v: lax.all_to_all(v, "i", 0, 0), (4, 2)),
    "env_axis_index": (lambda v: v + lax.axis_index("i"), (2,)),
    "pmin": (lambda v: lax.pmin(v, "i"), (4, 2)),
    "env_pmin": (lambda v: lax.pmin(v, "i"), (2,)),
    "env_pmin_groups": (lambda v: lax.pmin(v, "i", axis_index_groups=[[0, 2], [1, 3]]), (2,)),
    "env_pbroadcast": (lambda v: lax.pbroadcast(v, "i", 2), (2,)),
}

# shard_map on a (2, 2) ('x', 'y') mesh: (f, in_spec, out_spec, shape); each is recorded with
# check_vma on (jaxpr_<case>.txt) and off (jaxpr_<case>_check_vma_false.txt).
SHARD_MAP_JAXPRS = {
    # pmin of a value invariant over 'y': JAX first casts it to varying (pvary).
    "shard_map_pmin_y": (lambda v: lax.pmin(v, "y"), jax.P("x"), jax.P("x"), (4, 2)),
    "shard_map_pmin_xy": (lambda v: lax.pmin(v * 2.0, ("x", "y")), jax.P("x", "y"), jax.P(),
                          (4, 2)),
    "shard_map_pbroadcast_x": (lambda v: lax.pbroadcast(v, "x", 1), jax.P("x", "y"),
                               jax.P("x", "y"), (4, 2)),
    "shard_map_pbroadcast_xy": (lambda v: lax.pbroadcast(v, ("x", "y"), 3), jax.P("x", "y"),
                                jax.P("x", "y"), (4, 2)),
}

# ---- values under vmap --------------------------------------------------------------------
VALUES = {}


def value(name, f, x):
    VALUES[name + ".x"] = np.asarray(x)
    VALUES[name + ".y"] = np.asarray(f(x))


def record_values():
    for dt, tag in ((np.float32, "f32"), (np.int32, "i32")):
        x = randn((8, 3), dt)
        value("psum_" + tag, vm(lambda v: lax.psum(v, "i")), x)
        value("pmax_" + tag, vm(lambda v: lax.pmax(v, "i")), x)
        value("pmin_" + tag, vm(lambda v: lax.pmin(v, "i")), x)
        value("pmean_" + tag, vm(lambda v: lax.pmean(v, "i")), x)
        value("all_gather_" + tag, vm(lambda v: lax.all_gather(v, "i")), x)
        value("ppermute_" + tag, vm(lambda v: lax.ppermute(
            v, "i", [(j, (j + 1) % 8) for j in range(8)])), x)
    x = randn((8, 3))
    value("psum_bool", vm(lambda v: lax.psum(v > 0, "i")), x)
    value("psum_unbatched", vm(lambda v: v + lax.psum(jnp.float32(2.0) * jnp.ones(3), "i")), x)
    value("all_gather_tiled", vm(lambda v: lax.all_gather(v, "i", tiled=True)), x)
    value("all_gather_axis1", vm(lambda v: lax.all_gather(v, "i", axis=1)), x)
    value("pshuffle", vm(lambda v: lax.pshuffle(v, "i", [3, 1, 4, 0, 5, 7, 6, 2])), x)
    value("axis_index", vm(lambda v: v + lax.axis_index("i")), x)
    y = randn((8, 8, 3))
    value("psum_scatter", vm(lambda v: lax.psum_scatter(v, "i")), y)
    value("psum_scatter_tiled", vm(lambda v: lax.psum_scatter(v, "i", tiled=True)), y)
    value("psum_scatter_dim1", vm(lambda v: lax.psum_scatter(v, "i", scatter_dimension=1,
                                                             tiled=True)), randn((8, 3, 16)))
    value("all_to_all", vm(lambda v: lax.all_to_all(v, "i", 0, 0)), y)
    value("all_to_all_tiled", vm(lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True)), y)
    value("all_to_all_split1", vm(lambda v: lax.all_to_all(v, "i", 1, 0)), randn((8, 3, 8)))
    value("ppermute_bf16", vm(lambda v: lax.ppermute(
        v, "i", [(j, (j + 3) % 8) for j in range(8)])), randn((8, 3)).astype(jnp.bfloat16))
    # Nested vmaps: axis tuples over 2-D and 3-D grids.
    z = randn((2, 4, 3))
    nest2 = lambda f: jax.vmap(jax.vmap(f, axis_name="j"), axis_name="i")
    value("nested_psum_ij", nest2(lambda v: lax.psum(v, ("i", "j"))), z)
    value("nested_psum_i", nest2(lambda v: lax.psum(v, "i")), z)
    value("nested_psum_ji", nest2(lambda v: lax.psum(v, ("j", "i"))), z)
    value("nested_pmax_ij", nest2(lambda v: lax.pmax(v, ("i", "j"))), z)
    value("nested_axis_index_ij", nest2(lambda v: v * 0 + lax.axis_index(("i", "j"))), z)
    value("nested_axis_index_ji", nest2(lambda v: v * 0 + lax.axis_index(("j", "i"))), z)
    value("nested_all_gather_i", nest2(lambda v: lax.all_gather(v, "i")), z)
    t = randn((2, 3, 12))
    value("nested_all_to_all_ij", nest2(lambda v: lax.all_to_all(v, ("i", "j"), 0, 0,
                                                                 tiled=True)), t)
    value("nested_all_to_all_ji", nest2(lambda v: lax.all_to_all(v, ("j", "i"), 0, 0,
                                                                 tiled=True)), t)
    value("nested_all_to_all_untiled", nest2(lambda v: lax.all_to_all(v, ("i", "j"), 0, 1)),
          randn((2, 3, 6, 2)))
    w = randn((2, 3, 2, 5))
    nest3 = lambda f: jax.vmap(jax.vmap(jax.vmap(f, axis_name="k"), axis_name="j"),
                               axis_name="i")
    value("nested3_psum_ijk", nest3(lambda v: lax.psum(v, ("i", "j", "k"))), w)
    value("nested3_psum_ik", nest3(lambda v: lax.psum(v, ("i", "k"))), w)
    value("nested3_axis_index", nest3(lambda v: v * 0 + lax.axis_index(("i", "j", "k"))), w)


# ---- grads ------------------------------------------------------------------------------------
GRADS = {}


def grad_case(name, f, shape):
    x = randn(shape)
    out_shape = jax.eval_shape(vm(f), x).shape
    w = randn(out_shape)
    g = jax.grad(lambda x: jnp.sum(vm(f)(x) * w))(x)
    GRADS[name + ".x"], GRADS[name + ".w"], GRADS[name + ".g"] = x, w, np.asarray(g)


def vmap_grad_case(name, f, shape):
    """Per-instance gradients: the collective is transposed inside the vmapped function."""
    x = randn(shape)
    out_shape = jax.eval_shape(vm(f), x).shape
    w = randn(out_shape)
    g = vm(lambda v, wv: jax.grad(lambda u: jnp.sum(f(u) * wv))(v))(x, w)
    GRADS[name + ".x"], GRADS[name + ".w"], GRADS[name + ".g"] = x, w, np.asarray(g)


def record_grads():
    vmap_grad_case("in_psum", lambda v: lax.psum(v, "i"), (4, 3))
    vmap_grad_case("in_pmean", lambda v: lax.pmean(v, "i"), (4, 3))
    vmap_grad_case("in_all_gather", lambda v: lax.all_gather(v, "i"), (4, 3))
    vmap_grad_case("in_all_gather_tiled", lambda v: lax.all_gather(v, "i", tiled=True), (4, 3))
    vmap_grad_case("in_ppermute",
                   lambda v: lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]), (4, 3))
    vmap_grad_case("in_all_to_all", lambda v: lax.all_to_all(v, "i", 0, 0), (4, 4, 3))
    vmap_grad_case("in_all_to_all_tiled",
                   lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True), (4, 8, 3))
    vmap_grad_case("in_psum_scatter", lambda v: lax.psum_scatter(v, "i"), (4, 4, 3))
    vmap_grad_case("in_psum_scatter_tiled",
                   lambda v: lax.psum_scatter(v, "i", tiled=True), (4, 8, 3))
    grad_case("psum", lambda v: lax.psum(v, "i"), (4, 3))
    grad_case("psum_sin", lambda v: jnp.sin(v) * lax.psum(v * v, "i"), (4, 3))
    grad_case("all_gather", lambda v: lax.all_gather(v, "i"), (4, 3))
    grad_case("all_gather_tiled", lambda v: lax.all_gather(v, "i", tiled=True, axis=0), (4, 3))
    grad_case("ppermute", lambda v: lax.ppermute(v, "i", [(0, 1), (1, 2), (2, 3), (3, 0)]),
              (4, 3))
    grad_case("all_to_all", lambda v: lax.all_to_all(v, "i", 0, 0), (4, 4, 3))
    grad_case("all_to_all_tiled", lambda v: lax.all_to_all(v, "i", 0, 1, tiled=True), (4, 8, 3))
    grad_case("psum_scatter", lambda v: lax.psum_scatter(v, "i"), (4, 4, 3))
    grad_case("psum_scatter_tiled", lambda v: lax.psum_scatter(v, "i", tiled=True), (4, 8, 3))


# ---- errors -----------------------------------------------------------------------------------
def error_text(f, *args, env=None):
    try:
        if env:
            jax.make_jaxpr(f, axis_env=env)(*args)
        else:
            jax.vmap(f, axis_name="i")(*args)
    except Exception as e:  # noqa: BLE001
        return str(e).splitlines()[0]
    return "NO ERROR"


def record_errors():
    x = jnp.ones((4, 2))
    env = [("i", 4)]
    cases = {
        "psum_unbound": error_text(lambda v: lax.psum(v, "j"), x),
        "axis_index_unbound": error_text(lambda v: lax.axis_index("j"), x),
        "all_gather_unbound": error_text(lambda v: lax.all_gather(v, "j"), x),
        "psum_scatter_size": error_text(lambda v: lax.psum_scatter(v, "i"), x[0], env=env),
        "psum_scatter_tiled_size": error_text(
            lambda v: lax.psum_scatter(v, "i", tiled=True), jnp.ones(3), env=env),
        "all_to_all_size": error_text(lambda v: lax.all_to_all(v, "i", 0, 0), x),
        "all_to_all_tiled_size": error_text(
            lambda v: lax.all_to_all(v, "i", 0, 0, tiled=True), jnp.ones((4, 3))),
        "pshuffle_not_permutation": error_text(lambda v: lax.pshuffle(v, "i", [0, 0, 1, 2]), x),
        "groups_cover": error_text(
            lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [1, 2]]), x[0], env=env),
        "groups_in_vmap": error_text(
            lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]), x),
        "all_gather_axis": error_text(lambda v: lax.all_gather(v, "i", axis=2), x),
    }
    # Duplicate sources/destinations are caught when lowering for devices.
    mesh = jax.make_mesh((4,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))
    try:
        jax.shard_map(lambda v: lax.ppermute(v, "i", [(0, 1), (0, 2)]), mesh=mesh,
                      in_specs=jax.P("i"), out_specs=jax.P("i"))(jnp.ones(4))
        cases["ppermute_duplicate"] = "NO ERROR"
    except Exception as e:  # noqa: BLE001
        cases["ppermute_duplicate"] = str(e).splitlines()[0]
    return cases


def plain_ints(value):
    if isinstance(value, tuple):
        return tuple(plain_ints(v) for v in value)
    return int(value) if isinstance(value, np.integer) else value


def jaxpr_text(closed):
    jaxpr = closed.jaxpr
    eqns = [e.replace(params={k: plain_ints(v) for k, v in e.params.items()})
            for e in jaxpr.eqns]
    return str(closed.replace(jaxpr=jaxpr.replace(eqns=eqns)))


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (f, shape) in JAXPRS.items():
        x = jnp.zeros(shape, jnp.float32)
        if name.startswith("env_"):
            text = jaxpr_text(jax.make_jaxpr(f, axis_env=[("i", 4)])(x))
        else:
            text = jaxpr_text(jax.make_jaxpr(vm(f))(x))
        with open(os.path.join(OUT, f"jaxpr_{name}.txt"), "w") as fh:
            fh.write(text + "\n")
    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
    for name, (f, in_spec, out_spec, shape) in SHARD_MAP_JAXPRS.items():
        for check_vma, suffix in ((True, ""), (False, "_check_vma_false")):
            g = jax.shard_map(f, mesh=mesh, in_specs=(in_spec,), out_specs=out_spec,
                              check_vma=check_vma)
            text = jaxpr_text(jax.make_jaxpr(g)(jnp.zeros(shape, jnp.float32)))
            with open(os.path.join(OUT, f"jaxpr_{name}{suffix}.txt"), "w") as fh:
                fh.write(text + "\n")
    record_values()
    np.savez(os.path.join(OUT, "values.npz"), **VALUES)
    record_grads()
    np.savez(os.path.join(OUT, "grads.npz"), **GRADS)
    with open(os.path.join(OUT, "errors.txt"), "w") as fh:
        for k, v in record_errors().items():
            fh.write(f"{k}: {v}\n")


if __name__ == "__main__":
    jax.config.update("jax_num_cpu_devices", 4)
    main()
