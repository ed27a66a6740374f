/*
** bad_inputs.c -- the table of refused calls (see bad_inputs.h). Each row:
** what is wrong, the call, the status it must return and a fragment of the
** message that must explain it. Buffers of rank r: IN(r), OUT(r), NRM(r),
** RES(r), GAM(r) and a spare, SPR(r), each BAD_BUFFER_BYTES, poisoned.
** allreduce_residual_rmsnorm uses IN as x, RES as residual_in, OUT as
** residual_out; its FP8 output NRM for the codes, SPR for the row scales.
*/
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bad_inputs.h"

#define IN(r) (e->buf[r][0])
#define OUT(r) (e->buf[r][1])
#define NRM(r) (e->buf[r][2])
#define RES(r) (e->buf[r][3])
#define GAM(r) (e->buf[r][4])
#define SPR(r) (e->buf[r][5])
#define AT(p, off) ((void *)((char *)(p) + (off)))

void bad_env_create(bad_env *e, const int devices[2], const collgen_comm_options_t *options) {
  memset(e, 0, sizeof *e);
  cr_assert_eq(collgen_comm_create(&e->c, 2, devices, options), COLLGEN_OK, "%s",
               collgen_last_error());
  for (int r = 0; r < 2; ++r) {
    cr_assert_eq(collgen__dev_stream_create(e->c, r, &e->streams[r]), COLLGEN_OK);
    for (int b = 0; b < BAD_BUFFERS; ++b) {
      cr_assert_eq(collgen__dev_alloc(e->c, r, BAD_BUFFER_BYTES, &e->buf[r][b]), COLLGEN_OK);
      cr_assert_eq(collgen__dev_fill(e->c, r, e->buf[r][b], BAD_POISON, BAD_BUFFER_BYTES),
                   COLLGEN_OK);
    }
  }
  cr_assert_eq(collgen__dev_sync_all(e->c, e->streams), COLLGEN_OK);
}

void bad_env_check_and_destroy(bad_env *e) {
  unsigned char *h = malloc(BAD_BUFFER_BYTES);
  cr_assert(h);
  cr_assert_eq(collgen__dev_sync_all(e->c, e->streams), COLLGEN_OK, "%s", e->c->err);
  for (int r = 0; r < 2; ++r)
    for (int b = 0; b < BAD_BUFFERS; ++b) {
      cr_assert_eq(collgen__dev_download(e->c, r, h, e->buf[r][b], BAD_BUFFER_BYTES), COLLGEN_OK);
      for (int i = 0; i < BAD_BUFFER_BYTES; ++i)
        if (h[i] != BAD_POISON) cr_assert_fail("rank %d buffer %d byte %d was written", r, b, i);
      collgen__dev_free(e->c, r, e->buf[r][b]);
    }
  free(h);
  for (int r = 0; r < 2; ++r) collgen__dev_stream_destroy(e->c, r, e->streams[r]);
  collgen_comm_destroy(e->c);
}

static int ncases;

/* tls: the message is in collgen_last_error() (calls without a handle). */
static void expect(const bad_env *e, const char *what, int rc, int code, const char *frag,
                   int tls) {
  const char *msg = tls ? collgen_last_error() : collgen_comm_last_error(e->c);
  ++ncases;
  cr_expect_eq(rc, code, "%s: got %s (%s), want %s", what, collgen_status_name(rc), msg,
               collgen_status_name(code));
  cr_expect(strstr(msg, frag) != NULL, "%s: message '%s' lacks '%s'", what, msg, frag);
}

/* An op of one input and one output per rank (allreduce_sum,
** reduce_scatter_sum) with per-rank shapes and buffers. */
typedef int (*in_out_op)(collgen_comm_t *, collgen_dtype_t, int, const int64_t *const *,
                         const void *const *, void *const *, int, const collgen_stream_t *);
static int in_out(in_out_op fn, bad_env *e, collgen_dtype_t dt, int rank, const int64_t *s0,
                  const int64_t *s1, const void *in0, const void *in1, void *out0, void *out1,
                  int group) {
  const int64_t *shapes[2] = {s0, s1};
  const void *in[2] = {in0, in1};
  void *out[2] = {out0, out1};
  return fn(e->c, dt, rank, shapes, in, out, group, e->streams);
}
#define ar(...) in_out(collgen_allreduce_sum, __VA_ARGS__)

/* allgather_rmsnorm; rank 1 always uses its own, valid buffers. */
static int ag(bad_env *e, collgen_dtype_t dt, int rank, const int64_t *s0, const int64_t *s1,
              const void *in0, void *nrm0, void *res0, const void *gam0, float eps, float wo,
              int group) {
  const int64_t *shapes[2] = {s0, s1};
  const void *in[2] = {in0, IN(1)}, *gam[2] = {gam0, GAM(1)};
  void *nrm[2] = {nrm0, NRM(1)}, *res[2] = {res0, RES(1)};
  return collgen_allgather_rmsnorm(e->c, dt, rank, shapes, in, nrm, res, gam, eps, wo, group,
                                   e->streams);
}

#define AR_OK_BUFS IN(0), IN(1), OUT(0), OUT(1)
#define CASE(what, code, frag, call) expect(e, what, (call), code, frag, 0)
#define CASE_TLS(what, code, frag, call) expect(e, what, (call), code, frag, 1)

static void comm_cases(bad_env *e, int ndevices) {
  collgen_comm_t *c = NULL;
  int dup[2] = {0, 0}, neg[2] = {0, -1}, nine[9] = {0, 1, 2, 3, 4, 5, 6, 7, 0};
  int missing[2] = {0, ndevices}, ok[2] = {0, ndevices > 1 ? 1 : 0};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.allow_shared_devices = ndevices < 2;
  CASE_TLS("comm out NULL", COLLGEN_ERR_INVALID_ARG, "out is NULL",
           collgen_comm_create(NULL, 2, ok, &o));
  CASE_TLS("0 devices", COLLGEN_ERR_INVALID_ARG, "ndev must be 1..8", collgen_comm_create(&c, 0, ok, &o));
  CASE_TLS("-1 devices", COLLGEN_ERR_INVALID_ARG, "ndev must be 1..8", collgen_comm_create(&c, -1, ok, &o));
  CASE_TLS("9 devices", COLLGEN_ERR_INVALID_ARG, "ndev must be 1..8", collgen_comm_create(&c, 9, nine, &o));
  CASE_TLS("devices NULL", COLLGEN_ERR_INVALID_ARG, "devices is NULL",
           collgen_comm_create(&c, 2, NULL, &o));
  CASE_TLS("device listed twice", COLLGEN_ERR_INVALID_ARG, "listed twice",
           collgen_comm_create(&c, 2, dup, NULL));
  CASE_TLS("negative device", COLLGEN_ERR_NO_DEVICE, "device -1 does not exist",
           collgen_comm_create(&c, 2, neg, &o));
  CASE_TLS("device past the last", COLLGEN_ERR_NO_DEVICE, "does not exist",
           collgen_comm_create(&c, 2, missing, &o));
  o.max_blocks = -1;
  CASE_TLS("max_blocks -1", COLLGEN_ERR_INVALID_ARG, "max_blocks must be 0..256",
           collgen_comm_create(&c, 2, ok, &o));
  o.max_blocks = 257;
  CASE_TLS("max_blocks 257", COLLGEN_ERR_INVALID_ARG, "max_blocks must be 0..256",
           collgen_comm_create(&c, 2, ok, &o));
  o.max_blocks = 0;
  o.timeout_ms = -5;
  CASE_TLS("timeout_ms -5", COLLGEN_ERR_INVALID_ARG, "timeout_ms must be",
           collgen_comm_create(&c, 2, ok, &o));
  o.timeout_ms = COLLGEN_MAX_TIMEOUT_MS + 1;
  CASE_TLS("timeout_ms past 24 h", COLLGEN_ERR_INVALID_ARG, "timeout_ms must be",
           collgen_comm_create(&c, 2, ok, &o));
  cr_expect_null(c, "no refused create returned a communicator");
  collgen_comm_info_t info;
  CASE_TLS("comm_info NULL comm", COLLGEN_ERR_INVALID_ARG, "NULL", collgen_comm_info(NULL, &info));
  CASE_TLS("comm_info NULL info", COLLGEN_ERR_INVALID_ARG, "NULL", collgen_comm_info(e->c, NULL));
  CASE_TLS("comm_check NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL", collgen_comm_check(NULL));
}

