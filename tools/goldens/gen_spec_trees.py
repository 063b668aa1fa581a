"""Records what JAX does with in_specs and out_specs written as trees (prefixes of the
arguments' and results' structure): the jaxpr of a shard_map whose results nest, and the
messages for specs whose structure does not match the value's.

Writes tests/goldens/spec_trees/:
  jaxpr_nested_out_specs.txt   make_jaxpr of a body returning (x, (psum_y, {'j': ..., 'k': ...}))
  errors.txt                   "=== <case>" followed by "<ExceptionType>: <message>"
Run: python3 tools/goldens/gen_spec_trees.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_pprint_use_color", False)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "spec_trees")

# Auto axes, as the tutorials' meshes (jax.make_mesh gives Explicit axes since 0.9).
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("x", "y"))
a = jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)


def nested(x):
    return x, (lax.psum(x, "y"), {"k": lax.psum(x, ("x", "y")), "j": x * 2})


def identity(x):
    return x


def pair(x):
    return x, x


def add3(x, yz):
    y, z = yz
    return x + y + z


def sm(f, in_specs, out_specs):
    return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)


ERROR_CASES = [
    ("out_specs_inner_tuple_too_short",
     lambda: sm(nested, P("x", "y"), (P("x", "y"), (P("x"),)))(a)),
    ("out_specs_inner_tuple_too_long",
     lambda: sm(nested, P("x", "y"), (P("x", "y"), (P("x"), P(), P())))(a)),
    ("out_specs_tuple_for_one_array", lambda: sm(identity, P("x"), (P("x"),))(a)),
    ("out_specs_tuple_for_inner_array", lambda: sm(pair, P("x"), (P("x"), (P(), P())))(a)),
    ("in_specs_tuple_for_one_array", lambda: sm(identity, ((P("x"),),), P("x"))(a)),
    ("in_specs_too_many", lambda: sm(add3, (P("x"), P(), P()), P("x"))(a, (a, a))),
    ("in_specs_inner_tuple_too_short", lambda: sm(add3, (P("x"), (P(),)), P("x"))(a, (a, a))),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    f = sm(nested, P("x", "y"), (P("x", "y"), (P("x"), {"k": P(), "j": P("x", "y")})))
    with open(os.path.join(OUT, "jaxpr_nested_out_specs.txt"), "w") as out:
        out.write(str(jax.make_jaxpr(f)(a)) + "\n")
    lines = []
    for name, fn in ERROR_CASES:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- the message is what is recorded
            lines += ["=== " + name, f"{type(e).__name__}: {e}"]
        else:
            raise SystemExit(f"{name}: JAX raised nothing")
    with open(os.path.join(OUT, "errors.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
