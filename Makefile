# The two commands of the README. Both install what is missing, configure and build first.
#   make run   - the main job: `epigemm demo` on the best device present (CPU by default)
#   make test  - every test this machine can run (GPU tests print SKIP without a GPU), the Python
#                package's too (make python-test)
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

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
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) python-test

# The Python package (pyproject.toml, python/): `pip install .` into a venv under $(BUILD_DIR),
# then its tests (PyTorch's are skipped, with the reason, where PyTorch is not installed).
PY_VENV := $(BUILD_DIR)/python-venv
python-test: deps
	@test -x $(PY_VENV)/bin/python || python3 -m venv $(PY_VENV) || \
	  { echo "python3 -m venv failed: on Debian, apt-get install python3-venv python3-dev"; exit 1; }
	$(PY_VENV)/bin/python -m pip install -q numpy pytest ml_dtypes scikit-build-core nanobind
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY_VENV)/bin/python -m pip install -q --no-build-isolation .
	$(PY_VENV)/bin/python -m pytest -q -rs -p no:cacheprovider python/tests

run: build
	$(BUILD_DIR)/tools/epigemm demo

clean:
	rm -rf $(BUILD_DIR)
