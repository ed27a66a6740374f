/*
** bench.h -- what the sections of collgen-bench share (bench.c): the run's
** state, the timing loop, random uploads, result checks and error exits.
** Each op's section is one function; bench_residual.c holds the fused
** allreduce + residual + RMSNorm one.
*/
#ifndef COLLGEN_BENCH_H
#define COLLGEN_BENCH_H
#include <nccl.h>
#include <stdio.h>

#include "devbuf.h"
#include "reference.h"

#define ARENA_MIN (128ull << 20) /* rotating inputs: at least this much per rank */
#define P2P_READ_GBS 372.0       /* SPEC section 4, measured on 2 x H200 */

typedef struct {
  collgen_comm_t *comm;
  int n;
  ncclComm_t nccl[8];
  collgen_stream_t streams[8];
  CUevent start[8], stop[8];
  CUfunction rms_fn[8];      /* the plain RMSNorm kernel (bench_rmsnorm_ref.c) */
  CUfunction add_rms_fn[8];  /* the plain residual add + RMSNorm kernel */
  FILE *csv;
  int quick;  /* only the sizes the benchmark issue quotes */
  int tune;   /* grid-cap sweep: few sizes, no NCCL */
  collgen_dtype_t dt;  /* element type of every op (--dtype) */
  int group;           /* ranks per group (--group-size; 0 = all) */
  void (*align)(void); /* --processes: meets the other processes before each timed batch */
} bench_t;

/* The ranks this process drives: all of them, or its own with --processes. */
#define FOR_LOCAL(b, r)                                                          \
  for (int r = 0; r < (b)->n; ++r)                                              \
    if (collgen__comm_is_local((b)->comm, r))

/* Issues call number `iter` of a timed path on every rank. */
typedef void (*launch_fn)(bench_t *b, void *arg, int iter);

/* Ranks per group, as the busbw formulas count them. */
int group_of(const bench_t *b);
int esize_of(const bench_t *b);
ncclDataType_t nccl_type(collgen_dtype_t dt);
/* Prints "collgen-bench: what: msg" and exits 1. */
void die(const char *what, const char *msg) __attribute__((noreturn));
/* Synchronizes every rank's stream (dies on an error). */
void sync_all(bench_t *b);
/* Median per-call microseconds of `batch` calls of fn, slowest rank, over
** the trials; graph = capture the batch once and replay it. */
double time_calls(bench_t *b, launch_fn fn, void *arg, int batch, int graph);
/* Per local rank: a stream, timing events and the plain RMSNorm kernels
** (compiled once for the communicator's arch); dies on failure. */
void bench_prepare_ranks(bench_t *b);
/* Rank r's plain residual add + RMSNorm (bench_rmsnorm_ref.c) of `rows`
** rows on its stream, in place: res = sum + res, normed = RMSNorm(res)
** with eps 1e-6 and weight offset 1. */
void launch_plain_add_rmsnorm(bench_t *b, int r, void *sum, void *res, void *gamma,
                              void *normed, int64_t rows, int64_t cols);
/* Largest distance allowed between an unfused baseline's result (which
** rounds the sum, up to once per rank, before adding the residual) and the
** reference's (inputs in [-1, 1]). */
double baseline_tolerance(const bench_t *b);
/* collgen-bench --processes N (bench_processes.c): returns the exit status. */
int bench_processes(int nranks);
/* Calls per timed batch for a call of `bytes`. */
int batch_for(size_t bytes);
/* Fills `bytes` of rank r's buffer dst with random values of the dtype,
** windows of one pool at rank-dependent offsets (every byte random, ranks
** differ). */
void upload_random(bench_t *b, int r, char *dst, size_t bytes);
/* 1 when up to 64 rows spread over `got` (a normed output of rows x cols)
** match the RMSNorm (eps 1e-6, weight_offset 1) of `ref_r` within the
** rounding model; else 0 with the first bad row in *bad_row. */
int normed_rows_ok(const bench_t *b, int64_t rows, int64_t cols, const void *got,
                   const void *ref_r, const void *gamma, int64_t *bad_row);

/* The allreduce_residual_rmsnorm sections (bench_residual.c): against
** the unfused baselines, and its FP8 output against the plain fused op
** (skipped below sm_89). */
void bench_residual_rmsnorm(bench_t *b);
void bench_residual_rmsnorm_fp8(bench_t *b);

#define CU(call)                                                                \
  do {                                                                          \
    CUresult r_ = (call);                                                       \
    if (r_ != CUDA_SUCCESS) {                                                   \
      const char *n_ = NULL;                                                    \
      collgen__cu.cuGetErrorName(r_, &n_);                                      \
      die(#call, n_ ? n_ : "?");                                                \
    }                                                                           \
  } while (0)
#define NC(call)                                                                \
  do {                                                                          \
    ncclResult_t r_ = (call);                                                   \
    if (r_ != ncclSuccess) die(#call, ncclGetErrorString(r_));                  \
  } while (0)
#endif
