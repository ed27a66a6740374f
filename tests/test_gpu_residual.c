/*
** test_gpu_residual.c -- allreduce_residual_rmsnorm on real GPUs against
** the CPU reference (part of the test_gpu binary; helpers in test_gpu.h).
**
** Every run makes fresh random x (per rank) and residual_in and gamma (per
** group, the same on each of its ranks: the op's precondition), poisons the
** outputs and a margin of MARGIN elements around every buffer (0xff: NaN in
** every dtype), and checks every rank: residual_out bit for bit against the
** reference, normed within collgen__ref_close's bound and bitwise equal to
** the group's first rank, x unchanged, nothing written in the margins. A
** rerun on the same inputs must give the same normed bits. Shapes reach
** every algorithm (ll, oneshot, rowsplit), rows held in registers or
** looped, 16-byte vectors or scalars, in place or not; each failure names
** the planned kernel, and the sweep asserts which kernels it reached.
**
** The FP8 output (collgen_allreduce_residual_rmsnorm_fp8, dynamic and
** static scaling) runs through the same cases: residual_out bit for bit,
** codes and row scales against the reference within
** collgen__ref_fp8_row_ok's bound (exact except within 2^-14 of an e4m3
** rounding boundary), all-zero rows exactly 0, every rank and rerun the
** same bytes, nothing written around the e4m3 and scale buffers. For f32
** the plain op's normed output is the kernel's normed_f32 itself, so the
** codes and scales must also equal, bit for bit, the CPU's quantization of
** the plain op's normed output on the same inputs.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "dtype_convert.h"
#include "reference.h"
#include "test_gpu.h"

#define MARGIN 16 /* poisoned elements before and after every buffer */
#define POISON 0xff

/* FP8 and SCALES: the e4m3 output and its row scales (FP8 calls only). */
enum { X, RES_IN, RES_OUT, NORMED, GAMMA, FP8, SCALES, NBUF };

typedef struct {
  collgen_comm_t *c;
  collgen_dtype_t dt;
  int group;                /* ranks per group, resolved (never 0) */
  int64_t rows, cols, n;    /* n = rows * cols */
  int inplace;              /* residual_out is residual_in */
  int misalign;             /* element offset of every pointer (1: not 16-byte aligned) */
  float eps, offset;
  collgen_fp8_mode_t fp8;   /* COLLGEN_FP8_NONE: the plain op */
  float static_scale;       /* COLLGEN_FP8_STATIC */
  int zero_row;             /* row whose x and residual_in are all 0, or -1 */
  void *alloc[8][NBUF];     /* MARGIN + misalign + elements + MARGIN each */
  void *dev[8][NBUF];       /* the pointers the op gets */
  void *hx[8];              /* x of each rank */
  void *hres[8], *hgamma[8]; /* residual_in and gamma of each group (by group index) */
  void *first[8][NBUF];     /* each rank's outputs of the first run (NORMED, FP8, SCALES) */
  collgen_stream_t streams[8];
  char kernel[96], algo[16];
} rr_case;

static size_t esize_of(const rr_case *t) { return (size_t)collgen__dtype_bytes(t->dt); }

/* Element size of buffer k: the dtype's, one byte per code, a float per scale. */
static size_t buf_esize(const rr_case *t, int k) {
  return k == FP8 ? 1 : k == SCALES ? sizeof(float) : esize_of(t);
}

static int64_t elems_of(const rr_case *t, int k) {
  return k == GAMMA ? t->cols : k == SCALES ? t->rows : t->n;
}

static size_t alloc_bytes(const rr_case *t, int k) {
  return (size_t)(2 * MARGIN + t->misalign + elems_of(t, k)) * buf_esize(t, k);
}

/* Whether the call writes buffer k (FP8 and SCALES only in FP8 calls). */
static int has_buffer(const rr_case *t, int k) {
  if (k == FP8) return t->fp8 != COLLGEN_FP8_NONE;
  if (k == SCALES) return t->fp8 == COLLGEN_FP8_DYNAMIC;
  return 1;
}

/* The planned kernel of the call, for messages and the coverage check. */
static void plan_name(rr_case *t) {
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.dtype = t->dt;
  s.ngpus = t->c->ndev;
  s.group_size = t->group;
  s.rows = t->rows;
  s.cols = t->cols;
  s.aligned16 = t->misalign == 0;
  s.fp8 = t->fp8;
  s.max_blocks = t->c->max_blocks;
  snprintf(s.arch, sizeof s.arch, "%s", t->c->arch[0]);
  collgen_plan_t plan;
  cr_assert_eq(collgen_plan(t->c->gen, &s, &plan), COLLGEN_OK, "%s",
               collgen_generator_last_error(t->c->gen));
  snprintf(t->kernel, sizeof t->kernel, "%s", plan.kernel);
  snprintf(t->algo, sizeof t->algo, "%s", plan.algo);
}

static void rr_setup(rr_case *t) {
  const size_t es = esize_of(t);
  t->n = t->rows * t->cols;
  make_streams(t->c, t->streams);
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k) {
      if ((k == RES_OUT && t->inplace) || !has_buffer(t, k)) continue;
      cr_assert_eq(collgen__dev_alloc(t->c, r, alloc_bytes(t, k), &t->alloc[r][k]), COLLGEN_OK,
                   "%s", t->c->err);
      t->dev[r][k] = (char *)t->alloc[r][k] + (size_t)(MARGIN + t->misalign) * buf_esize(t, k);
    }
    if (t->inplace) t->dev[r][RES_OUT] = t->dev[r][RES_IN];
    t->hx[r] = malloc((size_t)t->n * es + 1);
    t->hres[r] = malloc((size_t)t->n * es + 1);
    t->hgamma[r] = malloc((size_t)t->cols * es + 1);
    cr_assert(t->hx[r] && t->hres[r] && t->hgamma[r]);
  }
  plan_name(t);
}

