"""Records the first losses of the `spmd train` loop written in JAX + optax
(bench/compare/train_jax.py: same initialisation, data order and optimizer) for
tests/cli/train_test.cpp. Run with JAX 0.10.2 and optax; needs Debian's dataset-fashion-mnist.

  python tools/goldens/gen_train.py
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "goldens", "train")


def first_losses(optimizer, batch, steps, lr):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "compare", "train_jax.py"),
                          "--mesh", "1", "--epochs", "1", "--batch", str(batch), "--optimizer",
                          optimizer, "--steps", str(steps), "--lr", str(lr)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["first_losses"][:steps]


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "first_losses.txt"), "w") as f:
        f.write("# optimizer batch lr: the losses of the first steps (seed 0, constant rate), "
                "from JAX + optax\n")
        for optimizer, lr in (("adam", 1e-3), ("sgd", 0.1)):
            losses = first_losses(optimizer, 256, 10, lr)
            f.write(f"{optimizer} 256 {lr}: " + " ".join(repr(v) for v in losses) + "\n")


if __name__ == "__main__":
    main()
