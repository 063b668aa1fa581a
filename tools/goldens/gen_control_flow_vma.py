"""Records JAX 0.10.2's types of scan, while_loop, fori_loop, cond/switch and custom_jvp/custom_vjp
call results inside a shard_map body with check_vma: each result is typed as its body's result
(no cast up front), a loop body must give each carry the varying manual axes it came in with, and
branches must give each output the same ones; otherwise JAX raises a TypeError. Cases on an
8-device mesh ('a') and a 4x2 one ('a', 'b'), Auto axes; some under grad and vmap. The bodies
name their carry argument `carry`, as spmd's messages call it. Also grad and vjp of the
custom_jvp and custom_vjp functions (whose rules call the function itself, so the call stays in
the forward computation) outside a shard_map: plain, under jit and inside scan.

Writes, under tests/goldens/control_flow_vma/:
  jaxprs.txt   "=== <case>" blocks: make_jaxpr of the shard_map (or of its grad, or of the
               gradient or pullback of a custom function)
  values.npz   the results, as "<case>/<result index>"
  errors.txt   "=== <case>" blocks: "<exception type>: <message>" for the cases JAX refuses
Run: python3 tools/goldens/gen_control_flow_vma.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "control_flow_vma")
mesh8 = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
mesh42 = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
x16 = jnp.arange(16.0, dtype=jnp.float32) / 8.0
x8 = jnp.arange(8.0, dtype=jnp.float32) / 4.0
y2 = jnp.arange(2.0, dtype=jnp.float32) + 1.0
y4 = jnp.arange(4.0, dtype=jnp.float32) + 1.0


def smap(mesh, in_specs, out_specs, body):
    return jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


# ---- scan and fori_loop ----
def scan_invariant_carry(x, y):
    # The carry stays invariant beside xs varying over 'a'; the ys vary.
    c, ys = lax.scan(lambda carry, xi: (carry * 2.0, carry * xi), y, x)
    return c, lax.psum(ys, "a")


def scan_carry_over_a_xs_over_b(x, y):
    # 4x2: the carry varies over 'a', the xs over 'b', the ys over both.
    return lax.scan(lambda carry, yi: (carry + 1.0, carry * yi), x, y)


def scan_closes_over_varying(x, y):
    # A varying value the body closes over makes the ys vary, not the carry.
    c, ys = lax.scan(lambda carry, yi: (carry + yi, carry * x), 0.0 * y[0], y)
    return c, lax.psum(ys, "a")


def scan_makes_carry_vary(x, y):
    return lax.scan(lambda carry, xi: (carry + xi, carry), y[0], x)


def scan_makes_two_carries_vary(x, y):
    # 4x2: each carry component made to vary over another axis.
    def body(carry, xi):
        u, v = carry
        return (u * xi[0], v + xi[1]), u
    return lax.scan(body, (y[0], y[1]), jnp.stack([x, x]))


def fori_mixed(x, y):
    return lax.fori_loop(0, 3, lambda i, carry: (carry[0] * 2.0, carry[1] + 1.0), (x, y))


def fori_makes_carry_vary(x, y):
    return lax.fori_loop(0, 3, lambda i, carry: carry + x, y)


# ---- while_loop ----
def while_mixed(x, y):
    return lax.while_loop(lambda carry: carry[0] < 3,
                          lambda carry: (carry[0] + 1, carry[1] * 2.0, carry[2] + 1.0),
                          (0, x, y))


def while_varying_predicate(x, y):
    # The predicate varies over 'a': so does the carry it reads.
    return lax.while_loop(lambda carry: carry[0][0] < 4.0,
                          lambda carry: (carry[0] + 1.0, carry[1] * 2.0), (x, y))


def while_makes_carry_vary(x, y):
    return lax.while_loop(lambda carry: carry[0] < 3,
                          lambda carry: (carry[0] + 1, carry[1] + x), (0, y))


# ---- cond and switch ----
def cond_invariant_predicate(x, y):
    return lax.cond(y[0] > 1.0, lambda u, v: (u * 2.0, v + 1.0), lambda u, v: (u * 3.0, v * 3.0),
                    x, y)


def cond_varying_predicate(x, y):
    return lax.cond(x[0] > 1.0, lambda u, v: (u * 2.0, v + 1.0), lambda u, v: (u * 3.0, v * 3.0),
                    x, y)


def switch_over_a_and_b(x, y):
    # 4x2: x varies over 'a', y over 'b'.
    branches = [lambda u, v: (u + 1.0, v * 2.0), lambda u, v: (lax.sin(u), v + 2.0),
                lambda u, v: (u * u, lax.cos(v))]
    r, s = lax.switch(2, branches, x, y)
    return r, s, r[0] * s


def cond_outputs_differ(x, y):
    return lax.cond(y[0] > 1.0, lambda u, v: (u * 2.0, v + 1.0), lambda u, v: (u * 3.0, u), x, y)


def cond_one_output_differs(x, y):
    return lax.cond(y[0] > 1.0, lambda u, v: v + 1.0, lambda u, v: u * 3.0, x, y)


def switch_outputs_differ(x, y):
    # 4x2: branch2 gives both outputs other axes.
    branches = [lambda u, v: (u + 1.0, v * 2.0), lambda u, v: (u * 2.0, v + 1.0),
                lambda u, v: (v * 3.0, u * 3.0)]
    return lax.switch(1, branches, x[:2], y[:2])


# ---- custom_jvp and custom_vjp ----
@jax.custom_jvp
def sin_twice_jvp(u, v):
    return lax.sin(u), v * 2.0


@sin_twice_jvp.defjvp
def _sin_twice_jvp_rule(primals, tangents):
    (u, v), (du, dv) = primals, tangents
    return sin_twice_jvp(u, v), (du * lax.cos(u), dv * 2.0)


@jax.custom_vjp
def sin_twice_vjp(u, v):
    return lax.sin(u), v * 2.0


def _sin_twice_fwd(u, v):
    return sin_twice_vjp(u, v), lax.cos(u)


def _sin_twice_bwd(cos_u, cts):
    du, dv = cts
    return du * cos_u, dv * 2.0


sin_twice_vjp.defvjp(_sin_twice_fwd, _sin_twice_bwd)


def custom_jvp_results(x, y):
    r, s = sin_twice_jvp(x, y)
    return lax.psum(r, "a"), s


def custom_vjp_results(x, y):
    r, s = sin_twice_vjp(x, y)
    return lax.psum(r, "a"), s


def divided_by_literal(x, y):
    # Under grad the 4.0 the linear `div` reads is a residual of the forward shard_map.
    return x * x, y / 4.0


def scalars_to_lax(x, y):
    # Python scalars given straight to lax functions stay literals of the backward shard_map.
    return lax.mul(x, x), lax.mul(y, 2.0), lax.div(y, 4.0)


def scalars_to_jnp(x, y):
    # Python scalars jnp converts (operators, jnp functions) are residuals of the forward one.
    return x * x, jnp.multiply(y, 2.0), jnp.divide(y, 4.0), y * 3.0


# ---- vmap inside the body ----
def vmapped_scan(x, y):
    # vmap over the rows of an invariant (2, 2) carry beside xs varying over 'a'.
    rows = jnp.stack([y, y * 2.0])
    c, ys = jax.vmap(lambda r: lax.scan(lambda carry, xi: (carry * 2.0, carry * xi), r, x))(rows)
    return c, lax.psum(ys, "a")


def vmapped_cond(x, y):
    rows = jnp.stack([y, y * 2.0])
    return jax.vmap(lambda r: lax.cond(r[0] > 1.0, lambda u, v: (u * 2.0, v + 1.0),
                                       lambda u, v: (u * 3.0, v * 3.0), x, r))(rows)


# ---- grad of the custom functions outside a shard_map ----
x3 = jnp.arange(3.0, dtype=jnp.float32) / 4.0
y3 = jnp.arange(3.0, dtype=jnp.float32) + 1.0
xs23 = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3) / 8.0


def loss_of(f):
    def loss(x, y):
        r, s = f(x, y)
        return jnp.sum(r) + jnp.sum(s)
    return loss


def scanned(f):
    # The carry goes through the function's second argument, the xs through its first.
    def loss(x, y):
        def body(carry, xi):
            r, s = f(xi, carry)
            return s, r
        c, ys = lax.scan(body, y, x)
        return jnp.sum(c) + jnp.sum(ys)
    return loss


def pullback(f):
    def pb(x, y, ct_r, ct_s):
        return jax.vjp(f, x, y)[1]((ct_r, ct_s))
    return pb


def summed(f):
    def loss(x, y):
        return sum(jnp.sum(o) for o in jax.tree.leaves(f(x, y)))
    return jax.grad(loss, argnums=(0, 1))


A, INV = P("a"), P()
scan_invariant_carry_map = smap(mesh8, (A, INV), (INV, INV), scan_invariant_carry)
scan_over_a_and_b_map = smap(mesh42, (A, P("b")), (A, P("b", "a")), scan_carry_over_a_xs_over_b)
scan_closes_map = smap(mesh8, (A, INV), (INV, INV), scan_closes_over_varying)
fori_mixed_map = smap(mesh8, (A, INV), (A, INV), fori_mixed)
while_mixed_map = smap(mesh8, (A, INV), (INV, A, INV), while_mixed)
cond_invariant_map = smap(mesh8, (A, INV), (A, INV), cond_invariant_predicate)
cond_varying_map = smap(mesh8, (A, INV), (A, INV), cond_varying_predicate)
switch_map = smap(mesh42, (A, P("b")), (A, P("b"), P(("a", "b"))), switch_over_a_and_b)
custom_jvp_map = smap(mesh8, (A, INV), (INV, INV), custom_jvp_results)
custom_vjp_map = smap(mesh8, (A, INV), (INV, INV), custom_vjp_results)

# name -> (function, arguments)
CASES = {
    "scan_invariant_carry": (scan_invariant_carry_map, [x16, y2]),
    "scan_carry_over_a_xs_over_b": (scan_over_a_and_b_map, [x8, y4]),
    "scan_closes_over_varying": (scan_closes_map, [x16, y2]),
    "scan_makes_carry_vary": (smap(mesh8, (A, INV), (INV, A), scan_makes_carry_vary), [x16, y2]),
    "scan_makes_two_carries_vary": (smap(mesh42, (A, P("b")), ((P(), P()), A),
                                         scan_makes_two_carries_vary), [x8, y4]),
    "fori_mixed": (fori_mixed_map, [x16, y2]),
    "fori_makes_carry_vary": (smap(mesh8, (A, INV), A, fori_makes_carry_vary), [x16, y2]),
    "while_mixed": (while_mixed_map, [x16, y2]),
    "while_varying_predicate": (smap(mesh8, (A, INV), (A, INV), while_varying_predicate),
                                [x16, y2]),
    "while_makes_carry_vary": (smap(mesh8, (A, INV), (INV, A), while_makes_carry_vary), [x16, y2]),
    "cond_invariant_predicate": (cond_invariant_map, [x16, y2]),
    "cond_varying_predicate": (cond_varying_map, [x16, y2]),
    "switch_over_a_and_b": (switch_map, [x8, y4]),
    "cond_outputs_differ": (smap(mesh8, (A, INV), (A, A), cond_outputs_differ), [x16, y2]),
    "cond_one_output_differs": (smap(mesh8, (A, INV), A, cond_one_output_differs), [x16, y2]),
    "switch_outputs_differ": (smap(mesh42, (A, P("b")), (P(("a", "b")), P(("a", "b"))),
                                   switch_outputs_differ), [x8, y4]),
    "custom_jvp_results": (custom_jvp_map, [x16, y2]),
    "custom_vjp_results": (custom_vjp_map, [x16, y2]),
    "vmapped_scan": (smap(mesh8, (A, INV), (INV, INV), vmapped_scan), [x16, y2]),
    "vmapped_cond": (smap(mesh8, (A, INV), (P(None, "a"), INV), vmapped_cond), [x16, y2]),
    "grad_scan_invariant_carry": (summed(scan_invariant_carry_map), [x16, y2]),
    "grad_scan_over_a_and_b": (summed(scan_over_a_and_b_map), [x8, y4]),
    "grad_scan_closes_over_varying": (summed(scan_closes_map), [x16, y2]),
    "grad_fori_mixed": (summed(fori_mixed_map), [x16, y2]),
    "grad_cond_invariant_predicate": (summed(cond_invariant_map), [x16, y2]),
    "grad_cond_varying_predicate": (summed(cond_varying_map), [x16, y2]),
    "grad_switch_over_a_and_b": (summed(switch_map), [x8, y4]),
    "grad_custom_jvp_results": (summed(custom_jvp_map), [x16, y2]),
    "grad_custom_vjp_results": (summed(custom_vjp_map), [x16, y2]),
    "grad_divided_by_literal": (summed(smap(mesh8, (A, INV), (A, INV), divided_by_literal)),
                                [x16, y2]),
    "grad_scalars_to_lax": (summed(smap(mesh8, (A, INV), (A, INV, INV), scalars_to_lax)),
                            [x16, y2]),
    "grad_scalars_to_jnp": (summed(smap(mesh8, (A, INV), (A, INV, INV, INV), scalars_to_jnp)),
                            [x16, y2]),
}
for tag, custom in (("jvp", sin_twice_jvp), ("vjp", sin_twice_vjp)):
    CASES[f"grad_custom_{tag}"] = (jax.grad(loss_of(custom), argnums=(0, 1)), [x3, y3])
    CASES[f"grad_jit_custom_{tag}"] = (jax.grad(jax.jit(loss_of(custom)), argnums=(0, 1)),
                                       [x3, y3])
    CASES[f"grad_scan_custom_{tag}"] = (jax.grad(scanned(custom), argnums=(0, 1)), [xs23, y3])
    CASES[f"vjp_custom_{tag}"] = (pullback(custom), [x3, y3, y3, x3])


def main():
    os.makedirs(OUT, exist_ok=True)
    blocks, errors, values = [], [], {}
    for name, (fn, args) in CASES.items():
        try:
            text = str(jax.make_jaxpr(fn)(*args))
        except Exception as e:  # noqa: BLE001 - the error is the golden
            errors.append(f"=== {name}\n{type(e).__name__}: {e}")
            continue
        blocks.append(f"=== {name}\n{text}")
        for i, leaf in enumerate(jax.tree.leaves(fn(*args))):
            values[f"{name}/{i}"] = np.asarray(leaf)
    with open(os.path.join(OUT, "jaxprs.txt"), "w") as f:
        f.write("\n".join(blocks) + "\n")
    with open(os.path.join(OUT, "errors.txt"), "w") as f:
        f.write("\n".join(errors) + "\n")
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
