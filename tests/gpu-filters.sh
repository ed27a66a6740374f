#!/usr/bin/env bash
# Runs chosen Criterion filters of test_gpu, each under its own time bound,
# then (unless --no-python) the Python GPU tests: a short GPU pass for a
# tight device budget (../shared/device/README.md), e.g. after new ops.
# Usage: bash tests/gpu-filters.sh [--no-python] SECONDS:FILTER...
# e.g. scatter alone (its suite, then its one-process-per-GPU rounds):
#   bash tests/gpu-filters.sh --no-python 120:'scatter/*' 180:'rank/scatter_*'
set -u
cd "$(dirname "$0")/.."
. tests/gpu-env.sh
python=1
[ "${1:-}" = --no-python ] && { python=0; shift; }
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$D" \
  -DCMAKE_C_FLAGS="-I$D/include/x86_64-linux-gnu" -DCOLLGEN_WERROR=ON > "$OUT/configure.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" --target collgen test_gpu collgen_cli > "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
echo "built in ${SECONDS}s"
for spec in "$@"; do
  t=${spec%%:*} f=${spec#*:} log="$OUT/gpu-$(echo "$f" | tr -c 'a-zA-Z0-9_\n' _).log"
  start=$SECONDS
  timeout "$t" ./build-gpu/tests/test_gpu --verbose --jobs 1 --filter "$f" > "$log" 2>&1
  echo "$f: rc=$? $((SECONDS - start))s $(grep Synthesis "$log")"
  grep -E "^\[FAIL\]" -B4 "$log" | grep -vE "^\[----\] *$" | head -12
done
[ "$python" = 1 ] && timeout 120 bash tests/gpu-python.sh --no-build -q 2>&1 | tail -15
exit 0
