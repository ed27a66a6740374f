/*
** test_gpu.c -- allreduce_sum and allgather_rmsnorm on real GPUs against
** the CPU reference, plus what concerns every op (graphs, timeouts, bad
** inputs, waits); the GPU test binary's main() and shared helpers
** (test_gpu.h). allreduce_residual_rmsnorm: test_gpu_residual.c.
**
** Every test makes fresh random inputs, poisons the outputs (0xff: NaN in
** every dtype), runs the op and compares every rank's output with the CPU
** reference: allreduce bit for bit (same f32 order and rounding), the
** gathered residual bit for bit, normed within one output ulp (bf16/f16) or
** 64 ulps (f32), and normed bitwise identical across the ranks of a group.
** With two GPUs the 2-rank cases run one rank per GPU; 4 and 8 ranks map
** several ranks onto each GPU (small grids keep them all resident).
**
** main() returns 77 (ctest: skipped) when no CUDA driver or GPU is present;
** the check runs in a child process so CUDA is never initialized before
** Criterion forks its workers.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collgen.h"
#include "bad_inputs.h"
#include "devbuf.h"
#include "dtype_convert.h"
#include "reference.h"
#include "test_gpu.h"
#include "test_util.h"

const char *cu_name(CUresult r) {
  const char *name = NULL;
  collgen__cu.cuGetErrorName(r, &name);
  return name ? name : "?";
}

int gpu_count(void) {
  char err[256];
  int n = 0;
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) return 0;
  collgen__cu.cuDeviceGetCount(&n);
  return n;
}

/* The rank -> device map for `ranks` ranks over the visible GPUs (at most
** two are used, round robin); sets *shared when a device repeats. */
static void rank_devices(int ranks, int *devices, int *shared) {
  int n = gpu_count();
  cr_assert_gt(n, 0);
  int use = n >= 2 ? 2 : 1;
  for (int r = 0; r < ranks; ++r) devices[r] = r % use;
  *shared = ranks > use;
}

collgen_comm_t *make_comm(int ranks, int max_blocks, int timeout_ms, unsigned mask) {
  int devices[8], shared;
  rank_devices(ranks, devices, &shared);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.allow_shared_devices = shared;
  o.max_blocks = shared ? (max_blocks ? max_blocks : 8) : max_blocks;
  o.timeout_ms = timeout_ms;
  o.launch_mask = mask;
  collgen_comm_t *c = NULL;
  int rc = collgen_comm_create(&c, ranks, devices, &o);
  cr_assert_eq(rc, COLLGEN_OK, "comm_create: %s", collgen_last_error());
  return c;
}

void make_streams(collgen_comm_t *c, collgen_stream_t *s) {
  for (int r = 0; r < c->ndev; ++r)
    cr_assert_eq(collgen__dev_stream_create(c, r, &s[r]), COLLGEN_OK, "%s", c->err);
}

void free_streams(collgen_comm_t *c, collgen_stream_t *s) {
  for (int r = 0; r < c->ndev; ++r) collgen__dev_stream_destroy(c, r, s[r]);
}

/* Fresh data every run: the state is seeded from the time and pid. */
void fill_random(collgen_dtype_t dt, void *p, int64_t n) {
  static uint64_t state;
  while (!state) state = tu_rand();
  collgen__ref_fill_random(dt, p, n, &state);
}

void graph_capture_begin(collgen_comm_t *c, const collgen_stream_t *s) {
  for (int r = 0; r < c->ndev; ++r) {
    collgen__cu.cuCtxSetCurrent(c->ctx[r]);
    CUresult e = collgen__cu.cuStreamBeginCapture((CUstream)s[r], CU_STREAM_CAPTURE_MODE_GLOBAL);
    cr_assert_eq(e, CUDA_SUCCESS, "begin capture rank %d: %s", r, cu_name(e));
  }
}

void graph_capture_end(collgen_comm_t *c, const collgen_stream_t *s, CUgraph *graph,
                       CUgraphExec *exec) {
  /* End every capture before instantiating: instantiation is refused while
  ** the thread still has a stream capturing. */
  for (int r = 0; r < c->ndev; ++r) {
    collgen__cu.cuCtxSetCurrent(c->ctx[r]);
    CUresult e = collgen__cu.cuStreamEndCapture((CUstream)s[r], &graph[r]);
    cr_assert_eq(e, CUDA_SUCCESS, "end capture rank %d: %s", r, cu_name(e));
  }
  for (int r = 0; r < c->ndev; ++r) {
    collgen__cu.cuCtxSetCurrent(c->ctx[r]);
    CUresult e = collgen__cu.cuGraphInstantiate(&exec[r], graph[r], 0);
    cr_assert_eq(e, CUDA_SUCCESS, "instantiate rank %d: %s", r, cu_name(e));
  }
}

void graph_launch(collgen_comm_t *c, const collgen_stream_t *s, CUgraphExec *exec) {
  for (int r = 0; r < c->ndev; ++r) {
    collgen__cu.cuCtxSetCurrent(c->ctx[r]);
    cr_assert_eq(collgen__cu.cuGraphLaunch(exec[r], (CUstream)s[r]), CUDA_SUCCESS);
  }
}

void graph_destroy(collgen_comm_t *c, CUgraph *graph, CUgraphExec *exec) {
  for (int r = 0; r < c->ndev; ++r) {
    collgen__cu.cuCtxSetCurrent(c->ctx[r]);
    collgen__cu.cuGraphExecDestroy(exec[r]);
    collgen__cu.cuGraphDestroy(graph[r]);
  }
}

/* ---- allreduce ---------------------------------------------------------- */

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int group;
  int64_t n;
  int inplace, misalign; /* misalign: element offset from the allocation */
  void *alloc_in[8], *alloc_out[8], *in[8], *out[8], *host[8];
  collgen_stream_t streams[8];
  unsigned long long busy_ns[8]; /* keep rank r's stream busy this long before the call */
} ar_case;

