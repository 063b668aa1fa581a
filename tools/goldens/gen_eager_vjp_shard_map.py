"""Records JAX 0.10.2's eager jax.vjp of functions calling shard_map: the pullback's program
(make_jaxpr of vjp_fun) and its residuals, the constants that program closes over.

JAX's eager partial evaluation of a shard_map runs a forward shard_map at once to the primal
results and the residuals the tangents need; a residual that is one of the shard_map's
operands or results is not returned again but forwarded: the pullback closes over the operand
itself (the argument, uncommitted, as passed) or the result. The pullback is the transposed
shard_map of the cotangents and the residuals. Cases: a residual that is the operand, the same
between other operations, one that is the result (exp), a constant the body closes over, a
replicated (P()) operand, a psum to a replicated result, and check_vma=False.

Writes, under tests/goldens/eager_vjp_shard_map/:
  cases.txt    "=== <case>" blocks: one line per residual (constant of make_jaxpr(vjp_fun), in
               order): "<shape> <repr of its sharding> argument <i>" when it is the i-th argument
               itself, "... result" when it is the vjp's primal result itself, else "... computed";
               then the jaxpr
  values.npz   "<case>/res<k>": the residuals, "<case>/ct<i>": the pullback's results for a
               cotangent of ones
Run: python3 tools/goldens/gen_eager_vjp_shard_map.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402

jax.config.update("jax_pprint_use_color", False)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

# The 8-device mesh, shard_map helper, arrays and constant of the grad-through-calls goldens.
from gen_grad_jaxprs3 import CONST, grid, m, smap  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "eager_vjp_shard_map")

sin_mul = smap(lambda v: jnp.sin(v) * v, P("a"), P("a"))

# name -> (function, arguments) of the eager vjp.
CASES = {
    "operand_residual": (sin_mul, (grid(),)),
    "between_other_operations": (lambda x: jnp.cos(sin_mul(x)), (grid(),)),
    "result_residual": (smap(jnp.exp, P("a"), P("a")), (grid(),)),
    "closed_over_constant": (smap(lambda v: jnp.sin(v) * CONST, P("a"), P("a")), (grid(),)),
    "replicated_operand": (smap(lambda u, v: u * v, (P("a"), P()), P("a")), (grid(), grid()[0])),
    "psum_to_replicated": (smap(lambda v: jax.lax.psum(jnp.sin(v), "a"), P("a", None), P()),
                           (grid(),)),
    "no_check_vma": (jax.shard_map(lambda v: jnp.sin(v) * v, mesh=m, in_specs=P("a"),
                                   out_specs=P("a"), check_vma=False), (grid(),)),
}


def residual_line(r, args, out):
    which = next((f"argument {i}" for i, a in enumerate(args) if r is a),
                 "result" if r is out else "computed")
    return f"{tuple(r.shape)} {r.sharding!r} {which}"


def main():
    os.makedirs(OUT, exist_ok=True)
    blocks, values = [], {}
    for name, (fn, args) in CASES.items():
        out, vjp_fun = jax.vjp(fn, *args)
        ct = jnp.ones_like(out)
        closed = jax.make_jaxpr(vjp_fun)(ct)
        lines = [residual_line(r, args, out) for r in closed.consts]
        blocks.append((name, "\n".join(lines + [str(closed)])))
        values.update({f"{name}/res{k}": np.asarray(r) for k, r in enumerate(closed.consts)})
        values.update({f"{name}/ct{i}": np.asarray(c) for i, c in enumerate(vjp_fun(ct))})
    with open(os.path.join(OUT, "cases.txt"), "w") as out:
        out.writelines(f"=== {name}\n{text}\n" for name, text in blocks)
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
