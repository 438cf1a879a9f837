# The two commands of the README. Both install what is missing, configure and build first.
#   make run   - the main job: `epigemm demo` on the best device present (CPU by default)
#   make test  - every test this machine can run (GPU tests print SKIP without a GPU)
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps configure build test run clean

all: build

deps:
	@bash scripts/install_deps.sh

configure: deps
	@if [ ! -f $(BUILD_DIR)/CMakeCache.txt ]; then \
	  cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release; \
	fi

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

run: build
	$(BUILD_DIR)/tools/epigemm demo

clean:
	rm -rf $(BUILD_DIR)

# CI's extra builds (they install clang and its runtimes first):
#   make sanitize  - clang + ASan + UBSan build, the whole test suite under it, 90 s of fuzzing
#   make clang     - clang build of everything (CUDA too, with clang++ as nvcc's host compiler)
.PHONY: sanitize clang
sanitize:
	@bash scripts/install_deps.sh --ci
	bash scripts/sanitize.sh

clang:
	@bash scripts/install_deps.sh --ci
	bash scripts/clang_build.sh
