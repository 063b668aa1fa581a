#!/usr/bin/env bash
# A device that fails in one process fails the job everywhere, soon: both processes print an
# error naming the failed device, and mpirun ends with a non-zero status well before the
# collective timeout. A device that stalls instead makes the others time out, as does a process
# that stays away from a device_put needing its blocks.
# Usage: failure_test.sh MPIRUN PROBE
set -u
mpirun=$1
probe=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() {
  echo "FAILED: $*"
  exit 1
}

# run FAULT TIMEOUT_MS [ARG]: runs the probe on 2 processes of $devices devices (4 unless set);
# sets status and elapsed.
devices=4
run() {
  local start fault=()
  [ -z "$1" ] || fault=("SPMD_FAULT=$1")
  start=$(date +%s)
  env "${fault[@]}" SPMD_COLLECTIVE_TIMEOUT_MS="$2" SPMD_CPU_DEVICES="$devices" \
    timeout 120 "$mpirun" -np 2 --oversubscribe --bind-to none "$probe" ${3:-} >"$out" 2>&1
  status=$?
  elapsed=$(($(date +%s) - start))
  cat "$out"
  [ "$status" -ne 0 ] || fail "mpirun exited with status 0"
  [ "$status" -ne 124 ] || fail "the job hung"
}

# A throw: process 0 hears of it long before its 60 s timeout.
run 'device=5,at=psum,action=throw' 60000
[ "$elapsed" -lt 30 ] || fail "the failure took ${elapsed} s to reach every process"
grep -q "process 1 caught: .*injected failure on device 5 in psum" "$out" ||
  fail "process 1 did not report its own device's error"
grep -q "process 0 caught: .*process 1 failed on device 5: .*injected failure on device 5 in psum" "$out" ||
  fail "process 0 did not learn of process 1's failure"
echo "OK: a throw reached both processes in ${elapsed} s, mpirun status ${status}"

# The same throw in a psum large enough that each process reduces locally, then one member
# crosses processes while the others wait in the same meeting: every member is released.
run 'device=5,at=psum,action=throw' 60000 large
[ "$elapsed" -lt 30 ] || fail "the failure in a large psum took ${elapsed} s to reach every process"
grep -q "process 0 caught: .*process 1 failed on device 5: .*injected failure on device 5 in psum" "$out" ||
  fail "process 0 did not learn of process 1's failure in a large psum"
echo "OK: a throw in a large psum reached both processes in ${elapsed} s, mpirun status ${status}"

# A stall of 20 s against a 1 s timeout: both processes give up after the timeout.
run 'device=5,at=psum,action=stall,stall_ms=20000' 1000
[ "$elapsed" -lt 15 ] || fail "the timeout took ${elapsed} s"
grep -q "process 0 caught: .*timed out" "$out" || fail "process 0 did not time out"
grep -q "process 1 caught: .*timed out.*waiting for devices \[5\]" "$out" ||
  fail "process 1 did not name the stalled device"
echo "OK: a stall timed out on both processes in ${elapsed} s, mpirun status ${status}"

run 'device=5,at=psum,action=stall,stall_ms=20000' 1000 large
[ "$elapsed" -lt 15 ] || fail "the timeout of a large psum took ${elapsed} s"
grep -q "process 0 caught: .*timed out" "$out" || fail "process 0 did not time out in a large psum"
echo "OK: a stall in a large psum timed out on both processes in ${elapsed} s, mpirun status ${status}"

# A device_put that needs process 1's blocks while process 1 stays away: process 0 gives up after
# its 1 s timeout instead of waiting for ever.
run '' 1000 device_put
[ "$elapsed" -lt 15 ] || fail "the device_put took ${elapsed} s to give up"
grep -q "process 0 caught: \[device_put\] moving blocks between processes timed out after 1000 ms" "$out" ||
  fail "process 0 did not time out in its device_put"
echo "OK: a device_put left alone timed out in ${elapsed} s, mpirun status ${status}"

# One device per process: each process runs its device's share on the launching thread. A throw
# there, at the psum or at the start of the share, reaches both processes; a stall times out on
# both.
devices=1
for at in psum launch; do
  where="in psum"
  [ "$at" = psum ] || where="at the start of a launch"
  run "device=1,at=$at,action=throw" 60000
  [ "$elapsed" -lt 30 ] || fail "the failure at $at on one device per process took ${elapsed} s"
  grep -q "process 1 caught: .*injected failure on device 1 $where" "$out" ||
    fail "process 1 did not report its own device's error at $at"
  grep -q "process 0 caught: .*process 1 failed on device 1: .*injected failure on device 1 $where" \
    "$out" || fail "process 0 did not learn of process 1's failure at $at"
  echo "OK: a throw at $at on one device per process reached both processes in ${elapsed} s"
done
# A stall of 3 s against a 1 s timeout: process 0, waiting on its launching thread, gives up
# after its timeout (process 1 may then complete its psum from what process 0 had sent).
run 'device=1,at=psum,action=stall,stall_ms=3000' 1000
[ "$elapsed" -lt 15 ] || fail "the timeout on one device per process took ${elapsed} s"
grep -q "process 0 caught: .*timed out" "$out" || fail "process 0 did not time out on one device"
echo "OK: a stall on one device per process timed out on process 0 in ${elapsed} s"
