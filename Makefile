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
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS); status=$$?; sh $(CURDIR)/scripts/test_skip_summary.sh Testing/Temporary/LastTest.log; exit $$status

run: build
	$(BUILD_DIR)/tools/epigemm demo

clean:
	rm -rf $(BUILD_DIR)
