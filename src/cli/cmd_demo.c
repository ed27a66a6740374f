/*
** cmd_demo.c -- `collgen demo`, the main job. On a GPU machine it runs
** every case of every op's hook entry (demo_ops.c, one per op of the
** catalog) on every visible GPU (up to 8), checks it against the CPU
** reference and prints its timing: from one process driving every GPU, or
** with --processes from one process per rank (collgen_comm_init_rank and
** the collgen_rank_* calls; the forking is demo_processes.c's). Every
** process makes every rank's inputs from the same fixed seed, so each can
** check its own outputs against the full reference. Without a GPU it
** generates and compiles every case's kernel into the cache and says why
** it stops there.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "demo.h"
#include "demo_processes.h"
#include "devbuf.h"
#include "generator.h"
#include "internal.h"

#define ITERS 20 /* timed runs of each case; its line says the best */

/* Calls `f(c, arg)` for every case of every op, in catalog order. */
static void each_case(void (*f)(const demo_case *c, collgen_op_t op, void *arg), void *arg) {
  for (int i = 0; i < collgen__op_count(); ++i) {
    const collgen_op_t op = collgen__op_at(i)->op;
    const demo_op *e = demo_op_of(op);
    for (int k = 0; k < demo_case_count(e); ++k) f(&e->cases[k], op, arg);
  }
}

/* What compile_only counts over the cases. */
typedef struct {
  collgen_generator_t *g;
  const char *dir;
  int built, stored, total;
} compile_tally;

/* Fetches one case's kernel and prints what happened to it. */
static void compile_case(const demo_case *c, collgen_op_t op, void *arg) {
  compile_tally *t = arg;
  collgen_shape_t s;
  collgen_shape_init(&s, op);
  if (c->kernel.elems) s.elems = c->kernel.elems;
  if (c->kernel.rows) s.rows = c->kernel.rows;
  if (c->kernel.cols) s.cols = c->kernel.cols;
  s.fp8 = c->kernel.fp8;
  t->total++;
  collgen_kernel_info_t info;
  int rc = collgen_get_kernel(t->g, &s, &info);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "collgen demo: %s: %s\n", collgen_status_name(rc),
            collgen_generator_last_error(t->g));
    return;
  }
  t->built++;
  char where[4600];
  int on_disk = cli_entry_on_disk(t->dir, info.key, where, sizeof where);
  t->stored += on_disk;
  printf("  %-58s %6zu B cubin, %3d registers, %d spill bytes, %s, %.1f ms%s%s\n", info.kernel,
         info.cubin_size, info.registers, info.spill_bytes,
         info.cache_hit ? "cached" : "compiled", info.milliseconds,
         on_disk ? "" : "; NOT STORED: ", on_disk ? "" : where);
}

/* No GPU: fetches every case's kernel through the default cache and says
** what really happened to each (compiled, found, failed; on disk or not).
** Exit 1 if a kernel could not be built or was not stored in a usable
** on-disk cache; a memory-only cache (COLLGEN_CACHE_DISABLE=1, unusable
** directory) is said, and is not an error. */
static int compile_only(const char *why) {
  printf("collgen demo: no GPU found (%s)\n", why);
  printf("collgen demo: generating and compiling the demo kernels into the cache instead\n");
  compile_tally t = {0};
  int status = collgen_generator_create(&t.g, NULL);
  if (status != COLLGEN_OK) return cli_failure("demo", status, collgen_last_error());
  t.dir = collgen__generator_cache_dir(t.g);
  each_case(compile_case, &t);
  if (t.dir) {
    char note[96] = "; run on a GPU machine to execute them";
    if (t.built < t.total)
      snprintf(note, sizeof note, " (%d could not be built: see above)", t.total - t.built);
    else if (t.stored < t.total)
      snprintf(note, sizeof note, " (%d built but not stored: see above)", t.built - t.stored);
    printf("collgen demo: %d of %d demo kernels are in the cache %s%s\n", t.stored, t.total,
           t.dir, note);
  } else {
    printf("collgen demo: 0 of %d demo kernels are in the cache: it is memory only (%s), so the "
           "%d built here were not kept\n", t.total,
           collgen__param_cache_disable() ? "COLLGEN_CACHE_DISABLE=1" : "see the warning above",
           t.built);
  }
  collgen_generator_destroy(t.g);
  return t.built < t.total || (t.dir && t.stored < t.total);
}

/* One call of the case in this process's model: collgen_rank_<op> on a
** communicator of collgen_comm_init_rank, else collgen_<op>. */
static int run_case(demo_ctx *d, const demo_case *c, demo_data *a) {
  const int me = collgen__comm_self(d->comm); /* -1: this process drives every rank */
  return me >= 0 ? c->run_rank(d, a, me) : c->run(d, a);
}

/* The best of ITERS runs, in microseconds; -1 when a run failed. */
static double time_case(demo_ctx *d, const demo_case *c, demo_data *a) {
  double best = -1;
  for (int i = 0; i < ITERS; ++i) {
    double t0 = collgen__now_ms();
    if (run_case(d, c, a) != COLLGEN_OK || collgen__dev_sync_all(d->comm, d->streams) != COLLGEN_OK)
      return -1;
    double t = collgen__now_ms() - t0;
    if (best < 0 || t < best) best = t;
  }
  return best * 1000.0;
}

/* What the demo tallies over the cases. */
typedef struct {
  demo_ctx *d;
  int failed;
} demo_tally;

