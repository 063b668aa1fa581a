"""Records where JAX 0.10.2 puts the results of eager slices of committed arrays, for
tests/sharding/eager_slice_test.cpp, on 8 virtual CPU devices. An eager `lax.slice` without
strides runs as a dynamic_slice with runtime start indices (lax's _slice_impl), which leaves
the sliced dims unsplit; with strides it runs the slice primitive, whose split follows jit's;
`x[i]` of an array on several devices is a dynamic_slice too (jnp's indexing), and under jit
every slice keeps its operand's split.

The names: m = jax.make_mesh((4, 2), ('a', 'b')) with Auto axes, e the same with Explicit axes,
X = jnp.arange(256.0).reshape(16, 16), put(mesh, *spec) = jax.device_put(X, NamedSharding(mesh,
P(*spec))).

Writes tests/goldens/eager_slice/:
  types.txt   "=== <case>" then the result's jax.typeof
  specs.txt   "=== <case>" then the result's spec without trailing Nones ("P('a',)"),
              "single device" for a SingleDeviceSharding, or "uncommitted"
  values.npz  "<case>": the result's values
  errors.txt  "=== <case>" then "<ExceptionType>: <message>" (JAX's trailing "This error occurs
              at source: ..." note is cut)
Run: /work/jaxenv/bin/python tools/goldens/gen_eager_slice.py   (needs jax 0.10.2; the tests do
not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

from gen_explicit2 import message  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "eager_slice")
m = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
e = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
X = jnp.arange(256.0, dtype=jnp.float32).reshape(16, 16)


def put(mesh, *spec):
    return jax.device_put(X, NamedSharding(mesh, P(*spec)))


def rows(x):
    return lax.slice(x, (2, 0), (6, 16))


CASES = {
    # lax.slice without strides: a dynamic_slice.
    "rows_of_row_split": lambda: rows(put(m, "a")),
    "rows_of_column_split": lambda: rows(put(m, None, "a")),
    "rows_of_both_split": lambda: rows(put(m, "a", "b")),
    "block_of_both_split": lambda: lax.slice(put(m, "a", "b"), (0, 8), (8, 16)),
    "uneven_rows": lambda: lax.slice(put(m, "a"), (1, 0), (15, 16)),
    "whole": lambda: lax.slice(put(m, "a", "b"), (0, 0), (16, 16)),
    "columns_of_tuple_split": lambda: lax.slice(put(m, None, ("a", "b")), (0, 3), (16, 11)),
    "rows_replicated": lambda: rows(put(m)),
    "rows_single_device": lambda: rows(jax.device_put(X, SingleDeviceSharding(jax.devices()[3]))),
    "rows_uncommitted": lambda: rows(X),
    # With strides, even of ones: the slice primitive, laid out as under jit.
    "rows_unit_strides": lambda: lax.slice(put(m, "a"), (4, 0), (12, 16), (1, 1)),
    "rows_strided": lambda: lax.slice(put(m, "a"), (0, 0), (16, 16), (2, 1)),
    "slice_in_dim": lambda: lax.slice_in_dim(put(m, "a"), 4, 12),
    "index_in_dim": lambda: lax.index_in_dim(put(m, None, "a"), 5, keepdims=False),
    # x[i] on several devices: jnp's dynamic_slice path.
    "getitem_row_split": lambda: put(m, "a")[3],
    "getitem_column_split": lambda: put(m, None, "a")[3],
    "getitem_negative": lambda: put(m, "b", "a")[-2],
    "getitem_single_device": lambda: jax.device_put(X, jax.devices()[2])[3],
    # Under jit the split stays.
    "jit_rows_of_row_split": lambda: jax.jit(rows)(put(m, "a")),
    # Explicit axes: the result's type follows dynamic_slice's rule.
    "explicit_rows_of_column_split": lambda: rows(put(e, None, "a")),
    "explicit_rows_of_row_split": lambda: rows(put(e, "a")),
    "explicit_whole": lambda: lax.slice(put(e, "a", "b"), (0, 0), (16, 16)),
    # Errors: an eager slice without strides raises dynamic_slice's (whose message spells the
    # output shape with NumPy integers, np.int64(14)), a strided one the slice's.
    "explicit_uneven_rows": lambda: lax.slice(put(e, "a"), (1, 0), (15, 16)),
    "explicit_uneven_rows_strided": lambda: lax.slice(put(e, "a"), (1, 0), (15, 16), (1, 1)),
    "explicit_uneven_tuple": lambda: lax.slice(put(e, None, ("a", "b")), (0, 3), (16, 11)),
}


def spec_of(v):
    """The spec without trailing Nones (the same sharding; spmd's specs leave them out)."""
    if not v.committed:
        return "uncommitted"
    if isinstance(v.sharding, SingleDeviceSharding):
        return "single device"
    entries = list(v.sharding.spec)
    while entries and entries[-1] is None:
        entries.pop()
    return str(P(*entries))


def main():
    os.makedirs(OUT, exist_ok=True)
    types, specs, values, errors = [], [], {}, []
    for name, f in CASES.items():
        try:
            v = f()
        except Exception as err:  # noqa: BLE001
            errors.append(f"=== {name}\n{message(err)}\n")
            continue
        types.append(f"=== {name}\n{jax.typeof(v)}\n")
        specs.append(f"=== {name}\n{spec_of(v)}\n")
        values[name] = np.asarray(v)
    for file, blocks in [("types.txt", types), ("specs.txt", specs), ("errors.txt", errors)]:
        with open(os.path.join(OUT, file), "w") as out:
            out.write("".join(blocks))
    np.savez(os.path.join(OUT, "values.npz"), **values)


if __name__ == "__main__":
    main()
