/*
** bench_rmsnorm_ref.c -- a plain, reasonably fast RMSNorm kernel for bf16,
** f16 and f32: one block of 1024 threads per row, 16-byte loads, f32 math,
** the same formula as collgen. It is the second half of the "NCCL all-gather
** + RMSNorm" baseline. The element type is chosen by prepending
** "#define PLAIN_DTYPE n" (0 bf16, 1 f16, 2 f32); cols must be a multiple of
** 16 bytes' worth of elements (the benchmark's cols all are).
*/
#include "bench_rmsnorm_ref.h"

#include <stdio.h>

static const char body[] =
    "#if PLAIN_DTYPE == 2\n"
    "typedef float elem;\n"
    "__device__ float to_f32(elem v) { return v; }\n"
    "__device__ elem from_f32(float f) { return f; }\n"
    "#else\n"
    "typedef unsigned short elem;\n"
    "__device__ float to_f32(elem v) {\n"
    "#if PLAIN_DTYPE == 0\n"
    "  return __uint_as_float((unsigned int)v << 16);\n"
    "#else\n"
    "  float f;\n"
    "  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(v));\n"
    "  return f;\n"
    "#endif\n"
    "}\n"
    "__device__ elem from_f32(float f) {\n"
    "  elem v;\n"
    "#if PLAIN_DTYPE == 0\n"
    "  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(v) : \"f\"(f));\n"
    "#else\n"
    "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(v) : \"f\"(f));\n"
    "#endif\n"
    "  return v;\n"
    "}\n"
    "#endif\n"
    "#define VEC (16 / sizeof(elem))\n"
    "union vec { uint4 u; elem e[VEC]; };\n"
    "\n"
    "extern \"C\" __global__ void __launch_bounds__(1024)\n"
    "plain_rmsnorm(const uint4 *x, const uint4 *gamma, uint4 *y, unsigned long long cols,\n"
    "              float eps, float offset) {\n"
    "  __shared__ float partial[32];\n"
    "  const unsigned long long nv = cols / VEC, row = blockIdx.x;\n"
    "  const uint4 *xr = x + row * nv;\n"
    "  uint4 *yr = y + row * nv;\n"
    "  float ss = 0.f;\n"
    "  for (unsigned long long c = threadIdx.x; c < nv; c += blockDim.x) {\n"
    "    vec v;\n"
    "    v.u = xr[c];\n"
    "    for (int k = 0; k < (int)VEC; ++k) ss += to_f32(v.e[k]) * to_f32(v.e[k]);\n"
    "  }\n"
    "  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);\n"
    "  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;\n"
    "  __syncthreads();\n"
    "  float tot = 0.f;\n"
    "  for (int i = 0; i < (int)(blockDim.x >> 5); ++i) tot += partial[i];\n"
    "  const float scale = rsqrtf(tot / (float)cols + eps);\n"
    "  for (unsigned long long c = threadIdx.x; c < nv; c += blockDim.x) {\n"
    "    vec v, g, o;\n"
    "    v.u = xr[c];\n"
    "    g.u = gamma[c];\n"
    "    for (int k = 0; k < (int)VEC; ++k)\n"
    "      o.e[k] = from_f32(to_f32(v.e[k]) * scale * (to_f32(g.e[k]) + offset));\n"
    "    yr[c] = o.u;\n"
    "  }\n"
    "}\n";

int bench_rmsnorm_source(collgen_dtype_t dtype, char *buf, size_t cap) {
  int code = dtype == COLLGEN_DTYPE_BF16 ? 0 : dtype == COLLGEN_DTYPE_F16 ? 1 : 2;
  int n = snprintf(buf, cap, "#define PLAIN_DTYPE %d\n%s", code, body);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}
