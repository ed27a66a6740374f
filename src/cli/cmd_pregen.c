/*
** cmd_pregen.c -- `collgen pregen`: compile a matrix of specs into a cache
** so that a deployment starts with zero NVRTC calls. The matrix is
** archs x ops x dtypes x ngpus x every group size dividing ngpus x (for
** allreduce) LL, one-shot, two-shot and the unaligned variants, (for
** allgather_rmsnorm) each cols. Specs that plan to the same kernel are
** compiled once. -j N forks N workers, each with its own generator.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"

#define MAX_ITEMS 16
#define MAX_SPECS 8192

static const char help[] =
    "usage: collgen pregen [options]\n"
    "  --arch LIST      archs, e.g. sm_80,sm_90 (sm_90)\n"
    "  --ops LIST       allreduce_sum,allgather_rmsnorm (both)\n"
    "  --dtypes LIST    bf16,f16,f32 (all)\n"
    "  --ngpus LIST     communicator sizes (2,4,8); every group size dividing\n"
    "                   each is included\n"
    "  --cols LIST      allgather_rmsnorm cols (1024,2048,4096,5120,7168,8192,16384)\n"
    "  --cache-dir D    cache to fill (default cache location)\n"
    "  -j N             parallel compile processes (number of CPUs)\n"
    "Prints a progress bar on a terminal and ends with\n"
    "`pregen: N compiled, M already cached, K failed`; exit 1 if K > 0.\n";

typedef struct {
  collgen_shape_t *specs;
  int n;
} spec_list;

static void add_unique(collgen_generator_t *g, spec_list *l, char (*seen)[256],
                       const collgen_shape_t *s) {
  collgen_plan_t plan;
  if (collgen_plan(g, s, &plan) != COLLGEN_OK) {
    fprintf(stderr, "pregen: skipping invalid spec: %s\n", collgen_generator_last_error(g));
    return;
  }
  for (int i = 0; i < l->n; ++i)
    if (strcmp(seen[i], plan.canonical) == 0) return;
  if (l->n >= MAX_SPECS) return;
  snprintf(seen[l->n], 256, "%s", plan.canonical);
  l->specs[l->n++] = *s;
}

static void progress(int done, int total) {
  if (!isatty(2)) return;
  int width = 40, fill = total ? done * width / total : width;
  fprintf(stderr, "\r[");
  for (int i = 0; i < width; ++i) fputc(i < fill ? '#' : ' ', stderr);
  fprintf(stderr, "] %d/%d", done, total);
  if (done == total) fputc('\n', stderr);
  fflush(stderr);
}

/* Worker: compiles specs w, w+nw, ... and writes one status byte each
** ('c' compiled, 'h' cached, 'f' failed) to fd. */
static void worker(const spec_list *l, int w, int nw, const char *cache_dir, int fd) {
  collgen_generator_t *g;
  if (collgen_generator_create(&g, cache_dir) != COLLGEN_OK) {
    fprintf(stderr, "pregen: %s\n", collgen_last_error());
    for (int i = w; i < l->n; i += nw)
      if (write(fd, "f", 1) < 0) break;
    return;
  }
  for (int i = w; i < l->n; i += nw) {
    collgen_kernel_info_t info;
    int rc = collgen_get_kernel(g, &l->specs[i], &info);
    char status = rc != COLLGEN_OK ? 'f' : info.cache_hit ? 'h' : 'c';
    if (rc != COLLGEN_OK)
      fprintf(stderr, "\npregen: %s: %s\n", collgen_status_name(rc),
              collgen_generator_last_error(g));
    if (write(fd, &status, 1) < 0) break;
  }
  collgen_generator_destroy(g);
}

