#!/usr/bin/env bash
# The one GPU script: on the GPU machine, build with all cores, run the whole test binary, run the
# benchmark and the labs (epilogue kernels, cutlass tile configurations, host overhead; short
# settings), run the GPU tests again under compute-sanitizer (memcheck, racecheck), and leave
# logs and results in $OUT (default ./gpu-check-out). Prints a short table last.
#
#   bash scripts/gpu_check.sh prepare   # here, once: copies /usr/src/googletest into .gtest-src
#                                       # (ignored) for a GPU machine without GoogleTest; carry it
#   bash scripts/gpu_check.sh           # on the GPU machine, with .gtest-src copied along
#
# Environment: TESTS_FILTER / MEMCHECK_FILTER / RACECHECK_FILTER (gtest filters; TESTS_FILTER
# defaults to the whole binary), SANITIZER_SHARDS (gtest shards per sanitizer, side by side;
# default 8), BENCH_ARGS (e.g. "--reps 40" or "--activations gelu_tanh"),
# LAB_ARGS (the kernel lab's; default a short setting: 10 repetitions after 2 warm-ups),
# TILES_LAB_ARGS (the cutlass tile configurations lab's, where the cutlass backend is built;
# default the public shapes, 10 repetitions).
# CMAKE_ARGS: further options for the configure step (e.g.
# "-DEPIGEMM_WITH_CUTLASS=OFF"); an option once given stays in build-gpu's cache
# until it is given again with another value.
# TESTS_ONLY=1: the build, the tests, the demo and the sanitizers, without the benchmark and the lab.
# DISPATCH_REFRESH=1: afterwards, regenerate src/backends/cublaslt/dispatch_table.inc from this
# run's benchmark (scripts/make_dispatch_table.py), rebuild, run the dispatch and cublaslt/auto
# tests and the benchmark again with the new table compiled in, for the activations cuBLASLt has
# (gelu_tanh, relu: the only ones with table rows; results in $OUT/rerun).
# PACK=1: at the end, pack everything under $OUT into $OUT/gpu-check.tgz (one file to copy back
# from a remote machine).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

if [ "${1:-}" = prepare ]; then
  rm -rf .gtest-src && cp -r /usr/src/googletest .gtest-src
  # (git rev-parse: in a worktree .git is a file, and the exclude file lives in the main repository)
  exclude=$(git rev-parse --git-path info/exclude)
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.gtest-src/' "$exclude" 2>/dev/null || echo '/.gtest-src/' >> "$exclude"
  echo "copied /usr/src/googletest to .gtest-src (ignored); carry it to the GPU machine"
  exit 0
fi

OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
BUILD=$ROOT/build-gpu
# The sweep of every epilogue and activation runs 150 calls: too slow under memcheck; the kernel
# paths it reaches are in the other CudaBackend tests.
# Every CutlassBackend test: between them they run every cutlass kernel family in every layout,
# activation and dtype it is instantiated for, and every tile configuration with and without a
# source.
MEMCHECK_FILTER=${MEMCHECK_FILTER:-'CudaBackend.*:CutlassBackend.*:-CudaBackend.BiasOnMoreThan2To31Elements:CudaBackend.EveryEpilogueAndActivationMatchesTheReference'}
# racecheck instruments every shared-memory access, cuBLAS's too: the cuda backend's small GEMMs,
# and every cutlass kernel (the CutlassBackend tests, as under memcheck).
RACECHECK_FILTER=${RACECHECK_FILTER:-'CudaBackend.CallsCaptureIntoAGraphAndReplay:CudaBackend.DegenerateSizes:CudaBackend.ActivationAndBgradaCallsCaptureIntoAGraph:CutlassBackend.*'}
# Each sanitizer runs its tests in this many gtest shards side by side (the host-side reference
# computations of the tests dominate their time, and a shard is one process on one core).
SANITIZER_SHARDS=${SANITIZER_SHARDS:-8}
TESTS_FILTER=${TESTS_FILTER:-'*'}
BENCH_ARGS=${BENCH_ARGS:-}
LAB_ARGS=${LAB_ARGS:---reps 10 --warmup 2}
TILES_LAB_ARGS=${TILES_LAB_ARGS:---shapes public --reps 10 --warmup 2}

