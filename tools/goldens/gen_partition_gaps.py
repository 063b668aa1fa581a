"""Records what JAX gives where spmd's partitioner used to fall short of XLA's, for
tests/sharding/partition_gaps_test.cpp: reductions wanted split over their reduced axes (over
several dims, in another order, with other axes beside them), products whose contracting dim is
split over axes their result is wanted split over on a free dim (a data-parallel weight
gradient, a column-parallel layer on split features, a product with a small result), control
flow holding padded blocks, and reshards between meshes on the same devices.

Writes tests/goldens/partitioning/:
  gaps_results.txt  "=== <case>" followed by one line per result leaf, in flattening order:
                    "<repr(spec)>|<shard shapes in device order, ';'-separated, dims ','-separated>
                    |<the mesh's device ids, ','-separated>"
  gaps_values.npz   the result leaves, as "<case>/<leaf index>"
  gaps_xla.txt      "=== <case>" followed by the collectives in XLA's compiled CPU program, one
                    per line, in program order (for the record: XLA's CPU pipeline completes a
                    reduction wanted split as an all-reduce then a dynamic-slice, where its GPU
                    pipeline makes it a reduce-scatter, which is what spmd inserts)
Run: python3 tools/goldens/gen_partition_gaps.py   (needs jax 0.10.2; the tests do not)
"""
import os
import re

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
mesh3 = Mesh(mesh_utils.create_device_mesh((2, 2, 2)), ("a", "b", "c"))
lax = jax.lax


def S(m, *spec):
    return NamedSharding(m, P(*spec))


def put(m, v, *spec):
    return jax.device_put(v, S(m, *spec))


x16 = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)
w16 = jnp.arange(128.0, dtype=jnp.float32).reshape(16, 8) / 16
x3 = jnp.arange(1024.0, dtype=jnp.float32).reshape(8, 8, 16)
x10 = jnp.arange(60.0, dtype=jnp.float32).reshape(10, 6)
wsc = jax.lax.with_sharding_constraint


def matmul(u, v):
    return u @ v


def sum0(u):
    return u.sum(0)


mesh8 = Mesh(mesh_utils.create_device_mesh((8,)), ("a",))


# Signed multiples of 1/8 scattered over the array (37 is prime to the sizes used): every sum
# of products of them is exact in float32, whatever the order of summation.
def scrambled(rows, cols, shift=0):
    n = rows * cols
    return (((jnp.arange(n, dtype=jnp.int32) * 37 + shift) % 17 - 8) / 8).astype(
        jnp.float32).reshape(rows, cols)


def weight_grad(g, x):
    return g.T @ x


def column_parallel(h, w):
    return h @ w.T


def fori_body(i, c):
    return jnp.sin(c) + c.max(0) * 0.5 - i


def rolled_body(i, c):
    """Moves data along the padded dim: each step would gather it."""
    return jnp.roll(c, 1, 0) * 0.5 + c.max(0)


def padded_and_rolled(u):
    """Two carries split unevenly (10 rows over 4 devices): one body keeps padded, one not."""
    def body(i, cs):
        return fori_body(i, cs[0]), rolled_body(i, cs[1])

    c1, c2 = lax.fori_loop(0, 3, body, (wsc(-u - 1, S(mesh, "a")), wsc(-u - 2, S(mesh, "a"))))
    return c1.max(0), c2.max(0)


def nested_padded(u):
    """A loop in a loop body, keeping the padded carry."""
    return lax.fori_loop(0, 2, lambda i, c: lax.fori_loop(0, 2, fori_body, c) * 0.5,
                         wsc(-u - 1, S(mesh, "a"))).max(0)


D = jax.devices()
m_fwd = Mesh(np.array(D).reshape(4, 2), ("a", "b"))
m_rev = Mesh(np.array(D[::-1]).reshape(4, 2), ("a", "b"))
m_x = Mesh(np.array(D), ("x",))
m_low = Mesh(np.array(D[:4]), ("x",))
m_high = Mesh(np.array(D[4:]), ("x",))
x8 = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)