static void allreduce_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16, F32 = COLLGEN_DTYPE_F32;
  int64_t n[1] = {1000}, m[1] = {999}, negd[1] = {-4}, big[1] = {COLLGEN_MAX_ELEMS + 1};
  int64_t sq[2] = {(int64_t)1 << 40, (int64_t)1 << 40}, wrap[3] = {1 << 22, 1 << 21, 1 << 21};
  int64_t two[2] = {10, 100}, two_t[2] = {100, 10};
  const int64_t *shapes[2] = {n, n};
  const void *in[2] = {IN(0), IN(1)};
  void *out[2] = {OUT(0), OUT(1)};
  collgen_stream_t *s = e->streams;
  CASE_TLS("allreduce comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
           collgen_allreduce_sum(NULL, BF, 1, shapes, in, out, 0, s));
  CASE("dtype 9", COLLGEN_ERR_INVALID_ARG, "unknown dtype 9", ar(e, (collgen_dtype_t)9, 1, n, n, AR_OK_BUFS, 0));
  CASE("dtype -1", COLLGEN_ERR_INVALID_ARG, "unknown dtype -1", ar(e, (collgen_dtype_t)-1, 1, n, n, AR_OK_BUFS, 0));
  CASE("tensor rank 0", COLLGEN_ERR_INVALID_ARG, "tensor rank 1..8", ar(e, BF, 0, n, n, AR_OK_BUFS, 0));
  CASE("tensor rank 9", COLLGEN_ERR_INVALID_ARG, "tensor rank 1..8", ar(e, BF, 9, n, n, AR_OK_BUFS, 0));
  CASE("shapes NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
       collgen_allreduce_sum(e->c, BF, 1, NULL, in, out, 0, s));
  CASE("streams NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
       collgen_allreduce_sum(e->c, BF, 1, shapes, in, out, 0, NULL));
  CASE("inputs NULL", COLLGEN_ERR_INVALID_ARG, "input array",
       collgen_allreduce_sum(e->c, BF, 1, shapes, NULL, out, 0, s));
  CASE("outputs NULL", COLLGEN_ERR_INVALID_ARG, "output array",
       collgen_allreduce_sum(e->c, BF, 1, shapes, in, NULL, 0, s));
  CASE("shape of rank 1 NULL", COLLGEN_ERR_INVALID_ARG, "shape of rank 1 is NULL", ar(e, BF, 1, n, NULL, AR_OK_BUFS, 0));
  CASE("negative dimension", COLLGEN_ERR_INVALID_ARG, "negative dimension", ar(e, BF, 1, negd, negd, AR_OK_BUFS, 0));
  CASE("shapes differ", COLLGEN_ERR_INVALID_ARG, "shapes differ", ar(e, BF, 1, n, m, AR_OK_BUFS, 0));
  CASE("same count, other dims", COLLGEN_ERR_INVALID_ARG, "shapes differ", ar(e, BF, 2, two, two_t, AR_OK_BUFS, 0));
  CASE("2^40 x 2^40 (wraps to 0)", COLLGEN_ERR_INVALID_ARG, "COLLGEN_MAX_ELEMS", ar(e, BF, 2, sq, sq, AR_OK_BUFS, 0));
  CASE("2^64 elements (wraps to 0)", COLLGEN_ERR_INVALID_ARG, "COLLGEN_MAX_ELEMS", ar(e, BF, 3, wrap, wrap, AR_OK_BUFS, 0));
  CASE("2^40 + 1 elements", COLLGEN_ERR_INVALID_ARG, "COLLGEN_MAX_ELEMS", ar(e, BF, 1, big, big, AR_OK_BUFS, 0));
  CASE("group_size 3 of 2", COLLGEN_ERR_INVALID_ARG, "group_size 3 does not divide", ar(e, BF, 1, n, n, AR_OK_BUFS, 3));
  CASE("group_size -1", COLLGEN_ERR_INVALID_ARG, "group_size -1 does not divide", ar(e, BF, 1, n, n, AR_OK_BUFS, -1));
  CASE("group_size 9", COLLGEN_ERR_INVALID_ARG, "group_size 9 does not divide", ar(e, BF, 1, n, n, AR_OK_BUFS, 9));
  CASE("input of rank 1 NULL", COLLGEN_ERR_INVALID_ARG, "input of rank 1 is NULL",
       ar(e, BF, 1, n, n, IN(0), NULL, OUT(0), OUT(1), 0));
  CASE("output of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "output of rank 0 is NULL",
       ar(e, BF, 1, n, n, IN(0), IN(1), NULL, OUT(1), 0));
  CASE("bf16 input at an odd byte", COLLGEN_ERR_ALIGNMENT, "not aligned to its 2-byte",
       ar(e, BF, 1, n, n, AT(IN(0), 1), IN(1), OUT(0), OUT(1), 0));
  CASE("f32 output at +2 bytes", COLLGEN_ERR_ALIGNMENT, "not aligned to its 4-byte",
       ar(e, F32, 1, n, n, IN(0), IN(1), OUT(0), AT(OUT(1), 2), 0));
  CASE("output 16 bytes into input", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ar(e, BF, 1, n, n, IN(0), IN(1), AT(IN(0), 16), OUT(1), 0));
  CASE("input 16 bytes into output", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ar(e, BF, 1, n, n, IN(0), AT(OUT(1), 16), OUT(0), OUT(1), 0));
  CASE("i32 allreduce", COLLGEN_ERR_INVALID_ARG,
       "allreduce_sum computes on elements: i32 is a copy-only dtype",
       ar(e, COLLGEN_DTYPE_I32, 1, n, n, AR_OK_BUFS, 0));
  CASE("u8 allreduce, groups of one (a copy)", COLLGEN_ERR_INVALID_ARG,
       "u8 is a copy-only dtype", ar(e, COLLGEN_DTYPE_U8, 1, n, n, AR_OK_BUFS, 1));
  CASE("groups of one: overlap still refused", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ar(e, BF, 1, n, n, IN(0), IN(1), AT(IN(0), 2), OUT(1), 1));
}

static void rmsnorm_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16;
  /* 4 rows x 1024 bf16 per rank: an 8 KiB shard, 16 KiB gathered, 2 KiB gamma */
  int64_t sh[2] = {4, 1024}, cols2[2] = {4, 512}, negr[2] = {-1, 1024}, sh3[3] = {2, 2, 1024};
  int64_t huge[2] = {(int64_t)1 << 39, 4096}, r1[1] = {4096};
  const float inf = INFINITY, nan = NAN;
  const int64_t *shapes[2] = {sh, sh};
  const void *in[2] = {IN(0), IN(1)}, *gam[2] = {GAM(0), GAM(1)};
  void *nrm[2] = {NRM(0), NRM(1)}, *res[2] = {RES(0), RES(1)};
  collgen_stream_t *s = e->streams;
