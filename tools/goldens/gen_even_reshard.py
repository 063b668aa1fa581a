"""Records what JAX gives for reshards between even splits whose axes change dims or order inside
jit: the values, where the results are split, and the collectives of XLA's compiled program with
the bytes each device sends in them (XLA's SPMD partitioner moves such blocks by all-to-alls,
collective-permutes or all-gathers). For tests/sharding/even_reshard_test.cpp, which checks that
spmd sends no more bytes than XLA.

Writes tests/goldens/even_reshard/ in gen_uneven2.py's format (results.txt, values.npz, hlo.txt).
Run: python3 tools/goldens/gen_even_reshard.py   (needs jax 0.10.2; the tests do not)
"""
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_uneven2 import grid, moved, write  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "even_reshard")

AB, BA = ("a", "b"), ("b", "a")

# (case, function, arguments).
CASES = [
    ("a_to_b_8x8_m42", moved("m42", ("a",), ("b",)), (grid(8, 8),)),
    ("b_to_a_8x8_m42", moved("m42", ("b",), ("a",)), (grid(8, 8),)),
    ("ab_to_ba_8x8_m42", moved("m42", AB, BA), (grid(8, 8),)),
    ("ab_to_ba_8x16_m24", moved("m24", AB, BA), (grid(8, 16),)),
    ("tuple_ab_to_ba_8x4_m42", moved("m42", (AB,), (BA,)), (grid(8, 4),)),
    ("tuple_ba_to_ab_16x4_m24", moved("m24", (BA,), (AB,)), (grid(16, 4),)),
    ("a_to_cols_b_8x8_m42", moved("m42", ("a",), ("b", "a")), (grid(8, 8),)),
    ("x_to_cols_8x8_m8", moved("m8", ("x",), (None, "x")), (grid(8, 8),)),
    ("a_b_to_b_a_none_8x8x4_m42", moved("m42", ("a", "b", None), ("b", None, "a")),
     (grid(8, 8, 4),)),
    ("a_to_tuple_ba_16x2_m42", moved("m42", ("a",), (BA,)), (grid(16, 2),)),
]


if __name__ == "__main__":
    write(OUT, CASES)
