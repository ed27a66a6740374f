/*
** demo_data.c -- the buffers of a `collgen demo` case (see demo.h): every
** rank's inputs made from the demo's one fixed seed (so the demo is
** reproducible and each process of --processes holds every rank's inputs
** for the reference), poisoned outputs, their read-back for the checks,
** and their release.
*/
#include <stdlib.h>
#include <string.h>

#include "demo.h"
#include "devbuf.h"
#include "internal.h"
#include "reference.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull; /* fixed seed: the demo is reproducible */

int demo_local(const demo_ctx *d, int r) { return collgen__comm_is_local(d->comm, r); }

int64_t demo_elems_of(const demo_data *a, int r) {
  int64_t n = 1;
  for (int k = 0; k < a->tensor_rank; ++k) n *= a->shape[r][k];
  return n;
}

/* Rank r's host copy of buffer s: fresh random values, or (DEMO_SHARED)
** rank 0's, made once. 1 when it is there. */
static int host_input(demo_data *a, int s, int r, collgen_dtype_t dt, int64_t n) {
  if (a->fill[s] == DEMO_SHARED && r > 0) {
    a->host[s][r] = a->host[s][0];
    return 1;
  }
  a->host[s][r] = malloc(a->bytes[s][r]);
  if (!a->host[s][r]) return 0;
  collgen__ref_fill_random(dt, a->host[s][r], n, &rng);
  return 1;
}

int demo_buffer(demo_ctx *d, demo_data *a, int s, demo_fill fill, collgen_dtype_t dt,
                int64_t elems) {
  const size_t esz = (size_t)collgen__dtype_bytes(dt);
  size_t most = 0;
  a->made[s] = 1;
  a->fill[s] = fill;
  for (int r = 0; r < d->n; ++r) {
    const int64_t n = elems == DEMO_OWN_SHAPE ? demo_elems_of(a, r) : elems;
    const size_t bytes = (size_t)n * esz;
    a->bytes[s][r] = bytes;
    if (bytes > most) most = bytes;
    if (fill != DEMO_POISON && !host_input(a, s, r, dt, n)) return 0;
    if (!demo_local(d, r)) continue;
    if (collgen__dev_alloc(d->comm, r, bytes, &a->dev[s][r]) != COLLGEN_OK) return 0;
    int rc = fill == DEMO_POISON ? collgen__dev_fill(d->comm, r, a->dev[s][r], 0xff, bytes)
                                 : collgen__dev_upload(d->comm, r, a->dev[s][r], a->host[s][r],
                                                       bytes);
    if (rc != COLLGEN_OK) return 0;
  }
  a->got[s] = malloc(most ? most : 1); /* demo_fetch's: an input may be an output (in place) */
  return a->got[s] != NULL;
}

void *demo_host(demo_data *a, size_t bytes) {
  if (a->nowned == DEMO_MAX_HOST) return NULL;
  void *p = malloc(bytes ? bytes : 1);
  if (p) a->owned[a->nowned++] = p;
  return p;
}

const void *demo_fetch(demo_ctx *d, demo_data *a, int s, int r) {
  if (collgen__dev_download(d->comm, r, a->got[s], a->dev[s][r], a->bytes[s][r]) != COLLGEN_OK)
    a->read_errors++;
  return a->got[s];
}

int demo_differs(demo_ctx *d, demo_data *a, int s, int r, const void *want, size_t bytes) {
  return memcmp(demo_fetch(d, a, s, r), want, bytes) != 0;
}

int demo_ranks_differ(demo_ctx *d, demo_data *a, int s, const void *want, size_t bytes) {
  int bad = 0;
  DEMO_FOR_LOCAL(d, r) bad += demo_differs(d, a, s, r, want, bytes);
  return bad;
}

void demo_data_free(demo_ctx *d, demo_data *a) {
  for (int s = 0; s < DEMO_MAX_BUFS; ++s) {
    if (!a->made[s]) continue;
    for (int r = 0; r < d->n; ++r) {
      if (demo_local(d, r)) collgen__dev_free(d->comm, r, a->dev[s][r]);
      if (a->fill[s] != DEMO_SHARED || r == 0) free(a->host[s][r]);
    }
    free(a->got[s]);
  }
  for (int k = 0; k < a->nowned; ++k) free(a->owned[k]);
  memset(a, 0, sizeof *a);
}
