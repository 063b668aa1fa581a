"""Records spmd::nn's values from JAX, for tests/nn/*_test.cpp.

The torch-style modules are written here in JAX's functional form, drawing their parameters as
spmd draws them (torch's RNG is not reproducible):
* Linear(in, out, key): kw, kb = jax.random.split(key); bound = 1/sqrt(in);
  weight = uniform(kw, (out, in), float32, -bound, bound), bias = uniform(kb, (out,), ...);
  forward x @ weight.T + bias.
* The seed's Model(layer_sizes, key): keys = jax.random.split(key, len(layer_sizes) - 1), layer i
  a Linear drawn from keys[i]; forward applies every layer followed by maximum(x, 0).
* mse_loss as torch.nn.MSELoss (mean over every element); cross_entropy as
  optax.softmax_cross_entropy_with_integer_labels averaged; log_softmax / softmax as jax.nn's.

Writes tests/goldens/nn/values.txt: blocks of
    === <name>
    <dtype> <dim> <dim> ...
    <value> <value> ...
(float32 values with 9 significant digits, which round-trip).
Run: /work/jaxenv/bin/python tools/goldens/gen_nn.py   (needs jax 0.10.2 and optax; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

jax.config.update("jax_enable_x64", False)
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "nn")

# The seed's layer structure (four Linear layers) at a size the tests run quickly.
LAYER_SIZES = [8, 16, 16, 16, 4]
BATCH = 8


def linear_init(key, n_in, n_out):
    kw, kb = jax.random.split(key)
    bound = 1.0 / np.sqrt(n_in)
    weight = jax.random.uniform(kw, (n_out, n_in), jnp.float32, -bound, bound)
    bias = jax.random.uniform(kb, (n_out,), jnp.float32, -bound, bound)
    return weight, bias


def model_init(key, sizes):
    keys = jax.random.split(key, len(sizes) - 1)
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"layers.{i}.weight"], params[f"layers.{i}.bias"] = linear_init(keys[i], n_in, n_out)
    return params


def model_forward(params, x):
    for i in range(len(params) // 2):
        x = x @ params[f"layers.{i}.weight"].T + params[f"layers.{i}.bias"]
        x = jnp.maximum(x, 0)
    return x


def mse_loss(input, target):
    return jnp.mean((input - target) ** 2)


def cross_entropy(logits, labels):
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits, labels))


def accuracy(logits, labels):
    return jnp.mean(jnp.argmax(logits, -1) == labels)


def block(name, value):
    a = np.asarray(value)
    header = " ".join([str(a.dtype)] + [str(d) for d in a.shape])
    if a.dtype == np.float32:
        values = " ".join(f"{float(v):.9g}" for v in a.ravel())
    else:
        values = " ".join(str(int(v)) for v in a.ravel())
    return f"=== {name}\n{header}\n{values}\n"


def main():
    out = []
    # Linear(3, 5) from key(0).
    w, b = linear_init(jax.random.key(0), 3, 5)
    out += [block("linear.weight", w), block("linear.bias", b)]

    # The seed's Model: parameters, forward, MSELoss and its gradients.
    params = model_init(jax.random.key(42), LAYER_SIZES)
    kx, ky = jax.random.split(jax.random.key(7))
    x = jax.random.normal(kx, (BATCH, LAYER_SIZES[0]), jnp.float32)
    y = jax.random.normal(ky, (BATCH, LAYER_SIZES[-1]), jnp.float32)
    out += [block(f"model.{k}", v) for k, v in params.items()]
    out += [block("model.x", x), block("model.y", y), block("model.out", model_forward(params, x))]

    def loss(p, batch):
        inputs, targets = batch
        return mse_loss(model_forward(p, inputs), targets)

    value, grads = jax.jit(jax.value_and_grad(loss))(params, (x, y))
    out.append(block("model.loss", value))
    out += [block(f"model.grad.{k}", g) for k, g in grads.items()]

    # Classification: log_softmax, softmax, cross_entropy (and its gradient), accuracy; then
    # logits near 1e4 whose exp overflows float32 unless shifted.
    kl, kc = jax.random.split(jax.random.key(3))
    logits = 3 * jax.random.normal(kl, (6, 5), jnp.float32)
    labels = jax.random.randint(kc, (6,), 0, 5, jnp.int32)
    big = logits * 100 + 1e4
    out += [block("cls.logits", logits), block("cls.labels", labels)]
    out += [block("cls.log_softmax", jax.nn.log_softmax(logits)),
            block("cls.log_softmax_axis0", jax.nn.log_softmax(logits, axis=0)),
            block("cls.softmax", jax.nn.softmax(logits)),
            block("cls.cross_entropy", cross_entropy(logits, labels)),
            block("cls.cross_entropy_none",
                  optax.softmax_cross_entropy_with_integer_labels(logits, labels)),
            block("cls.cross_entropy_grad", jax.grad(cross_entropy)(logits, labels)),
            block("cls.accuracy", accuracy(logits, labels)),
            block("cls.big_logits", big),
            block("cls.big_log_softmax", jax.nn.log_softmax(big)),
            block("cls.big_cross_entropy", cross_entropy(big, labels))]

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "values.txt"), "w") as f:
        f.write("".join(out))


if __name__ == "__main__":
    main()
