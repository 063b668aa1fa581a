"""Records where JAX 0.10.2 puts the results of eager ops and small jit programs on committed
sharded arrays (computation follows sharding), for tests/sharding/propagation_corpus_test.cpp,
on 8 virtual CPU devices with Mesh()'s Auto axis types.

Writes three files under tests/goldens/propagation/:
* corpus.txt: lines starting with `#` are comments. First the meshes,
      mesh <name> <shape> <axis names> <device ids, row-major>
  then one case per line, fields separated by single spaces:
      case <id> <mesh> <op> <n> <input 1> ... <input n> <out sharding> <out shape> <out dtype>
  An input is `<dtype>:<shape>:<values>:<placement>`:
    values    `iota`: element i (row-major) is i/n for floats (np.float32(i) / np.float32(n),
              n the element count), i for int32, i % 3 == 0 for bool;
              `perm`: the same with k = (37 i + 11) % n in place of i;
    placement a spec code: jax.device_put(x, NamedSharding(mesh, spec)), committed; or `u`: an
              uncommitted jnp array on the default device.
  The out sharding is out.sharding's spec code for a NamedSharding (whose mesh is always the
  case's mesh; the script checks) with trailing Nones dropped, or `SingleDevice`.
  Codes (as in gen_sharding.py): a spec is its entries joined by "/", each entry "-" (None) or
  axis names joined by "+"; "_" is P(). A shape is dims joined by ","; "-" is the scalar shape.
  An op is `<name>` or `<name>:<arg>:<arg>...`, each arg a comma-separated int list; the
  operands are the inputs in order:
    sin exp neg copy                     jnp.sin, jnp.exp, jnp.negative, jnp.copy
    astype:<dtype>                       x.astype(dtype) (the arg is a dtype name)
    add mul maximum                      jnp.add, jnp.multiply, jnp.maximum
    where                                jnp.where(c, x, y)
    matmul dot                           jnp.matmul, jnp.dot
    T | transpose | transpose:<perm>     x.T, jnp.transpose(x), jnp.transpose(x, perm)
    sum|max|min|mean[:<axis>]            jnp.sum(x, axis) etc.; no arg: over all axes
    argmax:<axis> cumsum:<axis> sort:<axis>
    reshape:<shape>                      jnp.reshape(x, shape)
    newaxis                              x[None]
    broadcast_to:<shape> expand_dims:<axis> squeeze:<axis>
    concatenate:<axis> stack:<axis>      over all operands
    slice:<start,stop,step>:...          x[start:stop:step, ...], one arg per dim
    pad:<lo,hi>:...                      jnp.pad(x, ((lo, hi), ...)) with zeros
    tile:<reps>                          jnp.tile(x, reps)
    prog:<name>                          jax.jit of a small program (PROGRAMS below)
* values.npz: each case's output, keyed by its id.
* errors.txt: JAX's errors for arrays whose devices do not fit together, in the block format of
  tests/goldens/errors/api_errors.txt (`=== <case>` then `<ExceptionType>: <message>` up to the
  next `=== `); the `#` lines before the blocks say how each case was run.
Run: /work/jaxenv/bin/python tools/goldens/gen_propagation_corpus.py   (needs jax 0.10.2; the
tests do not). The output is deterministic (the .npz members carry a fixed timestamp).
"""
import io
import os
import zipfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "propagation")
DEVICES = jax.devices()

# name -> (mesh shape, axis names, device ids row-major)
MESHES = {
    "m8": ((8,), ("x",), list(range(8))),
    "m4": ((4,), ("x",), [0, 1, 2, 3]),
    "m42": ((4, 2), ("a", "b"), list(range(8))),
    "m24": ((2, 4), ("a", "b"), list(range(8))),
    "m222": ((2, 2, 2), ("a", "b", "c"), list(range(8))),
}


def make_mesh(name):
    shape, names, ids = MESHES[name]
    return Mesh(np.array([DEVICES[i] for i in ids]).reshape(shape), names)


def spec_of(code):
    if code == "_":
        return P()
    entries = []
    for e in code.split("/"):
        if e == "-":
            entries.append(None)
        elif "+" in e:
            entries.append(tuple(e.split("+")))
        else:
            entries.append(e)
    return P(*entries)


