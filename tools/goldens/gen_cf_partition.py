"""Records what JAX gives for control flow inside jit over sharded arrays: Shardy propagates
through the bodies of fori_loop, while_loop, scan and cond, so their carries, operands and
results keep the splits of the arrays they start from. For
tests/sharding/control_flow_partition_test.cpp.

Writes tests/goldens/partitioning/:
  cf_results.txt  "=== <case>" followed by one line per result leaf, in flattening order:
                  "<repr(spec)>|<shard shapes in device order, ';'-separated, dims ','-separated>"
  cf_values.npz   the result leaves, as "<case>/<leaf index>"
Run: python3 tools/goldens/gen_cf_partition.py   (needs jax 0.10.2; the tests do not)
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

# Auto axes, as spmd's meshes.
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
lax = jax.lax


def put(v, *spec):
    return jax.device_put(v, NamedSharding(mesh, P(*spec)))


x = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)
w = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8) / 64
xs3 = jnp.arange(192.0, dtype=jnp.float32).reshape(3, 8, 8) / 100


def fori_elementwise(u):
    return lax.fori_loop(0, 5, lambda i, c: jnp.sin(c) * 0.5 + 1, u)


def while_sum_predicate(u):
    return lax.while_loop(lambda c: c.sum() < 1e5, lambda c: c * 2 + 1, u)


def scan_cumsum(u):
    return lax.scan(lambda c, r: (c + r, c + r), jnp.zeros(8, jnp.float32), u)


def cond_shards(p, u):
    return lax.cond(p, jnp.sin, jnp.cos, u)


def cond_sum_predicate(u):
    return lax.cond(u.sum() > 2000, lambda v: v - v.mean(0), lambda v: v * 2, u)


def fori_centered(u):
    """A sum over the split dim inside the body: completed across devices every step."""
    return lax.fori_loop(0, 3, lambda i, c: (c - c.mean(0)) * 1.5, u)


def scan_matmul(wm, xs, h0):
    def body(h, xr):
        h = jnp.tanh(h @ wm + xr)
        return h, h.sum()

    return lax.scan(body, h0, xs)


def scan_matmul_loss(wm, xs, h0):
    h, ys = scan_matmul(wm, xs, h0)
    return h.sum() + ys.sum()


S_AB = NamedSharding(mesh, P("a", "b"))


def fori_constrained(u):
    """A constraint only inside the body: it places the computation on the mesh."""
    return lax.fori_loop(0, 3, lambda i, c: jax.lax.with_sharding_constraint(c * 2.0, S_AB), u)


def cond_constrained(u):
    return lax.cond(u.sum() > 0, lambda v: jax.lax.with_sharding_constraint(v * 2.0, S_AB),
                    lambda v: v, u)


# (case, zero-argument callable). Names match the tests.
RESULTS = [
    ("fori_elementwise", lambda: jax.jit(fori_elementwise)(put(x, "a", "b"))),
    ("while_sum_predicate", lambda: jax.jit(while_sum_predicate)(put(x, "a", "b"))),
    ("scan_cumsum", lambda: jax.jit(scan_cumsum)(put(x, None, "a"))),
    ("cond_true", lambda: jax.jit(cond_shards)(True, put(x, "a", "b"))),
    ("cond_false", lambda: jax.jit(cond_shards)(False, put(x, "a", "b"))),
    ("cond_sum_predicate", lambda: jax.jit(cond_sum_predicate)(put(x, "a", "b"))),
    ("fori_centered", lambda: jax.jit(fori_centered)(put(x, "a", "b"))),
    ("scan_matmul",
     lambda: jax.jit(scan_matmul)(put(w, None, "b"), put(xs3, None, "a"), put(x / 64, "a"))),
    ("fori_constrained_uncommitted", lambda: jax.jit(fori_constrained)(x)),
    ("cond_constrained_uncommitted", lambda: jax.jit(cond_constrained)(x)),
    ("grad_scan_matmul",
     lambda: jax.jit(jax.grad(scan_matmul_loss))(put(w, None, "b"), put(xs3, None, "a"),
                                                 put(x / 64, "a"))),
]


def leaf_line(leaf):
    shapes = ";".join(",".join(str(d) for d in s.data.shape) for s in leaf.addressable_shards)
    return f"{leaf.sharding.spec!r}|{shapes}"


def main():
    os.makedirs(OUT, exist_ok=True)
    values = {}
    with open(os.path.join(OUT, "cf_results.txt"), "w") as out:
        for name, fn in RESULTS:
            out.write(f"=== {name}\n")
            for i, leaf in enumerate(jax.tree.leaves(fn())):
                out.write(leaf_line(leaf) + "\n")
                values[f"{name}/{i}"] = np.asarray(leaf)
    np.savez(os.path.join(OUT, "cf_values.npz"), **values)


if __name__ == "__main__":
    main()
