"""Records Fashion-MNIST facts and JAX's epoch shuffling for spmd's sp::data tests.

Writes, under tests/goldens/data/:
  fashion_mnist.txt  read with gzip + NumPy from Debian's dataset-fashion-mnist package: per
                     split the example count, the first 10 labels, the pixel sums (uint8) of the
                     first 3 images, the label histogram, and a few pixels of image 0 scaled as
                     jnp.asarray(x, jnp.float32) / 255 (XLA multiplies by the reciprocal, within
                     1 ulp of NumPy's x / 255), written as the exact double of each float32
  epoch_order.txt    jax.random.permutation(jax.random.fold_in(key, epoch), n), the order in
                     which sp::data::Batches visits an epoch: n=100 key(0) epochs 0 and 1 in
                     full, and the first 20 of n=60000 (the training split) for key(0) epoch 0
                     and key(42) epoch 3
Each line is "<name> <values...>"; tests/data/*_test.cpp read them by name.

Run: /work/jaxenv/bin/python tools/goldens/gen_fashion_mnist.py [DIR]
     (DIR defaults to /usr/share/datasets/fashion-mnist; needs jax 0.10.2, the tests do not)
"""
import gzip
import os
import struct
import sys

import jax
import jax.numpy as jnp
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens", "data")
SPLITS = {"train": "train", "test": "t10k"}
PIXELS = [0, 100, 300, 350, 400, 500, 783]


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, type_code, ndim = struct.unpack(">HBB", data[:4])
    assert zero == 0 and type_code == 0x08, path
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    body = data[4 + 4 * ndim :]
    assert len(body) == int(np.prod(dims)), path
    return np.frombuffer(body, np.uint8).reshape(dims)


def line(name, values):
    return name + " " + " ".join(str(v) for v in values)


def fashion_mnist_lines(directory):
    lines = []
    for split, prefix in SPLITS.items():
        images = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz"))
        labels = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz"))
        scaled = np.asarray(jnp.asarray(images.reshape(len(images), -1), jnp.float32) / 255)
        exact = images.reshape(len(images), -1).astype(np.float32) / 255
        assert np.allclose(scaled, exact, rtol=2**-23, atol=0)
        lines += [
            line(f"{split}.size", [len(labels)]),
            line(f"{split}.first_labels", labels[:10]),
            line(f"{split}.pixel_sums", [int(images[i].astype(np.int64).sum()) for i in range(3)]),
            line(f"{split}.label_histogram", np.bincount(labels, minlength=10)),
            line(f"{split}.image0_pixel_index", PIXELS),
            line(f"{split}.image0_pixel_value", [repr(float(scaled[0, p])) for p in PIXELS]),
        ]
    return lines


def epoch_order(seed, epoch, n):
    key = jax.random.PRNGKey(seed)
    order = np.asarray(jax.random.permutation(jax.random.fold_in(key, epoch), n))
    # New-style keys shuffle the same way; sp::random keys are the raw form.
    typed = jax.random.permutation(jax.random.fold_in(jax.random.key(seed), epoch), n)
    assert (order == np.asarray(typed)).all()
    return order


def epoch_order_lines():
    return [
        line("n100.key0.epoch0", epoch_order(0, 0, 100)),
        line("n100.key0.epoch1", epoch_order(0, 1, 100)),
        line("n60000.key0.epoch0.first20", epoch_order(0, 0, 60000)[:20]),
        line("n60000.key42.epoch3.first20", epoch_order(42, 3, 60000)[:20]),
    ]


def write(name, lines):
    with open(os.path.join(OUT, name), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
    os.makedirs(OUT, exist_ok=True)
    write("fashion_mnist.txt", fashion_mnist_lines(directory))
    write("epoch_order.txt", epoch_order_lines())


if __name__ == "__main__":
    main()
