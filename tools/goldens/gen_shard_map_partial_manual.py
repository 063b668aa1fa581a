"""Records JAX 0.10.2's vmapped shard_map on an all-Explicit mesh and the types of values a
shard_map body makes, for tests/transforms/shard_map_partial_manual_test.cpp.

vmap of a shard_map whose batch dim is split over Explicit axis 'a' (under jax.set_mesh): the
shard_map is manual over 'b' only (newly_manual_axes=frozenset({'b'})), its body typed with the
batch dim whole and split over 'a' (f32[8@a,4]{V:b}); eagerly and under jit. Each case builds its
shard_map afresh (JAX caches a traced body by function, so a shard_map traced once inside a vmap
with its batch split prints that trace again for an unsplit batch). With the batch dim unsplit
the shard_map is manual over both axes; with spmd_axis_name='a' and the batch split over 'a' the
program is the same as without it. (With spmd_axis_name='a' over an unsplit batch, make_jaxpr
gives a program manual over both axes splitting the batch over 'a' in its specs, and running it
raises "in_specs passed to shard_map: P('a', 'b') does not match the specs of the input": not
recorded.)

Values the body makes (jnp.zeros, jnp.full, jnp.arange, jax.random.normal, a sum with a
closed-over array) are on the body's manual mesh, eagerly and under jit; arrays closed over keep
the empty mesh. Their values are recorded too ("made_explicit.normal", ...). vmap of a shard_map
whose body multiplies by an arange it makes ("split_made") broadcasts that value along the batch
dim.
A grad through a reshape of such a value inside a body prints the reshape's transpose with the
manual mesh in its sharding. make_jaxpr(grad) of an array committed over an Auto mesh reshards
grad's seed (`reshard 1.0:f32[]`); of an uncommitted one it does not.

Writes, under tests/goldens/shard_map_partial_manual/:
  cases.txt    "=== <case>" blocks: a jaxpr, a result's jax.typeof, or "<name> <jax.typeof>"
               "<repr of its sharding>" line pairs recorded inside a body
  values.npz   the results, by case name
Run: python3 tools/goldens/gen_shard_map_partial_manual.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from golden_blocks import write_blocks  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

jax.config.update("jax_pprint_use_color", False)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "shard_map_partial_manual")
E = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Explicit,) * 2)
auto = jax.make_mesh((8,), ("a",), axis_types=(AxisType.Auto,))
v = np.arange(64.0, dtype=np.float32).reshape(8, 8)
w = np.arange(4.0, dtype=np.float32) / 4.0


def put(spec):
    return jax.device_put(v, NamedSharding(E, spec))


def affine(t):
    return lax.add(lax.mul(t, 2.0), 1.0)


def scaled(t, u):
    """A batched block times an unbatched one (broadcast along the batch dim)."""
    return lax.mul(t, u)


def times_made(t):
    """A block times a value the body makes (broadcast along the batch dim)."""
    return lax.mul(t, jnp.arange(4.0))


def row_psum(t):
    return lax.psum(lax.mul(t, t), "b")


def smap(body, in_specs, out_specs):
    return jax.shard_map(body, mesh=E, in_specs=in_specs, out_specs=out_specs)


# name -> (function made afresh, arguments)
VMAP_CASES = {
    "split": (lambda: jax.vmap(smap(affine, P("b"), P("b"))), lambda: [put(P("a", "b"))]),
    "split_in1": (lambda: jax.vmap(smap(affine, P("b"), P("b")), in_axes=1, out_axes=1),
                  lambda: [put(P("b", "a"))]),
    "split_psum": (lambda: jax.vmap(smap(row_psum, P("b"), P())), lambda: [put(P("a", "b"))]),
    "split_unbatched": (lambda: jax.vmap(smap(scaled, (P("b"), P("b")), P("b")),
                                         in_axes=(0, None)),
                        lambda: [put(P("a", "b")),
                                 jax.device_put(np.arange(8.0, dtype=np.float32),
                                                NamedSharding(E, P("b")))]),
    "split_all_gather": (lambda: jax.vmap(smap(lambda t: lax.all_gather(t, "b"), P("b"),
                                               P(None, "b"))),
                         lambda: [put(P("a", "b"))]),
    "split_all_gather_axis1": (lambda: jax.vmap(smap(lambda t: lax.all_gather(t, "b", axis=1),
                                                     P("b"), P("b"))),
                               lambda: [put(P("a", "b"))]),
    "unsplit": (lambda: jax.vmap(smap(affine, P("b"), P("b"))), lambda: [put(P(None, "b"))]),
    "split_spmd": (lambda: jax.vmap(smap(affine, P("b"), P("b")), spmd_axis_name="a"),
                   lambda: [put(P("a", "b"))]),
    "split_made": (lambda: jax.vmap(smap(times_made, P("b"), P("b"))), lambda: [put(P("a", "b"))]),
}

# An untiled psum_scatter (its result loses the scattered dim): JAX 0.10.2 types it but fails
# running it (an AssertionError lowering the partial-manual shard_map, eagerly and under jit), so
# only its jaxpr and type are recorded; the test computes its values by exact arithmetic.
TYPED_ONLY = {
    "split_psum_scatter": (lambda: jax.vmap(smap(lambda t: lax.psum_scatter(t.reshape(2, 2), "b"),
                                                 P("b"), P("b"))),
                           lambda: [put(P("a", "b"))]),
}

seen = []


def record(name, x):
    seen.append(f"{name} {jax.typeof(x)}\n{jax.typeof(x).sharding!r}")


closed = jnp.ones((4,), np.float32)


def making_body(t):
    record("zeros", jnp.zeros((4,)))
    record("full", jnp.full((4,), 2.0))
    record("arange", jnp.arange(4.0))
    record("normal", jax.random.normal(jax.random.key(0), (4,)))
    record("closed", closed)
    record("closed_plus_one", closed + 1)
    return t


def made_values(t):
    del t
    return (jnp.zeros((4,)), jnp.full((4,), 2.0), jnp.arange(4.0),
            jax.random.normal(jax.random.key(0), (4,)), closed + 1)


def reshaped_zeros(t):
    z = lax.add(jnp.zeros((2, 4)), t)
    return lax.reduce_sum(lax.reshape(z, (8,)), (0,))[None]


def main():
    cases, values = {}, {}
    with jax.set_mesh(E):
        for name, (make, args) in VMAP_CASES.items():
            xs = args()
            cases[name + ".jaxpr"] = str(jax.make_jaxpr(make())(*xs))
            cases[name + ".jit_jaxpr"] = str(jax.make_jaxpr(jax.jit(make()))(*xs))
            r = make()(*xs)
            cases[name + ".type"] = str(jax.typeof(r))
            values[name] = np.asarray(r)
            rj = jax.jit(make())(*xs)
            cases[name + ".jit_type"] = str(jax.typeof(rj))
            np.testing.assert_array_equal(np.asarray(rj), values[name])
        for name, (make, args) in TYPED_ONLY.items():
            jaxpr = jax.make_jaxpr(make())(*args())
            cases[name + ".jaxpr"] = str(jaxpr)
            cases[name + ".type"] = str(jaxpr.out_avals[0])
    for name, mesh, spec in [("made_explicit", E, P("a", "b")), ("made_auto", auto, P("a"))]:
        x = jax.device_put(v, NamedSharding(mesh, spec))
        seen.clear()
        jax.shard_map(making_body, mesh=mesh, in_specs=spec, out_specs=spec)(x)
        cases[name] = "\n".join(seen)
        # Traced inside jit the body's values have the same types.
        seen.clear()
        jax.jit(jax.shard_map(making_body, mesh=mesh, in_specs=spec, out_specs=spec))(x)
        cases[name + ".jit"] = "\n".join(seen)
        # Their values, returned unsplit (P()): the same on every device.
        made = jax.shard_map(made_values, mesh=mesh, in_specs=spec, out_specs=P())(x)
        for key, value in zip(["zeros", "full", "arange", "normal", "closed_plus_one"], made):
            values[f"{name}.{key}"] = np.asarray(value)
    x = put(P("a", "b"))
    f = smap(reshaped_zeros, P("a", "b"), P(("a", "b")))
    cases["grad_reshaped_zeros"] = str(jax.make_jaxpr(jax.grad(lambda t: f(t).sum()))(x))
    with jax.set_mesh(E):  # eager grad needs the mesh for its seed
        values["grad_reshaped_zeros"] = np.asarray(jax.grad(lambda t: f(t).sum())(x))
    # make_jaxpr(grad) of an array committed over an Auto mesh reshards the seed onto its mesh;
    # of an uncommitted one (under set_mesh too) it does not.
    auto2 = jax.make_mesh((4, 2), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
    g = jax.grad(lambda t: jnp.sin(t).sum())
    committed = jax.device_put(v, NamedSharding(auto2, P("a", "b")))
    cases["grad_committed_auto"] = str(jax.make_jaxpr(g)(committed))
    # The same seed inside jit and vmap (docs/ARCHITECTURE.md, Known gaps).
    cases["grad_committed_auto_jit"] = str(jax.make_jaxpr(jax.jit(g))(committed))
    cases["grad_committed_auto_vmap"] = str(jax.make_jaxpr(jax.vmap(g))(committed))
    with jax.set_mesh(auto2):
        cases["grad_uncommitted_auto_set_mesh"] = str(jax.make_jaxpr(g)(v))
    write_blocks(OUT, cases, values)


if __name__ == "__main__":
    main()
