"""Records what JAX does when an array moves between device sets or differently arranged meshes:
device_put, jax.sharding.reshard (Auto and Explicit meshes), jit's in_shardings and
out_shardings, with_sharding_constraint (under jit and eagerly) and eager binary ops, from a
source laid out on one set of devices to a target on another (disjoint, reversed, permuted,
another mesh shape, a subset, a superset, one device), for even and uneven shapes. For
tests/sharding/device_set_moves_test.cpp.

Writes tests/goldens/device_set_moves/cases.txt in the block format of gen_errors.py: a line
`=== <case>`, then either
  error <ExceptionType>: <message>
or
  sharding <repr(result.sharding)>
  devices <ids of the sharding's device assignment, comma-separated>
  replicated <1 if is_fully_replicated else 0>
  committed <1 if committed else 0>
  values <the result's values, comma-separated, as %g>
  picture
  <the text jax.debug.visualize_array_sharding prints, colour off>
Messages that name a Python source location (" at <file>:<line>:<col> (<function>)") are
written without it: spmd has no Python source to point at.
Run: python3 tools/goldens/gen_device_set_moves.py   (needs jax 0.10.2; the tests do not)
"""
import contextlib
import io
import os
import re

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "device_set_moves")

D = np.array(jax.devices())
AUTO, EXPL = AxisType.Auto, AxisType.Explicit


def mesh(ids, shape, names, kind=AUTO):
    return Mesh(D[list(ids)].reshape(shape), names, axis_types=(kind,) * len(names))


# The meshes, by the names the C++ test uses too.
MESHES = {
    "lo4": mesh(range(4), (4,), ("x",)),
    "hi4": mesh(range(4, 8), (4,), ("x",)),
    "all8": mesh(range(8), (8,), ("x",)),
    "rev8": mesh(range(7, -1, -1), (8,), ("x",)),
    "perm8": mesh([1, 0, 3, 2, 5, 4, 7, 6], (8,), ("x",)),
    "m24": mesh(range(8), (2, 4), ("a", "b")),
    "m42": mesh(range(8), (4, 2), ("a", "b")),
    "m222": mesh(range(8), (2, 2, 2), ("a", "b", "c")),
}
for name in ["lo4", "hi4", "all8", "rev8", "m24", "m42", "m222"]:
    m = MESHES[name]
    MESHES["e" + name] = Mesh(m.devices, m.axis_names, axis_types=(EXPL,) * len(m.axis_names))


def ns(mesh_name, *spec):
    return NamedSharding(MESHES[mesh_name], P(*spec))


def even():
    return jnp.arange(64.0, dtype=jnp.float32).reshape(8, 8)


def uneven():
    return jnp.arange(30.0, dtype=jnp.float32).reshape(6, 5)


def wide():
    return jnp.arange(24.0, dtype=jnp.float32).reshape(4, 6)


def on(mesh_name, *spec, value=even):
    return jax.device_put(value(), ns(mesh_name, *spec))


def on_device(i, value=even):
    return jax.device_put(value(), D[i])


wsc = jax.lax.with_sharding_constraint


# jit's messages name a function's arguments as spmd names a jitted function's: args[i].
def double(*args):
    return args[0] * 2.0


def to_hi4(*args):
    return wsc(args[0] * 2.0, ns("hi4", "x"))


def to_m42(*args):
    return wsc(args[0] * 2.0, ns("m42", "a", "b"))

