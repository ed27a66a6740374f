/*
** cmd_pregen.c -- `collgen pregen`: compile every kernel the planner can
** pick for a matrix (archs x ops x dtypes x ngpus, every group size
** dividing ngpus, for allgather_rmsnorm each cols) into a cache, so that a
** deployment starts with zero NVRTC calls. The kernels come from the
** planner itself (collgen_plan_variants): any element or row count,
** aligned or not, in place or not, any grid cap. Each distinct kernel is
** compiled once; -j N forks N workers, each with its own generator.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "internal.h"
#include "parse_int.h"

static const char help[] =
    "usage: collgen pregen [options]\n"
    "  --arch LIST      archs, e.g. sm_80,sm_90 (sm_90)\n"
    "  --ops LIST       allreduce_sum,allgather_rmsnorm (both)\n"
    "  --dtypes LIST    bf16,f16,f32 (all)\n"
    "  --ngpus LIST     communicator sizes, each 1..8 (2,4,8); every group size\n"
    "                   dividing each is included\n"
    "  --cols LIST      allgather_rmsnorm cols, each 1..2^31\n"
    "                   (1024,2048,4096,5120,7168,8192,16384)\n"
    "  --cache-dir D    cache to fill (default cache location)\n"
    "  -j N             parallel compile processes, 1..256 (number of CPUs)\n"
    "Every kernel the planner can pick for a call of the matrix is compiled:\n"
    "any element or row count, aligned or not, in place or not, any grid cap.\n"
    "Prints a progress bar on a terminal and ends with\n"
    "`pregen: N compiled, M already cached, K failed`; exit 1 if K > 0.\n";

/* One kernel to compile: a shape that plans to it and its canonical text. */
typedef struct {
  collgen_shape_t shape;
  char canonical[sizeof(((collgen_plan_t *)0)->canonical)];
} spec;

typedef struct {
  spec *items;
  int n, cap;
} spec_list;

/* A comma list split in place (the text is a private copy). */
typedef struct {
  char *text;
  char **items;
  int n;
} list;

static int split_list(const char *s, list *l) {
  int max = 1;
  for (const char *p = s; *p; ++p) max += *p == ',';
  l->text = strdup(s);
  l->items = calloc((size_t)max, sizeof *l->items);
  if (!l->text || !l->items) return -1;
  l->n = cli_split(l->text, l->items, max);
  return 0;
}

