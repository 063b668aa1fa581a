"""Records what real JAX prints and computes for the code cells of seed 002 (Distributed arrays and
automatic parallelization), so its C++ twin examples/distributed_arrays.cpp can be tested.

The seed is written with torchax; its commented JAX code and JAX's own tutorial are what runs here:
jax.random.normal for torch.randn, jnp.sin / jnp.matmul / jnp.copy / jnp.ones_like / jnp.arange,
jax.lax.with_sharding_constraint, jax.jit, and the torch-style neural network (Model, state_dict,
functional_call, MSELoss, value_and_grad, optax.sgd) written in JAX over an OrderedDict of params
named as torch names them, initialised as spmd::nn initialises it (torch's RNG is not
reproducible). Arrays and losses are shown as JAX shows them, without torchax's Tensor wrapper.

Cells run as gen_seeds.py runs them (one namespace, stdout captured, a trailing expression's repr
appended). The goldens are recorded at the SMALL size the test runs (x 512 x 512, a network
[49, 64, 64, 64, 10] on a batch of 512, timing loops 1 x 1); the same cells are then run at the
seed's FULL size (8192 x 8192, [784, 1024, 1024, 1024, 10], batch 8192), and MANIFEST_002.md says
for each cell whether its text is the same there, else shows the full-size text. Timing cells
(%timeit) are recorded as the form of IPython's line, with <mean> and <std> for the times.
Writes, under tests/goldens/seeds/: 002_<nn>_<slug>.txt, 002_values.npz, MANIFEST_002.md.
Run: python3 tools/goldens/gen_seed002.py   (needs jax 0.10.2; the tests do not)
"""
import math
import os
import re
import textwrap
import time

# At full size a device can take longer than XLA:CPU's 40 s to reach an all-reduce on a busy
# machine, which aborts the process; the values do not depend on the wait.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_collective_call_terminate_timeout_seconds=3600 "
                      "--xla_cpu_collective_call_warn_stuck_timeout_seconds=600")

from gen_seeds import OUT, run_source, write_text  # also configures 8 CPU devices, no colour

import jax  # noqa: E402
import jaxlib  # noqa: E402
import numpy as np  # noqa: E402

SMALL = {"N": 512, "BATCH": 512, "LAYERS": [49, 64, 64, 64, 10], "LOOPS": 1}
FULL = {"N": 8192, "BATCH": 8192, "LAYERS": [784, 1024, 1024, 1024, 10], "LOOPS": 1}
TIMING_FORM = "<mean> ± <std> per loop (mean ± std. dev. of {runs}, {loops} each)"

# make_mesh gives Explicit axes by default since JAX 0.9; the tutorial (and spmd) mean Auto ones.
AUTO2 = "axis_types=(AxisType.Auto, AxisType.Auto)"

