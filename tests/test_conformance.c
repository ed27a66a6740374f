/*
** test_conformance.c -- template conformance over the planner's own variant
** space. The matrix comes from the catalog: every op x every dtype on the
** FULL_ARCHS x ngpus 2..8, every kernel collgen_plan_variants lists (every
** group size, any size, aligned or not, in place or not, every FP8 output
** mode the arch has, the RMSNorm ops for the COLS below); on every other
** catalog arch, one kernel per op and FP8 mode. A dtype the planner refuses
** for an op gives no kernels only when the catalog marks it copy-only (no
** accumulate type) and the op as computing, or the arch is older than the
** dtype; any other refusal fails. Each distinct kernel (canonical spec) is checked once, by worker
** processes sharing the list: the source is byte-identical from two fresh
** Lua states, NVRTC compiles it without warnings, the cubin exports the
** kernel symbol with the parameter block the runtime builds
** (sizeof(collgen__kparams), one parameter), registers x block fit the SM,
** and ptxas reports no spills nor local memory. Kernels whose sources differ
** only in the kernel's name (same code) are compiled once.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog.h"
#include "collgen.h"
#include "cubin_info.h"
#include "device_abi.h"
#include "sha256.h"

/* The archs that get the whole variant space: the oldest the catalog has
** and the one the kernels are tuned for. */
static const char *const FULL_ARCHS[] = {"sm_80", "sm_90"};

/* One cols per RMSNorm kernel family: one lane (1), a partial block of
** scalars (100), one full item per thread (4096), a partial last item and
** odd item counts (5120), 16 values per thread (8192), the wide LL rows
** and 32 scalars per thread (16384), the looped kernel (40000). Other cols
** (7, 1000, 2048, 4095, ...) only change constants within these families.
** Ops without cols ignore the list. */
static const int64_t COLS[] = {1, 100, 4096, 5120, 8192, 16384, 40000};

#define MAX_REPORTED 20 /* failing kernels described in full */

/* One distinct kernel: the first shape of the matrix that plans to it. */
typedef struct {
  collgen_shape_t shape;
  collgen_plan_t plan;
  uint8_t source_hash[32]; /* of the source from the parent's Lua state */
  uint8_t code_hash[32];   /* arch + source with the kernel name blanked */
  int compile_as;          /* index of the item whose compile stands for this one */
} item;

/* What a worker found for one item (written to memory shared with the
** parent). */
typedef struct {
  int done, same_source, rc, cache_hit, warned, spill_bytes, registers;
  int inspect_rc;
  collgen__cubin_kernel k;
  char text[1536]; /* the error or the NVRTC log */
} result;

typedef struct {
  item *items;
  int n, cap;
} item_list;

static void sha(const char *text, const char *arch, uint8_t out[32]) {
  collgen__sha256_ctx s;
  collgen__sha256_init(&s);
  if (arch) collgen__sha256_field(&s, "arch", arch, strlen(arch));
  collgen__sha256_field(&s, "source", text, strlen(text));
  collgen__sha256_final(&s, out);
}

/* The source with every occurrence of `name` replaced by '@' (malloc'd). */
static char *blank_name(const char *source, const char *name) {
  char *out = malloc(strlen(source) + 1), *w = out;
  cr_assert(out);
  size_t len = strlen(name);
  for (const char *q; (q = strstr(source, name)); source = q + len) {
    memcpy(w, source, (size_t)(q - source));
    w += q - source;
    *w++ = '@';
  }
  strcpy(w, source);
  return out;
}

/* "allreduce_sum bf16 sm_90 group 2 cols 0 fp8 none (ngpus 4): kernel K" */
static const char *where(const collgen_shape_t *s, const char *kernel, char *buf, size_t n) {
  snprintf(buf, n, "%s %s %s group %d cols %lld fp8 %s (ngpus %d): kernel %s",
           collgen__op_name(s->op), collgen__dtype_name(s->dtype), s->arch, s->group_size,
           (long long)s->cols, collgen__fp8_name(s->fp8), s->ngpus, kernel);
  return buf;
}

