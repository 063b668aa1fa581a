"""Records optax's sgd, adam and adamw over a few steps of a small torch-style params tree.

Writes tests/goldens/optim/<case>.txt, one per optimizer configuration. Each file has a block
"=== init" (the initial params and optax's initial state), then "=== step <k>" for k = 1..5 (the
grads fed to that step, then the params and state after it). Every line is
  <params|grads|state> <name> <dtype> <shape> <values...>
with the shape as comma-separated dims ("-" for a scalar) and float32 values printed so that
they read back exactly. State names are optax's flattened key paths joined with dots
("0.mu.layers.0.weight", "0.count"). The grads come from the quadratic loss
sum(c * (p - t)**2) / 2 over the leaves, so they change from step to step.
Run: /work/jaxenv/bin/python tools/goldens/gen_optim.py   (needs jax and optax; the tests do not)
"""
import collections
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "optim")
rng = np.random.default_rng(20260514)
STEPS = 5

SHAPES = [("layers.0.weight", (4, 6)), ("layers.0.bias", (4,)), ("layers.1.weight", (2, 4)),
          ("layers.1.bias", (2,))]


def random_tree(scale):
    return collections.OrderedDict(
        (name, jnp.asarray(rng.normal(size=shape) * scale, jnp.float32)) for name, shape in SHAPES)


PARAMS = random_tree(1.0)
TARGETS = random_tree(1.0)
CURVATURE = collections.OrderedDict(
    (name, jnp.asarray(rng.uniform(0.5, 2.0, size=shape), jnp.float32)) for name, shape in SHAPES)


def loss(params):
    return sum(jnp.sum(CURVATURE[k] * (params[k] - TARGETS[k]) ** 2) / 2 for k in params)


CASES = {
    "sgd": optax.sgd(0.1),
    "sgd_momentum": optax.sgd(0.1, momentum=0.9),
    "sgd_nesterov": optax.sgd(0.1, momentum=0.9, nesterov=True),
    "adam": optax.adam(0.01),
    "adam_betas": optax.adam(0.05, b1=0.8, b2=0.99, eps=1e-6),
    "adamw": optax.adamw(0.01),
    "adamw_decay": optax.adamw(0.05, weight_decay=0.5),
    # Schedules: the decay ends before the last step (the rate then stays at alpha * init).
    "adam_cosine": optax.adam(optax.cosine_decay_schedule(0.01, 4)),
    "sgd_cosine": optax.sgd(optax.cosine_decay_schedule(0.1, 3, alpha=0.1), momentum=0.9),
    "adamw_cosine": optax.adamw(optax.cosine_decay_schedule(0.05, 8, exponent=2.0)),
}


def key_name(key):
    if isinstance(key, jax.tree_util.SequenceKey):
        return str(key.idx)
    if isinstance(key, jax.tree_util.DictKey):
        return str(key.key)
    return key.name  # GetAttrKey of a NamedTuple field


def line(kind, name, x):
    x = np.asarray(x)
    shape = ",".join(str(d) for d in x.shape) or "-"
    values = " ".join(repr(v.item()) if x.dtype == np.int32 else repr(np.float32(v).item())
                      for v in x.reshape(-1))
    return f"{kind} {name} {x.dtype} {shape} {values}"


def tree_lines(kind, tree):
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [line(kind, ".".join(key_name(k) for k in path), x) for path, x in leaves]


def record(opt):
    params = PARAMS
    state = opt.init(params)
    out = ["=== init"] + tree_lines("params", params) + tree_lines("state", state)
    for step in range(1, STEPS + 1):
        grads = jax.grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        params = optax.apply_updates(params, updates)
        out += [f"=== step {step}"] + tree_lines("grads", grads)
        out += tree_lines("params", params) + tree_lines("state", state)
    return out


os.makedirs(ROOT, exist_ok=True)
for case, opt in CASES.items():
    with open(os.path.join(ROOT, case + ".txt"), "w") as f:
        f.write("\n".join(record(opt)) + "\n")
