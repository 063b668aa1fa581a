"""Records JAX 0.10.2's Explicit sharding mode ("sharding in types"), for
tests/sharding/explicit_test.cpp, on 8 virtual CPU devices.

Every case runs on m = jax.make_mesh((4, 2), ('a', 'b'), axis_types=(Explicit, Explicit))
unless its comment says otherwise, with X = jnp.arange(256.0, dtype=float32).reshape(16, 16)
and put(v, *spec) = jax.device_put(v, NamedSharding(m, P(*spec))).

Writes tests/goldens/explicit/:
  types.txt   "=== <case>" then str(jax.typeof(result)), for cases that succeed
  errors.txt  "# <case>: <code>" lines, then "=== <case>" and "<ExceptionType>: <message>" (JAX's
              trailing "This error occurs at source: ..." note is cut)
  texts.txt   "=== <case>" then a text: mesh reprs, shardings, jaxprs
Run: python3 tools/goldens/gen_explicit.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import auto_axes, explicit_axes, reshard  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "explicit")
E, A, M = AxisType.Explicit, AxisType.Auto, AxisType.Manual
m = jax.make_mesh((4, 2), ("a", "b"), axis_types=(E, E))
mixed = jax.make_mesh((4, 2), ("a", "b"), axis_types=(E, A))
X = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def S(*spec):
    return NamedSharding(m, P(*spec))


def put(v, *spec):
    return jax.device_put(v, S(*spec))


def in_mesh(f, mesh=None):
    """f() with m (or `mesh`) as the context mesh (JAX's grad of a sharded value and
    explicit_axes ask for one)."""
    with jax.set_mesh(m if mesh is None else mesh):
        return f()


def inner_types(wrap, f, *args):
    """The types f sees inside wrap (auto_axes / explicit_axes) and returns, and the result's."""
    seen = []

    def g(*vs):
        out = f(*vs)
        seen.extend(str(jax.typeof(v)) for v in vs + (out,))
        return out

    seen.append(str(jax.typeof(wrap(g)(*args))))
    return " ".join(seen)


