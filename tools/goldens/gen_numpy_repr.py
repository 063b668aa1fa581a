"""Records NumPy's repr() of float64 arrays (what Python shows for NumPy results such as
np.sin(x) of a JAX Array) for spmd's numpy_repr tests: 1-D and 2-D, wrapped rows, empty,
summarised (> 1000 elements), scientific notation, nan/inf and -0.

Writes tests/goldens/format/numpy_repr.txt, one block per case:
    case <name>
    shape <dims...>
    data <hex of the float64 elements, little-endian, row-major>
    repr <line count>
    <lines>
    end
Run: python3 tools/goldens/gen_numpy_repr.py   (needs numpy; the tests do not)
"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "format", "numpy_repr.txt")
rng = np.random.default_rng(5)

CASES = [
    ("sin_arange8_squared", np.sin(np.arange(8.0) ** 2)),
    ("short", np.array([0.5, 1.0, -2.25])),
    ("integers_as_floats", np.arange(12.0)),
    ("matrix", rng.standard_normal((3, 4))),
    ("wide_rows", rng.standard_normal((2, 11))),
    ("scientific", np.array([1e-9, 3.5, 2e10])),
    ("nonfinite", np.array([np.nan, -np.inf, -0.0, 1.5])),
    ("empty", np.zeros((0,))),
    ("empty_2d", np.zeros((2, 0))),
    ("summarised", rng.standard_normal(2000)),
    ("one_element", np.array([3.25])),
]


def main():
    lines = []
    for name, x in CASES:
        x = np.ascontiguousarray(x, dtype=np.float64)
        text = repr(x).split("\n")
        lines += [f"case {name}", "shape " + " ".join(map(str, x.shape)),
                  "data " + x.astype("<f8").tobytes().hex(), f"repr {len(text)}", *text, "end"]
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
