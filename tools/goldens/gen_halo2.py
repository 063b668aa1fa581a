"""Records what JAX gives for concatenations, pads with interior padding and reversals of unevenly
split dims along split dims: the values, where the results are split, and which collectives
XLA's SPMD partitioner uses for them. XLA keeps an interior pad split and moves only the rows a
neighbour holds (collective-permute, or nothing when each block spreads its own rows), reverses
an uneven split with collective-permutes, and gathers the operands of a concatenation whole
(all-gather) before slicing the result's blocks. For tests/sharding/halo2_test.cpp.

Writes tests/goldens/halo2/ in gen_halo.py's format (results.txt, values.npz, hlo.txt).
XLA's partitioner aborts on an interior pad with negative low padding of a split dim (a failed
check in ReshardAsWindowedInput), so those cases have no golden here; the tests check them
against the unsplit pad.
Run: python3 tools/goldens/gen_halo2.py   (needs jax 0.10.2; the tests do not)
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
                   "halo2")

# Auto axes, as spmd's meshes.
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
mesh8 = Mesh(np.array(jax.devices()), ("x",))


def S(*spec):
    return NamedSharding(mesh, P(*spec))


def X(*spec):
    return NamedSharding(mesh8, P(*spec))


r16 = jax.device_put(jnp.arange(16.0, dtype=jnp.float32) - 5, S("a"))
s16 = jax.device_put(jnp.arange(16.0, dtype=jnp.float32) * -0.5 + 3, S("a"))
r8 = jax.device_put(jnp.arange(8.0, dtype=jnp.float32) * 3 + 1, S("a"))
r12 = jax.device_put(jnp.arange(12.0, dtype=jnp.float32) * 0.25 - 2, S("a"))
r32 = jax.device_put(jnp.arange(32.0, dtype=jnp.float32) - 7, X("x"))
r16x = jax.device_put(jnp.arange(16.0, dtype=jnp.float32) * 2 + 100, X("x"))
m16 = jax.device_put(jnp.arange(96.0, dtype=jnp.float32).reshape(16, 6) - 40, S("a", "b"))
m8 = jax.device_put(jnp.arange(48.0, dtype=jnp.float32).reshape(8, 6) * -1, S("a", "b"))
r10 = jnp.arange(10.0, dtype=jnp.float32) - 3
w10 = jnp.arange(10.0, dtype=jnp.float32) * 0.5 + 1


def rev_uneven_x(u):
    """10 rows over 8 devices (2, 2, 2, 2, 2, 0, 0, 0), reversed and weighed by the row."""
    v = lax.with_sharding_constraint(u * 2, X("x"))
    return jnp.sum(lax.rev(v, (0,)) * w10)


def rev_uneven_a(u):
    """10 rows over 4 devices (3, 3, 3, 1)."""
    v = lax.with_sharding_constraint(u * 2, S("a"))
    return jnp.sum(lax.rev(v, (0,)) * w10)


# (case, function, arguments).
CASES = [
    ("concat_equal", lambda u, v: jnp.concatenate([u, v]), (r16, s16)),
    ("concat_unequal", lambda u, v: jnp.concatenate([u, v]), (r16, r8)),
    ("concat_three", lambda u, v, w: jnp.concatenate([u, v, w]), (r8, r12, r8)),
    ("concat_mesh8", lambda u, v: jnp.concatenate([u, v]), (r32, r16x)),
    ("concat_2d", lambda u, v: jnp.concatenate([u, v], axis=0), (m16, m8)),
    ("pad_interior", lambda u: lax.pad(u, 1.0, [(0, 1, 1)]), (r16,)),
    ("pad_interior_shift", lambda u: lax.pad(u, -2.0, [(3, 2, 1)]), (r16,)),
    ("pad_interior_2", lambda u: lax.pad(u, 1.0, [(1, 1, 2)]), (r16,)),
    ("pad_interior_3", lambda u: lax.pad(u, 4.0, [(2, 1, 3)]), (r16,)),
    ("pad_interior_mesh8", lambda u: lax.pad(u, 1.5, [(5, 4, 1)]), (r32,)),
    ("pad_interior_2d", lambda u: lax.pad(u, 0.5, [(1, 0, 1), (0, 1, 1)]), (m16,)),
    ("rev_uneven", rev_uneven_x, (r10,)),
    ("rev_uneven_a", rev_uneven_a, (r10,)),
]

COLLECTIVES = ("all-gather", "all-to-all", "all-reduce", "collective-permute", "reduce-scatter")


def leaf_line(leaf):
    shapes = ";".join(",".join(str(d) for d in s.data.shape) for s in leaf.addressable_shards)
    return f"{leaf.sharding.spec!r}|{shapes}"


def collectives(f, args):
    text = jax.jit(f).lower(*args).compile().as_text()
    found = sorted({c for c in COLLECTIVES if re.search(rf"\b{c}(-start)?\(", text)})
    return ",".join(found) or "-"


def main():
    os.makedirs(OUT, exist_ok=True)
    values = {}
    with open(os.path.join(OUT, "results.txt"), "w") as results, \
            open(os.path.join(OUT, "hlo.txt"), "w") as hlo:
        for name, f, args in CASES:
            results.write(f"=== {name}\n")
            for i, leaf in enumerate(jax.tree.leaves(jax.jit(f)(*args))):
                results.write(leaf_line(leaf) + "\n")
                values[f"{name}/{i}"] = np.asarray(leaf)
            hlo.write(f"=== {name}\n{collectives(f, args)}\n")
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
