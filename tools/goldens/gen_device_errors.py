"""Records JAX's error texts for devices a process does not have, which spmd reuses when a
Device (a plain struct any caller can fill) names an unknown id, platform or process, for
tests/runtime/device_validation_test.cpp. Writes tests/goldens/errors/device_errors.txt in the
block format of api_errors.txt (gen_errors.py): a line `=== <case>`, then
`<type(e).__name__>: <str(e)>` up to the next `=== ` line; lines before the first block start
with `#` and say how each case was run.

JAX's devices are objects a user cannot make up, so the cases are the nearest public calls that
look a device up by platform, process index or id. Mistakes JAX 0.10.2 has no message of its
own for (spmd keeps its own text and tests it exactly):
* a Mesh, NamedSharding or pmap `devices` list with a repeated device: Mesh accepts it, and
  device_put, jit and shard_map then fail with "safe_zip() argument 1 has length 2 but argument
  0 has length 1. All lengths: (1, 2)".
Run: python3 tools/goldens/gen_device_errors.py   (needs jax 0.10.2; the tests do not)
"""
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "goldens",
                   "errors")

# (case, source of a zero-argument callable that raises, note)
CASES = [
    ("unknown_device_id",
     "lambda: jnp.zeros(2).__dlpack__(dl_device=(1, 42))",
     "PjRt's lookup of a CPU device id (DLPack device type 1 is the CPU) the client lacks; "
     "'INVALID_ARGUMENT: ' is the status code, not part of the text spmd reuses."),
    ("unknown_platform", "lambda: jax.devices('gpu')", ""),
    ("unknown_process_index", "lambda: jax.local_devices(process_index=1)", ""),
]


def main():
    ns = {"jax": jax, "jnp": jnp}
    header = [f"# JAX {jax.__version__} on {jax.device_count()} CPU devices"]
    blocks = []
    for name, source, note in CASES:
        try:
            eval(source, ns)()
        except Exception as e:  # noqa: BLE001 -- recording whatever JAX raises
            blocks.append(f"=== {name}\n{type(e).__name__}: {e}\n")
        else:
            raise AssertionError(f"{name} did not raise")
        header.append(f"# {name}: {source}")
        if note:
            header.append(f"#   {note}")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "device_errors.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(header) + "\n" + "".join(blocks))


if __name__ == "__main__":
    main()
