#!/usr/bin/env bash
# One-call GPU check for the GPU machine (see ../shared/device/README.md):
# configure, build, run every test (GPU ones included), the compute-sanitizer
# pass (memcheck + racecheck on a GPU subset), `collgen demo` and, when
# built, collgen-bench; copy logs to $OUT; end with a summary table.
# Usage: bash tests/gpu-check.sh [--no-bench] [--no-sanitizer]
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
D=$ROOT/.deps/usr
export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0          # never NVLink multicast on the shared machine
export COLLGEN_CACHE_DIR=$ROOT/build-gpu/cache
BENCH=1; SANITIZE=1
for a in "$@"; do
  case $a in --no-bench) BENCH=0 ;; --no-sanitizer) SANITIZE=0 ;; esac
done
declare -a SUMMARY
step() { # name, command...
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  SUMMARY+=("$(printf '%-22s %-6s %5ss  %s' "$name" "$([ $rc = 0 ] && echo ok || echo FAIL:$rc)" "$(( $(date +%s) - t0 ))" "$(grep -E 'Synthesis|tests passed|pregen:|all checks|FAILED' "$OUT/$name.log" | tail -1)")")
  return $rc
}

nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > "$OUT/gpus.txt" 2>&1
nvidia-smi topo -m >> "$OUT/gpus.txt" 2>&1
step configure cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$D" \
  -DCMAKE_C_FLAGS="-I$D/include/x86_64-linux-gnu" -DCOLLGEN_WERROR=ON
step build cmake --build build-gpu -j"$(nproc)"
step info ./build-gpu/collgen info
step ctest_cpu bash -c "cd build-gpu && ctest --output-on-failure -j4 -E test_gpu"
step gpu_tests ./build-gpu/tests/test_gpu --verbose --jobs 1
step demo ./build-gpu/collgen demo
if [ $SANITIZE = 1 ] && command -v compute-sanitizer >/dev/null; then
  SUBSET='--filter=@(allreduce/group_size_one_copies|allreduce/two_ranks_in_place_and_unaligned|allgather_rmsnorm/uneven_and_empty_shards|allgather_rmsnorm/four_and_eight_ranks_mapped|refusal/*)'
  step memcheck compute-sanitizer --tool memcheck --target-processes all --error-exitcode 99 \
    ./build-gpu/tests/test_gpu --jobs 1 "$SUBSET"
  step racecheck compute-sanitizer --tool racecheck --target-processes all --error-exitcode 99 \
    ./build-gpu/tests/test_gpu --jobs 1 '--filter=@(allgather_rmsnorm/uneven_and_empty_shards|allreduce/group_size_one_copies)'
fi
if [ $BENCH = 1 ] && [ -x build-gpu/tests/bench/collgen-bench ]; then
  step bench ./build-gpu/tests/bench/collgen-bench --csv "$OUT/bench.csv"
  [ "${TUNE:-0}" = 1 ] && step tune ./build-gpu/tests/bench/collgen-bench --tune
fi
echo
echo "== gpu-check summary ($(head -1 "$OUT/gpus.txt")) =="
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
