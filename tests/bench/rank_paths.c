/*
** rank_paths.c -- collgen-rank-paths: what registration buys in the
** one-process-per-GPU mode (docs/multiprocess.md, "When registration
** pays"). Forks N processes (default 2; round robin over the visible GPUs,
** grids capped at 8 blocks when ranks share a GPU) and prints, from rank 0:
**   1. per-call time of collgen_rank_allreduce_sum (bf16, 8 KiB .. 256 MiB)
**      and collgen_rank_allreduce_residual_rmsnorm (bf16 8 x 8192 and
**      128 x 8192) with a staged input and with a registered one: each
**      case checked once against the CPU reference, then CUDA-graph replay
**      of CALLS captured calls, the median of REPS replays;
**   2. the one-time cost of mapping a peer's buffer (64 MiB and 256 MiB):
**      VMM fd import (cuMemImportFromShareableHandle + cuMemAddressReserve
**      + cuMemMap + cuMemSetAccess) against cuIpcOpenMemHandle, median of
**      REPS, and the peer-read bandwidth of cuMemcpyDtoDAsync from each
**      mapping (no kernel).
** Needs a GPU, not NCCL. Usage: collgen-rank-paths [--mapping-only] [nranks]
** --mapping-only: only part 2 (its mapping times mean something on one GPU,
** where part 1's rank processes time-slice).
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap.h"
#include "comm_internal.h" /* white-box: the communicator's fields */
#include "devbuf.h"
#include "parse_int.h"
#include "reference.h"

#define CALLS 100
#define REPS 5
#define MAX_BYTES ((size_t)256 << 20)

typedef struct {
  collgen_comm_t *c;
  collgen_stream_t s;
  int rank, nranks;
  uint64_t seed;
  void *reg, *plain, *out, *res_in, *res_out, *gamma;
  collgen_buffer_t *h;
} bench_t;

static void die(const bench_t *b, const char *what) {
  fprintf(stderr, "rank_paths rank %d: %s: %s\n", b->rank, what,
          b->c ? collgen_comm_last_error(b->c) : collgen_last_error());
  exit(1);
}

