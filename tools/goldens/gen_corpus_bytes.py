"""Records, for every case of the propagation corpus (gen_propagation_corpus.py), the collectives
of XLA's compiled program and the bytes each device sends in them, for
tests/sharding/propagation_corpus_test.cpp (PropagationCorpus.SendsNoMoreBytesThanXla): the case's
op under jax.jit with its committed inputs and out_shardings set to where the eager op puts its
result (the corpus's recorded sharding), so both partitioners move the same inputs to the same
output split; spmd's `explain` must send no more.

Writes tests/goldens/propagation/xla_bytes.txt, one line per case:
    <case id> <total bytes> [<kind>:<bytes> ...]
in program order; the bytes are counted as in gen_uneven2.py (a collective-permute sends its
operand, an all-gather or all-to-all the (g - 1) / g of its result the other members hold, an
all-reduce 2 (g - 1) / g of it).
Run: /work/jaxenv/bin/python tools/goldens/gen_corpus_bytes.py   (needs jax 0.10.2; the tests
do not)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_propagation_corpus as corpus  # noqa: E402  (sets up 8 CPU devices)
from gen_uneven2 import collectives_in  # noqa: E402
import jax  # noqa: E402


def main():
    for build in (corpus.unary_cases, corpus.binary_cases, corpus.matmul_cases,
                  corpus.layout_cases, corpus.reduction_cases, corpus.combine_cases,
                  corpus.program_cases):
        build()
    lines = [f"# JAX {jax.__version__}; format: tools/goldens/gen_corpus_bytes.py"]
    counts = {}
    for group, mesh_name, op, inputs in corpus.CASES:
        counts[(group, mesh_name)] = counts.get((group, mesh_name), 0) + 1
        case_id = f"{group}_{mesh_name}_{counts[(group, mesh_name)]:02d}"
        mesh = corpus.make_mesh(mesh_name)
        args = [x.make(mesh) for x in inputs]
        out = corpus.run_op(op, args)
        pinned = out.sharding if isinstance(out.sharding, corpus.NamedSharding) else None
        f = jax.jit(lambda *a, op=op: corpus.run_op(op, list(a)), out_shardings=pinned)
        found = collectives_in(f.lower(*args).compile().as_text(), round_once=True)
        lines.append(" ".join([case_id, str(sum(b for _, b in found))] +
                              [f"{kind}:{b}" for kind, b in found]))
    out = os.path.join(corpus.OUT, "xla_bytes.txt")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines) - 1} cases")


if __name__ == "__main__":
    main()
