"""Records JAX's sharding geometry, reprs, error messages and visualize_sharding pictures for
spmd's sharding tests (tests/sharding/*_test.cpp), on 8 virtual CPU devices.

Writes three plain-text files under tests/goldens/sharding/:
* layouts.txt: one block per (mesh, spec, global shape):
      case <mesh> <spec> <shape>
      spec_repr <repr(P)>
      repr <repr(NamedSharding)>
      shard_shape <dims>
      fully_replicated 0|1
      index <device id> <start:stop,...>      (devices_indices_map, in its order)
      shard <device id> <start:stop,...> <replica id>   (addressable_shards of a device_put array)
      end
  preceded by the meshes: `mesh <name> <shape> <axis names> <device ids, row-major>` followed by
  `mesh_repr <repr(mesh)>` and `mesh_str <str(mesh)>`.
* visualize.txt: `=== <mesh> <spec> <shape> <scale> <min_width> <max_width>` then the exact text
  jax.debug.visualize_sharding prints with colour off (a non-terminal stdout). Mesh "single" is
  SingleDeviceSharding(device 0).
* colour.txt: the same header, then the colour mode's exact bytes (ANSI escapes) as rich writes
  them to a truecolor terminal: the seeds' pictures and a few more.
* errors.txt: `error <kind> <mesh> <spec> <shape>` then the message on the next line.

Encodings: a spec is its entries joined by "/", each entry "-" (None) or axis names joined by
"+"; "_" is P(). A shape is dims joined by ","; "-" is the scalar shape ().
Run: python3 tools/goldens/gen_sharding.py   (needs jax, rich and matplotlib; the tests do not)
"""
import contextlib
import io
import itertools
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.sharding import SingleDeviceSharding  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "goldens", "sharding")
DEVICES = jax.devices()

