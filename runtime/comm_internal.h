/*
** comm_internal.h -- the communicator's state, shared by comm.c and ops.c.
*/
#ifndef COLLGEN_COMM_INTERNAL_H
#define COLLGEN_COMM_INTERNAL_H
#include <stdatomic.h>

#include "driver.h"
#include "device_abi.h"

/* A kernel loaded into one context. */
typedef struct {
  const void *entry; /* the generator's cache entry (stable while it lives) */
  CUcontext ctx;
  CUmodule module;
  CUfunction fn;
} collgen__loaded;

struct collgen_comm {
  int ndev;
  int devices[COLLGEN_MAX_DEVICES];
  CUdevice cudev[COLLGEN_MAX_DEVICES];
  CUcontext ctx[COLLGEN_MAX_DEVICES];       /* retained primary contexts */
  int retained[COLLGEN_MAX_DEVICES];
  char arch[COLLGEN_MAX_DEVICES][16];
  int p2p[COLLGEN_MAX_DEVICES][COLLGEN_MAX_DEVICES];
  int nvlink[COLLGEN_MAX_DEVICES][COLLGEN_MAX_DEVICES];
  CUdeviceptr signal[COLLGEN_MAX_DEVICES];  /* one per rank */
  unsigned int *errors;   /* host-mapped: a status record per rank slot */
  atomic_int aborted;     /* collgen_comm_abort ran */
  void *abort_fill;       /* pinned: one signal buffer of COLLGEN_ABORT_FILL bytes */
  CUstream abort_stream[COLLGEN_MAX_DEVICES]; /* non-blocking: the abort's copies */
  CUdeviceptr errors_dev;
  int timeout_ms, max_blocks;
  unsigned launch_mask;
  collgen_generator_t *gen;
  collgen__loaded *loaded;
  int nloaded, cap_loaded;
  char err[COLLGEN_ERRBUF];
};

/* Host-mapped words: COLLGEN_STATUS_WORDS per rank slot. */
#define COLLGEN_HOST_WORDS (COLLGEN_STATUS_WORDS * COLLGEN_MAX_DEVICES)

/* COLLGEN_ERR_TIMEOUT when a kernel gave up waiting (message in c->err),
** else COLLGEN_OK. */
int collgen__comm_check_errors(collgen_comm_t *c);
#endif
