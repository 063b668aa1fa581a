"""Records JAX 0.10.2's types of control-flow results in Explicit sharding mode, for
tests/sharding/explicit5_test.cpp, on 8 virtual CPU devices: cond and switch whose branches
agree (and raise when they disagree), while_loop and fori_loop carries whose body keeps the
carry's sharding (and raise when it changes it), scan carries and stacked outputs (the stacked
dim unsplit, the rest as the body's), each run eagerly, under jit, under grad (where JAX accepts
it) and under vmap.

The names are gen_explicit3.py's (imported from it): m = jax.make_mesh((4, 2), ('a', 'b'),
axis_types=(Explicit, Explicit)), X = jnp.arange(256.0).reshape(16, 16) and
put(v, *spec) = jax.device_put(v, NamedSharding(m, P(*spec))). Every case runs with m in context
(jax.set_mesh) but those of NO_MESH. Each function f of CASES is recorded as "<case>" (f run
eagerly), "<case>_jit",
"<case>_grad" (the grad of the sum of f's leaves with respect to its first argument) and
"<case>_vmap" (f vmapped over the leading dim of its vmap arguments that are arrays). AUTO
records auto_axes's reshards (its jaxprs too); AUTO_MESH runs on m_auto, m with Auto axes.

Writes tests/goldens/explicit/types5.txt, specs5.txt, values5.npz, errors5.txt and texts5.txt in
the formats of gen_explicit4.py's *4 files.
Run: python3 tools/goldens/gen_explicit5.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P, auto_axes, reshard  # noqa


from gen_explicit2 import message  # noqa: E402
from gen_explicit3 import X, m, put, write_goldens  # noqa: E402
from gen_explicit4 import attempt  # noqa: E402

Y = jnp.arange(512.0, dtype=jnp.float32).reshape(2, 16, 16)
m_auto = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)


def _while_body(c):
    return c[0] + 1, c[1] * 2.0 + 1.0


def _while_change(c):
    return c[0] + 1, reshard(c[1], P('b'))


# (function, arguments, vmap arguments: the same with a leading batch dim of 2). The first
# argument is the one grad differentiates.
CASES = {
    "cond_agree": (lambda v, p: lax.cond(p, lambda w: w * 2.0, jnp.sin, v),
                   lambda: (put(X, 'a', None), True),
                   lambda: (put(Y, None, 'a', None), put(jnp.array([True, False])))),
    "cond_agree_false": (lambda v, p: lax.cond(p, lambda w: w * 2.0, jnp.sin, v),
                         lambda: (put(X, 'a', 'b'), False),
                         lambda: (put(Y, None, 'a', 'b'), False)),
    "cond_split_batch": (lambda v, p: lax.cond(p, lambda w: w * 2.0, jnp.sin, v),
                         lambda: (put(X, 'b'), True),
                         lambda: (put(Y, 'b'), put(jnp.array([True, False]), 'b'))),
    "cond_both_reshard": (lambda v, p: lax.cond(p, lambda w: reshard(w * 2.0, P(None, 'b')),
                                                lambda w: reshard(jnp.cos(w), P(None, 'b')), v),
                          lambda: (put(X, 'a', None), True),
                          lambda: (put(Y, None, 'a', None), True)),
    "switch_agree": (lambda v, i: lax.switch(i, [lambda w: w * 2.0, jnp.sin, lambda w: w + 1.0], v),
                     lambda: (put(X, 'a', 'b'), 2),
                     lambda: (put(Y, None, 'a', 'b'), put(jnp.array([0, 1], jnp.int32)))),
    "while_keep": (lambda v: lax.while_loop(lambda c: c[0] < 3, _while_body, (0, v))[1],
                   lambda: (put(X, 'a', 'b'),),
                   lambda: (put(Y, None, 'a', 'b'),)),
    "fori_keep": (lambda v: lax.fori_loop(0, 3, lambda i, w: w * 2.0 + 1.0, v),
                  lambda: (put(X, None, 'b'),),
                  lambda: (put(Y, None, None, 'b'),)),
    "fori_tuple_keep": (lambda v: lax.fori_loop(0, 2, lambda i, c: (c[0] * c[1], jnp.sin(c[1])),
                                                 (v, v + 1.0)),
                        lambda: (put(X, 'b', 'a'),),
                        lambda: (put(Y, None, 'b', 'a'),)),
    "scan_carry_ys": (lambda c, xs: lax.scan(lambda k, r: (k + r, k * r), c, xs),
                      lambda: (put(X[0], 'b'), put(X, None, 'b')),
                      lambda: (put(Y[:, 0], None, 'b'), put(Y, None, None, 'b'))),
    "scan_ys_only": (lambda c, xs: lax.scan(lambda k, r: (k, jnp.sin(r) * k), c, xs),
                     lambda: (put(X[0], 'a'), put(X, None, 'a')),
                     lambda: (put(Y[:, 0], None, 'a'), put(Y, None, None, 'a'))),
    "scan_reverse": (lambda c, xs: lax.scan(lambda k, r: (k * 0.5 + r, k), c, xs, reverse=True),
                     lambda: (put(X[0], 'a'), put(X, None, 'a')),
                     lambda: (put(Y[:, 0], None, 'a'), put(Y, None, None, 'a'))),
}

# Control flow whose bodies change the carry's type or whose branches disagree:
# (function, arguments), each run eagerly and under jit ("<case>_jit").
ERRORS = {
    "cond_disagree": (lambda v, p: lax.cond(p, lambda w: w, lambda w: reshard(w, P('b')), v),
                      lambda: (put(X, 'a', None), True)),
    "switch_disagree": (lambda v, i: lax.switch(i, [lambda w: w, jnp.sin,
                                                    lambda w: reshard(w, P('b', 'a'))], v),
                        lambda: (put(X, 'a', 'b'), 0)),
    "while_change": (lambda v: lax.while_loop(lambda c: c[0] < 3, _while_change, (0, v))[1],
                     lambda: (put(X, 'a', None),)),
    "fori_change": (lambda v: lax.fori_loop(0, 3, lambda i, w: reshard(w, P(None, 'a')), v),
                    lambda: (put(X, 'a', 'b'),)),
    "scan_change": (lambda c, xs: lax.scan(lambda k, r: (reshard(k + r, P()), r), c, xs),
                    lambda: (put(X[0], 'b'), put(X, None, 'b'))),
    "while_grad": (lambda v: jax.grad(lambda w: jnp.sum(
        lax.while_loop(lambda c: c[0] < 3, _while_body, (0, w))[1]))(v),
                   lambda: (put(X, 'a', 'b'),)),
}


# Run with no mesh in context: select_n's Explicit checks (typed cases share one sharding, a typed
# selector that is not a scalar has theirs; untyped operands take the typed ones') and a vmapped
# cond whose batched predicate is uncommitted (it becomes a select_n on an untyped selector).
NO_MESH = {
    "select_cases_differ": lambda: lax.select_n(True, put(X, 'a'), put(X, 'b')),
    "select_which_differs": lambda: lax.select_n(put(X > 3, 'b'), put(X, 'a'), put(X, 'a')),
    "select_which_untyped": lambda: lax.select_n(X > 3, put(X, 'a'), put(X, 'a')),
    "select_case_untyped": lambda: lax.select_n(X > 3, put(X, 'a'), X),
    "select_which_same": lambda: lax.select_n(put(X > 3, 'a', 'b'), put(X, 'a', 'b'), X + 1.0),
    "cond_vmap_uncommitted_pred": lambda: jax.vmap(lambda v, p: lax.cond(
        p, lambda w: w * 2.0, jnp.sin, v))(put(Y, None, 'a'), jnp.array([True, False])),
}


# auto_axes binds reshard onto its Auto mesh and back (recorded with their jaxprs): over some of
# the mesh's axes, with grad, and over axes that are Auto already (f runs as it is); an
# out_sharding with an open dim on a mesh without Auto axes raises.
AUTO = {
    "auto_axes_partial": (lambda v: auto_axes(lambda w: w * 2.0, axes='a',
                                              out_sharding=P('a', 'b'))(v),
                          lambda: (put(X, 'a', 'b'),)),
    "auto_axes_partial_grad": (jax.grad(lambda v: jnp.sum(auto_axes(
        lambda w: jnp.sin(w) * 2.0, axes='b', out_sharding=P('a', None))(v))),
                               lambda: (put(X, 'a', 'b'),)),
    "auto_axes_open_dims": (lambda v: auto_axes(lambda w: w * 2.0,
                                                out_sharding=P('a', P.UNCONSTRAINED))(v),
                            lambda: (put(X, 'a', None),)),
}
AUTO_MESH = {
    "auto_axes_already_auto": (lambda v: auto_axes(lambda w: jnp.sin(w) * 2.0,
                                                   out_sharding=P('a'))(v),
                               lambda: (jax.device_put(X, NamedSharding(m_auto, P('a'))),)),
}


def summed(f):
    """The sum of f's float leaves, as a function of its first argument."""
    def g(v, *rest):
        return sum(jnp.sum(leaf) for leaf in jax.tree.leaves(f(v, *rest)))
    return g


def main():
    out = types, specs, values, errors, texts = [], [], {}, [], []
    with jax.set_mesh(m):
        for name, (f, args, vargs) in CASES.items():
            attempt(name, f, args(), *out)
            attempt(f"{name}_jit", jax.jit(f), args(), *out)
            attempt(f"{name}_grad", jax.grad(summed(f)), args(), *out)
            in_axes = tuple(0 if jnp.ndim(a) else None for a in vargs())
            attempt(f"{name}_vmap", jax.vmap(f, in_axes=in_axes), vargs(), *out)
        for name, (f, args) in ERRORS.items():
            attempt(name, f, args(), *out)
            attempt(f"{name}_jit", jax.jit(f), args(), *out)
        for name, (f, args) in AUTO.items():
            attempt(name, f, args(), *out)
    with jax.set_mesh(m_auto):
        for name, (f, args) in AUTO_MESH.items():
            attempt(name, f, args(), *out)
    for name, f in NO_MESH.items():
        attempt(name, f, (), *out)
    write_goldens(5, types, specs, texts, errors, values)


if __name__ == "__main__":
    main()
