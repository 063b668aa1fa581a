"""Records which donated arguments JAX 0.10.2 uses, for tests/compile/donation_aliases_test.cpp:
results of any equation (a product, a transpose, a cumsum, a broadcast), several results, an
argument returned as it is, results of another shape with as many elements, an argument the
function does not read, and donations no result can take (JAX's warning), on one device and on
a mesh of 8 (Auto axes), with and without out_shardings.

Writes tests/goldens/donation/aliases.txt: "=== <case>" followed by
  "deleted <argument index> <True|False>"   for every argument, after the call
  "alias <result index> <argument index>"   the argument whose buffer holds the result, or -1
                                             (every device's block of the result is in that
                                             argument's block on the same device)
  "value <result index> <values, row-major, ','-separated>"
  "warning <the warning's text, newlines as \\n>" or "warning none"
Run: python3 tools/goldens/gen_donation_aliases.py   (needs jax 0.10.2; the tests do not)
"""
import os
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "donation", "aliases.txt")

mesh = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
split = NamedSharding(mesh, P("a"))
whole = NamedSharding(mesh, P())


# The arguments, built the same way in the test: arange values, some on the mesh.
def a44():
    return jnp.arange(16.0).reshape(4, 4)


def ones44():
    return jnp.ones((4, 4))


def a164():
    return jax.device_put(jnp.arange(64.0).reshape(16, 4), split)


def b164():
    return jax.device_put(jnp.arange(64.0).reshape(16, 4) - 32, split)


# (case, function, argument makers, donate_argnums, out_shardings or None)
CASES = [
    ("product", lambda a: a @ a, [a44], (0,), None),
    ("product_with_another", lambda a, w: a @ w, [a44, ones44], (0,), None),
    ("returned_as_is", lambda a: a, [a44], (0,), None),
    ("several_results", lambda a, b: (a.sum(0), b @ b, a + 1), [a44, ones44], (0, 1), None),
    ("transpose", lambda a: a.T, [a44], (0,), None),
    ("reduced_then_broadcast", lambda a: jnp.broadcast_to(a.sum(0), (4, 4)), [a44], (0,), None),
    ("other_shape_as_many_elements", lambda a: jnp.arange(16.0) * a.sum(), [a44], (0,), None),
    ("int_result_as_many_elements",
     lambda a: jnp.arange(16, dtype=jnp.int32).reshape(4, 4) * a.sum().astype(jnp.int32), [a44],
     (0,), None),
    ("no_result_fits", lambda a, b: (a.sum(), b * 2), [a44, lambda: jnp.ones((32,))], (0, 1),
     None),
    ("two_results_of_one_argument", lambda a: (a * 2, a * 3), [a44], (0,), None),
    ("unused_argument", lambda a, b: b * 2, [a44, ones44], (0, 1), None),
    ("mesh_product", lambda a, w: a @ w, [a164, ones44], (0,), None),
    ("mesh_cumsum", lambda a: jnp.cumsum(a, 0), [a164], (0,), None),
    ("mesh_several_results", lambda a, b: (a.T @ b, b * 2), [a164, b164], (0, 1), None),
    ("mesh_replicated_result", lambda a: jax.lax.with_sharding_constraint(a * 2, whole), [a164],
     (0,), None),
    ("mesh_out_shardings_replicated", lambda a: a * 2, [a164], (0,), whole),
    ("mesh_out_shardings_split", lambda a: a * 2, [a164], (0,), split),
    ("mesh_no_result_fits_with_out_shardings", lambda a: a.sum(), [a164], (0,), whole),
    ("mesh_other_shape_as_many_elements", lambda a: jnp.arange(8.0) * a.sum(), [a164], (0,),
     None),
]


def pointers(x):
    return [s.data.unsafe_buffer_pointer() for s in x.addressable_shards]


def run(out, name, fn, makers, donate, out_shardings):
    args = [make() for make in makers]
    before = [pointers(a) for a in args]
    kwargs = {} if out_shardings is None else {"out_shardings": out_shardings}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = jax.jit(fn, donate_argnums=donate, **kwargs)(*args)
    results = list(result) if isinstance(result, tuple) else [result]
    out.write(f"=== {name}\n")
    for i, a in enumerate(args):
        out.write(f"deleted {i} {a.is_deleted()}\n")
    for k, r in enumerate(results):
        held = [i for i, p in enumerate(before) if p == pointers(r)]
        out.write(f"alias {k} {held[0] if held else -1}\n")
    for k, r in enumerate(results):
        values = np.asarray(r).reshape(-1)
        out.write(f"value {k} " + ",".join(f"{v:g}" for v in values) + "\n")
    texts = [str(w.message).replace("\n", "\\n") for w in caught]
    out.write(f"warning {texts[0] if texts else 'none'}\n")


def main():
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as out:
        for case in CASES:
            run(out, *case)


if __name__ == "__main__":
    main()