def spec_code(spec):
    entries = list(spec)
    while entries and entries[-1] is None:
        entries.pop()
    if not entries:
        return "_"
    out = []
    for e in entries:
        if e is None:
            out.append("-")
        elif isinstance(e, tuple):
            out.append("+".join(e))
        else:
            out.append(e)
    return "/".join(out)


def shape_code(shape):
    return ",".join(map(str, shape)) if shape else "-"


def host_values(dtype, shape, kind):
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    k = i if kind == "iota" else (37 * i + 11) % n
    if dtype == "float32":
        v = k.astype(np.float32) / np.float32(n)
    elif dtype == "int32":
        v = k.astype(np.int32)
    elif dtype == "bool":
        v = k % 3 == 0
    else:
        raise ValueError(dtype)
    return v.reshape(shape)


class In:
    """One operand: `In("a/-", (16, 16))`; placement "u" is uncommitted."""

    def __init__(self, place, shape=(16, 16), dtype="float32", values="iota"):
        self.place, self.shape, self.dtype, self.values = place, tuple(shape), dtype, values

    def code(self):
        return f"{self.dtype}:{shape_code(self.shape)}:{self.values}:{self.place}"

    def make(self, mesh):
        x = jnp.asarray(host_values(self.dtype, self.shape, self.values))
        if self.place == "u":
            return x
        return jax.device_put(x, NamedSharding(mesh, spec_of(self.place)))


def ints(arg):
    return tuple(int(v) for v in arg.split(","))


# Small jit programs, by name.
PROGRAMS = {
    "sin_matmul_xT": lambda x: jnp.sin(x) @ x.T,
    "add_sum0": lambda x, y: (x + y).sum(0),
    "matmul_relu_sum1": lambda x, w: jnp.maximum(x @ w, 0.25).sum(1),
    "exp_mul_mean": lambda x, y: (jnp.exp(x) * y).mean(),
    "reshape_transpose_sum": lambda x: x.reshape(4, 4, 16).transpose(1, 0, 2).sum(2),
    "matmul_chain": lambda x, w1, w2: (x @ w1) @ w2,
    "T_add_neg": lambda x: -(x.T + x),
    "concat_matmul": lambda x, y: jnp.concatenate([x, y], axis=1) @ jnp.concatenate([x, y]),
}


def run_op(op, args):
    name, *rest = op.split(":")
    unary = {"sin": jnp.sin, "exp": jnp.exp, "neg": jnp.negative, "copy": jnp.copy}
    binary = {"add": jnp.add, "mul": jnp.multiply, "maximum": jnp.maximum,
              "matmul": jnp.matmul, "dot": jnp.dot}
    reductions = {"sum": jnp.sum, "max": jnp.max, "min": jnp.min, "mean": jnp.mean}
    if name in unary:
        return unary[name](*args)
    if name in binary:
        return binary[name](*args)
    if name in reductions:
        return reductions[name](args[0], axis=int(rest[0]) if rest else None)
    (x, *_), arg = args, (rest[0] if rest else None)
    table = {
        "astype": lambda: x.astype(arg),
        "where": lambda: jnp.where(*args),
        "T": lambda: x.T,
        "transpose": lambda: jnp.transpose(x, ints(arg) if arg else None),
        "argmax": lambda: jnp.argmax(x, axis=int(arg)),
        "cumsum": lambda: jnp.cumsum(x, axis=int(arg)),
        "sort": lambda: jnp.sort(x, axis=int(arg)),
        "reshape": lambda: jnp.reshape(x, ints(arg)),
        "newaxis": lambda: x[None],
        "broadcast_to": lambda: jnp.broadcast_to(x, ints(arg)),
        "expand_dims": lambda: jnp.expand_dims(x, int(arg)),
        "squeeze": lambda: jnp.squeeze(x, int(arg)),
        "concatenate": lambda: jnp.concatenate(args, axis=int(arg)),
        "stack": lambda: jnp.stack(args, axis=int(arg)),
        "slice": lambda: x[tuple(slice(*ints(r)) for r in rest)],
        "pad": lambda: jnp.pad(x, [ints(r) for r in rest]),
        "tile": lambda: jnp.tile(x, ints(arg)),
        "prog": lambda: jax.jit(PROGRAMS[arg])(*args),
    }
    return table[name]()


