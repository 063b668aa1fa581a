"""Records jax.numpy creation results (arange, linspace, eye, full) for spmd's tests.

Writes tests/goldens/creation.npz with one entry per case name.
Run: python3 tools/goldens/gen_creation.py   (needs jax; the tests do not)
"""
import os

import jax.numpy as jnp
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "creation.npz")

cases = {
    "arange_8": jnp.arange(8),
    "arange_8f": jnp.arange(8.0),
    "arange_2_11_3": jnp.arange(2, 11, 3),
    "arange_10_0_-3": jnp.arange(10, 0, -3),
    "arange_0_1_0.1": jnp.arange(0.0, 1.0, 0.1),
    "arange_-1.5_2.2_0.7": jnp.arange(-1.5, 2.2, 0.7),
    "linspace_0_1_7": jnp.linspace(0, 1, 7),
    "linspace_-3_11_50": jnp.linspace(-3, 11, 50),
    "linspace_0_1_7_noend": jnp.linspace(0, 1, 7, endpoint=False),
    "linspace_2_5_1": jnp.linspace(2, 5, 1),
    "linspace_0_10_6_int32": jnp.linspace(0, 10, 6, dtype=jnp.int32),
    "linspace_0.1_0.9_9_bf16": jnp.linspace(0.1, 0.9, 9, dtype=jnp.bfloat16),
    "eye_3": jnp.eye(3),
    "eye_3_4_1": jnp.eye(3, 4, 1),
    "eye_4_3_-2_int32": jnp.eye(4, 3, -2, dtype=jnp.int32),
    "full_2x3_7.5": jnp.full((2, 3), 7.5),
    "zeros_2x0": jnp.zeros((2, 0)),
    "ones_3_int8": jnp.ones(3, jnp.int8),
}
np.savez(OUT, **{k: np.asarray(v) for k, v in cases.items()})
print(f"wrote {len(cases)} arrays")
