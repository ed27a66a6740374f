/*
** test_pregen.c -- `collgen pregen` leaves nothing for NVRTC: after a
** pregen of a small matrix (the built CLI, a temp cache), every call shape
** of that matrix is served from disk in a process where NVRTC cannot be
** loaded. "Every call shape" is a dense sweep chosen without asking the
** planner: allreduce and broadcast elems 0..300, every value near each
** power of two up to 2^40 and near the LL limit, random sizes up to 2^40;
** the RMSNorm ops' rows 0..600, near powers of two and the LL row limit of
** each cols, random up to 2^40 elements; each aligned or not, in place or
** not, every group size dividing ngpus (both elementwise ops over groups of
** one are a copy in the runtime, so none), several grid caps;
** allreduce_residual_rmsnorm with
** its normed in the dtype and as e4m3 with dynamic scaling (the matrix's
** --fp8; static scaling has the same epilogue but for the reduction, and
** would only lengthen the test); all_gather and scatter over the
** allreduce sizes (every 16th); broadcast, all_gather and scatter of f16,
** i16 and i32 (every 16th size), which the matrix's bf16 and f32 kernels
** serve (the ops that move bits plan by element size). The same holds for a pregenerated cache
** made read-only (`chmod -R a+rX,a-w`) and read by another user (as root:
** a child that drops to nobody), with one warning that new kernels would
** stay in memory.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog.h"
#include "collgen.h"
#include "device_abi.h"
#include "test_util.h"

#define MATRIX_ARGS                                                            \
  "--arch sm_90 --ops allreduce_sum,allgather_rmsnorm,allreduce_residual_rmsnorm,broadcast," \
  "all_gather,reduce_scatter_sum,reduce_scatter_rmsnorm,scatter "              \
  "--dtypes bf16,f32 --ngpus 2,4 --cols 4096,5120,100 --fp8 none,dynamic"
static const collgen_dtype_t DTYPES[] = {COLLGEN_DTYPE_BF16, COLLGEN_DTYPE_F32};
static const int NGPUS[] = {2, 4};
static const int64_t COLS[] = {4096, 5120, 100};
static const int MAX_BLOCKS[] = {0, 3, COLLGEN_MAX_BLOCKS};
#define MAX_SIZE ((int64_t)1 << 40)
#define MAX_KEYS 512
#define MAX_REPORTED 20

static char dir[4096];
static void setup(void) {
  tu_make_temp_dir(dir, sizeof dir);
  unsetenv("COLLGEN_TEMPLATE_DIR");
  unsetenv("COLLGEN_CACHE_DISABLE");
}
static void teardown(void) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null", dir); /* the read-only test */
  if (system(cmd) != 0) {} /* rm -rf reports what it cannot remove */
  tu_remove_tree(dir);
}
/* Plain builds take ~40 s; under ASan next to other tests on 2 cores the
** sweep's ~420k planner calls took up to 300 s, hence the margin. */
TestSuite(pregen, .init = setup, .fini = teardown, .timeout = 900);

/* Sizes to sweep, in the op's unit (elems or rows): 0..dense, k-near
** every power of two up to `max`, near `extra` (a known limit, or 0), and
** random values up to `max`. Returns the count written to out. */
static int sweep_sizes(int64_t dense, int near, int64_t extra, int64_t max, int64_t *out) {
  int n = 0;
  for (int64_t v = 0; v <= dense; ++v) out[n++] = v;
  for (int64_t p = 1; p <= max; p *= 2)
    for (int64_t d = -near; d <= near; ++d)
      if (p + d > dense && p + d <= max) out[n++] = p + d;
  for (int64_t d = -64; extra > 0 && d <= 64; ++d)
    if (extra + d > dense) out[n++] = extra + d;
  for (int i = 0; i < 48; ++i) out[n++] = 1 + (int64_t)(tu_rand() % (uint64_t)max);
  return n;
}

typedef struct {
  collgen_generator_t *gen;
  FILE *report;
  char keys[MAX_KEYS][65];
  char missing[MAX_KEYS][96]; /* kernels some call could not get */
  int nkeys, nmissing, calls, misses;
} sweep;

/* Names the kernel of a failed call once, with the first call that
** needed it. */
static void report_miss(sweep *s, const collgen_shape_t *shape, int rc, int hit) {
  collgen_plan_t plan;
  s->misses++;
  if (collgen_plan(s->gen, shape, &plan) != COLLGEN_OK) snprintf(plan.kernel, 96, "(unplannable)");
  for (int i = 0; i < s->nmissing; ++i)
    if (strcmp(s->missing[i], plan.kernel) == 0) return;
  if (s->nmissing < MAX_KEYS) snprintf(s->missing[s->nmissing++], 96, "%s", plan.kernel);
  if (s->nmissing > MAX_REPORTED) return;
  fprintf(s->report, "%s: %s (hit %d), first needed by %s dtype %d ngpus %d group %d "
          "elems %lld rows %lld cols %lld aligned %d inplace %d max_blocks %d\n",
          plan.kernel, collgen_status_name(rc), hit, collgen__op_name(shape->op),
          (int)shape->dtype, shape->ngpus, shape->group_size, (long long)shape->elems,
          (long long)shape->rows, (long long)shape->cols, shape->aligned16, shape->inplace,
          shape->max_blocks);
}

