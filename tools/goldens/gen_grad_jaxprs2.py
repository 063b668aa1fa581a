"""Records JAX 0.10.2's make_jaxpr text of grad through jit calls and shard_maps, for
tests/transforms/grad_jit_jaxpr_test.cpp: JAX keeps a jit call as two `jit` equations of the
same name, the forward one (primal outputs, then the residuals that are not its own inputs or
outputs) and the transposed one (residuals, then the cotangents). A shard_map's forward
returns its residuals first, along their existing leading dim split over the axes they vary
over, and its transpose takes the cotangents first, then the residuals.

Writes tests/goldens/grad_jaxprs2/<case>.txt: str(jax.make_jaxpr(...)(args)) and a newline, and
<case>.grad.txt: the gradient's values (float32, one line per differentiated argument) for the
test's inputs, and for the shard_map cases <case>.sharding.txt: the repr of each gradient's
sharding (outside jit grad runs op by op, so a gradient prints the transposed shard_map's
out_specs, the in_specs as written).
Run: XLA_FLAGS=--xla_force_host_platform_device_count=8 \
  /work/jaxenv/bin/python tools/goldens/gen_grad_jaxprs2.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
from functools import partial  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_pprint_use_color", False)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "grad_jaxprs2")


@jax.jit
def g(x):
    return jnp.sin(x) * x


@jax.jit
def h(x):
    return 2.0 * x


@jax.jit
def outer(x):
    return g(x) + 1.0


@jax.jit
def two(x, y):
    return jnp.exp(x) * y


@jax.jit
def pair(x):
    return x * x, jnp.cos(x)


@jax.jit
def ident(x):
    return x, jnp.sin(x)


@partial(jax.jit, static_argnums=1)
def power(x, n):
    return x ** n


@jax.jit
def tree(p):
    return jnp.tanh(p["w"]) * p["b"]


@jax.jit
def first(x, y):
    return x * 3.0


m = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
m2 = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


def smap(body, in_specs, out_specs, mesh=m, check_vma=True):
    return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                         check_vma=check_vma)


def summed(f):
    return lambda *a: jnp.sum(f(*a))


def grid(start=0.0):
    return jnp.arange(64, dtype=jnp.float32).reshape(8, 8) * 0.03125 + start


def xs(n=3, start=0.5):
    return jnp.arange(n, dtype=jnp.float32) * 0.25 + start


CASES = {
    # sum(sin(x) * x) through a call: residuals cos x and sin x, x forwarded.
    "jit_sin_mul": (jax.grad(lambda x: jnp.sum(g(x))), (xs(),)),
    # A linear body keeps no residuals.
    "jit_linear": (jax.grad(lambda x: jnp.sum(h(x))), (xs(),)),
    # A call inside a call.
    "jit_nested": (jax.grad(lambda x: jnp.sum(outer(x))), (xs(),)),
    # Two arguments, both differentiated.
    "jit_two_args": (jax.grad(lambda x, y: jnp.sum(two(x, y)), argnums=(0, 1)),
                     (xs(), xs(start=1.0))),
    # Only the first argument differentiated: the second has no tangent.
    "jit_two_args_first": (jax.grad(lambda x, y: jnp.sum(two(x, y))), (xs(), xs(start=1.0))),
    # Two results, both used.
    "jit_two_results": (jax.grad(lambda x: jnp.sum(pair(x)[0] + pair(x)[1])), (xs(),)),
    # One result of two used: the other's cotangent is zero.
    "jit_unused_result": (jax.grad(lambda x: jnp.sum(pair(x)[1])), (xs(),)),
    # A result that is the call's own input.
    "jit_forwarded_result": (jax.grad(lambda x: jnp.sum(ident(x)[0] * ident(x)[1])), (xs(),)),
    # A static argument.
    "jit_static": (jax.grad(lambda x: jnp.sum(power(x, 3))), (xs(),)),
    # A pytree argument.
    "jit_pytree": (jax.grad(lambda w, b: jnp.sum(tree({"w": w, "b": b})), argnums=(0, 1)),
                   (xs(), xs(start=1.0))),
    # An argument the body does not read.
    "jit_unread_arg": (jax.grad(lambda x, y: jnp.sum(first(x, y)), argnums=(0, 1)),
                       (xs(), xs(start=1.0))),
    # jit under vmap under grad.
    "jit_under_vmap": (jax.grad(lambda x: jnp.sum(jax.vmap(g)(x))),
                       (jnp.arange(6, dtype=jnp.float32).reshape(2, 3) * 0.25,)),
    # The call's result used twice, then a second call.
    "jit_chain": (jax.grad(lambda x: jnp.sum(h(g(x)))), (xs(),)),
    # shard_map bodies keeping residuals.
    "sm_sin": (jax.grad(summed(smap(jnp.sin, P("a", None), P("a", None)))), (grid(),)),
    "sm_sin_mul": (jax.grad(summed(smap(lambda v: jnp.sin(v) * v, P("a"), P("a")))), (grid(),)),
    # The residual is the body's output.
    "sm_exp": (jax.grad(summed(smap(jnp.exp, P(None, "a"), P(None, "a")))), (grid(),)),
    # Blocks split on dim 1: the residuals still leave along dim 0.
    "sm_sin_mul_dim1": (jax.grad(summed(smap(lambda v: jnp.sin(v) * v, P(None, "a"),
                                             P(None, "a")))), (grid(),)),
    # A 2-D mesh without check_vma: residuals over both axes.
    "sm_sin_mul_2d_no_vma": (jax.grad(summed(smap(lambda v: jnp.sin(v) * v, P("x", None),
                                                  P("x", None), mesh=m2, check_vma=False))),
                             (grid(),)),
    # A scalar residual leaves as f32[1] and is squeezed in the transposed body.
    "sm_scalar_residual": (jax.grad(summed(smap(lambda v: jnp.sum(v) * v, P("a", None),
                                                P("a", None)))), (grid(),)),
    # A residual-keeping body under psum.
    "sm_psum_sin": (jax.grad(summed(smap(lambda v: lax.psum(jnp.sin(v), "a"), P("a", None),
                                         P()))), (grid(),)),
    # Two operands: each one's residual is the other.
    "sm_mul_two": (jax.grad(summed(smap(lambda u, v: u * v, (P("a", None), P("a", None)),
                                        P("a", None))), argnums=(0, 1)),
                   (grid(), grid(1.0))),
    # A linear body keeps none.
    "sm_linear": (jax.grad(summed(smap(lambda v: 2.0 * v, P("a", None), P("a", None)))),
                  (grid(),)),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (fn, args) in CASES.items():
        text = str(jax.make_jaxpr(fn)(*args))
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write(text + "\n")
        grads = fn(*args)
        if not isinstance(grads, tuple):
            grads = (grads,)
        with open(os.path.join(OUT, name + ".grad.txt"), "w") as f:
            for gr in grads:
                f.write(" ".join(repr(float(v)) for v in np.asarray(gr).ravel()) + "\n")
        if name.startswith("sm_"):
            with open(os.path.join(OUT, name + ".sharding.txt"), "w") as f:
                for gr in grads:
                    f.write(repr(gr.sharding) + "\n")
        print(f"== {name}\n{text}")


if __name__ == "__main__":
    main()