def jit_in(sharding):
    return jax.jit(lambda u: u * 2, in_shardings=sharding)


def constrained(sharding):
    return lambda u: wsc(u * 2 + 1, sharding)


# (case, function, arguments, out_shardings). Names match the tests. Names match the tests.
CASES = [
    ("scatter_two_dims", matmul,
     (put(mesh, x16[:8], None, ("a", "b")), put(mesh, w16, ("a", "b"), None)),
     S(mesh, "a", "b")),
    ("scatter_other_order", sum0, (put(mesh, x16, ("a", "b"), None),), S(mesh, ("b", "a"))),
    ("scatter_beside_a_slice", sum0, (put(mesh3, x3, "a", "b", None),),
     S(mesh3, ("b", "c"), "a")),
    ("scatter_then_psum", sum0, (put(mesh3, x3, ("a", "c"), "b", None),), S(mesh3, "b", "a")),
    ("whole_weight_gradient", weight_grad,
     (put(mesh8, scrambled(256, 256), "a", None), put(mesh8, scrambled(256, 192, 5), "a", None)),
     S(mesh8, "a", None)),
    ("whole_small_result", weight_grad,
     (put(mesh8, scrambled(64, 8), "a", None), put(mesh8, scrambled(64, 8, 5), "a", None)),
     S(mesh8, "a", None)),
    ("whole_column_parallel", column_parallel,
     (put(mesh, scrambled(16, 32), "a", "b"), put(mesh, scrambled(16, 32, 3), "b")),
     S(mesh, "a", "b")),
    ("fori_padded_and_rolled", padded_and_rolled, (x10,), None),
    ("fori_nested_padded", nested_padded, (x10,), None),
    # Reshards between meshes: the same devices in another order, under other axes, or others.
    # (An argument split as P('y') over Mesh(devices (2, 4), ('x', 'y')) constrained to P('a')
    # over Mesh(the same devices (4, 2), ('a', 'b')) makes JAX 0.10.2 raise an IndivisibleError
    # for its own result; the test checks that case's values against the unsplit computation.)
    ("held_reversed_in_shardings", jit_in(S(m_rev, "a", "b")), (put(m_fwd, x8, "a", "b"),),
     None),
    ("relabelled_arrangement", constrained(S(m_fwd, "a", "b")), (put(m_x, x8, "x"),), None),
    ("copied_device_sets", jit_in(S(m_high, "x")), (put(m_low, x8, "x"),), None),
    ("copied_arrangement", constrained(S(m_x, "x")), (put(m_fwd, x8, "a", "b"),), None),
]

COLLECTIVE = re.compile(
    r"= \S+ (all-reduce|reduce-scatter|all-gather|all-to-all|collective-permute)(?:-start)?\(")


def leaf_line(leaf):
    shapes = ";".join(",".join(str(d) for d in s.data.shape) for s in leaf.addressable_shards)
    ids = ",".join(str(d.id) for d in leaf.sharding.mesh.devices.flat)
    return f"{leaf.sharding.spec!r}|{shapes}|{ids}"


def main():
    os.makedirs(OUT, exist_ok=True)
    values = {}
    with open(os.path.join(OUT, "gaps_results.txt"), "w") as out, \
            open(os.path.join(OUT, "gaps_xla.txt"), "w") as xla:
        for name, fn, args, out_sharding in CASES:
            f = (fn if hasattr(fn, "lower") else jax.jit(fn) if out_sharding is None
                 else jax.jit(fn, out_shardings=out_sharding))
            out.write(f"=== {name}\n")
            for i, leaf in enumerate(jax.tree.leaves(f(*args))):
                out.write(leaf_line(leaf) + "\n")
                values[f"{name}/{i}"] = np.asarray(leaf)
            xla.write(f"=== {name}\n")
            for op in COLLECTIVE.findall(f.lower(*args).compile().as_text()):
                xla.write(op + "\n")
    np.savez(os.path.join(OUT, "gaps_values.npz"), **values)


if __name__ == "__main__":
    main()
