#!/usr/bin/env bash
# A short GPU pass for a tight device budget (../shared/device/README.md):
# build, every GPU test, `collgen demo` (one process, then --processes 2),
# and the one-process-per-GPU example
# with 2 processes; no CPU tests (CI runs them), no sanitizer, no benchmark.
# Usage: bash tests/gpu-quick.sh [TEST_GPU_FILTER]
set -u
cd "$(dirname "$0")/.."
. tests/gpu-env.sh
gpu_build || exit 1
filter=${1:-}
./build-gpu/tests/test_gpu --verbose --jobs 1 ${filter:+--filter "$filter"} > "$OUT/gpu_tests.log" 2>&1
echo "gpu_tests rc=$?: $(grep Synthesis "$OUT/gpu_tests.log")"
grep -E "^\[FAIL\]|abort:|rank:|waits:" "$OUT/gpu_tests.log" | head -20
[ -n "$filter" ] && exit 0
./build-gpu/collgen demo > "$OUT/demo.log" 2>&1; echo "demo rc=$?: $(tail -1 "$OUT/demo.log")"
COLLGEN_TIMEOUT_MS=60000 ./build-gpu/collgen demo --processes 2 > "$OUT/demo-processes.log" 2>&1
echo "demo --processes 2 rc=$?: $(tail -1 "$OUT/demo-processes.log")"
cc -O2 docs/example/rank_example.c -Isrc -I/usr/local/cuda/include -Lbuild-gpu -lcollgen \
  -L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,$PWD/build-gpu -o build-gpu/rank_example &&
rm -f build-gpu/job.id
for r in 0 1; do
  COLLGEN_TIMEOUT_MS=60000 COLLGEN_ID_FILE=$PWD/build-gpu/job.id COLLGEN_NRANKS=2 COLLGEN_RANK=$r \
    ./build-gpu/rank_example &
done; wait

# The Python package (python/tests on the stand-in driver, python/gpu_tests
# on this GPU, the torchrun example, the host overhead per call).
bash tests/gpu-python.sh --no-build
