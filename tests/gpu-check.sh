#!/usr/bin/env bash
# One-call GPU check for the GPU machine (see ../shared/device/README.md):
# configure, build, run every test (GPU ones included), the compute-sanitizer
# pass (memcheck and racecheck over every GPU test, see sanitize-all.sh),
# `collgen demo` and, when built, collgen-bench; copy logs to $OUT; end with
# a summary table.
# Usage: bash tests/gpu-check.sh [--no-bench] [--bench-all] [--no-sanitizer]
#                                [--skip-tests] [--extra-only]
#   --bench-all: also run the benchmark for f16, f32 and groups of 1, the
#   decode step (--model), the flag floor (--floor) and one short run with
#   NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING that says which NCCL kernels ran
#   --skip-tests: build and benchmark only (no ctest, GPU tests, demo,
#   sanitizer); --extra-only: of the benchmarks, only the --bench-all ones.
# The whole run takes longer than one 600 s device call; on a tight budget
# split it (docs/benchmarks.md#reproduce):
#   1. --no-bench --no-sanitizer   2. --skip-tests   3. --skip-tests --bench-all --extra-only
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
LOGS=$ROOT/build-gpu/logs      # every log; $OUT gets them as one logs.tar.gz
mkdir -p "$OUT" "$LOGS"
D=$ROOT/.deps/usr
export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0          # never NVLink multicast on the shared machine
export COLLGEN_CACHE_DIR=$ROOT/build-gpu/cache
BENCH=1; BENCH_ALL=0; SANITIZE=1; TESTS=1; MAIN_BENCH=1
for a in "$@"; do
  case $a in
    --no-bench) BENCH=0 ;; --bench-all) BENCH_ALL=1 ;; --no-sanitizer) SANITIZE=0 ;;
    --skip-tests) TESTS=0; SANITIZE=0 ;; --extra-only) MAIN_BENCH=0; BENCH_ALL=1 ;;
    *) echo "gpu-check: unknown option $a" >&2; exit 2 ;;
  esac
done
declare -a SUMMARY
step() { # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-22s %-6s %5ss  %s' "$name" "$([ $rc = 0 ] && echo ok || echo FAIL:$rc)" "$(( $(date +%s) - t0 ))" "$(grep -E 'Synthesis|tests passed|pregen:|all checks|FAILED|passed clean|bench: done' "$LOGS/$name.log" | tail -1)")")
  printf '%s\n' "${SUMMARY[@]}" > "$OUT/summary.txt"
  tar -czf "$OUT/logs.tar.gz" -C "$ROOT/build-gpu" logs  # kept current if the run is cut off
  return $rc
}

nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > "$LOGS/gpus.txt" 2>&1
nvidia-smi topo -m >> "$LOGS/gpus.txt" 2>&1
step configure cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$D" \
  -DCMAKE_C_FLAGS="-I$D/include/x86_64-linux-gnu" -DCOLLGEN_WERROR=ON
step build cmake --build build-gpu -j"$(nproc)"
step info ./build-gpu/collgen info
NGPU=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ $TESTS = 1 ]; then
  step ctest_cpu bash -c "cd build-gpu && ctest --output-on-failure -j4 -E test_gpu"
  step gpu_tests ./build-gpu/tests/test_gpu --verbose --jobs 1
  step demo ./build-gpu/collgen demo
  step demo-processes ./build-gpu/collgen demo --processes 2
  [ "$NGPU" -ge 2 ] && step hostbench ./build-gpu/tests/collgen-hostbench --real  # needs 2 GPUs
fi
if [ $SANITIZE = 1 ] && command -v compute-sanitizer >/dev/null; then
  rm -rf "$LOGS/sanitizer"
  step memcheck bash tests/sanitize-all.sh memcheck ./build-gpu/tests/test_gpu "$LOGS/sanitizer" 4
  step racecheck bash tests/sanitize-all.sh racecheck ./build-gpu/tests/test_gpu "$LOGS/sanitizer" 4
fi
if [ $BENCH = 1 ] && [ -x build-gpu/tests/bench/collgen-bench ]; then
  [ $MAIN_BENCH = 1 ] && step bench ./build-gpu/tests/bench/collgen-bench --csv "$OUT/bench.csv"
  [ $MAIN_BENCH = 1 ] && step bench_processes ./build-gpu/tests/bench/collgen-bench --processes 2
  [ $MAIN_BENCH = 1 ] && [ -x build-gpu/tests/collgen-rank-paths ] &&
    step rank_paths ./build-gpu/tests/collgen-rank-paths 2  # staged vs registered, VMM vs cuIpc
  if [ $MAIN_BENCH = 1 ] && [ "$NGPU" -ge 2 ]; then # the rank calls over NCCL (docs/multinode.md#cost-of-each-path)
    step bench_rank_nccl env COLLGEN_TRANSPORT=nccl ./build-gpu/tests/bench/collgen-bench --processes 2
    step bench_rank_sockets env COLLGEN_TRANSPORT=nccl NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
      NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo ./build-gpu/tests/bench/collgen-bench --processes 2
  fi
  if [ $BENCH_ALL = 1 ]; then
    step bench_f16 ./build-gpu/tests/bench/collgen-bench --dtype f16 --csv "$OUT/bench-f16.csv"
    step bench_f32 ./build-gpu/tests/bench/collgen-bench --dtype f32 --csv "$OUT/bench-f32.csv"
    step bench_g1 ./build-gpu/tests/bench/collgen-bench --group-size 1 --csv "$OUT/bench-g1.csv"
    step bench_model ./build-gpu/tests/bench/collgen-bench --model --csv "$OUT/bench-model.csv"
    step bench_floor ./build-gpu/tests/bench/collgen-bench --floor --csv "$OUT/bench-floor.csv"
    # Which NCCL kernels ran (docs/benchmarks.md): "[Symmetric] ... Kernel X"
    # or "SymKernel: X" lines for symmetric kernels, "Algo A proto P" otherwise.
    step nccl_kernels env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING \
      ./build-gpu/tests/bench/collgen-bench --quick --max-bytes 16777216
    sed -E 's/.*NCCL INFO //' "$LOGS/nccl_kernels.log" | grep -E 'Bytes -> |SymKernel' |
      sed -E 's/ (nWorks|channel|nchannels).*//' | sort | uniq -c | sort -k2 > "$OUT/nccl-kernels.txt"
    gzip -c "$LOGS/nccl_kernels.log" > "$OUT/nccl-debug.log.gz"
  fi
  [ "${TUNE:-0}" = 1 ] && step tune ./build-gpu/tests/bench/collgen-bench --tune
fi
echo
echo "== gpu-check summary ($(head -1 "$LOGS/gpus.txt")) =="
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