int cmd_pregen(int argc, char **argv) {
  char arch_s[256] = "sm_90", ops_s[256] = "allreduce_sum,allgather_rmsnorm";
  char dtypes_s[256] = "bf16,f16,f32", ngpus_s[256] = "2,4,8";
  char cols_s[512] = "1024,2048,4096,5120,7168,8192,16384";
  const char *cache_dir = NULL;
  long jobs = sysconf(_SC_NPROCESSORS_ONLN);
  for (int i = 1; i < argc; ++i) {
    if (cli_is_help(argv[i])) { fputs(help, stdout); return 0; }
    if (i + 1 >= argc) return cli_usage_error("pregen", "option '%s' needs a value", argv[i]);
    const char *v = argv[++i];
    if (strcmp(argv[i - 1], "--arch") == 0) snprintf(arch_s, sizeof arch_s, "%s", v);
    else if (strcmp(argv[i - 1], "--ops") == 0) snprintf(ops_s, sizeof ops_s, "%s", v);
    else if (strcmp(argv[i - 1], "--dtypes") == 0) snprintf(dtypes_s, sizeof dtypes_s, "%s", v);
    else if (strcmp(argv[i - 1], "--ngpus") == 0) snprintf(ngpus_s, sizeof ngpus_s, "%s", v);
    else if (strcmp(argv[i - 1], "--cols") == 0) snprintf(cols_s, sizeof cols_s, "%s", v);
    else if (strcmp(argv[i - 1], "--cache-dir") == 0) cache_dir = v;
    else if (strcmp(argv[i - 1], "-j") == 0) jobs = atol(v);
    else return cli_usage_error("pregen", "unknown option '%s'", argv[i - 1]);
  }
  if (jobs < 1 || jobs > 256) return cli_usage_error("pregen", "-j must be 1..256");
  char *archs[MAX_ITEMS], *ops[MAX_ITEMS], *dtypes[MAX_ITEMS], *ngpus[MAX_ITEMS], *cols[MAX_ITEMS];
  int na = cli_split(arch_s, archs, MAX_ITEMS), no = cli_split(ops_s, ops, MAX_ITEMS);
  int nd = cli_split(dtypes_s, dtypes, MAX_ITEMS), nn = cli_split(ngpus_s, ngpus, MAX_ITEMS);
  int nc = cli_split(cols_s, cols, MAX_ITEMS);

  collgen_generator_t *g;
  if (collgen_generator_create(&g, cache_dir) != COLLGEN_OK) {
    fprintf(stderr, "collgen pregen: %s\n", collgen_last_error());
    return 1;
  }
  spec_list l = {calloc(MAX_SPECS, sizeof(collgen_shape_t)), 0};
  char (*seen)[256] = calloc(MAX_SPECS, 256);
  if (!l.specs || !seen) return 1;
  for (int a = 0; a < na; ++a)
    for (int o = 0; o < no; ++o)
      for (int d = 0; d < nd; ++d)
        for (int n = 0; n < nn; ++n) {
          collgen_op_t op;
          collgen_dtype_t dt;
          if (collgen__parse_op(ops[o], &op) || collgen__parse_dtype(dtypes[d], &dt)) {
            fprintf(stderr, "collgen pregen: unknown op or dtype '%s'/'%s'\n", ops[o], dtypes[d]);
            return 2;
          }
          int ng = atoi(ngpus[n]);
          for (int gs = 1; gs <= ng; ++gs) {
            if (ng % gs) continue;
            collgen_shape_t s;
            collgen_shape_init(&s, op);
            s.dtype = dt;
            s.ngpus = ng;
            s.group_size = gs;
            snprintf(s.arch, sizeof s.arch, "%s", archs[a]);
            if (op == COLLGEN_OP_ALLREDUCE_SUM) {
              /* small (LL), large (one-/two-shot), each in-place or not,
              ** aligned or not: every algorithm the planner can pick */
              static const int64_t sizes[] = {4096, 64 << 20};
              for (int al = 1; al >= 0; --al)
                for (int k = 0; k < 4; ++k) {
                  s.aligned16 = al;
                  s.elems = sizes[k % 2];
                  s.inplace = k >= 2;
                  add_unique(g, &l, seen, &s);
                }
            } else {
              if (gs < 2) continue;
              for (int c = 0; c < nc; ++c) {
                s.cols = atoll(cols[c]);
                s.rows = 128;
                add_unique(g, &l, seen, &s);
              }
            }
          }
        }
  collgen_generator_destroy(g);
  if (jobs > l.n) jobs = l.n ? l.n : 1;

  int fds[2];
  if (pipe(fds) != 0) return 1;
  fflush(NULL);
  for (long w = 0; w < jobs; ++w) {
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      worker(&l, (int)w, (int)jobs, cache_dir, fds[1]);
      _exit(0);
    }
  }
  close(fds[1]);
  int compiled = 0, cached = 0, failed = 0, done = 0;
  char status;
  progress(0, l.n);
  while (read(fds[0], &status, 1) == 1) {
    compiled += status == 'c';
    cached += status == 'h';
    failed += status == 'f';
    progress(++done, l.n);
  }
  close(fds[0]);
  while (wait(NULL) > 0) {}
  failed += l.n - done; /* a worker that died reported nothing */
  printf("pregen: %d compiled, %d already cached, %d failed\n", compiled, cached, failed);
  free(l.specs);
  free(seen);
  return failed ? 1 : 0;
}
