"""Records more of JAX 0.10.2's Explicit sharding mode, for tests/sharding/explicit2_test.cpp, on 8
virtual CPU devices: grad of functions of typed values (the cotangents keep the types),
control flow (cond, while_loop, fori_loop, scan keep the types of their carries and raise when
a body changes them) and trees of values in auto_axes / explicit_axes.

The names are gen_explicit.py's: m = jax.make_mesh((4, 2), ('a', 'b'), axis_types=(Explicit,
Explicit)), mesh_auto the same with Auto axes, X = jnp.arange(256.0).reshape(16, 16),
S(*spec) = NamedSharding(m, P(*spec)) and put(v, *spec) = jax.device_put(v, S(*spec)).

Writes tests/goldens/explicit/:
  types2.txt   "=== <case>" then the type of each leaf of the result, space-separated (tree
               order: tuples in order, dict keys sorted)
  values2.npz  "<case>" (one leaf) or "<case>.<i>" (leaf i): the result's values
  errors2.txt  "=== <case>" then "<ExceptionType>: <message>" (JAX's trailing "This error
               occurs at source: ..." note is cut)
  texts2.txt   "=== <case>" then a jaxpr (grads reshard their cotangent seed, `reshard 1.0`,
               onto the output's abstract mesh).
Run: python3 tools/goldens/gen_explicit2.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import auto_axes, explicit_axes, reshard  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "explicit")
E, A = AxisType.Explicit, AxisType.Auto
m = jax.make_mesh((4, 2), ("a", "b"), axis_types=(E, E))
mesh_auto = jax.make_mesh((4, 2), ("a", "b"), axis_types=(A, A))
X = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def S(*spec):
    return NamedSharding(m, P(*spec))


def put(v, *spec):
    return jax.device_put(v, S(*spec))


def on_auto(v, *spec):
    return jax.device_put(v, NamedSharding(mesh_auto, P(*spec)))


def in_mesh(f, mesh=m):
    with jax.set_mesh(mesh):
        return f()


# grad of functions on typed values: (function, arguments); the gradient is wrt the first.
GRADS = {
    "grad_sum_squares": (lambda v: jnp.sum(v * v), lambda: (put(X, 'a', 'b'),)),
    "grad_reshape_out_sharding":
        (lambda v: jnp.sum(jnp.reshape(v, (256,), out_sharding=S('a'))),
         lambda: (put(X, None, 'b'),)),
    "grad_matmul_out_sharding":
        (lambda u, v: jnp.sum(jnp.matmul(u, v, out_sharding=S(None, 'a'))),
         lambda: (put(X, None, 'a'), put(X, 'a', None))),
    "grad_mean": (lambda v: jnp.mean(v), lambda: (put(X, 'a', 'b'),)),
    "grad_mean_axis0": (lambda v: jnp.sum(jnp.mean(v, axis=0)), lambda: (put(X, 'a', 'b'),)),
    "grad_sin_rows": (lambda v: jnp.sum(jnp.sin(v) * 2.0), lambda: (put(X, 'a', None),)),
    "grad_unused_arg": (lambda u, v: jnp.sum(v), lambda: (put(X, 'a', 'b'), put(X, None, 'a'))),
}


def twice(v):
    return v * 2.0


def plus_one(v):
    return v + 1.0


# Control flow on typed values; cases that raise go to errors2.txt.
FLOW = {
    "cond": lambda: lax.cond(True, twice, plus_one, put(X, 'a', 'b')),
    "cond_jit": lambda: jax.jit(lambda p, v: lax.cond(p, twice, jnp.sin, v))(
        False, put(X, 'a', 'b')),
    "cond_mismatch": lambda: lax.cond(True, twice, lambda v: reshard(v, S('a')), put(X, 'a', 'b')),
    "while": lambda: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0),
                                    (jnp.int32(0), put(X, 'a', 'b'))),
    "while_mismatch": lambda: lax.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, reshard(c[1], S('a'))),
        (jnp.int32(0), put(X, 'a', 'b'))),
    "fori": lambda: lax.fori_loop(0, 3, lambda i, v: v * 2.0, put(X, 'a', 'b')),
    "fori_mismatch": lambda: lax.fori_loop(0, 3, lambda i, v: reshard(v, S(None, 'a')),
                                           put(X, 'a', 'b')),
    "scan": lambda: lax.scan(lambda c, r: (c + r, c * 2.0), put(X[0], 'a'), put(X, None, 'a')),
    "scan_ys": lambda: lax.scan(lambda c, r: (c, jnp.sin(r)), put(X[0], 'b'), put(X, None, 'a')),
    "scan_jit": lambda: jax.jit(lambda c, xs: lax.scan(lambda c, r: (c + r, c * 2.0), c, xs))(
        put(X[0], 'a'), put(X, None, 'a')),
    "scan_mismatch": lambda: lax.scan(lambda c, r: (reshard(c, S('b')), r), put(X[0], 'a'),
                                      put(X, None, 'a')),
    "scan_xs_split": lambda: lax.scan(lambda c, r: (c + r, r), put(X[0]), put(X, 'a', None)),
}

FLOW_JAXPRS = {
    "jaxpr_fori": lambda: jax.make_jaxpr(lambda v: lax.fori_loop(0, 3, lambda i, w: w * 2.0, v))(
        put(X, 'a', 'b')),
    "jaxpr_cond": lambda: jax.make_jaxpr(lambda p, v: lax.cond(p, twice, jnp.sin, v))(
        True, put(X, 'a', 'b')),
    "jaxpr_scan": lambda: jax.make_jaxpr(
        lambda c, xs: lax.scan(lambda c, r: (c + r, c * 2.0), c, xs))(
        put(X[0], 'a'), put(X, None, 'a')),
}

# Trees in auto_axes / explicit_axes.
U, V = (lambda: put(X, None, 'a')), (lambda: put(X, 'a', None))
TREES = {
    "auto_pair_arg": lambda: auto_axes(lambda t: (t[0] @ t[1], t[0] * 2.0),
                                       out_sharding=(S('a', None), S(None, 'b')))((U(), V())),
    "auto_one_sharding": lambda: auto_axes(lambda x, y: (x @ y, y + 1.0),
                                           out_sharding=S('a', None))(U(), V()),
    "auto_dict": lambda: auto_axes(lambda d: {'p': d['x'] @ d['y'], 'q': d['x']},
                                   out_sharding={'p': S('a', 'b'), 'q': S()})(
        {'x': U(), 'y': V()}),
    "auto_prefix_mismatch": lambda: auto_axes(lambda x, y: (x @ y, y + 1.0),
                                              out_sharding=(S('a', None),))(U(), V()),
    "auto_none_leaf": lambda: auto_axes(lambda x, y: (x @ y, y + 1.0),
                                        out_sharding=(S('a', None), None))(U(), V()),
    "explicit_two_args": lambda: in_mesh(lambda: jax.jit(lambda p, q: explicit_axes(
        lambda x, y: (jnp.sum(x, axis=0), x * y), in_sharding=(P('a', 'b'), P('a', None)))(p, q))(
        on_auto(X, 'a', 'b'), on_auto(X)), mesh_auto),
    "explicit_one_sharding": lambda: in_mesh(lambda: jax.jit(lambda p, q: explicit_axes(
        lambda x, y: (x + y, y), in_sharding=P(None, 'b'))(p, q))(
        on_auto(X, 'a', 'b'), on_auto(X)), mesh_auto),
    "explicit_pair_arg": lambda: in_mesh(lambda: jax.jit(lambda p, q: explicit_axes(
        lambda t: t[0] + t[1], in_sharding=((P('a'), P('a')),))((p, q)))(
        on_auto(X, 'a', 'b'), on_auto(X)), mesh_auto),
    "explicit_prefix_mismatch": lambda: in_mesh(lambda: jax.jit(lambda p, q: explicit_axes(
        lambda x, y: x + y, in_sharding=(P('a'), P('a'), P()))(p, q))(
        on_auto(X, 'a', 'b'), on_auto(X)), mesh_auto),
}


def message(e):
    text = str(e).split(" This error occurs at source")[0].rstrip()
    return f"{type(e).__name__}: {text}"


def record(name, result, types, values):
    leaves = jax.tree.leaves(result)
    types.append(f"=== {name}\n{' '.join(str(jax.typeof(v)) for v in leaves)}\n")
    if len(leaves) == 1:
        values[name] = np.asarray(leaves[0])
    else:
        for i, v in enumerate(leaves):
            values[f"{name}.{i}"] = np.asarray(v)


def main():
    os.makedirs(OUT, exist_ok=True)
    types, values, errors, texts = [], {}, [], []
    for name, (f, args) in GRADS.items():
        record(name, in_mesh(lambda: jax.grad(f)(*args())), types, values)
        closed = in_mesh(lambda: jax.make_jaxpr(jax.grad(f))(*args()))
        texts.append(f"=== jaxpr_{name}\n{closed}\n")
    for name, f in {**FLOW, **TREES}.items():
        try:
            record(name, f(), types, values)
        except Exception as e:  # noqa: BLE001
            errors.append(f"=== {name}\n{message(e)}\n")
    for name, f in FLOW_JAXPRS.items():
        texts.append(f"=== {name}\n{f()}\n")
    with open(os.path.join(OUT, "types2.txt"), "w") as f:
        f.write("".join(types))
    with open(os.path.join(OUT, "errors2.txt"), "w") as f:
        f.write("# JAX 0.10.2 on 8 CPU devices; see gen_explicit2.py\n" + "".join(errors))
    with open(os.path.join(OUT, "texts2.txt"), "w") as f:
        f.write("".join(texts))
    np.savez(os.path.join(OUT, "values2.npz"), **values)


if __name__ == "__main__":
    main()
