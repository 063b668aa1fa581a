"""Runs spmd's benchmarks and the same workloads in JAX in one go, and prints spmd/JAX ratios.

Usage: python3 bench/compare/run.py [--build build] [--quick] [--reps 5] [--filter REGEX]
The spmd side is build/bench/spmd_bench (Google Benchmark, medians of repetitions); the JAX side
times jax.jit'd functions (and one eager jnp.add) with block_until_ready, median of repeats.
Ratio = spmd time / JAX time: below 1 means spmd is faster.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time


def run_spmd(build, reps):
    exe = os.path.join(build, "bench", "spmd_bench")
    out = subprocess.run([exe, "--benchmark_format=json", f"--benchmark_repetitions={reps}",
                          "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.2",
                          f"--benchmark_filter={FILTER.pattern or '.'}"],
                         check=True, capture_output=True, text=True).stdout
    result = {}
    for b in json.loads(out)["benchmarks"]:
        # One repetition reports the run itself; several report their median.
        if reps > 1 and b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        seconds = b["real_time"] * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
        result[name] = seconds
    return result


# Only workloads whose Google Benchmark name matches this (--filter) run, on both sides.
FILTER = re.compile("")


def timed(res, key, f, *args, **kwargs):
    """Times f(*args) in JAX as time_jax does, into res[key], when key passes --filter."""
    if FILTER.search(key):
        res[key] = time_jax(f, *args, **kwargs)


def time_jax(f, *args, repeats=7):
    import jax
    jax.block_until_ready(f(*args))  # compile and warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_jax(quick):
    import jax
    import jax.numpy as jnp
    key = jax.random.key(7)
    res = {}
    sizes = [256, 512, 1024, 2048] + ([] if quick else [4096])
    mm = jax.jit(jnp.matmul)
    for n in sizes:
        a = jax.random.uniform(key, (n, n), minval=-2, maxval=2)
        timed(res, f"BM_Matmul/{n}/real_time", mm, a, a)
    ops = {"Add": jax.jit(jnp.add), "Sin": jax.jit(jnp.sin), "Tanh": jax.jit(jnp.tanh),
           "Exp": jax.jit(jnp.exp)}
    for n in [1 << 20, 1 << 22, 1 << 24] + ([] if quick else [1 << 26]):
        x = jax.random.uniform(key, (n,), minval=-2, maxval=2)
        for name, f in ops.items():
            args = (x, x) if name == "Add" else (x,)
            timed(res, f"BM_{name}/{n}/real_time", f, *args)
    chain = jax.jit(lambda x, y: ((x * 2 + y) * 0.5 - x) * y + 1)
    for n in [1 << 20, 1 << 24]:
        x = jax.random.uniform(key, (n,), minval=-2, maxval=2)
        timed(res, f"BM_JitChain/{n}/real_time", chain, x, x)
    def adam(w, g, m, v):
        m2, v2 = m * 0.9 + g * 0.1, v * 0.999 + jnp.square(g) * 0.001
        return w - (m2 / 0.1) * 1e-3 / (jnp.sqrt(v2 / 0.001) + 1e-8), m2, v2
    adam = jax.jit(adam)
    for n in [1 << 20, 1 << 24]:
        x = jax.random.uniform(key, (n,), minval=-2, maxval=2)
        timed(res, f"BM_JitAdam/{n}/real_time", adam, x, x, x * 0.1, jnp.abs(x))
    x = jax.random.uniform(key, (1 << 24,))
    timed(res, "BM_SumAll/16777216/real_time", jax.jit(jnp.sum), x)
    m = jax.random.uniform(key, (4096, 4096))
    timed(res, "BM_SumAxis/0/real_time", jax.jit(lambda v: jnp.sum(v, 0)), m)
    timed(res, "BM_SumAxis/1/real_time", jax.jit(lambda v: jnp.sum(v, 1)), m)
    a, b = jnp.ones(4), jnp.ones(4)
    jnp.add(a, b).block_until_ready()
    times = []
    for _ in range(2000):
        start = time.perf_counter()
        jnp.add(a, b).block_until_ready()
        times.append(time.perf_counter() - start)
    res["BM_EagerTinyAdd"] = statistics.median(times)
    res.update(run_jax_transforms(quick))
    return res


def run_jax_transforms(quick):
    """The workloads of bench/transforms_bench.cpp."""
    import jax
    import jax.numpy as jnp
    res = {}

    def ten_ops(x):
        for _ in range(5):
            x = jnp.sin(x) * 1.5
        return x
    f = jax.jit(ten_ops)
    x = jnp.ones(8)
    f(x).block_until_ready()
    times = []
    for _ in range(2000):
        start = time.perf_counter()
        f(x).block_until_ready()
        times.append(time.perf_counter() - start)
    res["BM_JitDispatch10Ops"] = statistics.median(times)

    sizes = [784, 1024, 1024, 1024, 10]
    keys = jax.random.split(jax.random.key(0), len(sizes))
    params = [(jax.random.normal(k, (m, n)) / jnp.sqrt(m), jnp.zeros(n))
              for k, m, n in zip(keys, sizes[:-1], sizes[1:])]

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = jnp.dot(h, w) + b
            if i + 1 < len(params):
                h = jax.nn.relu(h)
        log_probs = h - jax.nn.logsumexp(h, axis=1, keepdims=True)
        return -jnp.mean(jnp.sum(log_probs * y, axis=1))

    def sgd_step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, grads)]

    x, y = jnp.zeros((128, 784)), jnp.zeros((128, 10))
    times = []
    for _ in range(3):
        step = jax.jit(lambda p, a, b: sgd_step(p, a, b))  # a new function: nothing cached
        start = time.perf_counter()
        step.lower(params, x, y).compile()
        times.append(time.perf_counter() - start)
    res["BM_MlpTraceCompile/real_time"] = statistics.median(times)
    grad_step = jax.jit(jax.grad(loss))
    for batch in [1024, 8192]:
        xb = jax.random.normal(jax.random.key(1), (batch, 784))
        yb = jnp.ones((batch, 10)) * 0.1
        timed(res, f"BM_MlpGradStep/{batch}/iterations:3/real_time", grad_step, params, xb, yb,
              repeats=3)
    return res


def run_jax_parallel(quick):
    """The pmap workloads of bench/parallel_bench.cpp, on 8 host devices (run in a child process:
    the device count is fixed when JAX starts)."""
    # On 2 cores a device can take longer than XLA:CPU's 40 s to reach a collective (JAX aborts
    # with "Termination timeout for all reduce"); the wait is part of the time measured.
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_collective_call_terminate_timeout_seconds=3600 "
                          "--xla_cpu_collective_call_warn_stuck_timeout_seconds=600")
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    import jax.numpy as jnp
    res = {}
    keys = jax.random.split(jax.random.key(0), 8)
    for rows, cols in ([(1000, 1200)] if quick else [(5000, 6000), (1000, 1200)]):
        mats = jax.pmap(lambda k: jax.random.normal(k, (rows, cols)))(keys)
        step = jax.pmap(lambda x: jnp.dot(x, x.T))
        timed(res, f"BM_PmapCookbookMatmul/{rows}/{cols}/real_time", step, mats,
              repeats=3 if rows > 1000 else 7)
    sin = jax.pmap(jnp.sin)
    for side in (8192, 1024):
        x = jax.pmap(lambda v: v)(jax.random.uniform(jax.random.key(1), (8, side * side // 8)))
        timed(res, f"BM_PmapSin/{side}/real_time", sin, x)
    inc = jax.pmap(lambda v: v + 1)
    timed(res, "BM_PmapDispatch/real_time", inc, jnp.arange(8.0), repeats=101)
    res.update(run_jax_collectives(quick))
    res.update(run_jax_partition())
    return res


def auto_mesh(shape, names):
    from jax.sharding import AxisType
    import jax
    return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape))


def run_jax_partition():
    """The workloads of bench/partition_bench.cpp: computation following the shardings of
    committed arrays, eager and under jit, on 8 host devices."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    res = {}
    x = jax.random.uniform(jax.random.key(1), (8192, 8192), minval=-2, maxval=2)
    mesh = auto_mesh((4, 2), ("a", "b"))
    if FILTER.search("BM_PartitionSin/"):
        timed(res, "BM_PartitionSin/mesh_4x2/real_time", jnp.sin,
              jax.device_put(x, NamedSharding(mesh, P("a", "b"))))
        timed(res, "BM_PartitionSin/single/real_time", jnp.sin,
              jax.device_put(x, jax.devices()[0]))
    if FILTER.search("BM_PartitionMatmul/8192/real_time"):
        lhs = jax.device_put(x, NamedSharding(mesh, P("a", None)))
        rhs = jax.device_put(x, NamedSharding(mesh, P(None, "b")))
        timed(res, "BM_PartitionMatmul/8192/real_time", jnp.matmul, lhs, rhs, repeats=3)
    res.update(run_jax_partition_mlp())
    return res