#define AG_OK IN(0), NRM(0), RES(0), GAM(0)
  CASE_TLS("rmsnorm comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
           collgen_allgather_rmsnorm(NULL, BF, 2, shapes, in, nrm, res, gam, 1e-6f, 0, 0, s));
  CASE("rmsnorm tensor rank 1", COLLGEN_ERR_INVALID_ARG, "needs tensor rank 2..8",
       ag(e, BF, 1, r1, r1, AG_OK, 1e-6f, 0, 0));
  CASE("rmsnorm dtype 13", COLLGEN_ERR_INVALID_ARG, "unknown dtype 13",
       ag(e, (collgen_dtype_t)13, 2, sh, sh, AG_OK, 1e-6f, 0, 0));
  CASE("i16 allgather_rmsnorm", COLLGEN_ERR_INVALID_ARG,
       "allgather_rmsnorm computes on elements: i16 is a copy-only dtype",
       ag(e, COLLGEN_DTYPE_I16, 2, sh, sh, AG_OK, 1e-6f, 0, 0));
  CASE("eps NaN", COLLGEN_ERR_INVALID_ARG, "eps must be finite", ag(e, BF, 2, sh, sh, AG_OK, nan, 0, 0));
  CASE("eps -1", COLLGEN_ERR_INVALID_ARG, "eps must be finite", ag(e, BF, 2, sh, sh, AG_OK, -1.0f, 0, 0));
  CASE("eps inf", COLLGEN_ERR_INVALID_ARG, "eps must be finite", ag(e, BF, 2, sh, sh, AG_OK, inf, 0, 0));
  CASE("weight_offset inf", COLLGEN_ERR_INVALID_ARG, "weight_offset must be a finite number",
       ag(e, BF, 2, sh, sh, AG_OK, 1e-6f, -inf, 0));
  CASE("weight_offset NaN", COLLGEN_ERR_INVALID_ARG, "weight_offset must be a finite number",
       ag(e, BF, 2, sh, sh, AG_OK, 1e-6f, nan, 0));
  CASE("shard shapes NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
       collgen_allgather_rmsnorm(e->c, BF, 2, NULL, in, nrm, res, gam, 1e-6f, 0, 0, s));
  CASE("rmsnorm inputs NULL", COLLGEN_ERR_INVALID_ARG, "input array",
       collgen_allgather_rmsnorm(e->c, BF, 2, shapes, NULL, nrm, res, gam, 1e-6f, 0, 0, s));
  CASE("normed NULL", COLLGEN_ERR_INVALID_ARG, "normed output array",
       collgen_allgather_rmsnorm(e->c, BF, 2, shapes, in, NULL, res, gam, 1e-6f, 0, 0, s));
  CASE("residual NULL", COLLGEN_ERR_INVALID_ARG, "residual output array",
       collgen_allgather_rmsnorm(e->c, BF, 2, shapes, in, nrm, NULL, gam, 1e-6f, 0, 0, s));
  CASE("gammas NULL", COLLGEN_ERR_INVALID_ARG, "gamma array",
       collgen_allgather_rmsnorm(e->c, BF, 2, shapes, in, nrm, res, NULL, 1e-6f, 0, 0, s));
  CASE("cols differ", COLLGEN_ERR_INVALID_ARG, "only dimension 0 may differ",
       ag(e, BF, 2, sh, cols2, AG_OK, 1e-6f, 0, 0));
  CASE("inner dims differ", COLLGEN_ERR_INVALID_ARG, "only dimension 0 may differ",
       ag(e, BF, 3, sh3, (int64_t[3]){2, 1, 1024}, AG_OK, 1e-6f, 0, 0));
  CASE("negative rows", COLLGEN_ERR_INVALID_ARG, "negative dimension", ag(e, BF, 2, negr, sh, AG_OK, 1e-6f, 0, 0));
  CASE("gathered 2^40 x 4096", COLLGEN_ERR_INVALID_ARG, "COLLGEN_MAX_ELEMS",
       ag(e, BF, 2, huge, huge, AG_OK, 1e-6f, 0, 0));
  CASE("rmsnorm group_size 3", COLLGEN_ERR_INVALID_ARG, "group_size 3 does not divide",
       ag(e, BF, 2, sh, sh, AG_OK, 1e-6f, 0, 3));
  CASE("input of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "input of rank 0 is NULL",
       ag(e, BF, 2, sh, sh, NULL, NRM(0), RES(0), GAM(0), 1e-6f, 0, 0));
  CASE("normed of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "normed output of rank 0 is NULL",
       ag(e, BF, 2, sh, sh, IN(0), NULL, RES(0), GAM(0), 1e-6f, 0, 0));
  CASE("gamma at an odd byte", COLLGEN_ERR_ALIGNMENT, "gamma of rank 0",
       ag(e, BF, 2, sh, sh, IN(0), NRM(0), RES(0), AT(GAM(0), 1), 1e-6f, 0, 0));
  CASE("residual at an odd byte", COLLGEN_ERR_ALIGNMENT, "residual output of rank 0",
       ag(e, BF, 2, sh, sh, IN(0), NRM(0), AT(RES(0), 3), GAM(0), 1e-6f, 0, 0));
  CASE("normed is residual", COLLGEN_ERR_INVALID_ARG, "is the same buffer as",
       ag(e, BF, 2, sh, sh, IN(0), RES(0), RES(0), GAM(0), 1e-6f, 0, 0));
  CASE("normed overlaps residual", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ag(e, BF, 2, sh, sh, IN(0), SPR(0), AT(SPR(0), 8192), GAM(0), 1e-6f, 0, 0));
  CASE("input inside residual", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ag(e, BF, 2, sh, sh, AT(RES(0), 4096), NRM(0), RES(0), GAM(0), 1e-6f, 0, 0));
  CASE("input is residual", COLLGEN_ERR_INVALID_ARG, "input",
       ag(e, BF, 2, sh, sh, RES(0), NRM(0), RES(0), GAM(0), 1e-6f, 0, 0));
  CASE("input overlaps normed", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ag(e, BF, 2, sh, sh, AT(NRM(0), 2048), NRM(0), RES(0), GAM(0), 1e-6f, 0, 0));
  CASE("gamma inside normed", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ag(e, BF, 2, sh, sh, IN(0), NRM(0), RES(0), AT(NRM(0), 4096), 1e-6f, 0, 0));
  CASE("gamma is residual", COLLGEN_ERR_INVALID_ARG, "gamma",
       ag(e, BF, 2, sh, sh, IN(0), NRM(0), RES(0), RES(0), 1e-6f, 0, 0));
  CASE("groups of one: overlap still refused", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ag(e, BF, 2, sh, sh, AT(RES(0), 2), NRM(0), RES(0), GAM(0), 1e-6f, 0, 1));
#undef AG_OK
}

/* allreduce_residual_rmsnorm; rank 1 always uses its own, valid buffers:
** x IN, residual_in RES, normed NRM, residual_out OUT, gamma GAM. */
static int rr(bad_env *e, collgen_dtype_t dt, int rank, const int64_t *s0, const int64_t *s1,
              const void *x0, const void *ri0, void *nrm0, void *ro0, const void *gam0, float eps,
              float wo, int group) {
  const int64_t *shapes[2] = {s0, s1};
  const void *x[2] = {x0, IN(1)}, *ri[2] = {ri0, RES(1)}, *gam[2] = {gam0, GAM(1)};
  void *nrm[2] = {nrm0, NRM(1)}, *ro[2] = {ro0, OUT(1)};
  return collgen_allreduce_residual_rmsnorm(e->c, dt, rank, shapes, x, ri, nrm, ro, gam, eps, wo,
                                            group, e->streams);
}

static void residual_rmsnorm_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16, F32 = COLLGEN_DTYPE_F32;
  /* 4 rows x 1024 bf16 per rank: 8 KiB tensors, 2 KiB gamma */
  int64_t sh[2] = {4, 1024}, other[2] = {4, 512}, negr[2] = {-4, 1024}, r1[1] = {4096};
  int64_t huge[2] = {(int64_t)1 << 30, (int64_t)1 << 20};
  const float nan = NAN, inf = INFINITY;
  const int64_t *shapes[2] = {sh, sh};
  const void *x[2] = {IN(0), IN(1)}, *ri[2] = {RES(0), RES(1)}, *gam[2] = {GAM(0), GAM(1)};
  void *nrm[2] = {NRM(0), NRM(1)}, *ro[2] = {OUT(0), OUT(1)};
  collgen_stream_t *s = e->streams;