/* Fetches one shape: it must come from disk (cache_hit 1) the first time
** its key is seen in this process, from the memory copy of that disk entry
** (2) after; a miss here would need NVRTC. */
static void fetch(sweep *s, const collgen_shape_t *shape) {
  collgen_kernel_info_t info;
  s->calls++;
  int rc = collgen_get_kernel(s->gen, shape, &info);
  int known = 0;
  for (int i = 0; rc == COLLGEN_OK && i < s->nkeys && !known; ++i)
    known = strcmp(s->keys[i], info.key) == 0;
  int ok = rc == COLLGEN_OK && info.cache_hit == (known ? 2 : 1);
  if (ok && !known && s->nkeys < MAX_KEYS) snprintf(s->keys[s->nkeys++], 65, "%s", info.key);
  if (!ok) report_miss(s, shape, rc, rc == COLLGEN_OK ? info.cache_hit : -1);
}

static void sweep_allreduce(sweep *s, collgen_shape_t base, const int64_t *sizes, int n) {
  for (int i = 0; i < n; ++i)
    for (int flags = 0; flags < 4; ++flags)
      for (size_t m = 0; m < sizeof MAX_BLOCKS / sizeof MAX_BLOCKS[0]; ++m) {
        collgen_shape_t sh = base;
        sh.elems = sizes[i];
        sh.aligned16 = flags & 1;
        sh.inplace = flags >> 1;
        sh.max_blocks = MAX_BLOCKS[m];
        fetch(s, &sh);
      }
}

static void sweep_rmsnorm(sweep *s, collgen_shape_t base, const int64_t *sizes, int n) {
  for (int i = 0; i < n; ++i)
    for (int aligned = 0; aligned < 2; ++aligned)
      for (size_t m = 0; m < sizeof MAX_BLOCKS / sizeof MAX_BLOCKS[0]; ++m) {
        collgen_shape_t sh = base;
        sh.rows = sizes[i];
        sh.aligned16 = aligned;
        sh.max_blocks = MAX_BLOCKS[m];
        fetch(s, &sh);
      }
}

/* Every call of an RMSNorm op in the matrix (`sizes` is scratch space). */
static void sweep_row_op(sweep *s, collgen_op_t op, int64_t *sizes) {
  /* the matrix's FP8 output modes: none, then dynamic for the ops that have them */
  const int fp8 =
      op == COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM || op == COLLGEN_OP_REDUCE_SCATTER_RMSNORM;
  const int last_mode = fp8 ? COLLGEN_FP8_DYNAMIC : 0;
  for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; ++d)
    for (size_t c = 0; c < sizeof COLS / sizeof COLS[0]; ++c) {
      int esize = DTYPES[d] == COLLGEN_DTYPE_F32 ? 4 : 2;
      int64_t ll_rows = (int64_t)COLLGEN_LL_LINES * 8 / (COLS[c] * esize); /* f32 x 100: 655 */
      int nrows = sweep_sizes(600, 3, ll_rows, MAX_SIZE / COLS[c], sizes);
      /* and rows near the middle of the band where a group of one streams
      ** (traffic 4 x rows x row bytes of 1 to 1.4 times the 50 MiB band base of sm_90) */
      const int64_t stream_rows = (int64_t)(60 << 20) / (4 * COLS[c] * esize);
      for (int64_t v = stream_rows - 8; v <= stream_rows + 8; ++v) sizes[nrows++] = v;
      for (size_t k = 0; k < sizeof NGPUS / sizeof NGPUS[0]; ++k)
        for (int g = 1; g <= NGPUS[k]; ++g) {
          if (NGPUS[k] % g) continue;
          collgen_shape_t base;
          collgen_shape_init(&base, op);
          base.dtype = DTYPES[d];
          base.ngpus = NGPUS[k];
          base.group_size = g;
          base.cols = COLS[c];
          for (int m = 0; m <= last_mode; ++m) {
            base.fp8 = (collgen_fp8_mode_t)m;
            sweep_rmsnorm(s, base, sizes, nrows);
          }
        }
    }
}

typedef struct { int count; char first[1024]; } warnings;
static void count_warning(int level, const char *message, void *user) {
  warnings *w = user;
  if (level != COLLGEN_LOG_WARN) return;
  if (w->count++ == 0) snprintf(w->first, sizeof w->first, "%s", message);
}