def mlp_placements():
    """The seed's placements of the MLP's (params, batch): one device, 8-way data parallel, and
    4-way data parallel with 2-way tensor parallel layers 2 and 3."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P
    dp = auto_mesh((8,), ("batch",))
    tp = auto_mesh((4, 2), ("batch", "model"))
    rep = NamedSharding(tp, P())
    model = [(rep, rep), (NamedSharding(tp, P(None, "model")), NamedSharding(tp, P("model"))),
             (NamedSharding(tp, P("model", None)), rep), (rep, rep)]
    data = NamedSharding(tp, P("batch", None))
    return {"single": (jax.devices()[0], jax.devices()[0]),
            "data_8": (NamedSharding(dp, P()), NamedSharding(dp, P("batch"))),
            "data_4_model_2": (model, (data, data))}


def run_jax_partition_mlp():
    """jit(grad(loss)) of the seed's MLP in JAX's functional form (seed 002), batch 8192: the step
    time per placement, and the first call's trace, lowering and compilation."""
    import jax
    import jax.numpy as jnp
    res = {}
    layer_sizes, batch_size = [784, 1024, 1024, 1024, 10], 8192

    def predict(params, inputs):
        for w, b in params:
            outputs = jnp.dot(inputs, w) + b
            inputs = jnp.maximum(outputs, 0)
        return outputs

    def loss(params, batch):
        inputs, targets = batch
        return jnp.mean(jnp.sum((predict(params, inputs) - targets)**2, axis=-1))

    keys = jax.random.split(jax.random.key(0), len(layer_sizes) + 2)
    params = [(jax.random.normal(k, (m, n)) / jnp.sqrt(m), jax.random.normal(k2, (n,)))
              for (k, k2), m, n in zip(map(jax.random.split, keys), layer_sizes[:-1],
                                       layer_sizes[1:])]
    batch = (jax.random.normal(keys[-2], (batch_size, layer_sizes[0])),
             jax.random.normal(keys[-1], (batch_size, layer_sizes[-1])))
    gradfun = jax.jit(jax.grad(loss))
    for name, (param_sharding, batch_sharding) in mlp_placements().items():
        step_key = f"BM_PartitionMlpGradStep/{name}/iterations:3/real_time"
        compile_key = f"BM_PartitionMlpCompile/{name}/real_time"
        if not (FILTER.search(step_key) or FILTER.search(compile_key)):
            continue
        p = jax.device_put(params, param_sharding)
        b = jax.device_put(batch, batch_sharding)
        timed(res, step_key, gradfun, p, b, repeats=3)
        if FILTER.search(compile_key):
            times = []
            for _ in range(3):
                fresh = jax.jit(jax.grad(lambda q, d: loss(q, d)))  # nothing cached
                start = time.perf_counter()
                fresh.lower(p, b).compile()
                times.append(time.perf_counter() - start)
            res[compile_key] = statistics.median(times)
    return res