# Cases whose result type is recorded; the ones that raise go to errors.txt.
CASES = {
    "unsharded": "X",
    "put_ab": "put(X, 'a', 'b')",
    "put_a": "put(X, 'a')",
    "put_tuple": "put(X, ('a', 'b'), None)",
    "put_replicated": "put(X)",
    "put_mixed_ab": "jax.device_put(X, NamedSharding(mixed, P('a', 'b')))",
    "put_int_3d": "put(jnp.zeros((8, 4, 6), jnp.int32), None, 'a', 'b')",
    "sin": "jnp.sin(put(X, 'a', 'b'))",
    "jit_exp": "jax.jit(jnp.exp)(put(X, 'a', 'b'))",
    "astype": "put(X, 'a', 'b').astype(jnp.int32)",
    "mul_scalar": "put(X, 'a', None) * 2.0",
    "add_same": "put(X, 'a', None) + put(X, 'a', None)",
    "add_replicated": "put(X, 'a', None) + put(X)",
    "add_uncommitted": "put(X, 'a', None) + X",
    "add_refines": "put(X, 'a', 'b') + put(X, 'a', None)",
    "add_row_b": "put(X, 'a', None) + put(X[0], 'b')",
    "add_a_b_dims": "put(X, 'a', None) + put(X, None, 'b')",
    "jit_add": "jax.jit(jnp.add)(put(X, 'a', None), put(X, None, 'b'))",
    "where": "jnp.where(put(X, 'a', None) > 3, put(X, 'a', None), 0.0)",
    "add_different_dims": "put(X, 'a', None) + put(X, None, 'a')",
    "add_different_axes": "put(X, 'a', None) + put(X, 'b', None)",
    "add_tuple_vs_axis": "put(X, ('a', 'b'), None) + put(X, 'a', None)",
    "add_row_same_axis": "put(X, 'a', None) + put(X[0], 'a')",
    "jit_add_different_dims": "jax.jit(jnp.add)(put(X, 'a', None), put(X, None, 'a'))",
    "matmul_a_b": "put(X, 'a', None) @ put(X, None, 'b')",
    "matmul_contract_lhs": "put(X, None, 'a') @ put(X)",
    "matmul_contract_rhs": "put(X) @ put(X, 'a', None)",
    "matmul_contract_both": "put(X, None, 'a') @ put(X, 'a', None)",
    "matmul_contract_both_b": "put(X, 'a', 'b') @ put(X, 'b', None)",
    "matmul_contract_mismatch": "put(X, None, 'b') @ put(X, 'a', None)",
    "matmul_same_axis_out": "put(X, 'a', None) @ put(X, None, 'a')",
    "matmul_out_sharding": "jnp.matmul(put(X, None, 'a'), put(X, 'a', None), out_sharding=S(None, 'a'))",
    "dot_out_sharding": "jnp.dot(put(X, None, 'a'), put(X, 'a', None), out_sharding=S('a', 'b'))",
    "matmul_out_sharding_free": "jnp.matmul(put(X, 'a', None), put(X, None, 'b'), out_sharding=S('b', 'a'))",
    "jit_matmul": "jax.jit(jnp.matmul)(put(X, 'a', None), put(X, None, 'b'))",
    "matvec": "put(X, 'a', None) @ put(X[0], None)",
    "batched_matmul": "put(jnp.ones((4, 8, 16)), 'a', None, None) @ put(jnp.ones((4, 16, 8)), 'a', None, 'b')",
    "sum0": "jnp.sum(put(X, 'a', 'b'), axis=0)",
    "sum1": "jnp.sum(put(X, 'a', 'b'), axis=1)",
    "sum_all": "jnp.sum(put(X, 'a', 'b'))",
    "sum_keepdims": "jnp.sum(put(X, 'a', 'b'), axis=1, keepdims=True)",
    "max1": "jnp.max(put(X, 'a', 'b'), axis=1)",
    "mean0": "jnp.mean(put(X, 'a', 'b'), axis=0)",
    "argmax1": "jnp.argmax(put(X, 'a', 'b'), axis=1)",
    "transpose": "put(X, 'a', 'b').T",
    "transpose_3d": "jnp.transpose(put(X.reshape(4, 4, 16), 'a', None, 'b'), (2, 0, 1))",
    "reshape_split_major": "put(X, 'a', None).reshape(4, 4, 16)",
    "reshape_split_minor": "put(X, None, 'b').reshape(16, 2, 8)",
    "reshape_merge_major": "put(X, 'a', None).reshape(256)",
    "reshape_merge_both": "put(X, 'a', 'b').reshape(256)",
    "reshape_merge_3d": "put(X.reshape(4, 4, 16), 'a', None, None).reshape(16, 16)",
    "reshape_split_both": "put(X, 'a', 'b').reshape(4, 4, 2, 8)",
    "reshape_merge_minor": "put(X, None, 'b').reshape(256)",
    "reshape_out_sharding": "jnp.reshape(put(X, None, 'b'), (256,), out_sharding=S('a'))",
    "reshape_out_sharding_split": "jnp.reshape(put(X, 'a', 'b'), (4, 4, 2, 8), out_sharding=S('a', None, 'b'))",
    "expand_dims": "jnp.expand_dims(put(X, 'a', 'b'), 0)",
    "broadcast_to": "jnp.broadcast_to(put(X[0], 'a'), (8, 16))",
    "cumsum_free_dim": "jnp.cumsum(put(X, 'a', None), axis=1)",
    "cumsum_sharded_dim": "jnp.cumsum(put(X, 'a', None), axis=0)",
    "sort_free_dim": "jnp.sort(put(X, 'a', None), axis=1)",
    "sort_sharded_dim": "jnp.sort(put(X, 'a', None), axis=0)",
    "concatenate0": "jnp.concatenate([put(X, 'a', None), put(X, 'a', None)], 0)",
    "concatenate1": "jnp.concatenate([put(X, 'a', None), put(X, 'a', None)], 1)",
    "zeros_like": "jnp.zeros_like(put(X, 'a', 'b'))",
    "ones_like": "jnp.ones_like(put(X, 'a', None))",
    "full_like": "jnp.full_like(put(X, None, ('a', 'b')), 3.0)",
    "zeros_like_int": "jnp.zeros_like(put(X, 'a', 'b'), dtype=jnp.int32)",
    "grad_reshape_out_sharding": "in_mesh(lambda: jax.grad(lambda v: jnp.sum(jnp.reshape(v, (256,), out_sharding=S('a'))))(put(X, None, 'b')))",
    "grad_matmul_out_sharding": "in_mesh(lambda: jax.grad(lambda u: jnp.sum(jnp.matmul(u, put(X, 'a', None), out_sharding=S(None, 'a'))))(put(X, None, 'a')))",
    "reshard_uncommitted": "reshard(X, S('a'))",
    "reshard_moves": "reshard(put(X, 'a', None), S(None, 'a'))",
    "reshard_jit": "jax.jit(lambda v: reshard(v, S(None, ('a', 'b'))))(put(X, 'a', 'b'))",
    "reshard_mixed": "reshard(X, NamedSharding(mixed, P(None, 'a')))",
    "reshard_auto_axis": "reshard(X, NamedSharding(mixed, P('b')))",
    "auto_axes_matmul": "auto_axes(lambda u, v: u @ v, out_sharding=S('a', None))(put(X, None, 'a'), put(X, 'a', None))",
    "auto_axes_jit": "jax.jit(lambda u: auto_axes(lambda v: v * 2, out_sharding=S(None, 'b'))(u))(put(X, 'a', 'b'))",
    "auto_axes_one_axis": "auto_axes(lambda v: jnp.sin(v), axes='a', out_sharding=S('b', None))(put(X, 'a', 'b'))",
    "explicit_axes_jit": "jax.jit(lambda u: explicit_axes(lambda v: jnp.sum(v, axis=0), in_sharding=NamedSharding(mesh_auto, P('a', 'b')))(u))(jax.device_put(X, NamedSharding(mesh_auto, P('a', 'b'))))",
    "explicit_axes_set_mesh": "in_mesh(lambda: jax.jit(lambda u: explicit_axes(lambda v: jnp.sum(v, axis=0), in_sharding=P('a', 'b'))(u))(jax.device_put(X, NamedSharding(mesh_auto, P('a', 'b')))), mesh_auto)",
    "mesh_mismatch": "put(X, 'a') + jax.device_put(X, NamedSharding(mixed, P('a')))",
}
mesh_auto = jax.make_mesh((4, 2), ("a", "b"), axis_types=(A, A))

