"""Records JAX 0.10.2's cond and switch with outputs every branch passes straight through, for
tests/transforms/cond_forwarding_test.cpp.

lax.cond and lax.switch prune an output that every branch returns as the same input (JAX's
_jaxpr_forwarding): the cond equation has fewer outputs and the caller reads that input itself.
An output only some branches pass through, or branches passing different inputs, stays. Recorded:
make_jaxpr of each, under jit, and of grad through one.

Writes, under tests/goldens/cond_forwarding/:
  cases.txt    "=== <case>" blocks, each a jaxpr
  values.npz   each case's results, "<case>.<i>"
Run: python3 tools/goldens/gen_cond_forwarding.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from golden_blocks import write_blocks  # noqa: E402

jax.config.update("jax_pprint_use_color", False)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "cond_forwarding")
x = np.arange(3.0, dtype=np.float32)
y = np.array([0.5, -1.0, 2.0], dtype=np.float32)


def pass_second(p, u, v):
    return lax.cond(p, lambda a, b: (lax.sin(a), b), lambda a, b: (lax.cos(a), b), u, v)


def pass_first(p, u):
    return lax.cond(p, lambda a: (a, lax.sin(a)), lambda a: (a, lax.cos(a)), u)


def one_branch_only(p, u):
    return lax.cond(p, lambda a: (a, lax.sin(a)), lambda a: (lax.neg(a), lax.cos(a)), u)


def different_inputs(p, u, v):
    return lax.cond(p, lambda a, b: (a, lax.sin(b)), lambda a, b: (b, lax.cos(a)), u, v)


def switch_pass(i, u, v):
    return lax.switch(i, [lambda a, b: (lax.sin(a), b), lambda a, b: (lax.cos(a), b),
                          lambda a, b: (lax.neg(a), b)], u, v)


def summed_pass_second(u, v):
    s, t = pass_second(True, u, v)
    return lax.add(lax.reduce_sum(s, (0,)), lax.reduce_sum(t, (0,)))


# name -> (function, arguments)
CASES = {
    "pass_second": (pass_second, (True, x, y)),
    "pass_second_false": (pass_second, (False, x, y)),
    "pass_first": (pass_first, (True, x)),
    "one_branch_only": (one_branch_only, (False, x)),
    "different_inputs": (different_inputs, (False, x, y)),
    "switch_pass": (switch_pass, (np.int32(2), x, y)),
    "pass_second_jit": (jax.jit(pass_second), (True, x, y)),
    "pass_second_grad": (jax.grad(summed_pass_second, argnums=(0, 1)), (x, y)),
}


def main():
    cases, values = {}, {}
    for name, (f, args) in CASES.items():
        cases[name] = str(jax.make_jaxpr(f)(*args))
        for i, leaf in enumerate(jax.tree.leaves(f(*args))):
            values[f"{name}.{i}"] = np.asarray(leaf)
    write_blocks(OUT, cases, values)


if __name__ == "__main__":
    main()