#define CU(b, call)                                                             \
  do {                                                                          \
    if ((call) != CUDA_SUCCESS) die(b, #call);                                  \
  } while (0)
#define OK(b, call)                                                             \
  do {                                                                          \
    if ((call) != COLLGEN_OK) die(b, #call);                                    \
  } while (0)

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, c = *(const double *)y;
  return a < c ? -1 : a > c;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

/* One call of a case: allreduce of n bf16 elements (rows 0), or the fused
** op on rows x 8192, reading `in`. */
static int one_call(bench_t *b, const void *in, int64_t n, int64_t rows) {
  if (rows == 0)
    return collgen_rank_allreduce_sum(b->c, COLLGEN_DTYPE_BF16, 1, &n, in, b->out, 0, b->s);
  int64_t shape[2] = {rows, 8192};
  return collgen_rank_allreduce_residual_rmsnorm(b->c, COLLGEN_DTYPE_BF16, 2, shape, in, b->res_in,
                                                 b->out, b->res_out, b->gamma, 1e-6f, 0.0f, 0,
                                                 b->s);
}

/* Fresh inputs for every rank from the shared seed; uploads this rank's
** into `in`, checks one call against the reference (allreduce: the sum;
** fused: residual_out), bit for bit. */
static void check_case(bench_t *b, void *in, int64_t n, int64_t rows) {
  const int64_t elems = rows ? rows * 8192 : n;
  const size_t bytes = (size_t)elems * 2;
  void *host[COLLGEN_MAX_DEVICES], *want = malloc(bytes), *got = malloc(bytes);
  void *res = malloc(bytes), *gamma = malloc(8192 * 2), *normed = malloc(bytes);
  uint64_t state = b->seed | 1;
  for (int r = 0; r < b->nranks; ++r) {
    host[r] = malloc(bytes);
    collgen__ref_fill_random(COLLGEN_DTYPE_BF16, host[r], elems, &state);
  }
  OK(b, collgen__dev_upload(b->c, b->rank, in, host[b->rank], bytes));
  if (rows) {
    collgen__ref_fill_random(COLLGEN_DTYPE_BF16, res, elems, &state);
    collgen__ref_fill_random(COLLGEN_DTYPE_BF16, gamma, 8192, &state);
    OK(b, collgen__dev_upload(b->c, b->rank, b->res_in, res, bytes));
    OK(b, collgen__dev_upload(b->c, b->rank, b->gamma, gamma, 8192 * 2));
    collgen__ref_allreduce_residual_rmsnorm(COLLGEN_DTYPE_BF16, b->nranks, rows, 8192,
                                            (const void *const *)host, res, gamma, 1e-6f, 0.0f,
                                            normed, want);
  } else {
    collgen__ref_allreduce(COLLGEN_DTYPE_BF16, n, b->nranks, (const void *const *)host, want);
  }
  OK(b, one_call(b, in, n, rows));
  CU(b, collgen__cu.cuStreamSynchronize((CUstream)b->s));
  OK(b, collgen_comm_check(b->c));
  OK(b, collgen__dev_download(b->c, b->rank, got, rows ? b->res_out : b->out, bytes));
  if (memcmp(got, want, bytes) != 0) die(b, "result differs from the CPU reference");
  for (int r = 0; r < b->nranks; ++r) free(host[r]);
  free(want);
  free(got);
  free(res);
  free(gamma);
  free(normed);
}

/* Microseconds per call: CALLS calls captured in one graph, median of
** REPS replays (after one warm-up replay). */
static double time_case(bench_t *b, const void *in, int64_t n, int64_t rows) {
  CUgraph g;
  CUgraphExec ge;
  CUevent e0, e1;
  double us[REPS];
  CU(b, collgen__cu.cuStreamBeginCapture((CUstream)b->s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  for (int i = 0; i < CALLS; ++i) OK(b, one_call(b, in, n, rows));
  CU(b, collgen__cu.cuStreamEndCapture((CUstream)b->s, &g));
  CU(b, collgen__cu.cuGraphInstantiate(&ge, g, 0));
  CU(b, collgen__cu.cuEventCreate(&e0, 0));
  CU(b, collgen__cu.cuEventCreate(&e1, 0));
  CU(b, collgen__cu.cuGraphLaunch(ge, (CUstream)b->s));
  for (int k = 0; k < REPS; ++k) {
    float ms = 0;
    CU(b, collgen__cu.cuEventRecord(e0, (CUstream)b->s));
    CU(b, collgen__cu.cuGraphLaunch(ge, (CUstream)b->s));
    CU(b, collgen__cu.cuEventRecord(e1, (CUstream)b->s));
    CU(b, collgen__cu.cuEventSynchronize(e1));
    CU(b, collgen__cu.cuEventElapsedTime(&ms, e0, e1));
    us[k] = ms * 1000.0 / CALLS;
  }
  OK(b, collgen_comm_check(b->c));
  collgen__cu.cuEventDestroy(e0);
  collgen__cu.cuEventDestroy(e1);
  collgen__cu.cuGraphExecDestroy(ge);
  collgen__cu.cuGraphDestroy(g);
  return median(us, REPS);
}

/* The algorithm collgen plans for a case (every rank plans the same). */
static const char *algo_of(bench_t *b, int64_t n, int64_t rows, collgen_plan_t *plan) {
  collgen_shape_t s;
  collgen_shape_init(&s, rows ? COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM : COLLGEN_OP_ALLREDUCE_SUM);
  s.dtype = COLLGEN_DTYPE_BF16;
  s.ngpus = s.group_size = b->nranks;
  s.tensor_rank = rows ? 2 : 1;
  s.elems = n;
  s.rows = rows;
  s.cols = rows ? 8192 : 0;
  s.aligned16 = 1;
  s.max_blocks = b->c->max_blocks;
  snprintf(s.arch, sizeof s.arch, "%s", b->c->arch[b->rank]);
  return collgen_plan(b->c->gen, &s, plan) == COLLGEN_OK ? plan->algo : "?";
}

static void bench_calls(bench_t *b) {
  static const size_t sizes[] = {8u << 10, 256u << 10, 1u << 20, 16u << 20, 256u << 20};
  static const int64_t fused_rows[] = {8, 128};
  if (b->rank == 0)
    printf("%-34s %-9s %11s %13s %7s\n", "call (bf16, graph of 100)", "algo", "staged us",
           "registered us", "ratio");
  for (int k = 0; k < 7; ++k) {
    const int64_t rows = k < 5 ? 0 : fused_rows[k - 5];
    const int64_t n = k < 5 ? (int64_t)(sizes[k] / 2) : 0;
    double t[2];
    for (int reg = 0; reg < 2; ++reg) {
      void *in = reg ? b->reg : b->plain;
      b->seed += 17;
      check_case(b, in, n, rows);
      t[reg] = time_case(b, in, n, rows);
    }
    if (b->rank != 0) continue;
    collgen_plan_t plan;
    char what[64];
    if (rows)
      snprintf(what, sizeof what, "residual_rmsnorm %lld x 8192", (long long)rows);
    else
      snprintf(what, sizeof what, "allreduce_sum %zu KiB", sizes[k] >> 10);
    printf("%-34s %-9s %11.2f %13.2f %7.2f\n", what, algo_of(b, n, rows, &plan), t[0], t[1],
           t[1] / t[0]);
    fflush(stdout);
  }
}

/* Mapping a peer's `bytes` buffer (the next rank's) both ways: the median
** time of REPS mappings, then the peer-read bandwidth of one copy from each
** mapping into a local buffer. */
static void bench_mapping(bench_t *b, size_t bytes) {
  const int peer = (b->rank + 1) % b->nranks;
  collgen_comm_t *c = b->c;
  char err[COLLGEN_ERRBUF];
  collgen__shared_buf own_vmm;
  CUdeviceptr own_ipc = 0, local = 0;
  struct { CUipcMemHandle ipc; uint64_t vmm_bytes; } mine, all[COLLGEN_MAX_DEVICES];
  int fd = -1, fds[COLLGEN_MAX_DEVICES];
  CU(b, collgen__cu.cuCtxSetCurrent(c->ctx[b->rank]));
  if (collgen__shared_alloc(c->cudev[b->rank], bytes, &own_vmm, err, sizeof err) != COLLGEN_OK)
    die(b, err);
  CU(b, collgen__cu.cuMemAlloc(&own_ipc, bytes));
  CU(b, collgen__cu.cuMemAlloc(&local, bytes));
  CU(b, collgen__cu.cuIpcGetMemHandle(&mine.ipc, own_ipc));
  mine.vmm_bytes = own_vmm.bytes;
  if (collgen__shared_export(&own_vmm, &fd, err, sizeof err) != COLLGEN_OK) die(b, err);
  OK(b, collgen__boot_exchange(c->boot, &mine, all, sizeof mine, &fd, 1, fds));
  double t_vmm[REPS], t_ipc[REPS], gbps[2];
  collgen__shared_buf map;
  CUdeviceptr ipc = 0;
  for (int k = 0; k < REPS; ++k) {
    double t0 = collgen__now_ms();
    if (collgen__shared_import(fds[peer], (size_t)all[peer].vmm_bytes, c->cudev[b->rank], &map,
                               err, sizeof err) != COLLGEN_OK)
      die(b, err);
    t_vmm[k] = collgen__now_ms() - t0;
    t0 = collgen__now_ms();
    CU(b, collgen__cu.cuIpcOpenMemHandle(&ipc, all[peer].ipc, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    t_ipc[k] = collgen__now_ms() - t0;
    if (k == REPS - 1) break; /* keep the last mappings for the copies */
    collgen__shared_free(&map);
    CU(b, collgen__cu.cuIpcCloseMemHandle(ipc));
  }
  for (int m = 0; m < 2; ++m) {
    CUevent e0, e1;
    float ms = 0;
    const CUdeviceptr src = m == 0 ? map.ptr : ipc;
    CU(b, collgen__cu.cuEventCreate(&e0, 0));
    CU(b, collgen__cu.cuEventCreate(&e1, 0));
    CU(b, collgen__cu.cuMemcpyDtoDAsync(local, src, bytes, (CUstream)b->s)); /* warm-up */
    CU(b, collgen__cu.cuEventRecord(e0, (CUstream)b->s));
    CU(b, collgen__cu.cuMemcpyDtoDAsync(local, src, bytes, (CUstream)b->s));
    CU(b, collgen__cu.cuEventRecord(e1, (CUstream)b->s));
    CU(b, collgen__cu.cuEventSynchronize(e1));
    CU(b, collgen__cu.cuEventElapsedTime(&ms, e0, e1));
    gbps[m] = (double)bytes / (ms * 1e-3) / 1e9;
    collgen__cu.cuEventDestroy(e0);
    collgen__cu.cuEventDestroy(e1);
  }
  collgen__shared_free(&map);
  CU(b, collgen__cu.cuIpcCloseMemHandle(ipc));
  /* nobody maps this rank's buffers any more before they are freed */
  int32_t done = 0, all_done[COLLGEN_MAX_DEVICES];
  OK(b, collgen__boot_allgather(c->boot, &done, all_done, sizeof done));
  for (int r = 0; r < b->nranks; ++r)
    if (fds[r] >= 0) close(fds[r]);
  close(fd);
  collgen__cu.cuMemFree(own_ipc);
  collgen__cu.cuMemFree(local);
  collgen__cu.cuCtxSetCurrent(c->ctx[b->rank]);
  collgen__shared_free(&own_vmm);
  if (b->rank == 0)
    printf("%-14zu %14.3f %16.3f %14.1f %14.1f\n", bytes >> 20, median(t_vmm, REPS),
           median(t_ipc, REPS), gbps[0], gbps[1]);
}

static void run_rank(const collgen_unique_id_t *id, int nranks, int rank, uint64_t seed,
                     int mapping_only) {
  bench_t b;
  memset(&b, 0, sizeof b);
  b.rank = rank;
  b.nranks = nranks;
  b.seed = seed;
  char err[COLLGEN_ERRBUF];
  int ngpu = 0;
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) die(&b, err);
  collgen__cu.cuDeviceGetCount(&ngpu);
  if (ngpu < 1) die(&b, "no GPU");
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.max_blocks = nranks > ngpu ? 8 : 0; /* ranks sharing a GPU stay resident */
  OK(&b, collgen_comm_init_rank(&b.c, nranks, id, rank, rank % ngpu, &o));
  OK(&b, collgen__dev_stream_create(b.c, rank, &b.s));
  void **bufs[] = {&b.reg, &b.plain, &b.out, &b.res_in, &b.res_out};
  for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; ++k)
    OK(&b, collgen__dev_alloc(b.c, rank, k < 3 ? MAX_BYTES : (size_t)128 * 8192 * 2, bufs[k]));
  OK(&b, collgen__dev_alloc(b.c, rank, 8192 * 2, &b.gamma));
  OK(&b, collgen_register_buffer(b.c, b.reg, MAX_BYTES, &b.h));
  if (rank == 0)
    printf("collgen-rank-paths: %d processes on %d visible GPU(s), %s, staging %zu MiB\n", nranks,
           ngpu, b.c->arch[0], b.c->staging_bytes >> 20);
  if (!mapping_only) bench_calls(&b);
  OK(&b, collgen_deregister_buffer(b.c, b.h));
  if (rank == 0)
    printf("\n%-14s %14s %16s %14s %14s\n", "peer map MiB", "VMM import ms", "cuIpcOpen ms",
           "VMM read GB/s", "IPC read GB/s");
  bench_mapping(&b, (size_t)64 << 20);
  bench_mapping(&b, (size_t)256 << 20);
  for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; ++k) collgen__dev_free(b.c, rank, *bufs[k]);
  collgen__dev_free(b.c, rank, b.gamma);
  collgen__dev_stream_destroy(b.c, rank, b.s);
  collgen_comm_destroy(b.c);
  exit(0);
}

int main(int argc, char **argv) {
  int mapping_only = argc > 1 && strcmp(argv[1], "--mapping-only") == 0;
  int64_t nranks = 2;
  if (argc > 2 + mapping_only ||
      (argc > 1 + mapping_only &&
       collgen__parse_int(argv[1 + mapping_only], 2, COLLGEN_MAX_DEVICES, &nranks) != 0)) {
    fprintf(stderr, "usage: %s [--mapping-only] [nranks 2..%d]\n", argv[0], COLLGEN_MAX_DEVICES);
    return 2;
  }
  collgen_unique_id_t id;
  if (collgen_get_unique_id(&id) != COLLGEN_OK) return 1;
  const uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull;
  pid_t pids[COLLGEN_MAX_DEVICES];
  fflush(stdout);
  for (int r = 0; r < nranks; ++r) {
    pids[r] = fork(); /* before any CUDA call: each process starts the driver itself */
    if (pids[r] == 0) run_rank(&id, (int)nranks, r, seed, mapping_only);
  }
  int failed = 0;
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank_paths: rank %d failed\n", r);
      failed = 1;
    }
  }
  return failed;
}