# ---- the cases: (group, mesh, op, inputs) ------------------------------------------------------
V = (16,)
CUBE = (8, 8, 8)
CASES = []


def add(group, mesh, op, *inputs):
    CASES.append((group, mesh, op, inputs))


def unary_cases():
    specs = [("m8", "x"), ("m8", "-/x"), ("m8", "_"), ("m4", "x"), ("m4", "-/x"), ("m42", "a"),
             ("m42", "b"), ("m42", "a/b"), ("m42", "b/a"), ("m42", "-/a+b"), ("m42", "a+b"),
             ("m42", "_"), ("m24", "a/b"), ("m24", "-/b"), ("m222", "a/b"), ("m222", "a+b/c"),
             ("m222", "c"), ("m222", "b+c")]
    for mesh, spec in specs:
        add("sin", mesh, "sin", In(spec))
    for op in ("exp", "neg", "copy"):
        for mesh, spec in [("m8", "x"), ("m42", "a/b"), ("m42", "-/a+b"), ("m222", "c/a")]:
            add(op, mesh, op, In(spec))
    add("astype", "m42", "astype:float32", In("a/b", dtype="int32"))
    add("astype", "m8", "astype:float32", In("-/x", dtype="int32"))
    add("astype", "m42", "astype:int32", In("b", dtype="bool"))
    add("astype", "m222", "astype:float32", In("a+b+c", V, dtype="int32"))
    for mesh, spec in [("m42", "a"), ("m222", "a/b/c"), ("m8", "-/-/x")]:
        add("sin3", mesh, "sin", In(spec, CUBE))


def binary_cases():
    pairs = [
        ("m42", "a", "a"), ("m42", "a/b", "a/b"), ("m42", "a", "-/a"), ("m42", "a", "b"),
        ("m42", "a/b", "b/a"), ("m42", "a", "_"), ("m42", "_", "a"), ("m42", "a", "u"),
        ("m42", "u", "a/b"), ("m42", "a+b", "a"), ("m42", "a+b", "a+b"), ("m42", "-/b", "a"),
        ("m8", "x", "x"), ("m8", "x", "-/x"), ("m8", "x", "u"), ("m8", "_", "-/x"),
        ("m4", "x", "u"), ("m4", "-/x", "x"), ("m24", "a", "-/b"), ("m24", "b/a", "a/b"),
        ("m222", "a/b", "c"), ("m222", "a+b/c", "a/b"), ("m222", "a/b+c", "u"),
    ]
    for mesh, s1, s2 in pairs:
        add("add", mesh, "add", In(s1), In(s2, values="perm"))
    for mesh, s1, s2 in pairs[::3]:
        add("mul", mesh, "mul", In(s1), In(s2, values="perm"))
    for mesh, s1, s2 in pairs[1::3]:
        add("maximum", mesh, "maximum", In(s1), In(s2, values="perm"))
    # Broadcasting a vector against a matrix.
    add("add_bcast", "m42", "add", In("a"), In("b", V, values="perm"))
    add("add_bcast", "m42", "add", In("-/a"), In("a", V, values="perm"))
    add("add_bcast", "m8", "add", In("x"), In("u", V, values="perm"))
    for mesh, c, x, y in [("m42", "a", "a", "a"), ("m42", "u", "a", "-/a"), ("m42", "a", "b", "u"),
                          ("m42", "_", "a/b", "_"), ("m8", "x", "-/x", "x"),
                          ("m222", "a/b", "c", "a")]:
        add("where", mesh, "where", In(c, dtype="bool", values="perm"), In(x),
            In(y, values="perm"))