/* A kernel that keeps a GPU busy for `ns` nanoseconds, as driver-JIT PTX
** (no NVRTC): stands in for a long prefill queued before a collective. */
static const char spin_ptx[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry collgen_test_spin(.param .u64 ns) {\n"
    "  .reg .pred %p;\n  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [ns];\n  mov.u64 %rd2, %globaltimer;\n"
    "LOOP:\n  mov.u64 %rd3, %globaltimer;\n  sub.s64 %rd4, %rd3, %rd2;\n"
    "  setp.lt.u64 %p, %rd4, %rd1;\n  @%p bra LOOP;\n  ret;\n}\n";

/* Queues the spin kernel on rank r's stream s (one block of 32 threads). */
static void spin_stream(collgen_comm_t *c, int r, collgen_stream_t s, unsigned long long ns) {
  CUmodule m;
  CUfunction f;
  cr_assert_eq(collgen__cu.cuCtxSetCurrent(c->ctx[r]), CUDA_SUCCESS);
  cr_assert_eq(collgen__cu.cuModuleLoadData(&m, spin_ptx), CUDA_SUCCESS);
  cr_assert_eq(collgen__cu.cuModuleGetFunction(&f, m, "collgen_test_spin"), CUDA_SUCCESS);
  void *args[] = {&ns};
  cr_assert_eq(collgen__cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)s, args, NULL),
               CUDA_SUCCESS);
  /* the module stays loaded until the context goes: the kernel may still run */
}

/* Timing bounds stretch under compute-sanitizer (tests/sanitize-all.sh). */
static double slow_factor(void) { return getenv("COLLGEN_TEST_SLOW") ? 50.0 : 1.0; }

static void ar_setup(ar_case *t) {
  size_t esize = (size_t)collgen__dtype_bytes(t->dt);
  size_t bytes = (size_t)(t->n + t->misalign) * esize;
  make_streams(t->c, t->streams);
  for (int r = 0; r < t->c->ndev; ++r) {
    t->host[r] = malloc((size_t)t->n * esize + 1);
    cr_assert(t->host[r]);
    cr_assert_eq(collgen__dev_alloc(t->c, r, bytes, &t->alloc_in[r]), COLLGEN_OK, "%s", t->c->err);
    t->in[r] = (char *)t->alloc_in[r] + (size_t)t->misalign * esize;
    if (t->inplace) {
      t->out[r] = t->in[r];
    } else {
      cr_assert_eq(collgen__dev_alloc(t->c, r, bytes, &t->alloc_out[r]), COLLGEN_OK);
      t->out[r] = (char *)t->alloc_out[r] + (size_t)t->misalign * esize;
    }
  }
}

/* Fresh inputs, poisoned outputs, one run, exact comparison. */
static void ar_run_and_check(ar_case *t) {
  size_t esize = (size_t)collgen__dtype_bytes(t->dt), bytes = (size_t)t->n * esize;
  int ndev = t->c->ndev, g = t->group ? t->group : ndev;
  for (int r = 0; r < ndev; ++r) {
    fill_random(t->dt, t->host[r], t->n);
    if (!t->inplace) cr_assert_eq(collgen__dev_fill(t->c, r, t->out[r], 0xff, bytes), COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->in[r], t->host[r], bytes), COLLGEN_OK);
  }
  int64_t shape[1] = {t->n};
  const int64_t *shapes[8];
  for (int r = 0; r < ndev; ++r) shapes[r] = shape;
  for (int r = 0; r < ndev; ++r)
    if (t->busy_ns[r]) spin_stream(t->c, r, t->streams[r], t->busy_ns[r]);
  int rc = collgen_allreduce_sum(t->c, t->dt, 1, shapes, (const void *const *)t->in, t->out,
                                 t->group, t->streams);
  cr_assert_eq(rc, COLLGEN_OK, "allreduce: %s", collgen_comm_last_error(t->c));
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s", t->c->err);
  void *expect = malloc(bytes + 1), *got = malloc(bytes + 1);
  cr_assert(expect && got);
  for (int base = 0; base < ndev; base += g) {
    collgen__ref_allreduce(t->dt, t->n, g, (const void *const *)&t->host[base], expect);
    for (int r = base; r < base + g; ++r) {
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->out[r], bytes), COLLGEN_OK);
      if (memcmp(got, expect, bytes) != 0) {
        int64_t i = 0;
        while (memcmp((char *)got + i * (int64_t)esize, (char *)expect + i * (int64_t)esize, esize) == 0) ++i;
        cr_assert_fail("dtype %d n %lld group %d inplace %d misalign %d: rank %d element %lld: "
                       "got %g want %g", (int)t->dt, (long long)t->n, g, t->inplace, t->misalign,
                       r, (long long)i, collgen__ref_load(t->dt, got, i),
                       collgen__ref_load(t->dt, expect, i));
      }
    }
  }
  free(expect);
  free(got);
}

static void ar_teardown(ar_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    collgen__dev_free(t->c, r, t->alloc_in[r]);
    collgen__dev_free(t->c, r, t->alloc_out[r]);
    free(t->host[r]);
  }
  free_streams(t->c, t->streams);
}

void ar_check(collgen_comm_t *c, collgen_dtype_t dt, int64_t n, int group, int inplace,
              int misalign, int runs) {
  ar_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = dt;
  t.n = n;
  t.group = group;
  t.inplace = inplace;
  t.misalign = misalign;
  ar_setup(&t);
  for (int i = 0; i < runs; ++i) ar_run_and_check(&t);
  ar_teardown(&t);
}

static const int64_t SIZES[] = {1, 2, 7, 8, 9, 31, 1000, 4097, 65536 + 3, 1 << 20, 3 * (1 << 20) + 5};

Test(allreduce, two_ranks_every_dtype_and_size, .timeout = 600) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int dt = 0; dt < 3; ++dt)
    for (size_t k = 0; k < sizeof SIZES / sizeof SIZES[0]; ++k)
      ar_check(c, (collgen_dtype_t)dt, SIZES[k], 0, 0, 0, 2);
  collgen_comm_destroy(c);
}

