#!/usr/bin/env bash
# `spmd train --mesh 4x2` on two processes of four devices trains like one process of eight:
# the losses of the first steps agree to 1e-4 relative (the same up to the association of
# float sums) and the last line is the same test accuracy.
# Usage: train_test.sh MPIRUN SPMD
set -u
mpirun=$1
spmd=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
  echo "FAILED: $*"
  exit 1
}
args=(train --mesh 4x2 --epochs 1 --steps 12 --no-plot)
SPMD_CPU_DEVICES=8 "$spmd" "${args[@]}" --out "$dir/one" >"$dir/one.txt" 2>&1 ||
  fail "one process: $(tail -3 "$dir/one.txt")"
timeout 300 "$mpirun" -np 2 --oversubscribe --bind-to none "$spmd" "${args[@]}" \
  --out "$dir/two" >"$dir/two.txt" 2>&1 || fail "two processes: $(tail -5 "$dir/two.txt")"
tail -1 "$dir/one.txt"
tail -1 "$dir/two.txt"
[ "$(tail -1 "$dir/one.txt")" = "$(tail -1 "$dir/two.txt")" ] || fail "different test accuracy"
[ "$(grep -c '^test accuracy' "$dir/two.txt")" = 1 ] || fail "process 1 printed too"
paste <(grep '^step' "$dir/one/history.txt") <(grep '^step' "$dir/two/history.txt") |
  awk '{ n++; d = $3 - $6; if (d < 0) d = -d; if (d > 1e-4 * ($3 < 0 ? -$3 : $3)) bad++ }
       END { print n " step losses compared"; exit (n == 12 && bad == 0) ? 0 : 1 }' ||
  fail "the step losses differ"
cmp -s "$dir/one/checkpoint.safetensors" "$dir/two/checkpoint.safetensors" &&
  echo "the checkpoints are the same bytes"
echo OK
