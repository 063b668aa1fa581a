"""Records what JAX gives for reshapes, dynamic_slices and reshards of dims split unevenly inside
jit: the values, where the results are split, and the collectives of XLA's compiled program with
the bytes each device sends in them. XLA's SPMD partitioner reshapes the padded blocks of a
compound dim and moves the rows the new blocks lack by collective-permutes (a merge of [6, 4]
split 4 ways into [24] sends 6 rows, no all-gather), gathers a dynamic_slice's operand along a
split dim (the start is a runtime value), and reshards P('a', 'b') to P('b', 'a') of uneven dims
with all-to-alls and collective-permutes. For tests/sharding/uneven2_test.cpp.

Writes tests/goldens/uneven2/:
  results.txt  "=== <case>" then one line per result leaf: "<repr(spec)>|<shard shapes>"
  values.npz   the result leaves, as "<case>/<leaf index>"
  hlo.txt      "=== <case>" then one line per collective of the compiled program,
               "<kind> <bytes each device sends>", in program order, and "bytes <total>"; the
               bytes: a collective-permute sends its operand, an all-gather or all-to-all the
               (g - 1) / g of its result that the other g - 1 members of its group hold, an
               all-reduce 2 (g - 1) / g of it (as spmd's account counts them)
Run: python3 tools/goldens/gen_uneven2.py   (needs jax 0.10.2; the tests do not)
"""
import os
import re
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# gen_halo2 sets up 8 CPU devices; its collective kinds and leaf lines are the same here.
from gen_halo2 import COLLECTIVES, leaf_line  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "uneven2")

# Auto axes, as spmd's meshes.
MESHES = {
    "m4": Mesh(np.array(jax.devices()[:4]), ("a",)),
    "m42": Mesh(mesh_utils.create_device_mesh((4, 2)), ("a", "b")),
    "m24": Mesh(mesh_utils.create_device_mesh((2, 4)), ("a", "b")),
    "m8": Mesh(np.array(jax.devices()), ("x",)),
}


def wsc(mesh, *spec):
    return lambda v: lax.with_sharding_constraint(v, NamedSharding(MESHES[mesh], P(*spec)))


def reshaped(mesh, shape, before, after):
    """u * 2 split as `before`, reshaped to `shape`, split as `after`, plus 1."""
    return lambda u: wsc(mesh, *after)(wsc(mesh, *before)(u * 2).reshape(shape) + 1)


def sliced(mesh, start, sizes, before, after=None):
    """u * 2 split as `before`, its dynamic_slice at the runtime start i, split as `after`."""
    def f(u, i):
        y = lax.dynamic_slice(wsc(mesh, *before)(u * 2), (i,) * len(sizes) if start is None else
                              tuple(i if s else 0 for s in start), sizes) - 1
        return y if after is None else wsc(mesh, *after)(y)
    return f


def moved(mesh, before, after):
    return lambda u: wsc(mesh, *after)(wsc(mesh, *before)(u * 2) + 1)


def grid(*shape):
    return jnp.arange(float(np.prod(shape)), dtype=jnp.float32).reshape(shape) - 7


AB, BA = ("a", "b"), ("b", "a")
I3 = jnp.int32(3)

# (case, function, arguments).
CASES = [
    # Reshapes merging or splitting a dim split unevenly.
    ("merge_6x4_m4", reshaped("m4", (24,), ("a",), ("a",)), (grid(6, 4),)),
    ("merge_10x8_m4", reshaped("m4", (80,), ("a",), ("a",)), (grid(10, 8),)),
    ("split_10x8_m4", reshaped("m4", (5, 16), ("a",), ("a",)), (grid(10, 8),)),
    ("split_24_m4", reshaped("m4", (6, 4), ("a",), ("a",)), (grid(24),)),
    ("merge_10x4_m8", reshaped("m8", (40,), ("x",), ("x",)), (grid(10, 4),)),
    ("merge_12x6_m8", reshaped("m8", (72,), ("x",), ("x",)), (grid(12, 6),)),
    ("merge_6x4_tuple_m42", reshaped("m42", (24,), (AB,), (AB,)), (grid(6, 4),)),
    ("merge_6x4x8_m24", reshaped("m24", (24, 8), ("b", None, "a"), ("b", "a")), (grid(6, 4, 8),)),
    ("split_10x8_m42", reshaped("m42", (5, 2, 8), ("a", "b"), ("a", None, "b")), (grid(10, 8),)),
    ("split_20x3_m42", reshaped("m42", (5, 4, 3), ("a",), ("a",)), (grid(20, 3),)),
    ("merge_6x4_unsplit_m4", reshaped("m4", (24,), ("a",), ()), (grid(6, 4),)),
    # dynamic_slice along a dim split unevenly, at a runtime start.
    ("ds_10_m4", sliced("m4", None, (6,), ("a",)), (grid(10), I3)),
    ("ds_16_to_10_m4", sliced("m4", None, (10,), ("a",), ("a",)), (grid(16), I3)),
    ("ds_10x8_cols_m42", sliced("m42", (False, True), (10, 5), ("a", "b")), (grid(10, 8), I3)),
    ("ds_14_to_12_m8", sliced("m8", None, (12,), ("x",), ("x",)), (grid(14), I3)),
    # Reshards of uneven dims whose axes also split another dim.
    ("ab_to_ba_10x6_m42", moved("m42", AB, BA), (grid(10, 6),)),
    ("ab_to_ba_10x6_m24", moved("m24", AB, BA), (grid(10, 6),)),
    ("ab_to_ba_14x6_m42", moved("m42", AB, BA), (grid(14, 6),)),
    ("ab_to_ba_6x10_m42", moved("m42", AB, BA), (grid(6, 10),)),
    ("ab_to_ba_13x7_m24", moved("m24", AB, BA), (grid(13, 7),)),
    ("x_to_cols_10x12_m8", moved("m8", ("x",), (None, "x")), (grid(10, 12),)),
    ("a_to_cols_b_10x6_m42", moved("m42", ("a",), ("b", "a")), (grid(10, 6),)),
]