Test(allreduce, two_ranks_in_place_and_unaligned, .timeout = 600) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int dt = 0; dt < 3; ++dt)
    for (size_t k = 0; k < sizeof SIZES / sizeof SIZES[0]; k += 2) {
      ar_check(c, (collgen_dtype_t)dt, SIZES[k], 0, 1, 0, 2);  /* in-place */
      ar_check(c, (collgen_dtype_t)dt, SIZES[k], 0, 0, 1, 1);  /* scalar path */
      ar_check(c, (collgen_dtype_t)dt, SIZES[k], 0, 1, 3, 1);  /* both */
    }
  collgen_comm_destroy(c);
}

Test(allreduce, group_size_one_copies, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  ar_check(c, COLLGEN_DTYPE_BF16, 4097, 1, 0, 0, 1);
  ar_check(c, COLLGEN_DTYPE_F16, 77, 1, 0, 3, 2);      /* unaligned copy */
  ar_check(c, COLLGEN_DTYPE_F32, 1 << 20, 1, 1, 0, 1); /* in place: nothing to do */
  collgen_comm_destroy(c);
}

Test(allreduce, large_256MB_bf16, .timeout = 900) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  ar_check(c, COLLGEN_DTYPE_BF16, (int64_t)128 << 20, 0, 0, 0, 1);
  ar_check(c, COLLGEN_DTYPE_BF16, ((int64_t)128 << 20) + 5, 0, 1, 0, 1);
  collgen_comm_destroy(c);
}

Test(allreduce, four_and_eight_ranks_mapped, .timeout = 900) {
  static const int ranks[] = {4, 8};
  for (int k = 0; k < 2; ++k) {
    collgen_comm_t *c = make_comm(ranks[k], 4, 0, 0);
    for (int g = 1; g <= ranks[k]; g *= 2)
      for (int dt = 0; dt < 3; ++dt) {
        ar_check(c, (collgen_dtype_t)dt, 1001, g, 0, 0, 1);     /* one-shot */
        ar_check(c, (collgen_dtype_t)dt, 300007, g, 0, 0, 1);   /* two-shot for g >= 4 */
        ar_check(c, (collgen_dtype_t)dt, 4099, g, 1, 0, 1);     /* in-place two-shot */
      }
    collgen_comm_destroy(c);
  }
}

Test(allreduce, odd_group_sizes_mapped, .timeout = 600) {
  collgen_comm_t *c = make_comm(6, 4, 0, 0);
  ar_check(c, COLLGEN_DTYPE_BF16, 77777, 3, 0, 0, 1);
  ar_check(c, COLLGEN_DTYPE_F16, 400001, 3, 0, 0, 1);
  ar_check(c, COLLGEN_DTYPE_F32, 4097, 6, 1, 0, 1);
  collgen_comm_destroy(c);
}

/* ---- allgather_rmsnorm -------------------------------------------------- */

