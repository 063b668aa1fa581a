"""Records what JAX gives for tests/sharding/reduce_scatter_donation_test.cpp: maxima and minima
wanted split over their reduced axes (one dim, two dims, another axis order, beside a reduction
they are not split over, int32), donated committed sharded arguments of a partitioned jit, and
device_put (and reshard, which JAX refuses) of a committed array to a mesh over the same
devices in another order.

Writes tests/goldens/partitioning/:
  rsd_results.txt  "=== <case>" followed by one line per result leaf, in flattening order:
                   "<repr(spec)>|<shard shapes in device order, ';'-separated, dims ','-separated>
                   |<the mesh's device ids, ','-separated>"; donation cases add the lines
                   "deleted <argument index> <x.is_deleted()>" and "error <str(error)>" (reading
                   the donated argument afterwards); reshard_reversed holds only JAX's error
  rsd_values.npz   the result leaves, as "<case>/<leaf index>"
  rsd_xla.txt      "=== <case>" followed by the collectives in XLA's compiled CPU program
Run: python3 tools/goldens/gen_reduce_scatter_donation.py   (needs jax 0.10.2; the tests do not)
"""
import os
import re
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "partitioning")

mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
mesh3 = Mesh(mesh_utils.create_device_mesh((2, 2, 2)), ("a", "b", "c"))
D = jax.devices()
m_fwd = Mesh(np.array(D).reshape(4, 2), ("a", "b"))
m_rev = Mesh(np.array(D[::-1]).reshape(4, 2), ("a", "b"))
m_x = Mesh(np.array(D), ("x",))
m_x_rot = Mesh(np.array(D[3:] + D[:3]), ("x",))
# JAX's reshard takes Explicit axes only.
EXPLICIT = (jax.sharding.AxisType.Explicit,) * 2
m_fwd_e = Mesh(np.array(D).reshape(4, 2), ("a", "b"), axis_types=EXPLICIT)
m_rev_e = Mesh(np.array(D[::-1]).reshape(4, 2), ("a", "b"), axis_types=EXPLICIT)


def S(m, *spec):
    return NamedSharding(m, P(*spec))


def put(m, v, *spec):
    return jax.device_put(v, S(m, *spec))


# Signed values scattered over the array (37 is prime to 256), so every device's block holds
# some maxima and some minima and a zero in the padding or an unmasked block would show.
def scrambled(n):
    return ((jnp.arange(n, dtype=jnp.int32) * 37) % n - n // 2)


x16 = (scrambled(256).reshape(16, 16) / 4).astype(jnp.float32)
x3 = (scrambled(1024).reshape(8, 8, 16) / 8).astype(jnp.float32)
i16 = scrambled(256).reshape(16, 16)


def max0(u):
    return u.max(0)


def min0(u):
    return u.min(0)


# (case, function, arguments, out_shardings). Names match the tests.
CASES = [
    ("max_scatter_one_dim", max0, (put(mesh, x16, "a", None),), S(mesh, "a")),
    ("min_scatter_one_dim", min0, (put(mesh, x16, ("a", "b"), None),), S(mesh, ("a", "b"))),
    ("max_scatter_other_order", max0, (put(mesh, x16, ("a", "b"), None),), S(mesh, ("b", "a"))),
    ("min_scatter_two_dims", min0, (put(mesh, x3, ("a", "b"), None, None),), S(mesh, "a", "b")),
    ("max_scatter_beside_a_slice", max0, (put(mesh3, x3, "a", "b", None),),
     S(mesh3, ("b", "c"), "a")),
    ("max_scatter_then_pmax", max0, (put(mesh3, x3, ("a", "c"), "b", None),), S(mesh3, "b", "a")),
    ("max_scatter_int32", max0, (put(mesh, i16, "a", None),), S(mesh, "a")),
]

COLLECTIVE = re.compile(
    r"= \S+ (all-reduce|reduce-scatter|all-gather|all-to-all|collective-permute)(?:-start)?\(")


def leaf_line(leaf):
    shapes = ";".join(",".join(str(d) for d in s.data.shape) for s in leaf.addressable_shards)
    ids = ",".join(str(d.id) for d in leaf.sharding.mesh.devices.flat)
    return f"{leaf.sharding.spec!r}|{shapes}|{ids}"


def record(out, values, name, leaves):
    out.write(f"=== {name}\n")
    for i, leaf in enumerate(leaves):
        out.write(leaf_line(leaf) + "\n")
        values[f"{name}/{i}"] = np.asarray(leaf)


def donation_cases(out, values):
    # An elementwise result of the donated argument's per-device shape, and one of another
    # shape (the donated argument is then not usable and is left alone, with JAX's warning).
    cases = [
        ("donated_elementwise", lambda u, v: u * 2 + v, (0,),
         lambda: (put(mesh, x16, "a", "b"), put(mesh, x16, "a", "b"))),
        ("donated_both", lambda u, v: (u - v, u + v), (0, 1),
         lambda: (put(mesh, x16, "a", "b"), put(mesh, x16, "a", "b"))),
        ("donated_unusable", lambda u: u.sum(0), (0,), lambda: (put(mesh, x16, "a", "b"),)),
    ]
    for name, fn, donate, make in cases:
        args = make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = jax.jit(fn, donate_argnums=donate)(*args)
        record(out, values, name, jax.tree.leaves(result))
        for k in donate:
            out.write(f"deleted {k} {args[k].is_deleted()}\n")
            try:
                np.asarray(args[k])
                out.write("error none\n")
            except RuntimeError as e:
                out.write(f"error {e}\n")


def reorder_cases(out, values):
    cases = [
        ("device_put_reversed", put(m_fwd, x16, "a", "b"), S(m_rev, "a", "b")),
        ("device_put_rotated", put(m_x, x16, "x", None), S(m_x_rot, "x", None)),
        ("device_put_reversed_retiled", put(m_fwd, x16, "a", "b"), S(m_rev, "b", "a")),
    ]
    for name, x, target in cases:
        record(out, values, name, [jax.device_put(x, target)])
    # JAX's reshard (Explicit axes only) refuses another device order.
    out.write("=== reshard_reversed\n")
    try:
        jax.sharding.reshard(put(m_fwd_e, x16, "a", None), S(m_rev_e, "a", None))
        out.write("error none\n")
    except ValueError as e:
        out.write(f"error {str(e).splitlines()[0]}\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    values = {}
    with open(os.path.join(OUT, "rsd_results.txt"), "w") as out, \
            open(os.path.join(OUT, "rsd_xla.txt"), "w") as xla:
        for name, fn, args, out_sharding in CASES:
            f = jax.jit(fn, out_shardings=out_sharding)
            record(out, values, name, jax.tree.leaves(f(*args)))
            xla.write(f"=== {name}\n")
            for op in COLLECTIVE.findall(f.lower(*args).compile().as_text()):
                xla.write(op + "\n")
        donation_cases(out, values)
        reorder_cases(out, values)
    np.savez(os.path.join(OUT, "rsd_values.npz"), **values)


if __name__ == "__main__":
    main()
