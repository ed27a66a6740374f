/*
** cmd_pregen.c -- `collgen pregen`: compile every kernel the planner can
** pick for a matrix (archs x ops x dtypes x ngpus, every group size
** dividing ngpus, for the RMSNorm ops each cols, for
** allreduce_residual_rmsnorm each FP8 output mode) into a cache, so that a
** deployment starts with zero NVRTC calls. The kernels come from the
** planner itself (collgen_plan_variants): any element or row count,
** aligned or not, in place or not, any grid cap. Each distinct kernel is
** compiled once; -j N forks N workers, each with its own generator.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog.h"
#include "cli.h"
#include "escape.h"
#include "generator.h"
#include "internal.h"

/* The help, with the catalog's names. */
static void print_help(void) {
  char archs[256], dtypes[256], fp8[256];
  cli_arch_names(archs, sizeof archs, ",");
  cli_dtype_names(dtypes, sizeof dtypes, ",");
  cli_fp8_names(fp8, sizeof fp8, ",");
  printf("usage: collgen pregen [options]\n"
         "  --arch LIST      archs (sm_90), each one of: %s\n"
         "  --ops LIST       ops, e.g. allreduce_sum,allgather_rmsnorm (all)\n"
         "  --dtypes LIST    %s (all)\n"
         "  --ngpus LIST     communicator sizes, each 1..%d (2,4,8); every group size\n"
         "                   dividing each is included\n"
         "  --cols LIST      cols of the RMSNorm ops, each 1..2^31\n"
         "                   (1024,2048,4096,5120,7168,8192,16384)\n"
         "  --fp8 LIST       the residual RMSNorm ops' normed output: %s\n"
         "                   (every mode the arch has: FP8 needs sm_89)\n"
         "  --cache-dir D    cache to fill (default cache location)\n"
         "  -j N             parallel compile processes, 1..%d (number of CPUs)\n"
         "Every kernel the planner can pick for a call of the matrix is compiled:\n"
         "any element or row count, aligned or not, in place or not, any grid cap.\n"
         "A kernel counts as done only when it is on disk in the cache at the end\n"
         "(a write error, a memory-only cache or eviction under\n"
         "COLLGEN_CACHE_MAX_BYTES make it a failure). Prints a progress bar on a\n"
         "terminal and ends with `pregen: N compiled, M already cached, K failed`;\n"
         "exit 1 if K > 0 or on a template or planner error, 2 on a bad option,\n"
         "list item or empty matrix.\n",
         archs, dtypes, COLLGEN_MAX_DEVICES, fp8, CLI_MAX_JOBS);
}

/* One kernel to compile: a shape that plans to it and its canonical text. */
typedef struct {
  collgen_shape_t shape;
  char canonical[sizeof(((collgen_plan_t *)0)->canonical)];
} spec;

typedef struct {
  spec *items;
  int n, cap;
} spec_list;

static int append(spec_list *l, const collgen_shape_t *s, const char *canonical) {
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 256;
    spec *grown = realloc(l->items, (size_t)cap * sizeof *grown);
    if (!grown) return -1;
    l->items = grown;
    l->cap = cap;
  }
  l->items[l->n].shape = *s;
  snprintf(l->items[l->n].canonical, sizeof l->items[l->n].canonical, "%s", canonical);
  l->n++;
  return 0;
}

static int by_canonical(const void *a, const void *b) {
  return strcmp(((const spec *)a)->canonical, ((const spec *)b)->canonical);
}

/* Sorts by canonical text and drops repeats (classes of different ngpus
** share kernels, e.g. groups of 2 within 2, 4 and 8 ranks). */
static void unique(spec_list *l) {
  if (l->n == 0) return;
  qsort(l->items, (size_t)l->n, sizeof *l->items, by_canonical);
  int k = 1;
  for (int i = 1; i < l->n; ++i)
    if (strcmp(l->items[i].canonical, l->items[k - 1].canonical) != 0) l->items[k++] = l->items[i];
  l->n = k;
}

