"""Records where JAX puts the results of computations on committed arrays ("computation follows
sharding"), for tests/sharding/partitioning_test.cpp: eager ops and jit on sharded or
single-device committed arrays, in_shardings, out_shardings, with_sharding_constraint,
shard_map, grad, vmap and control flow inside jit, and the device-mismatch errors of jitted
functions. The errors of eager ops and of in_shardings conflicts are in
tests/goldens/propagation/errors.txt (gen_propagation_corpus.py).

Writes tests/goldens/partitioning/:
  results.txt  "=== <case>" followed by one line per result leaf, in flattening order:
               "<repr(sharding)> <committed 1/0> <device ids in the sharding's order>"
  errors.txt   "# " lines saying how each case was run, then "=== <case>" followed by
               "<ExceptionType>: <message>"
Values are not recorded: the test compares each partitioned result with the same computation on
uncommitted arrays, and the inputs are small integers so that most results are exact.
Run: python3 tools/goldens/gen_partitioning.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "partitioning")
D = jax.devices()

# Auto axes, as spmd's meshes (jax.make_mesh gives Explicit axes since 0.9).
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
mesh_xy = Mesh(mesh_utils.create_device_mesh((4, 2)), ("x", "y"))
mesh_batch = Mesh(np.array(D), ("batch",))
wsc = jax.lax.with_sharding_constraint

x = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)
w = jnp.arange(32.0, dtype=jnp.float32).reshape(8, 4) / 64


def S(*spec):
    return NamedSharding(mesh, P(*spec))


def put(v, *spec):
    return jax.device_put(v, S(*spec))


def put_on(v, ids):
    """v split along its first dim over Mesh(devices ids, ('x',))."""
    return jax.device_put(v, NamedSharding(Mesh(np.array([D[i] for i in ids]), ("x",)), P("x")))


xab = put(x, "a", "b")
x_a = put(x, "a", None)
x_b = put(x, None, "b")
on3 = jax.device_put(x, D[3])


def block_sum(u):
    """shard_map: each device's column sums of its block, summed over 'a'."""
    return jax.shard_map(lambda blk: jax.lax.psum(blk.sum(0, keepdims=True), "a"), mesh=mesh,
                         in_specs=P("a", "b"), out_specs=P(None, "b"))(u)


def loss(w, xb):
    return jnp.sum(jnp.tanh(xb @ w) ** 2)


def scan_body(c, r):
    return c + r, c * r