TEXTS = {
    "mesh_explicit_repr": lambda: repr(m),
    "mesh_explicit_str": lambda: str(m),
    "mesh_mixed_repr": lambda: repr(jax.make_mesh((2, 2, 2), ("a", "b", "c"), axis_types=(E, A, M))),
    "mesh_mixed_str": lambda: str(jax.make_mesh((2, 2, 2), ("a", "b", "c"), axis_types=(E, A, M))),
    "mesh_types_equal": lambda: str(m == mixed),
    "sharding_repr": lambda: repr(put(X, 'a', 'b').sharding),
    "typeof_repr": lambda: repr(jax.typeof(put(X, 'a', 'b'))),
    "typeof_repr_unsharded": lambda: repr(jax.typeof(X)),
    "jaxpr_mul": lambda: str(jax.make_jaxpr(lambda a: a * 2)(put(X, 'a', 'b'))),
    "jaxpr_sin_tuple": lambda: str(jax.make_jaxpr(jnp.sin)(put(X, ('a', 'b'), None))),
    "jaxpr_matmul": lambda: str(jax.make_jaxpr(jnp.matmul)(put(X, 'a', None), put(X, None, 'b'))),
    "jaxpr_matmul_out_sharding": lambda: str(jax.make_jaxpr(lambda u, v: jnp.matmul(u, v, out_sharding=S(None, 'a')))(put(X, None, 'a'), put(X, 'a', None))),
    "jaxpr_reshape_out_sharding": lambda: str(jax.make_jaxpr(lambda u: jnp.reshape(u, (256,), out_sharding=S('a')))(put(X, None, 'b'))),
    "jaxpr_reshape_merge": lambda: str(jax.make_jaxpr(lambda u: jnp.reshape(u, (256,)))(put(X, 'a', 'b'))),
    "jaxpr_reshard": lambda: str(jax.make_jaxpr(lambda v: reshard(v, S(None, 'a')))(put(X, 'a'))),
    "result_sharding_add": lambda: repr((put(X, 'a', None) + put(X, None, 'b')).sharding),
    "result_sharding_sum": lambda: repr(jnp.sum(put(X, 'a', 'b'), axis=0).sharding),
    "result_sharding_reshard": lambda: repr(reshard(X, S('a')).sharding),
    "result_sharding_matmul_out": lambda: repr(jnp.matmul(put(X, None, 'a'), put(X, 'a', None), out_sharding=S(None, 'a')).sharding),
    "result_sharding_reshape_out": lambda: repr(jnp.reshape(put(X, None, 'b'), (256,), out_sharding=S('a')).sharding),
    # The types inside auto_axes / explicit_axes: the operands', the result's, then the type after.
    "auto_axes_inner_all": lambda: inner_types(lambda g: auto_axes(g, out_sharding=S('a', None)), lambda u, v: u @ v, put(X, None, 'a'), put(X, 'a', None)),
    "auto_axes_inner_one": lambda: inner_types(lambda g: auto_axes(g, axes='a', out_sharding=S('b', None)), jnp.sin, put(X, 'a', 'b')),
    "explicit_axes_inner": lambda: in_mesh(lambda: inner_types(lambda g: explicit_axes(g, in_sharding=P('a', 'b')), lambda v: jnp.sum(v, axis=0), jax.device_put(X, NamedSharding(mesh_auto, P('a', 'b')))), mesh_auto),
    "explicit_axes_inner_one": lambda: in_mesh(lambda: inner_types(lambda g: explicit_axes(g, axes='b', in_sharding=P(None, 'b')), lambda v: v * 2, jax.device_put(X, NamedSharding(mesh_auto, P('a', 'b')))), mesh_auto),
    # *_like of a committed array keeps its sharding, on Explicit and Auto meshes alike.
    "like_sharding_explicit": lambda: repr(jnp.zeros_like(put(X, 'a', 'b')).sharding),
    "like_sharding_auto": lambda: repr(jnp.ones_like(jax.device_put(X, NamedSharding(mesh_auto, P('a', None)))).sharding),
    "full_like_sharding_auto": lambda: repr(jnp.full_like(jax.device_put(X, NamedSharding(mesh_auto, P(None, 'b'))), 2.0).sharding),
    "like_committed_auto": lambda: str(jnp.zeros_like(jax.device_put(X, NamedSharding(mesh_auto, P('a', None))))._committed),
    "like_uncommitted": lambda: str(jnp.zeros_like(X)._committed),
}

