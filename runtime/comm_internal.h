/*
** comm_internal.h -- the communicator's state, shared by comm.c and ops.c.
*/
#ifndef COLLGEN_COMM_INTERNAL_H
#define COLLGEN_COMM_INTERNAL_H
#include <stdatomic.h>

#include "comm_device.h"
#include "driver.h"
#include "device_abi.h"
#include "nccl_api.h"
#include "shared_mem.h"

struct collgen__boot;

/* A registered user buffer (collgen_register_buffer, comm_register.c):
** this rank's range and every rank's buffer as mapped in this process. */
struct collgen_buffer {
  struct collgen_buffer *next;            /* the communicator's list */
  uintptr_t ptr;                          /* this rank's buffer */
  size_t bytes;                           /* the same on every rank */
  CUdeviceptr at[COLLGEN_MAX_DEVICES];    /* rank r's buffer as mapped here; 0: not
                                             mapped (no P2P, or one-process mode) */
  CUdeviceptr ipc[COLLGEN_MAX_DEVICES];   /* cuIpcOpenMemHandle mappings to close */
  collgen__shared_buf vmm[COLLGEN_MAX_DEVICES]; /* imported VMM mappings */
};

/* A kernel loaded into one context. */
typedef struct {
  const void *entry; /* the generator's cache entry (stable while it lives) */
  CUcontext ctx;
  CUmodule module;
  CUfunction fn;
} collgen__loaded;

struct collgen_comm {
  int ndev;               /* ranks */
  int self;               /* one process per GPU: the rank this process drives; -1: all */
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
  /* One process per GPU (comm_rank.c): the bootstrap, every rank's signal
  ** buffer and staging area as mapped here (this rank's own included). */
  struct collgen__boot *boot;
  collgen__shared_buf shared_signal[COLLGEN_MAX_DEVICES], shared_staging[COLLGEN_MAX_DEVICES];
  CUdeviceptr staging[COLLGEN_MAX_DEVICES];
  size_t staging_bytes;
  /* Set by comm_rank.c at creation: frees what one process per GPU adds
  ** (the NCCL communicators, the shared buffers, the bootstrap), called by
  ** collgen__comm_release; NULL in the one-process mode. */
  void (*release_rank)(collgen_comm_t *c);
  struct collgen_buffer *buffers;          /* live registrations */
  CUdeviceptr errors_dev;
  /* Routing (route.c): route[s][g] is the path (collgen_transport_t) of
  ** group g of group size s; host[r] numbers rank r's host. */
  unsigned char route[COLLGEN_MAX_DEVICES + 1][COLLGEN_MAX_DEVICES];
  int host[COLLGEN_MAX_DEVICES], nhosts;
  /* NCCL (comm_nccl.c): this rank's communicator of its group of size s,
  ** where that group routes to NCCL; NULL elsewhere and after an abort. */
  collgen__nccl_comm_t nccl[COLLGEN_MAX_DEVICES + 1];
  /* ... and the count of live CUDA graphs that captured calls on it
  ** (nccl_graphs.c), so that releasing it never waits for them. */
  struct collgen__nccl_graphs *nccl_graphs[COLLGEN_MAX_DEVICES + 1];
  int timeout_ms, max_blocks;
  int pdl;                /* options.pdl: launches carry the PDL attribute */
  unsigned launch_mask;
  collgen_generator_t *gen;
  collgen__loaded *loaded;
  int nloaded, cap_loaded;
  char err[COLLGEN_ERRBUF];
};

/* Host-mapped words: COLLGEN_STATUS_WORDS per rank slot. */
#define COLLGEN_HOST_WORDS (COLLGEN_STATUS_WORDS * COLLGEN_MAX_DEVICES)

/* COLLGEN_ERR_UNSUPPORTED (message in c->err) when device `device` of
** compute capability major.minor cannot run c's kernels: older than sm_80,
** or older than COLLGEN_PDL_MIN_SM with the pdl option. */
int collgen__comm_check_arch(collgen_comm_t *c, int device, int major, int minor);

/* A communicator of `ndev` ranks with the options checked and applied and
** its generator made; no device touched yet (self = -1: one process). On
** error (message in the thread's last error) *out is NULL. */
int collgen__comm_new(collgen_comm_t **out, int ndev, const collgen_comm_options_t *options);

