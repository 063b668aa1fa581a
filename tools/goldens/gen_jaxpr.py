"""Records JAX's jaxpr text (str(jax.make_jaxpr(f)(*args))) for spmd's make_jaxpr printer tests:
elementwise math with literals and weak types, broadcasting, reductions, dot, shape ops, nested
jit, grad, vmap, jvp and control flow (cond, switch, while_loop, fori_loop, scan).

Writes tests/goldens/jaxpr/<case>.txt, each the exact text plus one trailing newline, and
tests/goldens/jaxpr/MANIFEST.md listing every case's Python source and argument types.
tests/transforms/jaxpr_text_test.cpp holds the same case names with the functions in C++.
Arguments are zeros of the listed types ("weak f32[]" is the Python float 1.0); only the types
matter to tracing. All cases run with x64 off except those named x64_*.
Run: python3 tools/goldens/gen_jaxpr.py   (needs jax; the tests do not)
"""
import inspect
import os
import re

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_enable_x64", False)
# Colour codes would end up in the text when stdout is a terminal.
jax.config.update("jax_pprint_use_color", False)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "jaxpr")
DTYPES = {"f32": jnp.float32, "f64": jnp.float64, "i32": jnp.int32, "i64": jnp.int64,
          "bool": jnp.bool_}
CASES = []  # (name, source, args spec)


# Helpers that case sources call by name; MANIFEST.md prints their source too.
def g(x):
    return jnp.sin(x) * 2.0


def mlp_loss(params, x, y):
    w1, b1, w2, b2 = params
    h = jnp.maximum(jnp.dot(x, w1) + b1, 0.0)
    out = jnp.dot(h, w2) + b2
    return jnp.mean((out - y) ** 2)


def sin_chain(v):
    for _ in range(11):
        v = jnp.sin(v)
    return v


@jax.custom_jvp
def sin_scaled(x, y):
    return jnp.sin(x) * y


@sin_scaled.defjvp
def sin_scaled_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return sin_scaled(x, y), jnp.cos(x) * tx * y + jnp.sin(x) * ty


CONST = np.arange(3.0, dtype=np.float32)
HELPERS = [g, mlp_loss, sin_chain, sin_scaled, sin_scaled_jvp]
NAMESPACE = {"jax": jax, "jnp": jnp, "lax": lax, "np": np, "CONST": CONST,
             **{h.__name__: h for h in HELPERS}}


def case(name, source, *specs):
    """`source` is a Python expression evaluating to the function; `specs` its argument types
    ("f32[2,3]", "weak f32[]", or tuples of them for a pytree argument)."""
    CASES.append((name, source, specs))


def make_arg(spec):
    if isinstance(spec, tuple):
        return tuple(make_arg(s) for s in spec)
    if spec == "weak f32[]":
        return 1.0
    m = re.fullmatch(r"(\w+)\[([\d,]*)\]", spec)
    shape = tuple(int(d) for d in m.group(2).split(",") if d)
    return jnp.zeros(shape, DTYPES[m.group(1)])


def spec_text(spec):
    if isinstance(spec, tuple):
        return "(" + ", ".join(spec_text(s) for s in spec) + ")"
    return spec


def record(name, source, specs):
    fn = eval(source, NAMESPACE)
    with jax.enable_x64(name.startswith("x64_")):
        text = str(jax.make_jaxpr(fn)(*[make_arg(s) for s in specs]))
    with open(os.path.join(OUT, name + ".txt"), "w") as f:
        f.write(text + "\n")


# The Pmap cookbook's first function, plain and vmapped.
case("cookbook_tanh_dot", "lambda x, y: jnp.tanh(jnp.dot(x, y))", "f32[2,3]", "f32[3,4]")
case("cookbook_vmap_tanh_dot", "jax.vmap(lambda x, y: jnp.tanh(jnp.dot(x, y)))",
     "f32[8,2,3]", "f32[8,3,4]")

# Elementwise chains: Python scalars become literals.
case("elementwise_sin_cos_chain", "lambda x: jnp.sin(x) * 2 + jnp.cos(x) - 1.5", "f32[3]")
case("elementwise_exp_log", "lambda x: jnp.log(jnp.exp(x) + 1.0) * 0.5", "f32[2,3]")
case("elementwise_two_inputs", "lambda x, y: (x * y + x) / (y - 3.0)", "f32[3]", "f32[3]")
case("literal_inexact_float", "lambda x: x * 0.1", "f32[3]")
case("literal_float_formats", "lambda x: (x * -2.5 + 1e20) * 1e-5 + jnp.inf - jnp.nan", "f32[3]")
case("literal_float_exponent_cutoffs",
     "lambda x: (x * 1e16 + 1e15) * 123456789.0 + 5e-324", "f32[3]")
