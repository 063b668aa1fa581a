"""Records dot products of JAX 0.10.2 on CPU with a lax.DotAlgorithmPreset or lax.DotAlgorithm
as `precision` (lax.dot_general, jnp.dot, jnp.matmul, jnp.einsum), for
tests/ops/dot_algorithm_test.cpp.

Writes tests/goldens/einsum/:
  dot_algorithm_values.npz  per case "<case>|<i>" for each operand, "<case>|options" (uint8
                            bytes: "api=<dot_general|dot|matmul|einsum>;precision=<preset>;
                            pref=<dtype>;subscripts=<einsum's>", pref and subscripts optional)
                            and "<case>|out" (JAX's result). Float operands have 12 significant
                            bits: exact in float32 products, rounded by float16 and bfloat16, so
                            a preset's conversions show thousands of ulps away from float32's
  dot_algorithm_jaxprs.txt  "=== <case>" then str(jax.make_jaxpr(...))
  dot_algorithm_errors.txt  "# <case>: <code>" lines, then "=== <case>" and
                            "<ExceptionType>: <message>"
Run: python3 tools/goldens/gen_dot_algorithm.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.lax import DotAlgorithm, DotAlgorithmPreset  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "einsum")
rng = np.random.default_rng(20261126)
CPU_PRESETS = ["DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32",
               "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"]


def npdt(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def operand(shape, dt):
    if dt == "int32":
        return rng.integers(-50, 50, shape).astype(np.int32)
    # 12 significant bits, then the dtype's own rounding.
    return (rng.integers(-4095, 4096, shape) / 1024.0).astype(np.float32).astype(npdt(dt))


def run(api, precision, operands, pref=None, subscripts=None):
    kw = {"precision": precision}
    if pref:
        kw["preferred_element_type"] = npdt(pref)
    if api == "dot_general":
        return lax.dot_general(*operands, (((1,), (0,)), ((), ())), **kw)
    if api == "dot":
        return jnp.dot(*operands, **kw)
    if api == "matmul":
        return jnp.matmul(*operands, **kw)
    return jnp.einsum(subscripts, *operands, **kw)


values = {}


def record(name, api, precision, operands, pref=None, subscripts=None):
    options = f"api={api};precision={precision}"
    if pref:
        options += f";pref={pref}"
    if subscripts:
        options += f";subscripts={subscripts}"
    values[f"{name}|options"] = np.frombuffer(options.encode(), np.uint8)
    for i, x in enumerate(operands):
        values[f"{name}|{i}"] = np.asarray(x)
    values[f"{name}|out"] = np.asarray(run(api, precision, operands, pref, subscripts))


for dt in ["float32", "bfloat16", "float16", "int32"]:
    for preset in CPU_PRESETS:
        record(f"dot_general_{dt}_{preset}", "dot_general", preset,
               [operand((3, 5), dt), operand((5, 4), dt)])
for dt, preset in [("bfloat16", "BF16_BF16_F32"), ("float16", "F16_F16_F16"),
                   ("bfloat16", "F16_F16_F16"), ("float32", "BF16_BF16_F32"),
                   ("int32", "F32_F32_F32")]:
    record(f"dot_general_{dt}_{preset}_pref_f32", "dot_general", preset,
           [operand((3, 5), dt), operand((5, 4), dt)], pref="float32")
record("dot_general_int32_F16_F16_F16_pref_int8", "dot_general", "F16_F16_F16",
       [operand((2, 3), "int32") // 10, operand((3, 2), "int32") // 10], pref="int8")
record("dot_general_mixed_BF16_BF16_F32", "dot_general", "BF16_BF16_F32",
       [operand((3, 5), "bfloat16"), operand((5, 4), "float32")])
record("einsum_three_F16_F16_F16", "einsum", "F16_F16_F16",
       [operand((2, 3), "float32"), operand((3, 4), "float32"), operand((4, 2), "float32")],
       subscripts="ij,jk,kl->il")
record("einsum_batch_F64_F64_F64", "einsum", "F64_F64_F64",
       [operand((2, 3, 4), "float32"), operand((2, 4, 5), "float32")], subscripts="bij,bjk->bik")
record("matmul_batched_F16_F16_F16", "matmul", "F16_F16_F16",
       [operand((2, 3, 4), "float32"), operand((4, 3), "float32")])
record("dot_matrix_F64_F64_F64", "dot", "F64_F64_F64",
       [operand((3, 6), "float32"), operand((6, 2), "float32")])
# float32 accumulation loses the 1 that float64's keeps: exact either way.
record("cancellation_F64_F64_F64", "dot_general", "F64_F64_F64",
       [np.array([[1e8, 1.0, -1e8], [1.0, 1e8, -1e8]], np.float32), np.ones((3, 2), np.float32)])

os.makedirs(OUT, exist_ok=True)
np.savez(os.path.join(OUT, "dot_algorithm_values.npz"), **values)

# ---- jaxprs -------------------------------------------------------------------------------------
a, b, c = (jnp.asarray(operand(s, "float32")) for s in [(2, 3), (3, 4), (4, 2)])
ALGORITHM = DotAlgorithm(jnp.bfloat16, jnp.bfloat16, jnp.float32)
JAXPRS = {
    "einsum_preset_name": lambda: jax.make_jaxpr(
        lambda x, y, z: jnp.einsum("ij,jk,kl->il", x, y, z, precision="BF16_BF16_F32"))(a, b, c),
    "einsum_preset": lambda: jax.make_jaxpr(
        lambda x, y: jnp.einsum("ij,jk->ik", x, y, precision=DotAlgorithmPreset.F64_F64_F64))(a, b),
    "dot_general_algorithm": lambda: jax.make_jaxpr(
        lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())), precision=ALGORITHM))(a, b),
    "dot_general_algorithm_counts": lambda: jax.make_jaxpr(
        lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())), precision=DotAlgorithm(
            jnp.float16, jnp.float32, jnp.float64, 2, 3, 6, True)))(a, b),
    "matmul_preset": lambda: jax.make_jaxpr(
        lambda x, y: jnp.matmul(x, y, precision="F16_F16_F16"))(a, b),
    "dot_preset": lambda: jax.make_jaxpr(
        lambda x, y: jnp.dot(x, y, precision="TF32_TF32_F32"))(a, b),
    "grad_einsum_preset": lambda: jax.make_jaxpr(jax.grad(
        lambda x, y: jnp.einsum("ij,jk->ik", x, y, precision="F64_F64_F64").sum(),
        argnums=(0, 1)))(a, b),
}
with open(os.path.join(OUT, "dot_algorithm_jaxprs.txt"), "w") as f:
    f.write("# JAX 0.10.2; see gen_dot_algorithm.py\n")
    for name, make in JAXPRS.items():
        f.write(f"=== {name}\n{make()}\n")

# ---- errors -------------------------------------------------------------------------------------
a, b = jnp.ones((2, 3)), jnp.ones((3, 4))
ERRORS = {f"cpu_rejects_{p.name}": f"jnp.einsum('ij,jk->ik', a, b, precision='{p.name}')"
          for p in DotAlgorithmPreset if p.name not in CPU_PRESETS}
ERRORS.update({
    "cpu_rejects_algorithm": "lax.dot_general(a, b, (((1,), (0,)), ((), ())), "
                             "precision=DotAlgorithm(jnp.float32, jnp.float32, jnp.float32))",
    "pair_of_preset_names": "jnp.einsum('ij,jk->ik', a, b, "
                            "precision=('BF16_BF16_F32', 'BF16_BF16_F32'))",
    "pair_of_name_and_preset_name": "jnp.einsum('ij,jk->ik', a, b, "
                                    "precision=('high', 'F32_F32_F32'))",
    "pair_of_presets": "jnp.einsum('ij,jk->ik', a, b, "
                       "precision=(DotAlgorithmPreset.F32_F32_F32, DotAlgorithmPreset.F32_F32_F32))",
    "pair_of_algorithm_and_preset": "jnp.einsum('ij,jk->ik', a, b, precision=("
                                    "DotAlgorithm(jnp.float32, jnp.float32, jnp.float32), "
                                    "DotAlgorithmPreset.DEFAULT))",
    "preset_name_lowercase": "jnp.einsum('ij,jk->ik', a, b, precision='bf16_bf16_f32')",
    "matmul_bad_name": "jnp.matmul(a, b, precision='F32')",
    "dot_bad_name": "jnp.dot(a, b, precision='F32')",
})
with open(os.path.join(OUT, "dot_algorithm_errors.txt"), "w") as f:
    f.write("# JAX 0.10.2; see gen_dot_algorithm.py. a, b = jnp.ones of (2, 3), (3, 4)\n")
    for name, code in ERRORS.items():
        f.write(f"# {name}: {code}\n")
    for name, code in ERRORS.items():
        try:
            eval(code)
            raise AssertionError(f"{name} did not raise")
        except (ValueError, TypeError) as e:
            f.write(f"=== {name}\n{type(e).__name__}: {e}\n")