#define RR_OK IN(0), RES(0), NRM(0), OUT(0), GAM(0)
  CASE_TLS("residual op comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
           collgen_allreduce_residual_rmsnorm(NULL, BF, 2, shapes, x, ri, nrm, ro, gam, 1e-6f, 0,
                                              0, s));
  CASE("residual op tensor rank 1", COLLGEN_ERR_INVALID_ARG, "needs tensor rank 2..8",
       rr(e, BF, 1, r1, r1, RR_OK, 1e-6f, 0, 0));
  CASE("residual op dtype 15", COLLGEN_ERR_INVALID_ARG, "unknown dtype 15",
       rr(e, (collgen_dtype_t)15, 2, sh, sh, RR_OK, 1e-6f, 0, 0));
  CASE("i64 residual op", COLLGEN_ERR_INVALID_ARG,
       "allreduce_residual_rmsnorm computes on elements: i64 is a copy-only dtype",
       rr(e, COLLGEN_DTYPE_I64, 2, sh, sh, RR_OK, 1e-6f, 0, 0));
  CASE("residual op eps NaN", COLLGEN_ERR_INVALID_ARG, "eps must be finite",
       rr(e, BF, 2, sh, sh, RR_OK, nan, 0, 0));
  CASE("residual op eps -1e-6", COLLGEN_ERR_INVALID_ARG, "eps must be finite",
       rr(e, BF, 2, sh, sh, RR_OK, -1e-6f, 0, 0));
  CASE("residual op eps inf", COLLGEN_ERR_INVALID_ARG, "eps must be finite",
       rr(e, BF, 2, sh, sh, RR_OK, inf, 0, 0));
  CASE("residual op weight_offset NaN", COLLGEN_ERR_INVALID_ARG, "weight_offset must be a finite number",
       rr(e, BF, 2, sh, sh, RR_OK, 1e-6f, nan, 0));
  CASE("residual op shapes NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
       collgen_allreduce_residual_rmsnorm(e->c, BF, 2, NULL, x, ri, nrm, ro, gam, 1e-6f, 0, 0, s));
  CASE("residual op streams NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
       collgen_allreduce_residual_rmsnorm(e->c, BF, 2, shapes, x, ri, nrm, ro, gam, 1e-6f, 0, 0,
                                          NULL));
  CASE("x array NULL", COLLGEN_ERR_INVALID_ARG, "the x array",
       collgen_allreduce_residual_rmsnorm(e->c, BF, 2, shapes, NULL, ri, nrm, ro, gam, 1e-6f, 0,
                                          0, s));
  CASE("residual_in array NULL", COLLGEN_ERR_INVALID_ARG, "the residual_in array",
       collgen_allreduce_residual_rmsnorm(e->c, BF, 2, shapes, x, NULL, nrm, ro, gam, 1e-6f, 0,
                                          0, s));
  CASE("normed array NULL", COLLGEN_ERR_INVALID_ARG, "the normed output array",
       collgen_allreduce_residual_rmsnorm(e->c, BF, 2, shapes, x, ri, NULL, ro, gam, 1e-6f, 0,
                                          0, s));
  CASE("residual_out array NULL", COLLGEN_ERR_INVALID_ARG, "the residual_out array",
       collgen_allreduce_residual_rmsnorm(e->c, BF, 2, shapes, x, ri, nrm, NULL, gam, 1e-6f, 0,
                                          0, s));
  CASE("residual op gammas NULL", COLLGEN_ERR_INVALID_ARG, "the gamma array",
       collgen_allreduce_residual_rmsnorm(e->c, BF, 2, shapes, x, ri, nrm, ro, NULL, 1e-6f, 0,
                                          0, s));
  CASE("residual op shapes differ", COLLGEN_ERR_INVALID_ARG, "shapes differ",
       rr(e, BF, 2, sh, other, RR_OK, 1e-6f, 0, 0));
  CASE("residual op rows differ (3-D)", COLLGEN_ERR_INVALID_ARG, "shapes differ",
       rr(e, BF, 3, (int64_t[3]){2, 2, 1024}, (int64_t[3]){4, 1, 1024}, RR_OK, 1e-6f, 0, 0));
  CASE("residual op negative rows", COLLGEN_ERR_INVALID_ARG, "negative dimension",
       rr(e, BF, 2, negr, negr, RR_OK, 1e-6f, 0, 0));
  CASE("residual op 2^50 elements", COLLGEN_ERR_INVALID_ARG, "COLLGEN_MAX_ELEMS",
       rr(e, BF, 2, huge, huge, RR_OK, 1e-6f, 0, 0));
  CASE("residual op group_size 3", COLLGEN_ERR_INVALID_ARG, "group_size 3 does not divide",
       rr(e, BF, 2, sh, sh, RR_OK, 1e-6f, 0, 3));
  CASE("x of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "x of rank 0 is NULL",
       rr(e, BF, 2, sh, sh, NULL, RES(0), NRM(0), OUT(0), GAM(0), 1e-6f, 0, 0));
  CASE("residual_out of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "residual_out of rank 0 is NULL",
       rr(e, BF, 2, sh, sh, IN(0), RES(0), NRM(0), NULL, GAM(0), 1e-6f, 0, 0));
  CASE("residual_in at an odd byte", COLLGEN_ERR_ALIGNMENT, "residual_in of rank 0",
       rr(e, BF, 2, sh, sh, IN(0), AT(RES(0), 1), NRM(0), OUT(0), GAM(0), 1e-6f, 0, 0));
  CASE("f32 gamma at +2 bytes", COLLGEN_ERR_ALIGNMENT, "not aligned to its 4-byte",
       rr(e, F32, 2, sh, sh, IN(0), RES(0), NRM(0), OUT(0), AT(GAM(0), 2), 1e-6f, 0, 0));
  CASE("normed is residual_out", COLLGEN_ERR_INVALID_ARG, "is the same buffer as",
       rr(e, BF, 2, sh, sh, IN(0), RES(0), OUT(0), OUT(0), GAM(0), 1e-6f, 0, 0));
  CASE("normed is residual_in", COLLGEN_ERR_INVALID_ARG, "is the same buffer as",
       rr(e, BF, 2, sh, sh, IN(0), RES(0), RES(0), OUT(0), GAM(0), 1e-6f, 0, 0));
  CASE("x is residual_out", COLLGEN_ERR_INVALID_ARG, "is the same buffer as",
       rr(e, BF, 2, sh, sh, OUT(0), RES(0), NRM(0), OUT(0), GAM(0), 1e-6f, 0, 0));
  CASE("residual_out 16 bytes into residual_in", COLLGEN_ERR_INVALID_ARG,
       "only exact in-place is allowed",
       rr(e, BF, 2, sh, sh, IN(0), RES(0), NRM(0), AT(RES(0), 16), GAM(0), 1e-6f, 0, 0));
  CASE("normed overlaps x", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rr(e, BF, 2, sh, sh, IN(0), RES(0), AT(IN(0), 4096), OUT(0), GAM(0), 1e-6f, 0, 0));
  CASE("gamma inside residual_out", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rr(e, BF, 2, sh, sh, IN(0), RES(0), NRM(0), OUT(0), AT(OUT(0), 2048), 1e-6f, 0, 0));
  CASE("residual op, groups of one: overlap still refused", COLLGEN_ERR_INVALID_ARG,
       "partially overlaps",
       rr(e, BF, 2, sh, sh, IN(0), RES(0), AT(SPR(0), 2), AT(SPR(0), 8192), GAM(0), 1e-6f, 0, 1));
#undef RR_OK
}