def matmul_cases():
    for s1 in ("_", "a", "-/a", "a/b", "b/a"):
        for s2 in ("_", "a", "-/a", "-/b", "a/b"):
            add("matmul", "m42", "matmul", In(s1), In(s2, values="perm"))
    for s1 in ("_", "x", "-/x"):
        for s2 in ("_", "x", "-/x"):
            add("matmul1d", "m8", "matmul", In(s1), In(s2, values="perm"))
    add("matmul", "m4", "matmul", In("x"), In("-/x", values="perm"))
    add("matmul", "m4", "matmul", In("-/x"), In("x", values="perm"))
    add("matmul", "m24", "matmul", In("a/b"), In("b/a", values="perm"))
    add("matmul", "m24", "matmul", In("-/b"), In("b", values="perm"))
    add("matmul", "m42", "matmul", In("a"), In("u", values="perm"))
    add("matmul", "m42", "matmul", In("u"), In("-/a+b", values="perm"))
    add("matmul", "m42", "matmul", In("-/a+b"), In("a+b", values="perm"))
    add("matvec", "m42", "matmul", In("a/b"), In("b", V, values="perm"))
    add("matvec", "m8", "matmul", In("-/x"), In("x", V, values="perm"))
    for mesh, s1, s2 in [("m42", "a/b", "b/a"), ("m8", "x", "_"), ("m222", "-/a+b", "a+b/c"),
                         ("m42", "b", "-/a")]:
        add("dot", mesh, "dot", In(s1), In(s2, values="perm"))
    for s1, s2 in [("a", "a"), ("a/b", "a/-/c"), ("a/-/b", "a/b"), ("-/-/c", "-/c"),
                   ("a/b/c", "a/c/b"), ("c", "a"), ("a+b/c", "u")]:
        add("bmm", "m222", "matmul", In(s1, CUBE), In(s2, CUBE, values="perm"))


def layout_cases():
    for mesh, spec in [("m42", "a"), ("m42", "a/b"), ("m42", "-/a+b"), ("m8", "x"),
                       ("m24", "b/a")]:
        add("T", mesh, "T", In(spec))
    add("transpose", "m42", "transpose", In("a/b"))
    for spec, perm in [("a/b/c", "2,0,1"), ("a/b/c", "1,0,2"), ("a+b", "0,2,1"), ("-/c", "2,1,0")]:
        add("transpose3", "m222", f"transpose:{perm}", In(spec, CUBE))
    add("transpose3", "m8", "transpose:1,2,0", In("x", CUBE))
    # Reshapes (16-element dims so a 4- or 8-way axis divides them).
    for mesh, spec, shape, target in [
        ("m42", "a", V, "4,4"), ("m42", "a", V, "2,8"), ("m42", "a", V, "8,2"),
        ("m8", "x", V, "4,4"), ("m8", "x", V, "2,8"), ("m42", "b", V, "4,4"),
        ("m42", "a+b", V, "4,4"), ("m42", "a+b", V, "2,8"),
        ("m42", "a", (16, 16), "256"), ("m42", "a/b", (4, 4), "16"), ("m42", "a/b", (16, 16), "256"),
        ("m42", "-/a", (16, 16), "256"), ("m42", "a", (16, 16), "4,4,16"),
        ("m42", "a/b", (16, 16), "4,4,4,4"), ("m42", "-/a", (16, 16), "16,4,4"),
        ("m42", "a", (16, 16), "32,8"), ("m42", "-/a", (16, 16), "8,32"),
        ("m42", "a", (16, 16), "8,32"), ("m8", "x", (16, 16), "4,64"),
        ("m222", "a/b/c", CUBE, "64,8"), ("m222", "a/b/c", CUBE, "8,64"),
        ("m222", "a+b", CUBE, "2,4,64"), ("m4", "x", (16, 16), "4,4,16"),
        ("m42", "a/b", (16, 16), "256,1"),
    ]:
        add("reshape", mesh, f"reshape:{target}", In(spec, shape))
    for mesh, spec in [("m42", "a"), ("m42", "a/b"), ("m8", "-/x")]:
        add("newaxis", mesh, "newaxis", In(spec))
    for mesh, spec, shape, target in [("m42", "a", (16, 16), "4,16,16"),
                                      ("m42", "b", V, "16,16"), ("m8", "x", V, "8,16"),
                                      ("m42", "a/b", (16, 16), "2,16,16"),
                                      ("m42", "_", (1, 16), "16,16"),
                                      ("m222", "c", V, "2,2,16")]:
        add("broadcast_to", mesh, f"broadcast_to:{target}", In(spec, shape))
    for mesh, spec, axis in [("m42", "a", 1), ("m42", "a/b", 0), ("m42", "a/b", 2),
                             ("m8", "-/x", 1)]:
        add("expand_dims", mesh, f"expand_dims:{axis}", In(spec))
    for mesh, spec, shape, axis in [("m42", "-/a", (1, 16, 16), 0), ("m42", "a/-/b", (16, 1, 16), 1),
                                    ("m8", "x", (16, 1), 1), ("m222", "-/a+b/c", (1, 16, 16), 0)]:
        add("squeeze", mesh, f"squeeze:{axis}", In(spec, shape))