/* Appends the shapes whose canonical spec is new. */
static void add_shapes(collgen_generator_t *g, item_list *l, const collgen_shape_t *shapes,
                       int count) {
  for (int i = 0; i < count; ++i) {
    collgen_plan_t plan;
    char w[512];
    cr_assert_eq(collgen_plan(g, &shapes[i], &plan), COLLGEN_OK, "%s: %s",
                 where(&shapes[i], "?", w, sizeof w), collgen_generator_last_error(g));
    int seen = 0;
    for (int k = l->n - 1; k >= 0 && !seen; --k) seen = !strcmp(l->items[k].plan.canonical, plan.canonical);
    if (seen) continue;
    if (l->n == l->cap) {
      l->cap = l->cap ? 2 * l->cap : 1024;
      l->items = realloc(l->items, (size_t)l->cap * sizeof *l->items);
      cr_assert(l->items);
    }
    item *it = &l->items[l->n++];
    memset(it, 0, sizeof *it);
    it->shape = shapes[i];
    it->plan = plan;
  }
}

/* The kernels of one class; 0 when the planner refuses a dtype the op may
** refuse (copy-only with an op that computes, or newer than the arch), a
** failure on any other refusal. */
static int class_shapes(collgen_generator_t *g, const collgen_shape_class_t *cls,
                        collgen_shape_t **shapes) {
  int count = 0;
  int rc = collgen_plan_variants(g, cls, shapes, &count);
  const collgen__dtype_desc *dt = collgen__dtype_find(cls->dtype);
  const collgen__arch_desc *arch = collgen__arch_find(cls->arch);
  const collgen__op_desc *op = collgen__op_find(cls->op);
  cr_assert(dt && arch && op);
  if (rc == COLLGEN_ERR_INVALID_ARG && ((!dt->acc_type && op->computes) || arch->sm < dt->min_sm))
    return 0;
  cr_assert_eq(rc, COLLGEN_OK, "%s %s %s ngpus %d: %s", collgen__op_name(cls->op), dt->name,
               cls->arch, cls->ngpus, collgen_generator_last_error(g));
  cr_assert_gt(count, 0, "%s %s %s ngpus %d: no kernels", collgen__op_name(cls->op), dt->name,
               cls->arch, cls->ngpus);
  return count;
}

static int is_full_arch(const char *name) {
  for (size_t i = 0; i < sizeof FULL_ARCHS / sizeof FULL_ARCHS[0]; ++i)
    if (!strcmp(FULL_ARCHS[i], name)) return 1;
  return 0;
}

/* The whole matrix, each canonical spec once. */
static void build_matrix(collgen_generator_t *g, item_list *l) {
  for (int a = 0; a < collgen__arch_count(); ++a) {
    const char *arch = collgen__arch_at(a)->name;
    int full = is_full_arch(arch);
    for (int o = 0; o < collgen__op_count(); ++o)
      for (int d = 0; d < collgen__dtype_count(); ++d) {
        /* other archs: the default dtype, 2 ranks in one group */
        if (!full && d > 0) continue;
        static const int one_group[] = {2};
        collgen_shape_class_t cls;
        memset(&cls, 0, sizeof cls);
        cls.op = collgen__op_at(o)->op;
        cls.dtype = collgen__dtype_at(d)->dtype;
        cls.cols = full ? COLS : &COLS[2];
        cls.cols_count = full ? (int)(sizeof COLS / sizeof COLS[0]) : 1;
        cls.group_sizes = full ? NULL : one_group;
        cls.group_size_count = full ? 0 : 1;
        snprintf(cls.arch, sizeof cls.arch, "%s", arch);
        for (cls.ngpus = 2; cls.ngpus <= (full ? 8 : 2); ++cls.ngpus) {
          collgen_shape_t *shapes = NULL;
          int count = class_shapes(g, &cls, &shapes);
          if (full) {
            add_shapes(g, l, shapes, count);
          } else { /* the first kernel of each FP8 output mode */
            for (int i = 0; i < count; ++i) {
              int first = 1;
              for (int k = 0; k < i && first; ++k) first = shapes[k].fp8 != shapes[i].fp8;
              if (first) add_shapes(g, l, &shapes[i], 1);
            }
          }
          free(shapes);
        }
      }
  }
}