/* The child's whole job: NVRTC made unloadable before any use, then every
** call shape of the matrix. Exit 0 when all were disk hits, 1 on misses,
** 3 when NVRTC turned out to be loadable (the check would prove nothing),
** 5 when a read-only cache did not give exactly one warning saying so. */
static int run_sweep(FILE *report, int read_only) {
  setenv("COLLGEN_NVRTC_LIBRARY", "/nonexistent", 1);
  warnings w = {0, ""};
  collgen_set_log_handler(count_warning, &w);
  sweep *s = calloc(1, sizeof *s);
  s->report = report;
  if (collgen_generator_create(&s->gen, dir) != COLLGEN_OK) return 4;

  collgen_shape_t probe;
  collgen_kernel_info_t info;
  collgen_shape_init(&probe, COLLGEN_OP_ALLGATHER_RMSNORM);
  probe.cols = 333; /* not in the matrix */
  int rc = collgen_get_kernel(s->gen, &probe, &info);
  if (rc != COLLGEN_ERR_NO_NVRTC) {
    fprintf(s->report, "cols 333 (not pregenerated) gave %s, not COLLGEN_ERR_NO_NVRTC\n",
            collgen_status_name(rc));
    fclose(s->report);
    return 3;
  }

  static int64_t sizes[4096];
  for (size_t d = 0; d < sizeof DTYPES / sizeof DTYPES[0]; ++d) {
    int esize = DTYPES[d] == COLLGEN_DTYPE_F32 ? 4 : 2;
    int64_t ll_elems = (int64_t)COLLGEN_LL_LINES * 8 / esize;
    int nelems = sweep_sizes(300, 8, ll_elems, MAX_SIZE, sizes);
    /* the ops over elements: allreduce_sum, broadcast (groups of one copy) */
    static const collgen_op_t elem_ops[] = {COLLGEN_OP_ALLREDUCE_SUM, COLLGEN_OP_BROADCAST};
    for (size_t o = 0; o < sizeof elem_ops / sizeof elem_ops[0]; ++o)
      for (size_t k = 0; k < sizeof NGPUS / sizeof NGPUS[0]; ++k)
        for (int g = 2; g <= NGPUS[k]; ++g) {
          if (NGPUS[k] % g) continue;
          collgen_shape_t base;
          collgen_shape_init(&base, elem_ops[o]);
          base.dtype = DTYPES[d];
          base.ngpus = NGPUS[k];
          base.group_size = g;
          sweep_allreduce(s, base, sizes, nelems);
        }
    /* all_gather and scatter (the gathered elems, the largest chunk's;
    ** same flags): their kernels depend on the group alone, so every 16th
    ** size is plenty */
    static const collgen_op_t pull_ops[] = {COLLGEN_OP_ALL_GATHER, COLLGEN_OP_SCATTER};
    for (size_t k = 0; k < sizeof NGPUS / sizeof NGPUS[0]; ++k)
      for (int g = 2; g <= NGPUS[k]; ++g) {
        if (NGPUS[k] % g) continue;
        collgen_shape_t base;
        for (size_t o = 0; o < sizeof pull_ops / sizeof pull_ops[0]; ++o) {
          collgen_shape_init(&base, pull_ops[o]);
          base.dtype = DTYPES[d];
          base.ngpus = NGPUS[k];
          base.group_size = g;
          for (int i = 0; i < nelems; i += 16) sweep_allreduce(s, base, sizes + i, 1);
        }
        base.op = COLLGEN_OP_REDUCE_SCATTER_SUM; /* the same sweep of elems (rows of one) */
        base.cols = 1;
        base.rows = 0;
        sweep_allreduce(s, base, sizes, nelems);
      }
  }
  /* The ops that move bits plan by element size: the matrix's kernels
  ** serve the other dtypes of its sizes (f16 and i16 as bf16, i32 as f32)
  ** too, pregenerated or not; every 16th size. */
  static const collgen_dtype_t same_size[] = {COLLGEN_DTYPE_F16, COLLGEN_DTYPE_I16,
                                              COLLGEN_DTYPE_I32};
  static const collgen_op_t bits_ops[] = {COLLGEN_OP_BROADCAST, COLLGEN_OP_ALL_GATHER,
                                           COLLGEN_OP_SCATTER};
  for (size_t d = 0; d < sizeof same_size / sizeof same_size[0]; ++d) {
    const int64_t ll_elems = (int64_t)COLLGEN_LL_LINES * 8 / collgen__dtype_bytes(same_size[d]);
    const int nelems = sweep_sizes(300, 8, ll_elems, MAX_SIZE, sizes);
    for (size_t o = 0; o < sizeof bits_ops / sizeof bits_ops[0]; ++o)
      for (size_t k = 0; k < sizeof NGPUS / sizeof NGPUS[0]; ++k)
        for (int g = 2; g <= NGPUS[k]; ++g) {
          if (NGPUS[k] % g) continue;
          collgen_shape_t base;
          collgen_shape_init(&base, bits_ops[o]);
          base.dtype = same_size[d];
          base.ngpus = NGPUS[k];
          base.group_size = g;
          for (int i = 0; i < nelems; i += 16) sweep_allreduce(s, base, sizes + i, 1);
        }
  }
  sweep_row_op(s, COLLGEN_OP_ALLGATHER_RMSNORM, sizes);
  sweep_row_op(s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM, sizes);
  sweep_row_op(s, COLLGEN_OP_REDUCE_SCATTER_RMSNORM, sizes);
  fprintf(s->report, "%d calls, %d distinct kernels, %d calls (%d kernels) not served from disk\n",
          s->calls, s->nkeys, s->misses, s->nmissing);
  int warned = read_only ? w.count == 1 && strstr(w.first, "read-only") : w.count == 0;
  if (!warned)
    fprintf(s->report, "%d warnings, the first: %s\n", w.count, w.count ? w.first : "(none)");
  fclose(s->report);
  collgen_generator_destroy(s->gen);
  return s->misses ? 1 : !warned ? 5 : 0;
}