step() { echo "== $(date -u +%H:%M:%S) $*"; }
# "[  PASSED  ] 12 tests." etc. from a gtest log, summed over the runs it holds (shards)
counts() {
  local log=$1
  local passed failed skipped
  passed=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' | awk '{s += $1} END {print s + 0}')
  failed=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' | awk '{s += $1} END {print s + 0}')
  skipped=$(grep -Eo '^\[  SKIPPED \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' | awk '{s += $1} END {print s + 0}')
  echo "passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}"
}

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$OUT/bench.log"
nvcc --version | tail -2 | tee -a "$OUT/bench.log"

# CUTLASS's headers (the cutlass backend) from the pinned wheel: carried in .deps/ (the GPU machine
# has no network; `bash scripts/fetch_cutlass.sh` here puts it there). Without it the build leaves
# that backend out and says so.
step "CUTLASS headers (scripts/fetch_cutlass.sh, from .deps/ without network)"
bash scripts/fetch_cutlass.sh > "$OUT/fetch.log" 2>&1 || {
  tail -3 "$OUT/fetch.log"; echo "no CUTLASS headers: the cutlass backend is not built (carry .deps)"; }
fetch_log=$(cat "$OUT/fetch.log" 2>/dev/null); rm -f "$OUT/fetch.log"  # goes into build.log below

BENCH_TARGETS="epigemm_bench_gpu epigemm_epilogue_lab epigemm_host_overhead_lab"
[ "${TESTS_ONLY:-0}" = 1 ] && BENCH_TARGETS=""
step "configure + build ($(nproc) cores)"
GTEST_ARG=()
if [ -d "$ROOT/.gtest-src" ]; then GTEST_ARG=(-DEPIGEMM_GTEST_SOURCE_DIR="$ROOT/.gtest-src"); fi
# Only the GPU this runs on (sm_90a): half the CUDA compile time of the default 80;90a.
# The cutlass tile lab exists where the cutlass backend is built (CUTLASS headers found).
if ! { cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEPIGEMM_WITH_CUDA=ON \
         -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90a}" "${GTEST_ARG[@]}" ${CMAKE_ARGS:-} &&
       if [ -n "$BENCH_TARGETS" ] && grep -q 'epigemm_cutlass_tiles_lab' "$BUILD/build.ninja"; then
         BENCH_TARGETS="$BENCH_TARGETS epigemm_cutlass_tiles_lab"; fi &&
       cmake --build "$BUILD" -j"$(nproc)" --target epigemm_tests epigemm_cli $BENCH_TARGETS; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "BUILD FAILED (full log: $OUT/build.log)"
  exit 1
fi
{ echo "== scripts/fetch_cutlass.sh"; echo "$fetch_log"; cat "$OUT/build.log"; } > "$OUT/build.log.tmp" &&
  mv "$OUT/build.log.tmp" "$OUT/build.log"
grep -c -i 'warning' "$OUT/build.log" | sed 's/^/build warnings: /'
TESTS=$BUILD/tests/epigemm_tests
BENCH=$BUILD/bench/epigemm_bench_gpu
LAB=$BUILD/dev/epigemm_epilogue_lab
TILES_LAB=$BUILD/dev/epigemm_cutlass_tiles_lab
HOST_LAB=$BUILD/dev/epigemm_host_overhead_lab

# The test binary in SHARDS processes at once (gtest sharding; each shard a disjoint part of the
# tests): the host-side reference computations of the matrix run on the machine's cores, the GPU
# is shared. OpenMP threads of the host backends: few and passive, so that shards do not fight.
SHARDS=${SHARDS:-$(nproc)}
step "tests: $TESTS_FILTER in $SHARDS shards"
rm -f "$OUT"/tests.shard.*.log
for shard in $(seq 0 $((SHARDS - 1))); do
  GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$shard OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive \
    timeout 300 "$TESTS" --gtest_filter="$TESTS_FILTER" > "$OUT/tests.shard.$shard.log" 2>&1 &
done
TESTS_RC=0
for job in $(jobs -p); do wait "$job" || TESTS_RC=1; done
cat "$OUT"/tests.shard.*.log > "$OUT/tests.log" && rm -f "$OUT"/tests.shard.*.log
grep -E '^\[  (FAILED|SKIPPED) ' "$OUT/tests.log" | grep -v "listed below" | head -20
# The matrix's report, per shard and backend: "[ cases    ] cutlass ran N cases itself; declined M".
MATRIX_CASES=$(grep -E '^\[ cases    \] \S+ ran' "$OUT/tests.log" |
  awk '{ran[$4] += $6; declined[$4] += $10} END {for (b in ran) printf "%s ran %d, declined %d; ", b, ran[b], declined[b]}')