/* Runs the op `repeat` times back to back (no synchronization in between:
** a rank whose peers send nothing may run ahead), then checks the result. */
static void rms_check_n(collgen_comm_t *c, collgen_dtype_t dt, int group, const int64_t *rows,
                        int64_t cols, float eps, float offset, int repeat) {
  size_t esize = (size_t)collgen__dtype_bytes(dt);
  int ndev = c->ndev, g = group ? group : ndev;
  collgen_stream_t streams[8];
  make_streams(c, streams);
  void *in[8] = {0}, *normed[8] = {0}, *resid[8] = {0}, *gamma[8] = {0}, *host[8] = {0};
  void *hgamma[8] = {0};
  int64_t shapes_v[8][2], total[8] = {0};
  const int64_t *shapes[8];
  for (int r = 0; r < ndev; ++r) total[r / g] += rows[r];
  for (int r = 0; r < ndev; ++r) {
    size_t b = (size_t)(rows[r] * cols) * esize, ob = (size_t)(total[r / g] * cols) * esize;
    shapes_v[r][0] = rows[r];
    shapes_v[r][1] = cols;
    shapes[r] = shapes_v[r];
    host[r] = malloc(b + 1);
    hgamma[r] = malloc((size_t)cols * esize);
    fill_random(dt, host[r], rows[r] * cols);
    if (r % g == 0) fill_random(dt, hgamma[r], cols); /* one gamma per group */
    else memcpy(hgamma[r], hgamma[r - r % g], (size_t)cols * esize);
    cr_assert_eq(collgen__dev_alloc(c, r, b, &in[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, ob, &normed[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, ob, &resid[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, (size_t)cols * esize, &gamma[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(c, r, in[r], host[r], b), COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(c, r, gamma[r], hgamma[r], (size_t)cols * esize), COLLGEN_OK);
    cr_assert_eq(collgen__dev_fill(c, r, normed[r], 0xff, ob), COLLGEN_OK);
    cr_assert_eq(collgen__dev_fill(c, r, resid[r], 0xff, ob), COLLGEN_OK);
  }
  for (int i = 0; i < repeat; ++i) {
    int rc = collgen_allgather_rmsnorm(c, dt, 2, shapes, (const void *const *)in, normed, resid,
                                       (const void *const *)gamma, eps, offset, group, streams);
    cr_assert_eq(rc, COLLGEN_OK, "%s", collgen_comm_last_error(c));
  }
  cr_assert_eq(collgen__dev_sync_all(c, streams), COLLGEN_OK, "%s", c->err);
  float off = collgen__dtype_round(dt, offset);
  void *firsts[8] = {0}; /* normed of each group's first rank */
  for (int base = 0; base < ndev; base += g) {
    int64_t t = total[base / g];
    size_t ob = (size_t)(t * cols) * esize;
    void *ref_n = malloc(ob + 1), *ref_r = malloc(ob + 1), *got = malloc(ob + 1),
         *first = malloc(ob + 1);
    firsts[base / g] = first;
    for (int r = base; r < base + g; ++r) {
      collgen__ref_allgather_rmsnorm(dt, g, &rows[base], cols, (const void *const *)&host[base],
                                     hgamma[r], eps, off, ref_n, ref_r);
      cr_assert_eq(collgen__dev_download(c, r, got, resid[r], ob), COLLGEN_OK);
      cr_assert(memcmp(got, ref_r, ob) == 0, "residual of rank %d differs (cols %lld)", r,
                (long long)cols);
      cr_assert_eq(collgen__dev_download(c, r, got, normed[r], ob), COLLGEN_OK);
      for (int64_t row = 0; row < t; ++row) {
        double scale = collgen__ref_rmsnorm_scale(dt, ref_r, row, cols, eps);
        for (int64_t k = 0; k < cols; ++k) {
          int64_t i = row * cols + k;
          double exact = collgen__ref_load(dt, ref_r, i) * scale *
                         ((double)collgen__ref_load(dt, hgamma[r], k) + (double)off);
          double v = collgen__ref_load(dt, got, i);
          if (!collgen__ref_close(dt, v, exact))
            cr_assert_fail("dtype %d cols %lld rank %d row %lld col %lld: got %.9g want %.9g",
                           (int)dt, (long long)cols, r, (long long)row, (long long)k, v, exact);
        }
      }
      /* every rank of a group holds the same bits */
      if (r == base) memcpy(first, got, ob);
      else cr_assert(memcmp(got, first, ob) == 0, "normed of rank %d differs from rank %d", r, base);
    }
    free(ref_n);
    free(ref_r);
    free(got);
  }
  /* the same inputs again give the same bits */
  for (int r = 0; r < ndev; ++r)
    cr_assert_eq(collgen__dev_fill(c, r, normed[r], 0xff, (size_t)(total[r / g] * cols) * esize),
                 COLLGEN_OK);
  cr_assert_eq(collgen_allgather_rmsnorm(c, dt, 2, shapes, (const void *const *)in, normed, resid,
                                         (const void *const *)gamma, eps, offset, group, streams),
               COLLGEN_OK, "%s", collgen_comm_last_error(c));
  cr_assert_eq(collgen__dev_sync_all(c, streams), COLLGEN_OK, "%s", c->err);
  for (int base = 0; base < ndev; base += g) {
    size_t ob = (size_t)(total[base / g] * cols) * esize;
    void *again = malloc(ob + 1);
    cr_assert_eq(collgen__dev_download(c, base, again, normed[base], ob), COLLGEN_OK);
    cr_assert(memcmp(again, firsts[base / g], ob) == 0, "rerun of group %d changed bits", base / g);
    free(again);
    free(firsts[base / g]);
  }
  for (int r = 0; r < ndev; ++r) {
    collgen__dev_free(c, r, in[r]);
    collgen__dev_free(c, r, normed[r]);
    collgen__dev_free(c, r, resid[r]);
    collgen__dev_free(c, r, gamma[r]);
    free(host[r]);
    free(hgamma[r]);
  }
  free_streams(c, streams);
}

void rms_check(collgen_comm_t *c, collgen_dtype_t dt, int group, const int64_t *rows,
               int64_t cols, float eps, float offset) {
  rms_check_n(c, dt, group, rows, cols, eps, offset, 1);
}

/* 9000 and 16384 with 8 rows take the LL kernel with blocks wider than 512. */
static const int64_t RMS_COLS[] = {1, 7, 128, 1000, 4096, 4095, 5120, 8192, 9000, 16384, 40000};

Test(allgather_rmsnorm, two_ranks_every_dtype_and_cols, .timeout = 900) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  int64_t rows[2] = {5, 3};
  for (int dt = 0; dt < 3; ++dt)
    for (size_t k = 0; k < sizeof RMS_COLS / sizeof RMS_COLS[0]; ++k)
      rms_check(c, (collgen_dtype_t)dt, 0, rows, RMS_COLS[k], 1e-6f, dt == 0 ? 1.0f : 0.0f);
  collgen_comm_destroy(c);
}

Test(allgather_rmsnorm, uneven_and_empty_shards, .timeout = 600) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  int64_t a[2] = {0, 7}, b[2] = {9, 0}, d[2] = {1, 300};
  rms_check(c, COLLGEN_DTYPE_BF16, 0, a, 4096, 1e-5f, 1.0f);
  rms_check(c, COLLGEN_DTYPE_BF16, 0, b, 8192, 1e-5f, 0.0f);
  rms_check(c, COLLGEN_DTYPE_F16, 0, d, 2048, 1e-5f, 0.0f);
  /* 200 calls back to back where one rank sends nothing (LL sizes): the
  ** sender must not run ahead of the receiver (found by collgen-bench). */
  int64_t e[2] = {1, 0}, f[2] = {0, 3};
  rms_check_n(c, COLLGEN_DTYPE_BF16, 0, e, 2048, 1e-6f, 1.0f, 200);
  rms_check_n(c, COLLGEN_DTYPE_BF16, 0, f, 4096, 1e-6f, 0.0f, 200);
  collgen_comm_destroy(c);
}

Test(allgather_rmsnorm, many_rows, .timeout = 900) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  int64_t rows[2] = {4096, 4095};
  rms_check(c, COLLGEN_DTYPE_BF16, 0, rows, 8192, 1e-6f, 1.0f);
  collgen_comm_destroy(c);
}

Test(allgather_rmsnorm, four_and_eight_ranks_mapped, .timeout = 900) {
  int64_t rows[8] = {3, 0, 5, 1, 2, 2, 0, 4};
  collgen_comm_t *c4 = make_comm(4, 4, 0, 0);
  rms_check(c4, COLLGEN_DTYPE_BF16, 2, rows, 4096, 1e-6f, 1.0f);
  rms_check(c4, COLLGEN_DTYPE_F32, 4, rows, 1000, 1e-6f, 0.0f);
  int64_t wide[4] = {1, 2, 0, 3}; /* LL with 1024-thread blocks, group of 4 */
  rms_check(c4, COLLGEN_DTYPE_BF16, 4, wide, 16384, 1e-6f, 1.0f);
  collgen_comm_destroy(c4);
  collgen_comm_t *c8 = make_comm(8, 4, 0, 0);
  rms_check(c8, COLLGEN_DTYPE_BF16, 8, rows, 8192, 1e-6f, 1.0f);
  rms_check(c8, COLLGEN_DTYPE_F16, 4, rows, 5120, 1e-6f, 0.0f);
  rms_check(c8, COLLGEN_DTYPE_BF16, 2, rows, 7, 1e-6f, 0.0f);
  collgen_comm_destroy(c8);
}

/* Groups of one (the "local" kernel: one block per row, or a grid-stride
** loop under a small max_blocks): per dtype and cols a few rows, 301 rows
** and about 4 MB of rows, an empty shard. */
Test(allgather_rmsnorm, groups_of_one_every_dtype_and_cols, .timeout = 600) {
  collgen_comm_t *wide = make_comm(2, 0, 0, 0), *narrow = make_comm(2, 4, 0, 0);
  for (int dt = 0; dt < 3; ++dt)
    for (size_t k = 0; k < sizeof RMS_COLS / sizeof RMS_COLS[0]; ++k) {
      const int64_t cols = RMS_COLS[k];
      int64_t few[2] = {3, 0}, many[2] = {301, 1};
      int64_t big[2] = {((4 << 20) / (cols * collgen__dtype_bytes((collgen_dtype_t)dt))) | 1, 2};
      rms_check(wide, (collgen_dtype_t)dt, 1, few, cols, 1e-6f, dt == 0 ? 1.0f : 0.0f);
      rms_check(narrow, (collgen_dtype_t)dt, 1, many, cols, 1e-5f, 0.0f);
      rms_check(wide, (collgen_dtype_t)dt, 1, big, cols, 1e-6f, 0.0f);
    }
  collgen_comm_destroy(wide);
  collgen_comm_destroy(narrow);
}

Test(single, one_rank_communicator, .timeout = 300) {
  collgen_comm_t *c = make_comm(1, 0, 0, 0);
  ar_check(c, COLLGEN_DTYPE_BF16, 1, 0, 0, 0, 1);
  ar_check(c, COLLGEN_DTYPE_F16, 1000003, 0, 0, 0, 1);
  ar_check(c, COLLGEN_DTYPE_F32, 4097, 0, 1, 0, 1);
  int64_t rows[1] = {7};
  rms_check(c, COLLGEN_DTYPE_BF16, 1, rows, 4096, 1e-6f, 1.0f);
  rms_check(c, COLLGEN_DTYPE_F32, 0, rows, 7, 1e-6f, 0.0f);
  collgen_comm_destroy(c);
}

/* LL calls of both ops, barrier calls and changing group sizes interleaved on
** one communicator: the per-pair epochs and counters must stay in step. */
Test(mixed, ll_and_barrier_calls_with_changing_groups, .timeout = 600) {
  collgen_comm_t *c = make_comm(4, 4, 0, 0);
  int64_t rows[4] = {3, 0, 5, 1};
  for (int round = 0; round < 3; ++round) {
    ar_check(c, COLLGEN_DTYPE_BF16, 1001, 2, 0, 0, 1);              /* LL, pairs */
    rms_check(c, COLLGEN_DTYPE_BF16, 4, rows, 1024, 1e-6f, 1.0f);    /* LL, all four */
    ar_check(c, COLLGEN_DTYPE_F32, 300007, 4, 0, 0, 1);             /* two-shot */
    rms_check(c, COLLGEN_DTYPE_F16, 2, rows, 4096, 1e-6f, 0.0f);     /* LL, pairs */
    ar_check(c, COLLGEN_DTYPE_BF16, 4099, 4, 1, 0, 1);              /* LL in place */
    rms_check(c, COLLGEN_DTYPE_BF16, 2, rows, 8192 * 4, 1e-6f, 0.0f); /* looped, barriers */
  }
  collgen_comm_destroy(c);
}

/* ---- CUDA graphs, timeouts, refusals ------------------------------------ */

/* Captures one allreduce per rank into a graph, replays it 100 times with
** new inputs each time and checks every replay (n and group pick the
** algorithm; group 1 is a captured copy). */
static void graph_replay_check(int64_t n, int group) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  ar_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = COLLGEN_DTYPE_BF16;
  t.n = n;
  t.group = group;
  ar_setup(&t);
  ar_run_and_check(&t); /* eager first: loads the modules */
  int64_t shape[1] = {t.n};
  const int64_t *shapes[2] = {shape, shape};
  CUgraph graph[2];
  CUgraphExec exec[2];
  graph_capture_begin(c, t.streams);
  cr_assert_eq(collgen_allreduce_sum(c, t.dt, 1, shapes, (const void *const *)t.in, t.out, group,
                                     t.streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  graph_capture_end(c, t.streams, graph, exec);
  size_t bytes = (size_t)t.n * 2;
  void *expect = malloc(bytes), *got = malloc(bytes);
  for (int it = 0; it < 100; ++it) {
    for (int r = 0; r < 2; ++r) {
      fill_random(t.dt, t.host[r], t.n);
      cr_assert_eq(collgen__dev_upload(c, r, t.in[r], t.host[r], bytes), COLLGEN_OK);
      cr_assert_eq(collgen__dev_fill(c, r, t.out[r], 0xff, bytes), COLLGEN_OK);
    }
    graph_launch(c, t.streams, exec);
    cr_assert_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_OK, "%s", c->err);
    for (int r = 0; r < 2; ++r) {
      int g = group ? group : 2, base = r - r % g;
      collgen__ref_allreduce(t.dt, t.n, g, (const void *const *)&t.host[base], expect);
      collgen__dev_download(c, r, got, t.out[r], bytes);
      cr_assert(memcmp(got, expect, bytes) == 0, "n %lld group %d replay %d rank %d differs",
                (long long)t.n, g, it, r);
    }
  }
  graph_destroy(c, graph, exec);
  free(expect);
  free(got);
  ar_teardown(&t);
  collgen_comm_destroy(c);
}

Test(graph, capture_and_replay_100_times_with_new_data, .timeout = 600) {
  graph_replay_check((1 << 20) + 3, 0); /* two-shot, barriers */
  graph_replay_check(4099, 0);          /* LL push, epochs */
  graph_replay_check(4099, 1);          /* groups of one: captured copies */
}

Test(timeout, missing_peer_is_reported_not_hung, .timeout = 60) {
  collgen_comm_t *c = make_comm(2, 0, 300, 0x1); /* launch rank 0 only */
  collgen_stream_t s[2];
  make_streams(c, s);
  void *buf[2];
  for (int r = 0; r < 2; ++r) cr_assert_eq(collgen__dev_alloc(c, r, 4096, &buf[r]), COLLGEN_OK);
  int64_t shape[1] = {1024};
  const int64_t *shapes[2] = {shape, shape};
  double t0 = collgen__now_ms();
  cr_assert_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, shapes, (const void *const *)buf,
                                     buf, 0, s), COLLGEN_OK);
  int rc = collgen__dev_sync_all(c, s);
  double ms = collgen__now_ms() - t0;
  cr_expect_eq(rc, COLLGEN_ERR_TIMEOUT, "got %s", collgen_status_name(rc));
  cr_expect_lt(ms, 300 + 2000, "gave up after %.0f ms", ms);
  cr_expect_eq(collgen_comm_check(c), COLLGEN_ERR_TIMEOUT);
  const char *msg = collgen_comm_last_error(c);
  cr_expect(strstr(msg, "rank 0 (device") && strstr(msg, "for rank 1 (device"), "%s", msg);
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, shapes, (const void *const *)buf,
                                     buf, 0, s), COLLGEN_ERR_TIMEOUT,
               "the next call reports the timeout too");
  for (int r = 0; r < 2; ++r) collgen__dev_free(c, r, buf[r]);
  free_streams(c, s);
  collgen_comm_destroy(c);
}

