"""Records the jaxprs of jnp.einsum of JAX 0.10.2 with optimize="dp" and "auto-hq", for
tests/ops/einsum_test.cpp: labels summed out of one operand before the pairs (dp's single-term
steps) and a chain long enough for auto-hq to run dp.

Writes tests/goldens/einsum/hq_jaxprs.txt: "=== <case>" then str(jax.make_jaxpr(...)), the
operands jnp.ones of the shapes in CASES.
Run: python3 tools/goldens/gen_einsum_hq.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "einsum", "hq_jaxprs.txt")

# (case, subscripts, shapes, optimize)
CASES = [
    ("dp_single_labels", "ijx,jk,ky->i", [(2, 3, 4), (3, 5), (5, 6)], "dp"),
    ("dp_disconnected", "ab,bc,de,ef->acdf", [(2, 3), (3, 4), (5, 6), (6, 2)], "dp"),
    ("auto_hq_chain_6", "ab,bc,cd,de,ef,fg->ag",
     [(2, 8), (8, 3), (3, 9), (9, 2), (2, 7), (7, 5)], "auto-hq"),
]

with open(OUT, "w") as f:
    f.write("# JAX 0.10.2; see gen_einsum_hq.py\n")
    for name, subs, shapes, optimize in CASES:
        f.write(f"# {name}: {subs} {shapes} optimize={optimize}\n")
    for name, subs, shapes, optimize in CASES:
        ops = [jnp.ones(s) for s in shapes]
        jaxpr = jax.make_jaxpr(lambda *xs: jnp.einsum(subs, *xs, optimize=optimize))(*ops)
        f.write(f"=== {name}\n{jaxpr}\n")
