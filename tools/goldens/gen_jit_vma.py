"""Records JAX 0.10.2's types of a jit's results inside a shard_map body with check_vma: each
result is typed as its body's result (pjit), so one jit can return a value varying over 'a' and
an invariant one, or one varying over 'a' and one over 'b'; what follows them (psums, the pvary
casts JAX inserts before psum and before an operation joining them) is typed from there. Cases
on an 8-device mesh ('a') and a 4x2 one ('a', 'b'), Auto axes; one under grad.

Writes, under tests/goldens/jit_vma/:
  jaxprs.txt   "=== <case>" blocks: make_jaxpr of the shard_map
  values.npz   the results, as "<case>/<result index>"
Run: python3 tools/goldens/gen_jit_vma.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "jit_vma")
mesh8 = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
mesh42 = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
x16 = jnp.arange(16.0, dtype=jnp.float32)
x8 = jnp.arange(8.0, dtype=jnp.float32)
y2 = jnp.arange(2.0, dtype=jnp.float32) + 1.0
y4 = jnp.arange(4.0, dtype=jnp.float32) + 1.0


def sin_twice(u, v):
    return lax.sin(u), v * 2.0


def smap(mesh, in_specs, out_specs, body):
    return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


def varying_and_invariant(x, y):
    r, s = jax.jit(sin_twice)(x, y)
    return lax.psum(r, "a"), lax.psum(s, "a")


def over_a_and_b(x, y):
    r, s = jax.jit(sin_twice)(x, y)
    return lax.psum(r, "a"), lax.psum(s, "b"), r + s


def mixed_operands(x, y):
    r, s, t = jax.jit(lambda u, v: (u * v, v + 1.0, lax.cos(v)))(x, y)
    return lax.psum(r, "a"), s, t * s


def nested(x, y):
    r, s = jax.jit(lambda u, v: jax.jit(sin_twice)(u, v))(x, y)
    return lax.psum(r, "a") + s


def loss(x, y):
    f = smap(mesh42, (P("a"), P("b")), (P("b"), P("a"), P(("a", "b"))), over_a_and_b)
    return sum(jnp.sum(o) for o in f(x, y))


# name -> (function, arguments)
CASES = {
    "varying_and_invariant": (smap(mesh8, (P("a"), P()), (P(), P()), varying_and_invariant),
                              [x16, y2]),
    "over_a_and_b": (smap(mesh42, (P("a"), P("b")), (P("b"), P("a"), P(("a", "b"))),
                          over_a_and_b), [x8, y4]),
    "mixed_operands": (smap(mesh42, (P("a"), P("b")), (P("b"), P("b"), P("b")), mixed_operands),
                       [x8, y4]),
    "nested": (smap(mesh8, (P("a"), P()), P(), nested), [x16, y2]),
    "grad_over_a_and_b": (jax.grad(loss, argnums=(0, 1)), [x8, y4]),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    blocks, values = [], {}
    for name, (fn, args) in CASES.items():
        blocks.append(f"=== {name}\n{jax.make_jaxpr(fn)(*args)}")
        for i, leaf in enumerate(jax.tree.leaves(fn(*args))):
            values[f"{name}/{i}"] = np.asarray(leaf)
    with open(os.path.join(OUT, "jaxprs.txt"), "w") as f:
        f.write("\n".join(blocks) + "\n")
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
