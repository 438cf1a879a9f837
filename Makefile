# The two commands of the README. Both install what is missing, configure and build first.
#   make run   - the main job: `epigemm demo` on the best device present (CPU by default);
#                builds the epigemm program and the library only
#   make test  - builds everything (CUDA code too when nvcc is there) and runs every test this
#                machine can run (GPU tests print SKIP without a GPU), the Python package's too
#                (make python-test)
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

# `make run` on a machine with a usable GPU uses the full build (CUDA included). Without one it
# uses a CPU-only build of its own, so that a CPU demo never waits for CUDA code to compile.
HAVE_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
ifeq ($(HAVE_GPU),yes)
RUN_BUILD_DIR := $(BUILD_DIR)
RUN_CMAKE_FLAGS :=
else
RUN_BUILD_DIR := $(BUILD_DIR)-cpu
RUN_CMAKE_FLAGS := -DEPIGEMM_WITH_CUDA=OFF -DEPIGEMM_BUILD_TESTS=OFF \
  -DEPIGEMM_BUILD_EXAMPLES=OFF -DEPIGEMM_BUILD_BENCH=OFF
endif

# The Python package's build compiles the library once more; without a GPU its CUDA code is left
# out (the main build above has compiled it already).
ifeq ($(HAVE_GPU),yes)
PY_BUILD_FLAGS :=
else
# (the long option: Debian 12's pip 23.0 has no -C)
PY_BUILD_FLAGS := --config-settings=cmake.define.EPIGEMM_WITH_CUDA=OFF
endif

.PHONY: all deps configure build test python-test run clean

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
	$(MAKE) python-test

# The Python package (pyproject.toml, python/): `pip install .` into a venv under $(BUILD_DIR),
# then its tests (PyTorch's are skipped, with the reason, where PyTorch is not installed).
# WITH_TORCH=1 installs PyPI's newest torch into that venv first (about 5 GB with the CUDA
# libraries it depends on), so that the package's PyTorch operators are built against it and the
# PyTorch tests run (on CPU tensors where there is no GPU).
PY_VENV := $(BUILD_DIR)/python-venv
python-test: deps
	@test -x $(PY_VENV)/bin/python || python3 -m venv $(PY_VENV) || \
	  { echo "python3 -m venv failed: on Debian, apt-get install python3-venv python3-dev"; exit 1; }
	$(PY_VENV)/bin/python -m pip install -q numpy pytest ml_dtypes scikit-build-core nanobind
	@if [ "$(WITH_TORCH)" = 1 ]; then $(PY_VENV)/bin/python -m pip install -q --upgrade torch; fi
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY_VENV)/bin/python -m pip install -q --no-build-isolation $(PY_BUILD_FLAGS) .
	$(PY_VENV)/bin/python -m pytest -q -rs -p no:cacheprovider python/tests

run: deps
	@if [ ! -f $(RUN_BUILD_DIR)/CMakeCache.txt ]; then \
	  cmake -S . -B $(RUN_BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(RUN_CMAKE_FLAGS); \
	fi
	cmake --build $(RUN_BUILD_DIR) -j $(JOBS) --target epigemm_cli
	$(RUN_BUILD_DIR)/tools/epigemm demo

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-cpu

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