# (nn, In[], slug, source, notes, values). Sources use N, BATCH, LAYERS, LOOPS from the size.
# `values` maps a key suffix to an expression stored in 002_values.npz.
CELLS = [
    (1, 2, "devices", """
        from typing import Optional

        import numpy as np

        import jax
        import jax.numpy as jnp

        jax.config.update('jax_num_cpu_devices', 8)
        print(jax.devices())
        """, "", {}),
    (3, 4, "check_devices", """
        if len(jax.local_devices()) < 8:
          raise Exception("Notebook requires 8 devices to run")
        """, "", {}),
    (4, 5, "imports", """
        from jax.sharding import PartitionSpec as P, NamedSharding
        from jax.sharding import AxisType
        """, "ADDED the AxisType import, for make_mesh's axis_types.", {}),
    (5, 6, "make_mesh_xy", f"""
        # Create a Sharding object to distribute a value across devices:
        mesh = jax.make_mesh((4, 2), ('x', 'y'), {AUTO2})
        """, "", {}),
    (6, 7, "device_put_xy", """
        # Create an array of random values:
        x = jax.random.normal(jax.random.key(0), (N, N))
        # and use jax.device_put to distribute it across devices:
        y = jax.device_put(x, NamedSharding(mesh, P('x', 'y')))
        jax.debug.visualize_array_sharding(y)
        """, "", {"x_row0": "x[0, :8]", "x_sum": "jnp.sum(x)"}),
    (7, 8, "sin_y", """
        z = jnp.sin(y)
        jax.debug.visualize_array_sharding(z)
        """, "Computation follows sharding: z has y's sharding.", {}),
    (8, 9, "timeit_sin_x", """
        # `x` is present on a single device
        %timeit -n LOOPS -r LOOPS jnp.sin(x).block_until_ready()
        """, "", {}),
    (9, 10, "timeit_sin_y", """
        # `y` is sharded across 8 devices.
        %timeit -n LOOPS -r LOOPS jnp.sin(y).block_until_ready()
        """, "", {}),
    (10, 11, "random_x", """
        import jax
        x = jax.random.normal(jax.random.key(0), (N, N))
        """, "", {}),
    (11, 12, "visualize_x", "jax.debug.visualize_array_sharding(x)", "", {}),
    (12, 13, "device_put_ab", f"""
        from jax.sharding import Mesh, PartitionSpec, NamedSharding

        P = PartitionSpec

        mesh = jax.make_mesh((4, 2), ('a', 'b'), {AUTO2})
        y = jax.device_put(x, NamedSharding(mesh, P('a', 'b')))
        jax.debug.visualize_array_sharding(y)
        """, "", {}),
    (13, 14, "mesh_sharding", f"""
        default_mesh = jax.make_mesh((4, 2), ('a', 'b'), {AUTO2})

        def mesh_sharding(
            pspec: PartitionSpec, mesh: Optional[Mesh] = None,
          ) -> NamedSharding:
          if mesh is None:
            mesh = default_mesh
          return NamedSharding(mesh, pspec)
        """, "", {}),
    (14, 15, "p_a_b", """
        y = jax.device_put(x, mesh_sharding(P('a', 'b')))
        jax.debug.visualize_array_sharding(y)
        """, "", {}),
    (15, 16, "p_b_a", """
        y = jax.device_put(x, mesh_sharding(P('b', 'a')))
        jax.debug.visualize_array_sharding(y)
        """, "", {}),
    (16, 17, "p_a_none", """
        # This `None` means that `x` is not sharded on its second dimension,
        # and since the Mesh axis name 'b' is not mentioned, shards are
        # replicated across it.
        y = jax.device_put(x, mesh_sharding(P('a', None)))
        jax.debug.visualize_array_sharding(y)
        """, "", {}),
    (17, 18, "p_none_b", """
        y = jax.device_put(x, mesh_sharding(P(None, 'b')))
        jax.debug.visualize_array_sharding(y)
        """, "", {}),
    (18, 19, "p_none_a", """
        y = jax.device_put(x, mesh_sharding(P(None, 'a')))
        jax.debug.visualize_array_sharding(y)
        """, "", {}),
    (19, 20, "p_ab_none", """
        y = jax.device_put(x, mesh_sharding(P(('a', 'b'), None)))
        jax.debug.visualize_array_sharding(y)
        """, "", {}),
    (20, 21, "make_mesh_ab", f"mesh = jax.make_mesh((4, 2), ('a', 'b'), {AUTO2})", "", {}),
    (21, 22, "sin_sharded", """
        x = jax.device_put(x, NamedSharding(mesh, P('a', 'b')))
        print('input sharding:')
        jax.debug.visualize_array_sharding(x)

        y = jnp.sin(x)
        print('output sharding:')
        jax.debug.visualize_array_sharding(y)
        """, "", {"y_row0": "y[0, :8]"}),
    (22, 23, "matmul_sharded", """
        y = jax.device_put(x, NamedSharding(mesh, P('a', None)))
        z = jax.device_put(x, NamedSharding(mesh, P(None, 'b')))
        print('lhs sharding:')
        jax.debug.visualize_array_sharding(y)
        print('rhs sharding:')
        jax.debug.visualize_array_sharding(z)

        w = jnp.matmul(y, z)
        print('out sharding:')
        jax.debug.visualize_array_sharding(w)
        """, "", {"w_corner": "w[:4, :4]"}),
    (23, 24, "x_single", """
        x_single = jax.device_put(x, jax.devices()[0])
        jax.debug.visualize_array_sharding(x_single)
        """, "", {}),
    (24, 25, "allclose", """
        bool(np.allclose(jnp.matmul(x_single, x_single), jnp.matmul(y, z)))
        """, "ADAPTED: torch.allclose(a.cpu(), b.cpu()) is NumPy's allclose on the host (same "
        "default tolerances), made a Python bool as torch.allclose returns one (NumPy 2 would "
        "display np.True_).", {}),
    (25, 26, "timeit_matmul_single", """
        %timeit -n LOOPS -r LOOPS jnp.matmul(x_single, x_single).block_until_ready()
        """, "", {}),
    (26, 27, "timeit_matmul_sharded", """
        %timeit -n LOOPS -r LOOPS jnp.matmul(y, z).block_until_ready()
        """, "", {}),
    (27, 28, "copy", """
        w_copy = jnp.copy(w)
        jax.debug.visualize_array_sharding(w_copy)
        """, "", {}),
    (28, 29, "print_exception", """
        import textwrap

        def print_exception(e):
          name = f'{type(e).__name__}'
          print(textwrap.fill(f'{name}: {str(e)}'))
        """, "ADAPTED: without termcolor (the name is not coloured).", {}),
    (29, 30, "incompatible_devices", """
        sharding1 = NamedSharding(Mesh(jax.devices()[:4], 'x'), P('x'))
        sharding2 = NamedSharding(Mesh(jax.devices()[4:], 'x'), P('x'))

        y = jax.device_put(x, sharding1)
        z = jax.device_put(x, sharding2)
        try: y + z
        except ValueError as e: print_exception(e)
        """, "The message names the shape, so it differs at full size.", {}),
    (30, 31, "permuted_devices", """
        devices = jax.devices()
        permuted_devices = [devices[i] for i in [0, 1, 2, 3, 6, 7, 4, 5]]

        sharding1 = NamedSharding(Mesh(devices, 'x'), P('x'))
        sharding2 = NamedSharding(Mesh(permuted_devices, 'x'), P('x'))

        y = jax.device_put(x, sharding1)
        z = jax.device_put(x, sharding2)
        try: y + z
        except ValueError as e: print_exception(e)
        """, "The message names the shape, so it differs at full size.", {}),
    (31, 32, "uncommitted", """
        y = jax.device_put(x, sharding1)
        y + jnp.ones_like(y)
        y + jnp.arange(y.size).reshape(y.shape)
        print('no error!')
        """, "", {}),
    (32, 33, "make_mesh_xy_again", f"mesh = jax.make_mesh((4, 2), ('x', 'y'), {AUTO2})", "", {}),
    (33, 34, "random_x_again", "x = jax.random.normal(jax.random.key(0), (N, N))", "", {}),
    (34, 35, "f_constraint_yx", """
        @jax.jit
        def f(x):
          x = x + 1
          y = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P('y', 'x')))
          return y
        """, "", {}),
    (35, 36, "f_yx", """
        jax.debug.visualize_array_sharding(x)
        y = f(x)
        jax.debug.visualize_array_sharding(y)
        """, "", {"y_row0": "y[0, :8]"}),
    (36, 37, "f_constraint_replicated", """
        @jax.jit
        def f(x):
          x = x + 1
          y = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P()))
          return y
        """, "", {}),
    (37, 38, "f_replicated", """
        jax.debug.visualize_array_sharding(x)
        y = f(x)
        jax.debug.visualize_array_sharding(y)
        """, "The seed's torchax run shows only x's picture; JAX draws y too.", {}),
    (38, 44, "nn_imports", """
        import jax
        import jax.numpy as jnp
        """, "", {}),
    (39, 45, "model", """
        from collections import OrderedDict

        def linear_init(key, n_in, n_out):
          kw, kb = jax.random.split(key)
          bound = 1 / np.sqrt(n_in)
          weight = jax.random.uniform(kw, (n_out, n_in), jnp.float32, -bound, bound)
          bias = jax.random.uniform(kb, (n_out,), jnp.float32, -bound, bound)
          return weight, bias

        class Model:

          def __init__(self, layer_sizes, key):
            keys = jax.random.split(key, len(layer_sizes) - 1)
            self.params = OrderedDict()
            for i, (in_, out) in enumerate(zip(layer_sizes[:-1], layer_sizes[1:])):
              weight, bias = linear_init(keys[i], in_, out)
              self.params[f'layers.{i}.weight'] = weight
              self.params[f'layers.{i}.bias'] = bias

          def state_dict(self):
            return OrderedDict(self.params)

          def forward(self, params, x):
            for i in range(len(params) // 2):
              x = x @ params[f'layers.{i}.weight'].T + params[f'layers.{i}.bias']
              x = jnp.maximum(x, 0)
            return x

          def __call__(self, x):
            return self.forward(self.params, x)
        """, "ADAPTED: the seed's torch Model in JAX, drawn as spmd::nn draws it: "
        "Model(layer_sizes, key) splits key into one key per layer, and Linear(in_, out, key) "
        "splits its key into kw, kb for a weight [out, in] and a bias [out] uniform in "
        "±1/√in_ (torch's bounds; torch's RNG is not reproducible).", {}),
    (41, 47, "sizes", """
        layer_sizes = LAYERS
        batch_size = BATCH
        """, "The seed's live lines (init_model is commented out).", {}),
    (42, 48, "model_inputs", """
        model = Model(layer_sizes, jax.random.key(0))
        inputs = jax.random.normal(jax.random.key(1), (batch_size, layer_sizes[0]))
        """, "ADAPTED: keys 0 and 1 for torch's global RNG; no model.to('jax').",
     {"weight0_corner": "model.params['layers.0.weight'][:2, :4]",
      "bias3": "model.params['layers.3.bias']", "inputs_row0": "inputs[0, :8]"}),
    (43, 49, "model_call", "model(inputs)",
     "The array as JAX displays it; torchax's Tensor(<class 'jaxlib._jax.ArrayImpl'> ...) "
     "wrapper is not reproduced.", {"corner": "model(inputs)[:4, :4]"}),
    (44, 50, "functional_loss", """
        params = model.state_dict()

        # make a function that takes weight as input
        def pure_model_fun(weights, inputs):
          return model.forward(weights, inputs)

        def torch_loss(input, target):
          return jnp.mean((input - target) ** 2)

        def loss_fun(weight, batch):
          inputs, label = batch
          res = pure_model_fun(weight, inputs)
          return torch_loss(res, label)

        grad_fn = jax.value_and_grad(loss_fun)
        grad_fn_jit = jax.jit(grad_fn)
        loss_jit = jax.jit(loss_fun)
        """, "ADAPTED: torch.func.functional_call is the forward on the given params, "
        "torch.nn.MSELoss() the mean of the squared differences, tx.interop's jax_value_and_grad "
        "and jax_jit are jax.value_and_grad and jax.jit.", {}),
    (45, 51, "mesh_batch", "mesh = jax.make_mesh((8,), ('batch',), axis_types=(AxisType.Auto,))",
     "", {}),
    (46, 52, "shardings", """
        sharding = NamedSharding(mesh, P('batch'))
        replicated_sharding = NamedSharding(mesh, P())
        """, "", {}),
    (47, 53, "batch_device_put", """
        batch = (jax.random.normal(jax.random.key(2), (batch_size, layer_sizes[0])),
                 jax.random.normal(jax.random.key(3), (batch_size, layer_sizes[-1])))

        # jax device put also works on pytrees
        batch = jax.device_put(batch, sharding)
        params = jax.device_put(params, replicated_sharding)
        """, "ADAPTED: keys 2 and 3 for torch.randn.",
     {"inputs_row0": "batch[0][0, :8]", "targets_row0": "batch[1][0]"}),
    (48, 54, "loss_dp", "loss_jit(params, batch)",
     "The array as JAX displays it (no torchax Tensor wrapper).", {"": "loss_jit(params, batch)"}),
    (49, 55, "sgd_dp", """
        step_size = 1e-3

        import optax

        optimizer = optax.sgd(step_size)

        opt_state = optimizer.init(params)


        for i in range(5):
          loss, grads = grad_fn_jit(params, batch)
          updates, opt_state = optimizer.update(grads, opt_state)
          params = optax.apply_updates(params, updates)
          print(i, 'loss is', loss)

        print(loss_jit(params, batch))
        """, "ADAPTED: optax called directly (no tx.interop.call_jax); losses print as JAX prints "
        "them (no torchax Tensor wrapper).", {"": "loss_jit(params, batch)"}),
    (50, 56, "timeit_grad_dp", """
        %timeit -n LOOPS -r LOOPS grad_fn_jit(params, batch)[0].block_until_ready()
        """, "", {}),
    (51, 57, "device_put_single", """
        batch_single = jax.device_put(batch, jax.devices()[0])
        params_single = jax.device_put(params, jax.devices()[0])
        """, "", {}),
    (52, 58, "timeit_grad_single", """
        %timeit -n LOOPS -r LOOPS grad_fn_jit(params_single, batch_single)[0].block_until_ready()
        """, "", {}),
    (53, 59, "mesh_batch_model", f"mesh = jax.make_mesh((4, 2), ('batch', 'model'), {AUTO2})",
     "", {}),
    (54, 60, "batch_4x2", """
        batch = jax.device_put(batch, NamedSharding(mesh, P('batch', None)))
        jax.debug.visualize_array_sharding(batch[0])
        jax.debug.visualize_array_sharding(batch[1])
        """, "", {}),
    (55, 61, "replicated_4x2", "replicated_sharding = NamedSharding(mesh, P())", "", {}),
    (56, 62, "params_keys", "params.keys()", "", {}),
    (57, 63, "name_to_sharding", """
        name_to_sharding = {
            'layers.0.weight': replicated_sharding,
            'layers.0.bias': replicated_sharding,
            'layers.1.weight': NamedSharding(mesh, P('model')), # column parallel
            'layers.1.bias': NamedSharding(mesh, P('model')),
            'layers.2.weight': NamedSharding(mesh, P(None, 'model')),
            'layers.2.bias': replicated_sharding,
            'layers.3.weight': replicated_sharding,
            'layers.3.bias': replicated_sharding
        }

        for name, tensor in params.items():
          params[name] = jax.device_put(tensor, name_to_sharding[name])
        """, "ADAPTED: torchax's in-place tensor.apply_jax_(jax.device_put, ...) replaces the "
        "entry.", {}),
    (58, 64, "visualize_layers1_weight",
     "jax.debug.visualize_array_sharding(params['layers.1.weight'])", "", {}),
    (59, 65, "visualize_layers2_weight",
     "jax.debug.visualize_array_sharding(params['layers.2.weight'])", "", {}),
    (60, 66, "loss_4x2", "print(loss_jit(params, batch))", "", {"": "loss_jit(params, batch)"}),
    (61, 67, "sgd_4x2", """
        step_size = 1e-3

        import optax

        optimizer = optax.sgd(step_size)

        opt_state = optimizer.init(params)


        for i in range(5):
          loss, grads = grad_fn_jit(params, batch)
          updates, opt_state = optimizer.update(grads, opt_state)
          params = optax.apply_updates(params, updates)
          print(i, 'loss is', loss)

        print(loss_jit(params, batch))
        """, "ADAPTED as cell 49.", {"": "loss_jit(params, batch)"}),
    (62, 68, "loss_after", "print(loss_jit(params, batch))", "", {}),
    (63, 69, "visualize_params_after", """
        jax.debug.visualize_array_sharding(params['layers.1.weight'])
        jax.debug.visualize_array_sharding(params['layers.2.weight'])
        """, "", {}),
    (64, 70, "timeit_grad_4x2", """
        %timeit -n LOOPS -r LOOPS grad_fn_jit(params, batch)[0].block_until_ready()
        """, "", {}),
]

