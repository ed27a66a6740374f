/*
** cmd_demo.c -- `collgen demo`, the main job. On a GPU machine it runs
** every op on every visible GPU (up to 8), checks them against the CPU
** reference and prints timings: from one process driving every GPU, or
** with --processes from one process per rank (collgen_comm_init_rank and
** the collgen_rank_* calls; the forking is demo_processes.c's). Every
** process makes every rank's inputs from the same fixed seed, so each can
** check its own outputs against the full reference. Without a GPU it
** generates and compiles the demo's kernels into the cache and says why it
** stops there.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "demo_processes.h"
#include "devbuf.h"
#include "generator.h"
#include "internal.h"
#include "reference.h"
#include "shape.h"

#define AR_ELEMS (16 * 1024 * 1024 + 3) /* odd: exercises the scalar tail */
#define RMS_ROWS 64                     /* per rank; rank 0 gets one more */
#define RMS_COLS 8192
#define RR_ROWS 8                       /* decode tokens per rank: the LL kernel */
#define ITERS 20

static uint64_t rng = 0x9e3779b97f4a7c15ull; /* fixed seed: the demo is reproducible */

static void fill_random(collgen_dtype_t dt, void *p, int64_t n) {
  collgen__ref_fill_random(dt, p, n, &rng);
}

/* No GPU: fetches the demo's kernels through the default cache and says
** what really happened to each (compiled, found, failed; on disk or not).
** Exit 1 if a kernel could not be built or was not stored in a usable
** on-disk cache; a memory-only cache (COLLGEN_CACHE_DISABLE=1, unusable
** directory) is said, and is not an error. */
static int compile_only(const char *why) {
  printf("collgen demo: no GPU found (%s)\n", why);
  printf("collgen demo: generating and compiling the demo kernels into the cache instead\n");
  collgen_generator_t *g;
  int status = collgen_generator_create(&g, NULL);
  if (status != COLLGEN_OK) return cli_failure("demo", status, collgen_last_error());
  const char *dir = collgen__generator_cache_dir(g);
  int built = 0, stored = 0, total = 0;
  /* every op's demo shape, then the FP8 output of the fused residual op */
  for (int op = 0; op <= collgen__op_count(); ++op, ++total) {
    collgen_shape_t s;
    const int fp8 = op == collgen__op_count();
    collgen_shape_init(&s, fp8 ? COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM : collgen__op_at(op)->op);
    s.elems = AR_ELEMS;
    s.rows = s.op == COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM ? RR_ROWS : 2 * RMS_ROWS + 1;
    s.cols = RMS_COLS;
    s.fp8 = fp8 ? COLLGEN_FP8_DYNAMIC : COLLGEN_FP8_NONE;
    collgen_kernel_info_t info;
    int rc = collgen_get_kernel(g, &s, &info);
    if (rc != COLLGEN_OK) {
      fprintf(stderr, "collgen demo: %s: %s\n", collgen_status_name(rc),
              collgen_generator_last_error(g));
      continue;
    }
    built++;
    char where[4600];
    int on_disk = cli_entry_on_disk(dir, info.key, where, sizeof where);
    stored += on_disk;
    printf("  %-58s %6zu B cubin, %3d registers, %d spill bytes, %s, %.1f ms%s%s\n",
           info.kernel, info.cubin_size, info.registers, info.spill_bytes,
           info.cache_hit ? "cached" : "compiled", info.milliseconds,
           on_disk ? "" : "; NOT STORED: ", on_disk ? "" : where);
  }
  if (dir) {
    char note[96] = "; run on a GPU machine to execute them";
    if (built < total)
      snprintf(note, sizeof note, " (%d could not be built: see above)", total - built);
    else if (stored < total)
      snprintf(note, sizeof note, " (%d built but not stored: see above)", built - stored);
    printf("collgen demo: %d of %d demo kernels are in the cache %s%s\n", stored, total, dir, note);
  } else {
    printf("collgen demo: 0 of %d demo kernels are in the cache: it is memory only (%s), so the "
           "%d built here were not kept\n", total,
           collgen__param_cache_disable() ? "COLLGEN_CACHE_DISABLE=1" : "see the warning above",
           built);
  }
  collgen_generator_destroy(g);
  return built < total || (dir && stored < total);
}

typedef struct {
  collgen_comm_t *comm;
  int n;
  collgen_stream_t streams[COLLGEN_MAX_DEVICES];
} demo_ctx;

/* 1 if this process holds rank r's buffers. */
static int local(const demo_ctx *d, int r) { return collgen__comm_is_local(d->comm, r); }

static double time_op(demo_ctx *d, int (*run)(demo_ctx *, void *), void *arg) {
  double best[ITERS];
  for (int i = 0; i < ITERS; ++i) {
    double t0 = collgen__now_ms();
    if (run(d, arg) != COLLGEN_OK || collgen__dev_sync_all(d->comm, d->streams) != COLLGEN_OK)
      return -1;
    best[i] = collgen__now_ms() - t0;
  }
  double m = best[0];
  for (int i = 1; i < ITERS; ++i) if (best[i] < m) m = best[i];
  return m * 1000.0;
}