def collective_counts(name, nbytes, n):
    """Per-device input float count for a collective of nccl-tests size `nbytes` on n devices:
    the per-member buffer for psum and all_to_all, the gathered output for all_gather, the summed
    input for psum_scatter (as bench/collectives_bench.cpp)."""
    return nbytes // 4 // n if name == "all_gather" else nbytes // 4


def bus_factor(name, n):
    return 2 * (n - 1) / n if name == "psum" else (n - 1) / n


def run_jax_collectives(quick):
    """BM_PmapCollective of bench/parallel_bench.cpp: a pmap over the first n devices calling one
    collective on an input already on those devices. The 4 KiB results are checked against NumPy."""
    import jax
    import numpy as np
    collectives = {
        "psum": lambda v: jax.lax.psum(v, "i"),
        "all_gather": lambda v: jax.lax.all_gather(v, "i", axis=0, tiled=True),
        "psum_scatter": lambda v: jax.lax.psum_scatter(v, "i", scatter_dimension=0, tiled=True),
        "all_to_all": lambda v: jax.lax.all_to_all(v, "i", 0, 0, tiled=True),
    }
    res = {}
    for name, body in collectives.items():
        for n in (2, 4, 8):
            devices = jax.devices()[:n]
            f = jax.pmap(body, axis_name="i", devices=devices)
            for nbytes in [4096, 4194304] + ([] if quick else [67108864]):
                key = f"BM_PmapCollective/{name}/n:{n}/bytes:{nbytes}/real_time"
                if not FILTER.search(key):
                    continue
                count = collective_counts(name, nbytes, n)
                # Small integers, so every sum is exact; the identity pmap places the blocks on
                # the devices, so the timing includes no host-to-device copy.
                host = (np.arange(n * count) % 61).astype(np.float32).reshape(n, count)
                x = jax.pmap(lambda v: v, devices=devices)(host)
                if nbytes == 4096:
                    check_collective(name, np.asarray(f(x)), host)
                res[key] = time_jax(f, x, repeats=3 if nbytes > 4194304 else 21)
    return res


