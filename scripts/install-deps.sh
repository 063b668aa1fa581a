#!/usr/bin/env bash
# Installs the Debian packages spmd builds against. Idempotent and quiet when all are present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libdnnl-dev          # GEMM (float32, bfloat16)
  ocl-icd-opencl-dev   # oneDNN's CMake package requires OpenCL (only recommended by Debian)
  ccache               # rebuilds after header changes stay fast
  libhwy-dev           # SIMD elementwise math with runtime dispatch
  libxbyak-dev         # generated code for fused float32 loops
  libopenblas-dev      # float64 GEMM
  zlib1g-dev           # deflate-compressed .npz members
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev         # the spmd command-line program
  libopenmpi-dev openmpi-bin # several processes (sp::distributed, mpirun)
  dataset-fashion-mnist # real training data (sp::data): 784 inputs, 10 classes, the seed's MLP
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