case("literal_int", "lambda n: n * 100000 - 7", "i32[3]")

# Weak types: Python scalars take the array's dtype; an int array divided gives floats.
case("weak_mul_int_literal", "lambda x: x * 2", "f32[3]")
case("weak_add_float_literal", "lambda x: x + 1.0", "f32[3]")
case("weak_int_array_div", "lambda n: n / 2", "i32[3]")
case("weak_int_array_mul", "lambda n: n * 3", "i32[3]")
case("weak_scalar_arg", "lambda s: s * 2", "weak f32[]")
case("weak_scalar_arg_times_array", "lambda s, x: x * s", "weak f32[]", "f32[3]")

# where / maximum: two spellings of relu.
case("where_relu", "lambda x: jnp.where(x > 0, x, 0.0)", "f32[3]")
case("maximum_relu", "lambda x: jnp.maximum(x, 0.0)", "f32[3]")
case("where_scalar_int_condition", "lambda c, x: jnp.where(c, x, 0.0)", "i32[]", "f32[3]")

# jnp.power without a concrete exponent: binary exponentiation for integers and bools, the pow
# primitive unpromoted for a floating base with integer exponents.
case("power_int_int", "lambda n, e: jnp.power(n, e)", "i32[3]", "i32[3]")
case("power_bool_bool", "lambda b, c: jnp.power(b, c)", "bool[3]", "bool[3]")
case("power_float_int", "lambda x, e: jnp.power(x, e)", "f32[3]", "i32[3]")

# custom_jvp: jax.nn.relu is one (a jit call inside, its own jvp), and a user's function.
case("nn_relu", "jax.nn.relu", "f32[3]")
case("vmap_nn_relu", "jax.vmap(jax.nn.relu)", "f32[2,3]")
case("jvp_nn_relu", "lambda x, t: jax.jvp(jax.nn.relu, (x,), (t,))", "f32[3]", "f32[3]")
case("custom_jvp_user", "sin_scaled", "f32[3]", "weak f32[]")
case("jvp_custom_jvp_user", "lambda x, t: jax.jvp(lambda v: sin_scaled(v, 2.0), (x,), (t,))",
     "f32[3]", "f32[3]")

# Broadcasting.
case("broadcast_row", "lambda x, b: x + b", "f32[2,3]", "f32[3]")
case("broadcast_outer", "lambda a, b: a * b", "f32[2,1]", "f32[1,3]")
case("broadcast_scalar_array", "lambda x, s: x - s", "f32[2,3]", "f32[]")

# Reductions.
case("reduce_sum_all", "lambda x: jnp.sum(x)", "f32[2,3]")
case("reduce_sum_axis_keepdims", "lambda x: jnp.sum(x, axis=1, keepdims=True)", "f32[2,3]")
case("reduce_mean_all", "lambda x: jnp.mean(x)", "f32[2,3]")
case("reduce_mean_axis0", "lambda x: jnp.mean(x, axis=0)", "f32[2,3]")
case("reduce_max_keepdims", "lambda x: jnp.max(x, axis=-1, keepdims=True)", "f32[2,3]")
case("argmax_axis1", "lambda x: jnp.argmax(x, axis=1)", "f32[2,3]")

# dot / matmul.
case("dot_vector_matrix", "lambda v, m: jnp.dot(v, m)", "f32[3]", "f32[3,4]")
case("matmul_batched", "lambda a, b: jnp.matmul(a, b)", "f32[5,2,3]", "f32[5,3,4]")

# Shape manipulation and creation inside a function.
case("reshape_transpose", "lambda x: x.reshape(3, 2).T", "f32[2,3]")
case("transpose_T", "lambda x: x.T", "f32[2,3]")
case("concatenate_axis0", "lambda x, y: jnp.concatenate([x, y], axis=0)", "f32[2,3]",
     "f32[1,3]")
case("slice_rows", "lambda x: x[1:3]", "f32[4,3]")
case("zeros_ones_inside", "lambda x: x * jnp.ones((2, 3)) + jnp.zeros((2, 3))", "f32[2,3]")
case("arange_inside", "lambda x: x + jnp.arange(3.0)", "f32[3]")
case("closure_constant", "lambda x: x + CONST", "f32[3]")