Test(refusal, bad_calls_return_codes_and_launch_nothing, .timeout = 120) {
  int ndev = gpu_count() >= 2 ? 2 : 1;
  int dup[2] = {0, 0}, many[9] = {0}, missing[1] = {99};
  collgen_comm_t *bad = NULL;
  cr_expect_eq(collgen_comm_create(&bad, 2, dup, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "listed twice"), "%s", collgen_last_error());
  cr_expect_eq(collgen_comm_create(&bad, 9, many, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_create(&bad, 1, missing, NULL), COLLGEN_ERR_NO_DEVICE);
  cr_expect_null(bad);
  (void)ndev;

  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  collgen_stream_t s[2];
  make_streams(c, s);
  void *buf[2], *out[2];
  for (int r = 0; r < 2; ++r) {
    cr_assert_eq(collgen__dev_alloc(c, r, 1 << 16, &buf[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, 1 << 16, &out[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_fill(c, r, out[r], 0xab, 1 << 16), COLLGEN_OK);
  }
  int64_t sh[1] = {1000}, other[1] = {999};
  const int64_t *shapes[2] = {sh, sh}, *mismatch[2] = {sh, other};
  const void *const *in = (const void *const *)buf;
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, in, out, 3, s),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, mismatch, in, out, 0, s),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_comm_last_error(c), "shapes differ"), "%s", collgen_comm_last_error(c));
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 0, shapes, in, out, 0, s),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_allreduce_sum(c, (collgen_dtype_t)9, 1, shapes, in, out, 0, s),
               COLLGEN_ERR_INVALID_ARG);
  void *odd[2] = {(char *)buf[0] + 1, buf[1]};
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)odd,
                                     out, 0, s), COLLGEN_ERR_ALIGNMENT);
  void *nul[2] = {buf[0], NULL};
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)nul,
                                     out, 0, s), COLLGEN_ERR_INVALID_ARG);
  void *overlap[2] = {(char *)buf[0] + 16, (char *)buf[1] + 16};
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, shapes, in, overlap, 0, s),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_comm_last_error(c), "partially overlaps"));
  int64_t rs[2] = {4, 64};
  const int64_t *rshapes[2] = {rs, rs};
  cr_expect_eq(collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 1, rshapes, in, out, out, in, 1e-6f,
                                         0.0f, 2, s), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, rshapes, in, out, buf, in,
                                         0.0f / 0.0f, 0.0f, 2, s), COLLGEN_ERR_INVALID_ARG);
  /* Nothing was written by any refused call. */
  unsigned char *h = malloc(1 << 16);
  for (int r = 0; r < 2; ++r) {
    collgen__dev_sync_all(c, s);
    collgen__dev_download(c, r, h, out[r], 1 << 16);
    for (int i = 0; i < 1 << 16; ++i) cr_assert_eq(h[i], 0xab, "rank %d byte %d written", r, i);
  }
  /* Zero-size calls succeed without a launch; groups may differ in shape. */
  int64_t zero[1] = {0};
  const int64_t *zs[2] = {zero, zero}, *mixed[2] = {zero, sh};
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, zs, in, out, 0, s), COLLGEN_OK);
  cr_expect_eq(collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, mixed, in, out, 1, s), COLLGEN_OK);
  collgen__dev_sync_all(c, s);
  collgen__dev_download(c, 0, h, out[0], 1 << 16);
  cr_expect_eq(h[0], 0xab, "rank 0 had zero elements: untouched");
  free(h);
  collgen_comm_info_t info;
  cr_expect_eq(collgen_comm_info(c, &info), COLLGEN_OK);
  cr_expect_eq(info.ndev, 2);
  cr_expect_eq(info.p2p[0][1], 1);
  cr_expect_leq(info.signal_bytes_per_rank, 16u << 20);
  cr_log_info("link 0->1: %s, signal buffer %zu bytes per rank", info.link[0][1],
              info.signal_bytes_per_rank);
  for (int r = 0; r < 2; ++r) {
    collgen__dev_free(c, r, buf[r]);
    collgen__dev_free(c, r, out[r]);
  }
  free_streams(c, s);
  collgen_comm_destroy(c);
}

