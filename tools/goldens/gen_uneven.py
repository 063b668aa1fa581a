"""Records what JAX gives for programs whose intermediates are split unevenly: a dim not
divisible by the mesh axes a with_sharding_constraint puts on it is padded inside the
partitioner (ceil-sized blocks, the last ones short or empty) and its padding must not reach a
sum, max, min or dot. Shape ops that keep the padded layout (transpose, broadcast, squeeze,
reshape of whole dims, converts, concatenate/pad/slice/cumsum/dynamic_slice along other dims) and
the carries of fori_loop, while_loop, scan and cond run on the padded blocks too. For
tests/sharding/uneven_test.cpp.

Writes tests/goldens/uneven/:
  results.txt  "=== <case>" followed by one line per result leaf, in flattening order:
               "<repr(spec)>|<shard shapes in device order, ';'-separated, dims ','-separated>"
  values.npz   the result leaves, as "<case>/<leaf index>"
  shape_results.txt, shape_values.npz   the same for SHAPE_RESULTS (shape ops)
  loop_results.txt, loop_values.npz     the same for LOOP_RESULTS (control flow)
  lane_results.txt, lane_values.npz     the same for LANE_RESULTS (vmap of while_loop)
  errors.txt   "=== <case>" followed by "<ExceptionType>: <message>" (uneven in/out_shardings,
               which JAX refuses at the boundary of a jit)
Run: python3 tools/goldens/gen_uneven.py   (needs jax 0.10.2; the tests do not)
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
                   "uneven")

# Auto axes, as spmd's meshes.
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
mesh8 = Mesh(np.array(jax.devices()), ("x",))
wsc = jax.lax.with_sharding_constraint


def S(*spec):
    return NamedSharding(mesh, P(*spec))


def X(*spec):
    return NamedSharding(mesh8, P(*spec))


x = jnp.arange(60.0, dtype=jnp.float32).reshape(10, 6)  # 10 rows over 'a' (4): 3, 3, 3, 1
v = jnp.arange(18.0, dtype=jnp.float32).reshape(6, 3) / 8
y = jnp.arange(30.0, dtype=jnp.float32).reshape(10, 3) - 12
z = jnp.arange(12.0, dtype=jnp.float32).reshape(12, 1) * jnp.ones((1, 4), jnp.float32)
r10 = jnp.arange(10.0, dtype=jnp.float32)  # over 'x' (8): 2, 2, 2, 2, 2, 0, 0, 0
i10 = jnp.arange(40, dtype=jnp.int32).reshape(10, 4) - 100
x3 = jnp.arange(60.0, dtype=jnp.float32).reshape(10, 1, 6) - 40
xs = jnp.arange(120.0, dtype=jnp.float32).reshape(4, 10, 3) / 10 - 5


def chain(u, w):
    h = jnp.exp(wsc(u * 0.05, S("a", "b")))
    h = wsc(h, S("a")) @ w
    t = wsc(h.T + 1, S(None, "a"))
    return h.sum(0), (t - 3).max(1), jnp.tanh(t).min(0), t


# (case, zero-argument callable). Every constraint splits a dim unevenly.
RESULTS = [
    ("elementwise", lambda: jax.jit(lambda u: jnp.sin(wsc(u * 2, S("a"))) + 1)(x)),
    ("constraint_output", lambda: jax.jit(lambda u: wsc(u * 2, S("a", "b")))(x)),
    ("constraint_output_tuple", lambda: jax.jit(lambda u: wsc(u + 1, S(("a", "b"))))(z)),
    ("sum_padded_dim", lambda: jax.jit(lambda u: (wsc(u, S("a", "b")) + 1).sum(0))(x)),
    ("sum_other_dim", lambda: jax.jit(lambda u: (wsc(u, S("a", "b")) + 1).sum(1))(x)),
    ("sum_all", lambda: jax.jit(lambda u: (wsc(u, S("a")) + 1).sum())(x)),
    ("max_padded_dim", lambda: jax.jit(lambda u: wsc(-u - 1, S("a")).max(0))(x)),
    ("min_padded_dim", lambda: jax.jit(lambda u: wsc(u + 1, S("a")).min(0))(x)),
    ("max_int", lambda: jax.jit(lambda u: wsc(u * 2, S("a")).max(0))(i10)),
    ("min_int", lambda: jax.jit(lambda u: wsc(-u, S("a")).min(0))(i10)),
    ("dot_padded_contracting",
     lambda: jax.jit(lambda u, w: (wsc(u, S(None, "a")) + 1) @ (wsc(w, S("a")) + 1))(x.T, y)),
    ("dot_padded_rows", lambda: jax.jit(lambda u, w: (wsc(u, S("a")) + 1) @ w)(x, v)),
    ("dot_padded_rows_summed",
     lambda: jax.jit(lambda u, w: ((wsc(u, S("a")) + 1) @ w).sum(0))(x, v)),
    ("committed_then_uneven",
     lambda: jax.jit(lambda u: (wsc(u, S("a", "b")) + 1).sum(0))(jax.device_put(x, S(None, "b")))),
    ("empty_blocks_sum", lambda: jax.jit(lambda u: (wsc(u + 1, X("x")) * 3).sum())(r10)),
    ("empty_blocks_max", lambda: jax.jit(lambda u: wsc(-u - 1, X("x")).max())(r10)),
    ("empty_blocks_output", lambda: jax.jit(lambda u: wsc(u + 1, X("x")) * 2)(r10)),
    ("chain", lambda: jax.jit(chain)(x, v)),
]


def padded_chain(u):
    t = wsc(-u - 1, S("a")).T  # [6, 10], the padded dim moved to the minor side
    b = jnp.broadcast_to(t[None], (2, 6, 10)) * 2
    return b.max((0, 2)), jnp.squeeze(b[:1], 0).min(1)


# Shape ops on padded blocks; reductions over the padded dim after them see negative values, so
# padding that reached them unmasked would win a max.
SHAPE_RESULTS = [
    ("transpose_max_padded", lambda: jax.jit(lambda u: wsc(-u - 1, S("a")).T.max(1))(x)),
    ("transpose_min_other", lambda: jax.jit(lambda u: (wsc(u + 1, S("a", "b")).T * 2).min(0))(x)),
    ("transpose_output", lambda: jax.jit(lambda u: wsc(u * 2, S("a", "b")).T + 1)(x)),
    ("broadcast_expand",
     lambda: jax.jit(lambda u: jnp.broadcast_to(
         jnp.expand_dims(wsc(u - 30, S("a")), 1), (10, 4, 6)).max((1, 2)))(x)),
    ("broadcast_padded_max",
     lambda: jax.jit(lambda u: jnp.broadcast_to(wsc(-u - 1, S("a")), (3, 10, 6)).max((0, 1)))(x)),
    ("squeeze", lambda: jax.jit(lambda u: jnp.squeeze(wsc(u, S("a")), 1).max(0))(x3)),
    ("reshape_whole_dim",
     lambda: jax.jit(lambda u: wsc(-u, S("a")).reshape(10, 2, 3).max((0, 2)))(x)),
    ("convert_max", lambda: jax.jit(lambda u: wsc(-u - 1, S("a")).astype(jnp.int32).max(0))(x)),
    ("concatenate_other",
     lambda: jax.jit(lambda u: jnp.concatenate([wsc(-u - 1, S("a")), u - 70], 1).max(0))(x)),
    ("pad_other",
     lambda: jax.jit(lambda u: jnp.pad(wsc(-u - 1, S("a")), ((0, 0), (1, 2)),
                                       constant_values=-100.0).max(0))(x)),
    ("slice_other", lambda: jax.jit(lambda u: wsc(-u - 1, S("a"))[:, 1:4].max(0))(x)),
    ("cumsum_other", lambda: jax.jit(lambda u: jnp.cumsum(wsc(-u, S("a")), 1).max(0))(x)),
    ("dynamic_slice_whole",
     lambda: jax.jit(lambda u, i: jax.lax.dynamic_slice(wsc(-u - 1, S("a")), (i, i), (10, 3))
                     .max(0))(x, 2)),
    ("device_put_inside",
     lambda: jax.jit(lambda u: jax.device_put(wsc(-u - 1, S("a")), jax.devices()[0]).max(0))(x)),
    ("empty_blocks_transpose", lambda: jax.jit(lambda u: wsc(-u - 1, X("x")).T.max(1))(x)),
    ("padded_chain", lambda: jax.jit(padded_chain)(x)),
]


def fori_body(i, c):
    return jnp.sin(c) + c.max(0) * 0.5 - i


def while_loop(u):
    return jax.lax.while_loop(lambda c: c.max() > -50, lambda c: c * 2 - 1, wsc(-u - 1, S("a")))


def scan(u):
    def body(c, r):
        c = c + r
        return c, c - c.max(0)
    return jax.lax.scan(body, wsc(u[0] * 0 - 1, S("a")), wsc(u, S(None, "a")))


def cond(u, p):
    return jax.lax.cond(p, lambda c: (-c).max(0), lambda c: (c.T * 2).T.min(0),
                        wsc(u + 1, S("a")))


# Loops whose carries are split unevenly: each device runs the body on its padded block, unless
# the body moves data along the padded dim (a roll), which then enters the loop gathered.
LOOP_RESULTS = [
    ("fori_padded_carry",
     lambda: jax.jit(lambda u: jax.lax.fori_loop(0, 3, fori_body, wsc(-u - 1, S("a"))))(x)),
    ("fori_padded_carry_max",
     lambda: jax.jit(lambda u: jax.lax.fori_loop(0, 3, fori_body, wsc(-u - 1, S("a"))).max(0))(x)),
    ("while_padded_predicate", lambda: jax.jit(while_loop)(x)),
    ("scan_padded_xs", lambda: jax.jit(scan)(xs)),
    ("cond_padded_true", lambda: jax.jit(cond)(x, True)),
    ("cond_padded_false", lambda: jax.jit(cond)(x, False)),
    ("fori_rolled_carry",
     lambda: jax.jit(lambda u: jax.lax.fori_loop(
         0, 3, lambda i, c: jnp.roll(c, 1, 0) * 0.5 + c.max(0), wsc(-u - 1, S("a"))).max(0))(x)),
    ("fori_empty_blocks",
     lambda: jax.jit(lambda u: jax.lax.fori_loop(0, 2, fori_body, wsc(-u - 1, X("x"))).max(0))(x)),
]

def rows_until(c):
    return jax.lax.while_loop(lambda r: r.sum() < 100, lambda r: r * 2 + 1, c)


# vmap of a while_loop with a per-row predicate, rows split: every device runs until the last
# row anywhere is done (an or of the predicate over the devices), finished rows kept. Padding
# rows (10 over 4 devices) must not keep the loop running. A predicate that reads a per-row
# limit the body does not see runs with every row on every device.
LANE_RESULTS = [
    ("batched_while_even",
     lambda: jax.jit(jax.vmap(rows_until))(jax.device_put(x[:8] / 10, S("a")))),
    ("batched_while_tuple_axes",
     lambda: jax.jit(jax.vmap(rows_until))(jax.device_put(x[:8] / 10, S(("a", "b"))))),
    ("batched_while_row_limits",
     lambda: jax.jit(jax.vmap(lambda r, t: jax.lax.while_loop(
         lambda c: c.sum() < t, lambda c: c * 2 + 1, r)))(
             jax.device_put(x[:8] / 10, S("a")), jnp.arange(8.0, dtype=jnp.float32) * 40)),
    ("batched_while_padded",
     lambda: jax.jit(lambda u: jax.vmap(rows_until)(wsc(u / 10, S("a"))).sum(1))(x)),
]

# (case, source of a zero-argument callable that raises)
ERRORS = [
    ("out_shardings_uneven", "lambda: jax.jit(lambda u: u * 2, out_shardings=S('a'))(x)"),
    ("in_shardings_uneven", "lambda: jax.jit(lambda u: u * 2, in_shardings=S('a'))(x)"),
]


def leaf_line(leaf):
    shapes = ";".join(",".join(str(d) for d in s.data.shape) for s in leaf.addressable_shards)
    return f"{leaf.sharding.spec!r}|{shapes}"


def record(cases, results_file, values_file):
    values = {}
    with open(os.path.join(OUT, results_file), "w") as out:
        for name, fn in cases:
            out.write(f"=== {name}\n")
            for i, leaf in enumerate(jax.tree.leaves(fn())):
                out.write(leaf_line(leaf) + "\n")
                values[f"{name}/{i}"] = np.asarray(leaf)
    np.savez(os.path.join(OUT, values_file), **values)


def main():
    os.makedirs(OUT, exist_ok=True)
    record(RESULTS, "results.txt", "values.npz")
    record(SHAPE_RESULTS, "shape_results.txt", "shape_values.npz")
    record(LOOP_RESULTS, "loop_results.txt", "loop_values.npz")
    record(LANE_RESULTS, "lane_results.txt", "lane_values.npz")
    blocks = []
    for name, source in ERRORS:
        try:
            eval(source, {"jax": jax, "S": S, "x": x})()
        except Exception as e:  # noqa: BLE001 - every exception is what is recorded
            blocks.append(f"=== {name}\n{type(e).__name__}: {e}")
        else:
            raise SystemExit(f"{name} raised nothing")
    with open(os.path.join(OUT, "errors.txt"), "w") as out:
        out.write("\n".join(blocks) + "\n")


if __name__ == "__main__":
    main()