static void rr_teardown(rr_case *t) {
  for (int r = 0; r < t->c->ndev; ++r) {
    for (int k = 0; k < NBUF; ++k) collgen__dev_free(t->c, r, t->alloc[r][k]);
    free(t->hx[r]);
    free(t->hres[r]);
    free(t->hgamma[r]);
    for (int k = 0; k < NBUF; ++k) free(t->first[r][k]);
  }
  free_streams(t->c, t->streams);
}

/* Poisons every buffer of every rank and uploads the host inputs into them
** (residual_in and gamma from the rank's group). */
static void rr_upload(rr_case *t) {
  const size_t es = esize_of(t);
  for (int r = 0; r < t->c->ndev; ++r) {
    const int grp = r / t->group;
    for (int k = 0; k < NBUF; ++k)
      if (t->alloc[r][k])
        cr_assert_eq(collgen__dev_fill(t->c, r, t->alloc[r][k], POISON, alloc_bytes(t, k)),
                     COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][X], t->hx[r], (size_t)t->n * es),
                 COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][RES_IN], t->hres[grp], (size_t)t->n * es),
                 COLLGEN_OK);
    cr_assert_eq(collgen__dev_upload(t->c, r, t->dev[r][GAMMA], t->hgamma[grp],
                                     (size_t)t->cols * es), COLLGEN_OK);
  }
}

/* Fresh random inputs (row zero_row all 0 in x and residual_in), then
** rr_upload. */
static void rr_fill(rr_case *t) {
  const size_t row_bytes = (size_t)t->cols * esize_of(t);
  for (int r = 0; r < t->c->ndev; ++r) {
    fill_random(t->dt, t->hx[r], t->n);
    if (r % t->group == 0) {
      fill_random(t->dt, t->hres[r / t->group], t->n);
      fill_random(t->dt, t->hgamma[r / t->group], t->cols);
    }
    if (t->zero_row >= 0 && t->zero_row < t->rows) {
      memset((char *)t->hx[r] + (size_t)t->zero_row * row_bytes, 0, row_bytes);
      memset((char *)t->hres[r / t->group] + (size_t)t->zero_row * row_bytes, 0, row_bytes);
    }
  }
  rr_upload(t);
}

/* One call of every rank: the plain op (fp8 COLLGEN_FP8_NONE) writing
** NORMED, or the FP8 op writing FP8 (and SCALES). */
static int rr_call_mode(rr_case *t, collgen_fp8_mode_t fp8) {
  int64_t shape[2] = {t->rows, t->cols};
  const int64_t *shapes[8];
  const void *x[8], *res_in[8], *gamma[8];
  void *res_out[8], *normed[8], *q[8];
  float *scales[8];
  for (int r = 0; r < t->c->ndev; ++r) {
    shapes[r] = shape;
    x[r] = t->dev[r][X];
    res_in[r] = t->dev[r][RES_IN];
    res_out[r] = t->dev[r][RES_OUT];
    normed[r] = t->dev[r][NORMED];
    gamma[r] = t->dev[r][GAMMA];
    q[r] = t->dev[r][FP8];
    scales[r] = t->dev[r][SCALES];
  }
  if (fp8 == COLLGEN_FP8_NONE)
    return collgen_allreduce_residual_rmsnorm(t->c, t->dt, 2, shapes, x, res_in, normed,
                                              res_out, gamma, t->eps, t->offset, t->group,
                                              t->streams);
  return collgen_allreduce_residual_rmsnorm_fp8(
      t->c, t->dt, 2, shapes, x, res_in, q, fp8 == COLLGEN_FP8_DYNAMIC ? scales : NULL, res_out,
      gamma, t->eps, t->offset, fp8, fp8 == COLLGEN_FP8_STATIC ? t->static_scale : 0.0f,
      t->group, t->streams);
}

static int rr_call(rr_case *t) { return rr_call_mode(t, t->fp8); }

/* `calls` calls back to back on every rank's stream, then a sync. */
static void rr_run(rr_case *t, int calls) {
  for (int i = 0; i < calls; ++i)
    cr_assert_eq(rr_call(t), COLLGEN_OK, "%s: %s", t->kernel, collgen_comm_last_error(t->c));
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s: %s", t->kernel,
               t->c->err);
}

/* Index of the first differing element of two copies of buffer k. */
static int64_t first_diff(const rr_case *t, int k, const void *a, const void *b) {
  const size_t es = buf_esize(t, k);
  int64_t i = 0;
  while (i < elems_of(t, k) &&
         memcmp((const char *)a + i * (int64_t)es, (const char *)b + i * (int64_t)es, es) == 0)
    ++i;
  return i;
}

/* Every byte of buffer k's margins on rank r still holds the poison. */
static void check_margins(rr_case *t, int r, int k, const char *what) {
  const size_t bytes = alloc_bytes(t, k), es = buf_esize(t, k);
  unsigned char *h = malloc(bytes);
  cr_assert(h);
  cr_assert_eq(collgen__dev_download(t->c, r, h, t->alloc[r][k], bytes), COLLGEN_OK);
  const size_t lo = (size_t)(MARGIN + t->misalign) * es, hi = lo + (size_t)elems_of(t, k) * es;
  for (size_t i = 0; i < bytes; ++i)
    if ((i < lo || i >= hi) && h[i] != POISON)
      cr_assert_fail("%s: rank %d wrote %s byte %lld outside the tensor", t->kernel, r, what,
                     (long long)i - (long long)lo);
  free(h);
}