/* The whole table of refused calls (tests/bad_inputs.c) on real devices:
** every one returns its status and message and nothing is written. */
Test(refusal, bad_input_table_on_the_gpu, .timeout = 120) {
  int devices[2], shared;
  rank_devices(2, devices, &shared);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.allow_shared_devices = shared;
  bad_env e;
  bad_env_create(&e, devices, &o);
  int n = bad_inputs_run(&e, gpu_count());
  cr_expect_geq(n, 60, "only %d cases", n);
  bad_env_check_and_destroy(&e);
}

/* ---- waits: a late peer is not an error; no host stall after prepare ---- */

/* Rank 1's stream is busy for 10 s (a long prefill) before the collective;
** rank 0 waits for it under the default bound and the result is exact. */
Test(waits, busy_peer_for_10s_completes_with_defaults, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  cr_expect_geq(c->timeout_ms, 120000, "default bound (or the sanitizer's): %d ms", c->timeout_ms);
  ar_case t;
  memset(&t, 0, sizeof t);
  t.c = c;
  t.dt = COLLGEN_DTYPE_BF16;
  t.n = 1 << 20; /* two-shot: barrier waits */
  ar_setup(&t);
  t.busy_ns[1] = 10000000000ull;
  double t0 = collgen__now_ms();
  ar_run_and_check(&t);
  double ms = collgen__now_ms() - t0;
  cr_expect_geq(ms, 9900, "the peer was busy for 10 s, the call took %.0f ms", ms);
  cr_log_info("two-shot behind a 10 s busy peer: completed exactly after %.0f ms", ms);
  t.n = 4096; /* LL: token and line waits, 2 s late */
  ar_teardown(&t);
  ar_setup(&t);
  t.busy_ns[1] = 2000000000ull;
  ar_run_and_check(&t);
  ar_teardown(&t);
  collgen_comm_destroy(c);
}

