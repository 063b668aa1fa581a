"""The training loop of `spmd train` written in JAX + optax: the same model, initialisation,
data order and optimizer, so that losses, accuracy and time per epoch can be compared.

  python bench/compare/train_jax.py --mesh 1 --epochs 1 --batch 1024 --optimizer adam

Fashion-MNIST is read from Debian's dataset-fashion-mnist package. Prints one JSON line per epoch
({"epoch", "seconds", "train_loss", "test_loss", "test_accuracy"}), then the first losses.
"""
import argparse
import gzip
import json
import os
import time

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"
LAYERS = [784, 1024, 1024, 1024, 10]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(DATA, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA, f"{prefix}-labels-idx1-ubyte.gz"))
    return (images.reshape(len(images), -1).astype(np.float32) / 255.0,
            labels.astype(np.int32))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mesh", default="1")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--optimizer", default="adam")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schedule", default="constant", help="constant or cosine (to 0 at the end)")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (0: all)")
    args = ap.parse_args()
    shape = [int(s) for s in args.mesh.split("x")]
    ndev = int(np.prod(shape))
    os.environ.setdefault("XLA_FLAGS", "")
    import jax
    jax.config.update("jax_num_cpu_devices", ndev)
    import jax.numpy as jnp
    import optax
    from jax.sharding import NamedSharding, PartitionSpec as P

    names = ("batch",) if len(shape) == 1 else ("batch", "model")
    mesh = jax.make_mesh(tuple(shape), names)
    rep = NamedSharding(mesh, P())

    def param_sharding(name):
        if len(shape) == 1:
            return rep
        return {"layers.1.weight": NamedSharding(mesh, P("model")),
                "layers.1.bias": NamedSharding(mesh, P("model")),
                "layers.2.weight": NamedSharding(mesh, P(None, "model"))}.get(name, rep)

    key = jax.random.key(args.seed)
    k_model, k_data = jax.random.split(key)
    params = {}
    for i, (k, n_in, n_out) in enumerate(zip(jax.random.split(k_model, len(LAYERS) - 1),
                                             LAYERS[:-1], LAYERS[1:])):
        kw, kb = jax.random.split(k)
        bound = 1.0 / np.sqrt(n_in)
        params[f"layers.{i}.weight"] = jax.random.uniform(kw, (n_out, n_in), jnp.float32, -bound, bound)
        params[f"layers.{i}.bias"] = jax.random.uniform(kb, (n_out,), jnp.float32, -bound, bound)
    params = {k: jax.device_put(v, param_sharding(k)) for k, v in params.items()}

    def forward(params, x):
        n = len(LAYERS) - 1
        for i in range(n):
            x = x @ params[f"layers.{i}.weight"].T + params[f"layers.{i}.bias"]
            if i < n - 1:
                x = jnp.maximum(x, 0)
        return x

    def loss_fn(params, x, y):
        logits = forward(params, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    train_x, train_y = load("train")
    test_x, test_y = load("test")
    n = len(train_x)
    steps = n // args.batch
    lr = args.lr
    if args.schedule == "cosine":
        lr = optax.cosine_decay_schedule(args.lr, args.epochs * steps)
    opt = {"sgd": optax.sgd(lr), "adam": optax.adam(lr),
           "adamw": optax.adamw(lr)}[args.optimizer]
    opt_state = opt.init(params)

    @jax.jit
    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    @jax.jit
    def evaluate(params, x, y):
        logits = forward(params, x)
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
        return loss, jnp.mean(jnp.argmax(logits, -1) == y)

    batch_sharding = NamedSharding(mesh, P("batch"))
    first = []
    for epoch in range(args.epochs):
        perm = np.asarray(jax.random.permutation(jax.random.fold_in(k_data, epoch), n))
        start = time.perf_counter()
        total = 0.0
        done = 0
        for s in range(steps):
            idx = perm[s * args.batch:(s + 1) * args.batch]
            x = jax.device_put(train_x[idx], batch_sharding)
            y = jax.device_put(train_y[idx], batch_sharding)
            params, opt_state, loss = step(params, opt_state, x, y)
            if len(first) < 20:
                first.append(float(loss))
            total += float(loss)
            done += 1
            if args.steps and done >= args.steps:
                break
        jax.block_until_ready(params)
        seconds = time.perf_counter() - start
        test_loss, test_acc = evaluate(params, test_x, test_y)
        print(json.dumps({"epoch": epoch + 1, "seconds": seconds, "train_loss": total / done,
                          "test_loss": float(test_loss), "test_accuracy": float(test_acc)}),
              flush=True)
    print(json.dumps({"first_losses": first}))


if __name__ == "__main__":
    main()
