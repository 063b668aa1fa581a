#!/usr/bin/env bash
# `spmd train --mesh 1` on two processes of four devices leaves process 1 out of the mesh: the
# job exits non-zero, and every process refuses the mesh up front, naming the option (checked
# in a second run where mpirun waits for both processes, which it would otherwise end at the
# first failure, and keeps each one's output apart).
# Usage: train_mesh_test.sh MPIRUN SPMD
set -u
mpirun=$1
spmd=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "FAILED: $*"
  exit 1
}
mpi=(timeout 300 "$mpirun" -np 2 --oversubscribe --bind-to none)
args=(train --mesh 1 --epochs 1 --steps 1 --no-plot --out "$dir/out")
expected="error: [spmd train] --mesh 1 uses 1 device but the job has 2 processes of 4 devices: "
expected+="process 1 would hold none of the mesh; every process must take part (--mesh 8 uses "
expected+="every device)"
"${mpi[@]}" "$spmd" "${args[@]}" >"$dir/out.txt" 2>&1 &&
  fail "the job succeeded: $(tail -5 "$dir/out.txt")"
grep -qF "$expected" "$dir/out.txt" || fail "no refusal: $(tail -5 "$dir/out.txt")"
"${mpi[@]}" --mca orte_abort_on_non_zero_status 0 --output-filename "$dir/log" "$spmd" \
  "${args[@]}" >/dev/null 2>&1
for rank in 0 1; do
  err=$(cat "$dir"/log/*/rank.$rank/stderr 2>/dev/null)
  echo "process $rank: $err"
  [ "$err" = "$expected" ] || fail "process $rank did not refuse the mesh"
  grep -qs "^step\|epoch" "$dir"/log/*/rank.$rank/stdout && fail "process $rank trained"
done
echo OK