# (case, zero-argument callable). Names match the tests.
RESULTS = [
    ("eager_sin", lambda: jnp.sin(xab)),
    ("eager_exp", lambda: jnp.exp(-xab)),
    ("eager_negative", lambda: -xab),
    ("eager_multiply", lambda: xab * xab),
    ("eager_maximum", lambda: jnp.maximum(xab, -xab)),
    ("eager_subtract", lambda: xab - (-xab)),
    ("eager_maximum_transposed", lambda: jnp.maximum(xab, xab.T)),
    ("eager_transpose", lambda: xab.T),
    ("eager_sum0", lambda: xab.sum(axis=0)),
    ("eager_sum1", lambda: xab.sum(axis=1)),
    ("eager_matmul", lambda: x_a @ x_b),
    ("eager_matmul_contracting", lambda: put(x, None, "a") @ put(x, "a", None)),
    ("eager_committed_plus_uncommitted", lambda: xab + x),
    ("eager_uncommitted_times_committed", lambda: x * xab),
    ("eager_uncommitted", lambda: jnp.sin(x)),
    ("eager_single_device", lambda: jnp.sin(on3)),
    ("eager_single_device_plus_uncommitted", lambda: on3 + x),
    ("eager_uncommitted_moves_to_devices_4_7", lambda: put_on(x, [4, 5, 6, 7]) + x),
    ("jit_committed", lambda: jax.jit(lambda u, v: (jnp.sin(u) * v, u.sum(0)))(xab, xab)),
    ("jit_uncommitted", lambda: jax.jit(lambda u: u * 2)(x)),
    ("jit_single_device", lambda: jax.jit(lambda u, v: u * v)(on3, x)),
    ("jit_in_shardings", lambda: jax.jit(lambda u: u * 2, in_shardings=S("a"))(x)),
    ("jit_in_shardings_prefix",
     lambda: jax.jit(lambda u, v: (u * 2, v + 1), in_shardings=(S("a"), None))(x, x)),
    ("jit_out_shardings_one",
     lambda: jax.jit(lambda u: (u * 2, u.sum(0)), out_shardings=S())(xab)),
    ("jit_out_shardings_prefix",
     lambda: jax.jit(lambda u: (u * 2, (u + 1, u.sum(0))),
                     out_shardings=(S("b", "a"), S()))(xab)),
    ("jit_out_shardings_uncommitted",
     lambda: jax.jit(lambda u: u * 2, out_shardings=S("a", "b"))(x)),
    ("wsc_seed_yx",
     lambda: jax.jit(lambda u: wsc(u + 1, NamedSharding(mesh_xy, P("y", "x"))))(x)),
    ("wsc_seed_replicated",
     lambda: jax.jit(lambda u: wsc(u + 1, NamedSharding(mesh_xy, P())))(x)),
    ("wsc_committed_yx",
     lambda: jax.jit(lambda u: wsc(u + 1, NamedSharding(mesh_xy, P("y", "x"))))(
         jax.device_put(x, NamedSharding(mesh_xy, P("x", "y"))))),
    ("shard_map_in_jit", lambda: jax.jit(block_sum)(xab)),
    ("shard_map_in_jit_then_scale", lambda: jax.jit(lambda u: block_sum(u) * 2)(x_a)),
    ("grad_data_parallel",
     lambda: jax.jit(jax.grad(loss))(jax.device_put(w, NamedSharding(mesh_batch, P())),
                                     jax.device_put(x, NamedSharding(mesh_batch, P("batch"))))),
    ("grad_data_parallel_eager",
     lambda: jax.grad(loss)(jax.device_put(w, NamedSharding(mesh_batch, P())),
                            jax.device_put(x, NamedSharding(mesh_batch, P("batch"))))),
    ("vmap_rows", lambda: jax.vmap(lambda r: jnp.sin(r) * 2)(xab)),
    ("vmap_row_sums", lambda: jax.vmap(lambda r: r.sum())(xab)),
    ("jit_vmap_rows", lambda: jax.jit(jax.vmap(lambda r: jnp.sin(r) * 2))(xab)),
    ("jit_cond", lambda: jax.jit(lambda p, u: jax.lax.cond(p, jnp.sin, jnp.cos, u))(True, xab)),
    ("jit_fori_loop",
     lambda: jax.jit(lambda u: jax.lax.fori_loop(0, 3, lambda i, c: c * 0.5 + 1, u))(xab)),
    ("jit_scan", lambda: jax.jit(lambda u: jax.lax.scan(scan_body, jnp.zeros(8), u))(xab)),
]

X16 = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def f(*args):
    return args[0] + args[1]


# (case, source of a zero-argument callable that raises, note)
ERRORS = [
    ("jit_args_disjoint_device_sets",
     "lambda: jax.jit(f)(put_on(X16, [0, 1, 2, 3]), put_on(X16, [4, 5, 6, 7]))",
     "f is `def f(*args): return args[0] + args[1]`; jit names its arguments args[0], args[1]."),
    ("jit_args_permuted_device_order",
     "lambda: jax.jit(f)(put_on(X16, list(range(8))), put_on(X16, [0, 1, 2, 3, 6, 7, 4, 5]))",
     ""),
    ("sin_then_add_single_device",
     "lambda: jnp.sin(put_on(X16, [0, 1, 2, 3])) + jax.device_put(X16, D[5])",
     "The result of an eager op keeps its operand's devices."),
]


def leaf_line(leaf):
    ids = [d.id for d in leaf.sharding._device_assignment]
    return f"{leaf.sharding!r} {int(leaf.committed)} {ids}"


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "results.txt"), "w") as out:
        for name, fn in RESULTS:
            out.write(f"=== {name}\n")
            for leaf in jax.tree.leaves(fn()):
                out.write(leaf_line(leaf) + "\n")
    ns = {"jax": jax, "jnp": jnp, "f": f, "put_on": put_on, "X16": X16, "D": D}
    header = [f"# JAX {jax.__version__} on {jax.device_count()} CPU devices; X16 is "
              "float32[16,16]; put_on(v, ids) is jax.device_put(v, NamedSharding(Mesh(devices "
              "ids, ('x',)), P('x')))"]
    blocks = []
    for name, source, note in ERRORS:
        header.append(f"# {name}: {source}")
        if note:
            header.append(f"#   {note}")
        try:
            eval(source, ns)()
        except Exception as e:  # noqa: BLE001 - every exception is what is recorded
            blocks.append(f"=== {name}\n{type(e).__name__}: {e}")
        else:
            raise SystemExit(f"{name} raised nothing")
    with open(os.path.join(OUT, "errors.txt"), "w") as out:
        out.write("\n".join(header + blocks) + "\n")


if __name__ == "__main__":
    main()