# name -> (mesh shape, axis names, device ids row-major). Mesh() keeps the Auto axis types that
# spmd's meshes have (jax.make_mesh defaults to Explicit since JAX 0.9).
MESHES = {
    "m8": ((8,), ("i",), list(range(8))),
    "m8p": ((8,), ("i",), [3, 1, 4, 0, 7, 5, 2, 6]),
    "m4": ((4,), ("x",), [0, 1, 2, 3]),
    "m42": ((4, 2), ("x", "y"), list(range(8))),
    "m42p": ((4, 2), ("x", "y"), [0, 1, 2, 3, 6, 7, 4, 5]),
    "m24": ((2, 4), ("x", "y"), list(range(8))),
    "m81": ((8, 1), ("x", "y"), list(range(8))),
    "mab": ((4, 2), ("a", "b"), list(range(8))),
    "m222": ((2, 2, 2), ("x", "y", "z"), list(range(8))),
    "m222p": ((2, 2, 2), ("x", "y", "z"), [7, 6, 5, 4, 3, 2, 1, 0]),
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


def shape_code(shape):
    return ",".join(map(str, shape)) if shape else "-"


def slices_code(index, shape):
    parts = []
    for s, n in zip(index, shape):
        start = 0 if s.start is None else s.start
        stop = n if s.stop is None else s.stop
        parts.append(f"{start}:{stop}")
    return ",".join(parts) if parts else "-"


def specs_for(names):
    """Every spec of up to three entries over `names` with each axis used at most once."""
    entries = [None] + list(names) + [tuple(p) for p in itertools.permutations(names, 2)]
    if len(names) == 3:
        entries += [tuple(p) for p in itertools.permutations(names, 3)]
    out = {"_"}
    for n in range(1, 4):
        for combo in itertools.product(entries, repeat=n):
            used = [a for e in combo if e is not None for a in ((e,) if isinstance(e, str) else e)]
            if len(used) != len(set(used)):
                continue
            if len(names) < 3 and n == 3 and combo[2] is not None and combo[0] is not None:
                continue  # keeps the file small; the 3-D meshes cover rank-3 specs
            out.add("/".join("-" if e is None else e if isinstance(e, str) else "+".join(e)
                             for e in combo))
    return sorted(out)


def tiling(mesh, spec, rank):
    t = [1] * rank
    for d, e in enumerate(spec):
        for a in ((e,) if isinstance(e, str) else (e or ())):
            t[d] *= mesh.shape[a]
    return t


def shapes_for(mesh, spec):
    factors = (2, 3, 1)
    shapes = []
    for rank in range(max(len(spec), 1), 4):
        t = tiling(mesh, spec, rank)
        shapes.append(tuple(t[d] * factors[d] for d in range(rank)))
    if len(spec) == 0:
        shapes.append(())
    return shapes


def write_layouts():
    lines = []
    for name, (shape, names, ids) in MESHES.items():
        mesh = make_mesh(name)
        lines.append(f"mesh {name} {shape_code(shape)} {','.join(names)} {','.join(map(str, ids))}")
        lines.append(f"mesh_repr {mesh!r}")
        lines.append(f"mesh_str {mesh}")
    for name in MESHES:
        mesh = make_mesh(name)
        for code in specs_for(mesh.axis_names):
            spec = spec_of(code)
            sharding = NamedSharding(mesh, spec)
            for shape in shapes_for(mesh, spec):
                lines.append(f"case {name} {code} {shape_code(shape)}")
                lines.append(f"spec_repr {spec!r}")
                lines.append(f"repr {sharding!r}")
                lines.append(f"shard_shape {shape_code(sharding.shard_shape(shape))}")
                lines.append(f"fully_replicated {int(sharding.is_fully_replicated)}")
                for dev, index in sharding.devices_indices_map(shape).items():
                    lines.append(f"index {dev.id} {slices_code(index, shape)}")
                x = jax.device_put(np.zeros(shape, np.float32), sharding)
                for s in x.addressable_shards:
                    index = slices_code(s.index, shape)
                    lines.append(f"shard {s.device.id} {index} {s.replica_id}")
                lines.append("end")
    with open(os.path.join(OUT, "layouts.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(lines)


def picture(shape, sharding, scale, min_width, max_width, use_color=False):
    buf = io.StringIO()
    # rich colours a non-terminal stream only when told to; 24-bit colour keeps the palette exact.
    env = {"FORCE_COLOR": "1", "COLORTERM": "truecolor"} if use_color else {}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with contextlib.redirect_stdout(buf):
            jax.debug.visualize_sharding(shape, sharding, use_color=use_color, scale=scale,
                                         min_width=min_width, max_width=max_width)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    return buf.getvalue()


def visualize_cases():
    cases = []
    # Every 1-D and 2-D layout case with the default options.
    for name in MESHES:
        mesh = make_mesh(name)
        for code in specs_for(mesh.axis_names):
            for shape in shapes_for(mesh, spec_of(code)):
                if 1 <= len(shape) <= 2:
                    cases.append((name, code, shape, 1.0, 9, 80))
    # The seeds' pictures: the shard_map tutorial's matmul_basic (iota and permuted meshes) and
    # the distributed-arrays tutorial's 8192 x 8192 array on a ('a', 'b') mesh.
    for mesh in ("m42", "m42p"):
        cases += [(mesh, "x/y", (8, 16), 1.0, 9, 80), (mesh, "y/-", (16, 4), 1.0, 9, 80),
                  (mesh, "x/-", (8, 4), 1.0, 9, 80)]
    for code in ("a/b", "b/a", "a/-", "-/b", "-/a", "a+b/-", "b", "_"):
        cases.append(("mab", code, (8192, 8192), 1.0, 9, 80))
    cases.append(("single", "_", (8192, 8192), 1.0, 9, 80))
    cases.append(("single", "_", (16,), 1.0, 9, 80))
    cases.append(("single", "_", (3, 17), 1.0, 9, 80))
    # Scales, widths, odd aspect ratios and tables wider than the console.
    for scale in (0.5, 2.0, 3.0, 0.25):
        for code, shape in (("x/y", (8, 8)), ("x", (16,)), ("y/x", (4, 12)), ("x+y", (32,))):
            cases.append(("m42", code, shape, scale, 9, 80))
    for min_width, max_width in ((5, 80), (12, 80), (20, 30), (9, 40), (9, 60), (9, 120),
                                 (1, 10), (30, 200)):
        for code, shape in (("x/y", (8, 8)), ("-/x+y", (8, 64)), ("x+y", (16,)), ("x", (8, 2))):
            cases.append(("m42", code, shape, 1.0, min_width, max_width))
    for code, shape, scale in (("-/i", (2, 64), 1.0), ("i", (16,), 400.0), ("-/i", (4, 16), 1.0),
                               ("-/i", (4, 24), 1.0), ("-/i", (2, 40), 1.0), ("i/-", (64, 2), 1.0),
                               ("-/i", (1, 8), 2.0), ("-/i", (3, 8), 7.0)):
        cases.append(("m8", code, shape, scale, 9, 80))
    for code, shape in (("x/y", (4, 4)), ("x+y/z", (8, 4)), ("z/x+y", (4, 8)), ("y/-", (4, 8))):
        cases.append(("m222", code, shape, 1.0, 9, 80))
        cases.append(("m222p", code, shape, 1.0, 9, 80))
    return cases


def colour_cases():
    cases = [("mab", code, (8192, 8192), 1.0, 9, 80)
             for code in ("a/b", "b/a", "a/-", "-/b", "-/a", "a+b/-")]
    cases += [("single", "_", (8192, 8192), 1.0, 9, 80), ("m42", "x/-", (8, 4), 1.0, 9, 80),
              ("m42p", "x/y", (8, 16), 1.0, 9, 80), ("m8", "i", (16,), 1.0, 9, 80),
              ("m42", "x+y", (16,), 1.0, 9, 40), ("m42", "x/y", (8, 8), 1.0, 20, 30),
              ("m8", "-/i", (4, 16), 1.0, 9, 80), ("m222", "x+y/z", (8, 4), 2.0, 9, 80),
              ("m42", "_", (3, 5), 0.5, 9, 80)]
    return cases


def write_visualize(filename, cases, use_color):
    parts = []
    for name, code, shape, scale, min_width, max_width in cases:
        if name == "single":
            sharding = SingleDeviceSharding(DEVICES[0])
        else:
            sharding = NamedSharding(make_mesh(name), spec_of(code))
        text = picture(shape, sharding, scale, min_width, max_width, use_color)
        assert text.endswith("\n") and "\n===" not in text
        assert ("\x1b[" in text) == use_color
        parts.append(f"=== {name} {code} {shape_code(shape)} {scale!r} {min_width} {max_width}\n")
        parts.append(text)
    with open(os.path.join(OUT, filename), "w") as f:
        f.write("".join(parts))
    return len(parts) // 2


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any JAX error is what we record
        return str(e)
    raise AssertionError("expected an error")


def write_errors():
    m42 = make_mesh("m42")
    m222 = make_mesh("m222")
    zeros = lambda shape: np.zeros(shape, np.float32)  # noqa: E731

    def put(mesh, code, shape):
        return lambda: jax.device_put(zeros(shape), NamedSharding(mesh, spec_of(code)))

    cases = [
        ("duplicate", "m42", "x/x", "-", lambda: NamedSharding(m42, P("x", "x"))),
        ("duplicate", "m42", "x+y/y", "-", lambda: NamedSharding(m42, P(("x", "y"), "y"))),
        ("duplicate", "m222", "x/-/z+x", "-",
         lambda: NamedSharding(m222, P("x", None, ("z", "x")))),
        ("unknown", "m42", "z", "-", lambda: NamedSharding(m42, P("z"))),
        ("unknown", "m42", "-/x+w", "-", lambda: NamedSharding(m42, P(None, ("x", "w")))),
        ("unknown", "m222", "x/q", "-", lambda: NamedSharding(m222, P("x", "q"))),
        ("rank", "m42", "x/-/y", "8,2", put(m42, "x/-/y", (8, 2))),
        ("rank", "m42", "x", "-", put(m42, "x", ())),
        ("rank", "m222", "x/y/z", "2,2", put(m222, "x/y/z", (2, 2))),
        ("indivisible", "m42", "x", "6,2", put(m42, "x", (6, 2))),
        ("indivisible", "m42", "x+y", "4,2", put(m42, "x+y", (4, 2))),
        ("indivisible", "m42", "-/y", "4,3", put(m42, "-/y", (4, 3))),
        ("indivisible", "m42", "x/y", "2,3", put(m42, "x/y", (2, 3))),
        ("indivisible", "m222", "x/y+z", "4,6", put(m222, "x/y+z", (4, 6))),
        ("visualize_rank", "m42", "x", "8,2,2",
         lambda: jax.debug.visualize_sharding((8, 2, 2), NamedSharding(m42, P("x")))),
        ("visualize_rank", "m42", "_", "-",
         lambda: jax.debug.visualize_sharding((), NamedSharding(m42, P()))),
        ("mesh_rank", "-", "-", "4,2", lambda: Mesh(np.array(DEVICES).reshape(4, 2), ("x",))),
        ("make_mesh_devices", "-", "-", "4,4", lambda: jax.make_mesh((4, 4), ("x", "y"))),
    ]
    lines = []
    for kind, mesh, code, shape, fn in cases:
        lines.append(f"error {kind} {mesh} {code} {shape}")
        lines.append(error_of(fn).replace("\n", " "))
    with open(os.path.join(OUT, "errors.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return len(cases)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    print("layout lines:", write_layouts())
    print("pictures:", write_visualize("visualize.txt", visualize_cases(), False))
    print("colour pictures:", write_visualize("colour.txt", colour_cases(), True))
    print("errors:", write_errors())