/* Output k of rank r must be the bytes it had at the first check (the
** same inputs since; kept then) and the bytes of its group's first rank. */
static void same_bytes(rr_case *t, int r, int base, int k, const void *got, const char *what) {
  const size_t bytes = (size_t)elems_of(t, k) * buf_esize(t, k);
  if (!t->first[r][k]) {
    t->first[r][k] = malloc(bytes + 1);
    cr_assert(t->first[r][k]);
    memcpy(t->first[r][k], got, bytes);
  } else {
    cr_assert(memcmp(got, t->first[r][k], bytes) == 0,
              "%s: rank %d: a rerun on the same inputs changed %s (element %lld)", t->kernel, r,
              what, (long long)first_diff(t, k, got, t->first[r][k]));
  }
  cr_assert(memcmp(got, t->first[base][k], bytes) == 0,
            "%s: %s of rank %d differs from rank %d (element %lld)", t->kernel, what, r, base,
            (long long)first_diff(t, k, got, t->first[base][k]));
}

/* Rank r's normed output (dtype) within collgen__ref_close of the exact
** RMSNorm of the reference's residual_out. */
static void check_normed(rr_case *t, int r, int grp, const void *ref_res, const void *got) {
  const float off = collgen__dtype_round(t->dt, t->offset);
  for (int64_t row = 0; row < t->rows; ++row) {
    double scale = collgen__ref_rmsnorm_scale(t->dt, ref_res, row, t->cols, t->eps);
    for (int64_t k = 0; k < t->cols; ++k) {
      int64_t i = row * t->cols + k;
      double exact = collgen__ref_load(t->dt, ref_res, i) * scale *
                     ((double)collgen__ref_load(t->dt, t->hgamma[grp], k) + (double)off);
      double v = collgen__ref_load(t->dt, got, i);
      if (!collgen__ref_close(t->dt, v, exact))
        cr_assert_fail("%s (dtype %s rows %lld cols %lld group %d): rank %d normed row %lld "
                       "col %lld: got %.9g want %.9g", t->kernel, collgen__dtype_name(t->dt),
                       (long long)t->rows, (long long)t->cols, t->group, r, (long long)row,
                       (long long)k, v, exact);
    }
  }
}

/* Rank r's e4m3 codes q and row scales (dynamic) against the reference
** from its residual_out (collgen__ref_fp8_row_ok's bound); the zero row
** exactly 0. */
static void check_fp8(rr_case *t, int r, int grp, const void *ref_res, const uint8_t *q,
                      const float *scales) {
  const float off = collgen__dtype_round(t->dt, t->offset);
  const int dyn = t->fp8 == COLLGEN_FP8_DYNAMIC;
  for (int64_t row = 0; row < t->rows; ++row) {
    int64_t col = 0;
    const uint8_t *qr = q + row * t->cols;
    if (!collgen__ref_fp8_row_ok(t->dt, ref_res, t->hgamma[grp], row, t->cols, t->eps, off,
                                 t->fp8, t->static_scale, qr, dyn ? scales[row] : 0.0f, &col))
      cr_assert_fail("%s (dtype %s rows %lld cols %lld group %d): rank %d row %lld: %s "
                     "(scale %.9g, code %#x at col %lld)", t->kernel, collgen__dtype_name(t->dt),
                     (long long)t->rows, (long long)t->cols, t->group, r, (long long)row,
                     col < 0 ? "wrong scale" : "wrong e4m3 code", dyn ? scales[row] : 0.0,
                     qr[col < 0 ? 0 : col], (long long)col);
    if (row == t->zero_row) {
      /* normed_f32 is +0 * (gamma + weight_offset): -0 where that factor is
      ** negative, which a static scale keeps (code 0x80); a dynamic row of
      ** zeros has scale 0 and every code +0 */
      for (int64_t k = 0; k < t->cols; ++k) {
        const float factor = collgen__ref_load(t->dt, t->hgamma[grp], k) + off;
        const uint8_t want = !dyn && signbit(factor) ? 0x80 : 0x00;
        cr_assert_eq(qr[k], want, "%s: rank %d: the all-zero row %lld has code %#x at col %lld "
                     "(want %#x)", t->kernel, r, (long long)row, qr[k], (long long)k, want);
      }
      cr_assert(!dyn || scales[row] == 0.0f, "%s: rank %d: the all-zero row has scale %g",
                t->kernel, r, dyn ? scales[row] : 0.0);
    }
  }
}

/* Checks every rank after `calls` calls on the uploaded inputs (in place,
** each call adds the sum to the residual again). The first time, keeps
** each rank's outputs; later times, requires the same bits. */
static void rr_verify(rr_case *t, int calls) {
  const size_t es = esize_of(t), bytes = (size_t)t->n * es;
  const float off = collgen__dtype_round(t->dt, t->offset);
  void *ref_res = malloc(bytes + 1), *ref_norm = malloc(bytes + 1), *got = malloc(bytes + 1);
  float *scales = malloc((size_t)t->rows * sizeof(float) + 1);
  cr_assert(ref_res && ref_norm && got && scales);
  for (int base = 0; base < t->c->ndev; base += t->group) {
    const int grp = base / t->group;
    memcpy(ref_res, t->hres[grp], bytes);
    for (int i = 0; i < (t->inplace ? calls : 1); ++i)
      collgen__ref_allreduce_residual_rmsnorm(t->dt, t->group, t->rows, t->cols,
                                              (const void *const *)&t->hx[base],
                                              t->inplace ? ref_res : t->hres[grp],
                                              t->hgamma[grp], t->eps, off, ref_norm, ref_res);
    for (int r = base; r < base + t->group; ++r) {
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->dev[r][RES_OUT], bytes), COLLGEN_OK);
      if (memcmp(got, ref_res, bytes) != 0) {
        int64_t i = first_diff(t, RES_OUT, got, ref_res);
        cr_assert_fail("%s (dtype %s rows %lld cols %lld group %d in place %d): rank %d "
                       "residual_out element %lld: got %.9g want %.9g", t->kernel,
                       collgen__dtype_name(t->dt), (long long)t->rows, (long long)t->cols,
                       t->group, t->inplace, r, (long long)i, collgen__ref_load(t->dt, got, i),
                       collgen__ref_load(t->dt, ref_res, i));
      }
      if (t->fp8 == COLLGEN_FP8_NONE) {
        cr_assert_eq(collgen__dev_download(t->c, r, got, t->dev[r][NORMED], bytes), COLLGEN_OK);
        check_normed(t, r, grp, ref_res, got);
        same_bytes(t, r, base, NORMED, got, "normed");
        check_margins(t, r, NORMED, "normed");
      } else {
        cr_assert_eq(collgen__dev_download(t->c, r, got, t->dev[r][FP8], (size_t)t->n),
                     COLLGEN_OK);
        if (t->fp8 == COLLGEN_FP8_DYNAMIC)
          cr_assert_eq(collgen__dev_download(t->c, r, scales, t->dev[r][SCALES],
                                             (size_t)t->rows * sizeof(float)), COLLGEN_OK);
        check_fp8(t, r, grp, ref_res, got, scales);
        same_bytes(t, r, base, FP8, got, "the e4m3 codes");
        check_margins(t, r, FP8, "e4m3 codes");
        if (t->fp8 == COLLGEN_FP8_DYNAMIC) {
          same_bytes(t, r, base, SCALES, scales, "row_scales");
          check_margins(t, r, SCALES, "row_scales");
        }
      }
      cr_assert_eq(collgen__dev_download(t->c, r, got, t->dev[r][X], bytes), COLLGEN_OK);
      cr_assert(memcmp(got, t->hx[r], bytes) == 0, "%s: rank %d: x was modified", t->kernel, r);
      check_margins(t, r, t->inplace ? RES_IN : RES_OUT, "residual_out");
    }
  }
  free(ref_res);
  free(ref_norm);
  free(got);
  free(scales);
}