static int by_code(const void *x, const void *y) {
  const item *const *a = x, *const *b = y;
  int c = memcmp((*a)->code_hash, (*b)->code_hash, 32);
  return c ? c : (*a > *b) - (*a < *b); /* ties: matrix order */
}

/* Renders every item in the parent's Lua state and finds which compile
** each one shares (its own, unless an earlier item has the same code). */
static int find_compiles(collgen_generator_t *g, item_list *l) {
  item **order = malloc((size_t)l->n * sizeof *order);
  cr_assert(order);
  for (int i = 0; i < l->n; ++i) {
    item *it = &l->items[i];
    char *source = NULL;
    char w[512];
    cr_assert_eq(collgen_generate_source(g, &it->shape, 1, &source), COLLGEN_OK, "%s: %s",
                 where(&it->shape, it->plan.kernel, w, sizeof w), collgen_generator_last_error(g));
    sha(source, NULL, it->source_hash);
    char *code = blank_name(source, it->plan.kernel);
    sha(code, it->shape.arch[0] ? it->shape.arch : "sm_90", it->code_hash);
    free(code);
    free(source);
    order[i] = it;
  }
  qsort(order, (size_t)l->n, sizeof *order, by_code);
  int compiles = 0;
  for (int i = 0; i < l->n; ++i) {
    int same = i > 0 && !memcmp(order[i]->code_hash, order[i - 1]->code_hash, 32);
    order[i]->compile_as = same ? order[i - 1]->compile_as : (int)(order[i] - l->items);
    compiles += !same;
  }
  free(order);
  return compiles;
}

/* Checks one item in the worker's own Lua state; compiles it when it
** stands for its code. */
static void check_item(collgen_generator_t *g, const item_list *l, int i, result *r) {
  const item *it = &l->items[i];
  char *source = NULL;
  r->rc = collgen_generate_source(g, &it->shape, 1, &source);
  if (r->rc == COLLGEN_OK) {
    uint8_t h[32];
    sha(source, NULL, h);
    r->same_source = !memcmp(h, it->source_hash, 32);
    free(source);
  }
  if (r->rc == COLLGEN_OK && it->compile_as == i) {
    collgen_kernel_info_t info;
    r->rc = collgen_get_kernel(g, &it->shape, &info);
    if (r->rc == COLLGEN_OK) {
      const char *log = collgen_generator_last_log(g);
      r->cache_hit = info.cache_hit;
      r->warned = strstr(log, "warning") != NULL;
      r->spill_bytes = info.spill_bytes;
      r->registers = info.registers;
      r->inspect_rc = collgen__cubin_inspect(info.cubin, info.cubin_size, it->plan.kernel, &r->k);
      snprintf(r->text, sizeof r->text, "%s", log);
    }
  }
  if (r->rc != COLLGEN_OK) snprintf(r->text, sizeof r->text, "%s", collgen_generator_last_error(g));
  r->done = 1;
}

/* Worker: takes the next unclaimed item until none is left. */
static void work(const item_list *l, result *results, int *next) {
  collgen_generator_t *g = NULL;
  if (collgen_generator_create(&g, NULL) != COLLGEN_OK) return; /* its items stay not done */
  for (int i; (i = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED)) < l->n;)
    check_item(g, l, i, &results[i]);
  collgen_generator_destroy(g);
}