/* Appends every kernel of one class to l. Returns 0, or an exit code with
** a message on stderr: 2 when the planner refuses the class (an FP8 mode
** the arch lacks, say), 1 on any other failure (a fault of the planner
** included: cli_planner_failure). With `skip_refused`, a refusal is no
** failure: the class adds nothing (a copy-only dtype of the default list
** with an op that computes). */
static int add_class(collgen_generator_t *g, const collgen_shape_class_t *cls, spec_list *l,
                     int skip_refused) {
  collgen_shape_t *shapes = NULL;
  int count = 0;
  int status = collgen_plan_variants(g, cls, &shapes, &count);
  if (status == COLLGEN_ERR_INVALID_ARG && skip_refused) return 0;
  if (status != COLLGEN_OK)
    return cli_planner_failure("pregen", status, collgen_generator_last_error(g));
  int rc = 0;
  for (int i = 0; i < count && rc == 0; ++i) {
    collgen_plan_t plan;
    status = collgen_plan(g, &shapes[i], &plan);
    if (status != COLLGEN_OK) {
      /* the planner's own variant: a refusal is its fault, not the user's */
      rc = cli_failure("pregen", status == COLLGEN_ERR_INVALID_ARG ? COLLGEN_ERR_TEMPLATE : status,
                       collgen_generator_last_error(g));
    } else if (append(l, &shapes[i], plan.canonical) != 0) {
      fprintf(stderr, "collgen pregen: out of memory\n");
      rc = 1;
    }
  }
  free(shapes);
  return rc;
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

/* What a worker reports for one kernel; one write() of less than
** PIPE_BUF bytes, so records of concurrent workers never interleave. */
typedef struct {
  int32_t index;
  char status; /* 'c' compiled, 'h' found in the cache, 'f' failed */
  char key[65];
} record;

/* Worker: compiles specs w, w+nw, ... and reports one record each. */
static void worker(const spec_list *l, int w, int nw, const char *cache_dir, int fd) {
  collgen_generator_t *g;
  record rec;
  memset(&rec, 0, sizeof rec);
  int status = collgen_generator_create(&g, cache_dir);
  if (status != COLLGEN_OK) {
    cli_failure("pregen", status, collgen_last_error());
    rec.status = 'f';
    for (int i = w; i < l->n; i += nw) {
      rec.index = i;
      if (write(fd, &rec, sizeof rec) != (ssize_t)sizeof rec) break;
    }
    return;
  }
  for (int i = w; i < l->n; i += nw) {
    collgen_kernel_info_t info;
    int rc = collgen_get_kernel(g, &l->items[i].shape, &info);
    memset(&rec, 0, sizeof rec);
    rec.index = i;
    rec.status = rc != COLLGEN_OK ? 'f' : info.cache_hit ? 'h' : 'c';
    if (rc == COLLGEN_OK) memcpy(rec.key, info.key, sizeof rec.key);
    else
      fprintf(stderr, "\ncollgen pregen: %s: %s\n", collgen_status_name(rc),
              collgen_generator_last_error(g));
    if (write(fd, &rec, sizeof rec) != (ssize_t)sizeof rec) break;
  }
  collgen_generator_destroy(g);
}

/* Forks `jobs` workers over the list, then checks that every kernel they
** report is on disk in `dir` (the cache they wrote to): one evicted by a
** later write, or never written, is a failure. Prints the summary line and
** returns the number of failed kernels. */
static int compile_all(const spec_list *l, long jobs, const char *dir, const char *cache_dir) {
  if (jobs > l->n) jobs = l->n;
  char *status = calloc((size_t)l->n, 1);
  char (*keys)[65] = calloc((size_t)l->n, sizeof *keys);
  int fds[2] = {-1, -1};
  if (!status || !keys || pipe(fds) != 0) {
    perror("collgen pregen");
    free(status);
    free(keys);
    printf("pregen: 0 compiled, 0 already cached, %d failed\n", l->n);
    return l->n;
  }
  fflush(NULL);
  for (long w = 0; w < jobs; ++w) {
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      worker(l, (int)w, (int)jobs, cache_dir, fds[1]);
      _exit(0);
    }
    if (pid < 0) perror("collgen pregen: fork"); /* its share is counted as failed */
  }
  close(fds[1]);
  int done = 0;
  record rec;
  progress(0, l->n);
  while (collgen__read_full(fds[0], &rec, sizeof rec) == 0) {
    if (rec.index < 0 || rec.index >= l->n || status[rec.index]) continue;
    rec.key[64] = 0;
    status[rec.index] = rec.status == 'c' || rec.status == 'h' ? rec.status : 'f';
    memcpy(keys[rec.index], rec.key, sizeof rec.key);
    progress(++done, l->n);
  }
  close(fds[0]);
  while (wait(NULL) > 0) {}
  int compiled = 0, cached = 0, failed = 0, reported = 0;
  for (int i = 0; i < l->n; ++i) {
    char why[4600];
    if (!status[i]) {
      status[i] = 'f'; /* a worker that died reported nothing */
      snprintf(why, sizeof why, "no report from its worker");
    } else if (status[i] != 'f' && !cli_entry_on_disk(dir, keys[i], why, sizeof why)) {
      status[i] = 'f';
    } else {
      why[0] = 0;
    }
    compiled += status[i] == 'c';
    cached += status[i] == 'h';
    failed += status[i] == 'f';
    const char *kernel = strstr(l->items[i].canonical, "kernel=");
    char shown[COLLGEN_ESCAPED_SIZE(sizeof why)]; /* why names the cache folder */
    if (why[0] && reported++ < 10)
      fprintf(stderr, "collgen pregen: %s is not on disk after pregen: %s\n",
              kernel ? kernel + 7 : l->items[i].canonical, collgen__escape(why, shown, sizeof shown));
  }
  if (reported > 10) fprintf(stderr, "collgen pregen: ... and %d more not on disk\n", reported - 10);
  if (reported)
    fprintf(stderr, "collgen pregen: (write errors are warned above; COLLGEN_CACHE_MAX_BYTES=%lld "
            "evicts least-recently-used entries)\n", (long long)collgen__param_cache_max_bytes());
  printf("pregen: %d compiled, %d already cached, %d failed\n", compiled, cached, failed);
  free(status);
  free(keys);
  return failed;
}

