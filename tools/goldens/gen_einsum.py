"""Records jnp.einsum of JAX 0.10.2 for tests/ops/einsum_test.cpp: values, jaxprs, errors, and
the shardings of einsums of sharded operands on 8 virtual CPU devices.

Writes tests/goldens/einsum/:
  values.npz   per case "<case>|subscripts" (the subscripts as uint8 bytes), "<case>|<i>" for
               each operand i, "<case>|w<i>" (a 0-d marker) when operand i is a Python scalar
               (a weakly typed value), "<case>|pref" (a 0-d array whose dtype is
               preferred_element_type) when given, and "<case>|out" (JAX's result). Operands
               hold small integers, so every result is exact whatever the order of summation
  jaxprs.txt   "=== <case>" then str(jax.make_jaxpr(...)) of the cases of one and two operands,
               of a gradient and of a vmap
  errors.txt   "# <case>: <code>" lines, then "=== <case>" and "<ExceptionType>: <message>"
  sharding.txt "=== <case>" then str(jax.typeof(result)) on the Explicit mesh m, or repr of the
               result's sharding on the Auto mesh, or a jaxpr
Run: python3 tools/goldens/gen_einsum.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "einsum")
rng = np.random.default_rng(20260301)


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def operand(shape, dt="float32"):
    """Small integers (booleans for bool) in dtype dt."""
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(-3, 4, shape).astype(npdt(dt))


# (case, subscripts, operand shapes, dtype per operand or one for all, preferred_element_type)
CASES = [
    ("matmul", "ij,jk->ik", [(2, 3), (3, 4)], "float32", None),
    ("matmul_implicit", "ij,jk", [(2, 3), (3, 4)], "float32", None),
    ("rhs_transposed", "ij,kj->ki", [(2, 3), (4, 3)], "float32", None),
    ("transposed_out", "ij,jk->ki", [(2, 3), (3, 4)], "float32", None),
    ("spaces", " i j , j k -> i k ", [(2, 3), (3, 4)], "float32", None),
    ("other_characters", "i$,$1->1i", [(2, 3), (3, 4)], "float32", None),
    ("transpose", "ij->ji", [(2, 3)], "float32", None),
    ("transpose_implicit", "ji", [(2, 3)], "float32", None),
    ("identity", "ij", [(2, 3)], "float32", None),
    ("sum_axis", "ij->j", [(2, 3)], "float32", None),
    ("sum_all", "ij->", [(2, 3)], "float32", None),
    ("sum_unordered", "kji->j", [(2, 3, 4)], "float32", None),
    ("sum_and_transpose", "ijk->ki", [(2, 3, 4)], "float32", None),
    ("diagonal", "ii->i", [(3, 3)], "float32", None),
    ("trace", "ii", [(3, 3)], "float32", None),
    ("trace_explicit", "ii->", [(3, 3)], "float32", None),
    ("diagonal_3", "iii->i", [(3, 3, 3)], "float32", None),
    ("diagonal_kept", "iji->ij", [(3, 4, 3)], "float32", None),
    ("diagonal_summed", "iij->j", [(3, 3, 4)], "float32", None),
    ("diagonal_4", "iiii->i", [(3, 3, 3, 3)], "float32", None),
    ("two_diagonals", "ijji->ij", [(3, 2, 2, 3)], "float32", None),
    ("outer", "i,j->ij", [(3,), (2,)], "float32", None),
    ("outer_implicit", "i,j", [(3,), (2,)], "float32", None),
    ("inner", "i,i->", [(4,), (4,)], "float32", None),
    ("matvec", "ij,j->i", [(2, 3), (3,)], "float32", None),
    ("frobenius", "ij,ij->", [(2, 3), (2, 3)], "float32", None),
    ("rowwise_dot", "bi,bi->b", [(4, 3), (4, 3)], "float32", None),
    ("batch", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], "float32", None),
    ("batch_out_permuted", "bij,bjk->ikb", [(2, 3, 4), (2, 4, 5)], "float32", None),
    ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (4, 5)], "float32", None),
    ("ellipsis_broadcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)], "float32", None),
    ("ellipsis_implicit", "...ij,jk", [(2, 3, 4), (4, 5)], "float32", None),
    ("ellipsis_sum", "...j->...", [(4, 3)], "float32", None),
    ("ellipsis_middle", "i...j->j...i", [(2, 3, 4, 5)], "float32", None),
    ("singleton_broadcast", "ij,ij->ij", [(3, 1), (3, 4)], "float32", None),
    ("singleton_contracted", "ij,jk->ik", [(2, 1), (3, 4)], "float32", None),
    ("unique_summed_first", "ijk,jl->il", [(2, 3, 4), (3, 5)], "float32", None),
    ("repeated_with_other", "iij,jk->ik", [(3, 3, 4), (4, 2)], "float32", None),
    ("uppercase_sorts_first", "ab,bA", [(2, 3), (3, 4)], "float32", None),
    ("scalars", ",->", [(), ()], "float32", None),
    ("scalar_only", "->", [()], "float32", None),
    ("scalar_times_matrix", ",ij->ji", [(), (2, 3)], "float32", None),
    ("mixed_ints", "ij,jk->ik", [(2, 3), (3, 4)], ["int32", "int8"], None),
    ("int_float", "ij,jk->ik", [(2, 3), (3, 4)], ["int32", "float32"], None),
    ("bools", "ij,jk->ik", [(2, 3), (3, 4)], "bool", None),
    ("bool_sum", "ij->i", [(2, 3)], "bool", None),
    ("bool_trace", "ii->", [(3, 3)], "bool", None),
    ("int8_sum", "ij->i", [(2, 3)], "int8", None),
    ("preferred_f32", "ij,jk->ik", [(2, 3), (3, 4)], "bfloat16", "float32"),
    ("preferred_sum", "ij->i", [(2, 3)], "int8", "int32"),
    ("preferred_trace", "ii->", [(3, 3)], "bfloat16", "float32"),
    ("bf16", "ij,jk->ik", [(2, 3), (3, 4)], "bfloat16", None),
    ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)], "float32", None),
    ("three_vectors", "i,ij,j->", [(3,), (3, 4), (4,)], "float32", None),
    ("three_implicit", "ij,jk,kk", [(2, 3), (3, 4), (4, 4)], "float32", None),
    ("three_batch", "bij,bjk,bkl->bli", [(2, 3, 4), (2, 4, 5), (2, 5, 3)], "float32", None),
    ("three_ellipsis", "...i,...ij,j->...", [(2, 3), (3, 4), (4,)], "float32", None),
    ("three_hadamard", "i,i,i->i", [(4,), (4,), (4,)], "float32", None),
    ("four", "ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)], "float32", None),
    ("four_outer", "a,b,c,d->dcba", [(2,), (3,), (1,), (2,)], "float32", None),
]
# Operands given as Python scalars (weakly typed), by case: operand index -> value.
WEAK = {"weak_scalar": ("ij,->ij", [(2, 3)], 2.0), "weak_int": ("i,->i", [(3,)], 3)}

values, jaxprs = {}, {}
for name, subs, shapes, dts, pref in CASES:
    dts = dts if isinstance(dts, list) else [dts] * len(shapes)
    ops = [operand(s, d) for s, d in zip(shapes, dts)]
    kw = {} if pref is None else {"preferred_element_type": npdt(pref)}
    values[name + "|subscripts"] = np.frombuffer(subs.encode(), np.uint8)
    for i, o in enumerate(ops):
        values[f"{name}|{i}"] = o
    if pref is not None:
        values[name + "|pref"] = np.zeros((), npdt(pref))
    values[name + "|out"] = np.asarray(jnp.einsum(subs, *ops, **kw))
    if len(ops) <= 2:
        jaxprs[name] = jax.make_jaxpr(lambda *xs, s=subs, k=kw: jnp.einsum(s, *xs, **k))(*ops)
for name, (subs, shapes, scalar) in WEAK.items():
    x = operand(shapes[0], "float32" if isinstance(scalar, float) else "int32")
    values[name + "|subscripts"] = np.frombuffer(subs.encode(), np.uint8)
    values[name + "|0"] = x
    values[name + "|1"] = np.asarray(scalar, np.float32 if isinstance(scalar, float) else np.int32)
    values[name + "|w1"] = np.zeros((), np.int32)
    result = jnp.einsum(subs, x, scalar)
    values[name + "|out"] = np.asarray(result)
    jaxprs[name] = jax.make_jaxpr(lambda a, s=subs, c=scalar: jnp.einsum(s, a, c))(x)

# grad and vmap.
A, B = operand((2, 3)), operand((3, 4))
V = operand((5, 3))
values["grad|0"], values["grad|1"] = A, B
values["grad|out"] = np.asarray(jax.grad(lambda a, b: jnp.sin(jnp.einsum("ij,jk->ik", a, b)).sum())(A, B))
jaxprs["grad"] = jax.make_jaxpr(jax.grad(lambda a, b: jnp.einsum("ij,jk->ik", a, b).sum()))(A, B)
values["grad_trace|0"] = operand((3, 3))
values["grad_trace|out"] = np.asarray(jax.grad(lambda a: jnp.einsum("ii", a))(values["grad_trace|0"]))
jaxprs["grad_trace"] = jax.make_jaxpr(jax.grad(lambda a: jnp.einsum("ii", a)))(values["grad_trace|0"])
values["vmap|0"], values["vmap|1"] = A, V
values["vmap|out"] = np.asarray(jax.vmap(lambda v: jnp.einsum("ij,j->i", A, v))(V))
jaxprs["vmap"] = jax.make_jaxpr(lambda a, vs: jax.vmap(lambda v: jnp.einsum("ij,j->i", a, v))(vs))(A, V)

os.makedirs(OUT, exist_ok=True)
np.savez(os.path.join(OUT, "values.npz"), **values)
with open(os.path.join(OUT, "jaxprs.txt"), "w") as f:
    f.write("# JAX 0.10.2; see gen_einsum.py\n")
    for name, text in jaxprs.items():
        f.write(f"=== {name}\n{text}\n")

# ---- errors -------------------------------------------------------------------------------------
a, b = jnp.ones((2, 3)), jnp.ones((4, 5))
ERRORS = {
    "too_few_operands": "jnp.einsum('ij,jk->ik', a)",
    "too_many_operands": "jnp.einsum('ij,jk->ik', a, b, a)",
    "output_not_in_inputs": "jnp.einsum('ij->ik', a)",
    "repeated_output": "jnp.einsum('ij->ii', a)",
    "size_mismatch": "jnp.einsum('ij,jk->ik', a, b)",
    "size_mismatch_in_one_operand": "jnp.einsum('ii->i', a)",
    "size_mismatch_third": "jnp.einsum('ij,jk,kl->il', a, a.T, b)",
    "wrong_rank": "jnp.einsum('ijk->i', a)",
    "wrong_rank_empty": "jnp.einsum('', a)",
    "two_arrows": "jnp.einsum('ij->i->j', a)",
    "dash_without_arrow": "jnp.einsum('ij-i', a)",
    "invalid_ellipsis": "jnp.einsum('i..j->i', a)",
    "ellipsis_too_long": "jnp.einsum('...ijk->i', a)",
}
with open(os.path.join(OUT, "errors.txt"), "w") as f:
    f.write("# JAX 0.10.2; see gen_einsum.py. a = jnp.ones((2, 3)), b = jnp.ones((4, 5))\n")
    for name, code in ERRORS.items():
        f.write(f"# {name}: {code}\n")
    for name, code in ERRORS.items():
        try:
            eval(code)
            raise AssertionError(f"{name} did not raise")
        except ValueError as e:
            f.write(f"=== {name}\n{type(e).__name__}: {str(e).splitlines()[0]}\n")

# ---- sharding -----------------------------------------------------------------------------------
E = AxisType.Explicit
m = jax.make_mesh((4, 2), ("a", "b"), axis_types=(E, E))
auto = Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b"))
X = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def S(*spec):
    return NamedSharding(m, P(*spec))


def put(v, *spec):
    return jax.device_put(v, S(*spec))


texts = {}
xa = jax.device_put(X[:8, :8], NamedSharding(auto, P("a", None)))
xb = jax.device_put(X[:8, :8], NamedSharding(auto, P(None, "b")))
texts["auto_matmul"] = repr(jnp.einsum("ij,jk->ik", xa, xb).sharding)
TYPES = {
    "explicit_matmul": lambda: jnp.einsum("ij,jk->ik", put(X, "a", None), put(X, None, "b")),
    "explicit_transposed": lambda: jnp.einsum("ij,jk->ki", put(X, "a", None), put(X, None, "b")),
    "explicit_batch": lambda: jnp.einsum("bij,bjk->bik", put(jnp.ones((4, 8, 16)), "a", None, None),
                                         put(jnp.ones((4, 16, 8)), "a", None, "b")),
    "explicit_out_sharding": lambda: jnp.einsum(
        "ij,jk->ik", put(X, None, "a"), put(X, "a", None), out_sharding=S(None, "a")),
    "explicit_out_sharding_transposed": lambda: jnp.einsum(
        "ij,jk->ki", put(X, None, "a"), put(X, "a", None), out_sharding=S(None, "a")),
    "explicit_sum_out_sharding": lambda: jnp.einsum("ij->i", put(X, "a", "b"), out_sharding=S("b")),
    "explicit_transpose_ignores_out_sharding": lambda: jnp.einsum(
        "ij->ji", put(X, "a", "b"), out_sharding=S("b", None)),
    "explicit_three": lambda: jnp.einsum("ij,jk,kl->il", put(X, "a", None), put(X, None, "b"), X),
    "explicit_three_out_sharding": lambda: jnp.einsum(
        "ij,jk,kl->il", put(X, None, "a"), put(X, "a", None), X, out_sharding=S("a", None)),
}
for name, f in TYPES.items():
    texts[name] = str(jax.typeof(f()))
try:
    jnp.einsum("ij,jk->ik", put(X, None, "a"), put(X, "a", None))
except Exception as e:  # noqa: BLE001
    texts["explicit_contract_both_error"] = str(e).splitlines()[0]
texts["jaxpr_out_sharding_transposed"] = jax.make_jaxpr(
    lambda u, v: jnp.einsum("ij,jk->ki", u, v, out_sharding=S(None, "a")))(
        put(X, None, "a"), put(X, "a", None))
with open(os.path.join(OUT, "sharding.txt"), "w") as f:
    f.write("# JAX 0.10.2 on 8 CPU devices; see gen_einsum.py\n")
    for name, text in texts.items():
        f.write(f"=== {name}\n{text}\n")