/* Host time of the first call of a shape while the peer GPU is busy for
** 2 s: the load of a kernel waits for an idle device, so without prepare
** the call stalls; after collgen_comm_prepare it returns at once, and the
** result is exact. */
Test(waits, first_call_after_prepare_does_not_stall, .timeout = 300) {
  double stalled = 0, prepared = 0;
  for (int use_prepare = 0; use_prepare < 2; ++use_prepare) {
    collgen_comm_t *c = make_comm(2, 0, 0, 0);
    ar_case t;
    memset(&t, 0, sizeof t);
    t.c = c;
    t.dt = COLLGEN_DTYPE_BF16;
    t.n = 4096;
    ar_setup(&t);
    if (use_prepare) {
      collgen_shape_t shape;
      collgen_shape_init(&shape, COLLGEN_OP_ALLREDUCE_SUM);
      shape.elems = t.n;
      cr_assert_eq(collgen_comm_prepare(c, &shape, 1), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    }
    for (int r = 0; r < 2; ++r) fill_random(t.dt, t.host[r], t.n);
    for (int r = 0; r < 2; ++r)
      cr_assert_eq(collgen__dev_upload(c, r, t.in[r], t.host[r], (size_t)t.n * 2), COLLGEN_OK);
    collgen_stream_t busy;
    cr_assert_eq(collgen__dev_stream_create(c, 1, &busy), COLLGEN_OK);
    spin_stream(c, 1, busy, 2000000000ull);
    int64_t shp[1] = {t.n};
    const int64_t *shapes[2] = {shp, shp};
    double t0 = collgen__now_ms();
    cr_assert_eq(collgen_allreduce_sum(c, t.dt, 1, shapes, (const void *const *)t.in, t.out, 0,
                                       t.streams), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    double ms = collgen__now_ms() - t0;
    *(use_prepare ? &prepared : &stalled) = ms;
    cr_assert_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_OK, "%s", c->err);
    void *expect = malloc((size_t)t.n * 2), *got = malloc((size_t)t.n * 2);
    collgen__ref_allreduce(t.dt, t.n, 2, (const void *const *)t.host, expect);
    for (int r = 0; r < 2; ++r) {
      cr_assert_eq(collgen__dev_download(c, r, got, t.out[r], (size_t)t.n * 2), COLLGEN_OK);
      cr_expect(memcmp(got, expect, (size_t)t.n * 2) == 0, "rank %d differs", r);
    }
    free(expect);
    free(got);
    cr_assert_eq(collgen__cu.cuStreamSynchronize((CUstream)busy), CUDA_SUCCESS);
    collgen__dev_stream_destroy(c, 1, busy);
    ar_teardown(&t);
    collgen_comm_destroy(c);
  }
  cr_log_info("first call while the peer is busy 2 s: %.2f ms without prepare, %.3f ms after "
              "prepare", stalled, prepared);
  fprintf(stderr, "waits: first call behind a 2 s busy peer: %.2f ms cold, %.3f ms prepared\n",
          stalled, prepared);
  cr_expect_lt(prepared, 5.0 * slow_factor(), "after prepare the call took %.3f ms", prepared);
}

/* ---- abort: a watchdog stops spinning kernels at once ---- */

typedef struct {
  collgen_comm_t *c;
  int delay_ms;
  double called_ms, returned_ms; /* collgen__now_ms() around the abort */
  int rc;
} abort_job;

static void *abort_later(void *arg) {
  abort_job *j = arg;
  usleep((useconds_t)j->delay_ms * 1000);
  j->called_ms = collgen__now_ms();
  j->rc = collgen_comm_abort(j->c);
  j->returned_ms = collgen__now_ms();
  return NULL;
}

/* Rank 1 never launches (as if its process died) and the bound is 60 s.
** Rank 0 runs two calls of `op` back to back; a watchdog thread aborts
** after 300 ms. Both kernels must end within milliseconds of the abort
** (the second one starts after it and returns at once); later calls
** return COLLGEN_ERR_ABORTED and destroy works. */
static void abort_case(collgen_op_t op, int64_t rows_or_elems, int64_t cols) {
  collgen_comm_t *c = make_comm(2, 0, 60000, 0x1);
  collgen_stream_t s[2];
  make_streams(c, s);
  const size_t bytes = 64u << 20;
  void *in[2], *out[2], *res[2], *gam[2];
  for (int r = 0; r < 2; ++r) {
    cr_assert_eq(collgen__dev_alloc(c, r, bytes, &in[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, bytes, &out[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, bytes, &res[r]), COLLGEN_OK);
    cr_assert_eq(collgen__dev_alloc(c, r, 1 << 20, &gam[r]), COLLGEN_OK);
  }
  int64_t flat[1] = {rows_or_elems}, shard[2] = {rows_or_elems, cols};
  const int64_t *flats[2] = {flat, flat}, *shards[2] = {shard, shard};
  const char *what = op == COLLGEN_OP_ALLREDUCE_SUM ? "allreduce_sum" : "allgather_rmsnorm";
  for (int call = 0; call < 2; ++call) {
    int rc = op == COLLGEN_OP_ALLREDUCE_SUM
                 ? collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, flats,
                                         (const void *const *)in, out, 0, s)
                 : collgen_allgather_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, shards,
                                             (const void *const *)in, out, res,
                                             (const void *const *)gam, 1e-6f, 0.0f, 0, s);
    cr_assert_eq(rc, COLLGEN_OK, "%s: %s", what, collgen_comm_last_error(c));
  }
  abort_job job = {c, 300, 0, 0, -1};
  pthread_t watchdog;
  double t0 = collgen__now_ms();
  cr_assert_eq(pthread_create(&watchdog, NULL, abort_later, &job), 0);
  CUresult sync = collgen__cu.cuStreamSynchronize((CUstream)s[0]);
  double ended = collgen__now_ms();
  pthread_join(watchdog, NULL);
  cr_assert_eq(job.rc, COLLGEN_OK, "abort: %s", collgen_comm_last_error(c));
  cr_assert_eq(sync, CUDA_SUCCESS, "the kernels end cleanly: %s", cu_name(sync));
  cr_expect_geq(ended, job.called_ms, "%s: rank 0's kernels ended before the abort (%.1f ms)",
                what, ended - t0);
  const double abort_ms = job.returned_ms - job.called_ms, after_ms = ended - job.called_ms;
  cr_expect_lt(abort_ms, 50.0 * slow_factor(), "%s: the abort took %.2f ms", what, abort_ms);
  cr_expect_lt(after_ms, 100.0 * slow_factor(), "%s: the kernels ended %.2f ms after the abort",
               what, after_ms);
  fprintf(stderr, "abort: %s %lld x %lld: abort returned in %.2f ms; both kernels ended %.2f ms "
          "after it was called\n", what, (long long)rows_or_elems, (long long)cols, abort_ms,
          after_ms);
  int rc = collgen_allreduce_sum(c, COLLGEN_DTYPE_BF16, 1, flats, (const void *const *)in, out, 0, s);
  cr_expect_eq(rc, COLLGEN_ERR_ABORTED, "a later call: %s", collgen_status_name(rc));
  cr_expect_eq(collgen_comm_check(c), COLLGEN_ERR_ABORTED);
  collgen_comm_health_t h;
  cr_assert_eq(collgen_comm_health(c, &h), COLLGEN_OK);
  cr_expect_eq(h.rank[0].state, COLLGEN_RANK_ABORTED);
  for (int r = 0; r < 2; ++r) {
    collgen__dev_free(c, r, in[r]);
    collgen__dev_free(c, r, out[r]);
    collgen__dev_free(c, r, res[r]);
    collgen__dev_free(c, r, gam[r]);
  }
  free_streams(c, s);
  collgen_comm_destroy(c);
}

Test(abort, spinning_kernels_stop_within_milliseconds, .timeout = 300) {
  abort_case(COLLGEN_OP_ALLREDUCE_SUM, 4096, 0);          /* LL: line and token waits */
  abort_case(COLLGEN_OP_ALLREDUCE_SUM, 1 << 22, 0);       /* two-shot: barrier waits */
  abort_case(COLLGEN_OP_ALLGATHER_RMSNORM, 4, 4096);      /* LL rows */
  abort_case(COLLGEN_OP_ALLGATHER_RMSNORM, 2048, 8192);   /* barrier rows */
}

/* Counters and epochs skip ABORT_MARK where they wrap at 2^32. They start
** 3 below it here, and six calls of each kind (LL epochs, two-shot
** barriers) step across it with exact results. */
Test(abort, counters_and_epochs_wrap_past_the_abort_mark, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  collgen__signal *start = calloc(1, sizeof *start);
  cr_assert(start);
  for (int b = 0; b < COLLGEN_MAX_BLOCKS; ++b)
    for (int p = 0; p < COLLGEN_MAX_DEVICES; ++p) start->counter[b][p] = COLLGEN_ABORT_MARK - 3u;
  for (int p = 0; p < COLLGEN_MAX_DEVICES; ++p) start->ll_epoch[p] = COLLGEN_ABORT_MARK - 3u;
  for (int r = 0; r < 2; ++r) {
    cr_assert_eq(collgen__cu.cuCtxSetCurrent(c->ctx[r]), CUDA_SUCCESS);
    cr_assert_eq(collgen__cu.cuMemcpyHtoD(c->signal[r], start, sizeof *start), CUDA_SUCCESS);
  }
  free(start);
  ar_check(c, COLLGEN_DTYPE_BF16, 4099, 0, 0, 0, 6);    /* LL */
  ar_check(c, COLLGEN_DTYPE_BF16, 1 << 20, 0, 0, 0, 6); /* two-shot */
  collgen_comm_destroy(c);
}

/* Returns 77 (skip) without a usable GPU. The probe runs in a child so this
** process never initializes CUDA before Criterion forks its workers. */
int main(int argc, char **argv) {
  pid_t pid = fork();
  if (pid == 0) _exit(gpu_count() > 0 ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "test_gpu: skipped: no CUDA driver or GPU\n");
    return 77;
  }
  struct criterion_test_set *tests = criterion_initialize();
  int result = 0;
  if (criterion_handle_args(argc, argv, true)) result = !criterion_run_all_tests(tests);
  criterion_finalize(tests);
  return result;
}
