"""Records opt_einsum's contraction paths (the version installed with JAX 0.10.2), which
jnp.einsum follows, for tests/ops/einsum_path_test.cpp.

Writes tests/goldens/einsum/paths.txt: one line per case and strategy,
  <case>;<subscripts>;<shape>|<shape>|...;<strategy>;<path>
shapes as "2x3" ("" for a scalar), the path as "1,2 0,1" (opt_einsum.contract_path(...,
shapes=True, optimize=<strategy>)[0]). The named cases are chains, stars, outer products,
batch and repeated labels, ties, 3 to 7 operands; the "random_*" cases are random contractions
of 3 to 8 operands over small sizes, where ties are common.
Also writes tests/goldens/einsum/paths_hq.txt, the same format for "dp" and "auto-hq" on the
same cases, on chains and rings of 9 to 16 operands and on random contractions of 3 to 12
operands, and
tests/goldens/einsum/random_greedy.txt: per random contraction of 3 to 20 operands,
  <case>;<subscripts>;<shapes>;<greedy flops>;<best flops of opt_einsum's RandomGreedy>
the flops as contract_path's opt_cost, the best over 1024 trials. opt_einsum's random-greedy
draws in an order that follows the labels' string hashes, which change with every Python
process, so its paths are not recorded: the tests check the cost of spmd's deterministic choice.
Run: python3 tools/goldens/gen_einsum_path.py   (needs opt_einsum 3.4; the tests do not)
"""
import os
import random

import opt_einsum

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "einsum", "paths.txt")
STRATEGIES = ["auto", "optimal", "greedy", "branch-all", "branch-2", "branch-1"]

