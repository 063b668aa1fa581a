#!/usr/bin/env bash
# The seed examples print on two processes of four devices exactly what they print on one
# process of eight (timings aside).
# Usage: examples_test.sh MPIRUN EXAMPLES_DIR
set -u
mpirun=$1
dir=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
# A process may wait long for the other (process 0 alone computes the single-device cells).
export SPMD_COLLECTIVE_TIMEOUT_MS=${SPMD_COLLECTIVE_TIMEOUT_MS:-600000}
# %timeit lines hold times, which differ from run to run.
untimed() { sed -E 's/[0-9.]+(e[+-][0-9]+)? (s|ms|µs|ns) ± [0-9.]+(e[+-][0-9]+)? (s|ms|µs|ns) per loop/TIME per loop/' "$1"; }
for example in "pmap_cookbook" "shard_map_basics" "distributed_arrays --small"; do
  name=${example%% *}
  # shellcheck disable=SC2086
  SPMD_EXAMPLE_CELLS=1 SPMD_CPU_DEVICES=8 "$dir"/$example >"$out/$name.one" 2>&1 ||
    { echo "FAILED: $name on one process"; status=1; continue; }
  # shellcheck disable=SC2086
  SPMD_EXAMPLE_CELLS=1 SPMD_CPU_DEVICES=4 NO_COLOR=1 timeout 900 "$mpirun" -np 2 \
    --oversubscribe --bind-to none -x SPMD_EXAMPLE_CELLS -x SPMD_CPU_DEVICES -x NO_COLOR \
    -x SPMD_COLLECTIVE_TIMEOUT_MS \
    "$dir"/$example >"$out/$name.two" 2>&1 ||
    { echo "FAILED: $name on two processes:"; tail -5 "$out/$name.two"; status=1; continue; }
  if diff <(untimed "$out/$name.one") <(untimed "$out/$name.two") >"$out/$name.diff"; then
    echo "OK: $name prints the same on 2 processes x 4 devices ($(wc -l <"$out/$name.one") lines)"
  else
    echo "FAILED: $name prints differently on two processes:"
    head -20 "$out/$name.diff"
    status=1
  fi
done
exit $status
