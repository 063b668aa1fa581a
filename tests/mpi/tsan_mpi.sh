#!/usr/bin/env bash
# The tests between processes under ThreadSanitizer (`make tsan`): spmd_mpi_tests on 2 processes
# of 4 devices and on 3 of 2, spmd_mpi_tests' launches on the calling thread included, and the
# suites of spmd_tests that `ctest -R spmd_mpi_suites` runs, on 2 processes of 4 devices.
# Open MPI is not built with ThreadSanitizer: tests/tsan_mpi_suppressions.txt says what of it
# is left out and why. The components it names are preloaded so that Open MPI's dlclose at
# MPI_Finalize does not unload them (ThreadSanitizer refuses to lose a library that a
# called_from_lib suppression matched).
# Usage: tsan_mpi.sh MPIRUN BUILD_DIR SUPPRESSIONS
set -eu
mpirun=$1
build=$2
suppressions=$3
# The filter of spmd_mpi_suites, as CMake wrote it for ctest.
suites=$(grep -o -- '--gtest_filter=[^"]*' <(grep 'spmd_mpi_suites' "$build/tests/CTestTestfile.cmake") |
         head -1 | sed 's/^--gtest_filter=//')
[ -n "$suites" ] || { echo "tsan_mpi.sh: no spmd_mpi_suites test in $build"; exit 1; }
components=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
[ -d "$components" ] || components=$(dirname "$(find /usr/lib -name mca_pml_ob1.so -print -quit)")
preload=""
for lib in "$(find /usr/lib /lib -name 'libpmix.so.2' -print -quit 2>/dev/null)" \
           "$components"/mca_{pmix_ext3x,btl_vader,btl_tcp,btl_self,pml_ob1,coll_tuned,coll_basic,coll_libnbc,osc_rdma}.so; do
  [ -f "$lib" ] && preload="$preload${preload:+:}$lib"
done
export LD_PRELOAD="$preload"
export TSAN_OPTIONS="halt_on_error=1 suppressions=$suppressions"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run DEVICES PROCESSES PROGRAM ARGS...
  local devices=$1 processes=$2
  shift 2
  echo "== $processes processes of $devices devices: $(basename "$1") ${2:-}"
  SPMD_CPU_DEVICES=$devices "$mpirun" -np "$processes" --oversubscribe --bind-to none \
    -x LD_PRELOAD -x TSAN_OPTIONS -x SPMD_CPU_DEVICES "$@" --gtest_brief=1 </dev/null
}
run 4 2 "$build/tests/spmd_mpi_tests"
run 2 3 "$build/tests/spmd_mpi_tests" --gtest_filter='AnyJob*'
run 4 2 "$build/tests/spmd_tests" --gtest_filter="$suites"