/* Runs `collgen pregen` of the matrix into dir; returns the number of
** kernels it left there (compiled + already cached). */
static int pregen(void) {
  char cmd[8192], *out = NULL;
  snprintf(cmd, sizeof cmd, "%s pregen " MATRIX_ARGS " --cache-dir '%s' -j 2", COLLGEN_CLI_PATH,
           dir);
  cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
  int compiled = -1, cached = -1, failed = -1;
  const char *line = strstr(out, "pregen: ");
  cr_assert(line && sscanf(line, "pregen: %d compiled, %d already cached, %d failed",
                           &compiled, &cached, &failed) == 3, "%s", out);
  cr_assert_eq(failed, 0, "%s", out);
  free(out);
  return compiled + cached;
}

/* Sweeps in a child (NVRTC stays unloadable there only), as another user
** on a read-only copy when `read_only`, and checks that it used exactly the
** `pregenerated` kernels. */
static void sweep_in_child(int pregenerated, int read_only) {
  char report_path[4200];
  snprintf(report_path, sizeof report_path, "%s/sweep-report.txt", dir);
  FILE *report = fopen(report_path, "w"); /* before the directory turns read-only */
  cr_assert(report);
  if (read_only) {
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "chmod -R a+rX,a-w '%s'", dir);
    cr_assert_eq(system(cmd), 0);
  }
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (read_only && geteuid() == 0 &&
        (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0))
      _exit(6); /* root passes every permission check: become nobody */
    if (read_only && access(dir, R_OK | X_OK) != 0) _exit(8);
    if (read_only && access(dir, W_OK) == 0) _exit(7);
    _exit(run_sweep(report, read_only));
  }
  fclose(report);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  char *text = tu_read_file(report_path, NULL);
  cr_log_info("%s", text ? text : "(no report)");
  cr_assert(WIFEXITED(status), "the sweep process died:\n%s", text ? text : "");
  if (WEXITSTATUS(status) == 8) {
    free(text);
    teardown(); /* a skipped test is not torn down */
    cr_skip_test("nobody cannot reach the test's folder (a private TMPDIR?)");
  }
  cr_assert_neq(WEXITSTATUS(status), 6, "could not become nobody");
  cr_assert_neq(WEXITSTATUS(status), 7, "the read-only directory is writable");
  cr_assert_eq(WEXITSTATUS(status), 0, "calls that would need NVRTC after pregen (exit %d):\n%s",
               WEXITSTATUS(status), text ? text : "(no report)");
  int calls = 0, kernels = 0;
  const char *summary = text ? strstr(text, " calls, ") : NULL;
  while (summary && summary > text && summary[-1] != '\n') --summary;
  cr_assert(summary && sscanf(summary, "%d calls, %d distinct kernels", &calls, &kernels) == 2,
            "%s", text ? text : "");
  cr_expect_eq(kernels, pregenerated,
               "pregen wrote %d kernels, the calls of its matrix use %d: it compiles kernels "
               "no call needs (or the sweep misses some)", pregenerated, kernels);
  free(text);
}

Test(pregen, every_call_shape_is_served_without_nvrtc) { sweep_in_child(pregen(), 0); }

/* A shared cache: filled by its owner, opened up read-only, then read by
** someone who can neither write it nor load NVRTC. */
Test(pregen, read_only_cache_serves_every_call_shape_to_another_user) {
  sweep_in_child(pregen(), 1);
}
