/*
** demo.h -- what an op gives `collgen demo`: its hook entry, one per op of
** COLLGEN_OP_MAP (demo_ops.c), and the buffers the hooks fill and check
** (demo_data.c). cmd_demo.c runs every case of every entry through one
** loop: shape, make, run (one process driving every rank, or this
** process's rank with --processes), sync, check against the CPU reference,
** time, one line of output. Adding an op is one entry `demo_<id>` in
** demo_ops.c; without it the table there does not compile.
*/
#ifndef COLLGEN_DEMO_H
#define COLLGEN_DEMO_H
#include <stddef.h>
#include <stdint.h>

#include "collgen.h"

#define DEMO_MAX_BUFS 6   /* buffers of one case (per rank) */
#define DEMO_MAX_HOST 8   /* demo_host arrays of one case */
#define DEMO_MAX_CASES 2  /* cases of one op (the fused residual op: plain and FP8) */
#define DEMO_OWN_SHAPE (-1) /* demo_buffer's elems: each rank's own shape */

/* What the demo runs on: the communicator, its rank count and the streams
** (indexed by rank: every rank's in one process, only this process's rank
** with --processes). */
typedef struct {
  collgen_comm_t *comm;
  int n;
  collgen_stream_t streams[COLLGEN_MAX_DEVICES];
} demo_ctx;

/* How demo_buffer fills a buffer: fresh random values for each rank, one
** random array replicated on every rank, or 0xff bytes (an output: the
** poison that a kernel which writes nothing leaves for the check to see). */
typedef enum { DEMO_FRESH, DEMO_SHARED, DEMO_POISON } demo_fill;

/* One case's data. The case's shape hook sets tensor_rank and shape[r];
** shapes[r] points at shape[r] (the one-process calls take them). Buffer s
** is dev[s][r] on each rank r this process holds; for DEMO_FRESH and
** DEMO_SHARED, host[s][r] is what rank r got, for every rank (so each
** process can compute the whole reference); bytes[s][r] is its size.
** Everything here is owned by the data and released by demo_data_free. */
typedef struct {
  int tensor_rank;
  int64_t shape[COLLGEN_MAX_DEVICES][2];
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  void *dev[DEMO_MAX_BUFS][COLLGEN_MAX_DEVICES];
  void *host[DEMO_MAX_BUFS][COLLGEN_MAX_DEVICES];
  size_t bytes[DEMO_MAX_BUFS][COLLGEN_MAX_DEVICES];
  int made[DEMO_MAX_BUFS];             /* 1 once demo_buffer has set buffer s up */
  demo_fill fill[DEMO_MAX_BUFS];
  void *got[DEMO_MAX_BUFS];            /* demo_fetch's host copy */
  void *owned[DEMO_MAX_HOST];          /* demo_host's arrays */
  int nowned;
  int read_errors;                     /* downloads that failed: counted as mismatches */
} demo_data;

/* The kernel the no-GPU path compiles for a case (collgen_shape_init of
** its op, then these fields where they are not 0). */
typedef struct {
  int64_t elems, rows, cols;
  collgen_fp8_mode_t fp8;
} demo_kernel;

/* One case of an op: a call checked and timed, and its line. The hooks:
**   shape:    sets every rank's tensor shape for d->n ranks;
**   make:     the inputs (demo_buffer, fresh data from the demo's fixed
**             seed) and poisoned outputs; 1 when all of it was set up;
**   run:      the call from one process driving every rank (collgen_<op>);
**   run_rank: the call of rank `me`, this process's (collgen_rank_<op>);
**   check:    the outputs of this process's ranks against the CPU
**             reference: the number of mismatches, or -1 when out of
**             host memory;
**   size:     writes what ran into text[n] ("bf16 x 16777219 elems on 2
**             rank(s)") and returns the bytes for an algbw figure (0: the
**             line has none).
** The data is the case's own (zeroed before shape), so hooks keep no state
** of their own. */
typedef struct {
  const char *label;     /* first column of its lines */
  const char *variant;   /* before "FAILED" and "output skipped" ("FP8 "), or NULL */
  int bitwise;           /* 1: says "bitwise equal to", 0: "matches" the reference */
  int unsupported_skips; /* 1: COLLGEN_ERR_UNSUPPORTED (an older GPU) is a skip, not a failure */
  demo_kernel kernel;
  void (*shape)(const demo_ctx *d, demo_data *a);
  int (*make)(demo_ctx *d, demo_data *a);
  int (*run)(demo_ctx *d, demo_data *a);
  int (*run_rank)(demo_ctx *d, demo_data *a, int me);
  int (*check)(demo_ctx *d, demo_data *a);
  size_t (*size)(const demo_ctx *d, const demo_data *a, char *text, size_t n);
} demo_case;

/* An op's hook entry: its cases, in the order they run, up to the first
** without a label. */
typedef struct {
  demo_case cases[DEMO_MAX_CASES];
} demo_op;

/* The entry of `op` (never NULL for an op of the catalog: the table is
** built from COLLGEN_OP_MAP), or NULL for a value that names no op. */
const demo_op *demo_op_of(collgen_op_t op);
/* The number of cases of an entry. */
int demo_case_count(const demo_op *e);
/* 0 when every op of the catalog has an entry with a case, each with
** every hook; else -1 with what is missing in why[n]. cmd_demo calls
** it before anything else, so a half-made entry stops the demo at start. */
int demo_ops_check(char *why, size_t n);

/* 1 if this process holds rank r's buffers. */
int demo_local(const demo_ctx *d, int r);
#define DEMO_FOR_LOCAL(d, r)                                                   \
  for (int r = 0; r < (d)->n; ++r)                                             \
    if (demo_local(d, r))
/* Buffer s's device pointers as the one-process calls take inputs. */
#define DEMO_IN(a, s) ((const void *const *)(a)->dev[s])

/* Sets up buffer s of dtype dt on every rank: elems elements on each (or
** DEMO_OWN_SHAPE: the element count of the rank's own shape), filled
** as `fill` says. Random values come from the demo's one fixed seed in the
** order of the calls, so every process of --processes makes the same
** data. 1 when it was all allocated and uploaded; else 0 (what was made is
** still released by demo_data_free). */
int demo_buffer(demo_ctx *d, demo_data *a, int s, demo_fill fill, collgen_dtype_t dt,
                int64_t elems);
/* A host array of `bytes` that `a` owns (up to DEMO_MAX_HOST per case), or
** NULL when out of memory. */
void *demo_host(demo_data *a, size_t bytes);
/* Rank r's buffer s downloaded into a host copy that `a` owns, valid until
** the next demo_fetch of s; a failed download counts in a->read_errors (a
** mismatch). */
const void *demo_fetch(demo_ctx *d, demo_data *a, int s, int r);
/* 1 when rank r's buffer s does not begin with the `bytes` of want. */
int demo_differs(demo_ctx *d, demo_data *a, int s, int r, const void *want, size_t bytes);
/* How many of this process's ranks have a buffer s that does not begin
** with the `bytes` of want. */
int demo_ranks_differ(demo_ctx *d, demo_data *a, int s, const void *want, size_t bytes);
/* The element count of rank r's shape. */
int64_t demo_elems_of(const demo_data *a, int r);
/* Releases every buffer and host array of `a`. */
void demo_data_free(demo_ctx *d, demo_data *a);
#endif
