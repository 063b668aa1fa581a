"""Records what JAX gives for slices, pads and reversals along split dims, alone and as the
windows of convolutions and pools written with them: the values, where the results are split,
and which collectives XLA's SPMD partitioner uses for them. XLA keeps such dims split and moves
only the halo rows between neighbours (collective-permute); a result whose dim the mesh axes do
not divide leaves jit with that dim whole. For tests/sharding/halo_test.cpp.

Writes tests/goldens/halo/:
  results.txt  "=== <case>" followed by one line per result leaf, in flattening order:
               "<repr(spec)>|<shard shapes in device order, ';'-separated, dims ','-separated>"
  values.npz   the result leaves, as "<case>/<leaf index>"
  hlo.txt      "=== <case>" followed by the collectives of the compiled program, sorted and
               ','-separated ("-" for none)
Run: python3 tools/goldens/gen_halo.py   (needs jax 0.10.2; the tests do not)
"""
import os
import re

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "halo")

# Auto axes, as spmd's meshes.
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
mesh8 = Mesh(np.array(jax.devices()), ("x",))


def S(*spec):
    return NamedSharding(mesh, P(*spec))


def X(*spec):
    return NamedSharding(mesh8, P(*spec))


r16 = jax.device_put(jnp.arange(16.0, dtype=jnp.float32) - 5, S("a"))
r28 = jax.device_put(jnp.arange(28.0, dtype=jnp.float32) * 0.5, S("a"))
r32 = jax.device_put(jnp.arange(32.0, dtype=jnp.float32) - 7, X("x"))
r32ab = jax.device_put(jnp.arange(32.0, dtype=jnp.float32) * 2 - 9, S(("a", "b")))
m16 = jax.device_put(jnp.arange(96.0, dtype=jnp.float32).reshape(16, 6) - 40, S("a", "b"))
m16x8 = jax.device_put(jnp.arange(128.0, dtype=jnp.float32).reshape(16, 8) / 4, S("a", "b"))
img = jax.device_put(
    jnp.sin(jnp.arange(512.0, dtype=jnp.float32)).reshape(4, 16, 8), S("b", "a"))
w3 = jnp.array([[0.25, -0.5, 1.0], [0.75, 2.0, -1.0], [0.5, 1.5, -0.25]], jnp.float32)


def conv1d_same(u):
    p = jnp.pad(u, (1, 1))
    return 0.25 * p[0:16] + 0.5 * p[1:17] - 0.75 * p[2:18]


def conv2d_same(u):
    p = jnp.pad(u, ((0, 0), (1, 1), (1, 1)))
    out = jnp.zeros_like(u)
    for dy in range(3):
        for dx in range(3):
            out = out + w3[dy, dx] * p[:, dy:dy + 16, dx:dx + 8]
    return out


def max_pool_3x2(u):
    """A 3-wide, stride-2 max pool over the height (as ResNet's), padded with -inf."""
    p = lax.pad(u, -jnp.inf, [(0, 0, 0), (1, 1, 0), (0, 0, 0)])
    return jnp.maximum(jnp.maximum(p[:, 0:15:2], p[:, 1:16:2]), p[:, 2:17:2])


# (case, function, arguments).
CASES = [
    ("slice_shift1", lambda u: u[1:13], r16),
    ("slice_2d", lambda u: u[3:15, 1:7], m16x8),
    ("slice_several", lambda u: u[2:26], r32),
    ("slice_far", lambda u: u[0:8], r32),
    ("slice_axis_tuple", lambda u: u[5:29], r32ab),
    ("pad_axis_tuple", lambda u: lax.pad(u, 3.0, [(3, -3, 0)]), r32ab),
    ("slice_strided", lambda u: u[2:26:2], r28),
    ("slice_strided_3", lambda u: u[1:13:3], r16),
    ("slice_uneven", lambda u: u[1:15], r16),
    ("pad_positive", lambda u: jnp.pad(u, (1, 3)), r16),
    ("pad_value_2d", lambda u: lax.pad(u, -5.0, [(2, 2, 0), (1, 1, 0)]), m16),
    ("pad_negative", lambda u: lax.pad(u, 0.0, [(-1, -3, 0)]), r16),
    ("pad_mixed", lambda u: lax.pad(u, 7.0, [(-2, 2, 0)]), r16),
    ("pad_far", lambda u: lax.pad(u, 1.0, [(6, -2, 0)]), r16),
    ("rev", lambda u: u[::-1], r16),
    ("rev_2d", lambda u: u[::-1, ::-1], m16),
    ("rev_mesh8", lambda u: lax.rev(u, (0,)) * 2, r32),
    ("conv1d_valid", lambda u: 0.25 * u[0:14] + 0.5 * u[1:15] - 0.75 * u[2:16], r16),
    ("conv1d_same", conv1d_same, r16),
    ("conv2d_same", conv2d_same, img),
    ("max_pool", max_pool_3x2, img),
]

COLLECTIVES = ("all-gather", "all-to-all", "all-reduce", "collective-permute", "reduce-scatter")


def leaf_line(leaf):
    shapes = ";".join(",".join(str(d) for d in s.data.shape) for s in leaf.addressable_shards)
    return f"{leaf.sharding.spec!r}|{shapes}"


def collectives(f, arg):
    text = jax.jit(f).lower(arg).compile().as_text()
    found = sorted({c for c in COLLECTIVES if re.search(rf"\b{c}(-start)?\(", text)})
    return ",".join(found) or "-"


def main():
    os.makedirs(OUT, exist_ok=True)
    values = {}
    with open(os.path.join(OUT, "results.txt"), "w") as results, \
            open(os.path.join(OUT, "hlo.txt"), "w") as hlo:
        for name, f, arg in CASES:
            results.write(f"=== {name}\n")
            for i, leaf in enumerate(jax.tree.leaves(jax.jit(f)(arg))):
                results.write(leaf_line(leaf) + "\n")
                values[f"{name}/{i}"] = np.asarray(leaf)
            hlo.write(f"=== {name}\n{collectives(f, arg)}\n")
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
