/*
** bench.c -- collgen-bench: collgen against NCCL in one process, same GPUs,
** same buffers.
**
** For allreduce_sum over sizes 1 KB .. 1 GB, allgather_rmsnorm and
** allreduce_residual_rmsnorm (bench_residual.c) over rows x cols, and
** all_gather (against ncclAllGather) over gathered sizes, it first
** checks collgen's result against the CPU reference (a wrong answer fails
** the run), then times collgen and NCCL (ncclCommInitAll; ncclAllReduce;
** ncclAllGather followed by a plain RMSNorm kernel; ncclAllReduce followed
** by a plain residual add + RMSNorm kernel; ncclBroadcast for broadcast,
** busbw = algbw), eager and as CUDA-graph replay. Timing: CUDA events on every rank's stream around a
** batch of back-to-back calls, the slowest rank's time divided by the batch,
** median of TRIALS batches after a warm-up. Inputs rotate through an arena
** (>= 128 MB per rank) so successive calls read different memory. busbw
** follows nccl-tests: allreduce algbw*2(n-1)/n, all-gather (gathered
** bytes)/t*(n-1)/n. Also measures JIT costs and host overhead per call.
** The op sections are each op's entry bench_op_<id> (bench.h), run in
** catalog order after those.
**
** usage: collgen-bench [--csv FILE] [--quick] [--tune] [--max-bytes N]
**                      [--dtype bf16|f16|f32] [--group-size G] [--model] [--floor] [--fp8]
**        collgen-bench --processes N   (one process per rank: bench_processes.c)
**        collgen-bench --ranks N [--quick] ...   (N ranks mapped onto the GPUs)
** --model: only the 32-layer decode step (bench_model.c); --floor: only the
** cross-GPU flag floor (bench_floor.c); --fp8: only the FP8 output table
** (bench_residual.c); several: each of them. NCCL's symmetric-window
** path (bench_nccl_sym.c) is a column of the allreduce and fused tables.
** --ranks N (2..8) maps N ranks onto the GPUs there are (allow_shared_devices,
** grids of at most 8 blocks so every rank's blocks fit at once) and runs
** the sections marked BENCH_IN_RANKS (all_gather, reduce_scatter_sum,
** broadcast and reduce_scatter_rmsnorm), each checked first, without NCCL
** (one rank per GPU): a check of those sections on one GPU; its times are
** not a measure.
*/
#define _GNU_SOURCE
#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_rmsnorm_ref.h"
#include "nvrtc.h"
#include "parse_int.h"

#define TRIALS 15

int group_of(const bench_t *b) { return b->group ? b->group : b->n; }

int esize_of(const bench_t *b) { return collgen__dtype_bytes(b->dt); }

/* NCCL's type of a dtype; i16, which NCCL lacks, moves as float16 (bits). */
ncclDataType_t nccl_type(collgen_dtype_t dt) {
  switch (dt) {
  case COLLGEN_DTYPE_BF16: return ncclBfloat16;
  case COLLGEN_DTYPE_F16: return ncclFloat16;
  case COLLGEN_DTYPE_F32: return ncclFloat32;
  case COLLGEN_DTYPE_U8: return ncclUint8;
  case COLLGEN_DTYPE_I8: return ncclInt8;
  case COLLGEN_DTYPE_I16: return ncclFloat16;
  case COLLGEN_DTYPE_I32: return ncclInt32;
  case COLLGEN_DTYPE_I64: return ncclInt64;
  case COLLGEN_DTYPE_F64: return ncclFloat64;
  }
  die("nccl_type", "unknown dtype");
}

void die(const char *what, const char *msg) {
  fprintf(stderr, "collgen-bench: %s: %s\n", what, msg);
  exit(1);
}

