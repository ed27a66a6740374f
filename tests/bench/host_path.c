/*
** host_path.c -- collgen-hostbench: host CPU time per collective call, from
** the call to its return (validation, planning, kernel lookup, parameter
** blocks, driver calls), with 2 ranks.
**
** By default it runs on the stand-in driver (tests/fake_cuda.c), whose calls
** cost next to nothing, so the time is collgen's own work and can be
** measured on any machine. With --real it loads the real driver and the time
** includes the driver's launches (the kernels do run, on whatever the
** buffers hold; the 64 MB case is left out there, as its kernels would fill
** the launch queue and the host would wait for the GPU).
**
** usage: collgen-hostbench [--real]
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "devbuf.h"

#define TRIALS 15
#define CALLS 2000

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void check(int rc, collgen_comm_t *c, const char *what) {
  if (rc == COLLGEN_OK) return;
  fprintf(stderr, "collgen-hostbench: %s: %s\n", what, c ? collgen_comm_last_error(c) : collgen_last_error());
  exit(1);
}

typedef struct {
  collgen_comm_t *c;
  collgen_stream_t streams[2];
  void *in[2], *out[2], *normed[2], *gamma[2];
  int64_t elems, shape[1], shard[2][2];
  int group;
  int rmsnorm;
} call_t;

static void one_call(call_t *t) {
  const int64_t *shapes[2] = {t->shape, t->shape};
  const int64_t *shards[2] = {t->shard[0], t->shard[1]};
  int rc = t->rmsnorm
               ? collgen_allgather_rmsnorm(t->c, COLLGEN_DTYPE_BF16, 2, shards,
                                           (const void *const *)t->in, t->normed, t->out,
                                           (const void *const *)t->gamma, 1e-6f, 0.0f, 0,
                                           t->streams)
               : collgen_allreduce_sum(t->c, COLLGEN_DTYPE_BF16, 1, shapes,
                                       (const void *const *)t->in, t->out, t->group, t->streams);
  check(rc, t->c, "call");
}

/* Median microseconds per call over TRIALS batches of CALLS calls. */
static double time_calls(call_t *t) {
  double per[TRIALS];
  one_call(t); /* compiles and loads outside the timing */
  for (int k = 0; k < TRIALS; ++k) {
    double t0 = collgen__now_ms();
    for (int i = 0; i < CALLS; ++i) one_call(t);
    per[k] = (collgen__now_ms() - t0) * 1000.0 / CALLS;
    check(collgen__dev_sync_all(t->c, t->streams), t->c, "sync");
  }
  qsort(per, TRIALS, sizeof per[0], cmp_double);
  return per[TRIALS / 2];
}

int main(int argc, char **argv) {
  int real = argc > 1 && strcmp(argv[1], "--real") == 0;
  if (argc > 1 && !real) {
    fprintf(stderr, "usage: collgen-hostbench [--real]\n");
    return 2;
  }
  if (!real) setenv("COLLGEN_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
  int devices[2] = {0, 1};
  call_t t;
  memset(&t, 0, sizeof t);
  check(collgen_comm_create(&t.c, 2, devices, NULL), NULL, "comm_create");
  const size_t bytes = 64u << 20;
  for (int r = 0; r < 2; ++r) {
    check(collgen__dev_stream_create(t.c, r, &t.streams[r]), t.c, "stream");
    check(collgen__dev_alloc(t.c, r, bytes, &t.in[r]), t.c, "alloc");
    check(collgen__dev_alloc(t.c, r, bytes, &t.out[r]), t.c, "alloc");
    check(collgen__dev_alloc(t.c, r, bytes, &t.normed[r]), t.c, "alloc");
    check(collgen__dev_alloc(t.c, r, 1 << 16, &t.gamma[r]), t.c, "alloc");
  }
  printf("collgen-hostbench: %s driver, 2 ranks, median of %d x %d calls, us of host time "
         "per call\n", real ? "real" : "stand-in (collgen's own work only)", TRIALS, CALLS);
  static const struct {
    const char *name;
    int64_t elems;
    int group, rmsnorm;
  } cases[] = {
      {"allreduce bf16 8 KB (LL)", 4096, 0, 0},
      {"allreduce bf16 64 MB (two-shot)", 32 << 20, 0, 0},
      {"allreduce bf16 8 KB, groups of 1 (copies)", 4096, 1, 0},
      {"allgather_rmsnorm bf16 8 x 4096 (LL)", 0, 0, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    if (real && cases[i].elems > 4096) continue;
    t.shape[0] = cases[i].elems;
    t.group = cases[i].group;
    t.rmsnorm = cases[i].rmsnorm;
    for (int r = 0; r < 2; ++r) {
      t.shard[r][0] = 4;
      t.shard[r][1] = 4096;
    }
    printf("  %-44s %7.2f us\n", cases[i].name, time_calls(&t));
  }
  for (int r = 0; r < 2; ++r) {
    collgen__dev_free(t.c, r, t.in[r]);
    collgen__dev_free(t.c, r, t.out[r]);
    collgen__dev_free(t.c, r, t.normed[r]);
    collgen__dev_free(t.c, r, t.gamma[r]);
    collgen__dev_stream_destroy(t.c, r, t.streams[r]);
  }
  collgen_comm_destroy(t.c);
  return 0;
}
