"""Records JAX 0.10.2's reshard primitive in Explicit mode, for
tests/sharding/explicit_reshard_test.cpp, on 8 virtual CPU devices: `reshard` equations in
traced programs, their jvp, transpose and batching, grad's cotangent seed, and the traced
*_like of 0-d values (a reshard of the literal), and fori_loop's error for a reshard that changes
a carry's type.

The names are gen_explicit2.py's: m = jax.make_mesh((4, 2), ('a', 'b'), axis_types=(Explicit,
Explicit)), X = jnp.arange(256.0).reshape(16, 16), S(*spec) = NamedSharding(m, P(*spec)) and
put(v, *spec) = jax.device_put(v, S(*spec)).

Writes tests/goldens/explicit/:
  reshard_texts.txt   "=== <case>" then the jaxpr of case <case>
  reshard_types.txt   "=== <case>" then the result's jax.typeof
  reshard_specs.txt   "=== <case>" then the result's spec without trailing Nones ("P('a',)")
  reshard_values.npz  "<case>": the result's values
  reshard_errors.txt  "=== <case>" then "<ExceptionType>: <message>" (JAX's trailing "This error
                      occurs at source: ..." note is cut)
Run: /work/jaxenv/bin/python tools/goldens/gen_explicit_reshard.py   (needs jax 0.10.2; the
tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P, reshard  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "explicit")
E = AxisType.Explicit
m = jax.make_mesh((4, 2), ("a", "b"), axis_types=(E, E))
X = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def S(*spec):
    return NamedSharding(m, P(*spec))


def put(v, *spec):
    return jax.device_put(v, S(*spec))


def swapped(v):
    return reshard(v * 2.0, S("b", "a"))


def summed_swapped(v):
    return jnp.sum(jnp.sin(reshard(v, S("b", "a"))))


def jvp_columns(v, t):
    return jax.jvp(lambda u: reshard(u, S(None, "a")), (v,), (t,))


# Jaxprs: (function, arguments).
TEXTS = {
    "reshard_traced": (swapped, lambda: (put(X, "a", "b"),)),
    "grad_through_reshard": (jax.grad(summed_swapped), lambda: (put(X, "a", "b"),)),
    "jvp_reshard": (jvp_columns, lambda: (put(X, "a", "b"), put(X, "a", "b"))),
    "vmap_reshard": (jax.vmap(lambda v: reshard(v, S("b"))), lambda: (put(X, None, "a"),)),
    "zeros_like_scalar": (lambda v: jnp.zeros_like(jnp.sum(v)), lambda: (put(X, "a", "b"),)),
    "full_like_scalar": (lambda v: jnp.full_like(jnp.sum(v), 3.0), lambda: (put(X, "a", None),)),
}

# Results: functions of no argument, run in the mesh.
RESULTS = {
    "jit_reshard": lambda: jax.jit(swapped)(put(X, "a", "b")),
    "grad_through_reshard": lambda: jax.grad(summed_swapped)(put(X, "a", "b")),
    "jit_grad_through_reshard": lambda: jax.jit(jax.grad(summed_swapped))(put(X, "a", "b")),
    "vmap_reshard": lambda: jax.jit(jax.vmap(lambda v: reshard(v, S("b"))))(put(X, None, "a")),
    "jit_zeros_like_scalar": lambda: jax.jit(lambda v: jnp.zeros_like(jnp.sum(v)))(
        put(X, "a", "b")),
}


# Errors of reshards in loop bodies that change a carry's type, beyond gen_explicit2.py's.
ERRORS = {
    "fori_tuple_mismatch": lambda: jax.lax.fori_loop(
        0, 3, lambda i, c: (c[0] * 2.0, reshard(c[1], S(None, "a"))),
        (put(X, "a", "b"), put(X, "a", "b"))),
}


def message(e):
    text = str(e).split(" This error occurs at source")[0].rstrip()
    return f"{type(e).__name__}: {text}"


def spec_of(v):
    entries = list(v.sharding.spec)
    while entries and entries[-1] is None:
        entries.pop()
    return str(P(*entries))


def main():
    os.makedirs(OUT, exist_ok=True)
    texts, types, specs, values = [], [], [], {}
    with jax.set_mesh(m):
        for name, (f, args) in TEXTS.items():
            texts.append(f"=== {name}\n{jax.make_jaxpr(f)(*args())}\n")
        for name, f in RESULTS.items():
            v = f()
            types.append(f"=== {name}\n{jax.typeof(v)}\n")
            specs.append(f"=== {name}\n{spec_of(v)}\n")
            values[name] = np.asarray(v)
        errors = []
        for name, f in ERRORS.items():
            try:
                f()
                raise AssertionError(f"{name} raised nothing")
            except TypeError as e:
                errors.append(f"=== {name}\n{message(e)}\n")
    for file, blocks in [("reshard_texts.txt", texts), ("reshard_types.txt", types),
                         ("reshard_specs.txt", specs), ("reshard_errors.txt", errors)]:
        with open(os.path.join(OUT, file), "w") as out:
            out.write("".join(blocks))
    np.savez(os.path.join(OUT, "reshard_values.npz"), **values)


if __name__ == "__main__":
    main()
