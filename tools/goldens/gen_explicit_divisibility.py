"""Records JAX 0.10.2's error for an array type whose Explicit axes do not divide a dim, for
tests/sharding/explicit_divisibility_test.cpp, on 8 virtual CPU devices. On a mesh with Explicit
axes a sharding's type keeps each dim's Explicit axes only, and JAX checks that their product
divides the dim before the placement's own check (core._check_divisibility); a dim that only
Auto axes split unevenly gets the placement's text. The out_sharding of matmul, reshape and einsum
is checked the same way. X = jnp.arange(48.0).reshape(8, 6).

Writes tests/goldens/explicit/divisibility_errors.txt: "=== <case>" then
"<ExceptionType>: <message>" (JAX's trailing "This error occurs at source: ..." note is cut).
Run: /work/jaxenv/bin/python tools/goldens/gen_explicit_divisibility.py   (needs jax 0.10.2; the
tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P, reshard  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "explicit", "divisibility_errors.txt")
E, A = AxisType.Explicit, AxisType.Auto
X = jnp.arange(48.0, dtype=jnp.float32).reshape(8, 6)


def mesh(shape, types):
    return jax.make_mesh(shape, ("a", "b")[:len(shape)], axis_types=types)


def put(shape, types, spec, value=X):
    return lambda: jax.device_put(value, NamedSharding(mesh(shape, types), spec))


def resharded(shape, types, spec, value=X):
    return lambda: reshard(value, NamedSharding(mesh(shape, types), spec))


def jitted(shape, types, spec):
    return lambda: jax.jit(lambda v: reshard(v, NamedSharding(mesh(shape, types), spec)))(X)


def with_out_sharding(op, jit=False):
    m = mesh((4, 2), (E, E))
    x = jax.device_put(X, NamedSharding(m, P("a", None)))
    w = jax.device_put(jnp.ones((6, 6), jnp.float32), NamedSharding(m, P(None, None)))
    f = {
        "matmul": lambda a, b: jnp.matmul(a, b, out_sharding=NamedSharding(m, P(None, "a"))),
        "reshape": lambda a, b: jnp.reshape(a, (6, 8), out_sharding=NamedSharding(m, P("a", None))),
        "einsum": lambda a, b: jnp.einsum("ij,jk->ik", a, b,
                                          out_sharding=NamedSharding(m, P(None, "a"))),
    }[op]
    return lambda: (jax.jit(f) if jit else f)(x, w)


CASES = {
    "put_explicit_columns": put((4, 2), (E, E), P(None, "a")),
    "reshard_explicit_columns": resharded((4, 2), (E, E), P(None, "a")),
    "jit_reshard_explicit_columns": jitted((4, 2), (E, E), P(None, "a")),
    "put_explicit_tuple": put((2, 4), (E, E), P(None, ("a", "b"))),
    "put_explicit_short_spec": put((4, 2), (E, E), P("a"), X.T),
    "put_explicit_1d": put((4, 2), (E, E), P("a"), jnp.arange(6.0, dtype=jnp.float32)),
    "put_explicit_one_axis": put((8,), (E,), P(None, "a")),
    "put_mixed_tuple_explicit_part": put((4, 2), (E, A), P(None, ("a", "b"))),
    "put_mixed_explicit_axis": put((4, 2), (E, A), P(None, "a")),
    "put_mixed_auto_axis": put((4, 2), (A, E), P(None, "a")),
    "put_mixed_auto_and_explicit": put((4, 2), (A, E), P("b", "a")),
    "matmul_out_sharding": with_out_sharding("matmul"),
    "jit_matmul_out_sharding": with_out_sharding("matmul", jit=True),
    "reshape_out_sharding": with_out_sharding("reshape"),
    "jit_reshape_out_sharding": with_out_sharding("reshape", jit=True),
    "einsum_out_sharding": with_out_sharding("einsum"),
}


def message(e):
    return f"{type(e).__name__}: {str(e).split(' This error occurs at source')[0]}"


def main():
    blocks = []
    for name, f in CASES.items():
        try:
            f()
            raise AssertionError(f"{name} raised nothing")
        except ValueError as e:
            blocks.append(f"=== {name}\n{message(e)}\n")
    with open(OUT, "w") as out:
        out.write("".join(blocks))


if __name__ == "__main__":
    main()