/* f32 FP8 calls: the plain op's normed output on the same inputs is the
** kernels' normed_f32 itself (same plan, same sum order), so the codes and
** scales kept from the FP8 run must be, bit for bit, the CPU's
** quantization of it. */
static void check_fp8_against_plain_f32(rr_case *t) {
  const size_t bytes = (size_t)t->n * sizeof(float);
  float *y = malloc(bytes + 1), *scales = malloc((size_t)t->rows * sizeof(float) + 1);
  uint8_t *q = malloc((size_t)t->n + 1);
  cr_assert(y && scales && q);
  rr_upload(t);
  cr_assert_eq(rr_call_mode(t, COLLGEN_FP8_NONE), COLLGEN_OK, "%s", collgen_comm_last_error(t->c));
  cr_assert_eq(collgen__dev_sync_all(t->c, t->streams), COLLGEN_OK, "%s", t->c->err);
  for (int r = 0; r < t->c->ndev; ++r) {
    cr_assert_eq(collgen__dev_download(t->c, r, y, t->dev[r][NORMED], bytes), COLLGEN_OK);
    for (int64_t row = 0; row < t->rows; ++row)
      collgen__ref_e4m3_row(t->fp8, t->static_scale, y + row * t->cols, t->cols,
                            q + row * t->cols, &scales[row]);
    cr_assert(memcmp(q, t->first[r][FP8], (size_t)t->n) == 0,
              "%s: rank %d: e4m3 code %lld is not the quantization of the plain op's normed "
              "output", t->kernel, r, (long long)first_diff(t, FP8, q, t->first[r][FP8]));
    if (t->fp8 == COLLGEN_FP8_DYNAMIC)
      cr_assert(memcmp(scales, t->first[r][SCALES], (size_t)t->rows * sizeof(float)) == 0,
                "%s: rank %d: row scale %lld is not max|normed| / 448 of the plain op",
                t->kernel, r, (long long)first_diff(t, SCALES, scales, t->first[r][SCALES]));
  }
  free(y);
  free(scales);
  free(q);
}

/* Counts which kernels the checks reached (coverage of the sweep). */
static char reached[256][96];
static int nreached;

static void note_kernel(const rr_case *t) {
  for (int i = 0; i < nreached; ++i)
    if (strcmp(reached[i], t->kernel) == 0) return;
  if (nreached < 256) snprintf(reached[nreached++], 96, "%s", t->kernel);
}

static int reached_matching(const char *a, const char *b) {
  int n = 0;
  for (int i = 0; i < nreached; ++i) n += strstr(reached[i], a) && strstr(reached[i], b);
  return n;
}

/* A case with the defaults: eps 1e-6, weight_offset 1 for f16 (0
** otherwise), the plain op, no zero row. */
static void rr_init(rr_case *t, collgen_comm_t *c, collgen_dtype_t dt, int group, int64_t rows,
                    int64_t cols, int inplace, int misalign) {
  memset(t, 0, sizeof *t);
  t->c = c;
  t->dt = dt;
  t->group = group ? group : c->ndev;
  t->rows = rows;
  t->cols = cols;
  t->inplace = inplace;
  t->misalign = misalign;
  t->eps = 1e-6f;
  t->offset = dt == COLLGEN_DTYPE_F16 ? 1.0f : 0.0f;
  t->fp8 = COLLGEN_FP8_NONE;
  t->zero_row = -1;
}

/* Turns a case into an FP8 call of `mode`: a static scale that saturates
** the larger values (|y| > 1.344) and row 1 all zero. */
static void rr_make_fp8(rr_case *t, collgen_fp8_mode_t mode) {
  t->fp8 = mode;
  t->static_scale = mode == COLLGEN_FP8_STATIC ? 0.003f : 0.0f;
  t->zero_row = 1;
}

/* Fresh inputs, `calls` calls, check; then the same inputs again (the
** residual re-uploaded when in place) must give the same bits; f32 FP8
** calls of one call are also checked against the plain op. Frees t. */
static void rr_check_case(rr_case *t, int calls) {
  rr_setup(t);
  note_kernel(t);
  rr_fill(t);
  rr_run(t, calls);
  rr_verify(t, calls);
  rr_upload(t);
  rr_run(t, calls);
  rr_verify(t, calls);
  if (t->fp8 != COLLGEN_FP8_NONE && t->dt == COLLGEN_DTYPE_F32 && calls == 1)
    check_fp8_against_plain_f32(t);
  rr_teardown(t);
}

