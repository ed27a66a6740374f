/*
** ab_latency.c -- collgen-only latency of a few calls, for A/B comparisons
** of two builds of collgen on the same GPU (e.g. a kernel change that must
** cost nothing). No NCCL, so it runs on one GPU too: with one GPU visible,
** both ranks map onto it (grids capped at 8 blocks so both stay resident).
**
** Each case is checked once against the CPU reference, then timed as
** CUDA-graph replay: CALLS calls captured per rank, REPLAYS replays, the
** median per call of the slowest rank. Prints one line per case:
**   ab <case> <microseconds>
** It uses only the public API and the test support library, so the same
** source builds against an older tree (tests/bench/ab-compare.sh).
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h" /* white-box: the communicator's fields */
#include "devbuf.h"
#include "reference.h"

#define CALLS 50
#define REPLAYS 21

static void die(const char *what, const char *msg) {
  fprintf(stderr, "ab_latency: %s: %s\n", what, msg);
  exit(1);
}

#define CU(call)                                                                \
  do {                                                                          \
    if ((call) != CUDA_SUCCESS) die(#call, "CUDA call failed");                 \
  } while (0)

typedef struct {
  collgen_comm_t *c;
  collgen_stream_t s[2];
  void *in[2], *out[2], *res[2], *gam[2];
} ab_t;

/* One call of case k: allreduce of `n` bf16 elements (rows == 0), or
** allgather_rmsnorm of `rows` rows per rank x 4096. */
static int call(ab_t *a, int64_t n, int64_t rows) {
  if (rows == 0) {
    int64_t shape[1] = {n};
    const int64_t *shapes[2] = {shape, shape};
    return collgen_allreduce_sum(a->c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)a->in,
                                 a->out, 0, a->s);
  }
  int64_t shard[2] = {rows, 4096};
  const int64_t *shards[2] = {shard, shard};
  return collgen_allgather_rmsnorm(a->c, COLLGEN_DTYPE_BF16, 2, shards, (const void *const *)a->in,
                                   a->out, a->res, (const void *const *)a->gam, 1e-6f, 0.0f, 0,
                                   a->s);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static double graph_us(ab_t *a, int64_t n, int64_t rows) {
  CUgraph g[2];
  CUgraphExec ge[2];
  CUevent start[2], stop[2];
  for (int r = 0; r < 2; ++r) {
    CU(collgen__cu.cuCtxSetCurrent(a->c->ctx[r]));
    CU(collgen__cu.cuEventCreate(&start[r], 0));
    CU(collgen__cu.cuEventCreate(&stop[r], 0));
    CU(collgen__cu.cuStreamBeginCapture((CUstream)a->s[r], CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  }
  for (int i = 0; i < CALLS; ++i)
    if (call(a, n, rows) != COLLGEN_OK) die("capture", collgen_comm_last_error(a->c));
  for (int r = 0; r < 2; ++r) {
    CU(collgen__cu.cuCtxSetCurrent(a->c->ctx[r]));
    CU(collgen__cu.cuStreamEndCapture((CUstream)a->s[r], &g[r]));
  }
  for (int r = 0; r < 2; ++r) {
    CU(collgen__cu.cuCtxSetCurrent(a->c->ctx[r]));
    CU(collgen__cu.cuGraphInstantiate(&ge[r], g[r], 0));
  }
  double t[REPLAYS];
  for (int k = -3; k < REPLAYS; ++k) {
    for (int r = 0; r < 2; ++r) {
      CU(collgen__cu.cuCtxSetCurrent(a->c->ctx[r]));
      CU(collgen__cu.cuEventRecord(start[r], (CUstream)a->s[r]));
      CU(collgen__cu.cuGraphLaunch(ge[r], (CUstream)a->s[r]));
      CU(collgen__cu.cuEventRecord(stop[r], (CUstream)a->s[r]));
    }
    if (collgen__dev_sync_all(a->c, a->s) != COLLGEN_OK) die("replay", collgen_comm_last_error(a->c));
    double worst = 0;
    for (int r = 0; r < 2; ++r) {
      float ms = 0;
      CU(collgen__cu.cuEventElapsedTime(&ms, start[r], stop[r]));
      if (ms > worst) worst = ms;
    }
    if (k >= 0) t[k] = worst * 1000.0 / CALLS;
  }
  for (int r = 0; r < 2; ++r) {
    CU(collgen__cu.cuCtxSetCurrent(a->c->ctx[r]));
    collgen__cu.cuGraphExecDestroy(ge[r]);
    collgen__cu.cuGraphDestroy(g[r]);
    collgen__cu.cuEventDestroy(start[r]);
    collgen__cu.cuEventDestroy(stop[r]);
  }
  qsort(t, REPLAYS, sizeof t[0], cmp_double);
  return t[REPLAYS / 2];
}

/* Checks the allreduce result of one eager call against the reference. */
static void check_allreduce(ab_t *a, int64_t n) {
  size_t bytes = (size_t)n * 2;
  void *host[2], *want = malloc(bytes), *got = malloc(bytes);
  uint64_t state = 12345;
  for (int r = 0; r < 2; ++r) {
    host[r] = malloc(bytes);
    collgen__ref_fill_random(COLLGEN_DTYPE_BF16, host[r], n, &state);
    if (collgen__dev_upload(a->c, r, a->in[r], host[r], bytes) != COLLGEN_OK) die("upload", "");
    if (collgen__dev_fill(a->c, r, a->out[r], 0xff, bytes) != COLLGEN_OK) die("fill", "");
  }
  if (call(a, n, 0) != COLLGEN_OK || collgen__dev_sync_all(a->c, a->s) != COLLGEN_OK)
    die("check call", collgen_comm_last_error(a->c));
  collgen__ref_allreduce(COLLGEN_DTYPE_BF16, n, 2, (const void *const *)host, want);
  for (int r = 0; r < 2; ++r) {
    if (collgen__dev_download(a->c, r, got, a->out[r], bytes) != COLLGEN_OK) die("download", "");
    if (memcmp(got, want, bytes) != 0) die("check", "allreduce result differs from the reference");
    free(host[r]);
  }
  free(want);
  free(got);
}

/* Checks the allgather_rmsnorm result (4096 cols) of one eager call: the
** gathered residual exactly, normed within the reference's bound. */
static void check_rmsnorm(ab_t *a, int64_t rows) {
  const int64_t cols = 4096, shard = rows * cols, total = 2 * shard;
  void *host[2], *gamma = malloc((size_t)cols * 2), *gathered = malloc((size_t)total * 2);
  void *want = malloc((size_t)total * 2), *got = malloc((size_t)total * 2);
  uint64_t state = 6789;
  collgen__ref_fill_random(COLLGEN_DTYPE_BF16, gamma, cols, &state);
  for (int r = 0; r < 2; ++r) {
    host[r] = malloc((size_t)shard * 2);
    collgen__ref_fill_random(COLLGEN_DTYPE_BF16, host[r], shard, &state);
    if (collgen__dev_upload(a->c, r, a->in[r], host[r], (size_t)shard * 2) != COLLGEN_OK ||
        collgen__dev_upload(a->c, r, a->gam[r], gamma, (size_t)cols * 2) != COLLGEN_OK)
      die("upload", "");
    collgen__dev_fill(a->c, r, a->out[r], 0xff, (size_t)total * 2);
    collgen__dev_fill(a->c, r, a->res[r], 0xff, (size_t)total * 2);
  }
  if (call(a, 0, rows) != COLLGEN_OK || collgen__dev_sync_all(a->c, a->s) != COLLGEN_OK)
    die("check call", collgen_comm_last_error(a->c));
  const int64_t shard_rows[2] = {rows, rows};
  collgen__ref_allgather_rmsnorm(COLLGEN_DTYPE_BF16, 2, shard_rows, cols, (const void *const *)host,
                                 gamma, 1e-6f, 0.0f, want, gathered);
  for (int r = 0; r < 2; ++r) {
    if (collgen__dev_download(a->c, r, got, a->res[r], (size_t)total * 2) != COLLGEN_OK) die("download", "");
    if (memcmp(got, gathered, (size_t)total * 2) != 0) die("check", "gathered residual differs");
    if (collgen__dev_download(a->c, r, got, a->out[r], (size_t)total * 2) != COLLGEN_OK) die("download", "");
    for (int64_t i = 0; i < total; ++i) {
      double row_scale = collgen__ref_rmsnorm_scale(COLLGEN_DTYPE_BF16, gathered, i / cols, cols, 1e-6f);
      double exact = collgen__ref_load(COLLGEN_DTYPE_BF16, gathered, i) * row_scale *
                     collgen__ref_load(COLLGEN_DTYPE_BF16, gamma, i % cols);
      if (!collgen__ref_close(COLLGEN_DTYPE_BF16, collgen__ref_load(COLLGEN_DTYPE_BF16, got, i), exact))
        die("check", "normed differs from the reference");
    }
    free(host[r]);
  }
  free(gamma);
  free(gathered);
  free(want);
  free(got);
}

int main(void) {
  int count = 0;
  char err[256];
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) die("driver", err);
  collgen__cu.cuDeviceGetCount(&count);
  if (count < 1) die("devices", "no GPU");
  int devices[2] = {0, count >= 2 ? 1 : 0};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.allow_shared_devices = count < 2;
  o.max_blocks = count < 2 ? 8 : 0;
  ab_t a;
  memset(&a, 0, sizeof a);
  if (collgen_comm_create(&a.c, 2, devices, &o) != COLLGEN_OK) die("comm", collgen_last_error());
  const size_t bytes = 32u << 20;
  for (int r = 0; r < 2; ++r) {
    if (collgen__dev_stream_create(a.c, r, &a.s[r]) != COLLGEN_OK ||
        collgen__dev_alloc(a.c, r, bytes, &a.in[r]) != COLLGEN_OK ||
        collgen__dev_alloc(a.c, r, bytes, &a.out[r]) != COLLGEN_OK ||
        collgen__dev_alloc(a.c, r, bytes, &a.res[r]) != COLLGEN_OK ||
        collgen__dev_alloc(a.c, r, 8192, &a.gam[r]) != COLLGEN_OK)
      die("alloc", collgen_comm_last_error(a.c));
    collgen__dev_fill(a.c, r, a.gam[r], 0x3f, 8192);
  }
  static const struct { const char *name; int64_t n, rows; } cases[] = {
      {"allreduce_8KB", 4096, 0},       {"allreduce_256KB", 131072, 0},
      {"allreduce_1MB", 524288, 0},     {"allreduce_16MB", 8388608, 0},
      {"allgather_rmsnorm_8x4096", 0, 4},
  };
  printf("ab_latency: %d GPU(s), %s\n", count, count >= 2 ? "one rank per GPU" : "both ranks on GPU 0");
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
    if (cases[k].rows == 0) check_allreduce(&a, cases[k].n);
    else check_rmsnorm(&a, cases[k].rows);
    printf("ab %s %.3f\n", cases[k].name, graph_us(&a, cases[k].n, cases[k].rows));
    fflush(stdout);
  }
  for (int r = 0; r < 2; ++r) {
    collgen__dev_free(a.c, r, a.in[r]);
    collgen__dev_free(a.c, r, a.out[r]);
    collgen__dev_free(a.c, r, a.res[r]);
    collgen__dev_free(a.c, r, a.gam[r]);
    collgen__dev_stream_destroy(a.c, r, a.s[r]);
  }
  collgen_comm_destroy(a.c);
  return 0;
}
