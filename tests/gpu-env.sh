# gpu-env.sh -- sourced by the GPU scripts (gpu-quick.sh, gpu-python.sh):
# the staged Lua and Criterion (.deps, ../shared/device/README.md), NVLink
# multicast off, the cubin cache in build-gpu, $OUT; and gpu_build, which
# configures and builds build-gpu (logs in $OUT; the build log's tail on
# failure).
D=$PWD/.deps/usr
export LD_LIBRARY_PATH=$D/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
export COLLGEN_CACHE_DIR=$PWD/build-gpu/cache
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"

gpu_build() {
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$D" \
    -DCMAKE_C_FLAGS="-I$D/include/x86_64-linux-gnu" -DCOLLGEN_WERROR=ON > "$OUT/configure.log" 2>&1 &&
    cmake --build build-gpu -j"$(nproc)" > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; return 1; }
}