/* Builds the list of distinct kernels of the matrix; returns the exit
** code of a failure, or -1. */
static int build_matrix(collgen_generator_t *g, const cli_pregen_opts *o, spec_list *l) {
  int rc = -1;
  for (int a = 0; a < o->archs.n && rc < 0; ++a)
    for (int k = 0; k < o->ops.n && rc < 0; ++k)
      for (int d = 0; d < o->dtypes.n && rc < 0; ++d) {
        collgen_shape_class_t cls;
        memset(&cls, 0, sizeof cls);
        cls.op = o->op[k];
        cls.dtype = o->dtype[d];
        snprintf(cls.arch, sizeof cls.arch, "%s", o->archs.items[a]);
        cls.cols = o->cols;
        cls.cols_count = o->cols_count;
        cls.fp8_modes = o->fp8;
        cls.fp8_mode_count = o->fp8s.n;
        for (int n = 0; n < o->ngpus_count && rc < 0; ++n) {
          cls.ngpus = (int)o->ngpus[n];
          int status = add_class(g, &cls, l, o->all_dtypes && !collgen__dtype_reduces(cls.dtype));
          if (status != 0) rc = status;
        }
      }
  if (rc < 0 && l->n == 0)
    rc = cli_usage_error("pregen", "the matrix has no kernel to compile: '--ops %s --ngpus %s' "
                         "(allreduce_sum over groups of one is a copy: add an --ngpus above 1 "
                         "or an RMSNorm op)", o->ops_text, o->ngpus_text);
  return rc;
}

int cmd_pregen(int argc, char **argv) {
  cli_pregen_opts o;
  spec_list l = {NULL, 0, 0};
  collgen_generator_t *g = NULL;
  char dir[4096] = "";
  int rc = cli_pregen_parse(argc, argv, sysconf(_SC_NPROCESSORS_ONLN), &o);
  if (rc == CLI_HELP) print_help();
  if (rc != 0) {
    rc = rc == CLI_HELP ? 0 : rc;
    goto out;
  }
  rc = collgen_generator_create(&g, o.cache_dir);
  if (rc != COLLGEN_OK) {
    rc = cli_failure("pregen", rc, collgen_last_error());
    goto out;
  }
  rc = build_matrix(g, &o, &l);
  if (rc >= 0) goto out;
  unique(&l);
  /* A memory-only cache (unusable directory, COLLGEN_CACHE_DISABLE=1)
  ** would compile everything and keep nothing. */
  const char *d = collgen__generator_cache_dir(g);
  if (!d) {
    fprintf(stderr, "collgen pregen: the cache is not usable on disk (%s): nothing would be "
            "written\n", collgen__param_cache_disable() ? "COLLGEN_CACHE_DISABLE=1"
                                                        : "see the warning above");
    printf("pregen: 0 compiled, 0 already cached, %d failed\n", l.n);
    rc = 1;
    goto out;
  }
  snprintf(dir, sizeof dir, "%s", d);
  collgen_generator_destroy(g); /* before fork: the workers make their own */
  g = NULL;
  rc = compile_all(&l, o.jobs, dir, o.cache_dir) ? 1 : 0;
out:
  collgen_generator_destroy(g);
  free(l.items);
  cli_pregen_free(&o);
  return rc;
}
