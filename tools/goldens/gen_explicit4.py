"""Records JAX 0.10.2's Explicit sharding mode under vmap and in control flow, for
tests/sharding/explicit4_test.cpp, on 8 virtual CPU devices: vmap over a dim split over Explicit
axes splits the batch dim of batched out_shardings (reshard, reshape, dot_general,
broadcast_in_dim, a transpose's reduce_sum) and of broadcast unbatched values over those axes
(JAX's get_sharding_for_vmap and batching.broadcast), vmap's errors for inconsistent mapped
shardings, auto_axes under vmap and grad, and the types control flow gives bodies whose results
are resharded.

The names are gen_explicit3.py's (imported from it): m = jax.make_mesh((4, 2), ('a', 'b'), axis_types=(Explicit,
Explicit)), X = jnp.arange(256.0).reshape(16, 16), S(*spec) = NamedSharding(m, P(*spec)) and
put(v, *spec) = jax.device_put(v, S(*spec)). Every case runs with m in context (jax.set_mesh).

Writes tests/goldens/explicit/:
  types4.txt   "=== <case>" then the type of each leaf of the result, space-separated
  specs4.txt   "=== <case>" then, per leaf, its sharding's spec without trailing Nones
  values4.npz  "<case>" (one leaf) or "<case>.<i>" (leaf i): the result's values
  errors4.txt  "=== <case>" then "<ExceptionType>: <message>" (JAX's trailing "This error
               occurs at source: ..." note is cut)
  texts4.txt   "=== jaxpr_<case>" then the case's jaxpr
Run: python3 tools/goldens/gen_explicit4.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P, reshard  # noqa: E402

from gen_explicit2 import message  # noqa: E402
from gen_explicit3 import X, m, put, record, write_goldens  # noqa: E402


# vmap over dims split over Explicit axes: (function, arguments). Each is vmapped with the
# options given; the jaxpr of the vmapped function is recorded too.
VMAPS = {
    "vmap_reshard": (lambda v: reshard(v, P('b')), {}, lambda: (put(X, 'a', None),)),
    "vmap_reshard_in_axes1": (lambda v: reshard(v, P('a')), {"in_axes": 1},
                              lambda: (put(X, None, 'b'),)),
    "vmap_reshape": (lambda v: jnp.reshape(v, (4, 4), out_sharding=P('b')), {},
                     lambda: (put(X, 'a', None),)),
    "vmap_dot_general": (
        lambda v, w: lax.dot_general(v, w, (([1], [0]), ([], [])), out_sharding=P(None, 'b')),
        {}, lambda: (put(X.reshape(4, 4, 16), 'a'), put(X.reshape(4, 16, 4), 'a'))),
    "vmap_matmul": (lambda v, w: jnp.matmul(v, w, out_sharding=P('b')), {},
                    lambda: (put(X.reshape(4, 4, 16), 'a'), put(X.reshape(4, 16, 4), 'a'))),
    "vmap_broadcast_in_dim": (
        lambda v: lax.broadcast_in_dim(v, (16, 4), (0,), out_sharding=P('b')), {},
        lambda: (put(X, 'a', None),)),
    "vmap_full_like": (lambda v: jnp.full_like(v, 2.0), {}, lambda: (put(X, 'a', 'b'),)),
    "vmap_tuple_axes": (lambda v: jnp.reshape(v, (4, 8), out_sharding=P()), {},
                        lambda: (put(X.reshape(8, 32), ('a', 'b')),)),
    "vmap_add_unbatched": (lambda v, w: v + w, {"in_axes": (0, None)},
                           lambda: (put(X, 'a', None), put(X[0], 'b'))),
    "vmap_out_unbatched": (lambda v, c: c, {"in_axes": (0, None)},
                           lambda: (put(X, 'a', None), put(X[0], 'b'))),
    "vmap_out_unbatched_axis1": (lambda v, c: c, {"in_axes": (0, None), "out_axes": 1},
                                 lambda: (put(X, 'a', None), put(X[0], 'b'))),
    "vmap_fori_unbatched_init": (lambda v, c: lax.fori_loop(0, 3, lambda i, k: k + v, c),
                                 {"in_axes": (0, None)},
                                 lambda: (put(X, 'a', 'b'), put(X[0], 'b'))),
    "vmap_auto_axes": (lambda v: jax.sharding.auto_axes(lambda w: w * 2.0, out_sharding=P('b'))(v),
                       {}, lambda: (put(X, 'a', None),)),
    "vmap_grad_sin": (jax.grad(lambda v: jnp.sum(jnp.sin(v))), {}, lambda: (put(X, 'a', 'b'),)),
    "vmap_grad_broadcast": (jax.grad(lambda v: jnp.sum(jnp.sin(jnp.broadcast_to(v, (4, 16))))),
                            {}, lambda: (put(X, 'a', 'b'),)),
}

# grad through auto_axes: the cotangent goes back through both reshards.
GRADS = {
    "grad_auto_axes": (
        jax.grad(lambda v: jnp.sum(jax.sharding.auto_axes(lambda w: jnp.sin(w) * 2.0,
                                                          out_sharding=P('a', 'b'))(v))),
        lambda: (put(X, 'a', 'b'),)),
}

# vmap's errors for mapped arguments split differently and unmapped ones split over the axes.
VMAP_ERRORS = {
    "vmap_inconsistent": (lambda v, w: v + w, {}, lambda: (put(X, 'a', None), put(X, 'b', None))),
    "vmap_inconsistent_uncommitted": (lambda v, w: v + w, {}, lambda: (put(X, 'a', None), X)),
    "vmap_inconsistent_tuple": (lambda v, w: v + w, {},
                                lambda: (put(X.reshape(8, 32), ('a', 'b')),
                                         put(X.reshape(8, 32), 'b'))),
    "vmap_unmapped_split": (lambda v, w: v + w, {"in_axes": (0, None)},
                            lambda: (put(X, 'a', None), put(X[0], 'a'))),
    "vmap_reshard_mapped_axis": (lambda v: reshard(v, P('a')), {}, lambda: (put(X, 'a', None),)),
}


# Control flow whose bodies reshard: (function, arguments).
def _round_trip(c):
    return c[0] + 1, reshard(reshard(c[1], P('b', 'a')) * 2.0, P('a', 'b'))


CONTROL = {
    "cond_both_reshard": (
        lambda p, v: lax.cond(p, lambda w: reshard(w * 2.0, P('b', 'a')),
                              lambda w: reshard(w, P('b', 'a')), v),
        lambda: (True, put(X, 'a', 'b'))),
    "while_reshard_round_trip": (
        lambda v: lax.while_loop(lambda c: c[0] < 3, _round_trip, (0, v))[1],
        lambda: (put(X, 'a', 'b'),)),
    "scan_ys_split": (lambda v, r: lax.scan(lambda c, s: (c, c * s), v, r),
                      lambda: (put(X, 'a', 'b'), jnp.arange(3.0, dtype=jnp.float32))),
    "scan_typed_carry_and_xs": (lambda c, xs: lax.scan(lambda k, s: (k + s, s * 2.0), c, xs),
                                lambda: (put(jnp.zeros(16, jnp.float32), 'b'),
                                         put(X, None, 'b'))),
}

CONTROL_ERRORS = {
    "cond_unsplit_vs_split": (lambda p, v: lax.cond(p, lambda w: reshard(w, P()), lambda w: w, v),
                              lambda: (True, put(X, 'a', 'b'))),
    "switch_mismatch": (lambda i, v: lax.switch(i, [lambda w: w, lambda w: reshard(w, P(None, 'b')),
                                                    lambda w: w + 1.0], v),
                        lambda: (1, put(X, 'a', None))),
    "fori_tuple_mismatch": (lambda v: lax.fori_loop(0, 3, lambda i, c: (c[0], reshard(c[1], P())),
                                                    (v, v)),
                            lambda: (put(X, 'a', 'b'),)),
    "scan_unsplit_init": (lambda c, xs: lax.scan(lambda k, s: (k + s, s * 2.0), c, xs),
                          lambda: (jnp.zeros(16, jnp.float32), put(X, None, 'b'))),
}


def attempt(name, f, args, types, specs, values, errors, texts):
    try:
        texts.append(f"=== jaxpr_{name}\n{jax.make_jaxpr(f)(*args)}\n")
        record(name, f(*args), types, specs, values)
    except Exception as e:  # noqa: BLE001
        errors.append(f"=== {name}\n{message(e)}\n")


def main():
    types, specs, values, errors, texts = [], [], {}, [], []
    with jax.set_mesh(m):
        for name, (f, options, args) in {**VMAPS, **VMAP_ERRORS}.items():
            attempt(name, jax.vmap(f, **options), args(), types, specs, values, errors, texts)
        for name, (f, args) in {**GRADS, **CONTROL, **CONTROL_ERRORS}.items():
            attempt(name, f, args(), types, specs, values, errors, texts)
    write_goldens(4, types, specs, texts, errors, values)


if __name__ == "__main__":
    main()
