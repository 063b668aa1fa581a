"""Records jnp.einsum of JAX 0.10.2 with three and more operands, `optimize`, `precision` and
mixed dtypes, for tests/ops/einsum_test.cpp.

Writes tests/goldens/einsum/:
  multi_values.npz  per case "<case>|subscripts" (uint8 bytes), "<case>|<i>" for each operand,
                    "<case>|pref" (a 0-d array of preferred_element_type's dtype) when given,
                    "<case>|options" (uint8 bytes, see OPTIONS) and "<case>|out" (JAX's result).
                    Operands hold small integers, so every result is exact whatever the order
  multi_jaxprs.txt  "=== <case>" then str(jax.make_jaxpr(...)) of each case and of a gradient
  multi_errors.txt  "# <case>: <code>" lines, then "=== <case>" and "<ExceptionType>: <message>"
                    (the whole message; for a KeyError its argument)
Run: python3 tools/goldens/gen_einsum_multi.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax.lax import Precision  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "einsum")
rng = np.random.default_rng(20260302)


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def operand(shape, dt="float32"):
    return rng.integers(-3, 4, shape).astype(npdt(dt))


# OPTIONS: ";"-separated "key=value" read by the test as well:
#   optimize=<strategy> | false | true | path:<i>,<j> <i>,<j> ...
#   precision=<name> | enum:<NAME> | names:<name>,<name> | enums:<NAME>,<NAME>
def keywords(options):
    kw = {}
    for item in filter(None, options.split(";")):
        key, value = item.split("=")
        if key == "optimize":
            if value in ("false", "true"):
                kw[key] = value == "true"
            elif value.startswith("path:"):
                kw[key] = [tuple(map(int, s.split(","))) for s in value[5:].split()]
            else:
                kw[key] = value
        elif value.startswith("enum:"):
            kw[key] = Precision[value[5:]]
        elif value.startswith("names:"):
            kw[key] = tuple(value[6:].split(","))
        elif value.startswith("enums:"):
            kw[key] = tuple(Precision[v] for v in value[6:].split(","))
        else:
            kw[key] = value
    return kw


# (case, subscripts, shapes, dtype per operand or one for all, preferred_element_type, options)
CASES = [
    ("chain_right_first", "ij,jk,kl->il", [(2, 3), (3, 10), (10, 4)], "float32", None, ""),
    ("chain_left_first", "ij,jk,kl->il", [(5, 2), (2, 6), (6, 3)], "float32", None, ""),
    ("chain_4", "ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)], "float32", None, ""),
    ("chain_5", "ab,bc,cd,de,ef->af", [(4, 2), (2, 5), (5, 3), (3, 6), (6, 2)], "float32", None,
     ""),
    ("chain_6", "ab,bc,cd,de,ef,fg->ag", [(2, 4), (4, 3), (3, 5), (5, 2), (2, 3), (3, 4)],
     "float32", None, ""),
    ("chain_7", "ab,bc,cd,de,ef,fg,gh->ah",
     [(3, 2), (2, 4), (4, 2), (2, 3), (3, 2), (2, 4), (4, 3)], "float32", None, ""),
    ("vector_chain", "i,ij,jk,k->", [(3,), (3, 4), (4, 5), (5,)], "float32", None, ""),
    ("star", "ai,bi,ci->abc", [(2, 5), (3, 5), (4, 5)], "float32", None, ""),
    ("star_center", "abcd,ea,fb,gc,hd->efgh", [(2, 3, 2, 3), (2, 2), (3, 3), (2, 2), (2, 3)],
     "float32", None, ""),
    ("outer_3", "i,j,k->kji", [(2,), (3,), (4,)], "float32", None, ""),
    ("hadamard_3", "i,i,i->i", [(4,), (4,), (4,)], "float32", None, ""),
    ("batch_3", "bij,bjk,bkl->bli", [(2, 3, 4), (2, 4, 5), (2, 5, 3)], "float32", None, ""),
    ("repeated_label", "iij,jk,kl->il", [(3, 3, 4), (4, 5), (5, 2)], "float32", None, ""),
    ("trace_of_product", "ij,jk,ki->", [(3, 4), (4, 5), (5, 3)], "float32", None, ""),
    ("implicit_three", "ij,jk,kk", [(2, 3), (3, 4), (4, 4)], "float32", None, ""),
    ("ellipsis_three", "...i,...ij,j->...", [(2, 3), (3, 4), (4,)], "float32", None, ""),
    ("singleton_broadcast", "ij,jk,kl->il", [(2, 1), (3, 4), (4, 5)], "float32", None, ""),
    ("scalar_operand", ",ij,jk->ik", [(), (2, 3), (3, 4)], "float32", None, ""),
    ("attention_like", "bqd,bkd,bkv->bqv", [(2, 4, 3), (2, 5, 3), (2, 5, 2)], "float32", None,
     ""),
    ("mps", "ai,ibj,jck,kd->abcd", [(2, 3), (3, 2, 4), (4, 2, 3), (3, 2)], "float32", None, ""),
    ("sum_out_early", "ijk,jl,lm->im", [(2, 3, 4), (3, 5), (5, 6)], "float32", None, ""),
    ("greedy", "ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)], "float32", None,
     "optimize=greedy"),
    ("branch_2", "ab,bc,cd,de,ef->af", [(4, 2), (2, 5), (5, 3), (3, 6), (6, 2)], "float32", None,
     "optimize=Branch-2"),
    ("unoptimized", "ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)], "float32", None,
     "optimize=false"),
    ("optimize_true", "ij,jk,kl->il", [(2, 3), (3, 10), (10, 4)], "float32", None,
     "optimize=true"),
    ("explicit_path", "ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)], "float32", None,
     "optimize=path:2,3 0,2 0,1"),
    ("path_one_operand_step", "iij,jk,kl->il", [(3, 3, 4), (4, 5), (5, 2)], "float32", None,
     "optimize=path:0 0,1 0,1"),
    ("path_two_operands", "ij,jk->ik", [(2, 3), (3, 4)], "float32", None, "optimize=path:0 0,1"),
    ("precision_name", "ij,jk->ik", [(2, 3), (3, 4)], "float32", None, "precision=highest"),
    ("precision_enum_three", "ij,jk,kl->il", [(2, 3), (3, 10), (10, 4)], "float32", None,
     "precision=enum:HIGH"),
    ("precision_names", "ij,jk->ki", [(2, 3), (3, 4)], "float32", None,
     "precision=names:bfloat16,float32"),
    ("precision_enums", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], "float32", None,
     "precision=enums:DEFAULT,HIGHEST"),
    ("precision_one_operand", "ii->i", [(3, 3)], "float32", None, "precision=not-a-precision"),
    ("int8_to_int32", "ij,jk->ik", [(2, 3), (3, 4)], "int8", "int32", ""),
    ("int8_to_int32_three", "ij,jk,kl->il", [(2, 3), (3, 10), (10, 4)], "int8", "int32", ""),
    ("int8_plain", "ij,jk->ik", [(2, 3), (3, 4)], "int8", None, ""),
    ("bf16_to_f32", "ij,jk->ik", [(2, 3), (3, 4)], "bfloat16", "float32", ""),
    ("bf16_to_f32_three", "ij,jk,kl->il", [(2, 3), (3, 10), (10, 4)], "bfloat16", "float32", ""),
    ("bf16_f32_mixed", "ij,jk,kl->il", [(2, 3), (3, 10), (10, 4)],
     ["bfloat16", "float32", "bfloat16"], None, ""),
    ("int8_sum_to_int32", "ij,jk,k->i", [(2, 3), (3, 4), (4,)], "int8", "int32", ""),
]

values, jaxprs = {}, {}
for name, subs, shapes, dts, pref, options in CASES:
    dts = dts if isinstance(dts, list) else [dts] * len(shapes)
    ops = [operand(s, d) for s, d in zip(shapes, dts)]
    kw = keywords(options)
    if pref is not None:
        kw["preferred_element_type"] = npdt(pref)
        values[name + "|pref"] = np.zeros((), npdt(pref))
    values[name + "|subscripts"] = np.frombuffer(subs.encode(), np.uint8)
    values[name + "|options"] = np.frombuffer(options.encode(), np.uint8)
    for i, o in enumerate(ops):
        values[f"{name}|{i}"] = o
    values[name + "|out"] = np.asarray(jnp.einsum(subs, *ops, **kw))
    jaxprs[name] = jax.make_jaxpr(lambda *xs, s=subs, k=kw: jnp.einsum(s, *xs, **k))(*ops)

# The gradient of a 3-operand einsum with a precision per operand: the transposed dot_generals
# keep it.
A, B, C = operand((2, 3)), operand((3, 10)), operand((10, 4))
values["grad_precision|0"], values["grad_precision|1"], values["grad_precision|2"] = A, B, C
jaxprs["grad_precision"] = jax.make_jaxpr(jax.grad(lambda a, b, c: jnp.einsum(
    "ij,jk,kl->il", a, b, c, precision=(Precision.DEFAULT, Precision.HIGHEST)).sum(),
    argnums=(0, 1, 2)))(A, B, C)

os.makedirs(OUT, exist_ok=True)
np.savez(os.path.join(OUT, "multi_values.npz"), **values)
with open(os.path.join(OUT, "multi_jaxprs.txt"), "w") as f:
    f.write("# JAX 0.10.2; see gen_einsum_multi.py\n")
    for name, text in jaxprs.items():
        f.write(f"=== {name}\n{text}\n")

# ---- errors -------------------------------------------------------------------------------------
a, b, c = jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones((4, 5))
ERRORS = {
    "path_index_out_of_range": "jnp.einsum('ij,jk,kl->il', a, b, c, optimize=[(0, 3), (0, 1)])",
    "path_too_long": "jnp.einsum('ij,jk->ik', a, b, optimize=[(0, 1), (0, 1)])",
    "path_three_at_once": "jnp.einsum('ij,jk,kl->il', a, b, c, optimize=[(0, 1, 2)])",
    "path_incomplete": "jnp.einsum('ij,jk,kl->il', a, b, c, optimize=[(0, 1)])",
    "unknown_optimize": "jnp.einsum('ij,jk,kl->il', a, b, c, optimize='bogus')",
    "none_optimize": "jnp.einsum('ij,jk,kl->il', a, b, c, optimize='none')",
    "precision_bad_name": "jnp.einsum('ij,jk->ik', a, b, precision='hihgest')",
    "precision_mixed_tuple": "jnp.einsum('ij,jk->ik', a, b, precision=(Precision.HIGH, 'high'))",
    "precision_three_names": "jnp.einsum('ij,jk->ik', a, b, precision=('high', 'high', 'high'))",
    "precision_one_name": "jnp.einsum('ij,jk->ik', a, b, precision=('high',))",
    "precision_bad_name_in_tuple": "jnp.einsum('ij,jk->ik', a, b, precision=('high', 'hi'))",
}
with open(os.path.join(OUT, "multi_errors.txt"), "w") as f:
    f.write("# JAX 0.10.2; see gen_einsum_multi.py. a, b, c = jnp.ones of (2, 3), (3, 4), (4, 5)\n")
    for name, code in ERRORS.items():
        f.write(f"# {name}: {code}\n")
    for name, code in ERRORS.items():
        try:
            eval(code)
            raise AssertionError(f"{name} did not raise")
        except (ValueError, IndexError, KeyError, NotImplementedError) as e:
            message = e.args[0] if isinstance(e, KeyError) else str(e)
            f.write(f"=== {name}\n{type(e).__name__}: {message}\n")
