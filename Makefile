# The two entry points: `make run` (install, build, run the tour) and `make test` (install, build,
# run every test including the out-of-tree consumer project).
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= $(CURDIR)/$(BUILD)/install

.PHONY: all deps configure build run test install consumer bench clean

all: build

deps:
	@./scripts/install-deps.sh

configure: deps
	@[ -f $(BUILD)/Makefile ] || cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@$(BUILD)/src/cli/spmd tour

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

clean:
	rm -rf $(BUILD)