/* allreduce_residual_rmsnorm_fp8 of bf16 [4, 1024] on both ranks (8 KiB
** tensors, 4 KiB of codes, 16 bytes of scales); rank 0's x, codes, scales,
** residual_out and gamma as given, its residual_in RES; rank 1 its own
** valid buffers (scales SPR only when rank 0 has some). */
static int rq(bad_env *e, const void *x0, void *q0, float *sc0, void *ro0, const void *gam0,
              collgen_fp8_mode_t mode, float static_scale) {
  static const int64_t sh[2] = {4, 1024};
  const int64_t *shapes[2] = {sh, sh};
  const void *x[2] = {x0, IN(1)}, *ri[2] = {RES(0), RES(1)}, *gam[2] = {gam0, GAM(1)};
  void *q[2] = {q0, NRM(1)}, *ro[2] = {ro0, OUT(1)};
  float *sc[2] = {sc0, sc0 ? (float *)SPR(1) : NULL};
  return collgen_allreduce_residual_rmsnorm_fp8(e->c, COLLGEN_DTYPE_BF16, 2, shapes, x, ri, q,
                                                mode == COLLGEN_FP8_STATIC ? NULL : sc, ro, gam,
                                                1e-6f, 0.0f, mode, static_scale, 0, e->streams);
}

static void residual_rmsnorm_fp8_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16;
  const collgen_fp8_mode_t DYN = COLLGEN_FP8_DYNAMIC, ST = COLLGEN_FP8_STATIC;
  int64_t sh[2] = {4, 1024};
  const int64_t *shapes[2] = {sh, sh};
  const void *x[2] = {IN(0), IN(1)}, *ri[2] = {RES(0), RES(1)}, *gam[2] = {GAM(0), GAM(1)};
  void *q[2] = {NRM(0), NRM(1)}, *ro[2] = {OUT(0), OUT(1)};
  float *sc[2] = {SPR(0), SPR(1)};
  collgen_stream_t *s = e->streams;
  const float nan = NAN, inf = INFINITY;
#define RQ_OK IN(0), NRM(0), (float *)SPR(0), OUT(0), GAM(0)
  CASE_TLS("fp8 comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
           collgen_allreduce_residual_rmsnorm_fp8(NULL, BF, 2, shapes, x, ri, q, sc, ro, gam,
                                                  1e-6f, 0, DYN, 0, 0, s));
  CASE("fp8 mode NONE", COLLGEN_ERR_INVALID_ARG, "must be COLLGEN_FP8_DYNAMIC or COLLGEN_FP8_STATIC",
       rq(e, RQ_OK, COLLGEN_FP8_NONE, 0.0f));
  CASE("fp8 mode 7", COLLGEN_ERR_INVALID_ARG, "FP8 mode 7", rq(e, RQ_OK, (collgen_fp8_mode_t)7, 1.0f));
  CASE("fp8 dynamic with a static scale", COLLGEN_ERR_INVALID_ARG, "static_scale must be 0",
       rq(e, RQ_OK, DYN, 1.0f));
  CASE("fp8 static scale 0", COLLGEN_ERR_INVALID_ARG, "static_scale must be finite and > 0",
       rq(e, RQ_OK, ST, 0.0f));
  CASE("fp8 static scale -1", COLLGEN_ERR_INVALID_ARG, "static_scale must be finite and > 0",
       rq(e, RQ_OK, ST, -1.0f));
  CASE("fp8 static scale NaN", COLLGEN_ERR_INVALID_ARG, "static_scale must be finite and > 0",
       rq(e, RQ_OK, ST, nan));
  CASE("fp8 static scale inf", COLLGEN_ERR_INVALID_ARG, "static_scale must be finite and > 0",
       rq(e, RQ_OK, ST, inf));
  CASE("fp8 static with row_scales", COLLGEN_ERR_INVALID_ARG, "row_scales must be NULL",
       collgen_allreduce_residual_rmsnorm_fp8(e->c, BF, 2, shapes, x, ri, q, sc, ro, gam,
                                              1e-6f, 0, ST, 0.5f, 0, s));
  CASE("fp8 eps NaN", COLLGEN_ERR_INVALID_ARG, "eps must be finite",
       collgen_allreduce_residual_rmsnorm_fp8(e->c, BF, 2, shapes, x, ri, q, sc, ro, gam, nan,
                                              0, DYN, 0, 0, s));
  CASE("fp8 dtype 14", COLLGEN_ERR_INVALID_ARG, "unknown dtype 14",
       collgen_allreduce_residual_rmsnorm_fp8(e->c, (collgen_dtype_t)14, 2, shapes, x, ri, q, sc,
                                              ro, gam, 1e-6f, 0, DYN, 0, 0, s));
  CASE("fp8 u8 x", COLLGEN_ERR_INVALID_ARG,
       "allreduce_residual_rmsnorm computes on elements: u8 is a copy-only dtype",
       collgen_allreduce_residual_rmsnorm_fp8(e->c, COLLGEN_DTYPE_U8, 2, shapes, x, ri, q, sc,
                                              ro, gam, 1e-6f, 0, DYN, 0, 0, s));
  CASE("normed_fp8 array NULL", COLLGEN_ERR_INVALID_ARG, "the normed_fp8 output array",
       collgen_allreduce_residual_rmsnorm_fp8(e->c, BF, 2, shapes, x, ri, NULL, sc, ro, gam,
                                              1e-6f, 0, DYN, 0, 0, s));
  CASE("row_scales array NULL (dynamic)", COLLGEN_ERR_INVALID_ARG, "the row_scales array",
       collgen_allreduce_residual_rmsnorm_fp8(e->c, BF, 2, shapes, x, ri, q, NULL, ro, gam,
                                              1e-6f, 0, DYN, 0, 0, s));
  CASE("fp8 residual_out array NULL", COLLGEN_ERR_INVALID_ARG, "the residual_out array",
       collgen_allreduce_residual_rmsnorm_fp8(e->c, BF, 2, shapes, x, ri, q, sc, NULL, gam,
                                              1e-6f, 0, DYN, 0, 0, s));
  CASE("normed_fp8 of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "normed_fp8 output of rank 0 is NULL",
       rq(e, IN(0), NULL, SPR(0), OUT(0), GAM(0), DYN, 0.0f));
  CASE("row_scales of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "row_scales of rank 0 is NULL",
       rq(e, IN(0), NRM(0), NULL, OUT(0), GAM(0), DYN, 0.0f));
  CASE("row_scales at +2 bytes", COLLGEN_ERR_ALIGNMENT, "row_scales of rank 0",
       rq(e, IN(0), NRM(0), (float *)AT(SPR(0), 2), OUT(0), GAM(0), DYN, 0.0f));
  CASE("normed_fp8 inside x", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rq(e, IN(0), AT(IN(0), 4096), SPR(0), OUT(0), GAM(0), DYN, 0.0f));
  CASE("normed_fp8 is residual_out", COLLGEN_ERR_INVALID_ARG, "is the same buffer as",
       rq(e, IN(0), OUT(0), SPR(0), OUT(0), GAM(0), ST, 0.5f));
  CASE("normed_fp8 overlaps residual_in", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rq(e, IN(0), AT(RES(0), 8190), SPR(0), OUT(0), GAM(0), ST, 0.5f));
  CASE("row_scales inside normed_fp8", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rq(e, IN(0), NRM(0), (float *)AT(NRM(0), 4080), OUT(0), GAM(0), DYN, 0.0f));
  CASE("row_scales inside gamma", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rq(e, IN(0), NRM(0), (float *)AT(GAM(0), 8), OUT(0), GAM(0), DYN, 0.0f));
  CASE("row_scales inside residual_out", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rq(e, IN(0), NRM(0), (float *)AT(OUT(0), 64), OUT(0), GAM(0), DYN, 0.0f));
#undef RQ_OK
}