static void rr_check(collgen_comm_t *c, collgen_dtype_t dt, int group, int64_t rows, int64_t cols,
                     int inplace, int misalign, int calls) {
  rr_case t;
  rr_init(&t, c, dt, group, rows, cols, inplace, misalign);
  rr_check_case(&t, calls);
}

static void rr_check_fp8(collgen_comm_t *c, collgen_fp8_mode_t mode, collgen_dtype_t dt,
                         int group, int64_t rows, int64_t cols, int inplace, int misalign,
                         int calls) {
  rr_case t;
  rr_init(&t, c, dt, group, rows, cols, inplace, misalign);
  rr_make_fp8(&t, mode);
  rr_check_case(&t, calls);
}

static const int64_t RR_COLS[] = {1, 7, 100, 1000, 4095, 4096, 5120, 8192, 16384, 40000};
#define LL_BYTES (256 << 10) /* the LL and one-shot size of the planner */

/* Per cols and dtype: 1 and 3 rows, the most rows of the LL / one-shot size
** and one more, and about 4 MB (an odd count). */
Test(residual_rmsnorm, two_ranks_every_dtype_cols_and_algorithm, .timeout = 2400) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int dt = 0; dt < 3; ++dt)
    for (size_t k = 0; k < sizeof RR_COLS / sizeof RR_COLS[0]; ++k) {
      const int64_t cols = RR_COLS[k], row_bytes = cols * collgen__dtype_bytes((collgen_dtype_t)dt);
      const int64_t most = LL_BYTES / row_bytes;
      const int64_t rows[] = {1, 3, most, most + 1, ((4 << 20) / row_bytes) | 1};
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
        if (rows[i] < 1 || (i > 0 && rows[i] == rows[i - 1])) continue;
        rr_check(c, (collgen_dtype_t)dt, 0, rows[i], cols, (int)(i % 2), 0, 1);
        if (i == 2 || i == 4) rr_check(c, (collgen_dtype_t)dt, 0, rows[i], cols, 0, 1, 1);
      }
    }
  collgen_comm_destroy(c);
  for (int i = 0; i < nreached; ++i) cr_log_info("reached %s", reached[i]);
  cr_expect_gt(reached_matching("_ll_u", "_v8_"), 0, "no LL kernel was reached");
  cr_expect_gt(reached_matching("_oneshot_u", "_v1_"), 0, "no scalar one-shot kernel");
  cr_expect_gt(reached_matching("_oneshot_loop", ""), 0, "no looped one-shot kernel");
  cr_expect_gt(reached_matching("_rowsplit_u", "_v8_"), 0, "no vector row-split kernel");
  cr_expect_gt(reached_matching("_rowsplit_u", "_v1_"), 0, "no scalar row-split kernel");
  cr_expect_gt(reached_matching("_rowsplit_loop", ""), 0, "no looped row-split kernel");
}

/* The FP8 output, both modes: per cols and dtype 1, 3 and (looped rows
** aside) 4 rows of LL or one-shot size, the first row-split count, and
** about 1 MB; in place and not, scalar (unaligned) and vector. */
Test(residual_rmsnorm, fp8_two_ranks_every_dtype_cols_and_algorithm, .timeout = 2400) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  for (int mode = COLLGEN_FP8_DYNAMIC; mode <= COLLGEN_FP8_STATIC; ++mode)
    for (int dt = 0; dt < 3; ++dt)
      for (size_t k = 0; k < sizeof RR_COLS / sizeof RR_COLS[0]; ++k) {
        const int64_t cols = RR_COLS[k], row_bytes = cols * collgen__dtype_bytes((collgen_dtype_t)dt);
        const int64_t rows[] = {1, 3, LL_BYTES / row_bytes + 1, ((1 << 20) / row_bytes) | 1};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
          if (rows[i] < 1 || (i > 0 && rows[i] <= rows[i - 1])) continue;
          rr_check_fp8(c, (collgen_fp8_mode_t)mode, (collgen_dtype_t)dt, 0, rows[i], cols,
                       (int)(i % 2), (int)(i == 1), 1);
        }
      }
  collgen_comm_destroy(c);
  for (int i = 0; i < nreached; ++i) cr_log_info("reached %s", reached[i]);
  static const char *const algos[] = {"_ll_u", "_oneshot_u", "_oneshot_loop", "_rowsplit_u",
                                      "_rowsplit_loop"};
  static const char *const modes[] = {"_e4m3_dynamic", "_e4m3_static"};
  for (size_t a = 0; a < sizeof algos / sizeof algos[0]; ++a)
    for (size_t m = 0; m < 2; ++m)
      cr_expect_gt(reached_matching(algos[a], modes[m]), 0, "no *%s*%s kernel was reached",
                   algos[a], modes[m]);
  cr_expect_gt(reached_matching("_v1_", "_e4m3_"), 0, "no scalar FP8 kernel");
  cr_expect_gt(reached_matching("_v4_", "_e4m3_"), 0, "no f32 vector FP8 kernel");
}

