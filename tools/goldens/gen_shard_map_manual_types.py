"""Records JAX 0.10.2's types of values inside shard_map bodies, for
tests/transforms/shard_map_manual_types_test.cpp.

Inside a body a value's type is on the shard_map's mesh with the axes the body is manual over
typed Manual (vmapped-away Explicit axes keep their type): jax.typeof(v) and the repr of its
sharding, recorded while the body is traced. Also a vmapped shard_map whose batch dim is split
over an Explicit axis (manual over the other axes only): its result's type eagerly and under
jit, and its jaxpr.

Writes tests/goldens/shard_map_manual_types/cases.txt: "=== <case>" blocks of
"<jax.typeof(v)>" and "<repr(jax.typeof(v).sharding)>" lines, one pair per recorded value, or
the result's type, or a jaxpr.
Run: python3 tools/goldens/gen_shard_map_manual_types.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

jax.config.update("jax_pprint_use_color", False)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "shard_map_manual_types")
auto = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
explicit = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
mixed = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit, AxisType.Auto))
v = np.arange(64.0, dtype=np.float32).reshape(8, 8)

seen = []


def record(*xs):
    for x in xs:
        seen.append(f"{jax.typeof(x)}\n{jax.typeof(x).sharding!r}")


def auto_body(u, w):
    r = u * w
    s = jnp.sum(r)
    record(u, w, r, s)
    return r


def explicit_body(u):
    r = u * 2
    record(u, r)
    return r


def run_cases():
    cases = {}

    def case(name, fn):
        seen.clear()
        fn()
        cases[name] = "\n".join(seen)

    case("auto_body", lambda: jax.shard_map(auto_body, mesh=auto, in_specs=(P("a"), P()),
                                            out_specs=P("a"))(v, v[0]))
    case("auto_body_no_vma", lambda: jax.shard_map(
        auto_body, mesh=auto, in_specs=(P("a"), P()), out_specs=P("a"), check_vma=False)(v, v[0]))
    typed = jax.device_put(v, NamedSharding(explicit, P("a", "b")))
    case("explicit_body", lambda: jax.shard_map(
        explicit_body, mesh=explicit, in_specs=P("a", "b"), out_specs=P("a", "b"))(typed))
    case("mixed_body", lambda: jax.shard_map(
        explicit_body, mesh=mixed, in_specs=P(None, "b"), out_specs=P(None, "b"))(
            jax.device_put(v, NamedSharding(mixed, P("a")))))
    vmapped = jax.vmap(jax.shard_map(explicit_body, mesh=explicit, in_specs=P("b"),
                                     out_specs=P("b")))
    case("vmap_body", lambda: vmapped(typed))
    cases["vmap_result"] = str(jax.typeof(vmapped(typed)))
    cases["vmap_jit_result"] = str(jax.typeof(jax.jit(vmapped)(typed)))
    cases["vmap_jaxpr"] = str(jax.make_jaxpr(vmapped)(typed))
    return cases


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = run_cases()
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        for name, text in cases.items():
            f.write(f"=== {name}\n{text}\n")
    print(open(os.path.join(OUT, "cases.txt")).read())


if __name__ == "__main__":
    main()
