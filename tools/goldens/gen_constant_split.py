"""Records the shardings JAX 0.10.2 gives results that read one constant in two differently split
uses: Shardy's constant splitter gives every use of a constant expression (a constant, iota, or
broadcast / reshape / slice / elementwise ops of constants) and of a scalar's broadcast a copy of
its own before propagation, so each use takes the split of the other operand (the gradient of
sum(u * v) follows v for u and u for v). A sharding constraint is one value with one split.

Writes tests/goldens/sharding/constant_split.txt: "=== <case>" followed by one line per result
leaf, "<repr(sharding)>".
Run: /work/jaxenv/bin/python tools/goldens/gen_constant_split.py   (needs jax 0.10.2; the tests
do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "sharding", "constant_split.txt")

m = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
x = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)
u = jax.device_put(x, NamedSharding(m, P("a", None)))
v = jax.device_put(x, NamedSharding(m, P(None, "a")))


def shared(make):
    def f(u, v):
        o = make()
        return o * u, o * v
    return f


def loss_product(u, v):
    return jnp.sum(u * v)


CASES = [
    ("grad_product", lambda: jax.grad(loss_product, argnums=(0, 1))(u, v)),
    ("jit_grad_product", lambda: jax.jit(jax.grad(loss_product, argnums=(0, 1)))(u, v)),
    ("ones", lambda: jax.jit(shared(lambda: jnp.ones((16, 16), jnp.float32)))(u, v)),
    ("sin_of_ones", lambda: jax.jit(shared(lambda: jnp.sin(jnp.ones((16, 16), jnp.float32))))(
        u, v)),
    ("iota", lambda: jax.jit(shared(
        lambda: jax.lax.broadcasted_iota(jnp.float32, (16, 16), 1)))(u, v)),
    ("reshaped_and_sliced", lambda: jax.jit(shared(
        lambda: jnp.ones((512,), jnp.float32).reshape(16, 32)[:, 8:24]))(u, v)),
    ("scalar_broadcast", lambda: jax.jit(shared_scalar)(u, v, jnp.float32(2))),
    ("also_an_output", lambda: jax.jit(
        lambda u, v: (lambda o: (o, o * u, o * v))(jnp.ones((16, 16), jnp.float32)))(u, v)),
    ("constrained", lambda: jax.jit(shared(lambda: jax.lax.with_sharding_constraint(
        jnp.ones((16, 16), jnp.float32), NamedSharding(m, P("a")))))(u, v)),
]


def shared_scalar(u, v, s):
    o = jnp.broadcast_to(s, (16, 16))
    return o * u, o * v


def leaves(tree):
    return "\n".join(repr(leaf.sharding) for leaf in jax.tree.leaves(tree))


def main():
    text = "".join(f"=== {name}\n{leaves(fn())}\n" for name, fn in CASES)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
