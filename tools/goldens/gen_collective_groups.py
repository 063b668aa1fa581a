"""Records JAX's collectives with axis_index_groups under pmap on 8 CPU devices, for
tests/ops/parallel_ops_test.cpp: pmean, pmax, pmin, psum_scatter and all_to_all (tiled and
untiled) within subgroups of an axis of 4 ([[0, 1], [2, 3]] and [[0, 2], [1, 3]]) and of 8
([[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 2, 4, 6], [1, 3, 5, 7]] and the unordered
[[7, 0], [1, 6], [5, 2], [3, 4]], where a device's place in its group is its position in the
list). vmap refuses axis_index_groups ("axis_index_groups not supported in vmap collectives"), so
these come from pmap.

Writes tests/goldens/collectives/groups.npz with <case>.x (the pmapped input, small integers as
float32 or int32, so every sum and mean is exact) and <case>.y (the pmap result). Cases named
*_uneven use groups of different sizes ([[0], [1, 2, 3]]), which JAX accepts for the reductions;
pmean then divides by the size of the first group (JAX's psum(1) with groups), not the member's.
With groups of different sizes all_gather and psum_scatter fail in JAX's lowering ("Invalid
replica id -1"); their documentation requires equal sizes.
Run: python3 tools/goldens/gen_collective_groups.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", False)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "collectives")
rng = np.random.default_rng(20261125)

GROUPS = {
    "pairs": [[0, 1], [2, 3]],
    "strided": [[0, 2], [1, 3]],
    "halves": [[0, 1, 2, 3], [4, 5, 6, 7]],
    "strided8": [[0, 2, 4, 6], [1, 3, 5, 7]],
    "unordered8": [[7, 0], [1, 6], [5, 2], [3, 4]],
    "uneven": [[0], [1, 2, 3]],
}


def ops(g):
    """(name, f, per-device shape given the group size k, dtypes) for the groups g."""
    k = len(g[0])
    return [
        ("pmean", lambda v: lax.pmean(v, "i", axis_index_groups=g), (3, 2), (np.float32,)),
        ("pmax", lambda v: lax.pmax(v, "i", axis_index_groups=g), (3, 2),
         (np.float32, np.int32)),
        ("pmin", lambda v: lax.pmin(v, "i", axis_index_groups=g), (3, 2),
         (np.float32, np.int32)),
        ("psum_scatter", lambda v: lax.psum_scatter(v, "i", axis_index_groups=g), (k, 3),
         (np.float32, np.int32)),
        ("psum_scatter_tiled_dim1",
         lambda v: lax.psum_scatter(v, "i", scatter_dimension=1, tiled=True,
                                    axis_index_groups=g), (3, 2 * k), (np.float32,)),
        ("all_to_all", lambda v: lax.all_to_all(v, "i", 0, 1, axis_index_groups=g), (k, 3),
         (np.float32, np.int32)),
        ("all_to_all_tiled",
         lambda v: lax.all_to_all(v, "i", 1, 0, tiled=True, axis_index_groups=g), (3, 2 * k),
         (np.float32,)),
    ]


def main():
    out = {}
    for gname, groups in GROUPS.items():
        n = sum(len(g) for g in groups)
        for name, f, shape, dtypes in ops(groups):
            if gname == "uneven" and name not in ("pmean", "pmax", "pmin"):
                continue
            for dt in dtypes:
                case = f"{name}_{gname}_{np.dtype(dt).name}"
                x = rng.integers(-20, 20, size=(n, *shape)).astype(dt)
                out[case + ".x"] = x
                out[case + ".y"] = np.asarray(jax.pmap(f, axis_name="i")(x))
    np.savez(os.path.join(OUT, "groups.npz"), **out)
    print(f"wrote {len(out) // 2} cases to {OUT}/groups.npz")


if __name__ == "__main__":
    main()
