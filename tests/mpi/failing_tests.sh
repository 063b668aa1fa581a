#!/usr/bin/env bash
# Tests of spmd_tests that make devices fail on purpose, on 2 processes of 4 devices, each in a
# job of its own: a failure between processes ends the job's collectives (and the job, which
# exits through MPI_Abort). Every process must raise as the test expects and pass it.
# Usage: failing_tests.sh MPIRUN SPMD_TESTS TEST...
set -u
mpirun=$1
tests=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
failed=0
for t in "$@"; do
  SPMD_CPU_DEVICES=4 timeout 120 "$mpirun" -np 2 --oversubscribe --bind-to none --tag-output \
    "$tests" --gtest_color=no --gtest_filter="$t" </dev/null >"$out" 2>&1
  status=$?
  for rank in 0 1; do
    if [ "$status" -eq 124 ] || ! grep -q "^\[[0-9]*,$rank\]<stdout>:\[       OK \] $t " "$out"; then
      cat "$out"
      echo "FAILED: $t on process $rank (mpirun status $status)"
      failed=1
    fi
  done
  [ "$failed" -ne 0 ] || echo "OK: $t passed on both processes"
done
exit "$failed"
