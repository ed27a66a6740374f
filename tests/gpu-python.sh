#!/usr/bin/env bash
# The Python package on the GPU machine (torch there): build libcollgen
# (reusing build-gpu), `pip install ./python` into a fresh folder, every
# Python test (python/tests: the CPU ones on the stand-in driver, the
# torch ones on the GPU), the torchrun example with 2 processes, and the
# host overhead per call. Logs go to $OUT. tests/gpu-quick.sh calls it.
# Usage: bash tests/gpu-python.sh [--no-build] [PYTEST_ARGS...]
# (with PYTEST_ARGS, only the GPU suite runs, with those arguments)
set -u
cd "$(dirname "$0")/.."
. tests/gpu-env.sh
if [ "${1:-}" = --no-build ]; then shift; else gpu_build || exit 1; fi
PY=${PYTHON:-python3}
site=$(mktemp -d)
$PY -m pip install --no-build-isolation --no-deps --no-index --target "$site" ./python \
  > "$OUT/pip.log" 2>&1 && echo "pip install ./python: ok" ||
  { echo "pip install ./python FAILED (tail of pip.log below); testing the source tree"; tail -5 "$OUT/pip.log"; site=$PWD/python; }
export COLLGEN_LIBRARY=$PWD/build-gpu/libcollgen.so
export COLLGEN_TEST_FAKE_CUDA=$PWD/build-gpu/tests/libfakecuda.so
export PYTHONPATH=$site PYTHONDONTWRITEBYTECODE=1
# The CPU suite runs on the stand-in driver, the GPU suite on the real one:
# collgen loads the driver once per process, so they are two pytest runs.
if [ $# -eq 0 ]; then
  ( cd python/tests && $PY -m pytest -q -rs -p no:cacheprovider . ) > "$OUT/pytest-cpu.log" 2>&1
  echo "pytest python/tests (stand-in driver) rc=$?: $(tail -1 "$OUT/pytest-cpu.log")"
  grep -E "^(FAILED|ERROR)" "$OUT/pytest-cpu.log" | head -20
fi
( unset COLLGEN_TEST_FAKE_CUDA; cd python/gpu_tests &&
  $PY -m pytest -v -rs -s -p no:cacheprovider "$@" . ) > "$OUT/pytest-gpu.log" 2>&1
echo "pytest python/gpu_tests rc=$?: $(tail -1 "$OUT/pytest-gpu.log")"
grep -E "^(FAILED|ERROR)|abort:" "$OUT/pytest-gpu.log" | head -20
[ $# -gt 0 ] && exit 0
torchrun --nproc-per-node 2 docs/example/torch_tp.py > "$OUT/torch_tp.log" 2>&1
echo "torch_tp x2 rc=$?:"; grep -E "^(torch_tp|collgen|torch.dist|output)" "$OUT/torch_tp.log"
$PY tests/bench/python_host_overhead.py > "$OUT/host_overhead.log" 2>&1
echo "host overhead rc=$?:"; cat "$OUT/host_overhead.log" | tail -8
