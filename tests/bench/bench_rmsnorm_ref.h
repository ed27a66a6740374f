/*
** bench_rmsnorm_ref.h -- the plain RMSNorm kernel that follows NCCL's
** all-gather in collgen-bench's baseline (compiled with NVRTC at start-up).
*/
#ifndef BENCH_RMSNORM_REF_H
#define BENCH_RMSNORM_REF_H
extern const char bench_rmsnorm_source[];
#define BENCH_RMSNORM_KERNEL "plain_rmsnorm_bf16"
#define BENCH_RMSNORM_BLOCK 1024
#endif