void sync_all(bench_t *b) {
  int rc = collgen__dev_sync_all(b->comm, b->streams);
  if (rc != COLLGEN_OK) die("sync", collgen_comm_last_error(b->comm));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double time_calls(bench_t *b, launch_fn fn, void *arg, int batch, int graph) {
  CUgraph g[8];
  CUgraphExec ge[8];
  if (graph) {
    FOR_LOCAL(b, r) {
      CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
      CU(collgen__cu.cuStreamBeginCapture((CUstream)b->streams[r], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    }
    for (int i = 0; i < batch; ++i) fn(b, arg, i);
    FOR_LOCAL(b, r) { /* end all captures, then instantiate */
      CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
      CU(collgen__cu.cuStreamEndCapture((CUstream)b->streams[r], &g[r]));
    }
    FOR_LOCAL(b, r) {
      CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
      CU(collgen__cu.cuGraphInstantiate(&ge[r], g[r], 0));
    }
  }
  double t[TRIALS];
  for (int trial = -2; trial < TRIALS; ++trial) { /* two warm-up batches */
    sync_all(b);
    if (b->align) b->align(); /* other processes' ranks start together */
    FOR_LOCAL(b, r) {
      CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
      CU(collgen__cu.cuEventRecord(b->start[r], (CUstream)b->streams[r]));
    }
    if (graph) {
      FOR_LOCAL(b, r) {
        CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
        CU(collgen__cu.cuGraphLaunch(ge[r], (CUstream)b->streams[r]));
      }
    } else {
      for (int i = 0; i < batch; ++i) fn(b, arg, i + (trial + 2) * batch);
    }
    FOR_LOCAL(b, r) {
      CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
      CU(collgen__cu.cuEventRecord(b->stop[r], (CUstream)b->streams[r]));
    }
    sync_all(b);
    double worst = 0;
    FOR_LOCAL(b, r) {
      float ms = 0;
      CU(collgen__cu.cuEventElapsedTime(&ms, b->start[r], b->stop[r]));
      if (ms > worst) worst = ms;
    }
    if (trial >= 0) t[trial] = worst * 1000.0 / batch;
  }
  if (graph)
    FOR_LOCAL(b, r) {
      collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]);
      collgen__cu.cuGraphExecDestroy(ge[r]);
      collgen__cu.cuGraphDestroy(g[r]);
    }
  qsort(t, TRIALS, sizeof t[0], cmp_double);
  return t[TRIALS / 2];
}

void bench_load_kernels(bench_t *b, const char *src, const char *file, int nk,
                        const char *const *names, CUfunction *const *fns) {
  collgen__compiled out;
  char err[512];
  const int any = b->comm->self >= 0 ? b->comm->self : 0;
  memset(&out, 0, sizeof out);
  if (collgen__nvrtc_compile(src, file, b->comm->arch[any], &out, err, sizeof err) != COLLGEN_OK)
    die(file, out.log && out.log[0] ? out.log : err);
  FOR_LOCAL(b, r) {
    CUmodule m;
    CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
    CU(collgen__cu.cuModuleLoadData(&m, out.cubin));
    for (int k = 0; k < nk; ++k) CU(collgen__cu.cuModuleGetFunction(&fns[k][r], m, names[k]));
  }
  free(out.cubin);
  free(out.log);
}

void bench_prepare_ranks(bench_t *b) {
  static char src[BENCH_RMSNORM_SOURCE_CAP];
  static const char *const names[] = {BENCH_RMSNORM_KERNEL, BENCH_ADD_RMSNORM_KERNEL};
  CUfunction *const fns[] = {b->rms_fn, b->add_rms_fn};
  if (bench_rmsnorm_source(b->dt, src, sizeof src) != 0) die("plain RMSNorm kernel", "source too long");
  bench_load_kernels(b, src, "plain_rmsnorm.cu", 2, names, fns);
  FOR_LOCAL(b, r) {
    if (collgen__dev_stream_create(b->comm, r, &b->streams[r]) != COLLGEN_OK)
      die("stream", collgen_comm_last_error(b->comm));
    CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
    CU(collgen__cu.cuEventCreate(&b->start[r], CU_EVENT_DEFAULT));
    CU(collgen__cu.cuEventCreate(&b->stop[r], CU_EVENT_DEFAULT));
  }
}

int values_match(const bench_t *b, const void *got, const void *want, int64_t n, int exact) {
  const size_t esz = (size_t)esize_of(b);
  if (exact) return memcmp(got, want, (size_t)n * esz) == 0;
  for (int64_t i = 0; i < n; ++i)
    if (!(fabs((double)collgen__ref_load(b->dt, got, i) - collgen__ref_load(b->dt, want, i)) <=
          baseline_tolerance(b)))
      return 0;
  return 1;
}

void print_us(int width, double v) {
  if (isnan(v)) printf("%*s", width, "n/a");
  else printf("%*.2f", width, v);
}

void launch_plain_add_rmsnorm(bench_t *b, int r, void *sum, void *res, void *gamma,
                              void *normed, int64_t rows, int64_t cols) {
  unsigned long long c = (unsigned long long)cols;
  float eps = 1e-6f, offset = 1.0f;
  void *args[] = {&sum, &res, &gamma, &res, &normed, &c, &eps, &offset};
  CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
  CU(collgen__cu.cuLaunchKernel(b->add_rms_fn[r], (unsigned)rows, 1, 1, BENCH_RMSNORM_BLOCK, 1, 1,
                                0, (CUstream)b->streams[r], args, NULL));
}

int batch_for(size_t bytes) {
  return bytes <= (1u << 20) ? 50 : bytes <= (64u << 20) ? 10 : 2;
}

/* One 128 MB pool of random values of the benchmark's dtype (see bench.h). */
#define POOL_BYTES (64u << 20)
static uint16_t *pool;

void upload_random(bench_t *b, int r, char *dst, size_t bytes) {
  if (!pool) {
    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    pool = malloc(2 * (size_t)POOL_BYTES);
    collgen__ref_fill_random(b->dt, pool, 2 * (int64_t)POOL_BYTES / esize_of(b), &seed);
  }
  static size_t turn;
  for (size_t off = 0; off < bytes; off += POOL_BYTES) {
    size_t n = bytes - off < POOL_BYTES ? bytes - off : POOL_BYTES;
    size_t start = ((turn++ * 4099 + (size_t)r * 65537) % (POOL_BYTES / 16)) * 16;
    if (collgen__dev_upload(b->comm, r, dst + off, (char *)pool + start, n) != COLLGEN_OK)
      die("upload", collgen_comm_last_error(b->comm));
  }
}

/* ---- allreduce ---------------------------------------------------------- */

typedef struct {
  size_t bytes, slot;
  int nslots, inplace; /* inplace: outputs are the inputs */
  int64_t count, shape[1];
  char *in[8], *out[8];
} ar_arg;

static void launch_collgen_ar(bench_t *b, void *vp, int iter) {
  ar_arg *a = vp;
  const void *in[8];
  void *out[8];
  const int64_t *shapes[8];
  size_t off = (size_t)(iter % a->nslots) * a->slot;
  for (int r = 0; r < b->n; ++r) {
    in[r] = a->in[r] + off;
    out[r] = (a->inplace ? a->in[r] : a->out[r]) + off;
    shapes[r] = a->shape;
  }
  int rc = collgen_allreduce_sum(b->comm, b->dt, 1, shapes, in, out, b->group, b->streams);
  if (rc != COLLGEN_OK) die("collgen_allreduce_sum", collgen_comm_last_error(b->comm));
}

static void launch_nccl_ar(bench_t *b, void *vp, int iter) {
  ar_arg *a = vp;
  size_t off = (size_t)(iter % a->nslots) * a->slot;
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclAllReduce(a->in[r] + off, a->out[r] + off, (size_t)a->count, nccl_type(b->dt), ncclSum,
                     b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
}

/* Runs fn once (call 0: slot 0) into poisoned outputs and checks every
** rank against the CPU reference: bit for bit when `exact` (collgen), else
** within baseline_tolerance (NCCL). 1 when right; else 0 with a message. */
static int allreduce_ok(bench_t *b, ar_arg *a, launch_fn fn, const char *who, int exact) {
  size_t bytes = a->bytes;
  void *host[8], *expect = malloc(bytes), *got = malloc(bytes);
  if (!expect || !got) die("check", "out of memory");
  for (int r = 0; r < b->n; ++r) {
    host[r] = malloc(bytes);
    if (!host[r]) die("check", "out of memory");
    collgen__dev_download(b->comm, r, host[r], a->in[r], bytes);
    collgen__dev_fill(b->comm, r, a->out[r], 0xff, bytes);
  }
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  for (int r = 0; r < b->n && ok; ++r) {
    int base = r - r % group_of(b);
    collgen__ref_allreduce(b->dt, a->count, group_of(b), (const void *const *)&host[base], expect);
    collgen__dev_download(b->comm, r, got, a->out[r], bytes);
    if (!values_match(b, got, expect, a->count, exact)) {
      fprintf(stderr, "collgen-bench: %s allreduce %zu bytes: rank %d differs from the CPU "
                      "reference\n", who, bytes, r);
      ok = 0;
    }
  }
  for (int r = 0; r < b->n; ++r) free(host[r]);
  free(expect);
  free(got);
  return ok;
}

/* Sets a's size to `bytes`, slots of it filling `arena` (at most 4096). */
static void ar_size(const bench_t *b, ar_arg *a, size_t bytes, size_t arena) {
  a->bytes = bytes;
  a->count = (int64_t)(bytes / (size_t)esize_of(b));
  a->shape[0] = a->count;
  a->slot = (bytes + 4095) & ~(size_t)4095;
  a->nslots = (int)(arena / a->slot);
  if (a->nslots > 4096) a->nslots = 4096;
}

/* *s: a's size with in and out in a new NCCL symmetric window w (in
** random), slots filling max(2 x bytes, ARENA_MIN). 0, or -1 when NCCL has
** no symmetric path (nothing held). */
static int ar_sym_attach(bench_t *b, const ar_arg *a, ar_arg *s, sym_buf *w) {
  size_t arena = a->bytes * 2 > ARENA_MIN ? a->bytes * 2 : ARENA_MIN;
  *s = *a;
  ar_size(b, s, a->bytes, arena);
  arena = s->slot * (size_t)s->nslots;
  if (sym_alloc(b, w, 2 * arena) != 0) return -1;
  FOR_LOCAL(b, r) { /* in, then out: the same offsets on every rank */
    s->in[r] = w->ptr[r];
    s->out[r] = (char *)w->ptr[r] + arena;
    upload_random(b, r, s->in[r], arena);
  }
  return 0;
}

double collgen_allreduce_graph_us(bench_t *b, size_t bytes) {
  ar_arg a;
  memset(&a, 0, sizeof a);
  ar_size(b, &a, bytes, ARENA_MIN);
  const size_t arena = a.slot * (size_t)a.nslots;
  FOR_LOCAL(b, r) {
    if (collgen__dev_alloc(b->comm, r, arena, (void **)&a.in[r]) ||
        collgen__dev_alloc(b->comm, r, arena, (void **)&a.out[r]))
      die("alloc", collgen_comm_last_error(b->comm));
    upload_random(b, r, a.in[r], arena);
  }
  if (!allreduce_ok(b, &a, launch_collgen_ar, "collgen", 1)) exit(1);
  double us = time_calls(b, launch_collgen_ar, &a, batch_for(bytes), 1);
  FOR_LOCAL(b, r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
  return us;
}

static void bench_allreduce(bench_t *b, size_t max_bytes) {
  size_t arena = max_bytes * 2 > ARENA_MIN ? max_bytes * 2 : ARENA_MIN;
  ar_arg a;
  memset(&a, 0, sizeof a);
  for (int r = 0; r < b->n; ++r) {
    if (collgen__dev_alloc(b->comm, r, arena, (void **)&a.in[r]) ||
        collgen__dev_alloc(b->comm, r, arena, (void **)&a.out[r]))
      die("alloc", collgen_comm_last_error(b->comm));
    upload_random(b, r, a.in[r], arena);
  }
  printf("\nallreduce_sum %s, %d GPUs, groups of %d (us per call; nccl = default buffers, sym = "
         "NCCL symmetric windows, n/a: NCCL < 2.27; x_* = NCCL default time / collgen time, "
         "x_best = the faster NCCL path's time / collgen time)\n", collgen__dtype_name(b->dt),
         b->n, group_of(b));
  printf("%10s %10s %10s %9s %9s %10s %10s %10s %10s %8s %8s %8s %8s %10s\n", "bytes", "eager",
         "graph", "algbw", "busbw", "nccl_eag", "nccl_gr", "sym_eag", "sym_gr", "x_eager",
         "x_graph", "xb_eager", "xb_graph", "inplace_gr");
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 2) {
    if (b->quick && bytes != 8192 && bytes != (256u << 10) && bytes != (16u << 20) &&
        bytes != (256u << 20) && bytes != (1u << 30))
      continue;
    if (b->tune && bytes != 8192 && bytes != (1u << 20) && bytes != (16u << 20) &&
        bytes != (256u << 20))
      continue;
    ar_size(b, &a, bytes, arena);
    if (!allreduce_ok(b, &a, launch_collgen_ar, "collgen", 1)) exit(1);
    int batch = batch_for(bytes);
    double ce = time_calls(b, launch_collgen_ar, &a, batch, 0);
    double cg = time_calls(b, launch_collgen_ar, &a, batch, 1);
    double ne = NAN, ng = NAN, se = NAN, sg = NAN;
    if (!b->tune) { /* the baselines are checked too: a wrong one is reported, not timed */
      ar_arg sa;
      sym_buf w;
      if (allreduce_ok(b, &a, launch_nccl_ar, "baseline (NCCL)", 0)) {
        ne = time_calls(b, launch_nccl_ar, &a, batch, 0);
        ng = time_calls(b, launch_nccl_ar, &a, batch, 1);
      }
      if (ar_sym_attach(b, &a, &sa, &w) == 0) {
        if (allreduce_ok(b, &sa, launch_nccl_ar, "baseline (NCCL symmetric)", 0)) {
          se = time_calls(b, launch_nccl_ar, &sa, batch, 0);
          sg = time_calls(b, launch_nccl_ar, &sa, batch, 1);
        }
        sym_free(b, &w);
      }
    }
    a.inplace = 1; /* in place: one-shot is unsafe, so large sizes run two-shot */
    double ci = time_calls(b, launch_collgen_ar, &a, batch, 1);
    a.inplace = 0;
    const int g = group_of(b);
    double algbw = (double)bytes / (cg * 1e3), busbw = algbw * 2.0 * (g - 1) / g;
    double nbus = (double)bytes / (ng * 1e3) * 2.0 * (g - 1) / g;
    double be = fmin(ne, se), bg = fmin(ng, sg); /* fmin ignores a NaN side */
    printf("%10zu %10.2f %10.2f %9.1f %9.1f %10.2f %10.2f ", bytes, ce, cg, algbw, busbw, ne, ng);
    print_us(10, se);
    print_us(11, sg);
    printf(" %8.2f %8.2f %8.2f %8.2f %10.2f\n", ne / ce, ng / cg, be / ce, bg / cg, ci);
    fflush(stdout);
    if (b->csv)
      fprintf(b->csv, "allreduce_sum,%s,%d,%d,%zu,0,0,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,%.3f,,%.3f,"
              "%.3f,%.3f\n", collgen__dtype_name(b->dt), b->n, g, bytes, ce, cg, ne, ng, algbw,
              busbw, nbus, ci, se, sg, bg / cg);
  }
  for (int r = 0; r < b->n; ++r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
}

/* In --tune too (at most 256 MiB there). */
const bench_op bench_op_allreduce_sum = {{{bench_allreduce, BENCH_IN_TUNE}}};

/* ---- broadcast ---------------------------------------------------------- */

/* From the last rank of each group; the arena and sizes of allreduce. */
static void launch_collgen_bc(bench_t *b, void *vp, int iter) {
  ar_arg *a = vp;
  const void *in[8];
  void *out[8];
  const int64_t *shapes[8];
  size_t off = (size_t)(iter % a->nslots) * a->slot;
  for (int r = 0; r < b->n; ++r) {
    in[r] = a->in[r] + off;
    out[r] = a->out[r] + off;
    shapes[r] = a->shape;
  }
  int rc = collgen_broadcast(b->comm, b->dt, 1, shapes, in, out, group_of(b) - 1, b->group,
                             b->streams);
  if (rc != COLLGEN_OK) die("collgen_broadcast", collgen_comm_last_error(b->comm));
}

static void launch_nccl_bc(bench_t *b, void *vp, int iter) {
  ar_arg *a = vp;
  size_t off = (size_t)(iter % a->nslots) * a->slot;
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclBroadcast(a->in[r] + off, a->out[r] + off, (size_t)a->count, nccl_type(b->dt),
                     group_of(b) - 1, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
}

/* Runs fn once into poisoned outputs: every rank must hold its root's
** bytes (collgen and NCCL alike: nothing is computed). 1 when right. */
static int broadcast_ok(bench_t *b, ar_arg *a, launch_fn fn, const char *who) {
  const size_t bytes = a->bytes;
  void *root_in = malloc(bytes), *got = malloc(bytes);
  if (!root_in || !got) die("check", "out of memory");
  FOR_LOCAL(b, r) collgen__dev_fill(b->comm, r, a->out[r], 0xff, bytes);
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  for (int r = 0; r < b->n && ok; ++r) {
    const int root = r - r % group_of(b) + group_of(b) - 1;
    collgen__dev_download(b->comm, root, root_in, a->in[root], bytes);
    collgen__dev_download(b->comm, r, got, a->out[r], bytes);
    if (memcmp(got, root_in, bytes) != 0) {
      fprintf(stderr, "collgen-bench: %s broadcast %zu bytes: rank %d differs from its root\n",
              who, bytes, r);
      ok = 0;
    }
  }
  free(root_in);
  free(got);
  return ok;
}

/* nccl-tests' broadcast: busbw = algbw. */
static void bench_broadcast(bench_t *b, size_t max_bytes) {
  size_t arena = max_bytes * 2 > ARENA_MIN ? max_bytes * 2 : ARENA_MIN;
  ar_arg a;
  memset(&a, 0, sizeof a);
  for (int r = 0; r < b->n; ++r) {
    if (collgen__dev_alloc(b->comm, r, arena, (void **)&a.in[r]) ||
        collgen__dev_alloc(b->comm, r, arena, (void **)&a.out[r]))
      die("alloc", collgen_comm_last_error(b->comm));
    upload_random(b, r, a.in[r], arena);
  }
  printf("\nbroadcast %s, %d GPUs, groups of %d, root the group's last rank (us per call; "
         "busbw = algbw, as nccl-tests; x_* = NCCL time / collgen time)\n",
         collgen__dtype_name(b->dt), b->n, group_of(b));
  printf("%10s %10s %10s %9s %9s %10s %10s %8s %8s\n", "bytes", "eager", "graph", "algbw",
         "busbw", "nccl_eag", "nccl_gr", "x_eager", "x_graph");
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 2) {
    if (b->quick && bytes != 8192 && bytes != (256u << 10) && bytes != (16u << 20) &&
        bytes != (256u << 20) && bytes != (1u << 30))
      continue;
    ar_size(b, &a, bytes, arena);
    if (!broadcast_ok(b, &a, launch_collgen_bc, "collgen")) exit(1);
    const int batch = batch_for(bytes);
    double ce = time_calls(b, launch_collgen_bc, &a, batch, 0);
    double cg = time_calls(b, launch_collgen_bc, &a, batch, 1);
    double ne = NAN, ng = NAN;
    if (!b->no_nccl && broadcast_ok(b, &a, launch_nccl_bc, "baseline (NCCL)")) {
      ne = time_calls(b, launch_nccl_bc, &a, batch, 0);
      ng = time_calls(b, launch_nccl_bc, &a, batch, 1);
    }
    double algbw = (double)bytes / (cg * 1e3), nbus = (double)bytes / (ng * 1e3);
    printf("%10zu %10.2f %10.2f %9.1f %9.1f %10.2f %10.2f %8.2f %8.2f\n", bytes, ce, cg, algbw,
           algbw, ne, ng, ne / ce, ng / cg);
    fflush(stdout);
    if (b->csv)
      fprintf(b->csv, "broadcast,%s,%d,%d,%zu,0,0,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,,,,,%.3f\n",
              collgen__dtype_name(b->dt), b->n, group_of(b), bytes, ce, cg, ne, ng, algbw, algbw,
              nbus, ng / cg);
  }
  for (int r = 0; r < b->n; ++r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
}

const bench_op bench_op_broadcast = {{{bench_broadcast, BENCH_IN_RANKS}}};

/* ---- allgather_rmsnorm -------------------------------------------------- */

typedef struct {
  int64_t rows, cols, shard_rows[8], shapes[8][2];
  char *in[8];
  void *normed[8], *resid[8], *gamma[8];
  size_t shard_slot;
  int nslots;
} rms_arg;

static void launch_collgen_rms(bench_t *b, void *vp, int iter) {
  rms_arg *a = vp;
  const void *in[8];
  const int64_t *shapes[8];
  for (int r = 0; r < b->n; ++r) {
    in[r] = a->in[r] + (size_t)(iter % a->nslots) * a->shard_slot;
    shapes[r] = a->shapes[r];
  }
  int rc = collgen_allgather_rmsnorm(b->comm, b->dt, 2, shapes, in, a->normed, a->resid,
                                     (const void *const *)a->gamma, 1e-6f, 1.0f, b->group,
                                     b->streams);
  if (rc != COLLGEN_OK) die("collgen_allgather_rmsnorm", collgen_comm_last_error(b->comm));
}

static void launch_nccl_rms(bench_t *b, void *vp, int iter) {
  rms_arg *a = vp;
  size_t off = (size_t)(iter % a->nslots) * a->shard_slot;
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclAllGather(a->in[r] + off, a->resid[r], (size_t)(a->shard_rows[0] * a->cols),
                     nccl_type(b->dt), b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
  for (int r = 0; r < b->n; ++r) {
    unsigned long long cols = (unsigned long long)a->cols;
    float eps = 1e-6f, offset = 1.0f;
    void *args[] = {&a->resid[r], &a->gamma[r], &a->normed[r], &cols, &eps, &offset};
    CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
    CU(collgen__cu.cuLaunchKernel(b->rms_fn[r], (unsigned)a->rows, 1, 1, BENCH_RMSNORM_BLOCK, 1, 1,
                                  0, (CUstream)b->streams[r], args, NULL));
  }
}

int normed_rows_ok(const bench_t *b, int64_t rows, int64_t cols, const void *got,
                   const void *ref_r, const void *gamma, int64_t *bad_row) {
  int64_t step = rows > 64 ? rows / 64 : 1;
  for (int64_t row = 0; row < rows; row += step) {
    double scale = collgen__ref_rmsnorm_scale(b->dt, ref_r, row, cols, 1e-6f);
    for (int64_t c = 0; c < cols; ++c) {
      int64_t i = row * cols + c;
      double exact = collgen__ref_load(b->dt, ref_r, i) * scale * (collgen__ref_load(b->dt, gamma, c) + 1.0);
      if (!collgen__ref_close(b->dt, collgen__ref_load(b->dt, got, i), exact)) {
        *bad_row = row;
        return 0;
      }
    }
  }
  return 1;
}

/* Runs `fn` once with poisoned outputs and checks every rank: residual equal
** to the gathered shards, normed within the rounding model. Returns 1 when
** right; otherwise prints which rank is wrong and returns 0. */
static int rms_result_ok(bench_t *b, rms_arg *a, launch_fn fn, const char *who) {
  const int g = group_of(b);
  size_t esz = (size_t)esize_of(b), ob = (size_t)(a->rows * a->cols) * esz, gb = (size_t)a->cols * esz;
  void *host[8], *gamma = malloc(gb), *ref_r = malloc(ob), *got = malloc(ob);
  for (int r = 0; r < b->n; ++r) {
    size_t sb = (size_t)(a->shard_rows[r] * a->cols) * esz;
    host[r] = malloc(sb + 1);
    collgen__dev_download(b->comm, r, host[r], a->in[r], sb);
    collgen__dev_fill(b->comm, r, a->normed[r], 0xff, ob);
    collgen__dev_fill(b->comm, r, a->resid[r], 0xff, ob);
  }
  collgen__dev_download(b->comm, 0, gamma, a->gamma[0], gb); /* every rank has the same gamma */
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  for (int r = 0; r < b->n && ok; ++r) {
    int base = r - r % g;
    int64_t start = 0, bad_row = -1;
    for (int s = base; s < base + g; ++s) {
      memcpy((char *)ref_r + (size_t)(start * a->cols) * esz, host[s],
             (size_t)(a->shard_rows[s] * a->cols) * esz);
      start += a->shard_rows[s];
    }
    collgen__dev_download(b->comm, r, got, a->resid[r], ob);
    if (memcmp(got, ref_r, ob) != 0) {
      fprintf(stderr, "collgen-bench: %s rmsnorm %lldx%lld: residual of rank %d differs\n", who,
              (long long)a->rows, (long long)a->cols, r);
      ok = 0;
    }
    collgen__dev_download(b->comm, r, got, a->normed[r], ob);
    if (ok && !normed_rows_ok(b, a->rows, a->cols, got, ref_r, gamma, &bad_row)) {
      fprintf(stderr, "collgen-bench: %s rmsnorm %lldx%lld: normed row %lld of rank %d wrong\n",
              who, (long long)a->rows, (long long)a->cols, (long long)bad_row, r);
      ok = 0;
    }
  }
  for (int r = 0; r < b->n; ++r) free(host[r]);
  free(gamma);
  free(ref_r);
  free(got);
  return ok;
}

static void bench_rmsnorm(bench_t *b, size_t max_bytes) {
  static const int64_t rows_list[] = {1, 8, 32, 128, 512, 2048, 8192, 16384};
  static const int64_t cols_list[] = {2048, 4096, 8192, 16384};
  const int g = group_of(b);
  const size_t esz = (size_t)esize_of(b);
  printf("\nallgather_rmsnorm %s, %d GPUs, groups of %d (NCCL = ncclAllGather + plain RMSNorm "
         "kernel; floor = received bytes / %.0f GB/s)\n", collgen__dtype_name(b->dt),
         b->n, g, P2P_READ_GBS);
  printf("%6s %6s %10s %10s %10s %10s %8s %8s %9s %7s\n", "rows", "cols", "eager", "graph",
         "nccl_eag", "nccl_gr", "x_eager", "x_graph", "floor_us", "%floor");
  uint64_t seed = 0xabcdefull + (uint64_t)getpid();
  for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ++ri)
    for (size_t ci = 0; ci < sizeof cols_list / sizeof cols_list[0]; ++ci) {
      rms_arg a;
      memset(&a, 0, sizeof a);
      a.rows = rows_list[ri];
      a.cols = cols_list[ci];
      if ((b->quick || b->tune) &&
          !((a.rows == 8 && a.cols == 4096) || (a.rows == 128 && a.cols == 8192) ||
            (a.rows == 8192 && a.cols == 8192)))
        continue;
      for (int r = 0; r < b->n; ++r) { /* each group gathers `rows` rows */
        a.shard_rows[r] = a.rows / g + (r % g < a.rows % g);
        a.shapes[r][0] = a.shard_rows[r];
        a.shapes[r][1] = a.cols;
      }
      int even = a.rows % g == 0; /* NCCL's all-gather needs equal shards */
      size_t sb = (size_t)(a.shard_rows[0] * a.cols) * esz, ob = (size_t)(a.rows * a.cols) * esz;
      a.shard_slot = (sb + 4095) & ~(size_t)4095;
      a.nslots = (int)(ARENA_MIN / a.shard_slot);
      if (a.nslots < 2) a.nslots = 2;
      if (a.nslots > 1024) a.nslots = 1024;
      size_t arena = a.shard_slot * (size_t)a.nslots;
      void *h = malloc((size_t)a.cols * esz);
      for (int r = 0; r < b->n; ++r) {
        if (collgen__dev_alloc(b->comm, r, arena, (void **)&a.in[r]) ||
            collgen__dev_alloc(b->comm, r, ob, &a.normed[r]) ||
            collgen__dev_alloc(b->comm, r, ob, &a.resid[r]) ||
            collgen__dev_alloc(b->comm, r, (size_t)a.cols * esz, &a.gamma[r]))
          die("alloc", collgen_comm_last_error(b->comm));
        upload_random(b, r, a.in[r], arena);
        if (r == 0) collgen__ref_fill_random(b->dt, h, a.cols, &seed);
        collgen__dev_upload(b->comm, r, a.gamma[r], h, (size_t)a.cols * esz);
      }
      free(h);
      if (!rms_result_ok(b, &a, launch_collgen_rms, "collgen")) exit(1);
      /* the baseline is checked too: a wrong baseline is reported, not timed */
      if (even && !b->tune && !rms_result_ok(b, &a, launch_nccl_rms, "baseline (NCCL + plain)")) {
        fprintf(stderr, "collgen-bench: baseline wrong; its times are left out (nan)\n");
        even = 0;
      }
      int batch = batch_for(ob);
      double ce = time_calls(b, launch_collgen_rms, &a, batch, 0);
      double cg = time_calls(b, launch_collgen_rms, &a, batch, 1);
      double ne = even && !b->tune ? time_calls(b, launch_nccl_rms, &a, batch, 0) : NAN;
      double ng = even && !b->tune ? time_calls(b, launch_nccl_rms, &a, batch, 1) : NAN;
      double floor_us = (double)ob * (g - 1) / g / (P2P_READ_GBS * 1e3);
      printf("%6lld %6lld %10.2f %10.2f %10.2f %10.2f %8.2f %8.2f %9.2f %6.0f%%\n",
             (long long)a.rows, (long long)a.cols, ce, cg, ne, ng, ne / ce, ng / cg, floor_us,
             100.0 * floor_us / cg);
      fflush(stdout);
      if (b->csv)
        fprintf(b->csv, "allgather_rmsnorm,%s,%d,%d,%zu,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,,,,,\n",
                collgen__dtype_name(b->dt), b->n, g, ob, (long long)a.rows, (long long)a.cols, ce,
                cg, ne, ng, (double)ob / (cg * 1e3), (double)ob / (cg * 1e3) * (g - 1) / g,
                (double)ob / (ng * 1e3) * (g - 1) / g);
      for (int r = 0; r < b->n; ++r) {
        collgen__dev_free(b->comm, r, a.in[r]);
        collgen__dev_free(b->comm, r, a.normed[r]);
        collgen__dev_free(b->comm, r, a.resid[r]);
        collgen__dev_free(b->comm, r, a.gamma[r]);
      }
    }
}

const bench_op bench_op_allgather_rmsnorm = {{{bench_rmsnorm, BENCH_IN_TUNE}}};

/* ---- JIT costs and host overhead ---------------------------------------- */

static void bench_jit(collgen_dtype_t dt) {
  char dir[] = "/tmp/collgen-bench-cache-XXXXXX";
  if (!mkdtemp(dir)) die("mkdtemp", "failed");
  printf("\nJIT path (per spec): cold = generate + NVRTC + write, disk = new generator reading "
         "the entry, memory = same generator again\n");
  for (int op = 0; op < collgen__op_count(); ++op) {
    collgen_shape_t s;
    collgen_shape_init(&s, collgen__op_at(op)->op);
    s.dtype = dt;
    s.cols = 8192;
    collgen_generator_t *g1, *g2;
    collgen_kernel_info_t info;
    collgen_generator_create(&g1, dir);
    collgen_get_kernel(g1, &s, &info);
    double cold = info.milliseconds;
    collgen_generator_create(&g2, dir);
    collgen_get_kernel(g2, &s, &info);
    double disk = info.milliseconds;
    double t0 = collgen__now_ms();
    for (int i = 0; i < 1000; ++i) collgen_get_kernel(g2, &s, &info);
    double mem_us = (collgen__now_ms() - t0); /* ms per 1000 = us per call */
    printf("  %-48s cold %8.2f ms   disk %6.3f ms   memory %6.2f us\n", info.kernel, cold, disk,
           mem_us);
    collgen_generator_destroy(g1);
    collgen_generator_destroy(g2);
  }
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static void bench_host_overhead(bench_t *b) {
  ar_arg a;
  memset(&a, 0, sizeof a);
  a.bytes = 8192;
  a.count = 8192 / esize_of(b);
  a.shape[0] = a.count;
  a.slot = 8192;
  a.nslots = 1;
  for (int r = 0; r < b->n; ++r) {
    collgen__dev_alloc(b->comm, r, 8192, (void **)&a.in[r]);
    collgen__dev_alloc(b->comm, r, 8192, (void **)&a.out[r]);
  }
  launch_collgen_ar(b, &a, 0);
  sync_all(b);
  double per[10];
  for (int k = 0; k < 10; ++k) {
    double t0 = collgen__now_ms();
    for (int i = 0; i < 100; ++i) launch_collgen_ar(b, &a, i);
    per[k] = (collgen__now_ms() - t0) * 10.0; /* us per call */
    sync_all(b);
  }
  qsort(per, 10, sizeof per[0], cmp_double);
  /* The driver's share: the same number of context switches and launches
  ** of a trivial kernel (the plain RMSNorm on one 8-column row), nothing
  ** else. collgen's own host work is the difference. */
  void *x[8], *y[8];
  for (int r = 0; r < b->n; ++r) {
    collgen__dev_alloc(b->comm, r, 4096, &x[r]);
    collgen__dev_alloc(b->comm, r, 4096, &y[r]);
    collgen__dev_fill(b->comm, r, x[r], 0, 4096);
  }
  double raw[10];
  for (int k = 0; k < 10; ++k) {
    double t0 = collgen__now_ms();
    for (int i = 0; i < 100; ++i)
      for (int r = 0; r < b->n; ++r) {
        unsigned long long cols = 16 / esize_of(b);
        float eps = 1e-6f, offset = 1.0f;
        void *args[] = {&x[r], &x[r], &y[r], &cols, &eps, &offset};
        CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
        CU(collgen__cu.cuLaunchKernel(b->rms_fn[r], 1, 1, 1, 32, 1, 1, 0, (CUstream)b->streams[r],
                                      args, NULL));
      }
    raw[k] = (collgen__now_ms() - t0) * 10.0;
    sync_all(b);
  }
  qsort(raw, 10, sizeof raw[0], cmp_double);
  for (int r = 0; r < b->n; ++r) {
    collgen__dev_free(b->comm, r, x[r]);
    collgen__dev_free(b->comm, r, y[r]);
  }
  collgen_comm_info_t info;
  collgen_comm_info(b->comm, &info);
  printf("\nhost overhead per allreduce call (call to last launch returned, %d ranks): %.2f us "
         "(median of 10 x 100 calls)\n", b->n, per[5]);
  printf("  of which the driver floor (%d x cuCtxSetCurrent + cuLaunchKernel of a trivial "
         "kernel): %.2f us; collgen's own work: %.2f us\n", b->n, raw[5], per[5] - raw[5]);
  printf("signal buffer per rank: %zu bytes (one rank per GPU: %zu bytes per GPU)\n",
         info.signal_bytes_per_rank, info.signal_bytes_per_rank);
  for (int r = 0; r < b->n; ++r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
}

/* ---- all_gather ---------------------------------------------------------- */

typedef struct {
  int64_t count, shape[1]; /* elements per rank (equal shards) */
  char *in[8], *out[8];
} ag_arg;

static void launch_collgen_ag(bench_t *b, void *vp, int iter) {
  (void)iter;
  ag_arg *a = vp;
  const int64_t *shapes[8];
  for (int r = 0; r < b->n; ++r) shapes[r] = a->shape;
  int rc = collgen_all_gather(b->comm, b->dt, 1, shapes, (const void *const *)a->in,
                              (void *const *)a->out, b->group, b->streams);
  if (rc != COLLGEN_OK) die("collgen_all_gather", collgen_comm_last_error(b->comm));
}

static void launch_nccl_ag(bench_t *b, void *vp, int iter) {
  (void)iter;
  ag_arg *a = vp;
  NC(ncclGroupStart());
  for (int r = 0; r < b->n; ++r)
    NC(ncclAllGather(a->in[r], a->out[r], (size_t)a->count, nccl_type(b->dt), b->nccl[r],
                     (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
}

/* One call of fn on poisoned outputs, every rank's output against the CPU
** reference (the group's shards, bit for bit); 0 (said) when it differs. */
static int all_gather_ok(bench_t *b, ag_arg *a, launch_fn fn, const char *who) {
  const int g = group_of(b);
  const size_t shard = (size_t)a->count * (size_t)esize_of(b), total = shard * (size_t)g;
  char *host = malloc(shard * (size_t)b->n), *want = malloc(total), *got = malloc(total);
  if (!host || !want || !got) die("all_gather check", "out of memory");
  for (int r = 0; r < b->n; ++r) {
    if (collgen__dev_fill(b->comm, r, a->out[r], 0xff, total) != COLLGEN_OK ||
        collgen__dev_download(b->comm, r, host + shard * (size_t)r, a->in[r], shard) != COLLGEN_OK)
      die("all_gather check", collgen_comm_last_error(b->comm));
  }
  fn(b, a, 0);
  sync_all(b);
  int ok = 1;
  for (int r = 0; ok && r < b->n; ++r) {
    const void *in[8];
    int64_t elems[8];
    for (int k = 0; k < g; ++k) {
      in[k] = host + shard * (size_t)(r / g * g + k);
      elems[k] = a->count;
    }
    collgen__ref_all_gather(b->dt, g, elems, in, want);
    if (collgen__dev_download(b->comm, r, got, a->out[r], total) != COLLGEN_OK)
      die("all_gather check", collgen_comm_last_error(b->comm));
    ok = memcmp(got, want, total) == 0;
    if (!ok) fprintf(stderr, "collgen-bench: all_gather %s: rank %d differs from the CPU reference "
                     "(%zu bytes per rank)\n", who, r, shard);
  }
  free(host);
  free(want);
  free(got);
  return ok;
}

/* all_gather of equal shards against ncclAllGather, gathered sizes 8 KB ..
** max_bytes; busbw as nccl-tests: algbw (gathered bytes / t) * (n-1)/n. */
static void bench_all_gather(bench_t *b, size_t max_bytes) {
  const int g = group_of(b);
  ag_arg a;
  memset(&a, 0, sizeof a);
  FOR_LOCAL(b, r) {
    if (collgen__dev_alloc(b->comm, r, max_bytes / (size_t)g + 16, (void **)&a.in[r]) ||
        collgen__dev_alloc(b->comm, r, max_bytes, (void **)&a.out[r]))
      die("alloc", collgen_comm_last_error(b->comm));
    upload_random(b, r, a.in[r], max_bytes / (size_t)g);
  }
  printf("\nall_gather %s, %d GPUs, groups of %d (us per call, gathered bytes; x_* = NCCL time / "
         "collgen time)\n", collgen__dtype_name(b->dt), b->n, g);
  printf("%10s %10s %10s %9s %9s %10s %10s %8s %8s\n", "bytes", "eager", "graph", "algbw", "busbw",
         "nccl_eag", "nccl_gr", "x_eager", "x_graph");
  for (size_t bytes = 8192; bytes <= max_bytes; bytes *= 4) {
    if (b->quick && bytes != 8192 && bytes != (512u << 10) && bytes != (32u << 20) &&
        bytes != (512u << 20))
      continue;
    a.count = a.shape[0] = (int64_t)(bytes / (size_t)g / (size_t)esize_of(b));
    if (!all_gather_ok(b, &a, launch_collgen_ag, "collgen")) exit(1);
    const int batch = batch_for(bytes);
    double ce = time_calls(b, launch_collgen_ag, &a, batch, 0);
    double cg = time_calls(b, launch_collgen_ag, &a, batch, 1);
    double ne = NAN, ng = NAN;
    if (!b->no_nccl && all_gather_ok(b, &a, launch_nccl_ag, "baseline (NCCL)")) {
      ne = time_calls(b, launch_nccl_ag, &a, batch, 0);
      ng = time_calls(b, launch_nccl_ag, &a, batch, 1);
    }
    const double algbw = (double)bytes / (cg * 1e3), busbw = algbw * (g - 1) / g;
    const double nbus = (double)bytes / (ng * 1e3) * (g - 1) / g;
    printf("%10zu %10.2f %10.2f %9.1f %9.1f %10.2f %10.2f %8.2f %8.2f\n", bytes, ce, cg, algbw,
           busbw, ne, ng, ne / ce, ng / cg);
    fflush(stdout);
    if (b->csv)
      fprintf(b->csv, "all_gather,%s,%d,%d,%zu,0,0,%.3f,%.3f,%.3f,%.3f,%.2f,%.2f,%.2f,,,,,\n",
              collgen__dtype_name(b->dt), b->n, g, bytes, ce, cg, ne, ng, algbw, busbw, nbus);
  }
  FOR_LOCAL(b, r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
}

const bench_op bench_op_all_gather = {{{bench_all_gather, BENCH_IN_RANKS}}};

/* ---- the sections of every op ------------------------------------------- */

static const bench_op *const ops[] = {
#define BENCH_ENTRY(NAME, value, id, ...) [value] = &bench_op_##id,
    COLLGEN_OP_MAP(BENCH_ENTRY)
#undef BENCH_ENTRY
};

/* Op i's entry (i = 0 .. collgen__op_count() - 1). */
static const bench_op *op_entry(int i) { return ops[collgen__op_at(i)->op]; }

/* Dies unless every op of the catalog has a section, before any GPU work. */
static void check_sections(void) {
  for (int i = 0; i < collgen__op_count(); ++i)
    if (!op_entry(i)->sections[0].run)
      die(collgen__op_at(i)->name, "no section in its bench_op entry (tests/bench/bench.h)");
}

/* Every section of every op, in catalog order, that run `in` has
** (BENCH_IN_*; 0: the default run, which has them all). */
static void run_sections(bench_t *b, unsigned in, size_t max_bytes) {
  for (int i = 0; i < collgen__op_count(); ++i) {
    const bench_op *e = op_entry(i);
    for (int k = 0; k < BENCH_MAX_SECTIONS && e->sections[k].run; ++k)
      if (!in || (e->sections[k].in & in)) e->sections[k].run(b, max_bytes);
  }
}

int main(int argc, char **argv) {
  bench_t b;
  memset(&b, 0, sizeof b);
  size_t max_bytes = 1u << 30;
  const char *csv = NULL;
  int model = 0, floor_only = 0, fp8_only = 0, mapped = 0;
  if (argc == 3 && strcmp(argv[1], "--processes") == 0) { /* before CUDA: it forks */
    int64_t n = 0;
    if (collgen__parse_int(argv[2], 2, 8, &n) != 0) die("--processes", "an integer in 2..8");
    return bench_processes((int)n);
  }
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) csv = argv[++i];
    else if (strcmp(argv[i], "--quick") == 0) b.quick = 1;
    else if (strcmp(argv[i], "--tune") == 0) b.tune = 1;
    else if (strcmp(argv[i], "--model") == 0) model = 1;
    else if (strcmp(argv[i], "--floor") == 0) floor_only = 1;
    else if (strcmp(argv[i], "--fp8") == 0) fp8_only = 1;
    else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
      int64_t n = 0;
      if (collgen__parse_int(argv[++i], 2, 8, &n) != 0) die("--ranks", "an integer in 2..8");
      mapped = (int)n;
    }
    else if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc) {
      if (collgen__parse_dtype(argv[++i], &b.dt) != 0) die("--dtype", "bf16, f16 or f32");
    } else if (strcmp(argv[i], "--group-size") == 0 && i + 1 < argc) {
      int64_t g = 0;
      if (collgen__parse_int(argv[++i], 0, 8, &g) != 0) die("--group-size", "an integer in 0..8");
      b.group = (int)g;
    } else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) {
      int64_t m = 0;
      if (collgen__parse_int(argv[++i], 1, (int64_t)1 << 40, &m) != 0)
        die("--max-bytes", "an integer in 1..2^40");
      max_bytes = (size_t)m;
    } else {
      fprintf(stderr, "usage: collgen-bench [--csv FILE] [--quick] [--tune] [--max-bytes N] "
                      "[--dtype bf16|f16|f32] [--group-size G] [--model] [--floor] [--fp8]\n"
                      "                     [--ranks N]\n"
                      "       collgen-bench --processes N\n");
      return 2;
    }
  }
  check_sections();
  char err[512];
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) die("driver", err);
  int count = 0;
  collgen__cu.cuDeviceGetCount(&count);
  b.n = count > 8 ? 8 : count;
  if (b.n < 1) die("driver", "no GPU");
  collgen_comm_options_t opts;
  collgen_comm_options_init(&opts);
  if (mapped > b.n) { /* several ranks a GPU: no NCCL, small grids */
    b.n = mapped;
    b.no_nccl = 1;
    opts.allow_shared_devices = 1;
    opts.max_blocks = 8;
  }
  int devs[8];
  for (int i = 0; i < b.n; ++i) devs[i] = i % (count > 8 ? 8 : count);
  if (b.group < 0 || (b.group && b.n % b.group)) die("--group-size", "must divide the rank count");
  if (collgen_comm_create(&b.comm, b.n, devs, &opts) != COLLGEN_OK) die("comm", collgen_last_error());
  for (int base = 0; !b.no_nccl && base < b.n; base += group_of(&b)) /* one NCCL communicator per group */
    NC(ncclCommInitAll(b.nccl + base, group_of(&b), devs + base));
  bench_prepare_ranks(&b);
  if (csv) {
    b.csv = fopen(csv, "w");
    if (!b.csv) die("csv", csv);
    fprintf(b.csv, "op,dtype,ngpus,group,bytes,rows,cols,collgen_eager_us,collgen_graph_us,nccl_eager_us,"
                   "nccl_graph_us,algbw_graph_GBs,busbw_graph_GBs,nccl_busbw_graph_GBs,"
                   "collgen_inplace_graph_us,collgen_unfused_graph_us,nccl_sym_eager_us,nccl_sym_graph_us,"
                   "x_best_graph\n");
  }
  int nver = 0;
  ncclGetVersion(&nver);
  if (b.no_nccl) {
    printf("collgen-bench: %d ranks mapped onto %d GPU(s) (grids of at most 8 blocks), no NCCL: "
           "a check of the sections below; the times are not a measure\n", b.n, count);
    run_sections(&b, BENCH_IN_RANKS, max_bytes);
    printf("\ncollgen-bench: done (all results checked against the CPU reference)\n");
    if (b.csv) fclose(b.csv);
    collgen_comm_destroy(b.comm);
    return 0;
  }
  printf("collgen-bench: %d GPU(s) (%s), NCCL %d (symmetric windows: %s), %d trials per point "
         "(median)\n", b.n, b.comm->arch[0], nver, nccl_sym_available() ? "yes" : "n/a", TRIALS);
  if (model || floor_only || fp8_only) { /* only the tables named */
    if (model) bench_model(&b);
    if (floor_only) bench_floor(&b);
    if (fp8_only) run_sections(&b, BENCH_IN_FP8, max_bytes);
  } else if (b.tune) {
    /* Same kernels, grid caps from 16 to 256 blocks: one communicator per
    ** cap (they share the primary contexts, so the streams stay valid). */
    static const int caps[] = {16, 32, 64, 96, 132, 192, 256};
    collgen_comm_t *main_comm = b.comm;
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; ++k) {
      collgen_comm_options_t o;
      collgen_comm_options_init(&o);
      o.max_blocks = caps[k];
      if (collgen_comm_create(&b.comm, b.n, devs, &o) != COLLGEN_OK) die("comm", collgen_last_error());
      printf("\n=== tune: grid cap %d blocks ===", caps[k]);
      run_sections(&b, BENCH_IN_TUNE, 256u << 20);
      collgen_comm_destroy(b.comm);
    }
    b.comm = main_comm;
  } else {
    bench_jit(b.dt);
    bench_host_overhead(&b);
    run_sections(&b, 0, max_bytes);
  }
  if (b.csv) fclose(b.csv);
  for (int r = 0; r < b.n; ++r) ncclCommDestroy(b.nccl[r]);
  collgen_comm_destroy(b.comm);
  printf("\ncollgen-bench: done (all results checked against the CPU reference)\n");
  return 0;
}