static void free_list(list *l) {
  free(l->text);
  free(l->items);
}

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
** a message on stderr: 2 when the planner refuses the class (a bad arch,
** say), 1 on any other failure. */
static int add_class(collgen_generator_t *g, const collgen_shape_class_t *cls, spec_list *l) {
  collgen_shape_t *shapes = NULL;
  int count = 0;
  int status = collgen_plan_variants(g, cls, &shapes, &count);
  if (status != COLLGEN_OK) {
    fprintf(stderr, "collgen pregen: %s\n", collgen_generator_last_error(g));
    return status == COLLGEN_ERR_INVALID_ARG ? 2 : 1;
  }
  int rc = 0;
  for (int i = 0; i < count && rc == 0; ++i) {
    collgen_plan_t plan;
    if (collgen_plan(g, &shapes[i], &plan) != COLLGEN_OK) {
      fprintf(stderr, "collgen pregen: %s\n", collgen_generator_last_error(g));
      rc = 1;
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
    int rc = collgen_get_kernel(g, &l->items[i].shape, &info);
    char status = rc != COLLGEN_OK ? 'f' : info.cache_hit ? 'h' : 'c';
    if (rc != COLLGEN_OK)
      fprintf(stderr, "\npregen: %s: %s\n", collgen_status_name(rc),
              collgen_generator_last_error(g));
    if (write(fd, &status, 1) < 0) break;
  }
  collgen_generator_destroy(g);
}

/* Forks `jobs` workers over the list; prints the summary line and returns
** the number of failed kernels. */
static int compile_all(const spec_list *l, long jobs, const char *cache_dir) {
  if (jobs > l->n) jobs = l->n ? l->n : 1;
  int fds[2];
  if (pipe(fds) != 0) {
    perror("collgen pregen: pipe");
    return l->n ? l->n : 1;
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
  int compiled = 0, cached = 0, failed = 0, done = 0;
  char status;
  progress(0, l->n);
  while (read(fds[0], &status, 1) == 1) {
    compiled += status == 'c';
    cached += status == 'h';
    failed += status == 'f';
    progress(++done, l->n);
  }
  close(fds[0]);
  while (wait(NULL) > 0) {}
  failed += l->n - done; /* a worker that died reported nothing */
  printf("pregen: %d compiled, %d already cached, %d failed\n", compiled, cached, failed);
  return failed;
}

/* Parses every item of a list as an integer in [lo, hi] into a malloc'd
** array; a usage error (exit code 2) names the flag otherwise. */
static int parse_ints(const list *l, const char *flag, int64_t lo, int64_t hi, int64_t **out) {
  *out = calloc((size_t)(l->n ? l->n : 1), sizeof **out);
  if (!*out) return 1;
  if (l->n == 0) return cli_usage_error("pregen", "%s needs at least one value", flag);
  for (int i = 0; i < l->n; ++i)
    if (collgen__parse_int(l->items[i], lo, hi, &(*out)[i]) != 0)
      return cli_usage_error("pregen", "%s: '%s' is not an integer in %lld..%lld", flag,
                             l->items[i], (long long)lo, (long long)hi);
  return 0;
}

typedef struct {
  const char *arch, *ops, *dtypes, *ngpus, *cols, *cache_dir;
  long jobs;
} options;

/* Reads the flags; returns -1 to go on, else the exit code. */
static int parse_options(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; ++i) {
    if (cli_is_help(argv[i])) {
      fputs(help, stdout);
      return 0;
    }
    if (i + 1 >= argc) return cli_usage_error("pregen", "option '%s' needs a value", argv[i]);
    const char *f = argv[i], *v = argv[++i];
    int64_t jobs = 0;
    if (strcmp(f, "--arch") == 0) o->arch = v;
    else if (strcmp(f, "--ops") == 0) o->ops = v;
    else if (strcmp(f, "--dtypes") == 0) o->dtypes = v;
    else if (strcmp(f, "--ngpus") == 0) o->ngpus = v;
    else if (strcmp(f, "--cols") == 0) o->cols = v;
    else if (strcmp(f, "--cache-dir") == 0) o->cache_dir = v;
    else if (strcmp(f, "-j") == 0) {
      if (collgen__parse_int(v, 1, 256, &jobs) != 0)
        return cli_usage_error("pregen", "-j: '%s' is not an integer in 1..256", v);
      o->jobs = (long)jobs;
    } else return cli_usage_error("pregen", "unknown option '%s'", f);
  }
  return -1;
}

/* Builds the list of distinct kernels of the matrix; returns the exit
** code of a failure, or -1. */
static int build_matrix(collgen_generator_t *g, const options *o, spec_list *l) {
  list archs = {0}, ops = {0}, dtypes = {0}, ngpus_l = {0}, cols_l = {0};
  int64_t *ngpus = NULL, *cols = NULL;
  int rc = -1;
  if (split_list(o->arch, &archs) || split_list(o->ops, &ops) ||
      split_list(o->dtypes, &dtypes) || split_list(o->ngpus, &ngpus_l) ||
      split_list(o->cols, &cols_l)) {
    fprintf(stderr, "collgen pregen: out of memory\n");
    rc = 1;
    goto out;
  }
  int bad = parse_ints(&ngpus_l, "--ngpus", 1, COLLGEN_MAX_DEVICES, &ngpus);
  if (!bad) bad = parse_ints(&cols_l, "--cols", 1, (int64_t)1 << 31, &cols);
  if (bad) {
    rc = bad;
    goto out;
  }
  for (int a = 0; a < archs.n && rc < 0; ++a)
    for (int k = 0; k < ops.n && rc < 0; ++k)
      for (int d = 0; d < dtypes.n && rc < 0; ++d) {
        collgen_shape_class_t cls;
        memset(&cls, 0, sizeof cls);
        if (collgen__parse_op(ops.items[k], &cls.op) != 0) {
          rc = cli_usage_error("pregen", "unknown op '%s'", ops.items[k]);
          break;
        }
        if (collgen__parse_dtype(dtypes.items[d], &cls.dtype) != 0) {
          rc = cli_usage_error("pregen", "unknown dtype '%s'", dtypes.items[d]);
          break;
        }
        if (strlen(archs.items[a]) >= sizeof cls.arch) {
          rc = cli_usage_error("pregen", "unknown arch '%s'", archs.items[a]);
          break;
        }
        snprintf(cls.arch, sizeof cls.arch, "%s", archs.items[a]);
        cls.cols = cols;
        cls.cols_count = cols_l.n;
        for (int n = 0; n < ngpus_l.n && rc < 0; ++n) {
          cls.ngpus = (int)ngpus[n];
          int status = add_class(g, &cls, l);
          if (status != 0) rc = status;
        }
      }
out:
  free(ngpus);
  free(cols);
  free_list(&archs);
  free_list(&ops);
  free_list(&dtypes);
  free_list(&ngpus_l);
  free_list(&cols_l);
  return rc;
}

int cmd_pregen(int argc, char **argv) {
  options o = {"sm_90", "allreduce_sum,allgather_rmsnorm", "bf16,f16,f32", "2,4,8",
               "1024,2048,4096,5120,7168,8192,16384", NULL, sysconf(_SC_NPROCESSORS_ONLN)};
  int rc = parse_options(argc, argv, &o);
  if (rc >= 0) return rc;
  if (o.jobs < 1) o.jobs = 1;
  if (o.jobs > 256) o.jobs = 256;

  collgen_generator_t *g;
  if (collgen_generator_create(&g, o.cache_dir) != COLLGEN_OK) {
    fprintf(stderr, "collgen pregen: %s\n", collgen_last_error());
    return 1;
  }
  spec_list l = {NULL, 0, 0};
  rc = build_matrix(g, &o, &l);
  collgen_generator_destroy(g);
  if (rc < 0) {
    unique(&l);
    rc = compile_all(&l, o.jobs, o.cache_dir) ? 1 : 0;
  }
  free(l.items);
  return rc;
}
