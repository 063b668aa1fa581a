"""Writes a generator's goldens in the block format the tests read (spmd_test::golden_blocks):
cases.txt with a "=== <case>" line before each text, and values.npz with the arrays by name."""
import os

import numpy as np


def write_blocks(out_dir, cases, values):
    """cases: name -> text (a jaxpr, a type); values: name -> array."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "cases.txt"), "w") as out:
        for name, text in cases.items():
            out.write(f"=== {name}\n{text}\n")
    np.savez(os.path.join(out_dir, "values.npz"), **values)
