"""Records what JAX 0.10.2 does with arrays a jitted function closes over: its lowering embeds
them as constants (committed or not: their devices and shardings play no part), and Shardy's
constant splitter gives each use its own copy, so each use takes the split of its other operand
and nothing moves. Also the collectives XLA's compiled program runs for a slice of a constant
split along the sliced dim (the constant's block is computed in place, no halo).

Writes tests/goldens/sharding/closed_over.txt: "=== <case>" followed by one line per result leaf,
"<repr(sharding)>", then "collectives: <sorted collectives of the compiled program, or ->".
Run: /work/jaxenv/bin/python tools/goldens/gen_closed_over.py   (needs jax 0.10.2; the tests do
not)
"""
import os
import re

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sharding", "closed_over.txt")
COLLECTIVES = ("all-gather", "all-to-all", "all-reduce", "collective-permute", "reduce-scatter")

m = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
x = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)
u = jax.device_put(x, NamedSharding(m, P("a", None)))
v = jax.device_put(x, NamedSharding(m, P(None, "a")))
# The closed-over array: uncommitted, and committed (split, and on other devices).
c = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16) + 1
c_split = jax.device_put(c, NamedSharding(m, P("a", None)))
c_elsewhere = jax.device_put(c, NamedSharding(Mesh(jax.devices()[4:], ("b",)), P("b")))


def two_uses(u, v):
    return c * u, c * v


def two_uses_of_split(u, v):
    return c_split * u, c_split * v


def two_uses_of_elsewhere(u, v):
    return c_elsewhere * u, c_elsewhere * v


def derived(u, v):
    d = jnp.sin(c) + 1
    return d * u, d * v


def loss(u, v):
    return jnp.sum(c * u * u) + jnp.sum(c * v * v)


def also_returned(u, v):
    return c, c * u, c * v


def constrained(u, v):
    d = jax.lax.with_sharding_constraint(c, NamedSharding(m, P("a")))
    return d * u, d * v


def constrained_once(u, v):
    return jax.lax.with_sharding_constraint(c, NamedSharding(m, P("a"))) * u, c * v


# A slice of a constant split along the sliced dim: the constant's block computed in place.
def sliced_iota(u):
    return jax.lax.broadcasted_iota(jnp.float32, (16, 32), 1)[:, 8:24] * u


def sliced_ones(u):
    return jnp.ones((512,), jnp.float32).reshape(16, 32)[:, 8:24] * u


def sliced_closed_over(u):
    return jnp.concatenate([c, c], axis=1)[:, 4:20] * u


CASES = [
    ("closed_over", two_uses, (u, v)),
    ("closed_over_committed", two_uses_of_split, (u, v)),
    ("closed_over_elsewhere", two_uses_of_elsewhere, (u, v)),
    ("closed_over_derived", derived, (u, v)),
    ("closed_over_grad", jax.grad(loss, argnums=(0, 1)), (u, v)),
    ("closed_over_returned", also_returned, (u, v)),
    ("closed_over_constrained", constrained, (u, v)),
    ("closed_over_constrained_once", constrained_once, (u, v)),
    ("sliced_iota", sliced_iota, (v,)),
    ("sliced_ones", sliced_ones, (v,)),
    ("sliced_closed_over", sliced_closed_over, (v,)),
]


def collectives(f, args):
    text = jax.jit(f).lower(*args).compile().as_text()
    found = sorted({k for k in COLLECTIVES if re.search(rf"\b{k}(-start)?\(", text)})
    return ",".join(found) or "-"


def main():
    text = ""
    for name, f, args in CASES:
        leaves = jax.tree.leaves(jax.jit(f)(*args))
        text += f"=== {name}\n" + "".join(repr(leaf.sharding) + "\n" for leaf in leaves)
        text += f"collectives: {collectives(f, args)}\n"
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as out:
        out.write(text)
    print(text)


if __name__ == "__main__":
    main()
