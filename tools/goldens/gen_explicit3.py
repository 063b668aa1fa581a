"""Records more of JAX 0.10.2's Explicit sharding mode, for tests/sharding/explicit3_test.cpp, on 8
virtual CPU devices: traced *_like ops keep their operand's type, the transposes that pass the
operand's sharding along (broadcasting ops, tile), jit's out_shardings given as PartitionSpecs
over the mesh in context, and vjp pullbacks run eagerly on uncommitted cotangents.

The names are gen_explicit2.py's: m = jax.make_mesh((4, 2), ('a', 'b'), axis_types=(Explicit,
Explicit)), X = jnp.arange(256.0).reshape(16, 16), S(*spec) = NamedSharding(m, P(*spec)) and
put(v, *spec) = jax.device_put(v, S(*spec)).

Writes tests/goldens/explicit/:
  types3.txt   "=== <case>" then the type of each leaf of the result, space-separated
  specs3.txt   "=== <case>" then, per leaf, its sharding's spec without trailing Nones
               ("P('a',)") or "uncommitted", one per line
  values3.npz  "<case>" (one leaf) or "<case>.<i>" (leaf i): the result's values
  errors3.txt  "=== <case>" then "<ExceptionType>: <message>" (JAX's trailing "This error
               occurs at source: ..." note is cut)
  texts3.txt   "=== <case>" then a jaxpr (grads reshard their cotangent seed, `reshard 1.0`).
Run: python3 tools/goldens/gen_explicit3.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

from gen_explicit2 import message  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "explicit")
E = AxisType.Explicit
m = jax.make_mesh((4, 2), ("a", "b"), axis_types=(E, E))
X = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def S(*spec):
    return NamedSharding(m, P(*spec))


def put(v, *spec):
    return jax.device_put(v, S(*spec))


def in_mesh(f):
    with jax.set_mesh(m):
        return f()


# Traced *_like: (function, argument). Jitted in the mesh (a jit whose result does not depend on
# its arguments needs the mesh in context in JAX).
LIKES = {
    "zeros_like": (jnp.zeros_like, lambda: put(X, 'a', 'b')),
    "ones_like": (jnp.ones_like, lambda: put(X, 'a', 'b')),
    "full_like": (lambda v: jnp.full_like(v, 3.0), lambda: put(X, None, 'a')),
    "zeros_like_int": (lambda v: jnp.zeros_like(v, dtype=jnp.int32), lambda: put(X, 'b', 'a')),
    "ones_like_plus": (lambda v: v * 2.0 + jnp.ones_like(v), lambda: put(X, 'a', None)),
}

# grad of functions of typed values whose transposes pass the operand's sharding: (function,
# arguments); the gradient is wrt the first.
GRADS = {
    "grad_cond_residuals": (lambda v, p: jnp.sum(lax.cond(p, jnp.sin, lambda w: w * 3.0, v)),
                            lambda: (put(X, 'a', 'b'), True)),
    "grad_convert": (lambda v: jnp.sum(v.astype(jnp.float32) * 2.0),
                     lambda: (put(X.astype(jnp.bfloat16), 'a', 'b'),)),
    "grad_mul_unbroadcast": (lambda v, w: jnp.sum(v * w),
                             lambda: (put(X[:, :1], 'a', None), put(X, 'a', 'b'))),
    "grad_add_unbroadcast": (lambda v, w: jnp.sum(jnp.sin(v + w)),
                             lambda: (put(X[:1, :], None, 'b'), put(X, 'a', 'b'))),
    "grad_tile": (lambda v: jnp.sum(jnp.sin(jnp.tile(v, (1, 2)))), lambda: (put(X, 'a', None),)),
}

# jit's out_shardings as PartitionSpecs over the mesh in context.
OUT_SHARDINGS = {
    "out_spec_swapped": lambda: jax.jit(lambda v: v * 2.0, out_shardings=P('b', 'a'))(
        put(X, 'a', 'b')),
    "out_spec_columns": lambda: jax.jit(lambda v: v * 2.0, out_shardings=P(None, 'a'))(
        put(X, 'a', 'b')),
    "out_spec_replicated": lambda: jax.jit(lambda v: v * 2.0, out_shardings=P())(
        put(X, 'a', 'b')),
    "out_spec_tuple": lambda: jax.jit(lambda v: (v * 2.0, jnp.sum(v)),
                                      out_shardings=(P('b'), P()))(put(X, 'a', 'b')),
    "out_spec_uncommitted_arg": lambda: jax.jit(lambda v: v * 2.0, out_shardings=P('a', 'b'))(X),
}

# vjp pullbacks run eagerly on an uncommitted cotangent of ones, outside and inside the mesh
# (where jnp.ones is committed, unsplit, on the mesh).
PULLBACKS = {
    "sin": (jnp.sin, lambda: put(X, 'a', 'b')),
    "reshape": (lambda v: jnp.reshape(v, (256,)), lambda: put(X, 'a', None)),
    "sum0": (lambda v: jnp.sum(v, axis=0), lambda: put(X, 'a', 'b')),
    "mul_unbroadcast": (lambda v: v * X, lambda: put(X[:, :1], 'a', None)),
    "neg": (lambda v: -v, lambda: put(X, 'a', 'b')),
}


def spec_of(v):
    """The spec without trailing Nones (the same sharding; the tests compare specs so)."""
    if not v.committed:
        return "uncommitted"
    entries = list(v.sharding.spec)
    while entries and entries[-1] is None:
        entries.pop()
    return str(P(*entries))


def record(name, result, types, specs, values):
    leaves = jax.tree.leaves(result)
    types.append(f"=== {name}\n{' '.join(str(jax.typeof(v)) for v in leaves)}\n")
    specs.append(f"=== {name}\n" + "".join(f"{spec_of(v)}\n" for v in leaves))
    if len(leaves) == 1:
        values[name] = np.asarray(leaves[0])
    else:
        for i, v in enumerate(leaves):
            values[f"{name}.{i}"] = np.asarray(v)


def attempt(name, f, types, specs, values, errors):
    try:
        record(name, f(), types, specs, values)
    except Exception as e:  # noqa: BLE001
        errors.append(f"=== {name}\n{message(e)}\n")


def pullback(f, x, *ct_spec):
    """f's pullback at x of ones: uncommitted, or put with ct_spec when given."""
    y, pull = jax.vjp(f, x)
    ones = jnp.ones(y.shape, y.dtype)
    return pull(put(ones, *ct_spec) if ct_spec else ones)[0]


