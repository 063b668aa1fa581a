"""One training epoch of `spmd train` beside the same loop in JAX + optax
(bench/compare/train_jax.py), on the same machine in one run: seconds per epoch, their ratio,
and each process's peak memory (max RSS).

  python3 bench/compare/train.py [--build build] [--batch 1024] [--steps 0] [--meshes 1,8,4x2]

A JAX run that aborts (on this 2-core machine its CPU collectives give up after 40 s when 8
virtual devices wait on each other: "Termination timeout for all reduce") is reported as such,
and spmd is then compared with JAX's fastest configuration that completed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def spmd_epoch(build, mesh, batch, steps):
    out_dir = tempfile.mkdtemp(prefix="spmd_train_bench_")
    cmd = [os.path.join(build, "src", "cli", "spmd"), "train", "--mesh", mesh, "--epochs", "1",
           "--batch", str(batch), "--out", out_dir, "--no-plot"]
    if steps:
        cmd += ["--steps", str(steps)]
    code, out, err, _, rss = run_measured(cmd)
    if code != 0:
        return {"error": " ".join((err or out).strip().splitlines()[-1:])}
    with open(os.path.join(out_dir, "history.txt")) as f:
        epochs = [line.split() for line in f if line.startswith("epoch")]
    acc = re.search(r"test accuracy (\S+)", out)
    return {"seconds": float(epochs[-1][1]), "accuracy": float(acc.group(1)), "rss": rss}


def jax_epoch(mesh, batch, steps):
    # The same schedule as spmd train's default: the learning rate falls to 0 over the run.
    cmd = [sys.executable, os.path.join(HERE, "train_jax.py"), "--mesh", mesh, "--epochs", "1",
           "--batch", str(batch), "--schedule", "cosine"]
    if steps:
        cmd += ["--steps", str(steps)]
    code, out, err, _, rss = run_measured(cmd)
    if code != 0:
        reason = "aborted"
        m = re.search(r"Termination timeout[^\n]*", err)
        if m:
            reason = "aborted: " + m.group(0)[:100]
        return {"error": reason, "rss": rss}
    line = json.loads(out.strip().splitlines()[0])
    return {"seconds": line["seconds"], "accuracy": line["test_accuracy"], "rss": rss}


def run_measured(cmd):
    """Runs cmd in its own child and returns (code, stdout, stderr, seconds, max RSS MiB) of that
    child alone (os.wait4 gives the child's own resource usage)."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_chunks, err_chunks = [], []
    # communicate() reaps the child with waitpid; read the pipes ourselves and reap with wait4.
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, out_chunks)
    sel.register(p.stderr, selectors.EVENT_READ, err_chunks)
    open_streams = 2
    while open_streams:
        for key, _ in sel.select():
            data = key.fileobj.readline()
            if not data:
                sel.unregister(key.fileobj)
                open_streams -= 1
            else:
                key.data.append(data)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return (p.returncode, "".join(out_chunks), "".join(err_chunks), time.perf_counter() - start,
            usage.ru_maxrss / 1024)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=0, help="steps per epoch (0: the whole epoch)")
    ap.add_argument("--meshes", default="1,2,8,4x2")
    args = ap.parse_args()
    rows = []
    for mesh in args.meshes.split(","):
        s = spmd_epoch(args.build, mesh, args.batch, args.steps)
        j = jax_epoch(mesh, args.batch, args.steps)
        rows.append((mesh, s, j))
        print(f"--mesh {mesh:4}  spmd {fmt(s)}  JAX {fmt(j)}", flush=True)
    done = [(m, j) for m, _, j in rows if "seconds" in j]
    if not done:
        print("JAX completed no configuration")
        return
    best_mesh, best = min(done, key=lambda r: r[1]["seconds"])
    print(f"JAX's fastest completed configuration: --mesh {best_mesh}, {best['seconds']:.2f} s")
    for mesh, s, j in rows:
        if "seconds" not in s:
            continue
        same = f"{s['seconds'] / j['seconds']:.2f}x JAX same mesh" if "seconds" in j else \
            "JAX aborted on this mesh"
        print(f"--mesh {mesh:4}  spmd/JAX-fastest {s['seconds'] / best['seconds']:.2f}x  ({same})")


def fmt(r):
    if "seconds" not in r:
        return f"{r['error']}"
    return f"{r['seconds']:6.2f} s/epoch  acc {r['accuracy']:.4f}  max RSS {r['rss']:6.0f} MiB"


if __name__ == "__main__":
    main()