# jit inside a traced function prints as a call with its sub-jaxpr; used twice it is hoisted.
case("nested_jit", "lambda x: jax.jit(g)(x) + 1.0", "f32[3]")
case("nested_jit_twice", "lambda x: jax.jit(g)(jax.jit(g)(x))", "f32[3]")
# Only the top-level jaxpr names unused results "_"; inside a call they get fresh names.
case("nested_jit_dead_code_names", "lambda x: jax.jit(jax.grad(g))(x)", "f32[]")

# grad.
case("grad_sin", "jax.grad(jnp.sin)", "f32[]")
case("grad_square", "jax.grad(lambda x: x * x)", "f32[]")
case("grad_sum_tanh", "jax.grad(lambda x: jnp.sum(jnp.tanh(x)))", "f32[3]")
case("grad_mlp_loss", "jax.grad(mlp_loss)", ("f32[3,4]", "f32[4]", "f32[4,2]", "f32[2]"),
     "f32[5,3]", "f32[5,2]")
case("grad_grad_sin", "jax.grad(jax.grad(jnp.sin))", "f32[]")
case("value_and_grad_sum_sq", "jax.value_and_grad(lambda x: jnp.sum(x ** 2))", "f32[3]")

# vmap.
case("vmap_elementwise", "jax.vmap(lambda x: jnp.sin(x) * 2.0)", "f32[4,3]")
case("vmap_sum_axis", "jax.vmap(lambda x: jnp.sum(x, axis=0))", "f32[4,2,3]")
case("vmap_dot_unbatched_arg", "jax.vmap(jnp.dot, in_axes=(0, None))", "f32[4,3]", "f32[3,2]")
case("vmap_grad", "jax.vmap(jax.grad(lambda x: jnp.sin(x) * x))", "f32[4]")
case("grad_of_vmap",
     "jax.grad(lambda w, xs: jnp.sum(jax.vmap(lambda r: jnp.tanh(jnp.dot(r, w)))(xs)))",
     "f32[3]", "f32[4,3]")
case("vmap_in_axes_1", "jax.vmap(lambda v: jnp.sum(v * v), in_axes=1)", "f32[3,4]")
case("vmap_out_axes_1", "jax.vmap(lambda v: v * 2.0 + 1.0, out_axes=1)", "f32[4,3]")

# Control flow.
case("cond_two_operands",
     "lambda p, x, y: lax.cond(p, lambda a, b: a + b, lambda a, b: a * b, x, y)",
     "bool[]", "f32[3]", "f32[3]")
case("cond_branch_mixed_layout", "lambda p, x: lax.cond(p, jax.grad(jnp.sin), jnp.cos, x)",
     "bool[]", "f32[]")
case("cond_computed_pred", "lambda x: lax.cond(jnp.sum(x) > 0, jnp.sin, jnp.cos, x)", "f32[3]")
case("switch_three_branches",
     "lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda v: v * 2.0], x)", "i32[]", "f32[3]")
case("while_loop_counter",
     "lambda x: lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))",
     "f32[3]")
case("fori_loop_static", "lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2.0 + i, x)", "f32[3]")
case("scan_carry_and_stack",
     "lambda c0, xs: lax.scan(lambda c, x: (c + x, jnp.sin(c)), c0, xs)", "f32[3]", "f32[5,3]")
# lax.scan moves a carry the body returns unchanged to its consts and returns an xs the body
# stacks unchanged without scanning it.
case("scan_forwarded",
     "lambda a, b, xs: lax.scan(lambda c, x: ((c[0] + x, c[1]), (x, c[1] * x)), (a, b), xs)",
     "f32[3]", "f32[3]", "f32[5,3]")
case("grad_scan",
     "jax.grad(lambda c0, xs: jnp.sum(lax.scan(lambda c, x: (jnp.sin(c) * x, None), c0, xs)[0]))",
     "f32[3]", "f32[5,3]")
case("vmap_cond", "jax.vmap(lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x))", "bool[4]",
     "f32[4,3]")
# grad of cond: each branch of the primal cond fills every residual slot with an empty2
# placeholder, then puts its own residuals in their slots (the placeholders they replace stay).
case("grad_cond_residual_counts",
     "jax.grad(lambda x: jnp.sum(lax.cond(True, lambda v: jnp.sin(v) * jnp.cos(v), "
     "lambda v: v * 2.0, x)))", "f32[3]")