/* An op of one input, one output and a root per rank (broadcast,
** scatter), with per-rank shapes and buffers. */
typedef int (*rooted_op)(collgen_comm_t *, collgen_dtype_t, int, const int64_t *const *,
                         const void *const *, void *const *, int, int, const collgen_stream_t *);
static int rooted(rooted_op fn, bad_env *e, collgen_dtype_t dt, int rank, const int64_t *s0,
                  const int64_t *s1, const void *in0, const void *in1, void *out0, void *out1,
                  int root, int group) {
  const int64_t *shapes[2] = {s0, s1};
  const void *in[2] = {in0, in1};
  void *out[2] = {out0, out1};
  return fn(e->c, dt, rank, shapes, in, out, root, group, e->streams);
}

/* What broadcast and scatter refuse alike (both take [1000] bf16 on every
** rank here; the root's input alone is read, a non-root input may be
** NULL): the root, the arrays, the shapes, NULL and misaligned buffers. */
static void rooted_cases(bad_env *e, rooted_op fn, const char *op) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16, F64 = COLLGEN_DTYPE_F64;
  int64_t n[1] = {1000}, m[1] = {999}, negd[1] = {-4}, big[1] = {COLLGEN_MAX_ELEMS + 1};
  int64_t two[2] = {10, 100}, two_t[2] = {100, 10}, zero[1] = {0};
  const int64_t *shapes[2] = {n, n};
  const void *in[2] = {IN(0), IN(1)};
  void *out[2] = {OUT(0), OUT(1)};
  collgen_stream_t *s = e->streams;
  char what[96];
#define R(...) rooted(fn, __VA_ARGS__)
#define RCASE(how, label, code, frag, call)                                    \
  do {                                                                         \
    snprintf(what, sizeof what, "%s %s", op, label);                           \
    how(what, code, frag, call);                                               \
  } while (0)
  RCASE(CASE_TLS, "comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
        fn(NULL, BF, 1, shapes, in, out, 0, 0, s));
  RCASE(CASE, "root -1", COLLGEN_ERR_INVALID_ARG, "root -1 is not a group rank (0..1)",
        R(e, BF, 1, n, n, AR_OK_BUFS, -1, 0));
  RCASE(CASE, "root 2 of 2", COLLGEN_ERR_INVALID_ARG, "root 2 is not a group rank (0..1)",
        R(e, BF, 1, n, n, AR_OK_BUFS, 2, 0));
  RCASE(CASE, "root 1, groups of one", COLLGEN_ERR_INVALID_ARG,
        "root 1 is not a group rank (0..0)", R(e, BF, 1, n, n, AR_OK_BUFS, 1, 1));
  RCASE(CASE, "root 5, zero elements", COLLGEN_ERR_INVALID_ARG, "root 5 is not a group rank",
        R(e, BF, 1, zero, zero, AR_OK_BUFS, 5, 0));
  RCASE(CASE, "dtype 9", COLLGEN_ERR_INVALID_ARG, "unknown dtype 9",
        R(e, (collgen_dtype_t)9, 1, n, n, AR_OK_BUFS, 0, 0));
  RCASE(CASE, "tensor rank 0", COLLGEN_ERR_INVALID_ARG, "needs tensor rank 1..8, got 0",
        R(e, BF, 0, n, n, AR_OK_BUFS, 0, 0));
  RCASE(CASE, "tensor rank 9", COLLGEN_ERR_INVALID_ARG, "needs tensor rank 1..8, got 9",
        R(e, BF, 9, n, n, AR_OK_BUFS, 0, 0));
  RCASE(CASE, "shapes NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
        fn(e->c, BF, 1, NULL, in, out, 0, 0, s));
  RCASE(CASE, "streams NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
        fn(e->c, BF, 1, shapes, in, out, 0, 0, NULL));
  RCASE(CASE, "inputs NULL", COLLGEN_ERR_INVALID_ARG, "input array",
        fn(e->c, BF, 1, shapes, NULL, out, 0, 0, s));
  RCASE(CASE, "outputs NULL", COLLGEN_ERR_INVALID_ARG, "output array",
        fn(e->c, BF, 1, shapes, in, NULL, 0, 0, s));
  RCASE(CASE, "shapes differ", COLLGEN_ERR_INVALID_ARG,
        "shapes differ in dimension 0 (1000 vs 999)", R(e, BF, 1, n, m, AR_OK_BUFS, 0, 0));
  RCASE(CASE, "same count, other dims", COLLGEN_ERR_INVALID_ARG, "shapes differ",
        R(e, BF, 2, two, two_t, AR_OK_BUFS, 0, 0));
  RCASE(CASE, "negative dimension", COLLGEN_ERR_INVALID_ARG, "negative dimension",
        R(e, BF, 1, negd, negd, AR_OK_BUFS, 0, 0));
  RCASE(CASE, "2^40 + 1 elements", COLLGEN_ERR_INVALID_ARG, "COLLGEN_MAX_ELEMS",
        R(e, BF, 1, big, big, AR_OK_BUFS, 0, 0));
  RCASE(CASE, "group_size 3", COLLGEN_ERR_INVALID_ARG, "group_size 3 does not divide",
        R(e, BF, 1, n, n, AR_OK_BUFS, 0, 3));
  RCASE(CASE, "root's input NULL", COLLGEN_ERR_INVALID_ARG, "input of rank 1 is NULL",
        R(e, BF, 1, n, n, IN(0), NULL, OUT(0), OUT(1), 1, 0));
  RCASE(CASE, "output of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "output of rank 0 is NULL",
        R(e, BF, 1, n, n, NULL, IN(1), NULL, OUT(1), 1, 0));
  RCASE(CASE, "f64 output at +4 bytes", COLLGEN_ERR_ALIGNMENT, "not aligned to its 8-byte",
        R(e, F64, 1, n, n, IN(0), IN(1), AT(OUT(0), 4), OUT(1), 0, 0));
  RCASE(CASE, "f64 root input at +4 bytes", COLLGEN_ERR_ALIGNMENT, "input of rank 0",
        R(e, F64, 1, n, n, AT(IN(0), 4), NULL, OUT(0), OUT(1), 0, 0));
  RCASE(CASE, "root's output 16 bytes into its input", COLLGEN_ERR_INVALID_ARG,
        "only exact in-place is allowed",
        R(e, BF, 1, n, n, IN(0), NULL, AT(IN(0), 16), OUT(1), 0, 0));
  RCASE(CASE, "groups of one: overlap still refused", COLLGEN_ERR_INVALID_ARG,
        "partially overlaps", R(e, BF, 1, n, n, IN(0), IN(1), OUT(0), AT(IN(1), 2), 0, 1));
#undef RCASE
#undef R
}

static void broadcast_cases(bad_env *e) { rooted_cases(e, collgen_broadcast, "broadcast"); }

/* scatter of [1000] bf16 (chunks of 500 rows: rank 1's starts 1000 bytes
** into the root's input), [999] (500 and 499) and [3] (2 and 1): the root's
** output may sit in its input exactly at its own chunk, nowhere else; every
** rank with a chunk needs an output; any dtype gets that far. */
#define sc(...) rooted(collgen_scatter, __VA_ARGS__)