BENCH_RC=0
LAB_RC=0
if [ "${TESTS_ONLY:-0}" = 1 ]; then
  echo "TESTS_ONLY=1: no benchmark, no kernel lab"
else
# The H200 lowers its SM clock under sustained tensor-core load (a median of 1470 MHz against
# 1980 in one run), and kernels compare differently at the two clocks
# (docs/dev/cutlass_backend.md, "Larger tiles and clusters"): nvidia-smi samples the clock and the
# power every 500 ms while the benchmark and the labs run; the samples go to the end of bench.log.
CLOCKS_PID=""
if command -v nvidia-smi > /dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv -lms 500 \
    > "$OUT/clocks.csv" 2>&1 &
  CLOCKS_PID=$!
fi
step "benchmark"
# shellcheck disable=SC2086
timeout 300 "$BENCH" --out "$OUT" $BENCH_ARGS >> "$OUT/bench.log" 2>&1
BENCH_RC=$?

step "epilogue kernel lab: $LAB_ARGS"
# Appended to bench.log after a marker (at most 8 files come back from the GPU machine).
echo "== epilogue kernel lab: $LAB_ARGS" >> "$OUT/bench.log"
# shellcheck disable=SC2086
timeout 150 "$LAB" $LAB_ARGS > "$OUT/lab.log" 2>&1
LAB_RC=$?
grep -E "^device|VALIDATION FAILED" "$OUT/lab.log"
cat "$OUT/lab.log" >> "$OUT/bench.log" && rm -f "$OUT/lab.log"

if [ -x "$TILES_LAB" ]; then
  step "cutlass tile configurations lab: $TILES_LAB_ARGS"
  echo "== cutlass tile configurations lab: $TILES_LAB_ARGS" >> "$OUT/bench.log"
  # shellcheck disable=SC2086
  timeout 150 "$TILES_LAB" $TILES_LAB_ARGS > "$OUT/tiles_lab.log" 2>&1
  TILES_LAB_RC=$?
  [ $TILES_LAB_RC -eq 0 ] || { tail -3 "$OUT/tiles_lab.log"; LAB_RC=$TILES_LAB_RC; }
  cat "$OUT/tiles_lab.log" >> "$OUT/bench.log" && rm -f "$OUT/tiles_lab.log"
fi

step "host overhead lab"
echo "== host overhead lab" >> "$OUT/bench.log"
timeout 120 "$HOST_LAB" > "$OUT/host_lab.log" 2>&1
HOST_LAB_RC=$?
[ $HOST_LAB_RC -eq 0 ] || { tail -3 "$OUT/host_lab.log"; LAB_RC=$HOST_LAB_RC; }
cat "$OUT/host_lab.log" >> "$OUT/bench.log" && rm -f "$OUT/host_lab.log"

if [ -n "$CLOCKS_PID" ]; then
  kill "$CLOCKS_PID" 2> /dev/null; wait "$CLOCKS_PID" 2> /dev/null
  # Appended to bench.log too (at most 8 files come back).
  { echo "== SM clock and power every 500 ms during the benchmark and the labs"; cat "$OUT/clocks.csv"; } >> "$OUT/bench.log"
  rm -f "$OUT/clocks.csv"
fi
fi

step "the main job on the GPU: epigemm demo (bf16, fp32) and epigemm check"
CLI=$BUILD/tools/epigemm
{ timeout 60 "$CLI" demo --dtype bf16; echo "demo bf16 rc $?"
  timeout 60 "$CLI" demo --dtype fp32; echo "demo fp32 rc $?"
  timeout 60 "$CLI" check; echo "check rc $?"
  "$CLI" info; } > "$OUT/demo.log" 2>&1
grep -E "rc [0-9]+$|^loss over|^result" "$OUT/demo.log"

# sanitize TOOL FILTER: the tests of FILTER under compute-sanitizer's TOOL in SANITIZER_SHARDS
# shards side by side; one log, $OUT/sanitizers.TOOL.log; rc 0 when every shard passed.
sanitize() {
  local tool=$1 filter=$2 rc=0 shard
  local options=(--tool "$tool" --error-exitcode 99)
  [ "$tool" = memcheck ] && options+=(--leak-check no)
  rm -f "$OUT"/sanitizers."$tool".shard.*.log
  for shard in $(seq 0 $((SANITIZER_SHARDS - 1))); do
    GTEST_TOTAL_SHARDS=$SANITIZER_SHARDS GTEST_SHARD_INDEX=$shard OMP_NUM_THREADS=1 \
      timeout 420 compute-sanitizer "${options[@]}" "$TESTS" --gtest_filter="$filter" \
      > "$OUT/sanitizers.$tool.shard.$shard.log" 2>&1 &
  done
  for job in $(jobs -p); do wait "$job" || rc=1; done
  cat "$OUT"/sanitizers."$tool".shard.*.log > "$OUT/sanitizers.$tool.log" && rm -f "$OUT"/sanitizers."$tool".shard.*.log
  return $rc
}