/* Groups of one (the "local" kernel: no barrier, one block per row, or a
** grid-stride loop under a small max_blocks): per dtype and cols 1, 3 and
** 301 rows and about 4 MB, in place and not, scalar (unaligned) and vector;
** FP8 output in both modes at the widths that change the row layout. */
Test(residual_rmsnorm, groups_of_one_every_dtype_cols_and_fp8_mode, .timeout = 900) {
  collgen_comm_t *wide = make_comm(2, 0, 0, 0), *narrow = make_comm(2, 4, 0, 0);
  for (int dt = 0; dt < 3; ++dt)
    for (size_t k = 0; k < sizeof RR_COLS / sizeof RR_COLS[0]; ++k) {
      const int64_t cols = RR_COLS[k], row_bytes = cols * collgen__dtype_bytes((collgen_dtype_t)dt);
      const int64_t rows[] = {1, 3, 301, ((4 << 20) / row_bytes) | 1};
      for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i)
        rr_check(i == 2 ? narrow : wide, (collgen_dtype_t)dt, 1, rows[i], cols, (int)(i % 2),
                 (int)(i == 1), 1);
    }
  static const int64_t FP8_COLS[] = {1000, 4096, 5120, 8192, 40000};
  for (int mode = COLLGEN_FP8_DYNAMIC; mode <= COLLGEN_FP8_STATIC; ++mode)
    for (int dt = 0; dt < 3; ++dt)
      for (size_t k = 0; k < sizeof FP8_COLS / sizeof FP8_COLS[0]; ++k) {
        rr_check_fp8(wide, (collgen_fp8_mode_t)mode, (collgen_dtype_t)dt, 1, 3, FP8_COLS[k], 1, 0, 1);
        rr_check_fp8(narrow, (collgen_fp8_mode_t)mode, (collgen_dtype_t)dt, 1, 301, FP8_COLS[k], 0,
                     (int)(k == 0), 1);
      }
  collgen_comm_destroy(wide);
  collgen_comm_destroy(narrow);
  for (int i = 0; i < nreached; ++i) cr_log_info("reached %s", reached[i]);
  cr_expect_gt(reached_matching("_g1_", "_v8_local_u"), 0, "no vector group-of-one kernel");
  cr_expect_gt(reached_matching("_g1_", "_v1_local_u"), 0, "no scalar group-of-one kernel");
  cr_expect_gt(reached_matching("_g1_", "_local_loop"), 0, "no looped group-of-one kernel");
  cr_expect_gt(reached_matching("_local_u", "_e4m3_dynamic"), 0, "no FP8 dynamic group-of-one kernel");
  cr_expect_gt(reached_matching("_local_u", "_e4m3_static"), 0, "no FP8 static group-of-one kernel");
}

/* Groups of one whose traffic (4 x rows x row bytes) lies just above the
** L2 of an sm_90 part (up to 1.4 times it): the planner streams them (x and
** residual_in loaded without L1 allocation, both outputs stored
** evict-first: "_cs" kernels). Per dtype, in place and not, each checked
** like any call; unaligned rows keep the plain scalar kernel. Other archs
** run the same cases on plain kernels. */
Test(residual_rmsnorm, groups_of_one_above_the_l2_stream, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  static const struct { collgen_dtype_t dt; int64_t cols, rows; } big[] = {
      {COLLGEN_DTYPE_BF16, 4096, 2001}, {COLLGEN_DTYPE_F16, 1000, 8001},
      {COLLGEN_DTYPE_F32, 2048, 2001}};
  for (size_t k = 0; k < sizeof big / sizeof big[0]; ++k) {
    rr_check(c, big[k].dt, 1, big[k].rows, big[k].cols, 0, 0, 1);
    rr_check(c, big[k].dt, 1, big[k].rows, big[k].cols, 1, 0, 1);
    rr_check(c, big[k].dt, 1, big[k].rows, big[k].cols, 0, 1, 1);
  }
  const int sm90 = strncmp(c->arch[0], "sm_90", 5) == 0;
  collgen_comm_destroy(c);
  for (int i = 0; i < nreached; ++i) cr_log_info("reached %s", reached[i]);
  cr_expect_eq(reached_matching("_g1_", "_cs"), sm90 ? 3 : 0, "streamed kernels reached");
  cr_expect_gt(reached_matching("_g1_", "_v1_local_u"), 0, "no scalar group-of-one kernel");
}

/* Dynamic scaling: an all-zero row gets scale 0 and code 0 even with eps
** 0, where its normed_f32 is NaN (0 * inf); the other rows are checked as
** usual. LL, looped and scalar rows. */
Test(residual_rmsnorm, fp8_zero_rows_with_eps_0, .timeout = 300) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  static const int64_t cols[] = {4096, 40000, 100};
  for (size_t k = 0; k < sizeof cols / sizeof cols[0]; ++k) {
    rr_case t;
    rr_init(&t, c, COLLGEN_DTYPE_BF16, 0, 5, cols[k], 0, k == 2);
    rr_make_fp8(&t, COLLGEN_FP8_DYNAMIC);
    t.eps = 0.0f;
    rr_check_case(&t, 1);
  }
  collgen_comm_destroy(c);
}

