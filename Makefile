# The two entry points: `make run` (install, build the program, run the tour and one epoch of
# training) and `make test` (install, build, run every test including the out-of-tree consumer
# project).
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= $(CURDIR)/$(BUILD)/install

.PHONY: all deps configure build run test install consumer bench tsan asan clean

all: build

deps:
	@./scripts/install-deps.sh

configure: deps
	@[ -f $(BUILD)/Makefile ] || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Builds only the program (not the tests), then shows it.
run: configure
	@cmake --build $(BUILD) -j $(JOBS) --target spmd_cli
	@$(BUILD)/src/cli/spmd tour
	@$(BUILD)/src/cli/spmd train --mesh 4x2 --epochs 1 --out $(BUILD)/spmd-train

install: build
	@cmake --install $(BUILD) >/dev/null

consumer: install
	@cmake -S examples/consumer -B $(BUILD)/consumer -DCMAKE_PREFIX_PATH=$(PREFIX) >/dev/null
	@cmake --build $(BUILD)/consumer -j $(JOBS) >/dev/null
	@$(BUILD)/consumer/consumer

test: build consumer
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD)/bench/spmd_bench

# The whole library built with ThreadSanitizer, running the tests of devices, collectives, faults,
# shard_map and pmap on 8 devices, then (with MPI) the tests between processes under mpirun
# (tests/mpi/tsan_mpi.sh). A second full build, so not part of `make test` (which runs
# the runtime and collectives under ThreadSanitizer in spmd_tsan_tests).
TSAN_BUILD ?= build-tsan
TSAN_TESTS ?= CompileCache*:LruCache*:ShardMap*:Pmap*:NestedPmap*:Placement*:Collective*:Device*:Executor*:Communicator*:FaultInjection*:Examples*:Partitioning*:PartitioningRegressions*:Differential*:MatmulReference*:ShardingApi*:ConcurrentKernels*:Explain*:ExplicitTest*:Optim*:NnModel*:FunctionalCall*:ExitDrain*:OrderedDict*:PackedGemm*:ContextMesh*:Launchable*:RepeatedLaunch*
tsan: deps
	@[ -f $(TSAN_BUILD)/Makefile ] || cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
	  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target spmd_tests
	@TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/tsan_suppressions.txt" SPMD_CPU_DEVICES=8 \
	  $(TSAN_BUILD)/tests/spmd_tests --gtest_filter='$(TSAN_TESTS)'
	@if cmake --build $(TSAN_BUILD) --target help | grep spmd_mpi_tests >/dev/null; then \
	  cmake --build $(TSAN_BUILD) -j $(JOBS) --target spmd_mpi_tests && \
	  tests/mpi/tsan_mpi.sh mpirun $(TSAN_BUILD) $(CURDIR)/tests/tsan_mpi_suppressions.txt; fi

# The whole library and test suite built with AddressSanitizer, LeakSanitizer and
# UndefinedBehaviorSanitizer, running every test: any finding fails the run. The tests under
# mpirun (not the seed examples and `spmd train`, which this build does not make) run in a second
# pass without LeakSanitizer, since Open MPI keeps allocations until exit. .ci/run runs it
# after `make test`. Allocations the system cannot satisfy must return null (the tests of
# RESOURCE_EXHAUSTED ask for more memory than exists). GCC's -Wmaybe-uninitialized is off here:
# with the sanitizers' instrumentation it misreads libstdc++'s std::regex.
ASAN_BUILD ?= build-asan
ASAN_FLAGS := -O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
  -Wno-maybe-uninitialized
asan: deps
	@[ -f $(ASAN_BUILD)/Makefile ] || cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Sanitize \
	  -DCMAKE_CXX_FLAGS="$(ASAN_FLAGS)" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined \
	  -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined -DSPMD_BUILD_BENCH=OFF \
	  -DSPMD_BUILD_TOOLS=OFF >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) --target spmd_sanitized_tests
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -E "spmd_tsan_tests|spmd_mpi_"
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j 1 --no-tests=ignore \
	  -R "spmd_mpi_(tests|suites|failure|failing)"

clean:
	rm -rf $(BUILD)