def write_goldens(n, types, specs, texts, errors, values):
    """Writes the blocks of gen_explicit<n>.py to types<n>.txt, specs<n>.txt, texts<n>.txt,
    errors<n>.txt and values<n>.npz."""
    os.makedirs(OUT, exist_ok=True)
    header = f"# JAX 0.10.2 on 8 CPU devices; see gen_explicit{n}.py\n"
    files = {f"types{n}.txt": types, f"specs{n}.txt": specs, f"texts{n}.txt": texts,
             f"errors{n}.txt": [header] + errors}
    for file, blocks in files.items():
        with open(os.path.join(OUT, file), "w") as f:
            f.write("".join(blocks))
    np.savez(os.path.join(OUT, f"values{n}.npz"), **values)


def main():
    types, specs, values, errors, texts = [], [], {}, [], []
    for name, (f, arg) in LIKES.items():
        texts.append(f"=== jaxpr_{name}\n{jax.make_jaxpr(f)(arg())}\n")
        attempt(name, lambda: in_mesh(lambda: jax.jit(f)(arg())), types, specs, values, errors)
    for name, (f, args) in GRADS.items():
        attempt(name, lambda: in_mesh(lambda: jax.grad(f)(*args())), types, specs, values, errors)
        texts.append(f"=== jaxpr_{name}\n{jax.make_jaxpr(jax.grad(f))(*args())}\n")
    # A spec given to an op prints as written; the types' shardings above print in full.
    short = jax.make_jaxpr(lambda v: jnp.reshape(v, (16, 16), out_sharding=S('a')))(
        put(jnp.arange(256.0, dtype=jnp.float32), 'b'))
    texts.append(f"=== jaxpr_reshape_given_spec\n{short}\n")
    rows = put(jnp.arange(512.0, dtype=jnp.float32).reshape(2, 256), None, 'b')
    batched = jax.make_jaxpr(jax.vmap(lambda w: jnp.reshape(w, (16, 16), out_sharding=S('a'))))
    texts.append(f"=== jaxpr_vmap_reshape_given_spec\n{batched(rows)}\n")
    attempt("tile_split", lambda: jnp.tile(put(X, 'a', 'b'), (2, 3)), types, specs, values, errors)
    attempt("tile_unsplit_reps", lambda: jnp.tile(put(X, 'a', None), (1, 2)), types, specs,
            values, errors)
    for name, f in OUT_SHARDINGS.items():
        attempt(name, lambda: in_mesh(f), types, specs, values, errors)
    attempt("out_spec_no_mesh", lambda: jax.jit(lambda v: v * 2.0, out_shardings=P('a'))(
        put(X, 'a', 'b')), types, specs, values, errors)
    for name, (f, arg) in PULLBACKS.items():
        attempt(f"pullback_{name}", lambda: pullback(f, arg()), types, specs, values, errors)
        attempt(f"pullback_{name}_in_mesh", lambda: in_mesh(lambda: pullback(f, arg())), types,
                specs, values, errors)
    attempt("pullback_sin_ct_rows", lambda: pullback(jnp.sin, put(X, 'a', 'b'), 'a'), types,
            specs, values, errors)
    attempt("pullback_sin_ct_typed", lambda: pullback(jnp.sin, put(X, 'a', 'b'), 'a', 'b'), types,
            specs, values, errors)
    write_goldens(3, types, specs, texts, errors, values)


if __name__ == "__main__":
    main()