step "compute-sanitizer memcheck in $SANITIZER_SHARDS shards: $MEMCHECK_FILTER"
sanitize memcheck "$MEMCHECK_FILTER"
MEMCHECK_RC=$?
MEMCHECK_SUMMARY="$(counts "$OUT/sanitizers.memcheck.log"); $(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitizers.memcheck.log") of $SANITIZER_SHARDS shards with 0 errors"
echo "memcheck rc $MEMCHECK_RC: $MEMCHECK_SUMMARY"

step "compute-sanitizer racecheck in $SANITIZER_SHARDS shards: $RACECHECK_FILTER"
sanitize racecheck "$RACECHECK_FILTER"
RACECHECK_RC=$?
RACECHECK_SUMMARY="$(counts "$OUT/sanitizers.racecheck.log"); $(grep -c 'RACECHECK SUMMARY: 0 hazards' "$OUT/sanitizers.racecheck.log") of $SANITIZER_SHARDS shards with 0 hazards"
echo "racecheck rc $RACECHECK_RC: $RACECHECK_SUMMARY"

REFRESH_RC=0
if [ "${DISPATCH_REFRESH:-0}" = 1 ]; then
  step "dispatch table from this run's benchmark; rebuild; dispatch tests and benchmark again"
  mkdir -p "$OUT/rerun"
  { python3 scripts/make_dispatch_table.py "$OUT/bench_gpu.csv" &&
    cp src/backends/cublaslt/dispatch_table.inc "$OUT/rerun/" &&
    cmake --build "$BUILD" -j"$(nproc)" --target epigemm_tests epigemm_bench_gpu &&
    timeout 120 "$TESTS" --gtest_filter='*Dispatch*:cublaslt/*:auto_device/*' > "$OUT/rerun/tests.log" 2>&1 &&
    timeout 240 "$BENCH" --out "$OUT/rerun" $BENCH_ARGS --activations gelu_tanh,relu > "$OUT/rerun/bench.log" 2>&1; } > "$OUT/rerun/refresh.log" 2>&1
  REFRESH_RC=$?
  echo "refresh rc $REFRESH_RC; dispatch tests: $(counts "$OUT/rerun/tests.log")"
  grep -E "^dispatch over" "$OUT/rerun/bench.log"
fi

# At most 8 files come back from the GPU machine: one sanitizer log.
cat "$OUT/sanitizers.memcheck.log" "$OUT/sanitizers.racecheck.log" > "$OUT/sanitizers.log"
rm -f "$OUT/sanitizers.memcheck.log" "$OUT/sanitizers.racecheck.log"

echo
echo "results and logs in $OUT: build.log tests.log sanitizers.log demo.log bench.log (the lab's table at its end) bench_gpu.csv bench_gpu.md bench_dispatch.md"
echo "tests:     rc $TESTS_RC, $(counts "$OUT/tests.log")"
echo "matrix:    ${MATRIX_CASES:-no case report} (declined cases rerouted by auto and checked)"
grep -E "epigemm: cutlass" "$OUT/build.log" | head -1
echo "memcheck:  rc $MEMCHECK_RC, $MEMCHECK_SUMMARY"
echo "racecheck: rc $RACECHECK_RC, $RACECHECK_SUMMARY"
echo "bench:     rc $BENCH_RC"
echo "lab:       rc $LAB_RC"
sed -n '/^copy /,/^== epilogue kernel lab/p' "$OUT/bench.log" | grep -v '^== epilogue kernel lab' 
if [ "${PACK:-0}" = 1 ]; then
  tar czf /tmp/gpu-check.tgz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-check.tgz "$OUT/"
fi
[ $REFRESH_RC -eq 0 ] && [ $TESTS_RC -eq 0 ] && [ $MEMCHECK_RC -eq 0 ] && [ $RACECHECK_RC -eq 0 ] && [ $BENCH_RC -eq 0 ] && [ $LAB_RC -eq 0 ]
