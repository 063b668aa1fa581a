#!/usr/bin/env bash
# psum between processes beside raw MPI_Allreduce, then the weak scaling of the seed's MLP
# data-parallel step, spmd beside JAX's own multi-process CPU run (gloo collectives).
#
#   bench/compare/mpi_psum.sh [BUILD_DIR] [psum_bench options, e.g. --max-bytes 16M]
#
# Configurations: 2 processes x 1 device, 2 processes x 4 devices (psum); 1 process x 4 devices
# and 2 processes x 4 devices (MLP step, 1024 rows per device), plus 1 process x 8 devices (the
# seed's own 8-way step, the same global batch as 2 x 4). Set SKIP_JAX=1 to leave JAX out.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
shift || true
bench=$build/bench/spmd_mpi_bench
python=${JAX_PYTHON:-/work/jaxenv/bin/python}
[ -x "$bench" ] || { echo "mpi_psum.sh: $bench not built (needs SPMD_WITH_MPI)" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
run() {  # processes devices-per-process args...
  local np=$1 dev=$2
  shift 2
  SPMD_CPU_DEVICES=$dev mpirun -np "$np" --oversubscribe --bind-to none "$bench" "$@"
}

echo "== psum, 2 processes x 1 device"
run 2 1 "$@"
echo
echo "== psum, 2 processes x 4 devices"
run 2 4 "$@"
echo
echo "== MLP data-parallel step (weak scaling: 1024 rows per device)"
run 1 4 --mlp
run 2 4 --mlp
run 1 8 --mlp
if [ -z "${SKIP_JAX:-}" ] && [ -x "$python" ]; then
  echo "JAX (jax.distributed on localhost, gloo CPU collectives):"
  "$python" "$here/mlp_dp_jax.py" --processes 1 --devices 4 2>/dev/null
  "$python" "$here/mlp_dp_jax.py" --processes 2 --devices 4 2>/dev/null
  "$python" "$here/mlp_dp_jax.py" --processes 1 --devices 8 2>/dev/null
fi
