"""Records what real JAX prints and computes for the code cells of seeds 000 (Pmap Cookbook) and
001 (shard_map tutorial), so the C++ twins of those programs under examples/ can be tested.

Each cell runs like a notebook cell: its source is exec'd in one namespace per seed, stdout is
captured, and when the last statement is an expression its repr (what the notebook displays) is
appended. Writes, under tests/goldens/seeds/:
  <seed>_<nn>_<slug>.txt   the cell's text (nn = index of the code cell in the seed, from 00)
  <seed>_values.npz        numeric results, named <nn>_<slug>[_<what>]
  extra_*.txt              jaxprs of shard_map programs, error messages, debug.print lines
  MANIFEST.md              every file: cell, source as run, adaptations, exact expected text
Cells that current JAX cannot run as written are adapted (nested pmap -> nested vmap with the same
axis names, jax.experimental.shard_map -> jax.shard_map); MANIFEST.md says where.
Run: python3 tools/goldens/gen_seeds.py   (needs jax 0.10.2; the tests do not)
"""
import ast
import contextlib
import io
import os
import textwrap

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# rich (visualize_array_sharding) would emit colour codes if asked to; the goldens are text mode.
os.environ.pop("FORCE_COLOR", None)
import jax  # noqa: E402
import jaxlib  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
jax.config.update("jax_enable_x64", False)
jax.config.update("jax_pprint_use_color", False)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import mesh_utils  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "seeds")
ENTRIES = []  # (file name, title, source, how the text was made, notes, text) for MANIFEST.md
VALUES = {"000": {}, "001": {}}
SKIPPED = []  # (seed, nn, slug, source, part run instead, why)