def reduction_cases():
    for op in ("sum", "max", "min", "mean"):
        for axis in ("0", "1", ""):
            add(op, "m42", f"{op}:{axis}" if axis else op, In("a/b"))
    for mesh, spec, shape, op in [
        ("m42", "a", (16, 16), "sum:1"), ("m42", "-/a", (16, 16), "sum:1"),
        ("m42", "a+b", (16, 16), "sum:0"), ("m42", "a+b", (16, 16), "sum:1"),
        ("m8", "x", (16, 16), "sum:0"), ("m8", "x", (16, 16), "mean:1"), ("m8", "x", V, "sum"),
        ("m4", "-/x", (16, 16), "max:0"), ("m24", "b/a", (16, 16), "mean:0"),
        ("m222", "a/b/c", CUBE, "sum:0"), ("m222", "a/b/c", CUBE, "sum:1"),
        ("m222", "a/b/c", CUBE, "max:2"), ("m222", "a/b/c", CUBE, "mean"),
        ("m222", "a+b/-/c", CUBE, "min:1"),
    ]:
        add(op.split(":")[0], mesh, op, In(spec, shape, values="perm"))
    for mesh, spec, axis in [("m42", "a/b", 0), ("m42", "a/b", 1), ("m8", "x", 0), ("m8", "x", 1)]:
        add("argmax", mesh, f"argmax:{axis}", In(spec, values="perm"))
    for mesh, spec, axis in [("m42", "a/b", 0), ("m42", "a/b", 1), ("m8", "-/x", 1),
                             ("m222", "a/b/c", 2)]:
        shape = CUBE if mesh == "m222" else (16, 16)
        add("cumsum", mesh, f"cumsum:{axis}", In(spec, shape, values="perm"))
    for mesh, spec, axis in [("m42", "a/b", 0), ("m42", "a/b", 1), ("m8", "x", 0), ("m8", "x", 1),
                             ("m42", "a+b", 1)]:
        add("sort", mesh, f"sort:{axis}", In(spec, values="perm"))
    add("sort", "m42", "sort:0", In("a", V, dtype="int32", values="perm"))


def combine_cases():
    for mesh, s1, s2, axis in [("m42", "a", "a", 0), ("m42", "a", "a", 1), ("m42", "-/a", "-/a", 0),
                               ("m42", "a", "-/a", 0), ("m42", "a", "u", 1), ("m42", "a/b", "b/a", 1),
                               ("m8", "x", "x", 0), ("m8", "x", "_", 1)]:
        add("concatenate", mesh, f"concatenate:{axis}", In(s1), In(s2, values="perm"))
    add("concatenate", "m222", "concatenate:2", In("a/b", CUBE), In("a/b", CUBE, values="perm"),
        In("a/b/c", CUBE))
    for mesh, s1, s2, axis in [("m42", "a", "a", 0), ("m42", "a", "a", 1), ("m42", "a/b", "u", 2),
                               ("m8", "x", "-/x", 0)]:
        add("stack", mesh, f"stack:{axis}", In(s1), In(s2, values="perm"))
    for mesh, spec, sl in [("m42", "a", "2,6,1"), ("m42", "-/a", "2,6,1"), ("m42", "a", "0,16,1:0,16,2"),
                           ("m42", "-/a", "0,16,1:0,16,2"), ("m42", "a/b", "0,16,1:0,16,2"),
                           ("m42", "a/b", "0,8,1:8,16,1"), ("m8", "x", "8,16,1"),
                           ("m8", "x", "0,16,2"), ("m222", "a/b/c", "0,8,1:0,8,2:1,7,1")]:
        shape = CUBE if mesh == "m222" else (16, 16)
        add("slice", mesh, f"slice:{sl}", In(spec, shape))
    for mesh, spec, pads in [("m42", "a", "1,1:0,0"), ("m42", "a", "0,0:2,2"),
                             ("m42", "a/b", "0,16:0,0"), ("m8", "-/x", "0,0:0,16"),
                             ("m42", "a/b", "4,4:8,8")]:
        add("pad", mesh, f"pad:{pads}", In(spec))
    for mesh, spec, reps in [("m42", "a/b", "2,1"), ("m42", "a/b", "1,2"), ("m42", "a", "2,2"),
                             ("m8", "x", "3"), ("m42", "b", "2,1,1")]:
        add("tile", mesh, f"tile:{reps}", In(spec, V if mesh == "m8" else (16, 16)))


