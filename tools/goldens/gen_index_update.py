"""Records JAX 0.10.2's indexed reads and updates x.at[idx].get/set/add/mul/min/max, for
tests/ops/index_update_test.cpp: values for every index form and update kind, gradients, vmap,
two jaxprs, results and shardings on a 2x4 mesh of 8 virtual CPU devices, and error messages.

The names: X = jnp.arange(24.0).reshape(4, 6), Y = jnp.arange(60.0).reshape(3, 4, 5); each case
indexes one of them with the index in CASES; its update is v(shape) below, shaped as the
indexed part. Grad cases differentiate sum(sin(x.at[idx].<kind>(v))) in x and v.

Writes tests/goldens/index_update/:
  values.npz  "<case>/<kind>": the result; "<case>/v": the update; "<case>/grad_<kind>/x" and
              ".../v": the gradients; "vmap/<case>": vmap results; "sharded/<case>": results
  cases.txt   "=== jaxpr/<case>" jaxprs, "=== spec/<case>" result specs, "=== error/<case>"
              "<ExceptionType>: <message>"
Run: /work/jaxenv/bin/python tools/goldens/gen_index_update.py   (needs jax 0.10.2; the tests do
not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

from golden_blocks import write_blocks  # noqa: E402

X = jnp.arange(24.0).reshape(4, 6)
Y = jnp.arange(60.0).reshape(3, 4, 5)
A = jnp.array
S = slice

# name -> (operand, index, whether indices are unique)
CASES = {
    "int": (X, (1,), True),
    "int_neg": (X, (-1,), True),
    "int2": (X, (2, 3), True),
    "int2_neg": (X, (-1, -2), True),
    "slice": (X, (S(1, 3),), True),
    "slice_step": (X, (S(None, None, 2),), True),
    "slice_rev": (X, (S(None, None, -1),), True),
    "slice_neg_step": (X, (S(3, 0, -2),), True),
    "slice_neg_bounds": (X, (S(-3, -1),), True),
    "slice_empty": (X, (S(3, 1),), True),
    "slices2": (X, (S(1, 3), S(2, 5)), True),
    "slice_int": (X, (S(1, 3), 2), True),
    "int_slice_step": (X, (1, S(None, None, 2)), True),
    "all_int": (X, (S(None), 4), True),
    "ellipsis_int": (Y, (Ellipsis, 1), True),
    "array": (X, (A([0, 2]),), True),
    "array_neg": (X, (A([-1, 1]),), True),
    "all_array": (X, (S(None), A([0, 5, 3])), True),
    "array_2d": (X, (A([[0, 1], [2, 3]]),), True),
    "arrays2": (X, (A([0, 2, 3]), A([1, 1, 4])), True),
    "arrays_broadcast": (X, (A([[0], [2]]), A([1, 4, 5])), True),
    "array_int": (X, (A([3, 0]), 2), True),
    "y_array_slice": (Y, (S(None), A([3, 0]), S(1, 4)), True),
    "y_noncontiguous": (Y, (A([0, 2]), S(1, 3), A([4, 0])), True),
    "y_int_all_array": (Y, (1, S(None), A([0, 2])), True),
    "array_oob": (X, (A([7, 1, -9]),), True),
    "int_oob": (X, (9,), True),
    "array_dup": (X, (A([1, 3, 1]),), False),
    "y_dup_2": (Y, (A([0, 2, 0]), S(None), A([1, 1, 1])), False),
}
KINDS = ["get", "set", "add", "mul", "min", "max"]


def v_for(shape):
    n = int(np.prod(shape))
    return jnp.asarray(((np.arange(n) * 7) % 11 - 5).astype(np.float32) * 3.0).reshape(shape)


def apply(x, idx, kind, v):
    ref = x.at[idx]
    return ref.get() if kind == "get" else getattr(ref, kind)(v)


values, texts = {}, {}
for name, (x, idx, unique) in CASES.items():
    shape = x.at[idx].get().shape
    v = v_for(shape)
    values[f"{name}/v"] = np.asarray(v)
    for kind in KINDS:
        if kind == "set" and not unique:
            continue
        values[f"{name}/{kind}"] = np.asarray(apply(x, idx, kind, v))
    for kind in ["set", "add", "mul", "min", "max"]:
        if kind == "set" and not unique:
            continue
        # JAX differentiates scatter-mul in its updates only with unique indices, which array
        # indices are not known to be.
        if kind == "mul" and any(getattr(i, "ndim", 0) > 0 for i in idx):
            continue
        if x.at[idx].get().size == 0:
            continue
        gx, gv = jax.grad(lambda x, v: jnp.sum(jnp.sin(apply(x, idx, kind, v))), (0, 1))(x, v)
        values[f"{name}/grad_{kind}/x"] = np.asarray(gx)
        values[f"{name}/grad_{kind}/v"] = np.asarray(gv)
    gx = jax.grad(lambda x: jnp.sum(jnp.sin(x.at[idx].get())))(x)
    values[f"{name}/grad_get/x"] = np.asarray(gx)

# Scalar updates, integer operands, and the update as JAX casts it.
Xi = jnp.arange(24, dtype=jnp.int32).reshape(4, 6)
values["scalar/set"] = np.asarray(X.at[1].set(7.0))
values["scalar/add_int"] = np.asarray(Xi.at[1:3, 2].add(5))
values["scalar/mul_int"] = np.asarray(Xi.at[:, 1].mul(-2))
values["scalar/set_float_into_int"] = np.asarray(Xi.at[0].set(2.75))
values["scalar/min_array_dup"] = np.asarray(X.at[A([1, 1, 2])].min(-1.0))
values["clip/set"] = np.asarray(X.at[A([7, 1])].set(-1.0, mode="clip"))
values["fill/get"] = np.asarray(X.at[A([7, 1])].get(mode="fill", fill_value=-5.0))

# vmap: batched operand and update with fixed indices, and batched indices.
Xb = jnp.stack([X, X + 100, X - 100])
for name, idx in [("slice", (S(1, 3),)), ("all_array", (S(None), A([0, 5, 3]))),
                  ("arrays2", (A([0, 2, 3]), A([1, 1, 4])))]:
    shape = X.at[idx].get().shape
    vb = jnp.stack([v_for(shape), v_for(shape) * 2, v_for(shape) - 1])
    values[f"vmap/{name}/v"] = np.asarray(vb)
    for kind in ["set", "add", "max"]:
        values[f"vmap/{name}/{kind}"] = np.asarray(
            jax.vmap(lambda x, v: getattr(x.at[idx], kind)(v))(Xb, vb))
Ib = A([[0, 2], [1, 1], [3, 0]])
values["vmap/indices/add"] = np.asarray(jax.vmap(lambda i: X.at[i].add(1.0))(Ib))
values["vmap/indices/get"] = np.asarray(jax.vmap(lambda i: X.at[:, i].get())(Ib))
values["vmap/indices/grad_set"] = np.asarray(jax.vmap(
    jax.grad(lambda x, i: jnp.sum(jnp.sin(x.at[i].set(2.0)) * x)), in_axes=(None, 0))(X, A([[0, 2], [1, 3], [3, 0]])))

# Jaxprs.
x5, v2 = jnp.arange(5.0), jnp.array([10.0, 20.0])
texts["jaxpr/set_slice"] = str(jax.make_jaxpr(lambda x, v: x.at[1:3].set(v))(x5, v2))
texts["jaxpr/add_array"] = str(jax.make_jaxpr(lambda x, i: x.at[i].add(1.0))(x5, A([0, 2, 2])))

# Sharded operands on a 2x4 mesh.
mesh = jax.make_mesh((2, 4), ("a", "b"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
X8 = jnp.arange(64.0).reshape(8, 8)
sharded = {
    "set_cols": (P("a", "b"), lambda x: x.at[:, A([1, 6])].set(-1.0)),
    "add_rows": (P("a", "b"), lambda x: x.at[1:3].add(100.0)),
    "set_rows_of_row_split": (P("a"), lambda x: x.at[A([0, 5])].set(-2.0)),
    "set_cols_of_row_split": (P("a"), lambda x: x.at[:, A([0, 5])].set(-3.0)),
    "get_cols": (P("a", "b"), lambda x: x.at[:, A([1, 6, 6])].get()),
}
for name, (spec, f) in sharded.items():
    xs = jax.device_put(X8, NamedSharding(mesh, spec))
    for how, g in [("eager", f), ("jit", jax.jit(f))]:
        out = g(xs)
        values[f"sharded/{name}/{how}"] = np.asarray(out)
        texts[f"spec/{name}/{how}"] = str(out.sharding.spec)

# Errors.
def err(name, f):
    try:
        f()
        texts[f"error/{name}"] = "(no error)"
    except Exception as e:  # noqa: BLE001
        texts[f"error/{name}"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"

x5 = jnp.arange(5.0)
err("too_many", lambda: x5.at[1, 2].set(1.0))
err("update_shape", lambda: x5.at[1:3].set(jnp.ones(3)))
err("update_shape_2d", lambda: X.at[:, A([0, 1])].set(jnp.ones((2, 3))))
err("float_index", lambda: x5.at[A([1.0])].set(1.0))
err("two_ellipses", lambda: Y.at[..., 1, ...].set(1.0))

out_dir = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "index_update")
write_blocks(out_dir, texts, values)
print("wrote", len(values), "arrays and", len(texts), "texts")
