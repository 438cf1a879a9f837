#!/usr/bin/env bash
# The cutlass backend on the GPU machine (an H200, no network): CUTLASS's headers from the carried
# wheel, a sm_90a build with all cores, then the cutlass tests: the shared matrix for cutlass, its
# own tests (every kernel against the reference, grids smaller and larger than the SM count,
# bitwise repeatability across runs and contexts, graph capture and replay, the host-side support
# answers), the determinism test and the classic and layer calls on it, the validation tests, and
# compute-sanitizer memcheck / racecheck on small cutlass calls. Prints a short summary last,
# with how many matrix cases cutlass ran itself and how many it declined (those ran under auto).
#
#   bash scripts/gpu_cutlass_check.sh prepare   # here, once: .gtest-src for a machine without
#                                               # GoogleTest (as gpu_check.sh prepare), and the
#                                               # CUTLASS wheel in .deps/ (scripts/fetch_cutlass.sh)
#   bash scripts/gpu_cutlass_check.sh           # there, with .gtest-src and .deps carried along
#
# Environment: OUT (default ./gpu-cutlass-out), TESTS_FILTER (gtest filter of the test step),
# SANITIZE=0 to skip compute-sanitizer, SHARDS (default: the number of cores).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${1:-}" = prepare ]; then
  bash scripts/gpu_check.sh prepare
  bash scripts/fetch_cutlass.sh
  echo "carry .gtest-src and .deps to the GPU machine"
  exit 0
fi

OUT=${OUT:-$ROOT/gpu-cutlass-out}
mkdir -p "$OUT"
BUILD=$ROOT/build-gpu-cutlass
TESTS_FILTER=${TESTS_FILTER:-'cutlass/*:CutlassBackend.*:CutlassSupport.*:*/cutlass:*/cutlass_device:*BadInput.*:BackendDescription*:*Dispatch*'}
MEMCHECK_FILTER=${MEMCHECK_FILTER:-'CutlassBackend.GridSmallerThanTheSmCount:CutlassBackend.CallsCaptureIntoAGraphAndReplay'}
RACECHECK_FILTER=${RACECHECK_FILTER:-'CutlassBackend.CallsCaptureIntoAGraphAndReplay'}
step() { echo "== $(date -u +%H:%M:%S) $*"; }
# "[  PASSED  ] 12 tests." etc., summed over the logs given (shards)
counts() {
  local passed failed skipped
  passed=$(cat "$@" | grep -Eo '^\[  PASSED  \] [0-9]+' | grep -Eo '[0-9]+$' | awk '{s += $1} END {print s + 0}')
  failed=$(cat "$@" | grep -Eo '^\[  FAILED  \] [0-9]+ test' | grep -Eo '[0-9]+' | awk '{s += $1} END {print s + 0}')
  skipped=$(cat "$@" | grep -Eo '^\[  SKIPPED \] [0-9]+ test' | grep -Eo '[0-9]+' | awk '{s += $1} END {print s + 0}')
  echo "passed $passed, failed $failed, skipped $skipped"
}

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$OUT/device.log"
nvcc --version | tail -1 | tee -a "$OUT/device.log"

step "CUTLASS headers from the carried wheel (no network)"
if ! bash scripts/fetch_cutlass.sh > "$OUT/fetch.log" 2>&1; then
  cat "$OUT/fetch.log"
  echo "FETCH FAILED: carry .deps/nvidia_cutlass-4.2.0.0-py3-none-any.whl (bash scripts/gpu_cutlass_check.sh prepare)"
  exit 1
fi

step "configure + build for sm_90a ($(nproc) cores)"
GTEST_ARG=()
if [ -d "$ROOT/.gtest-src" ]; then GTEST_ARG=(-DEPIGEMM_GTEST_SOURCE_DIR="$ROOT/.gtest-src"); fi
build_start=$(date +%s)
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEPIGEMM_WITH_CUDA=ON \
         -DCMAKE_CUDA_ARCHITECTURES=90a "${GTEST_ARG[@]}" &&
       cmake --build "$BUILD" -j"$(nproc)" --target epigemm_tests epigemm_cli; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "BUILD FAILED (full log: $OUT/build.log)"
  exit 1
fi
echo "build: $(( $(date +%s) - build_start )) s; $(grep -c -i 'warning' "$OUT/build.log") warning lines"
grep -E "epigemm: cutlass backend" "$OUT/build.log" | head -1
TESTS=$BUILD/tests/epigemm_tests
"$BUILD/tools/epigemm" info 2>&1 | grep -A1 -E "^  cutlass" | tee "$OUT/info.log"

SHARDS=${SHARDS:-$(nproc)}
step "tests: $TESTS_FILTER in $SHARDS shards"
rm -f "$OUT"/tests.shard.*.log
for shard in $(seq 0 $((SHARDS - 1))); do
  GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$shard OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    timeout 200 "$TESTS" --gtest_filter="$TESTS_FILTER" > "$OUT/tests.shard.$shard.log" 2>&1 &
done
TESTS_RC=0
for job in $(jobs -p); do wait "$job" || TESTS_RC=1; done
cat "$OUT"/tests.shard.*.log > "$OUT/tests.log" && rm -f "$OUT"/tests.shard.*.log
grep -E '^\[  (FAILED|SKIPPED) ' "$OUT/tests.log" | grep -v "listed below" | sort -u | head -30
# The matrix's report, per shard: "[ cases    ] cutlass ran N cases itself; declined M (...)".
CASES=$(grep -E '^\[ cases    \] cutlass ran' "$OUT/tests.log" |
        awk '{ran += $6; declined += $10} END {printf "cutlass ran %d matrix cases itself, declined %d (rerouted by auto and checked)", ran, declined}')

MEMCHECK_RC=skipped
RACECHECK_RC=skipped
if [ "${SANITIZE:-1}" = 1 ]; then
  step "compute-sanitizer memcheck: $MEMCHECK_FILTER"
  timeout 90 compute-sanitizer --tool memcheck --leak-check no --error-exitcode 99 \
    "$TESTS" --gtest_filter="$MEMCHECK_FILTER" > "$OUT/memcheck.log" 2>&1
  MEMCHECK_RC=$?
  tail -2 "$OUT/memcheck.log"
  step "compute-sanitizer racecheck: $RACECHECK_FILTER"
  timeout 60 compute-sanitizer --tool racecheck --error-exitcode 99 \
    "$TESTS" --gtest_filter="$RACECHECK_FILTER" > "$OUT/racecheck.log" 2>&1
  RACECHECK_RC=$?
  tail -2 "$OUT/racecheck.log"
fi

echo
echo "logs in $OUT: device.log fetch.log build.log info.log tests.log memcheck.log racecheck.log"
echo "tests:     rc $TESTS_RC, $(counts "$OUT/tests.log")"
echo "matrix:    ${CASES:-no case report (did the matrix run?)}"
if [ "$MEMCHECK_RC" != skipped ]; then
  echo "memcheck:  rc $MEMCHECK_RC, $(counts "$OUT/memcheck.log"), $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)"
  echo "racecheck: rc $RACECHECK_RC, $(counts "$OUT/racecheck.log"), $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$OUT/racecheck.log" | tail -1)"
fi
[ $TESTS_RC -eq 0 ] && { [ "$MEMCHECK_RC" = skipped ] || { [ "$MEMCHECK_RC" -eq 0 ] && [ "$RACECHECK_RC" -eq 0 ]; }; }