case("grad_switch_three_branches",
     "jax.grad(lambda x: jnp.sum(lax.switch(1, [jnp.sin, jnp.cos, lambda v: jnp.exp(v) * v], x)))",
     "f32[3]")
case("grad_cond_scalar_residual",
     "jax.grad(lambda s: lax.cond(s > 0, jnp.sin, lambda v: v * v, s))", "f32[]")
case("grad_cond_operand_in_both_branches",
     "jax.grad(lambda x, y: jnp.sum(lax.cond(True, lambda a, b: a * b, "
     "lambda a, b: jnp.sin(a) + b, x, y)))", "f32[3]", "f32[3]")
case("grad_cond_residual_types",
     "jax.grad(lambda xs: jnp.sum(lax.cond(True, lambda a, b: jnp.sin(a) * b, "
     "lambda a, b: a * jnp.cos(b), *xs)))", ("f32[3]", "f32[]"))
case("grad_cond_linear_branches",
     "jax.grad(lambda x: jnp.sum(lax.cond(True, lambda v: v * 2.0, lambda v: v + 1.0, x)))",
     "f32[3]")
case("jit_grad_cond",
     "jax.jit(jax.grad(lambda x: jnp.sum(lax.cond(True, jnp.sin, jnp.cos, x))))", "f32[3]")

# jvp.
case("jvp_sin", "lambda x, t: jax.jvp(jnp.sin, (x,), (t,))", "f32[3]", "f32[3]")
case("jvp_two_inputs",
     "lambda x, y, tx, ty: jax.jvp(lambda a, b: a * jnp.sin(b), (x, y), (tx, ty))",
     "f32[3]", "f32[3]", "f32[3]", "f32[3]")

# Line breaking at 80 columns: a jaxpr fits on one line when all of it (" }" included) does;
# a param list "[...]" is measured without the operands after it; binder lists wrap like words.
case("two_eqns_one_line", "lambda x: jnp.cos(jnp.sin(x))", "f32[]")
case("line_fits_at_80", "lambda x: x * 1.3", "f32[300]")
case("line_breaks_at_81", "lambda x: x * 0.1", "f32[3,4]")
case("params_fit_line_past_80", "lambda x: x[10:19]", "f32[20,3]")
case("params_break", "lambda x: x[10:110]", "f32[200,3]")
case("many_args_wrap",
     "lambda a, b, c, d, e, f, g, h, i, j, k, l: a + b + c + d + e + f + g + h + i + j + k + l",
     *["f32[2,3]"] * 12)
case("many_outputs_wrap", "lambda x: tuple(x + float(i) for i in range(30))", "f32[2]")
# A sub-jaxpr of more than 10 equations is hoisted to the top as "let jaxpr = ... in".
case("cond_long_branch_hoisted", "lambda p, x: lax.cond(p, sin_chain, jnp.cos, x)", "bool[]",
     "f32[3]")
# Degenerate shapes of the skeleton: no arguments, no equations, no outputs, a literal output.
case("no_args", "lambda: jnp.ones(3)")
case("no_eqns_identity", "lambda x: x", "weak f32[]")
case("no_outputs", "lambda x: ()", "weak f32[]")
case("literal_output", "lambda x: (x, 2.0)", "weak f32[]")
case("bool_literal", "lambda b: jnp.logical_or(b, True)", "bool[3]")

# x64: 64-bit types and literals.
case("x64_mul_add", "lambda x, n: x * 2 + n", "f64[3]", "i64[3]")


def write_manifest():
    lines = ["# jaxpr text goldens", "",
             "Written by tools/goldens/gen_jaxpr.py with JAX " + jax.__version__ +
             " (CPU, x64 off except x64_* cases). Each `<name>.txt` is",
             "`str(jax.make_jaxpr(f)(*args))` plus a newline; arguments are zeros of the listed "
             "types (`weak f32[]` is the Python float `1.0`).", "",
             "Helpers the sources call:", "", "```python"]
    for h in HELPERS:
        lines += inspect.getsource(h).rstrip("\n").split("\n") + [""]
    lines += ["CONST = np.arange(3.0, dtype=np.float32)", "```", ""]
    for name, source, specs in CASES:
        args = ", ".join(spec_text(s) for s in specs)
        lines.append(f"- `{name}` ({args}): `{source}`")
    with open(os.path.join(OUT, "MANIFEST.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case name"
    for c in CASES:
        record(*c)
    write_manifest()
    print(f"wrote {len(CASES)} jaxpr goldens to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