/* The ops over one bf16 vector per rank: allreduce_sum, or broadcast from
** the last rank (`root` >= 0). */
typedef struct {
  void *in[COLLGEN_MAX_DEVICES], *out[COLLGEN_MAX_DEVICES];
  int64_t shape[1];
  int root;
} ar_args;

static int run_ar(demo_ctx *d, void *vp) {
  ar_args *a = vp;
  const int me = collgen__comm_self(d->comm); /* -1: this process drives every rank */
  if (me >= 0 && a->root >= 0)
    return collgen_rank_broadcast(d->comm, COLLGEN_DTYPE_BF16, 1, a->shape, a->in[me],
                                  a->out[me], a->root, 0, d->streams[me]);
  if (me >= 0)
    return collgen_rank_allreduce_sum(d->comm, COLLGEN_DTYPE_BF16, 1, a->shape, a->in[me],
                                      a->out[me], 0, d->streams[me]);
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < d->n; ++r) shapes[r] = a->shape;
  if (a->root >= 0)
    return collgen_broadcast(d->comm, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)a->in,
                             a->out, a->root, 0, d->streams);
  return collgen_allreduce_sum(d->comm, COLLGEN_DTYPE_BF16, 1, shapes,
                               (const void *const *)a->in, a->out, 0, d->streams);
}