ERRORS_EXTRA = {
    "make_mesh_types_count": lambda: jax.make_mesh((4, 2), ("a", "b"), axis_types=(E,)),
    "matmul_out_sharding_auto": lambda: jnp.matmul(
        X, X, out_sharding=NamedSharding(mesh_auto, P(None, 'a'))),
    "reshape_out_sharding_auto": lambda: jnp.reshape(
        X, (256,), out_sharding=NamedSharding(mesh_auto, P('a'))),
}


def message(e):
    text = str(e).split(" This error occurs at source")[0].rstrip()
    return f"{type(e).__name__}: {text}"


def main():
    os.makedirs(OUT, exist_ok=True)
    types, errors, err_header = [], [], ["# JAX 0.10.2 on 8 CPU devices; see gen_explicit.py"]
    for name, code in CASES.items():
        try:
            types.append(f"=== {name}\n{jax.typeof(eval(code))}\n")
        except Exception as e:  # noqa: BLE001
            err_header.append(f"# {name}: {code}")
            errors.append(f"=== {name}\n{message(e)}\n")
    for name, f in ERRORS_EXTRA.items():
        try:
            f()
            raise SystemExit(f"{name} raised nothing")
        except Exception as e:  # noqa: BLE001
            errors.append(f"=== {name}\n{message(e)}\n")
    texts = [f"=== {name}\n{f()}\n" for name, f in TEXTS.items()]
    with open(os.path.join(OUT, "types.txt"), "w") as f:
        f.write("".join(types))
    with open(os.path.join(OUT, "errors.txt"), "w") as f:
        f.write("\n".join(err_header) + "\n" + "".join(errors))
    with open(os.path.join(OUT, "texts.txt"), "w") as f:
        f.write("".join(texts))


if __name__ == "__main__":
    main()