NOT_RECORDED = [
    (0, 1, "pip install termcolor", "installs termcolor; print_exception here does not colour"),
    (2, 3, "import torchax", "torchax setup (prints only warnings on stderr)"),
    (40, 46, "# loss_jit = jax.jit(loss)", "every line of the cell is commented out"),
]

TIMEIT = re.compile(r"%timeit -n LOOPS -r LOOPS (.*)")


def format_time(seconds):
    """IPython's _format_time (3 significant digits, s/ms/µs/ns)."""
    order = min(-int(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0 else 3
    return "%.*g %s" % (3, seconds * (1, 1e3, 1e6, 1e9)[order], ("s", "ms", "µs", "ns")[order])


def timing_form(loops):
    plural = "" if loops == 1 else "s"
    return TIMING_FORM.format(runs=f"{loops} run{plural}", loops=f"{loops:,} loop{plural}")


def timeit(stmt, ns, loops):
    """%timeit -n loops -r loops: the form of IPython's line (times hidden), then the line."""
    runs = []
    for _ in range(loops):
        start = time.perf_counter()
        for _ in range(loops):
            eval(stmt, ns)
        runs.append((time.perf_counter() - start) / loops)
    line = timing_form(loops).replace("<mean>", format_time(float(np.mean(runs))))
    line = line.replace("<std>", format_time(float(np.std(runs))))
    return timing_form(loops) + "\n", line + "\n"


def run_cell(source, ns, size):
    """The cell's text as recorded and as IPython printed it (they differ for %timeit only)."""
    m = TIMEIT.search(source)
    if m:
        return timeit(m.group(1), ns, size["LOOPS"])
    for name, value in size.items():
        source = re.sub(rf"\b{name}\b", repr(value), source)
    text, _ = run_source(source, ns)
    return text, text


def run_all(size):
    """Every cell at `size`: {nn: (recorded text, printed text)} and the npz values."""
    ns, texts, values = {}, {}, {}
    for nn, _, slug, source, _, vals in CELLS:
        texts[nn] = run_cell(textwrap.dedent(source).strip("\n"), ns, size)
        for suffix, expr in vals.items():
            key = f"{nn:02d}_{slug}" + (f"_{suffix}" if suffix else "")
            values[key] = np.asarray(eval(expr, ns))
    return texts, values


def write_manifest(small, full, values):
    lines = [
        "# Seed 002 goldens: Distributed arrays and automatic parallelization",
        "",
        f"Written by tools/goldens/gen_seed002.py with JAX {jax.__version__} (jaxlib "
        f"{jaxlib.__version__}), NumPy {np.__version__}, on {jax.device_count()} CPU devices, "
        "x64 off. Cells are recorded as in MANIFEST.md (gen_seeds.py's run_source); `nn` counts "
        "the seed's code cells from 00 and the seed's `In [k]` is given too.",
        "",
        "The seed runs torchax; what runs here is its commented JAX code and JAX's tutorial: "
        "`jax.random.normal(jax.random.key(0), ...)` for torch.randn, jnp for torch ops, "
        "`jax.lax.with_sharding_constraint` for `x.shard_`. The torch Model is written in JAX over "
        "an OrderedDict of params with torch's names (`layers.0.weight`, ...), drawn as "
        "spmd::nn draws them (`Model(layer_sizes, key)`: one key per layer from "
        "`jax.random.split(key, len(layer_sizes) - 1)`; each Linear splits its key into `kw, kb` "
        "for a weight [out, in] and a bias [out] uniform in ±1/√in), because torch's RNG is not "
        "reproducible; torch.randn draws are `jax.random.normal` with keys 1 (the inputs of "
        "cell 42), 2 and 3 (the batch of cell 47). functional_call is the forward on given "
        "params, MSELoss the mean squared difference, and optax.sgd runs as it is.",
        "",
        "Printing: torchax shows arrays and losses as `Tensor(<class 'jaxlib._jax.ArrayImpl'> "
        "...)`; that wrapper is not reproduced. `model(inputs)` and `loss_jit(params, batch)` "
        "are shown as JAX displays an array (`Array(..., dtype=float32)`), printed losses as "
        "JAX prints them (`1.0034581`).",
        "",
        "ADAPTED everywhere: `jax.make_mesh(..., axis_types=(AxisType.Auto, ...))`. JAX 0.10.2's "
        "make_mesh defaults to Explicit axes; the tutorial's computation-follows-sharding is the "
        "Auto behaviour (spmd's meshes are Auto).",
        "",
        "## Sizes",
        "",
        f"The `.txt` files and `002_values.npz` are at the SMALL size the test runs "
        f"(`distributed_arrays --small`): N = {SMALL['N']}, batch {SMALL['BATCH']}, layers "
        f"{SMALL['LAYERS']}, %timeit loops {SMALL['LOOPS']} x {SMALL['LOOPS']} (the sources below "
        f"name them N, BATCH, LAYERS and LOOPS). The seed's FULL "
        f"size is N = {FULL['N']}, batch {FULL['BATCH']}, layers {FULL['LAYERS']}, loops 5 x 5 "
        "(every size divided by 16, keeping each array's aspect ratio, so the pictures are the "
        "same). The script ran every cell at both sizes (timing cells with 1 x 1 loops at both) "
        "and notes below whether each cell's text is identical at full size.",
        "",
        "Timing cells (`%timeit`) are recorded as the form of IPython's line: `<mean>` and "
        "`<std>` stand for times formatted as IPython does (3 significant digits and a unit: "
        "`144 ms`, `1.89 s`, `0 ns`). At full size the line ends `(mean ± std. dev. of 5 runs, "
        "5 loops each)`. The line JAX printed here is in the notes, for scale only.",
        "",
        "## Cells not recorded",
        "",
    ]
    for nn, k, what, why in NOT_RECORDED:
        lines.append(f"- cell {nn:02d} (In [{k}]) `{what}`: {why}.")
    lines += ["", "## Values", "", "`002_values.npz` (small size):", ""]
    lines += [f"- `{key}`: {v.dtype}{list(v.shape)}" for key, v in values.items()]
    lines += ["", "## Files", ""]
    for nn, k, slug, source, notes, _ in CELLS:
        name = f"002_{nn:02d}_{slug}.txt"
        text, printed = small[nn]
        full_text = full[nn][0]
        notes = [notes] if notes else []
        if text != printed:
            notes.append(f"JAX printed here: `{printed.strip()}`.")
        if full_text == text:
            notes.append("Full size: the same text.")
        else:
            notes.append("Full size: the text is\n\n```text\n" + full_text.rstrip("\n") + "\n```")
        lines += [f"### {name}", "", f"seed 002, code cell {nn} (In [{k}]).", ""]
        lines += ["\n".join(notes), ""]
        lines += ["```python", textwrap.dedent(source).strip("\n"), "```", "", "Expected text:", ""]
        lines += ["```text", text.rstrip("\n") if text else "(empty file)", "```", ""]
    write_text("MANIFEST_002.md", "\n".join(lines))


def main():
    small, values = run_all(SMALL)
    for nn, _, slug, _, _, _ in CELLS:
        write_text(f"002_{nn:02d}_{slug}.txt", small[nn][0])
    full, full_values = run_all(FULL)
    for key in ("48_loss_dp", "49_sgd_dp", "60_loss_4x2", "61_sgd_4x2"):
        values[f"full_{key}"] = full_values[key]
    np.savez(os.path.join(OUT, "002_values.npz"), **values)
    write_manifest(small, full, values)


if __name__ == "__main__":
    main()
