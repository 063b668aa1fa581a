#!/usr/bin/env bash
# The `spmd` command's option errors: each bad option ends the program with status 1 and one
# message naming the option and what it accepts, never an uncaught exception.
# Usage: options_test.sh SPMD
set -u
spmd=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
# expect STATUS MESSAGE ARGS...: the command's status and that its output holds MESSAGE.
expect() {
  local status=$1 message=$2
  shift 2
  SPMD_CPU_DEVICES=8 "$spmd" "$@" >"$dir/out.txt" 2>&1
  local got=$?
  if [ "$got" != "$status" ] || ! grep -qF -- "$message" "$dir/out.txt"; then
    echo "FAILED: spmd $* gave status $got and:"
    cat "$dir/out.txt"
    failed=1
  fi
  if grep -q "terminate called" "$dir/out.txt"; then
    echo "FAILED: spmd $* ended on an uncaught exception"
    failed=1
  fi
}
expect 105 "--optimizer: must be sgd, adam or adamw, got 'rmsprop'" train --optimizer rmsprop
expect 105 "--schedule: must be cosine or constant, got 'linear'" train --schedule linear
expect 1 "error: [spmd train] --mesh must be N (data parallel) or BxM" train --mesh 0
expect 1 "error: [spmd train] --epochs and --batch must be at least 1" train --batch 0
expect 1 "error: [spmd train] --mesh 2x3: the model axis (3) must divide the hidden layers' 1024 units" \
  train --mesh 2x3
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  : >"$dir/file"
  expect 1 "error: [spmd train] --out '$dir/file/out' cannot be made a directory: " \
    train --steps 1 --no-plot --out "$dir/file/out"
  expect 1 "error: [spmd train] --batch 60008 is larger than the training set" \
    train --batch 60008 --no-plot --out "$dir/run"
fi
[ "$failed" = 0 ] && echo OK
exit "$failed"