/* One case: made, run, checked against the reference, timed, and its
** line; a failure or a mismatch sets t->failed. */
static void demo_case_run(const demo_case *c, collgen_op_t op, void *arg) {
  demo_tally *t = arg;
  demo_ctx *d = t->d;
  demo_data a;
  memset(&a, 0, sizeof a);
  c->shape(d, &a);
  for (int r = 0; r < d->n; ++r) a.shapes[r] = a.shape[r];
  int rc = c->make(d, &a) ? run_case(d, c, &a) : COLLGEN_ERR_CUDA;
  if (rc == COLLGEN_OK) rc = collgen__dev_sync_all(d->comm, d->streams);
  int bad = 0;
  if (rc == COLLGEN_OK) {
    bad = c->check(d, &a);
    if (bad < 0) rc = COLLGEN_ERR_NO_MEMORY;
    else bad += a.read_errors;
  }
  double us = rc == COLLGEN_OK ? time_case(d, c, &a) : -1;
  const char *msg = rc == COLLGEN_ERR_NO_MEMORY ? "no host memory for the CPU reference"
                                                : collgen_comm_last_error(d->comm);
  const char *variant = c->variant ? c->variant : "";
  if (rc == COLLGEN_ERR_UNSUPPORTED && c->unsupported_skips) {
    printf("  %-18s %soutput skipped: %s\n", c->label, variant, msg);
  } else if (rc != COLLGEN_OK) {
    printf("  %-18s %sFAILED: %s: %s\n", c->label, variant, collgen_status_name(rc), msg);
  } else {
    char size[160], algbw[48] = "";
    size_t bytes = c->size(d, &a, size, sizeof size);
    if (bytes) snprintf(algbw, sizeof algbw, ", %.1f GB/s algbw", (double)bytes / (us * 1e3));
    printf("  %-18s %s: %s, %.1f us (best of %d%s)\n", c->label, size,
           bad ? "MISMATCH vs CPU reference"
               : c->bitwise ? "bitwise equal to CPU reference" : "matches CPU reference",
           us, ITERS, algbw);
  }
  demo_data_free(d, &a);
  t->failed |= (rc != COLLGEN_OK && !(rc == COLLGEN_ERR_UNSUPPORTED && c->unsupported_skips)) ||
               bad;
}

/* Every case once, checked and timed; nonzero if any failed. */
static int demo_ops(demo_ctx *d) {
  demo_tally t = {d, 0};
  each_case(demo_case_run, &t);
  return t.failed;
}

/* One rank of `collgen demo --processes`, in its own process (the
** demo_rank_fn of demo_processes.h). */
static int demo_rank(int nranks, const collgen_unique_id_t *id, int rank, int device) {
  demo_ctx d;
  memset(&d, 0, sizeof d);
  d.n = nranks;
  int rc = collgen_comm_init_rank(&d.comm, nranks, id, rank, device, NULL);
  if (rc != COLLGEN_OK) {
    printf("  rank %d: collgen_comm_init_rank: %s: %s\n", rank, collgen_status_name(rc),
           collgen_last_error());
    return 1;
  }
  int failed = collgen__dev_stream_create(d.comm, rank, &d.streams[rank]) != COLLGEN_OK;
  printf("rank %d of %d on GPU %d (process %ld):\n", rank, nranks, device, (long)getpid());
  if (!failed) failed = demo_ops(&d);
  collgen__dev_stream_destroy(d.comm, rank, d.streams[rank]);
  collgen_comm_destroy(d.comm);
  return failed;
}

int cmd_demo(int argc, char **argv) {
  int processes = 0;
  int prc = cli_demo_parse(argc, argv, &processes);
  if (prc == CLI_HELP) {
    puts("usage: collgen demo [--processes [N]]\n"
         "Runs every op on all visible GPUs (up to 8), checks them against the\n"
         "CPU reference and prints timings. One process drives every GPU, or with\n"
         "--processes one process per rank: N ranks (2..8; default one per visible\n"
         "GPU, at least 2) mapped round robin onto the GPUs, each creating its rank\n"
         "with collgen_comm_init_rank and calling the collgen_rank_* functions.\n"
         "Without a GPU, compiles the demo kernels into the cache instead.");
    return 0;
  }
  if (prc != 0) return prc;
  char err[512];
  if (demo_ops_check(err, sizeof err) != 0) /* a half-made hook entry: stop before anything */
    return cli_failure("demo", COLLGEN_ERR_INVALID_ARG, err);
  if (processes != 0) return demo_processes(processes, demo_rank, compile_only);
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) return compile_only(err);
  int count = 0;
  collgen__cu.cuDeviceGetCount(&count);
  if (count < 1) return compile_only("the driver reports 0 devices");
  demo_ctx d;
  memset(&d, 0, sizeof d);
  d.n = count > COLLGEN_MAX_DEVICES ? COLLGEN_MAX_DEVICES : count;
  int devices[COLLGEN_MAX_DEVICES];
  for (int i = 0; i < d.n; ++i) devices[i] = i;
  int rc = collgen_comm_create(&d.comm, d.n, devices, NULL);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "collgen demo: %s: %s\n", collgen_status_name(rc), collgen_last_error());
    return 1;
  }
  for (int r = 0; r < d.n; ++r) collgen__dev_stream_create(d.comm, r, &d.streams[r]);
  printf("collgen demo: %d GPU(s), one rank each, in this process\n", d.n);
  int failed = demo_ops(&d);
  for (int r = 0; r < d.n; ++r) collgen__dev_stream_destroy(d.comm, r, d.streams[r]);
  collgen_comm_destroy(d.comm);
  printf("collgen demo: %s\n", failed ? "FAILED" : "all checks passed");
  return failed;
}
