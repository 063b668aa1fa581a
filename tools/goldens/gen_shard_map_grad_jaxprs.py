"""Records JAX 0.10.2's make_jaxpr text of grad through a shard_map or a sharding constraint on
an Auto mesh, for tests/transforms/shard_map_jaxpr_test.cpp: the loss's type carries the mesh,
so grad's cotangent seed is `reshard 1.0:f32[]` (full_like onto the abstract mesh) before the
transposed shard_map. The shard_map bodies are linear (neg, psum), so the forward shard_map
keeps no residuals.

Writes tests/goldens/shard_map_grad_jaxprs/<case>.txt: str(jax.make_jaxpr(...)(x)) and a newline.
Run: /work/jaxenv/bin/python tools/goldens/gen_shard_map_grad_jaxprs.py   (needs jax 0.10.2; the
tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_pprint_use_color", False)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "shard_map_grad_jaxprs")
m = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
x = jnp.zeros((8, 8), jnp.float32)

negated = jax.shard_map(lambda v: -v, mesh=m, in_specs=P("a", None), out_specs=P("a", None))
summed = jax.shard_map(lambda v: lax.psum(v, "a"), mesh=m, in_specs=P("a", None),
                       out_specs=P())

CASES = {
    "grad_neg": jax.grad(lambda w: jnp.sum(negated(w))),
    "grad_psum": jax.grad(lambda w: jnp.sum(summed(w))),
    "value_and_grad_neg_times_two": jax.value_and_grad(lambda w: jnp.sum(negated(w) * 2.0)),
    "grad_constraint": jax.grad(lambda w: jnp.sum(
        lax.with_sharding_constraint(w, NamedSharding(m, P("a"))))),
    # The mesh leaves a jit call whose body holds the shard_map.
    "grad_jit_neg": jax.grad(lambda w: jnp.sum(jax.jit(negated)(w))),
}


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, fn in CASES.items():
        text = str(jax.make_jaxpr(fn)(x))
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write(text + "\n")
        print(f"== {name}\n{text}")


if __name__ == "__main__":
    main()