/* The checks of one item's result; 1 when all hold. Describes the first
** MAX_REPORTED failing items in full. */
static int judge(const item_list *l, const result *results, int i, int *reported) {
  const item *it = &l->items[i];
  const result *r = &results[i];
  const result *c = &results[it->compile_as]; /* the compile this item shares */
  const collgen_plan_t *p = &it->plan;
  char w[512];
  where(&it->shape, p->kernel, w, sizeof w);
  int ok = r->done && r->same_source && c->done && c->rc == COLLGEN_OK && c->cache_hit == 0 &&
           !c->warned && c->spill_bytes == 0 && c->registers > 0 &&
           c->registers * p->block <= 65536 && c->inspect_rc == 0 && c->k.found &&
           c->k.param_count == 1 && c->k.param_bytes == (int)sizeof(collgen__kparams) &&
           c->k.registers == c->registers && c->k.frame_bytes == 0;
  if (ok || ++*reported > MAX_REPORTED) return ok;
  if (it->compile_as != i)
    cr_log_error("%s: compiled as kernel %s (the same code)", w, l->items[it->compile_as].plan.kernel);
  cr_expect(r->done && c->done, "%s: no result from its worker", w);
  if (!r->done || !c->done) return 0;
  cr_expect(r->same_source, "%s: source differs between two Lua states", w);
  cr_expect_eq(c->rc, COLLGEN_OK, "%s: %s: %s", w, collgen_status_name(c->rc), c->text);
  if (c->rc != COLLGEN_OK) return 0;
  cr_expect_eq(c->cache_hit, 0, "%s: a fresh memory-only cache must compile", w);
  cr_expect(!c->warned, "%s: NVRTC warnings:\n%s", w, c->text);
  cr_expect_eq(c->spill_bytes, 0, "%s spills %d bytes", w, c->spill_bytes);
  cr_expect(c->registers > 0 && c->registers * p->block <= 65536, "%s: %d registers x %d threads",
            w, c->registers, p->block);
  cr_expect_eq(c->inspect_rc, 0, "%s: the cubin is not a well-formed ELF", w);
  cr_expect(c->k.found, "%s: symbol missing from the cubin", w);
  cr_expect_eq(c->k.param_count, 1, "%s: %d parameters", w, c->k.param_count);
  cr_expect_eq(c->k.param_bytes, (int)sizeof(collgen__kparams), "%s: parameter block %d bytes", w,
               c->k.param_bytes);
  cr_expect_eq(c->k.registers, c->registers, "%s: .nv.info and the reported count disagree", w);
  cr_expect_eq(c->k.frame_bytes, 0, "%s uses %d bytes of local memory:\n%s", w, c->k.frame_bytes,
               c->text);
  return 0;
}

Test(conformance, every_kernel_of_the_catalog, .timeout = 1800) {
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
  collgen_generator_t *g = NULL;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  item_list l = {NULL, 0, 0};
  build_matrix(g, &l);
  int compiles = find_compiles(g, &l);
  collgen_generator_destroy(g); /* before fork: each worker makes its own */

  /* results and the claim counter live in memory the workers share */
  size_t bytes = (size_t)l.n * sizeof(result) + 64;
  void *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert_neq(shared, MAP_FAILED);
  int *next = shared;
  result *results = (result *)((char *)shared + 64);
  long jobs = sysconf(_SC_NPROCESSORS_ONLN);
  const char *env = getenv("COLLGEN_TEST_JOBS");
  if (env && atoi(env) > 0) jobs = atoi(env);
  if (jobs < 1) jobs = 1;
  fflush(NULL);
  for (long w = 0; w < jobs; ++w) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
      work(&l, results, next);
      _exit(0);
    }
  }
  int status;
  while (wait(&status) > 0) cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a worker died");

  int failed = 0, reported = 0;
  for (int i = 0; i < l.n; ++i) failed += !judge(&l, results, i, &reported);
  cr_log_info("%d distinct kernels, %d compiles, %ld workers", l.n, compiles, jobs);
  cr_assert_eq(failed, 0, "%d of %d kernels failed (the first %d are described above)", failed,
               l.n, MAX_REPORTED);
  munmap(shared, bytes);
  free(l.items);
}