def program_cases():
    for mesh, spec in [("m42", "a"), ("m42", "a/b"), ("m8", "-/x"), ("m222", "a+b/c")]:
        add("prog", mesh, "prog:sin_matmul_xT", In(spec))
    for mesh, s1, s2 in [("m42", "a", "a"), ("m42", "a", "-/b"), ("m8", "x", "u"),
                         ("m4", "-/x", "x")]:
        add("prog", mesh, "prog:add_sum0", In(s1), In(s2, values="perm"))
    for mesh, s1, s2 in [("m42", "a", "-/b"), ("m42", "a/b", "b"), ("m8", "x", "_")]:
        add("prog", mesh, "prog:matmul_relu_sum1", In(s1), In(s2, values="perm"))
    for mesh, s1, s2 in [("m42", "a/b", "a/b"), ("m24", "a", "u")]:
        add("prog", mesh, "prog:exp_mul_mean", In(s1), In(s2, values="perm"))
    for mesh, spec in [("m42", "a"), ("m42", "-/a"), ("m8", "x")]:
        add("prog", mesh, "prog:reshape_transpose_sum", In(spec))
    for mesh, s1, s2, s3 in [("m42", "a", "-/b", "b"), ("m222", "a+b", "-/c", "c/a")]:
        add("prog", mesh, "prog:matmul_chain", In(s1), In(s2, values="perm"), In(s3))
    for mesh, spec in [("m42", "a/b"), ("m8", "x")]:
        add("prog", mesh, "prog:T_add_neg", In(spec))
    for mesh, s1, s2 in [("m42", "a", "a"), ("m42", "-/b", "u")]:
        add("prog", mesh, "prog:concat_matmul", In(s1), In(s2, values="perm"))


# ---- errors ----------------------------------------------------------------------------------------
def error_cases():
    """(case, source of a zero-argument callable, note); a None note: the call must not raise
    (the header records where its result lands instead)."""
    return [
        ("add_disjoint_device_sets",
         "lambda: put('x', [0, 1, 2, 3]) + put('x', [4, 5, 6, 7])",
         "y on Mesh(devices [0..3], ('x',)) P('x'), z on devices [4..7], both float32[16,16]."),
        ("add_permuted_device_order",
         "lambda: put('x', list(range(8))) + put('x', [0, 1, 2, 3, 6, 7, 4, 5])",
         "Same device set, different order."),
        ("add_single_device_and_sharded",
         "lambda: jax.device_put(X, DEVICES[3]) + put('x', list(range(8)))",
         "device_put on device 3 (SingleDeviceSharding) plus P('x') over 8 devices."),
        ("jit_in_shardings_conflict",
         "lambda: jax.jit(jnp.sin, in_shardings=sharding('x', list(range(8))))"
         "(put('-/x', list(range(8))))",
         "in_shardings P('x') on the 8-device mesh, argument committed to P(None, 'x') there."),
        ("jit_in_shardings_other_devices",
         "lambda: jax.jit(jnp.sin, in_shardings=sharding('x', [4, 5, 6, 7]))"
         "(put('-/x', [0, 1, 2, 3]))",
         "in_shardings P('x') over devices [4..7], argument committed to P(None, 'x') over "
         "devices [0..3]. jit compares the two as device-free HLO shardings, so with the same "
         "spec on [0..3] it raises nothing: see jit_in_shardings_other_devices_same_spec."),
        ("jit_in_shardings_other_device_count",
         "lambda: jax.jit(jnp.sin, in_shardings=sharding('x', list(range(8))))"
         "(put('x', [0, 1, 2, 3]))",
         "in_shardings P('x') over 8 devices, argument committed to P('x') over devices [0..3]."),
        ("jit_in_shardings_other_devices_same_spec",
         "lambda: jax.jit(jnp.sin, in_shardings=sharding('x', [4, 5, 6, 7]))"
         "(put('x', [0, 1, 2, 3]))",
         None),
    ]