# (case, subscripts, shapes)
CASES = [
    ("chain_3", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("chain_3_wide_middle", "ij,jk,kl->il", [(2, 3), (3, 100), (100, 5)]),
    ("chain_3_square_tie", "ij,jk,kl->il", [(4, 4), (4, 4), (4, 4)]),
    ("chain_4", "ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("chain_4_tie", "ab,bc,cd,de->ae", [(3, 3), (3, 3), (3, 3), (3, 3)]),
    ("chain_5", "ab,bc,cd,de,ef->af", [(10, 2), (2, 10), (10, 3), (3, 10), (10, 4)]),
    ("chain_6", "ab,bc,cd,de,ef,fg->ag", [(2, 8), (8, 3), (3, 9), (9, 2), (2, 7), (7, 5)]),
    ("chain_6_tie", "ab,bc,cd,de,ef,fg->ag", [(4, 4)] * 6),
    ("chain_7", "ab,bc,cd,de,ef,fg,gh->ah", [(3, 5), (5, 2), (2, 6), (6, 3), (3, 4), (4, 2), (2, 5)]),
    ("vector_chain", "i,ij,jk,k->", [(3,), (3, 4), (4, 5), (5,)]),
    ("star_3", "ai,bi,ci->abc", [(2, 5), (3, 5), (4, 5)]),
    ("star_4", "ai,bi,ci,di->", [(2, 5), (3, 5), (4, 5), (2, 5)]),
    ("star_5", "ai,bi,ci,di,ei->abcde", [(2, 3), (3, 3), (2, 3), (4, 3), (2, 3)]),
    ("star_center", "abcd,ea,fb,gc,hd->efgh", [(4, 4, 4, 4), (3, 4), (3, 4), (3, 4), (3, 4)]),
    ("star_center_unequal", "abcd,ea,fb,gc,hd->efgh",
     [(2, 3, 4, 5), (6, 2), (2, 3), (5, 4), (3, 5)]),
    ("outer_3", "i,j,k->ijk", [(2,), (3,), (4,)]),
    ("outer_4", "a,b,c,d->dcba", [(2,), (3,), (1,), (2,)]),
    ("outer_4_tie", "a,b,c,d->abcd", [(3,), (3,), (3,), (3,)]),
    ("outer_and_contraction", "ab,c,bd->acd", [(2, 3), (4,), (3, 5)]),
    ("outer_5", "a,b,c,d,e->abcde", [(2,), (5,), (3,), (4,), (2,)]),
    ("hadamard_3", "i,i,i->i", [(4,), (4,), (4,)]),
    ("hadamard_matrices", "ij,ij,ij->ij", [(3, 4), (3, 4), (3, 4)]),
    ("hadamard_5", "ij,ij,jk,ij,jk->ik", [(2, 3), (2, 3), (3, 4), (2, 3), (3, 4)]),
    ("batch_3", "bij,bjk,bkl->bil", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("batch_4", "bij,bjk,bkl,blm->bim", [(3, 2, 4), (3, 4, 2), (3, 2, 5), (3, 5, 2)]),
    ("batch_out_permuted", "bij,bjk,bkl->lib", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("repeated_in_operand", "iij,jk,kl->il", [(3, 3, 4), (4, 5), (5, 2)]),
    ("trace_of_product", "ij,jk,ki->", [(3, 4), (4, 5), (5, 3)]),
    ("kept_everywhere", "ab,ab,ab,ab->ab", [(2, 3)] * 4),
    ("implicit_three", "ij,jk,kk->ij", [(2, 3), (3, 4), (4, 4)]),
    ("scalar_operand", ",ij,jk->ik", [(), (2, 3), (3, 4)]),
    ("broadcast_one", "ij,jk,kl->il", [(2, 1), (3, 4), (4, 5)]),
    ("tensor_network", "abc,bcd,cde,def->af", [(2, 3, 4), (3, 4, 5), (4, 5, 2), (5, 2, 3)]),
    ("mps", "ai,ibj,jck,kd->abcd", [(2, 3), (3, 2, 4), (4, 2, 3), (3, 2)]),
    ("ring_4", "ab,bc,cd,da->", [(3, 4), (4, 5), (5, 2), (2, 3)]),
    ("ring_5", "ab,bc,cd,de,ea->", [(3, 3), (3, 3), (3, 3), (3, 3), (3, 3)]),
    ("bilinear", "i,ij,j->", [(5,), (5, 6), (6,)]),
    ("attention_like", "bqd,bkd,bkv->bqv", [(2, 8, 4), (2, 6, 4), (2, 6, 3)]),
    ("mixed_6", "abc,cd,de,ef,fa,b->", [(2, 3, 4), (4, 2), (2, 5), (5, 3), (3, 2), (3,)]),
    ("sum_out_early", "ijk,jl,lm->im", [(2, 3, 4), (3, 5), (5, 6)]),
    ("contract_last", "ab,cd,bc->ad", [(2, 30), (40, 3), (30, 40)]),
    ("wide_3_operand_dim", "abc,ab,bc->a", [(5, 6, 7), (5, 6), (6, 7)]),
]


def shape_text(shapes):
    return "|".join("x".join(map(str, s)) for s in shapes)


def path_text(path):
    return " ".join(",".join(map(str, step)) for step in path)


def random_case(rng, n):
    """n operands of 1 to 3 labels over a few letters, output a random subset of them."""
    letters = "abcdefgh"[:rng.randint(3, 7)]
    terms = ["".join(rng.sample(letters, rng.randint(1, min(3, len(letters))))) for _ in range(n)]
    used = sorted(set("".join(terms)))
    out = "".join(c for c in used if rng.random() < 0.3)
    sizes = {c: rng.choice([1, 2, 2, 3, 3, 4, 5]) for c in used}
    return ",".join(terms) + "->" + out, [tuple(sizes[c] for c in t) for t in terms]


lines = []
for name, subs, shapes in CASES:
    for strategy in STRATEGIES:
        path = opt_einsum.contract_path(subs, *shapes, shapes=True, optimize=strategy)[0]
        lines.append(f"{name};{subs};{shape_text(shapes)};{strategy};{path_text(path)}")
rng = random.Random(20260302)
for i in range(240):
    n = 3 + i % 6
    subs, shapes = random_case(rng, n)
    for strategy in STRATEGIES:
        if strategy == "optimal" and n > 6:
            continue
        path = opt_einsum.contract_path(subs, *shapes, shapes=True, optimize=strategy)[0]
        lines.append(f"random_{i};{subs};{shape_text(shapes)};{strategy};{path_text(path)}")
with open(OUT, "w") as f:
    f.write("# opt_einsum " + opt_einsum.__version__ + " (JAX 0.10.2); see gen_einsum_path.py\n")
    f.write("\n".join(lines) + "\n")


def random_network(rng, n):
    """n operands of 1 to 4 labels over up to 12 letters, output a random subset of them."""
    letters = "abcdefghijkl"[:rng.randint(4, 12)]
    terms = ["".join(rng.sample(letters, rng.randint(1, 4))) for _ in range(n)]
    used = sorted(set("".join(terms)))
    out = "".join(c for c in used if rng.random() < 0.2)
    sizes = {c: rng.choice([1, 2, 2, 3, 3, 4, 5, 7]) for c in used}
    return ",".join(terms) + "->" + out, [tuple(sizes[c] for c in t) for t in terms]


def letters(n):
    return [opt_einsum.get_symbol(i) for i in range(n)]


def chain(n, ring):
    """n matrices in a chain (a ring: the last one closes it), sizes cycling through 2 to 6."""
    ls = letters(n + 1)
    if ring:
        ls[n] = ls[0]
    terms = [ls[i] + ls[i + 1] for i in range(n)]
    size = {c: 2 + i % 5 for i, c in enumerate(letters(n + 1))}
    out = "" if ring else ls[0] + ls[n]
    return ",".join(terms) + "->" + out, [(size[t[0]], size[t[1]]) for t in terms]


HQ = ["dp", "auto-hq"]
HQ_CASES = [(f"{'ring' if ring else 'chain'}_{n}",) + chain(n, ring)
            for n in (9, 12, 14, 16) for ring in (False, True)]
hq_lines = []
for name, subs, shapes in CASES + HQ_CASES:
    for strategy in HQ:
        path = opt_einsum.contract_path(subs, *shapes, shapes=True, optimize=strategy)[0]
        hq_lines.append(f"{name};{subs};{shape_text(shapes)};{strategy};{path_text(path)}")
rng = random.Random(20261126)
for i in range(240):
    subs, shapes = random_case(rng, 3 + i % 6) if i % 2 else random_network(rng, 3 + i % 10)
    for strategy in HQ:
        path = opt_einsum.contract_path(subs, *shapes, shapes=True, optimize=strategy)[0]
        hq_lines.append(f"random_{i};{subs};{shape_text(shapes)};{strategy};{path_text(path)}")
with open(OUT.replace("paths.txt", "paths_hq.txt"), "w") as f:
    f.write("# opt_einsum " + opt_einsum.__version__ + " (JAX 0.10.2); see gen_einsum_path.py\n")
    f.write("\n".join(hq_lines) + "\n")


def opt_cost(subs, shapes, optimize):
    return opt_einsum.contract_path(subs, *shapes, shapes=True, optimize=optimize)[1].opt_cost


rg_lines = []
rng = random.Random(20261127)
for i in range(60):
    n = 3 + i % 18
    subs, shapes = random_case(rng, n) if i % 2 else random_network(rng, n)
    best = opt_cost(subs, shapes, opt_einsum.RandomGreedy(max_repeats=1024))
    greedy = opt_cost(subs, shapes, "greedy")
    rg_lines.append(f"random_{i};{subs};{shape_text(shapes)};{greedy};{best}")
with open(OUT.replace("paths.txt", "random_greedy.txt"), "w") as f:
    f.write("# opt_einsum " + opt_einsum.__version__ + " (JAX 0.10.2); see gen_einsum_path.py\n")
    f.write("\n".join(rg_lines) + "\n")