static void scatter_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16;
  int64_t n[1] = {1000}, odd[1] = {999}, three[1] = {3};
  rooted_cases(e, collgen_scatter, "scatter");
  CASE("scatter root 1's output at chunk 0 of its input", COLLGEN_ERR_INVALID_ARG,
       "is the same buffer as", sc(e, BF, 1, n, n, NULL, IN(1), OUT(0), IN(1), 1, 0));
  CASE("scatter root 0's output at rank 1's chunk", COLLGEN_ERR_INVALID_ARG,
       "only exact in-place is allowed",
       sc(e, BF, 1, n, n, IN(0), NULL, AT(IN(0), 1000), OUT(1), 0, 0));
  CASE("scatter root 1's output an element past its chunk", COLLGEN_ERR_INVALID_ARG,
       "partially overlaps", sc(e, BF, 1, n, n, NULL, IN(1), OUT(0), AT(IN(1), 1002), 1, 0));
  CASE("scatter [999]: root 1's output at 499 rows, not its start of 500", COLLGEN_ERR_INVALID_ARG,
       "only exact in-place is allowed",
       sc(e, BF, 1, odd, odd, NULL, IN(1), OUT(0), AT(IN(1), 998), 1, 0));
  CASE("scatter i64 (copy-only) gets to the buffer checks", COLLGEN_ERR_INVALID_ARG,
       "output of rank 0 is NULL",
       sc(e, COLLGEN_DTYPE_I64, 1, n, n, IN(0), NULL, NULL, OUT(1), 0, 0));
  CASE("scatter [3] u8: the one-row chunk needs its output", COLLGEN_ERR_INVALID_ARG,
       "output of rank 1 is NULL",
       sc(e, COLLGEN_DTYPE_U8, 1, three, three, IN(0), NULL, OUT(0), NULL, 0, 0));
  CASE("scatter non-root bf16 output at an odd byte", COLLGEN_ERR_ALIGNMENT,
       "output of rank 1 (", sc(e, BF, 1, n, n, IN(0), NULL, OUT(0), AT(OUT(1), 1), 0, 0));
}

/* all_gather: shards of both ranks and their outputs. */
static int ga(bad_env *e, collgen_dtype_t dt, int rank, const int64_t *s0, const int64_t *s1,
              const void *in0, const void *in1, void *out0, void *out1, int group) {
  const int64_t *shapes[2] = {s0, s1};
  const void *in[2] = {in0, in1};
  void *out[2] = {out0, out1};
  return collgen_all_gather(e->c, dt, rank, shapes, in, out, group, e->streams);
}

static void all_gather_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16;
  /* 4 x 1024 bf16 per rank: an 8 KiB shard, 16 KiB gathered */
  int64_t sh[2] = {4, 1024}, neg[2] = {-1, 1024}, sh3[3] = {2, 2, 1024}, sh3b[3] = {2, 1, 1024};
  int64_t half[1] = {((int64_t)1 << 39) + 1};
  const int64_t *shapes[2] = {sh, sh};
  const void *in[2] = {IN(0), IN(1)};
  void *out[2] = {OUT(0), OUT(1)};
  collgen_stream_t *s = e->streams;
#define GA_OK IN(0), IN(1), OUT(0), OUT(1)
  CASE_TLS("all_gather comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
           collgen_all_gather(NULL, BF, 2, shapes, in, out, 0, s));
  CASE("all_gather dtype 13", COLLGEN_ERR_INVALID_ARG, "unknown dtype 13",
       ga(e, (collgen_dtype_t)13, 2, sh, sh, GA_OK, 0));
  CASE("all_gather tensor rank 0", COLLGEN_ERR_INVALID_ARG, "needs tensor rank 1..8",
       ga(e, BF, 0, sh, sh, GA_OK, 0));
  CASE("all_gather shapes NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
       collgen_all_gather(e->c, BF, 2, NULL, in, out, 0, s));
  CASE("all_gather inputs NULL", COLLGEN_ERR_INVALID_ARG, "the input array",
       collgen_all_gather(e->c, BF, 2, shapes, NULL, out, 0, s));
  CASE("all_gather outputs NULL", COLLGEN_ERR_INVALID_ARG, "the output array",
       collgen_all_gather(e->c, BF, 2, shapes, in, NULL, 0, s));
  CASE("all_gather inner dims differ", COLLGEN_ERR_INVALID_ARG, "only dimension 0 may differ",
       ga(e, BF, 3, sh3, sh3b, GA_OK, 0));
  CASE("all_gather negative rows", COLLGEN_ERR_INVALID_ARG, "negative dimension",
       ga(e, BF, 2, neg, sh, GA_OK, 0));
  CASE("all_gather gathered past 2^40", COLLGEN_ERR_INVALID_ARG, "COLLGEN_MAX_ELEMS",
       ga(e, COLLGEN_DTYPE_U8, 1, half, half, GA_OK, 0));
  CASE("all_gather group_size 3", COLLGEN_ERR_INVALID_ARG, "group_size 3 does not divide",
       ga(e, BF, 2, sh, sh, GA_OK, 3));
  CASE("all_gather input of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "input of rank 0 is NULL",
       ga(e, BF, 2, sh, sh, NULL, IN(1), OUT(0), OUT(1), 0));
  CASE("all_gather output of rank 1 NULL", COLLGEN_ERR_INVALID_ARG, "output of rank 1 is NULL",
       ga(e, BF, 2, sh, sh, IN(0), IN(1), OUT(0), NULL, 0));
  CASE("i32 all_gather input at +2 bytes", COLLGEN_ERR_ALIGNMENT,
       "input of rank 0 (", ga(e, COLLGEN_DTYPE_I32, 2, sh, sh, AT(IN(0), 2), IN(1), OUT(0),
                               OUT(1), 0));
  CASE("all_gather input inside output off its offset", COLLGEN_ERR_INVALID_ARG,
       "partially overlaps", ga(e, BF, 2, sh, sh, AT(OUT(0), 2), IN(1), OUT(0), OUT(1), 0));
  CASE("all_gather rank 1's input at rank 0's offset", COLLGEN_ERR_INVALID_ARG,
       "is the same buffer as", ga(e, BF, 2, sh, sh, IN(0), OUT(1), OUT(0), OUT(1), 0));
  CASE("all_gather input over the output's end", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       ga(e, BF, 2, sh, sh, IN(0), AT(OUT(1), 8194), OUT(0), OUT(1), 0));
  CASE("all_gather groups of one: overlap still refused", COLLGEN_ERR_INVALID_ARG,
       "partially overlaps", ga(e, BF, 2, sh, sh, AT(OUT(0), 2), IN(1), OUT(0), OUT(1), 1));
#undef GA_OK
}

/* reduce_scatter_sum (mostly over [1000] bf16: rank 1 owns rows 500..999). */
#define rs(...) in_out(collgen_reduce_scatter_sum, __VA_ARGS__)

static void reduce_scatter_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16;
  int64_t n[1] = {1000}, m[1] = {999}, rows[2] = {10, 100}, cols[2] = {100, 10};
  const int64_t *shapes[2] = {n, n};
  const void *in[2] = {IN(0), IN(1)};
  void *out[2] = {OUT(0), OUT(1)};
  CASE_TLS("reduce_scatter comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
           collgen_reduce_scatter_sum(NULL, BF, 1, shapes, in, out, 0, e->streams));
  CASE("reduce_scatter tensor rank 0", COLLGEN_ERR_INVALID_ARG, "tensor rank 1..8",
       rs(e, BF, 0, n, n, AR_OK_BUFS, 0));
  CASE("i64 reduce_scatter", COLLGEN_ERR_INVALID_ARG,
       "reduce_scatter_sum computes on elements: i64 is a copy-only dtype",
       rs(e, COLLGEN_DTYPE_I64, 1, n, n, AR_OK_BUFS, 0));
  CASE("u8 reduce_scatter, groups of one (a copy)", COLLGEN_ERR_INVALID_ARG,
       "u8 is a copy-only dtype", rs(e, COLLGEN_DTYPE_U8, 1, n, n, AR_OK_BUFS, 1));
  CASE("reduce_scatter shapes differ", COLLGEN_ERR_INVALID_ARG, "shapes differ",
       rs(e, BF, 1, n, m, AR_OK_BUFS, 0));
  CASE("reduce_scatter rows differ", COLLGEN_ERR_INVALID_ARG, "shapes differ",
       rs(e, BF, 2, rows, cols, AR_OK_BUFS, 0));
  CASE("reduce_scatter streams NULL", COLLGEN_ERR_INVALID_ARG, "shapes and streams",
       collgen_reduce_scatter_sum(e->c, BF, 1, shapes, in, out, 0, NULL));
  CASE("reduce_scatter output of rank 1 NULL", COLLGEN_ERR_INVALID_ARG,
       "output of rank 1 is NULL", rs(e, BF, 1, n, n, IN(0), IN(1), OUT(0), NULL, 0));
  CASE("reduce_scatter output is the input", COLLGEN_ERR_INVALID_ARG, "is the same buffer as",
       rs(e, BF, 1, n, n, IN(0), IN(1), IN(0), OUT(1), 0));
  CASE("reduce_scatter output at its own chunk", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rs(e, BF, 1, n, n, IN(0), IN(1), OUT(0), AT(IN(1), 1000), 0));
  CASE("reduce_scatter output at an odd byte", COLLGEN_ERR_ALIGNMENT, "not aligned to its 2-byte",
       rs(e, BF, 1, n, n, IN(0), IN(1), AT(OUT(0), 1), OUT(1), 0));
  CASE("reduce_scatter, groups of one: overlap still refused", COLLGEN_ERR_INVALID_ARG,
       "partially overlaps", rs(e, BF, 1, n, n, IN(0), IN(1), AT(IN(0), 2), OUT(1), 1));
}

