/*
** bench.h -- what the sections of collgen-bench share (bench.c): the run's
** state, the timing loop, random uploads, result checks and error exits,
** and the sections themselves: every op of COLLGEN_OP_MAP has an entry
** bench_op_<id> (its sections, bench_op below), which bench.c runs in
** catalog order; without it collgen-bench does not link. bench.c holds
** the entries of allreduce_sum, allgather_rmsnorm, broadcast and
** all_gather, bench_residual.c the fused allreduce + residual + RMSNorm
** one, bench_reduce_scatter.c the reduce-scatter one, bench_rs_rmsnorm.c
** the reduce-scatter + RMSNorm one; bench_model.c the decode step,
** bench_floor.c the cross-GPU flag floor, bench_nccl_sym.c NCCL's
** symmetric windows.
*/
#ifndef COLLGEN_BENCH_H
#define COLLGEN_BENCH_H
#include <nccl.h>
#include <stdio.h>

#include "comm_internal.h" /* white-box: the communicator's fields */
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
  int no_nccl; /* --ranks: ranks mapped onto fewer GPUs, where NCCL (one rank per
               ** GPU) cannot run; its columns are nan */
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

/* 1 when n values of got match want: bit for bit (exact), else each
** within baseline_tolerance. */
int values_match(const bench_t *b, const void *got, const void *want, int64_t n, int exact);
/* Compiles `src` (file name `file` in logs) with NVRTC for the
** communicator's arch and loads it on every local rank: fns[k][r] is
** kernel names[k] on rank r. Dies on failure. */
void bench_load_kernels(bench_t *b, const char *src, const char *file, int nk,
                        const char *const *names, CUfunction *const *fns);
/* Checks, then times collgen_allreduce_sum of `bytes` as graph replay
** (us per call, slowest rank, median); dies on a wrong result. */
double collgen_allreduce_graph_us(bench_t *b, size_t bytes);
/* Prints v with "%*.2f", or "n/a" when v is NaN, right-aligned in width. */
void print_us(int width, double v);

/* ---- NCCL symmetric windows (bench_nccl_sym.c) ---- */
/* One buffer per local rank from ncclMemAlloc, registered as a symmetric
** window on the rank's NCCL communicator. */
typedef struct {
  size_t bytes;
  void *ptr[8];
  void *win[8]; /* ncclWindow_t */
} sym_buf;
/* 1 when the NCCL of this run has symmetric windows (>= 2.27). */
int nccl_sym_available(void);
/* Allocates and registers `bytes` (rounded up to 2 MiB) per local rank
** (collective over every NCCL communicator of b). 0, or -1 with the reason on stderr and nothing
** held (older NCCL: -1 silently). */
int sym_alloc(bench_t *b, sym_buf *s, size_t bytes);
/* Deregisters and frees what sym_alloc made. */
void sym_free(bench_t *b, sym_buf *s);

/* ---- allreduce_residual_rmsnorm (bench_residual.c) ---- */
/* One call shape and its buffers: x rotates through nslots slots; in
** place (residual_out is res). */
typedef struct {
  int64_t rows, cols, shape[2];
  char *x[8];          /* nslots slots of x per rank */
  size_t slot;
  int nslots;
  void *res[8], *normed[8], *gamma[8];
  void *sum[8];        /* the unfused paths' all-reduce output */
  void *q[8];          /* FP8 table: the e4m3 codes and row scales */
  float *scales[8];
  collgen_fp8_mode_t fp8;
} rr_arg;
/* A call of rows x cols with nslots slots of x (0: enough slots to fill
** ARENA_MIN), every buffer allocated, x random, one random gamma. */
void rr_alloc(bench_t *b, rr_arg *a, int64_t rows, int64_t cols, int nslots, uint64_t *seed);
void rr_free(bench_t *b, rr_arg *a);
/* Rank r's x of call `iter` (slot iter % nslots). */
const void *rr_x_of(const rr_arg *a, int r, int iter);
/* Call `iter` (x slot iter % nslots) of: the fused op; ncclAllReduce into
** sum + the plain add+RMSNorm kernel; collgen_allreduce_sum + the same. */
void rr_launch_fused(bench_t *b, void *a, int iter);
void rr_launch_nccl(bench_t *b, void *a, int iter);
void rr_launch_unfused(bench_t *b, void *a, int iter);
/* *s = *a with x's slots and sum in a new NCCL symmetric window w (x
** random). 0, or -1 when NCCL has no symmetric path (nothing held). */
int rr_sym_attach(bench_t *b, const rr_arg *a, rr_arg *s, sym_buf *w);
/* Runs fn once (call 0: x slot 0) on a fresh residual with poisoned
** normed outputs and checks every rank against the CPU reference:
** residual_out bit for bit when `exact`, else within baseline_tolerance;
** normed within the rounding model. `chunked`: the op is
** reduce_scatter_rmsnorm, so each rank holds only its chunk of the rows
** (collgen__scatter_chunk). 1 when right, else 0 with a message naming
** `who` and the rank. */
int rr_result_ok(bench_t *b, rr_arg *a, launch_fn fn, const char *who, int exact, int chunked);

/* ---- the sections of each op ---- */
/* Which runs besides the default one (which has every section) have a
** section: --tune, --ranks N (ranks mapped onto fewer GPUs, no NCCL: the
** section skips its NCCL columns when b->no_nccl), --fp8. */
enum { BENCH_IN_TUNE = 1, BENCH_IN_RANKS = 2, BENCH_IN_FP8 = 4 };
#define BENCH_MAX_SECTIONS 2
/* One table of an op: `run` prints it, and its CSV rows to b->csv, sizes
** up to max_bytes where it has a byte axis; it checks each path's result
** against the CPU reference before timing it (a wrong collgen result
** exits 1; a wrong baseline is reported and left out). */
typedef struct {
  void (*run)(bench_t *b, size_t max_bytes);
  unsigned in;   /* BENCH_IN_*: the other runs that have it */
} bench_section;
/* An op's entry: its sections, in the order they run, up to the first
** without `run` (at least one). */
typedef struct {
  bench_section sections[BENCH_MAX_SECTIONS];
} bench_op;
#define BENCH_OP_DECL(NAME, value, id, ...) extern const bench_op bench_op_##id;
COLLGEN_OP_MAP(BENCH_OP_DECL)
#undef BENCH_OP_DECL

/* collgen-bench --model (bench_model.c): the 32-layer decode step. */
void bench_model(bench_t *b);
/* collgen-bench --floor (bench_floor.c): the cross-GPU flag floor. */
void bench_floor(bench_t *b);

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
