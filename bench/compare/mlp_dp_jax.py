"""JAX's side of the weak-scaling figure of `spmd_mpi_bench --mlp`: the seed's 784-1024-1024-1024-10
MLP, its MSE loss and the jitted value_and_grad step, data parallel over every device of every
process (batch sharded on a 1-D mesh "batch", parameters replicated), with `--per-device-batch`
rows per device, so the work per process stays the same as processes are added.

  python bench/compare/mlp_dp_jax.py --processes 1 --devices 4
  python bench/compare/mlp_dp_jax.py --processes 2 --devices 4

With --processes > 1 and no --process-id, it starts the processes itself on this machine (one
per process id, joined through jax.distributed on localhost with gloo CPU collectives) and
prints what process 0 prints: one JSON line {"processes", "devices", "batch", "median_ms",
"min_ms", "steps", "loss"}.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

LAYERS = [784, 1024, 1024, 1024, 10]


def launch(args):
    procs = []
    for i in range(args.processes):
        cmd = [sys.executable, __file__, "--processes", str(args.processes), "--process-id",
               str(i), "--devices", str(args.devices), "--per-device-batch",
               str(args.per_device_batch), "--steps", str(args.steps), "--port", str(args.port)]
        out = None if i == 0 else subprocess.DEVNULL
        procs.append(subprocess.Popen(cmd, stdout=out))
    codes = [p.wait() for p in procs]
    return max(codes)


def init_params(rng):
    params = []
    for n_in, n_out in zip(LAYERS[:-1], LAYERS[1:]):
        bound = 1.0 / np.sqrt(n_in)
        w = rng.uniform(-bound, bound, (n_out, n_in)).astype(np.float32)
        b = rng.uniform(-bound, bound, (n_out,)).astype(np.float32)
        params.append((w, b))
    return params


def run(args):
    import jax
    jax.config.update("jax_num_cpu_devices", args.devices)
    if args.processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"localhost:{args.port}",
                                   num_processes=args.processes, process_id=args.process_id)
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    ndev = jax.device_count()
    mesh = jax.make_mesh((ndev,), ("batch",))
    batch_size = args.per_device_batch * ndev
    rng = np.random.default_rng(0)
    host_params = init_params(rng)
    inputs = rng.standard_normal((batch_size, LAYERS[0]), dtype=np.float32)
    labels = rng.standard_normal((batch_size, LAYERS[-1]), dtype=np.float32)

    def global_array(host, spec):
        sharding = NamedSharding(mesh, spec)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    params = jax.tree.map(lambda a: global_array(a, P()), host_params)
    batch = (global_array(inputs, P("batch")), global_array(labels, P("batch")))

    def loss_fun(params, batch):
        x, label = batch
        for w, b in params:
            x = jnp.maximum(x @ w.T + b, 0)
        return jnp.mean((x - label) ** 2)

    grad_fn_jit = jax.jit(jax.value_and_grad(loss_fun))
    loss, _ = grad_fn_jit(params, batch)
    loss.block_until_ready()
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        loss, grads = grad_fn_jit(params, batch)
        jax.block_until_ready((loss, grads))
        times.append(time.perf_counter() - start)
    if jax.process_index() == 0:
        print(json.dumps({"processes": jax.process_count(), "devices": ndev, "batch": batch_size,
                          "median_ms": round(1e3 * float(np.median(times)), 2),
                          "min_ms": round(1e3 * min(times), 2), "steps": args.steps,
                          "loss": float(loss)}), flush=True)
    if args.processes > 1:
        jax.distributed.shutdown()
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--processes", type=int, default=1)
    ap.add_argument("--process-id", type=int, default=None)
    ap.add_argument("--devices", type=int, default=4, help="CPU devices per process")
    ap.add_argument("--per-device-batch", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--port", type=int, default=12355)
    args = ap.parse_args()
    if args.processes > 1 and args.process_id is None:
        sys.exit(launch(args))
    sys.exit(run(args))


if __name__ == "__main__":
    main()