/* Zero rows or zero cols: success, nothing launched, nothing written. */
Test(residual_rmsnorm, empty_calls_write_nothing, .timeout = 120) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  collgen_stream_t s[2];
  make_streams(c, s);
  void *buf[2][NBUF];
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < NBUF; ++k) {
      cr_assert_eq(collgen__dev_alloc(c, r, 4096, &buf[r][k]), COLLGEN_OK);
      cr_assert_eq(collgen__dev_fill(c, r, buf[r][k], POISON, 4096), COLLGEN_OK);
    }
  int64_t no_rows[2] = {0, 4096}, no_cols[3] = {5, 3, 0};
  const int64_t *a[2] = {no_rows, no_rows}, *b[2] = {no_cols, no_cols};
  const void *x[2] = {buf[0][X], buf[1][X]}, *ri[2] = {buf[0][RES_IN], buf[1][RES_IN]};
  const void *gm[2] = {buf[0][GAMMA], buf[1][GAMMA]};
  void *ro[2] = {buf[0][RES_OUT], buf[1][RES_OUT]}, *nm[2] = {buf[0][NORMED], buf[1][NORMED]};
  cr_expect_eq(collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_BF16, 2, a, x, ri, nm, ro, gm,
                                                  1e-6f, 0.0f, 0, s), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(collgen_allreduce_residual_rmsnorm(c, COLLGEN_DTYPE_F32, 3, b, x, ri, nm, ro, gm,
                                                  1e-6f, 0.0f, 1, s), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  void *q[2] = {buf[0][FP8], buf[1][FP8]};
  float *sc[2] = {buf[0][SCALES], buf[1][SCALES]};
  cr_expect_eq(collgen_allreduce_residual_rmsnorm_fp8(c, COLLGEN_DTYPE_BF16, 2, a, x, ri, q, sc,
                                                      ro, gm, 1e-6f, 0.0f, COLLGEN_FP8_DYNAMIC,
                                                      0.0f, 0, s), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_expect_eq(collgen_allreduce_residual_rmsnorm_fp8(c, COLLGEN_DTYPE_F16, 3, b, x, ri, q, NULL,
                                                      ro, gm, 1e-6f, 0.0f, COLLGEN_FP8_STATIC,
                                                      0.5f, 0, s), COLLGEN_OK, "%s",
               collgen_comm_last_error(c));
  cr_assert_eq(collgen__dev_sync_all(c, s), COLLGEN_OK, "%s", c->err);
  unsigned char h[4096];
  for (int r = 0; r < 2; ++r)
    for (int k = 0; k < NBUF; ++k) {
      cr_assert_eq(collgen__dev_download(c, r, h, buf[r][k], sizeof h), COLLGEN_OK);
      for (size_t i = 0; i < sizeof h; ++i)
        cr_assert_eq(h[i], POISON, "rank %d buffer %d byte %zu written", r, k, i);
      collgen__dev_free(c, r, buf[r][k]);
    }
  free_streams(c, s);
  collgen_comm_destroy(c);
}

/* Every group size of 4 and 8 ranks mapped onto the GPUs: LL, row split
** with uneven and empty slices (5 rows over 8 ranks), unaligned, groups of
** one (still a kernel), f32 LL at 8 ranks (the kernel at the register
** limit). */
Test(residual_rmsnorm, four_and_eight_ranks_every_group_size, .timeout = 2400) {
  collgen_comm_t *c4 = make_comm(4, 4, 0, 0);
  for (int g = 1; g <= 4; g *= 2) {
    rr_check(c4, COLLGEN_DTYPE_BF16, g, 7, 4096, 1, 0, 1);
    rr_check(c4, COLLGEN_DTYPE_BF16, g, 301, 4096, 0, 0, 1);
    rr_check(c4, COLLGEN_DTYPE_F32, g, 5, 1000, 1, 1, 1);
  }
  collgen_comm_destroy(c4);
  collgen_comm_t *c8 = make_comm(8, 4, 0, 0);
  for (int g = 1; g <= 8; g *= 2) {
    rr_check(c8, COLLGEN_DTYPE_BF16, g, 5, 8192, 1, 0, 1);
    rr_check(c8, COLLGEN_DTYPE_F16, g, 67, 8192, 0, 0, 1);
    rr_check(c8, COLLGEN_DTYPE_F32, g, 3, 8192, 0, 0, 1);
    rr_check(c8, COLLGEN_DTYPE_BF16, g, 5, 40000, 1, 0, 1);
  }
  collgen_comm_destroy(c8);
}

/* The FP8 output over every group size of 4 and 8 ranks: LL, row split
** with empty slices, looped, unaligned, groups of one; f32 8192 at 8 ranks
** is LL with static scaling and one-shot with dynamic scaling (the
** planner's one exception). */
Test(residual_rmsnorm, fp8_four_and_eight_ranks_every_group_size, .timeout = 2400) {
  const collgen_fp8_mode_t DYN = COLLGEN_FP8_DYNAMIC, ST = COLLGEN_FP8_STATIC;
  collgen_comm_t *c4 = make_comm(4, 4, 0, 0);
  for (int g = 1; g <= 4; g *= 2) {
    rr_check_fp8(c4, DYN, COLLGEN_DTYPE_BF16, g, 7, 4096, 1, 0, 1);
    rr_check_fp8(c4, ST, COLLGEN_DTYPE_BF16, g, 301, 4096, 0, 0, 1);
    rr_check_fp8(c4, DYN, COLLGEN_DTYPE_F32, g, 5, 1000, 1, 1, 1);
  }
  collgen_comm_destroy(c4);
  collgen_comm_t *c8 = make_comm(8, 4, 0, 0);
  for (int g = 1; g <= 8; g *= 2) {
    rr_check_fp8(c8, DYN, COLLGEN_DTYPE_BF16, g, 5, 8192, 1, 0, 1);
    rr_check_fp8(c8, ST, COLLGEN_DTYPE_F16, g, 67, 8192, 0, 0, 1);
    rr_check_fp8(c8, DYN, COLLGEN_DTYPE_F32, g, 3, 8192, 0, 0, 1);
    rr_check_fp8(c8, ST, COLLGEN_DTYPE_F32, g, 3, 8192, 1, 0, 1);
    rr_check_fp8(c8, DYN, COLLGEN_DTYPE_BF16, g, 5, 40000, 1, 0, 1);
  }
  collgen_comm_destroy(c8);
}

/* Calls back to back without a sync in between, in place (the residual
** accumulates every call; the reference repeats it): LL epochs and barrier
** counters must stay in step, and no rank may run ahead. */
Test(residual_rmsnorm, back_to_back_calls, .timeout = 900) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  rr_check(c, COLLGEN_DTYPE_BF16, 0, 8, 4096, 1, 0, 200); /* LL */
  rr_check(c, COLLGEN_DTYPE_BF16, 0, 8, 4096, 0, 0, 200);
  rr_check(c, COLLGEN_DTYPE_F32, 0, 301, 4096, 1, 0, 50);  /* row split */
  rr_check(c, COLLGEN_DTYPE_F16, 0, 9, 8192, 1, 1, 50);    /* scalar one-shot */
  rr_check_fp8(c, COLLGEN_FP8_DYNAMIC, COLLGEN_DTYPE_BF16, 0, 8, 4096, 1, 0, 100); /* LL */
  rr_check_fp8(c, COLLGEN_FP8_STATIC, COLLGEN_DTYPE_F32, 0, 301, 4096, 1, 0, 20);
  collgen_comm_destroy(c);
}