def run_source(source, ns):
    """Runs `source` as a notebook cell in `ns`; returns stdout plus the repr of a trailing
    expression (followed by a newline) unless it is None, which is what the notebook shows under
    the cell. The second result says whether such a repr was appended."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(tree, "<cell>", "exec"), ns)
        shown = None if last is None else eval(compile(ast.Expression(last.value), "<cell>",
                                                       "eval"), ns)
        # jax.debug.print and other callbacks write asynchronously.
        jax.effects_barrier()
    text = buf.getvalue()
    if shown is not None:
        text += repr(shown) + "\n"
    return text, shown is not None


def write_text(name, text):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        f.write(text)


def cell(seed, nn, slug, source, ns, values=None, notes=""):
    """One code cell. `values` maps a name suffix ("" for the plain name) to an expression
    evaluated in the namespace after the cell; its result goes into <seed>_values.npz."""
    source = textwrap.dedent(source).strip("\n")
    text, displays = run_source(source, ns)
    name = f"{seed}_{nn:02d}_{slug}.txt"
    write_text(name, text)
    how = ("stdout, then the repr of the last expression (the notebook's Out[] display)"
           if displays else "stdout")
    for suffix, expr in (values or {}).items():
        key = f"{nn:02d}_{slug}" + (f"_{suffix}" if suffix else "")
        VALUES[seed][key] = np.asarray(eval(expr, ns))
        notes += f"\nValue `{key}` = `{expr}`."
    ENTRIES.append((name, f"seed {seed}, code cell {nn}", source, how, notes.strip(), text))


def skip(seed, nn, slug, source, ns, run_part, why):
    """A cell not recorded; `run_part` (possibly empty) is the part whose state later cells need."""
    if run_part:
        run_source(textwrap.dedent(run_part), ns)
    SKIPPED.append((seed, nn, slug, textwrap.dedent(source).strip("\n"),
                    textwrap.dedent(run_part).strip("\n"), why))


def extra(name, title, source, text, notes=""):
    write_text(name, text)
    ENTRIES.append((name, title, textwrap.dedent(source).strip("\n"), "as described", notes, text))


def add_note(name, note):
    i = next(i for i, e in enumerate(ENTRIES) if e[0] == name)
    e = ENTRIES[i]
    ENTRIES[i] = e[:4] + ((e[4] + "\n" + note).strip(),) + e[5:]


# ---------------------------------------------------------------------------------------------
# Seed 000: Pmap Cookbook. `pmap` still exists in 0.10.2 (implemented as jit(shard_map)).
# ---------------------------------------------------------------------------------------------
def seed_000():
    ns = {}
    cell("000", 0, "import_jnp", "import jax.numpy as jnp", ns)
    cell("000", 1, "import_pmap", "from jax import pmap", ns)
    cell("000", 2, "pmap_square_arange7", """
        result = pmap(lambda x: x ** 2)(jnp.arange(7))
        print(result)
        """, ns, values={"": "result"})
    cell("000", 3, "vmap_pmap_add", """
        from jax import vmap

        x = jnp.array([1., 2., 3.])
        y = jnp.array([2., 4., 6.])

        print(vmap(jnp.add)(x, y))
        print(pmap(jnp.add)(x, y))
        """, ns, values={"vmap": "vmap(jnp.add)(x, y)", "pmap": "pmap(jnp.add)(x, y)"})
    cell("000", 4, "jaxprs", """
        from jax import make_jaxpr

        def f(x, y):
          a = jnp.dot(x, y)
          b = jnp.tanh(a)
          return b

        xs = jnp.ones((8, 2, 3))
        ys = jnp.ones((8, 3, 4))

        print("f jaxpr")
        print(make_jaxpr(f)(xs[0], ys[0]))

        print("vmap(f) jaxpr")
        print(make_jaxpr(vmap(f))(xs, ys))

        print("pmap(f) jaxpr")
        print(make_jaxpr(pmap(f))(xs, ys))
        """, ns, values={"": "pmap(f)(xs, ys)"},
         notes="In 0.10.2 pmap traces to jit(shard_map) over the internal mesh axis "
               "'_internal_pmap_axis_name'; the old xla_pmap jaxpr no longer exists.")
    cell("000", 5, "pmap_square_div2", """
        y = pmap(lambda x: x ** 2)(jnp.arange(8))
        z = y / 2
        print(z)
        """, ns, values={"y": "y", "z": "z"})
    skip("000", 6, "plt_plot", """
        import matplotlib.pyplot as plt
        plt.plot(y)
        """, ns, "", "draws a figure (matplotlib is not installed; the notebook's Out[] would be "
        "a Line2D list with a memory address). Nothing to compare; the plotted data is "
        "`05_pmap_square_div2_y`.")
    cell("000", 7, "display_y", "y", ns, values={"": "y"})
    cell("000", 8, "display_y_div2", "y / 2", ns, values={"": "y / 2"})
    cell("000", 9, "np_sin_y", """
        import numpy as np
        np.sin(y)
        """, ns, values={"": "np.sin(y)"},
         notes="np.sin of the int32 Array is computed by NumPy in float64 (stored as float64).")
    cell("000", 10, "random_mats", """
        from jax import random

        # create 8 random keys
        keys = random.split(random.key(0), 8)
        # create a 5000 x 6000 matrix on each device by mapping over keys
        mats = pmap(lambda key: random.normal(key, (5000, 6000)))(keys)
        # the stack of matrices is represented logically as a single array
        mats.shape
        """, ns, values={"keys": "random.key_data(keys)",
                         "mats_first_row": "mats[:, 0, :8]",
                         "mats_last_row": "mats[:, -1, -8:]",
                         "mats_mean": "jnp.mean(mats, axis=(1, 2))"},
         notes="Default (partitionable) threefry. `keys` are the uint32 key data of the 8 split "
               "keys; the matrices themselves are too big to store, so the first 8 entries of "
               "row 0, the last 8 of row 4999 and each matrix's mean are kept.")
    cell("000", 11, "local_matmul", """
        # run a local matmul on each device in parallel (no data transfer)
        result = pmap(lambda x: jnp.dot(x, x.T))(mats)
        result.shape
        """, ns, values={"corner": "result[:, :4, :4]"},
         notes="The corner value is each 5000x5000 product's top-left 4x4 block (the diagonal "
               "entries are sums of 6000 squares, about 6000).")
    cell("000", 12, "pmap_mean", """
        # compute the mean on each device in parallel and print the results
        print(pmap(jnp.mean)(result))
        """, ns, values={"": "pmap(jnp.mean)(result)"},
         notes="Each mean sums 25 million 6000-term dot products; XLA's summation order is "
               "not specified, so a twin should compare with a relative tolerance, not bit for "
               "bit. mean(X X^T) = |column sums of X|^2 / 5000^2 exactly.")
    check_means(ns)
    ns.pop("mats"), ns.pop("result")  # 1.8 GB no later cell uses
    cell("000", 13, "psum_normalize", """
        from jax import lax

        normalize = lambda x: x / lax.psum(x, axis_name='i')
        result = pmap(normalize, axis_name='i')(jnp.arange(4.))
        print(result)
        """, ns, values={"": "result"})
    cell("000", 14, "psum_normalize_decorator", """
        from functools import partial

        @partial(pmap, axis_name='i')
        def normalize(x):
          return x / lax.psum(x, 'i')

        print(normalize(jnp.arange(4.)))
        """, ns, values={"": "normalize(jnp.arange(4.))"})
    cell("000", 15, "nested_pmap_normalize", """
        @partial(vmap, axis_name='rows')
        @partial(vmap, axis_name='cols')
        def f(x):
          row_normed = x / lax.psum(x, 'rows')
          col_normed = x / lax.psum(x, 'cols')
          doubly_normed = x / lax.psum(x, ('rows', 'cols'))
          return row_normed, col_normed, doubly_normed

        x = jnp.arange(8.).reshape((4, 2))
        a, b, c = f(x)

        print(a)
        print(a.sum(0))
        """, ns,
         notes="ADAPTED: the seed nests `pmap` (axis_name 'rows' outside 'cols'), which 0.10.2 "
               "refuses; this runs nested `vmap` with the same axis names. The values in the "
               "npz come instead from jax.shard_map over a (4, 2) mesh ('rows', 'cols'), one "
               "element per device as nested pmap places them: there each division is a scalar "
               "division, while XLA:CPU turns vmap's division by a broadcast sum into a multiply "
               "by its reciprocal, so vmap's b[3, 0] = 0.4615385 is 1 ulp from the correctly "
               "rounded 6/13 = 0.46153846. The printed a and a.sum(0) are identical both ways "
               "(checked).\nValues `15_nested_pmap_normalize_{a,b,c}` = shard_map's a, b, c; "
               "`15_nested_pmap_normalize_a_sum0` = its a.sum(0).")
    record_nested_normalize(ns)
    cell("000", 16, "rule30", """
        import jax
        from jax._src import xla_bridge
        device_count = jax.device_count()

        def send_right(x, axis_name):
          left_perm = [(i, (i + 1) % device_count) for i in range(device_count)]
          return lax.ppermute(x, perm=left_perm, axis_name=axis_name)

        def send_left(x, axis_name):
          left_perm = [((i + 1) % device_count, i) for i in range(device_count)]
          return lax.ppermute(x, perm=left_perm, axis_name=axis_name)

        def update_board(board):
          left = board[:-2]
          right = board[2:]
          center = board[1:-1]
          return lax.bitwise_xor(left, lax.bitwise_or(center, right))

        @partial(pmap, axis_name='i')
        def step(board_slice):
          left, right = board_slice[:1], board_slice[-1:]
          right, left = send_left(left, 'i'), send_right(right, 'i')
          enlarged_board_slice = jnp.concatenate([left, board_slice, right])
          return update_board(enlarged_board_slice)

        def print_board(board):
          print(''.join('*' if x else ' ' for x in board.ravel()))


        board = np.zeros(40, dtype=bool)
        board[board.shape[0] // 2] = True
        reshaped_board = board.reshape((device_count, -1))

        print_board(reshaped_board)
        for _ in range(20):
          reshaped_board = step(reshaped_board)
          print_board(reshaped_board)
        """, ns, values={"final_board": "reshaped_board",
                         "boards": "np.stack([np.asarray(_b := board.reshape((device_count, -1)))]"
                                   " + [np.asarray(_b := step(_b)) for _ in range(20)])"
                                   ".reshape(21, 40)"},
         notes="ADDED `import jax`: the cookbook only imports `jax.numpy as jnp`, so "
               "`jax.device_count()` would raise NameError as written. device_count is 8: 40 "
               "cells, 5 per device, ring (wrap-around) halo exchange. Lines keep their trailing "
               "spaces (each line is exactly 40 characters).")
    check_rule30(ns)
    cell("000", 17, "grad_nested_pmap", """
        from jax import grad

        @vmap
        def f(x):
          y = jnp.sin(x)
          @vmap
          def g(z):
            return jnp.cos(z) * jnp.tan(y.sum()) * jnp.tanh(x).sum()
          return grad(lambda w: jnp.sum(g(w)))(x)

        f(x)
        """, ns, values={"": "f(x)"},
         notes="ADAPTED: both `@pmap` are `@vmap` (nested pmap is refused by 0.10.2). `x` is "
               "cell 15's `jnp.arange(8.).reshape((4, 2))`. Checked against the closed form "
               "-sin(x[i,j]) * tan(sum_k sin(x[i,k])) * sum_k tanh(x[i,k]).")
    check_grad_closed_form(ns)
    cell("000", 18, "grad_of_pmap", "grad(lambda x: jnp.sum(f(x)))(x)", ns,
         values={"": "grad(lambda x: jnp.sum(f(x)))(x)"},
         notes="Uses cell 17's (vmap-adapted) f.")
    compare_grad_variants(ns)


def record_nested_normalize(ns):
    """Nested pmap runs one instance per device of a 4x2 grid; shard_map over a 2-D mesh with one
    element per device reproduces that, and its values are the ones recorded."""
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("rows", "cols"))

    def body(x):
        return (x / lax.psum(x, "rows"), x / lax.psum(x, "cols"),
                x / lax.psum(x, ("rows", "cols")))

    spec = P("rows", "cols")
    got = jax.shard_map(body, mesh=mesh, in_specs=spec, out_specs=(spec, spec, spec))(ns["x"])
    for name, g, v in zip("abc", got, (ns["a"], ns["b"], ns["c"])):
        np.testing.assert_allclose(np.asarray(g), np.asarray(v), rtol=1e-6)
        VALUES["000"][f"15_nested_pmap_normalize_{name}"] = np.asarray(g)
    VALUES["000"]["15_nested_pmap_normalize_a_sum0"] = np.asarray(got[0].sum(0))
    assert f"{got[0]}\n{got[0].sum(0)}\n" == f"{ns['a']}\n{ns['a'].sum(0)}\n"


def check_means(ns):
    """The printed means against their exact value, |s|^2 / 5000^2 with s the column sums."""
    worst = 0.0
    for k, got in enumerate(VALUES["000"]["12_pmap_mean"]):
        s = np.asarray(ns["mats"][k], np.float64).sum(0)
        exact = s @ s / 5000.0 ** 2
        worst = max(worst, abs(float(got) - exact) / exact)
    assert worst < 1e-6, worst
    add_note("000_12_pmap_mean.txt", f"JAX's float32 means are within {worst:.1e} (relative) "
             "of that exact value, computed in float64 (checked).")


def check_rule30(ns):
    """The ppermute halo exchange must give plain Rule 30 on a ring of 40 cells."""
    board = np.zeros(40, bool)
    board[20] = True
    boards = [board]
    for _ in range(20):
        left, right = np.roll(board, 1), np.roll(board, -1)
        board = left ^ (board | right)
        boards.append(board)
    assert np.array_equal(VALUES["000"]["16_rule30_boards"], np.stack(boards))


def compare_grad_variants(ns):
    """Nested pmap cannot run, but one level of it can: outer pmap with inner vmap, and outer
    vmap with inner pmap. Their results must agree with the nested-vmap goldens up to rounding;
    the MANIFEST records by how much."""
    def make(outer, inner):
        @outer
        def f(x):
            y = jnp.sin(x)

            @inner
            def g(z):
                return jnp.cos(z) * jnp.tan(y.sum()) * jnp.tanh(x).sum()
            return jax.grad(lambda w: jnp.sum(g(w)))(x)
        return f

    x = ns["x"]
    for key, compute in (("17_grad_nested_pmap", lambda f: f(x)),
                         ("18_grad_of_pmap", lambda f: jax.grad(lambda v: jnp.sum(f(v)))(x))):
        diffs = []
        for outer, inner in (("pmap", "vmap"), ("vmap", "pmap")):
            got = np.asarray(compute(make(getattr(jax, outer), getattr(jax, inner))))
            want = VALUES["000"][key]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            diffs.append(f"outer {outer} + inner {inner}: max |diff| = "
                         f"{float(np.max(np.abs(got - want))):.3g}")
        add_note(f"000_{key}.txt", "Compared with the one-level-pmap variants (" +
                 "; ".join(diffs) + "); a C++ twin should allow a few ulps.")


def check_grad_closed_form(ns):
    x = np.asarray(ns["x"], np.float64)
    want = -np.sin(x) * np.tan(np.sin(x).sum(1, keepdims=True)) * np.tanh(x).sum(1, keepdims=True)
    assert np.allclose(np.asarray(ns["f"](ns["x"])), want, rtol=1e-5), want


# ---------------------------------------------------------------------------------------------
# Seed 001: shard_map tutorial (8 CPU devices, mesh (4, 2)).
# ---------------------------------------------------------------------------------------------
def seed_001():
    ns = {}
    cell("001", 0, "xla_flags", """
        import os
        # Use 8 CPU devices
        os.environ["XLA_FLAGS"] = '--xla_force_host_platform_device_count=8'
        """, ns, notes="Has no effect here: the script already set jax_num_cpu_devices=8 "
                       "before the backend started.")
    cell("001", 1, "imports", """
        from functools import partial

        import jax
        import jax.numpy as jnp

        from jax.sharding import Mesh, PartitionSpec as P
        from jax.experimental import mesh_utils
        from jax import shard_map
        """, ns, notes="ADAPTED: `from jax.experimental.shard_map import shard_map` (deprecated "
                       "since 0.8.0) is `from jax import shard_map`.")
    cell("001", 2, "device_mesh", """
        devices = mesh_utils.create_device_mesh((4, 2))
        mesh = Mesh(devices, axis_names=('x', 'y'))
        """, ns,
         values={"device_ids": "jnp.array([[d.id for d in row] for row in devices], jnp.int32)"},
         notes="On CPU the device mesh is in iota order [[0,1],[2,3],[4,5],[6,7]] (the seed's "
               "[[0,1],[2,3],[6,7],[4,5]] came from a TPU's physical layout).")
    cell("001", 3, "matmul_basic", """
        a = jnp.arange(8 * 16.).reshape(8, 16)
        b = jnp.arange(16 * 4.).reshape(16, 4)

        @partial(shard_map, mesh=mesh, in_specs=(P('x', 'y'), P('y', None)),
                 out_specs=P('x', None))
        def matmul_basic(a_block, b_block):
          # a_block f32[2, 8]
          # b_block f32[8, 4]
          c_partialsum = jnp.dot(a_block, b_block)
          c_block = jax.lax.psum(c_partialsum, 'y')
          # c_block f32[2, 4]
          return c_block

        c = matmul_basic(a, b)
        """, ns, values={"c": "c", "a": "a", "b": "b"})
    cell("001", 4, "visualize_c", "jax.debug.visualize_array_sharding(c)", ns,
         notes="Text mode (stdout is not a terminal, so rich draws borders and no colours).")
    cell("001", 5, "allclose", """
        from jax.tree_util import tree_map, tree_all

        def allclose(a, b):
          return tree_all(tree_map(
              partial(jnp.allclose, atol=1e-2, rtol=1e-2),
              a,
              b
            )
          )

        allclose(jnp.dot(a, b), c)
        """, ns, values={"": "allclose(jnp.dot(a, b), c)", "dot": "jnp.dot(a, b)"},
         notes="tree_all returns a Python bool, displayed as `True`.")
    cell("001", 6, "mesh_repr", "mesh", ns,
         notes="0.10.2's Mesh repr shows axis sizes, names and types, not device ids.")
    cell("001", 7, "matmul_reference", """
        from jax.sharding import NamedSharding

        a = jax.device_put(a, NamedSharding(mesh, P('x', 'y')))
        b = jax.device_put(b, NamedSharding(mesh, P('y', None)))

        @jax.jit
        def matmul_reference(a, b):
          c = jnp.dot(a, b)
          return jax.lax.with_sharding_constraint(c, NamedSharding(mesh, P('x', None)))

        c_ref = matmul_reference(a, b)
        allclose(c_ref, jnp.dot(a, b))
        """, ns, values={"": "c_ref"},
         notes="allclose returns a Python bool, displayed as `True`.")
    extra("extra_matmul_reference_sharding.txt", "seed 001, code cell 7: c_ref's sharding",
          "print(c_ref.sharding); jax.debug.visualize_array_sharding(c_ref)",
          run_source("print(c_ref.sharding); jax.debug.visualize_array_sharding(c_ref)", ns)[0])
    cell("001", 8, "visualize_blocks", """
        print('a blocks:'); jax.debug.visualize_array_sharding(a)
        print('b blocks:'); jax.debug.visualize_array_sharding(b)
        print('c blocks:'); jax.debug.visualize_array_sharding(c)
        """, ns, notes="a is device_put with P('x', 'y'), b with P('y', None) (cell 07's first "
                       "lines), c is matmul_basic's output (P('x', None)). Text mode.")
    cell("001", 9, "check_vmap", """
        def check_vmap(f, xs):
          ans = jax.vmap(f, in_axes=(0,), out_axes=0)(xs)
          expected = jnp.stack([f(x) for x in xs]) # vmap reference semantics
          print(allclose(ans, expected))

        check_vmap(lambda x: x @ x, jnp.arange(12).reshape(4, 3))
        """, ns, values={"": "jax.vmap(lambda x: x @ x)(jnp.arange(12).reshape(4, 3))"})
    cell("001", 10, "mesh_i", """
        import numpy as np
        devices = np.array(jax.devices()[:4])
        mesh = Mesh(devices, ('i', ))
        """, ns)
    cell("001", 11, "check_shmap", """
        def check_shmap(f, y):
          ans = shard_map(f, mesh=mesh, in_specs=P('i'), out_specs=P('i'))(y)
          expected = jnp.concatenate([f(y_blk) for y_blk in jnp.split(y, mesh.shape['i'])])
          print(allclose(ans, expected))

        check_shmap(lambda x: x.T @ x, jnp.arange(32).reshape(8, 4))
        """, ns, values={"": "shard_map(lambda x: x.T @ x, mesh=mesh, in_specs=P('i'), "
                             "out_specs=P('i'))(jnp.arange(32).reshape(8, 4))"},
         notes="ADAPTED: `shard_map(f, mesh, in_specs=..., out_specs=...)` passes the mesh by "
               "keyword (jax.shard_map takes only f positionally).")


# ---------------------------------------------------------------------------------------------
# Extras: jaxprs of shard_map programs, error messages, per-device debug.print.
# ---------------------------------------------------------------------------------------------
MESH_SOURCE = "mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ('x', 'y'))"


def matmul_basic_body(a_block, b_block):
    c_partialsum = jnp.dot(a_block, b_block)
    return jax.lax.psum(c_partialsum, 'y')


def extras():
    mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("x", "y"))
    a = jnp.arange(8 * 16.).reshape(8, 16)
    b = jnp.arange(16 * 4.).reshape(16, 4)
    ns = {"jax": jax, "jnp": jnp, "lax": lax, "np": np, "P": P, "mesh": mesh, "a": a, "b": b,
          "matmul_basic_body": matmul_basic_body}

    def jaxpr_case(name, title, source, notes=""):
        fn = eval(source, ns)
        text = str(fn()) + "\n"
        extra(name, title, MESH_SOURCE + "\n" + source, text, notes)

    args = "in_specs=(P('x', 'y'), P('y', None)), out_specs=P('x', None)"
    for check, suffix in ((True, ""), (False, "_check_vma_false")):
        jaxpr_case(f"extra_jaxpr_shard_map_matmul_basic{suffix}.txt",
                   f"make_jaxpr of seed 001's matmul_basic, check_vma={check}",
                   f"lambda: jax.make_jaxpr(jax.shard_map(matmul_basic_body, mesh=mesh, {args}, "
                   f"check_vma={check}))(a, b)",
                   "matmul_basic_body is matmul_basic's body without comments: "
                   "`c_partialsum = jnp.dot(a_block, b_block); return jax.lax.psum(c_partialsum, "
                   "'y')`; a is f32[8,16], b is f32[16,4].")
    for check, suffix in ((True, ""), (False, "_check_vma_false")):
        jaxpr_case(f"extra_jaxpr_grad_shard_map_psum{suffix}.txt",
                   f"make_jaxpr of grad through a psum body, check_vma={check}",
                   "lambda: jax.make_jaxpr(jax.grad(lambda x: jax.shard_map("
                   "lambda blk: lax.psum(blk, 'y'), mesh=mesh, in_specs=P('x', 'y'), "
                   f"out_specs=P('x', None), check_vma={check})(x).sum()))(a)",
                   "a is f32[8,16].")
    jaxpr_case("extra_jaxpr_grad_shard_map_all_gather.txt",
               "make_jaxpr of grad through an all_gather body, check_vma=True",
               "lambda: jax.make_jaxpr(jax.grad(lambda x: jax.shard_map("
               "lambda blk: lax.all_gather(blk, 'y', axis=1, tiled=True), mesh=mesh, "
               "in_specs=P('x', 'y'), out_specs=P('x', 'y'), check_vma=True)(x).sum()))(a)",
               "a is f32[8,16]. With check_vma=True all_gather's result is still varying over "
               "'y', so out_specs P('x', None) is rejected (see extra_errors.txt, "
               "out_specs_replication_all_gather); P('x', 'y') is used and the output is "
               "f32[8,32].")
    jaxpr_case("extra_jaxpr_grad_shard_map_all_gather_check_vma_false.txt",
               "make_jaxpr of grad through an all_gather body, check_vma=False",
               "lambda: jax.make_jaxpr(jax.grad(lambda x: jax.shard_map("
               "lambda blk: lax.all_gather(blk, 'y', axis=1, tiled=True), mesh=mesh, "
               "in_specs=P('x', 'y'), out_specs=P('x', None), check_vma=False)(x).sum()))(a)",
               "a is f32[8,16]; output f32[8,16]. The transpose of a tiled all_gather is a "
               "tiled reduce_scatter (psum_scatter).")
    extra_errors(ns)
    extra_debug_print(ns)
    extra_print_sharded(ns)


ERROR_CASES = [
    ("pmap_more_elements_than_devices",
     "lambda: jax.pmap(lambda x: x ** 2)(jnp.arange(9.))",
     "9 elements on 8 devices. 0.10.2 raises while placing the input (jax's IndivisibleError, a "
     "ValueError subclass). Older pmap raised at compile time: \"ValueError: compiling computation "
     "that requires 9 logical devices, but only 8 XLA devices are available (num_replicas=9, "
     "num_partitions=1)\"."),
    ("shard_map_in_spec_too_long",
     "lambda: jax.shard_map(f, mesh=mesh, in_specs=P('x', 'y', None), "
     "out_specs=P('x', 'y'))(jnp.zeros((8, 16)))", ""),
    ("shard_map_indivisible",
     "lambda: jax.shard_map(f, mesh=mesh, in_specs=P('x', 'y'), "
     "out_specs=P('x', 'y'))(jnp.zeros((6, 16)))", ""),
    ("shard_map_out_specs_replication",
     "lambda: jax.shard_map(f, mesh=mesh, in_specs=P('x', 'y'), out_specs=P('x', None), "
     "check_vma=True)(jnp.zeros((8, 16)))",
     "Called eagerly the message names jax's internal wrapper '_rem_singleton', not 'f'; under "
     "jit (next case) it names 'f'."),
    ("shard_map_out_specs_replication_jit",
     "lambda: jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P('x', 'y'), out_specs=P('x', None), "
     "check_vma=True))(jnp.zeros((8, 16)))", ""),
    ("out_specs_replication_all_gather",
     "lambda: jax.shard_map(lambda blk: lax.all_gather(blk, 'y', axis=1, tiled=True), mesh=mesh, "
     "in_specs=P('x', 'y'), out_specs=P('x', None), check_vma=True)(jnp.zeros((8, 16)))", ""),
    ("psum_unbound_axis_check_vma_true",
     "lambda: jax.shard_map(lambda blk: lax.psum(blk, 'z'), mesh=mesh, in_specs=P('x', 'y'), "
     "out_specs=P('x', 'y'), check_vma=True)(jnp.zeros((8, 16)))",
     "0.10.2 fails an internal assertion (empty message) when check_vma=True; the "
     "check_vma=False case below shows the user-facing NameError wording."),
    ("psum_unbound_axis_check_vma_false",
     "lambda: jax.shard_map(lambda blk: lax.psum(blk, 'z'), mesh=mesh, in_specs=P('x', 'y'), "
     "out_specs=P('x', 'y'), check_vma=False)(jnp.zeros((8, 16)))", ""),
    ("ppermute_duplicate_destinations",
     "lambda: jax.shard_map(lambda blk: lax.ppermute(blk, 'x', perm=[(0, 1), (1, 1), (2, 3), "
     "(3, 0)]), mesh=mesh, in_specs=P('x', 'y'), out_specs=P('x', 'y'))(jnp.zeros((8, 16)))", ""),
]


def extra_errors(ns):
    """extra_errors.txt: blocks `=== <case>` then `<ExceptionType>: <message>` (the message may
    span lines; a block ends at the next `=== ` line or the end of the file)."""
    def f(x):
        return x * 2

    ns = dict(ns, f=f)
    blocks, sources, notes = [], [], []
    for name, source, note in ERROR_CASES:
        try:
            eval(source, ns)()
        except Exception as e:  # noqa: BLE001 -- recording whatever JAX raises
            blocks.append(f"=== {name}\n{type(e).__name__}: {e}\n")
        else:
            raise AssertionError(f"{name} did not raise")
        sources.append(f"# {name}\n{source}")
        if note:
            notes.append(f"`{name}`: {note}")
    extra("extra_errors.txt", "error messages (one block per case)",
          MESH_SOURCE + "\ndef f(x):\n    return x * 2\n\n" + "\n".join(sources),
          "".join(blocks), "Format: each block is a line `=== <case>`, then "
          "`<type(e).__name__>: <str(e)>` (possibly several lines) up to the next `=== ` line. "
          + " ".join(notes))


DEBUG_PRINT_CASES = [
    ("extra_debug_print_shard_map.txt", "jax.debug.print inside an eager shard_map (8 devices)",
     """
        def show(blk):
          jax.debug.print("i={i} block={b}", i=lax.axis_index(('x', 'y')), b=blk)
          return blk

        jax.shard_map(show, mesh=mesh, in_specs=P(('x', 'y')),
                      out_specs=P(('x', 'y')))(jnp.arange(16.))
        """, ""),
    ("extra_debug_print_shard_map_jit.txt", "jax.debug.print inside jit(shard_map) (8 devices)",
     """
        def show_xy(blk):
          jax.debug.print("x={i} y={j} block={b}", i=lax.axis_index('x'),
                          j=lax.axis_index('y'), b=blk)
          return blk

        jax.jit(jax.shard_map(show_xy, mesh=mesh, in_specs=P('x', 'y'),
                              out_specs=P('x', 'y')))(jnp.arange(8.).reshape(4, 2))
        """,
     " Under jit because 0.10.2's eager shard_map mishandles this body (two separate "
     "axis_index operands): it prints only two lines, with wrong blocks."),
]


def extra_debug_print(ns):
    """jax.debug.print inside shard_map prints one line per device, in an order that depends on
    thread scheduling; the goldens hold the lines sorted."""
    for name, title, source, note in DEBUG_PRINT_CASES:
        exec_ns = dict(ns)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(textwrap.dedent(source), exec_ns)
            jax.effects_barrier()
        lines = sorted(buf.getvalue().splitlines())
        assert len(lines) == 8, lines
        extra(name, title, MESH_SOURCE + "\n" + textwrap.dedent(source).strip("\n"),
              "\n".join(lines) + "\n",
              "One line per device; JAX prints them in whatever order the devices run, so the "
              "lines are SORTED here (Python string order; compare sorted)." + note)


def extra_print_sharded(ns):
    """print and repr of matmul_basic's sharded output c (sharding does not show)."""
    source = ("c = jax.shard_map(matmul_basic_body, mesh=mesh, in_specs=(P('x', 'y'), "
              "P('y', None)), out_specs=P('x', None))(a, b)\nprint(c)\nprint(repr(c))")
    exec_ns = dict(ns)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(source, exec_ns)
    extra("extra_print_sharded_c.txt", "print(c) and print(repr(c)) of matmul_basic's output",
          MESH_SOURCE + "\n" + source, buf.getvalue())


# ---------------------------------------------------------------------------------------------
def write_manifest():
    lines = [
        "# Seed program goldens",
        "",
        f"Written by tools/goldens/gen_seeds.py with JAX {jax.__version__} (jaxlib "
        f"{jaxlib.__version__}), NumPy {np.__version__}, on {jax.device_count()} CPU devices "
        "(`jax_num_cpu_devices=8`), x64 off, jaxpr colours off.",
        "",
        "How a cell is recorded: its source (below, exactly as run) is exec'd in one namespace per "
        "seed, in notebook order, with stdout captured; if the cell ends with an expression, its "
        "`repr` and a newline are appended (what the notebook shows as Out[]). Warnings go to "
        "stderr and are not recorded. Cell numbers `nn` count the seed's code cells from 00. "
        "Pictures from `jax.debug.visualize_array_sharding` are rich's text mode (stdout is not a "
        "terminal): box-drawing borders, no colour codes.",
        "",
        "`000_values.npz` / `001_values.npz` hold each cell's numeric results, named "
        "`<nn>_<slug>` or `<nn>_<slug>_<what>`, with the dtype JAX produced (float32/int32; "
        "key data uint32; Rule 30 boards bool; NumPy's np.sin float64).",
        "",
        "The `.txt` files are authoritative; the text blocks below copy them (Rule 30 lines keep "
        "trailing spaces).",
        "",
        "## Cells not recorded",
        "",
    ]
    for seed, nn, slug, source, run_part, why in SKIPPED:
        lines += [f"- `{seed}_{nn:02d}_{slug}`: {why}", "", "```python", source, "```", ""]
        if run_part:
            lines += ["Run instead:", "", "```python", run_part, "```", ""]
    lines += ["## Values", ""]
    for seed in VALUES:
        lines.append(f"`{seed}_values.npz`:")
        lines.append("")
        for key, v in VALUES[seed].items():
            lines.append(f"- `{key}`: {v.dtype}{list(v.shape)}")
        lines.append("")
    lines += ["## Files", ""]
    for name, title, source, how, notes, text in ENTRIES:
        lines += [f"### {name}", "", f"{title}. Text: {how}.", ""]
        if notes:
            lines += [notes, ""]
        lines += ["```python", source, "```", "", "Expected text:", ""]
        lines += ["```text", text.rstrip("\n") if text else "(empty file)", "```", ""]
    write_text("MANIFEST.md", "\n".join(lines))


def main():
    os.makedirs(OUT, exist_ok=True)
    seed_000()
    seed_001()
    extras()
    for seed, values in VALUES.items():
        np.savez(os.path.join(OUT, f"{seed}_values.npz"), **values)
    write_manifest()


if __name__ == "__main__":
    main()
