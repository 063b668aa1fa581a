"""Records JAX 0.10.2's global-array constructors on 8 virtual CPU devices in one process, for
tests/runtime/global_arrays_test.cpp: jax.make_array_from_callback (the indices the callback is
called with, the shards that result), jax.make_array_from_process_local_data,
multihost_utils.process_allgather, Array.addressable_shards / addressable_data and the errors.

Every case runs on mesh = Mesh(create_device_mesh((4, 2)), ('x', 'y')) (Auto axes, as spmd's
meshes) with G = np.arange(32, dtype=int32).reshape(8, 4) unless its line says otherwise.

Writes tests/goldens/global_arrays/:
  cases.txt   "=== <case>" then lines:
                sharding <repr(x.sharding)>
                calls <index> <index> ...         (the callback's indices in call order)
                array <dtype> <shape> fully_replicated=<0|1> fully_addressable=<0|1>
                      committed=<0|1>
                shard <device id> <index> <replica id> <values, row-major>   (one per shard)
                data <i> <values>                 (addressable_data(i), some cases)
              where an index is "start:stop,start:stop" (empty for a 0-d array) and values are
              space-separated.
  errors.txt  "=== <case>" then "<ExceptionType>: <message>"
Run: XLA_FLAGS=--xla_force_host_platform_device_count=8 python3 tools/goldens/gen_global_arrays.py
(needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import mesh_utils, multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

assert jax.device_count() == 8, jax.devices()
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "global_arrays")
mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("x", "y"))
G = np.arange(32, dtype=np.int32).reshape(8, 4)
V = np.arange(8, dtype=np.float32)


def S(*spec):
    return NamedSharding(mesh, P(*spec))


def index_text(index, shape):
    return ",".join("%d:%d" % s.indices(n)[:2] for s, n in zip(index, shape))


def values_text(a):
    return " ".join(str(v) for v in np.asarray(a).ravel().tolist())


def from_callback(shape, sharding, source, calls, dtype=None):
    def cb(index):
        calls.append(index_text(index, shape))
        return source[index]
    return jax.make_array_from_callback(shape, sharding, cb, dtype)


def describe(x, calls=None, data=()):
    lines = ["sharding %s" % x.sharding]
    if calls is not None:
        lines.append("calls " + " ".join(calls))
    lines.append("array %s %s fully_replicated=%d fully_addressable=%d committed=%d" % (
        x.dtype, "x".join(map(str, x.shape)), x.is_fully_replicated, x.is_fully_addressable,
        x.committed))
    for s in x.addressable_shards:
        lines.append("shard %d %s %d %s" % (s.device.id, index_text(s.index, x.shape),
                                            s.replica_id, values_text(s.data)))
    for i in data:
        lines.append("data %d %s" % (i, values_text(x.addressable_data(i))))
    return lines


def callback_case(shape, sharding, source, data=(), dtype=None):
    def run():
        calls = []
        return describe(from_callback(shape, sharding, source, calls, dtype), calls, data)
    return run


CASES = [
    ("callback_x", callback_case((8, 4), S("x"), G, data=(0, 3, -1))),
    ("callback_x_y", callback_case((8, 4), S("x", "y"), G, data=(5,))),
    ("callback_none_y", callback_case((8, 4), S(None, "y"), G)),
    ("callback_y", callback_case((8, 4), S("y"), G, data=(1,))),
    ("callback_xy", callback_case((8, 4), S(("x", "y")), G)),
    ("callback_yx", callback_case((8, 4), S(("y", "x")), G)),
    ("callback_replicated", callback_case((8, 4), S(), G, data=(0, 6))),
    ("callback_single_device", callback_case((8, 4), SingleDeviceSharding(jax.devices()[3]), G)),
    ("callback_1d", callback_case((8,), S("x"), V)),
    ("callback_0d", callback_case((), S(), np.float32(2.5))),
    ("callback_dtype", callback_case((8,), S("y"), V, dtype=jnp.float32)),
    ("callback_scalar_int", lambda: describe(
        jax.make_array_from_callback((), S(), lambda index: 7))),
    ("local_data_x", lambda: describe(jax.make_array_from_process_local_data(S("x"), G))),
    ("local_data_xy_shape", lambda: describe(
        jax.make_array_from_process_local_data(S(("x", "y")), G, (8, 4)))),
    ("local_data_replicated", lambda: describe(
        jax.make_array_from_process_local_data(S(), V))),
    ("allgather_x", lambda: describe(
        jnp.asarray(multihost_utils.process_allgather(jax.device_put(G, S("x")))))),
    ("allgather_x_tiled", lambda: describe(
        jnp.asarray(multihost_utils.process_allgather(jax.device_put(G, S("x")), tiled=True)))),
    ("allgather_scalar_tiled", lambda: describe(
        jnp.asarray(multihost_utils.process_allgather(jnp.float32(3.5), tiled=True)))),
    ("allgather_uncommitted", lambda: describe(
        jnp.asarray(multihost_utils.process_allgather(jnp.asarray(V))))),
]


def wrong_dtype(index):
    return jnp.asarray(G[index], jnp.float32 if index[0].start else jnp.int32)


ERRORS = [
    ("callback_shape", lambda: jax.make_array_from_callback((8, 4), S("x"), lambda i: G)),
    ("callback_shape_1d", lambda: jax.make_array_from_callback((8,), S("x"), lambda i: V[:3])),
    ("callback_mixed_dtypes", lambda: jax.make_array_from_callback((8, 4), S("x"), wrong_dtype)),
    ("callback_dtype_mismatch", lambda: jax.make_array_from_callback(
        (8, 4), S("x"), lambda i: G[i], jnp.float32)),
    ("callback_indivisible", lambda: jax.make_array_from_callback(
        (6, 4), S("x"), lambda i: G[:6][i])),
    ("local_data_global_shape", lambda: jax.make_array_from_process_local_data(
        S("x"), G, (16, 4))),
    ("addressable_data_range", lambda: jax.device_put(G, S("x")).addressable_data(8)),
]


def error_text(e):
    # JAX appends the Python source line of the call; a C++ caller has none.
    return f"{type(e).__name__}: {e}".split(" This error occurs at source:")[0]


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "cases.txt"), "w") as out:
        for name, fn in CASES:
            out.write("=== %s\n%s\n" % (name, "\n".join(fn())))
    lines = []
    for name, fn in ERRORS:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 -- the message is what is recorded
            lines += ["=== " + name, error_text(e)]
        else:
            raise SystemExit(f"{name}: JAX raised nothing")
    with open(os.path.join(OUT, "errors.txt"), "w") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
