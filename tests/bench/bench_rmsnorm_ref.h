/*
** bench_rmsnorm_ref.h -- the plain RMSNorm kernels of collgen-bench's
** baselines (one source, compiled with NVRTC at start-up): plain_rmsnorm
** after NCCL's all-gather, plain_add_rmsnorm after an all-reduce.
*/
#ifndef BENCH_RMSNORM_REF_H
#define BENCH_RMSNORM_REF_H
#include <stddef.h>

#include "collgen.h"

/* Writes the kernels' CUDA C source for `dtype` into buf (cap bytes).
** Returns 0, or -1 when buf is too small. */
int bench_rmsnorm_source(collgen_dtype_t dtype, char *buf, size_t cap);

#define BENCH_RMSNORM_SOURCE_CAP 8192
#define BENCH_RMSNORM_KERNEL "plain_rmsnorm"
/* (s, residual_in, gamma, residual_out, y, cols, eps, offset); one block
** of BENCH_RMSNORM_BLOCK threads per row. */
#define BENCH_ADD_RMSNORM_KERNEL "plain_add_rmsnorm"
#define BENCH_RMSNORM_BLOCK 1024
#endif