/* The fused op interleaved with the other ops and other group sizes on one
** communicator: the LL epochs and barrier counters are shared per pair. */
Test(residual_rmsnorm, interleaved_with_other_ops_and_groups, .timeout = 900) {
  collgen_comm_t *c = make_comm(4, 4, 0, 0);
  int64_t rows[4] = {3, 0, 5, 1};
  for (int round = 0; round < 3; ++round) {
    rr_check(c, COLLGEN_DTYPE_BF16, 2, 8, 4096, 1, 0, 1);       /* LL, pairs */
    ar_check(c, COLLGEN_DTYPE_BF16, 1001, 4, 0, 0, 1);           /* LL allreduce, all four */
    rr_check(c, COLLGEN_DTYPE_BF16, 4, 301, 4096, 1, 0, 1);     /* row split, all four */
    rms_check(c, COLLGEN_DTYPE_BF16, 2, rows, 1024, 1e-6f, 1.0f); /* LL allgather, pairs */
    rr_check(c, COLLGEN_DTYPE_F32, 4, 4, 2048, 0, 0, 1);        /* LL, all four */
    ar_check(c, COLLGEN_DTYPE_F32, 300007, 2, 0, 0, 1);          /* two-shot, pairs */
    rr_check_fp8(c, COLLGEN_FP8_DYNAMIC, COLLGEN_DTYPE_BF16, 2, 8, 4096, 0, 0, 1); /* LL, FP8 */
  }
  collgen_comm_destroy(c);
}

/* Captures one call per rank into a graph, then replays it 50 times with
** fresh inputs (uploaded into the same buffers) and checks every replay. */
static void rr_graph_check(int64_t rows, int64_t cols, int inplace, int misalign,
                           collgen_fp8_mode_t fp8) {
  collgen_comm_t *c = make_comm(2, 0, 0, 0);
  rr_case t;
  rr_init(&t, c, COLLGEN_DTYPE_BF16, 2, rows, cols, inplace, misalign);
  if (fp8 != COLLGEN_FP8_NONE) rr_make_fp8(&t, fp8);
  t.eps = 1e-5f;
  t.offset = 1.0f;
  rr_setup(&t);
  rr_fill(&t);
  rr_run(&t, 1); /* eager first: loads the modules */
  rr_verify(&t, 1);
  CUgraph graph[2];
  CUgraphExec exec[2];
  graph_capture_begin(c, t.streams);
  cr_assert_eq(rr_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
  graph_capture_end(c, t.streams, graph, exec);
  for (int it = 0; it < 50; ++it) {
    rr_fill(&t);
    for (int r = 0; r < 2; ++r) /* new data: outputs may differ from the first run */
      for (int k = 0; k < NBUF; ++k) {
        free(t.first[r][k]);
        t.first[r][k] = NULL;
      }
    graph_launch(c, t.streams, exec);
    cr_assert_eq(collgen__dev_sync_all(c, t.streams), COLLGEN_OK, "%s", c->err);
    rr_verify(&t, 1);
  }
  graph_destroy(c, graph, exec);
  rr_teardown(&t);
  collgen_comm_destroy(c);
}

Test(residual_rmsnorm, graph_capture_and_replay_with_new_data, .timeout = 900) {
  rr_graph_check(8, 4096, 1, 0, COLLGEN_FP8_NONE);   /* LL, in place: epochs advance on the device */
  rr_graph_check(300, 4096, 1, 0, COLLGEN_FP8_NONE); /* row split: barrier counters */
  rr_graph_check(9, 4096, 0, 1, COLLGEN_FP8_NONE);   /* scalar one-shot */
}

Test(residual_rmsnorm, fp8_graph_capture_and_replay_with_new_data, .timeout = 900) {
  rr_graph_check(8, 4096, 1, 0, COLLGEN_FP8_DYNAMIC);  /* LL */
  rr_graph_check(300, 4096, 1, 0, COLLGEN_FP8_DYNAMIC); /* row split */
  rr_graph_check(9, 4096, 0, 1, COLLGEN_FP8_STATIC);   /* scalar one-shot */
}

/* A peer that never launches: the waiting rank reports COLLGEN_ERR_TIMEOUT
** naming it, for the LL wait and for the barrier. */
Test(residual_rmsnorm, missing_peer_is_reported_not_hung, .timeout = 120) {
  static const int64_t rows[] = {8, 300}; /* LL, row split */
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; ++i) {
    collgen_comm_t *c = make_comm(2, 0, 300, 0x1); /* launch rank 0 only */
    rr_case t;
    rr_init(&t, c, COLLGEN_DTYPE_BF16, 2, rows[i], 4096, 0, 0);
    rr_setup(&t);
    rr_fill(&t);
    double t0 = collgen__now_ms();
    cr_assert_eq(rr_call(&t), COLLGEN_OK, "%s", collgen_comm_last_error(c));
    int rc = collgen__dev_sync_all(c, t.streams);
    double ms = collgen__now_ms() - t0;
    cr_expect_eq(rc, COLLGEN_ERR_TIMEOUT, "%s: got %s", t.kernel, collgen_status_name(rc));
    cr_expect_lt(ms, 300 + 2000, "%s: gave up after %.0f ms", t.kernel, ms);
    const char *msg = collgen_comm_last_error(c);
    cr_expect(strstr(msg, "rank 0 (device") && strstr(msg, "for rank 1 (device"), "%s: %s",
              t.kernel, msg);
    cr_expect_eq(rr_call(&t), COLLGEN_ERR_TIMEOUT, "%s: the next call reports it too", t.kernel);
    rr_teardown(&t);
    collgen_comm_destroy(c);
  }
}