/* reduce_scatter_rmsnorm of bf16 [4, 1024] x on both ranks (8 KiB; each
** rank's chunk of 2 rows, 4 KiB): rank 0's x, residual_in, normed,
** residual_out and gamma as given; rank 1 its own valid buffers. fp8 mode
** NONE is the plain entry point, else the _fp8 one (codes in normed, row
** scales SPR for dynamic). */
static int rsn(bad_env *e, collgen_dtype_t dt, const void *x0, const void *ri0, void *nrm0,
              void *ro0, const void *gam0, float eps, collgen_fp8_mode_t mode,
              float static_scale) {
  static const int64_t sh[2] = {4, 1024};
  const int64_t *shapes[2] = {sh, sh};
  const void *x[2] = {x0, IN(1)}, *ri[2] = {ri0, RES(1)}, *gam[2] = {gam0, GAM(1)};
  void *nrm[2] = {nrm0, NRM(1)}, *ro[2] = {ro0, OUT(1)};
  float *sc[2] = {(float *)SPR(0), (float *)SPR(1)};
  if (mode == COLLGEN_FP8_NONE)
    return collgen_reduce_scatter_rmsnorm(e->c, dt, 2, shapes, x, ri, nrm, ro, gam, eps, 0.0f, 0,
                                          e->streams);
  return collgen_reduce_scatter_rmsnorm_fp8(e->c, dt, 2, shapes, x, ri, nrm,
                                            mode == COLLGEN_FP8_STATIC ? NULL : sc, ro, gam, eps,
                                            0.0f, mode, static_scale, 0, e->streams);
}

static void reduce_scatter_rmsnorm_cases(bad_env *e) {
  const collgen_dtype_t BF = COLLGEN_DTYPE_BF16;
  const collgen_fp8_mode_t NONE = COLLGEN_FP8_NONE, DYN = COLLGEN_FP8_DYNAMIC;
  int64_t sh[2] = {4, 1024}, other[2] = {4, 512}, r1[1] = {4096};
  const int64_t *shapes[2] = {sh, sh}, *differ[2] = {sh, other}, *flat[2] = {r1, r1};
  const void *x[2] = {IN(0), IN(1)}, *ri[2] = {RES(0), RES(1)}, *gam[2] = {GAM(0), GAM(1)};
  void *nrm[2] = {NRM(0), NRM(1)}, *ro[2] = {OUT(0), OUT(1)};
  collgen_stream_t *s = e->streams;
#define RS_OK IN(0), RES(0), NRM(0), OUT(0), GAM(0)
  CASE_TLS("rs norm comm NULL", COLLGEN_ERR_INVALID_ARG, "comm is NULL",
           collgen_reduce_scatter_rmsnorm(NULL, BF, 2, shapes, x, ri, nrm, ro, gam, 1e-6f, 0, 0,
                                          s));
  CASE("rs norm tensor rank 1", COLLGEN_ERR_INVALID_ARG, "needs tensor rank 2..8",
       collgen_reduce_scatter_rmsnorm(e->c, BF, 1, flat, x, ri, nrm, ro, gam, 1e-6f, 0, 0, s));
  CASE("rs norm i32", COLLGEN_ERR_INVALID_ARG,
       "reduce_scatter_rmsnorm computes on elements: i32 is a copy-only dtype",
       rsn(e, COLLGEN_DTYPE_I32, RS_OK, 1e-6f, NONE, 0.0f));
  CASE("rs norm eps NaN", COLLGEN_ERR_INVALID_ARG, "eps must be finite",
       rsn(e, BF, RS_OK, NAN, NONE, 0.0f));
  CASE("rs norm shapes differ", COLLGEN_ERR_INVALID_ARG, "shapes differ",
       collgen_reduce_scatter_rmsnorm(e->c, BF, 2, differ, x, ri, nrm, ro, gam, 1e-6f, 0, 0, s));
  CASE("rs norm residual_in of rank 0 NULL", COLLGEN_ERR_INVALID_ARG,
       "residual_in of rank 0 is NULL", rsn(e, BF, IN(0), NULL, NRM(0), OUT(0), GAM(0), 1e-6f,
                                           NONE, 0.0f));
  CASE("rs norm x of rank 0 NULL", COLLGEN_ERR_INVALID_ARG, "x of rank 0 is NULL",
       rsn(e, BF, NULL, RES(0), NRM(0), OUT(0), GAM(0), 1e-6f, NONE, 0.0f));
  CASE("rs norm residual_out inside x", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       rsn(e, BF, IN(0), RES(0), NRM(0), AT(IN(0), 4096), GAM(0), 1e-6f, NONE, 0.0f));
  CASE("rs norm normed is residual_out", COLLGEN_ERR_INVALID_ARG, "is the same buffer as",
       rsn(e, BF, IN(0), RES(0), OUT(0), OUT(0), GAM(0), 1e-6f, NONE, 0.0f));
  CASE("rs norm residual_out at an odd byte", COLLGEN_ERR_ALIGNMENT, "residual_out of rank 0",
       rsn(e, BF, IN(0), RES(0), NRM(0), AT(OUT(0), 1), GAM(0), 1e-6f, NONE, 0.0f));
  CASE("rs norm fp8 mode NONE", COLLGEN_ERR_INVALID_ARG,
       "(collgen_reduce_scatter_rmsnorm writes normed in the dtype)",
       collgen_reduce_scatter_rmsnorm_fp8(e->c, BF, 2, shapes, x, ri, nrm, NULL, ro, gam, 1e-6f,
                                          0, NONE, 0.0f, 0, s));
  CASE("rs norm fp8 static scale 0", COLLGEN_ERR_INVALID_ARG,
       "static_scale must be finite and > 0", rsn(e, BF, RS_OK, 1e-6f, COLLGEN_FP8_STATIC, 0.0f));
  CASE("rs norm fp8 row_scales inside normed_fp8", COLLGEN_ERR_INVALID_ARG, "partially overlaps",
       collgen_reduce_scatter_rmsnorm_fp8(
           e->c, BF, 2, shapes, x, ri, nrm, (float *[]){(float *)AT(NRM(0), 2040), SPR(1)}, ro,
           gam, 1e-6f, 0, DYN, 0.0f, 0, s));
#undef RS_OK
}

int bad_inputs_run(bad_env *e, int ndevices) {
  ncases = 0;
  comm_cases(e, ndevices);
  allreduce_cases(e);
  rmsnorm_cases(e);
  residual_rmsnorm_cases(e);
  residual_rmsnorm_fp8_cases(e);
  broadcast_cases(e);
  scatter_cases(e);
  all_gather_cases(e);
  reduce_scatter_cases(e);
  reduce_scatter_rmsnorm_cases(e);
  return ncases;
}
