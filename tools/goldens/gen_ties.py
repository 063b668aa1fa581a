"""Records how JAX 0.10.2 (Shardy) splits a value read by two uses that want it split alike in
size but along different dims (a tie): o read by o * u (u split P('a', None)) and o * v (v split
P(None, 'a')), in several program orders and output orders.

Writes tests/goldens/sharding/ties.txt: "=== <case>" followed by one line per result leaf,
"<spec>", then "o: <spec of o>" (o returned as the last result).
Run: /work/jaxenv/bin/python tools/goldens/gen_ties.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sharding", "ties.txt")

m = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
x = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)
u = jax.device_put(x, NamedSharding(m, P("a", None)))
v = jax.device_put(x, NamedSharding(m, P(None, "a")))
w = x / 256  # uncommitted: open


def o_of(w):
    return jnp.cumsum(jnp.sin(w), axis=1)


def u_first(u, v, w):
    o = o_of(w)
    a = o * u
    b = o * v
    return a, b, o


def v_first(u, v, w):
    o = o_of(w)
    b = o * v
    a = o * u
    return a, b, o


def v_first_returned_second(u, v, w):
    o = o_of(w)
    b = o * v
    a = o * u
    return b, a, o


def operand_order(u, v, w):
    o = o_of(w)
    return u * o, o * v, o


def summed(u, v, w):
    o = o_of(w)
    return jnp.sum(o * v, axis=0), jnp.sum(o * u, axis=1), o


def cumsum_of_ones(u, v, w):
    o = jnp.cumsum(jnp.ones((16, 16), jnp.float32))
    o = o.reshape(16, 16)
    return o * u, o * v, o


CASES = [("u_first", u_first), ("v_first", v_first),
         ("v_first_returned_second", v_first_returned_second),
         ("operand_order", operand_order), ("summed", summed),
         ("cumsum_of_ones", cumsum_of_ones)]


def main():
    text = ""
    for name, f in CASES:
        leaves = jax.tree.leaves(jax.jit(f)(u, v, w))
        text += f"=== {name}\n" + "".join(f"{leaf.sharding.spec}\n" for leaf in leaves[:-1])
        text += f"o: {leaves[-1].sharding.spec}\n"
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as out:
        out.write(text)
    print(text)


if __name__ == "__main__":
    main()
