/*
** build_ahead.c -- collgen-build-ahead: what building the missing kernels
** on several threads (collgen_comm_prepare's first step) saves over
** building them one after the other, as a serving start does with an
** empty cache.
**
** usage: collgen-build-ahead THREADS
**
** Every op of the catalog at `collgen compile`'s demo shape (2 ranks,
** bf16, 1 Mi elements, 8 rows x 4096 columns), each kernel built twice in
** a fresh process with its own empty cache: serially (one collgen_get_kernel
** after another) and with collgen__generator_build_ahead on THREADS
** threads, then fetched. Checked first: both ways' cubins are compared
** byte for byte. Prints the wall time of each way (the process's NVRTC
** load and first use included, as at a start).
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "generator.h"
#include "internal.h"
#include "parse_int.h"
#include "test_util.h"

static const collgen_op_t OPS[] = {
#define OP_ENTRY(NAME, value, id, tpl, min_rank, computes, fp8) COLLGEN_OP_##NAME,
    COLLGEN_OP_MAP(OP_ENTRY)
#undef OP_ENTRY
};
enum { NOPS = sizeof OPS / sizeof OPS[0] };

static void demo_shapes(collgen_shape_t *s) {
  for (int i = 0; i < NOPS; ++i) {
    collgen_shape_init(&s[i], OPS[i]);
    s[i].ngpus = 2;
    s[i].elems = 1 << 20;
    s[i].rows = 8;
    s[i].cols = 4096;
    snprintf(s[i].arch, sizeof s[i].arch, "sm_90");
  }
}

/* In a child process: builds every kernel into `dir` (threads 1: one
** fetch after another), prints the wall ms; exits 0 or 1. */
static void build(const char *dir, int threads) {
  collgen_shape_t s[NOPS];
  demo_shapes(s);
  double t0 = collgen__now_ms();
  collgen_generator_t *g;
  if (collgen_generator_create(&g, dir) != COLLGEN_OK) _exit(1);
  if (threads > 1) collgen__generator_build_ahead(g, s, NOPS, threads);
  for (int i = 0; i < NOPS; ++i) {
    collgen_kernel_info_t info;
    if (collgen_get_kernel(g, &s[i], &info) != COLLGEN_OK) {
      fprintf(stderr, "%s\n", collgen_generator_last_error(g));
      _exit(1);
    }
  }
  printf("%-9s %2d thread(s): %7.1f ms for %d kernels\n", threads > 1 ? "ahead" : "serial",
         threads, collgen__now_ms() - t0, NOPS);
  fflush(stdout);
  collgen_generator_destroy(g);
  _exit(0);
}

static int run_child(const char *dir, int threads) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) build(dir, threads);
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                 WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
  int64_t threads = 0;
  if (argc != 2 || collgen__parse_int(argv[1], 2, COLLGEN_MAX_JIT_THREADS, &threads) != 0) {
    fprintf(stderr, "usage: collgen-build-ahead THREADS (2..%d)\n", COLLGEN_MAX_JIT_THREADS);
    return 2;
  }
  char serial[256], ahead[256];
  tu_make_temp_dir(serial, sizeof serial);
  tu_make_temp_dir(ahead, sizeof ahead);
  int rc = run_child(serial, 1) || run_child(ahead, (int)threads) ? 1 : 0;
  collgen_shape_t s[NOPS];
  demo_shapes(s);
  collgen_generator_t *a = NULL, *b = NULL;
  if (!rc && (collgen_generator_create(&a, serial) || collgen_generator_create(&b, ahead))) rc = 1;
  for (int i = 0; !rc && i < NOPS; ++i) {
    collgen_kernel_info_t x, y;
    if (collgen_get_kernel(a, &s[i], &x) || collgen_get_kernel(b, &s[i], &y) ||
        x.cache_hit != 1 || y.cache_hit != 1 || x.cubin_size != y.cubin_size ||
        memcmp(x.cubin, y.cubin, x.cubin_size) != 0) {
      fprintf(stderr, "collgen-build-ahead: %s: the two builds differ\n", x.kernel);
      rc = 1;
    }
  }
  if (!rc) printf("checked: the %d cubins of both ways are identical\n", NOPS);
  collgen_generator_destroy(a);
  collgen_generator_destroy(b);
  tu_remove_tree(serial);
  tu_remove_tree(ahead);
  return rc;
}
