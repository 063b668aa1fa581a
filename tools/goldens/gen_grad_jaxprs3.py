"""Records JAX 0.10.2's make_jaxpr text of grad through jit calls that carry in_shardings or
out_shardings, and of the pullback an eager vjp returns, for
tests/transforms/grad_jit_shardings_jaxpr_test.cpp.

Under grad JAX keeps a call with shardings as a forward `jit` (its in_shardings; the primal
outputs' out_shardings, UnspecifiedValue for the residuals) and a transposed `jit`
(UnspecifiedValue for the residuals, then the out_shardings for the cotangents; the
in_shardings of the differentiated inputs as its out_shardings). An eager vjp keeps the call
too: its pullback holds the transposed call, the residuals as constants. Forward-mode jvp of a
shard_map is one shard_map of the primals and the tangents, the tangents' specs the primals'.

Writes tests/goldens/grad_jaxprs3/<case>.txt: str(jax.make_jaxpr(...)(args)) and a newline,
<case>.grad.txt: the gradient's (pullback's, jvp's) values, one line per result leaf, and for the
grad and jvp cases <case>.sharding.txt: the repr of each result's sharding.
Run: XLA_FLAGS=--xla_force_host_platform_device_count=8 \
  /work/jaxenv/bin/python tools/goldens/gen_grad_jaxprs3.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
from functools import partial  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_pprint_use_color", False)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "grad_jaxprs3")

m = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
split = NamedSharding(m, P("a"))
whole = NamedSharding(m, P())


def sin_mul(x):
    return jnp.sin(x) * x


g_both = jax.jit(sin_mul, in_shardings=split, out_shardings=whole)
g_in = jax.jit(sin_mul, in_shardings=split)
g_out = jax.jit(sin_mul, out_shardings=split)


@partial(jax.jit, in_shardings=(split, whole), out_shardings=split)
def two(x, y):
    return jnp.exp(x) * y


@jax.jit
def g(x):
    return jnp.sin(x) * x


@jax.jit
def plain_two(x, y):
    return jnp.exp(x) * y


def xs(n=8, start=0.5):
    return jnp.arange(n, dtype=jnp.float32) * 0.25 + start


def summed(f):
    return lambda *a: jnp.sum(f(*a))


GRAD_CASES = {
    # in_shardings and out_shardings: both calls carry them, swapped in the transposed one.
    "jit_shard_both": (jax.grad(summed(g_both)), (xs(),)),
    # in_shardings only: the transposed call has out_shardings only.
    "jit_shard_in": (jax.grad(summed(g_in)), (xs(),)),
    # out_shardings only: the transposed call has in_shardings only.
    "jit_shard_out": (jax.grad(summed(g_out)), (xs(),)),
    # Two arguments with different shardings, both differentiated.
    "jit_shard_two": (jax.grad(summed(two), argnums=(0, 1)), (xs(), xs(start=1.0))),
}


def pullback(fn, *primals):
    """The pullback of an eager (concrete) vjp, and a cotangent of ones."""
    out, f_vjp = jax.vjp(fn, *primals)
    return f_vjp, (jnp.ones_like(out),)


EAGER_CASES = {
    # The pullback holds the transposed call of the residuals and the cotangent.
    "eager_vjp_call": pullback(g, xs(3)),
    # A call between other operations.
    "eager_vjp_inner_call": pullback(lambda x: jnp.cos(g(x)), xs(3)),
    # Two differentiated arguments.
    "eager_vjp_two": pullback(plain_two, xs(3), xs(3, 1.0)),
}


def smap(body, in_specs, out_specs):
    return jax.shard_map(body, mesh=m, in_specs=in_specs, out_specs=out_specs)


def grid(start=0.0):
    return jnp.arange(64, dtype=jnp.float32).reshape(8, 8) * 0.03125 + start


def jvp_of(f):
    """jvp(f) of one primal and one tangent, returning (primal out, tangent out)."""
    return lambda x, t: jax.jvp(f, (x,), (t,))


JVP_CASES = {
    # One shard_map of the primal and the tangent, the tangent's specs the primal's.
    "jvp_sm_sin_mul": (jvp_of(smap(lambda v: jnp.sin(v) * v, P("a"), P("a"))),
                       (grid(), grid(1.0))),
    # Under psum: the tangent output replicated as the primal's.
    "jvp_sm_psum_sin": (jvp_of(smap(lambda v: jax.lax.psum(jnp.sin(v), "a"), P("a", None),
                                    P())), (grid(), grid(1.0))),
    # Split on dim 1, two results.
    "jvp_sm_two_results": (jvp_of(smap(lambda v: (jnp.exp(v), 2.0 * v), P(None, "a"),
                                       (P(None, "a"), P(None, "a")))),
                           (grid(), grid(1.0))),
}


CONST = np.arange(8, dtype=np.float32) * 0.5

SM_GRAD_CASES = {
    # A body closing over a constant array: it enters the forward shard_map as a replicated
    # operand after the others' constants; the tangent one reads its pvary'd broadcast residual.
    "sm_const": (jax.grad(summed(smap(lambda v: jnp.sin(v) * CONST, P("a"), P("a")))),
                 (grid(),)),
    # Without check_vma the constant itself is a residual: the forward shard_map returns it
    # after the residual it computes, split along its leading dim.
    "sm_const_no_vma": (jax.grad(summed(jax.shard_map(
        lambda v: jnp.sin(v) * CONST.reshape(1, 8), mesh=m, in_specs=P("a"), out_specs=P("a"),
        check_vma=False))), (grid(),)),
    # A replicated (P()) operand: its transposed body sums over the block's leading dim with a
    # reduce_sum whose out_sharding names the manual mesh.
    "sm_replicated_operand": (jax.grad(summed(smap(lambda u, v: u * v, (P("a"), P()), P("a"))),
                                       argnums=(0, 1)), (grid(), grid()[0])),
    # A reshape in the body: its transpose reshapes the cotangent back with the operand's
    # sharding, which names the manual mesh.
    "sm_reshape": (jax.grad(summed(smap(lambda v: jnp.sin(jnp.reshape(v, (8,))), P("a"),
                                        P("a")))), (grid(),)),
}


JVP_CALL_CASES = {
    # Forward-mode jvp of a call: one call of the primal and the tangent.
    "jvp_jit_sin_mul": (jvp_of(g), (xs(3), xs(3, 1.0))),
}


def write(name, fn, args, shardings):
    text = str(jax.make_jaxpr(fn)(*args))
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        f.write(text + "\n")
    results = fn(*args)
    if not isinstance(results, tuple):
        results = (results,)
    results = jax.tree.leaves(results)
    with open(os.path.join(OUT, name + ".grad.txt"), "w") as f:
        for r in results:
            f.write(" ".join(repr(float(v)) for v in np.asarray(r).ravel()) + "\n")
    if shardings:
        with open(os.path.join(OUT, name + ".sharding.txt"), "w") as f:
            for r in results:
                f.write(repr(r.sharding) + "\n")
    print(f"== {name}\n{text}")


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (fn, args) in GRAD_CASES.items():
        write(name, fn, args, True)
    for name, (fn, args) in EAGER_CASES.items():
        write(name, fn, args, False)
    for name, (fn, args) in SM_GRAD_CASES.items():
        write(name, fn, args, True)
    for name, (fn, args) in JVP_CASES.items():
        write(name, fn, args, True)
    for name, (fn, args) in JVP_CALL_CASES.items():
        write(name, fn, args, False)


if __name__ == "__main__":
    main()