# (case, zero-argument callable giving the result). The C++ test replays each by name.
CASES = [
    # device_put: every element a device lacks crosses once.
    ("dp_lo4_to_hi4", lambda: jax.device_put(on("lo4", "x"), ns("hi4", "x"))),
    ("dp_lo4_to_hi4_cols", lambda: jax.device_put(on("lo4", "x"), ns("hi4", None, "x"))),
    ("dp_lo4_split_to_hi4_replicated", lambda: jax.device_put(on("lo4", "x"), ns("hi4"))),
    ("dp_lo4_replicated_to_hi4_split", lambda: jax.device_put(on("lo4"), ns("hi4", "x"))),
    ("dp_all8_to_rev8", lambda: jax.device_put(on("all8", "x"), ns("rev8", "x"))),
    ("dp_all8_to_perm8_cols", lambda: jax.device_put(on("all8", "x"), ns("perm8", None, "x"))),
    ("dp_m24_to_m42", lambda: jax.device_put(on("m24", "a", "b"), ns("m42", "a", "b"))),
    ("dp_m42_to_m24_swapped", lambda: jax.device_put(on("m42", "a", "b"), ns("m24", "b", "a"))),
    ("dp_all8_to_m222", lambda: jax.device_put(on("all8", "x"), ns("m222", "a", ("b", "c")))),
    ("dp_m222_to_all8_cols", lambda: jax.device_put(on("m222", "c", "a"), ns("all8", None, "x"))),
    ("dp_lo4_to_all8", lambda: jax.device_put(on("lo4", "x"), ns("all8", "x"))),
    ("dp_all8_to_hi4_cols", lambda: jax.device_put(on("all8", "x"), ns("hi4", None, "x"))),
    ("dp_dev3_to_lo4", lambda: jax.device_put(on_device(3), ns("lo4", "x"))),
    ("dp_dev3_to_hi4_cols", lambda: jax.device_put(on_device(3), ns("hi4", None, "x"))),
    ("dp_lo4_to_dev3", lambda: jax.device_put(on("lo4", "x"), SingleDeviceSharding(D[3]))),
    ("dp_all8_to_device6", lambda: jax.device_put(on("all8", "x"), D[6])),
    # Shapes the target's axes do not divide: JAX places nothing unevenly.
    ("dp_uneven_lo4_to_hi4_cols",
     lambda: jax.device_put(on("lo4", "x", value=wide), ns("hi4", None, "x"))),
    ("dp_uneven_dev3_to_all8", lambda: jax.device_put(on_device(3, uneven), ns("all8", "x"))),
    ("dp_uneven_m42_to_m24",
     lambda: jax.device_put(on("m42", "a", "b", value=wide), ns("m24", "a", "b"))),
    ("dp_wide_m42_to_device5", lambda: jax.device_put(on("m42", "a", "b", value=wide), D[5])),
    # jax.sharding.reshard: a jit over the target's mesh.
    ("rs_auto_lo4_to_hi4", lambda: jax.sharding.reshard(on("lo4", "x"), ns("hi4", "x"))),
    ("rs_auto_lo4_to_hi4_replicated", lambda: jax.sharding.reshard(on("lo4", "x"), ns("hi4"))),
    ("rs_expl_lo4_to_hi4", lambda: jax.sharding.reshard(on("elo4", "x"), ns("ehi4", "x"))),
    ("rs_expl_lo4_to_hi4_replicated",
     lambda: jax.sharding.reshard(on("elo4", "x"), ns("ehi4"))),
    ("rs_expl_all8_to_rev8", lambda: jax.sharding.reshard(on("eall8", "x"), ns("erev8", "x"))),
    ("rs_expl_m24_to_m42",
     lambda: jax.sharding.reshard(on("em24", "a", "b"), ns("em42", "a", "b"))),
    ("rs_expl_all8_to_m222",
     lambda: jax.sharding.reshard(on("eall8", "x"), ns("em222", "a", ("b", "c")))),
    ("rs_expl_lo4_to_all8", lambda: jax.sharding.reshard(on("elo4", "x"), ns("eall8", "x"))),
    ("rs_expl_all8_to_lo4", lambda: jax.sharding.reshard(on("eall8", "x"), ns("elo4", "x"))),
    ("rs_expl_dev3_to_lo4", lambda: jax.sharding.reshard(on_device(3), ns("elo4", "x"))),
    ("rs_expl_dev3_to_hi4", lambda: jax.sharding.reshard(on_device(3), ns("ehi4", "x"))),
    ("rs_expl_uncommitted_to_hi4", lambda: jax.sharding.reshard(even(), ns("ehi4", "x"))),
    ("rs_expl_auto_lo4_to_hi4", lambda: jax.sharding.reshard(on("lo4", "x"), ns("ehi4", "x"))),
    ("rs_expl_uneven_m42_to_m24",
     lambda: jax.sharding.reshard(on("em42", "a", "b", value=wide), ns("em24", "a", "b"))),
    ("rs_to_dev3", lambda: jax.sharding.reshard(on("elo4", "x"), SingleDeviceSharding(D[3]))),
    # jit: a committed argument on other devices than its in_sharding moves to it.
    ("jit_in_hi4_arg_lo4", lambda: jax.jit(double, in_shardings=ns("hi4", "x"))(on("lo4", "x"))),
    ("jit_in_hi4_cols_arg_lo4",
     lambda: jax.jit(double, in_shardings=ns("hi4", None, "x"))(on("lo4", "x"))),
    ("jit_in_all8_arg_lo4", lambda: jax.jit(double, in_shardings=ns("all8", "x"))(on("lo4", "x"))),
    ("jit_in_lo4_arg_dev3", lambda: jax.jit(double, in_shardings=ns("lo4", "x"))(on_device(3))),
    ("jit_in_rev8_arg_all8",
     lambda: jax.jit(double, in_shardings=ns("rev8", "x"))(on("all8", "x"))),
    ("jit_in_m42_arg_m24", lambda: jax.jit(double, in_shardings=ns("m42", "a"))(on("m24", "a"))),
    ("jit_in_all8_arg_m24_same_blocks",
     lambda: jax.jit(double, in_shardings=ns("all8", "x"))(on("m24", ("a", "b")))),
    ("jit_out_hi4_arg_lo4", lambda: jax.jit(double, out_shardings=ns("hi4", "x"))(on("lo4", "x"))),
    ("jit_out_hi4_uncommitted", lambda: jax.jit(double, out_shardings=ns("hi4", "x"))(even())),
    ("jit_in_lo4_out_hi4",
     lambda: jax.jit(double, in_shardings=ns("lo4", "x"), out_shardings=ns("hi4", "x"))(even())),
    ("jit_out_m42_arg_m24",
     lambda: jax.jit(double, out_shardings=ns("m42", None, "a"))(on("m24", "a", "b"))),
    ("jit_wsc_hi4_arg_lo4",
     lambda: jax.jit(to_hi4)(on("lo4", "x"))),
    ("jit_wsc_hi4_uncommitted", lambda: jax.jit(to_hi4)(even())),
    ("jit_wsc_hi4_uneven_uncommitted",
     lambda: jax.jit(to_hi4)(uneven())),
    # XLA fails inside (a constraint on another mesh over the same devices); spmd computes it.
    ("jit_wsc_m42_arg_m24",
     lambda: jax.jit(to_m42)(on("m24", "a", "b"))),
    ("wsc_eager_hi4_arg_lo4", lambda: wsc(on("lo4", "x"), ns("hi4", "x"))),
    ("wsc_eager_m42_arg_m24", lambda: wsc(on("m24", "a", "b"), ns("m42", "b"))),
    ("wsc_eager_lo4_uncommitted", lambda: wsc(even(), ns("hi4", None, "x"))),
    # Eager binary ops on two device sets.
    ("add_lo4_hi4", lambda: on("lo4", "x") + on("hi4", "x")),
    ("add_dev3_lo4", lambda: on_device(3) + on("lo4", "x")),
    ("add_all8_rev8", lambda: on("all8", "x") + on("rev8", "x")),
    ("add_m24_m42", lambda: on("m24", "a", "b") + on("m42", "a", "b")),
]