/* allreduce_sum (root -1) or broadcast from `root`, checked and timed. */
static int demo_vector_op(demo_ctx *d, int root) {
  const int64_t n = AR_ELEMS;
  const size_t bytes = (size_t)n * 2;
  ar_args a = {{0}, {0}, {n}, root};
  void *host_in[COLLGEN_MAX_DEVICES] = {0};
  void *expect = malloc(bytes), *got = malloc(bytes);
  int ok = expect && got;
  for (int r = 0; ok && r < d->n; ++r) {
    host_in[r] = malloc(bytes);
    ok = host_in[r] != NULL;
    if (ok) fill_random(COLLGEN_DTYPE_BF16, host_in[r], n);
    if (!ok || !local(d, r)) continue;
    ok = collgen__dev_alloc(d->comm, r, bytes, &a.in[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, bytes, &a.out[r]) == 0 &&
         collgen__dev_upload(d->comm, r, a.in[r], host_in[r], bytes) == 0 &&
         collgen__dev_fill(d->comm, r, a.out[r], 0xff, bytes) == 0;
  }
  int rc = ok ? run_ar(d, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int mismatches = 0;
  if (rc == COLLGEN_OK) {
    if (root >= 0)
      collgen__ref_broadcast(COLLGEN_DTYPE_BF16, n, 1, 0, (const void *const *)&host_in[root],
                             &expect);
    else
      collgen__ref_allreduce(COLLGEN_DTYPE_BF16, n, d->n, (const void *const *)host_in, expect);
    for (int r = 0; r < d->n; ++r) {
      if (!local(d, r)) continue;
      collgen__dev_download(d->comm, r, got, a.out[r], bytes);
      if (memcmp(got, expect, bytes) != 0) mismatches++;
    }
  }
  double us = rc == COLLGEN_OK ? time_op(d, run_ar, &a) : -1;
  if (rc != COLLGEN_OK)
    printf("  %-18s FAILED: %s: %s\n", root >= 0 ? "broadcast" : "allreduce_sum",
           collgen_status_name(rc), collgen_comm_last_error(d->comm));
  else
    printf("  %-18s bf16 x %lld elems on %d rank(s)%s: %s, %.1f us (best of %d, "
           "%.1f GB/s algbw)\n", root >= 0 ? "broadcast" : "allreduce_sum", (long long)n, d->n,
           root >= 0 ? " from the last" : "",
           mismatches ? "MISMATCH vs CPU reference" : "bitwise equal to CPU reference", us,
           ITERS, (double)bytes / (us * 1e3));
  for (int r = 0; r < d->n; ++r) {
    if (local(d, r)) {
      collgen__dev_free(d->comm, r, a.in[r]);
      collgen__dev_free(d->comm, r, a.out[r]);
    }
    free(host_in[r]);
  }
  free(expect);
  free(got);
  return rc != COLLGEN_OK || mismatches;
}

typedef struct {
  void *in[COLLGEN_MAX_DEVICES], *normed[COLLGEN_MAX_DEVICES], *resid[COLLGEN_MAX_DEVICES];
  void *gamma[COLLGEN_MAX_DEVICES];
  int64_t shapes[COLLGEN_MAX_DEVICES][2];
} rms_args;

static int run_rms(demo_ctx *d, void *vp) {
  rms_args *a = vp;
  const int me = collgen__comm_self(d->comm); /* -1: this process drives every rank */
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < d->n; ++r) shapes[r] = a->shapes[r];
  if (me >= 0)
    return collgen_rank_allgather_rmsnorm(d->comm, COLLGEN_DTYPE_BF16, 2, shapes, a->in[me],
                                          a->normed[me], a->resid[me], a->gamma[me], 1e-6f, 1.0f,
                                          0, d->streams[me]);
  return collgen_allgather_rmsnorm(d->comm, COLLGEN_DTYPE_BF16, 2, shapes,
                                   (const void *const *)a->in, a->normed, a->resid,
                                   (const void *const *)a->gamma, 1e-6f, 1.0f, 0, d->streams);
}

static int demo_rmsnorm(demo_ctx *d) {
  rms_args a;
  memset(&a, 0, sizeof a);
  int64_t rows[COLLGEN_MAX_DEVICES], total = 0;
  const void *host_in[COLLGEN_MAX_DEVICES] = {0};
  for (int r = 0; r < d->n; ++r) {
    rows[r] = RMS_ROWS + (r == 0);
    a.shapes[r][0] = rows[r];
    a.shapes[r][1] = RMS_COLS;
    total += rows[r];
  }
  size_t out_bytes = (size_t)(total * RMS_COLS) * 2, gbytes = RMS_COLS * 2;
  void *gamma = malloc(gbytes), *normed = malloc(out_bytes), *resid = malloc(out_bytes);
  void *got = malloc(out_bytes);
  int ok = gamma && normed && resid && got;
  if (ok) fill_random(COLLGEN_DTYPE_BF16, gamma, RMS_COLS);
  for (int r = 0; ok && r < d->n; ++r) {
    size_t b = (size_t)(rows[r] * RMS_COLS) * 2;
    void *h = malloc(b);
    host_in[r] = h;
    ok = h != NULL;
    if (ok) fill_random(COLLGEN_DTYPE_BF16, h, rows[r] * RMS_COLS);
    if (!ok || !local(d, r)) continue;
    ok = collgen__dev_alloc(d->comm, r, b, &a.in[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, out_bytes, &a.normed[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, out_bytes, &a.resid[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, gbytes, &a.gamma[r]) == 0 &&
         collgen__dev_upload(d->comm, r, a.in[r], h, b) == 0 &&
         collgen__dev_upload(d->comm, r, a.gamma[r], gamma, gbytes) == 0 &&
         collgen__dev_fill(d->comm, r, a.normed[r], 0xff, out_bytes) == 0 &&
         collgen__dev_fill(d->comm, r, a.resid[r], 0xff, out_bytes) == 0;
  }
  int rc = ok ? run_rms(d, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int bad = 0;
  if (rc == COLLGEN_OK) {
    collgen__ref_allgather_rmsnorm(COLLGEN_DTYPE_BF16, d->n, rows, RMS_COLS, host_in, gamma,
                                   1e-6f, 1.0f, normed, resid);
    for (int r = 0; r < d->n; ++r) {
      if (!local(d, r)) continue;
      collgen__dev_download(d->comm, r, got, a.resid[r], out_bytes);
      if (memcmp(got, resid, out_bytes) != 0) bad++;
      collgen__dev_download(d->comm, r, got, a.normed[r], out_bytes);
      for (int64_t row = 0; row < total; ++row) {
        double scale = collgen__ref_rmsnorm_scale(COLLGEN_DTYPE_BF16, resid, row, RMS_COLS, 1e-6f);
        for (int64_t c = 0; c < RMS_COLS; ++c) {
          int64_t i = row * RMS_COLS + c;
          double x = collgen__ref_load(COLLGEN_DTYPE_BF16, resid, i);
          double w = collgen__ref_load(COLLGEN_DTYPE_BF16, gamma, c) + 1.0;
          if (!collgen__ref_close(COLLGEN_DTYPE_BF16, collgen__ref_load(COLLGEN_DTYPE_BF16, got, i),
                                  x * scale * w))
            bad++;
        }
      }
    }
  }
  double us = rc == COLLGEN_OK ? time_op(d, run_rms, &a) : -1;
  if (rc != COLLGEN_OK)
    printf("  allgather_rmsnorm  FAILED: %s: %s\n", collgen_status_name(rc),
           collgen_comm_last_error(d->comm));
  else
    printf("  allgather_rmsnorm  bf16 %lld x %d gathered on %d rank(s): %s, %.1f us (best of %d)\n",
           (long long)total, RMS_COLS, d->n,
           bad ? "MISMATCH vs CPU reference" : "matches CPU reference", us, ITERS);
  for (int r = 0; r < d->n; ++r) {
    if (local(d, r)) {
      collgen__dev_free(d->comm, r, a.in[r]);
      collgen__dev_free(d->comm, r, a.normed[r]);
      collgen__dev_free(d->comm, r, a.resid[r]);
      collgen__dev_free(d->comm, r, a.gamma[r]);
    }
    free((void *)host_in[r]);
  }
  free(gamma);
  free(normed);
  free(resid);
  free(got);
  return rc != COLLGEN_OK || bad;
}

typedef struct {
  void *x[COLLGEN_MAX_DEVICES], *res[COLLGEN_MAX_DEVICES], *normed[COLLGEN_MAX_DEVICES];
  void *gamma[COLLGEN_MAX_DEVICES];
  int64_t shape[2];
} rr_args;

/* In place: residual_out is residual_in (the timing loop keeps adding). */
static int run_rr(demo_ctx *d, void *vp) {
  rr_args *a = vp;
  const int me = collgen__comm_self(d->comm); /* -1: this process drives every rank */
  if (me >= 0)
    return collgen_rank_allreduce_residual_rmsnorm(d->comm, COLLGEN_DTYPE_BF16, 2, a->shape,
                                                   a->x[me], a->res[me], a->normed[me], a->res[me],
                                                   a->gamma[me], 1e-6f, 0.0f, 0, d->streams[me]);
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < d->n; ++r) shapes[r] = a->shape;
  return collgen_allreduce_residual_rmsnorm(d->comm, COLLGEN_DTYPE_BF16, 2, shapes,
                                            (const void *const *)a->x, (const void *const *)a->res,
                                            a->normed, a->res, (const void *const *)a->gamma,
                                            1e-6f, 0.0f, 0, d->streams);
}

/* The fused residual op's demo inputs, bf16 RR_ROWS x RMS_COLS: fresh x
** per rank (host copies in host_x[r]), one residual stream `res` and one
** `gamma` (host buffers the caller allocated) replicated on every rank, and
** a poisoned output of out_bytes per rank into out[r]. 1 when all of it
** was allocated and uploaded. */
static int rr_inputs(demo_ctx *d, rr_args *a, const void **host_x, void *res, void *gamma,
                     void **out, size_t out_bytes) {
  const int64_t n = RR_ROWS * RMS_COLS;
  const size_t bytes = (size_t)n * 2, gbytes = RMS_COLS * 2;
  a->shape[0] = RR_ROWS;
  a->shape[1] = RMS_COLS;
  int ok = res && gamma;
  if (ok) {
    fill_random(COLLGEN_DTYPE_BF16, res, n);
    fill_random(COLLGEN_DTYPE_BF16, gamma, RMS_COLS);
  }
  for (int r = 0; ok && r < d->n; ++r) {
    void *h = malloc(bytes);
    host_x[r] = h;
    ok = h != NULL;
    if (ok) fill_random(COLLGEN_DTYPE_BF16, h, n);
    if (!ok || !local(d, r)) continue;
    ok = collgen__dev_alloc(d->comm, r, bytes, &a->x[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, bytes, &a->res[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, out_bytes, &out[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, gbytes, &a->gamma[r]) == 0 &&
         collgen__dev_upload(d->comm, r, a->x[r], h, bytes) == 0 &&
         collgen__dev_upload(d->comm, r, a->res[r], res, bytes) == 0 &&
         collgen__dev_upload(d->comm, r, a->gamma[r], gamma, gbytes) == 0 &&
         collgen__dev_fill(d->comm, r, out[r], 0xff, out_bytes) == 0;
  }
  return ok;
}

/* Frees what rr_inputs allocated (and out[r]). */
static void rr_free(demo_ctx *d, rr_args *a, const void **host_x, void **out) {
  for (int r = 0; r < d->n; ++r) {
    if (local(d, r)) {
      collgen__dev_free(d->comm, r, a->x[r]);
      collgen__dev_free(d->comm, r, a->res[r]);
      collgen__dev_free(d->comm, r, out[r]);
      collgen__dev_free(d->comm, r, a->gamma[r]);
    }
    free((void *)host_x[r]);
  }
}

/* How many of `rows` x RMS_COLS bf16 normed values `got` are not within
** collgen__ref_close of the RMSNorm of residual rows `res` (eps 1e-6,
** weight offset 0). */
static int normed_wrong(const void *res, const void *got, const void *gamma, int64_t rows) {
  const collgen_dtype_t bf = COLLGEN_DTYPE_BF16;
  int bad = 0;
  for (int64_t row = 0; row < rows; ++row) {
    double scale = collgen__ref_rmsnorm_scale(bf, res, row, RMS_COLS, 1e-6f);
    for (int64_t c = 0; c < RMS_COLS; ++c) {
      int64_t i = row * RMS_COLS + c;
      double exact = collgen__ref_load(bf, res, i) * scale * collgen__ref_load(bf, gamma, c);
      bad += !collgen__ref_close(bf, collgen__ref_load(bf, got, i), exact);
    }
  }
  return bad;
}

static int demo_residual_rmsnorm(demo_ctx *d) {
  const collgen_dtype_t bf = COLLGEN_DTYPE_BF16;
  const size_t bytes = (size_t)RR_ROWS * RMS_COLS * 2, gbytes = RMS_COLS * 2;
  rr_args a;
  memset(&a, 0, sizeof a);
  const void *host_x[COLLGEN_MAX_DEVICES] = {0};
  void *res = malloc(bytes), *gamma = malloc(gbytes), *want_r = malloc(bytes);
  void *want_n = malloc(bytes), *got = malloc(bytes);
  int ok = want_r && want_n && got && rr_inputs(d, &a, host_x, res, gamma, a.normed, bytes);
  int rc = ok ? run_rr(d, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int bad = 0;
  if (rc == COLLGEN_OK) {
    collgen__ref_allreduce_residual_rmsnorm(bf, d->n, RR_ROWS, RMS_COLS, host_x, res, gamma, 1e-6f,
                                            0.0f, want_n, want_r);
    for (int r = 0; r < d->n; ++r) {
      if (!local(d, r)) continue;
      collgen__dev_download(d->comm, r, got, a.res[r], bytes);
      bad += memcmp(got, want_r, bytes) != 0;
      collgen__dev_download(d->comm, r, got, a.normed[r], bytes);
      bad += normed_wrong(want_r, got, gamma, RR_ROWS);
    }
  }
  double us = rc == COLLGEN_OK ? time_op(d, run_rr, &a) : -1;
  if (rc != COLLGEN_OK)
    printf("  residual_rmsnorm   FAILED: %s: %s\n", collgen_status_name(rc),
           collgen_comm_last_error(d->comm));
  else
    printf("  residual_rmsnorm   bf16 %d x %d allreduce + residual + RMSNorm on %d rank(s): %s, "
           "%.1f us (best of %d)\n", RR_ROWS, RMS_COLS, d->n,
           bad ? "MISMATCH vs CPU reference" : "matches CPU reference", us, ITERS);
  rr_free(d, &a, host_x, a.normed);
  free(res);
  free(gamma);
  free(want_r);
  free(want_n);
  free(got);
  return rc != COLLGEN_OK || bad;
}

typedef struct {
  rr_args rr;           /* x, residual (in place), gamma; rr.normed unused */
  void *q[COLLGEN_MAX_DEVICES];
  float *scales[COLLGEN_MAX_DEVICES];
} fp8_args;

/* In place, as run_rr; normed as e4m3 with a scale per row. */
static int run_fp8(demo_ctx *d, void *vp) {
  fp8_args *a = vp;
  const int me = collgen__comm_self(d->comm); /* -1: this process drives every rank */
  if (me >= 0)
    return collgen_rank_allreduce_residual_rmsnorm_fp8(
        d->comm, COLLGEN_DTYPE_BF16, 2, a->rr.shape, a->rr.x[me], a->rr.res[me], a->q[me],
        a->scales[me], a->rr.res[me], a->rr.gamma[me], 1e-6f, 0.0f, COLLGEN_FP8_DYNAMIC, 0.0f, 0,
        d->streams[me]);
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < d->n; ++r) shapes[r] = a->rr.shape;
  return collgen_allreduce_residual_rmsnorm_fp8(
      d->comm, COLLGEN_DTYPE_BF16, 2, shapes, (const void *const *)a->rr.x,
      (const void *const *)a->rr.res, a->q, a->scales, a->rr.res,
      (const void *const *)a->rr.gamma, 1e-6f, 0.0f, COLLGEN_FP8_DYNAMIC, 0.0f, 0, d->streams);
}

/* The FP8 output of the fused residual op, checked against the reference
** (collgen__ref_fp8_row_ok) from the rank's own residual_out, which must
** be the reference's bit for bit. GPUs older than sm_89 skip it. */
static int demo_residual_rmsnorm_fp8(demo_ctx *d) {
  const collgen_dtype_t bf = COLLGEN_DTYPE_BF16;
  const int64_t n = RR_ROWS * RMS_COLS;
  const size_t bytes = (size_t)n * 2, gbytes = RMS_COLS * 2;
  fp8_args a;
  memset(&a, 0, sizeof a);
  const void *host_x[COLLGEN_MAX_DEVICES] = {0};
  void *res = malloc(bytes), *gamma = malloc(gbytes), *want_r = malloc(bytes);
  uint8_t *want_q = malloc((size_t)n), *q = malloc((size_t)n);
  float scales[RR_ROWS], want_s[RR_ROWS];
  int ok = want_r && want_q && q && rr_inputs(d, &a.rr, host_x, res, gamma, a.q, (size_t)n);
  for (int r = 0; ok && r < d->n; ++r)
    ok = !local(d, r) ||
         (collgen__dev_alloc(d->comm, r, sizeof scales, (void **)&a.scales[r]) == 0 &&
          collgen__dev_fill(d->comm, r, a.scales[r], 0xff, sizeof scales) == 0);
  int rc = ok ? run_fp8(d, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int bad = 0;
  if (rc == COLLGEN_OK) {
    /* Rows are judged by collgen__ref_fp8_row_ok, not by want_q: near an e4m3
    ** rounding boundary the kernels may round the other way. res, consumed
    ** here, then receives each rank's residual_out. */
    collgen__ref_allreduce_residual_rmsnorm_fp8(bf, d->n, RR_ROWS, RMS_COLS, host_x, res, gamma,
                                                1e-6f, 0.0f, COLLGEN_FP8_DYNAMIC, 0.0f, want_q,
                                                want_s, want_r);
    for (int r = 0; r < d->n; ++r) {
      if (!local(d, r)) continue;
      collgen__dev_download(d->comm, r, res, a.rr.res[r], bytes);
      bad += memcmp(res, want_r, bytes) != 0;
      collgen__dev_download(d->comm, r, q, a.q[r], (size_t)n);
      collgen__dev_download(d->comm, r, scales, a.scales[r], sizeof scales);
      for (int64_t row = 0; row < RR_ROWS; ++row) {
        int64_t col;
        bad += !collgen__ref_fp8_row_ok(bf, want_r, gamma, row, RMS_COLS, 1e-6f, 0.0f,
                                        COLLGEN_FP8_DYNAMIC, 0.0f, q + row * RMS_COLS,
                                        scales[row], &col);
      }
    }
  }
  double us = rc == COLLGEN_OK ? time_op(d, run_fp8, &a) : -1;
  if (rc == COLLGEN_ERR_UNSUPPORTED)
    printf("  residual_rmsnorm   FP8 output skipped: %s\n", collgen_comm_last_error(d->comm));
  else if (rc != COLLGEN_OK)
    printf("  residual_rmsnorm   FP8 FAILED: %s: %s\n", collgen_status_name(rc),
           collgen_comm_last_error(d->comm));
  else
    printf("  residual_rmsnorm   bf16 %d x %d, normed as e4m3 with row scales, on %d rank(s): %s, "
           "%.1f us (best of %d)\n", RR_ROWS, RMS_COLS, d->n,
           bad ? "MISMATCH vs CPU reference" : "matches CPU reference", us, ITERS);
  rr_free(d, &a.rr, host_x, a.q);
  for (int r = 0; r < d->n; ++r)
    if (local(d, r)) collgen__dev_free(d->comm, r, a.scales[r]);
  free(res);
  free(gamma);
  free(want_r);
  free(want_q);
  free(q);
  return (rc != COLLGEN_OK && rc != COLLGEN_ERR_UNSUPPORTED) || bad;
}

#define AG_ELEMS (1024 * 1024 + 5) /* bf16 per rank, rank r r more: uneven, odd tails */

typedef struct {
  void *in[COLLGEN_MAX_DEVICES], *out[COLLGEN_MAX_DEVICES];
  int64_t shapes[COLLGEN_MAX_DEVICES][1];
} ag_args;

static int run_ag(demo_ctx *d, void *vp) {
  ag_args *a = vp;
  const int me = collgen__comm_self(d->comm); /* -1: this process drives every rank */
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < d->n; ++r) shapes[r] = a->shapes[r];
  if (me >= 0)
    return collgen_rank_all_gather(d->comm, COLLGEN_DTYPE_BF16, 1, shapes, a->in[me], a->out[me],
                                   0, d->streams[me]);
  return collgen_all_gather(d->comm, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)a->in,
                            a->out, 0, d->streams);
}

/* all_gather of uneven bf16 shards, bit for bit against the reference. */
static int demo_all_gather(demo_ctx *d) {
  ag_args a;
  memset(&a, 0, sizeof a);
  int64_t elems[COLLGEN_MAX_DEVICES], total = 0;
  const void *host_in[COLLGEN_MAX_DEVICES] = {0};
  for (int r = 0; r < d->n; ++r) {
    elems[r] = a.shapes[r][0] = AG_ELEMS + r;
    total += elems[r];
  }
  const size_t out_bytes = (size_t)total * 2;
  void *want = malloc(out_bytes), *got = malloc(out_bytes);
  int ok = want && got;
  for (int r = 0; ok && r < d->n; ++r) {
    const size_t b = (size_t)elems[r] * 2;
    void *h = malloc(b);
    host_in[r] = h;
    ok = h != NULL;
    if (ok) fill_random(COLLGEN_DTYPE_BF16, h, elems[r]);
    if (!ok || !local(d, r)) continue;
    ok = collgen__dev_alloc(d->comm, r, b, &a.in[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, out_bytes, &a.out[r]) == 0 &&
         collgen__dev_upload(d->comm, r, a.in[r], h, b) == 0 &&
         collgen__dev_fill(d->comm, r, a.out[r], 0xff, out_bytes) == 0;
  }
  int rc = ok ? run_ag(d, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int bad = 0;
  if (rc == COLLGEN_OK) {
    collgen__ref_all_gather(COLLGEN_DTYPE_BF16, d->n, elems, host_in, want);
    for (int r = 0; r < d->n; ++r)
      if (local(d, r)) {
        collgen__dev_download(d->comm, r, got, a.out[r], out_bytes);
        bad += memcmp(got, want, out_bytes) != 0;
      }
  }
  double us = rc == COLLGEN_OK ? time_op(d, run_ag, &a) : -1;
  if (rc != COLLGEN_OK)
    printf("  all_gather         FAILED: %s: %s\n", collgen_status_name(rc),
           collgen_comm_last_error(d->comm));
  else
    printf("  all_gather         bf16 %lld elements gathered on %d rank(s): %s, %.1f us (best of "
           "%d)\n", (long long)total, d->n,
           bad ? "MISMATCH vs CPU reference" : "matches CPU reference", us, ITERS);
  for (int r = 0; r < d->n; ++r) {
    if (local(d, r)) {
      collgen__dev_free(d->comm, r, a.in[r]);
      collgen__dev_free(d->comm, r, a.out[r]);
    }
    free((void *)host_in[r]);
  }
  free(want);
  free(got);
  return rc != COLLGEN_OK || bad;
}

/* reduce_scatter_sum over [RS_ROWS, RMS_COLS] bf16: uneven chunks (129
** rows), each rank's checked bit for bit against the reference. */
#define RS_ROWS (2 * RMS_ROWS + 1)

typedef struct {
  void *in[COLLGEN_MAX_DEVICES], *out[COLLGEN_MAX_DEVICES];
  int64_t shape[2];
} rs_args;

static int run_rs(demo_ctx *d, void *vp) {
  rs_args *a = vp;
  const int me = collgen__comm_self(d->comm);
  if (me >= 0)
    return collgen_rank_reduce_scatter_sum(d->comm, COLLGEN_DTYPE_BF16, 2, a->shape, a->in[me],
                                           a->out[me], 0, d->streams[me]);
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < d->n; ++r) shapes[r] = a->shape;
  return collgen_reduce_scatter_sum(d->comm, COLLGEN_DTYPE_BF16, 2, shapes,
                                    (const void *const *)a->in, a->out, 0, d->streams);
}

static int demo_reduce_scatter(demo_ctx *d) {
  rs_args a = {{0}, {0}, {RS_ROWS, RMS_COLS}};
  const size_t bytes = (size_t)RS_ROWS * RMS_COLS * 2;
  void *host_in[COLLGEN_MAX_DEVICES] = {0};
  void *expect = malloc(bytes), *got = malloc(bytes);
  int ok = expect && got;
  for (int r = 0; ok && r < d->n; ++r) {
    host_in[r] = malloc(bytes);
    ok = host_in[r] != NULL;
    if (ok) fill_random(COLLGEN_DTYPE_BF16, host_in[r], (int64_t)RS_ROWS * RMS_COLS);
    if (!ok || !local(d, r)) continue;
    ok = collgen__dev_alloc(d->comm, r, bytes, &a.in[r]) == 0 &&
         collgen__dev_alloc(d->comm, r, bytes, &a.out[r]) == 0 &&
         collgen__dev_upload(d->comm, r, a.in[r], host_in[r], bytes) == 0 &&
         collgen__dev_fill(d->comm, r, a.out[r], 0xff, bytes) == 0;
  }
  int rc = ok ? run_rs(d, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int mismatches = 0;
  for (int r = 0; rc == COLLGEN_OK && r < d->n; ++r) {
    if (!local(d, r)) continue;
    collgen__ref_reduce_scatter_sum(COLLGEN_DTYPE_BF16, RS_ROWS, RMS_COLS, d->n, r,
                                    (const void *const *)host_in, expect);
    collgen__dev_download(d->comm, r, got, a.out[r], bytes);
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(RS_ROWS, d->n, r, &start, &count);
    if (memcmp(got, expect, (size_t)count * RMS_COLS * 2) != 0) mismatches++;
  }
  double us = rc == COLLGEN_OK ? time_op(d, run_rs, &a) : -1;
  if (rc != COLLGEN_OK)
    printf("  reduce_scatter_sum FAILED: %s: %s\n", collgen_status_name(rc),
           collgen_comm_last_error(d->comm));
  else
    printf("  reduce_scatter_sum bf16 %d x %d on %d rank(s): %s, %.1f us (best of %d)\n",
           RS_ROWS, RMS_COLS, d->n,
           mismatches ? "MISMATCH vs CPU reference" : "bitwise equal to CPU reference", us,
           ITERS);
  for (int r = 0; r < d->n; ++r) {
    if (local(d, r)) {
      collgen__dev_free(d->comm, r, a.in[r]);
      collgen__dev_free(d->comm, r, a.out[r]);
    }
    free(host_in[r]);
  }
  free(expect);
  free(got);
  return rc != COLLGEN_OK || mismatches;
}

/* reduce_scatter_rmsnorm over rr_inputs' buffers, residual in place: rank
** r's chunk of the RR_ROWS rows (residual_in: the first rows of `res`). */
static int run_rs_rmsnorm(demo_ctx *d, void *vp) {
  rr_args *a = vp;
  const int me = collgen__comm_self(d->comm);
  if (me >= 0)
    return collgen_rank_reduce_scatter_rmsnorm(d->comm, COLLGEN_DTYPE_BF16, 2, a->shape, a->x[me],
                                               a->res[me], a->normed[me], a->res[me],
                                               a->gamma[me], 1e-6f, 0.0f, 0, d->streams[me]);
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int r = 0; r < d->n; ++r) shapes[r] = a->shape;
  return collgen_reduce_scatter_rmsnorm(d->comm, COLLGEN_DTYPE_BF16, 2, shapes,
                                        (const void *const *)a->x, (const void *const *)a->res,
                                        a->normed, a->res, (const void *const *)a->gamma, 1e-6f,
                                        0.0f, 0, d->streams);
}

static int demo_reduce_scatter_rmsnorm(demo_ctx *d) {
  const collgen_dtype_t bf = COLLGEN_DTYPE_BF16;
  const size_t bytes = (size_t)RR_ROWS * RMS_COLS * 2, gbytes = RMS_COLS * 2;
  rr_args a;
  memset(&a, 0, sizeof a);
  const void *host_x[COLLGEN_MAX_DEVICES] = {0};
  void *res = malloc(bytes), *gamma = malloc(gbytes), *want_r = malloc(bytes);
  void *want_n = malloc(bytes), *got = malloc(bytes);
  int ok = want_r && want_n && got && rr_inputs(d, &a, host_x, res, gamma, a.normed, bytes);
  int rc = ok ? run_rs_rmsnorm(d, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int bad = 0;
  for (int r = 0; rc == COLLGEN_OK && r < d->n; ++r) {
    if (!local(d, r)) continue;
    int64_t start = 0, count = 0;
    collgen__scatter_chunk(RR_ROWS, d->n, r, &start, &count);
    const size_t mine = (size_t)(count * RMS_COLS) * 2;
    collgen__ref_reduce_scatter_rmsnorm(bf, d->n, r, RR_ROWS, RMS_COLS, host_x, res, gamma, 1e-6f,
                                        0.0f, want_n, want_r);
    collgen__dev_download(d->comm, r, got, a.res[r], mine);
    bad += memcmp(got, want_r, mine) != 0;
    collgen__dev_download(d->comm, r, got, a.normed[r], mine);
    bad += normed_wrong(want_r, got, gamma, count);
  }
  double us = rc == COLLGEN_OK ? time_op(d, run_rs_rmsnorm, &a) : -1;
  if (rc != COLLGEN_OK)
    printf("  rs_rmsnorm         FAILED: %s: %s\n", collgen_status_name(rc),
           collgen_comm_last_error(d->comm));
  else
    printf("  rs_rmsnorm         bf16 %d x %d reduce-scatter + residual + RMSNorm on %d rank(s): "
           "%s, %.1f us (best of %d)\n", RR_ROWS, RMS_COLS, d->n,
           bad ? "MISMATCH vs CPU reference" : "matches CPU reference", us, ITERS);
  rr_free(d, &a, host_x, a.normed);
  free(res), free(gamma), free(want_r), free(want_n), free(got);
  return rc != COLLGEN_OK || bad;
}

/* Every op once, checked and timed; nonzero if any failed. */
static int demo_ops(demo_ctx *d) {
  int failed = demo_vector_op(d, -1);
  failed |= demo_rmsnorm(d);
  failed |= demo_residual_rmsnorm(d);
  failed |= demo_residual_rmsnorm_fp8(d);
  failed |= demo_vector_op(d, d->n - 1); /* broadcast */
  failed |= demo_all_gather(d);
  failed |= demo_reduce_scatter(d);
  failed |= demo_reduce_scatter_rmsnorm(d);
  return failed;
}

/* One rank of `collgen demo --processes`, in its own process (the
** demo_rank_fn of demo_processes.h). */
static int demo_rank(int nranks, const collgen_unique_id_t *id, int rank, int device) {
  demo_ctx d;
  memset(&d, 0, sizeof d);
  d.n = nranks;
  int rc = collgen_comm_init_rank(&d.comm, nranks, id, rank, device, NULL);
  if (rc != COLLGEN_OK) {
    printf("  rank %d: collgen_comm_init_rank: %s: %s\n", rank, collgen_status_name(rc),
           collgen_last_error());
    return 1;
  }
  int failed = collgen__dev_stream_create(d.comm, rank, &d.streams[rank]) != COLLGEN_OK;
  printf("rank %d of %d on GPU %d (process %ld):\n", rank, nranks, device, (long)getpid());
  if (!failed) failed = demo_ops(&d);
  collgen__dev_stream_destroy(d.comm, rank, d.streams[rank]);
  collgen_comm_destroy(d.comm);
  return failed;
}

int cmd_demo(int argc, char **argv) {
  int processes = 0;
  int prc = cli_demo_parse(argc, argv, &processes);
  if (prc == CLI_HELP) {
    puts("usage: collgen demo [--processes [N]]\n"
         "Runs every op on all visible GPUs (up to 8), checks them against the\n"
         "CPU reference and prints timings. One process drives every GPU, or with\n"
         "--processes one process per rank: N ranks (2..8; default one per visible\n"
         "GPU, at least 2) mapped round robin onto the GPUs, each creating its rank\n"
         "with collgen_comm_init_rank and calling the collgen_rank_* functions.\n"
         "Without a GPU, compiles the demo kernels into the cache instead.");
    return 0;
  }
  if (prc != 0) return prc;
  if (processes != 0) return demo_processes(processes, demo_rank, compile_only);
  char err[512];
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) return compile_only(err);
  int count = 0;
  collgen__cu.cuDeviceGetCount(&count);
  if (count < 1) return compile_only("the driver reports 0 devices");
  demo_ctx d;
  memset(&d, 0, sizeof d);
  d.n = count > COLLGEN_MAX_DEVICES ? COLLGEN_MAX_DEVICES : count;
  int devices[COLLGEN_MAX_DEVICES];
  for (int i = 0; i < d.n; ++i) devices[i] = i;
  int rc = collgen_comm_create(&d.comm, d.n, devices, NULL);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "collgen demo: %s: %s\n", collgen_status_name(rc), collgen_last_error());
    return 1;
  }
  for (int r = 0; r < d.n; ++r) collgen__dev_stream_create(d.comm, r, &d.streams[r]);
  printf("collgen demo: %d GPU(s), one rank each, in this process\n", d.n);
  int failed = demo_ops(&d);
  for (int r = 0; r < d.n; ++r) collgen__dev_stream_destroy(d.comm, r, d.streams[r]);
  collgen_comm_destroy(d.comm);
  printf("collgen demo: %s\n", failed ? "FAILED" : "all checks passed");
  return failed;
}
