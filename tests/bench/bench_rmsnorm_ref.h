/*
** bench_rmsnorm_ref.h -- the plain RMSNorm kernel that follows NCCL's
** all-gather in collgen-bench's baseline (compiled with NVRTC at start-up).
*/
#ifndef BENCH_RMSNORM_REF_H
#define BENCH_RMSNORM_REF_H
#include <stddef.h>

#include "collgen.h"

/* Writes the kernel's CUDA C source for `dtype` into buf (cap bytes).
** Returns 0, or -1 when buf is too small. */
int bench_rmsnorm_source(collgen_dtype_t dtype, char *buf, size_t cap);

#define BENCH_RMSNORM_SOURCE_CAP 8192
#define BENCH_RMSNORM_KERNEL "plain_rmsnorm"
#define BENCH_RMSNORM_BLOCK 1024
#endif