SOURCE_AT = re.compile(r"( This error occurs at source: | at ) *[^ ]+:\d+:\d+ \([^)]*\)")


def picture(x):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.debug.visualize_array_sharding(x, use_color=False)
    return buf.getvalue().rstrip("\n")


def record(name, fn):
    try:
        x = fn()
        x.block_until_ready()
    except Exception as e:  # noqa: BLE001 -- recording whatever JAX raises
        return f"=== {name}\nerror {type(e).__name__}: {SOURCE_AT.sub('', str(e))}\n"
    s = x.sharding
    values = ",".join(f"{v:g}" for v in np.asarray(x).ravel())
    return (f"=== {name}\n"
            f"sharding {s!r}\n"
            f"devices {','.join(str(d.id) for d in s._device_assignment)}\n"
            f"replicated {int(s.is_fully_replicated)}\n"
            f"committed {int(x.committed)}\n"
            f"values {values}\n"
            f"picture\n{picture(x)}\n")


def main():
    assert jax.__version__ == "0.10.2", jax.__version__
    os.makedirs(OUT, exist_ok=True)
    blocks = [record(name, fn) for name, fn in CASES]
    with open(os.path.join(OUT, "cases.txt"), "w", encoding="utf-8") as f:
        f.write(f"# JAX {jax.__version__} on {jax.device_count()} CPU devices\n")
        f.write("".join(blocks))
    for block in blocks:
        head = block.split("\n")[:2]
        print(head[0][4:], "->", head[1][:200])


if __name__ == "__main__":
    main()