/* The host-side state of every local rank: the host-mapped status records,
** the abort's pinned fill and streams. Needs the local contexts. */
int collgen__comm_host_state(collgen_comm_t *c);

/* Frees everything the communicator holds (any stage of creation),
** through c->release_rank first for what one process per GPU adds. */
void collgen__comm_release(collgen_comm_t *c);

/* ---- Routing (route.c) ---- */
/* The transport a communicator asks for: options->transport when not
** AUTO, else $COLLGEN_TRANSPORT ("auto", "p2p" or "nccl" exactly; unset or
** empty = auto). COLLGEN_ERR_INVALID_ARG for any other value. */
int collgen__transport_requested(const collgen_comm_options_t *o, collgen_transport_t *out,
                                 char *err, size_t n);
/* "auto", "p2p", "nccl". */
const char *collgen__transport_name(collgen_transport_t t);
/* Fills c->route for every group of every group size from c->host, c->p2p
** and `mode`: NCCL when forced, or (auto) when a pair of the group is on
** two hosts or lacks P2P; P2P otherwise (forced P2P over a missing pair is
** refused by the call, COLLGEN_ERR_NO_P2P). Groups of one rank are always
** P2P. Logs the path of each group holding c->self (COLLGEN_LOG_INFO). */
void collgen__route_decide(collgen_comm_t *c, collgen_transport_t mode);
/* Every group P2P (the one-process communicator). */
void collgen__route_all_p2p(collgen_comm_t *c);
/* The path of the group [base, base+size). */
collgen_transport_t collgen__route_of(const collgen_comm_t *c, int size, int base);

/* ---- NCCL communicators (comm_nccl.c) ---- */
/* Collective over c->boot, on every rank: when any group routes to NCCL,
** loads NCCL on every rank that is in such a group, shares one
** ncclGetUniqueId per group (made by its first rank) and creates this
** rank's communicator of each such group (ncclCommInitRankConfig, the rank's
** context current). Every rank fails together when a rank cannot load
** NCCL (COLLGEN_ERR_NO_NCCL naming it) or a creation fails. */
int collgen__comm_nccl_open(collgen_comm_t *c);

/* ---- CUDA graphs that hold NCCL work (nccl_graphs.c) ---- */

typedef struct collgen__nccl_graphs collgen__nccl_graphs;
/* A fresh count (no graph), held by its communicator; NULL without memory. */
collgen__nccl_graphs *collgen__nccl_graphs_new(void);
/* When `stream` is capturing a CUDA graph, counts that graph until CUDA
** destroys it (a user object retained by the graph). Call it before the
** NCCL work is enqueued: on failure (COLLGEN_ERR_CUDA, message in err)
** nothing was counted and nothing must be launched. */
int collgen__nccl_graphs_track(collgen__nccl_graphs *graphs, CUstream stream, char *err,
                               size_t n);
/* Destroys (abort 0) or aborts (abort 1) an NCCL communicator without
** waiting for CUDA graphs: with none alive, now, returning NCCL's result;
** else on a detached thread (NCCL returns there once the graphs are
** destroyed), returning success at once. Ends the count's hold either
** way (graphs may be NULL). */
collgen__nccl_result collgen__nccl_release(collgen__nccl_comm_t comm, collgen__nccl_graphs *graphs,
                                           int abort);
/* Destroys this rank's NCCL communicators (ncclCommDestroy). */
void collgen__comm_nccl_close(collgen_comm_t *c);
/* Aborts them (ncclCommAbort; collgen_comm_abort). */
int collgen__comm_nccl_abort(collgen_comm_t *c);

/* Ends every registration left, without the collective wait (destroy). */
void collgen__comm_buffers_release(collgen_comm_t *c);

/* The registration of this rank whose buffer holds [p, p + bytes), or
** NULL (also in the one-process mode, which never needs one). Refuses
** (COLLGEN_ERR_INVALID_ARG, in c->err, naming `what`) a range that starts
** in a registered buffer and runs past its end. */
int collgen__registered_find(collgen_comm_t *c, const char *what, const void *p, size_t bytes,
                             const struct collgen_buffer **out);
#endif