DTYPE_BYTES = {"f32": 4, "s32": 4, "pred": 1, "f64": 8, "s64": 8}


def shape_bytes(text):
    """Bytes of the HLO shape text "f32[3,1]{1,0}" or a tuple "(f32[3,1,2]{...}, f32[...])"."""
    total = 0
    for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * DTYPE_BYTES[dtype]
    return total


def group_size(line):
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]", line)
    if m:
        return int(m.group(2))
    m = re.search(r"replica_groups=\{(\{[\d,]*\})", line)
    if m:
        return len(m.group(1).strip("{}").split(","))
    m = re.search(r"mesh\[([^\]]*)\][^{]*\{([^}]*)\}", line)
    sizes = dict((k.strip("'"), int(v)) for k, v in re.findall(r"('\w+')=(\d+)", m.group(1)))
    n = 1
    for axis in m.group(2).split(","):
        axis = axis.strip()
        sub = re.match(r"'(\w+)':\(\d+\)(\d+)", axis)
        n *= int(sub.group(2)) if sub else sizes[axis.strip("'")]
    return n


def collectives(f, args):
    """(kind, bytes each device sends) of each collective in XLA's compiled program."""
    return collectives_in(jax.jit(f).lower(*args).compile().as_text())


def collectives_in(hlo, round_once=False):
    """(kind, bytes each device sends) of each collective in the compiled program text `hlo`; an
    all-reduce of n bytes over g members sends 2 n (g - 1) / g, rounded down once when
    `round_once` (as spmd's account rounds it), else twice (the goldens recorded so)."""
    out = []
    for line in hlo.splitlines():
        for kind in COLLECTIVES:
            m = re.search(rf"= (.*?) {kind}(-start)?\(", line)
            if not m:
                continue
            size = shape_bytes(m.group(1))
            if kind == "collective-permute":
                out.append((kind, size))
            elif kind == "all-reduce" and round_once:
                out.append((kind, 2 * size * (group_size(line) - 1) // group_size(line)))
            else:
                g = group_size(line)
                out.append((kind, size * (g - 1) // g * (2 if kind == "all-reduce" else 1)))
    return out


def record(name, f, args, results, hlo, values):
    """Adds one case's result leaves, values and collectives to the files' lines."""
    results.append(f"=== {name}")
    for i, leaf in enumerate(jax.tree.leaves(jax.jit(f)(*args))):
        results.append(leaf_line(leaf))
        values[f"{name}/{i}"] = np.asarray(leaf)
    found = collectives(f, args)
    hlo.append(f"=== {name}")
    hlo.extend(f"{kind} {size}" for kind, size in found)
    hlo.append(f"bytes {sum(size for _, size in found)}")


def write(out_dir, cases):
    """Records `cases` in results.txt, hlo.txt and values.npz under `out_dir`."""
    results, hlo, values = [], [], {}
    for name, f, args in cases:
        record(name, f, args, results, hlo, values)
    os.makedirs(out_dir, exist_ok=True)
    for file, lines in (("results.txt", results), ("hlo.txt", hlo)):
        with open(os.path.join(out_dir, file), "w") as out:
            out.write("\n".join(lines) + "\n")
    np.savez(os.path.join(out_dir, "values.npz"), **values)


if __name__ == "__main__":
    write(OUT, CASES)