X = jnp.asarray(host_values("float32", (16, 16), "iota"))


def sharding(spec, ids):
    mesh = Mesh(np.array([DEVICES[i] for i in ids]), ("x",))
    return NamedSharding(mesh, spec_of(spec))


def put(spec, ids):
    return jax.device_put(X, sharding(spec, ids))


def record_errors():
    ns = {"jax": jax, "jnp": jnp, "put": put, "sharding": sharding, "X": X, "DEVICES": DEVICES}
    header = [f"# JAX {jax.__version__} on {jax.device_count()} CPU devices; X is "
              "float32[16,16]; put(spec, ids) is jax.device_put(X, sharding(spec, ids)) and "
              "sharding(spec, ids) is NamedSharding(Mesh(devices ids, ('x',)), spec)"]
    blocks = []
    for name, source, note in error_cases():
        header.append(f"# {name}: {source}")
        if note is None:
            out = eval(source, ns)()
            header.append(f"#   raises nothing; the result is {out.sharding} on device ids "
                          f"{[d.id for d in out.sharding._device_assignment]}")
            continue
        try:
            eval(source, ns)()
        except Exception as e:  # noqa: BLE001 -- recording whatever JAX raises
            blocks.append(f"=== {name}\n{type(e).__name__}: {e}\n")
        else:
            raise AssertionError(f"{name} did not raise")
        header.append(f"#   {note}")
    with open(os.path.join(OUT, "errors.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(header) + "\n" + "".join(blocks))


# ---- output ----------------------------------------------------------------------------------------
def out_code(out, mesh_name):
    s = out.sharding
    if isinstance(s, SingleDeviceSharding):
        return "SingleDevice"
    assert isinstance(s, NamedSharding), s
    shape, names, ids = MESHES[mesh_name]
    assert tuple(s.mesh.devices.shape) == shape and s.mesh.axis_names == names, s
    assert [d.id for d in s.mesh.devices.flat] == ids, s
    return spec_code(s.spec)


def write_npz(path, arrays):
    """np.savez's layout with a fixed member timestamp, so reruns give identical bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for key, value in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(value), allow_pickle=False)
            z.writestr(zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0)),
                       buf.getvalue())


def main():
    for build in (unary_cases, binary_cases, matmul_cases, layout_cases, reduction_cases,
                  combine_cases, program_cases):
        build()
    lines = [f"# JAX {jax.__version__} on {jax.device_count()} CPU devices; format: "
             "tools/goldens/gen_propagation_corpus.py"]
    for name, (shape, names, ids) in MESHES.items():
        lines.append(f"mesh {name} {shape_code(shape)} {','.join(names)} "
                     f"{','.join(map(str, ids))}")
    values = {}
    counts = {}
    for group, mesh_name, op, inputs in CASES:
        counts[(group, mesh_name)] = counts.get((group, mesh_name), 0) + 1
        case_id = f"{group}_{mesh_name}_{counts[(group, mesh_name)]:02d}"
        mesh = make_mesh(mesh_name)
        out = run_op(op, [x.make(mesh) for x in inputs])
        values[case_id] = np.asarray(out)
        lines.append(" ".join(["case", case_id, mesh_name, op, str(len(inputs))] +
                              [x.code() for x in inputs] +
                              [out_code(out, mesh_name), shape_code(out.shape), str(out.dtype)]))
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "corpus.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    write_npz(os.path.join(OUT, "values.npz"), values)
    record_errors()
    print(f"{len(CASES)} cases")


if __name__ == "__main__":
    main()