def check_collective(name, got, host):
    """Raises unless `got` (n rows, one per device) is the collective of the n rows of `host`."""
    import numpy as np
    n, count = host.shape
    if name == "psum":
        want = np.broadcast_to(host.sum(0), (n, count))
    elif name == "all_gather":
        want = np.broadcast_to(host.reshape(-1), (n, n * count))
    elif name == "psum_scatter":
        want = host.sum(0).reshape(n, count // n)
    else:
        # Device d receives chunk d of every device, in device order.
        want = host.reshape(n, n, count // n).transpose(1, 0, 2).reshape(n, count)
    if got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"JAX {name} on {n} devices gave a wrong result")


def fmt(seconds):
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.2f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--quick", action="store_true", help="skip the largest sizes")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--filter", default="",
                    help="only the workloads whose benchmark name matches this regex")
    ap.add_argument("--jax-parallel-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    global FILTER
    FILTER = re.compile(args.filter)
    if args.jax_parallel_child:
        print(json.dumps(run_jax_parallel(args.quick)))
        return 0
    try:
        import jax  # noqa: F401
    except ImportError:
        print("JAX not installed: pip install jax to compare")
        return 0
    spmd = run_spmd(args.build, args.reps)
    jaxr = run_jax(args.quick)
    child = subprocess.run([sys.executable, __file__, "--jax-parallel-child",
                            f"--filter={args.filter}"] + (["--quick"] if args.quick else []),
                           check=True, capture_output=True, text=True).stdout
    jaxr.update(json.loads(child.strip().splitlines()[-1]))
    print(f"{'workload':50} {'spmd':>11} {'JAX':>11} {'spmd/JAX':>9}  limit")
    memcpy2 = spmd.get("BM_Memcpy/67108864/2/real_time")
    for name, t in spmd.items():
        if name.startswith(("BM_RawSgemm", "BM_Memcpy")):
            continue
        j = jaxr.get(name)
        limit = ""
        parts = name.split("/")
        if parts[0] in ("BM_Matmul", "BM_PartitionMatmul"):
            raw = spmd.get(f"BM_RawSgemm/{parts[1]}/real_time")
            n = int(parts[1])
            limit = f"{raw / t * 100:5.1f} % of raw sgemm, " if raw else ""
            limit += f"{2 * n**3 / t * 1e-9:6.1f} GFLOP/s"
        elif parts[0] == "BM_PartitionSin" and parts[1] == "mesh_4x2":
            single = spmd.get("BM_PartitionSin/single/real_time")
            limit = f"{t / single:5.2f} x the single-device time" if single else ""
        elif parts[0] in ("BM_Add", "BM_Sin", "BM_Tanh", "BM_Exp") and memcpy2:
            n = int(parts[1])
            streams = 3 if parts[0] == "BM_Add" else 2
            bw = n * 4 * streams / t
            mem_bw = (1 << 26) * 4 * 2 / memcpy2
            limit = f"{bw * 1e-9:6.1f} GB/s = {bw / mem_bw * 100:5.1f} % of memcpy"
        elif parts[0] == "BM_PmapCollective":
            n, nbytes = int(parts[2].split(":")[1]), int(parts[3].split(":")[1])
            limit = f"busbw {nbytes / t * bus_factor(parts[1], n) * 1e-9:6.2f} GB/s"
        ratio = f"{t / j:9.2f}" if j else "        -"
        print(f"{name.replace('/real_time', ''):50} {fmt(t):>11} {fmt(j) if j else '-':>11} "
              f"{ratio}  {limit}")
    for name in ("BM_Memcpy/67108864/1/real_time", "BM_Memcpy/67108864/2/real_time"):
        if name in spmd:
            bw = (1 << 26) * 4 * 2 / spmd[name]
            print(f"{name.replace('/real_time', ''):50} {fmt(spmd[name]):>11} "
                  f"{'':>11} {'':>9}  {bw * 1e-9:6.1f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
