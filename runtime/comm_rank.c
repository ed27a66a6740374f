/*
** comm_rank.c -- the one-process-per-GPU communicator (collgen_comm_init_rank):
** this process drives one rank (c->self); the other ranks are other
** processes. They meet through the bootstrap (bootstrap.h: the socket of a
** unique id, or the application's all-gather), then map the signal buffer
** and staging area of every peer on their host with P2P: VMM allocations
** exported as POSIX fds (shared_mem.h). Then every group is routed
** (route.c) and the NCCL communicators of the groups that need them are
** made (comm_nccl.c). After creation the communicator is the one-process
** one with a single local rank: the same ops, planner, kernels, abort and
** health code run on it (docs/multiprocess.md, docs/multinode.md).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.h"
#include "comm_internal.h"

#define RANK_INFO_VERSION 2u

/* What every rank tells the others when the communicator is created. */
typedef struct {
  uint32_t version;
  int32_t device;          /* ordinal in that process (for messages) */
  uint8_t uuid[16];        /* the GPU's UUID: the same GPU in every process */
  int32_t sm;              /* compute capability major * 10 + minor */
  int32_t max_blocks;      /* must agree: it shapes every grid */
  uint64_t staging_request; /* must agree: large calls are cut by it */
  uint64_t signal_bytes;   /* mapped sizes of the exported allocations */
  uint64_t staging_bytes;
  int32_t transport;       /* must agree: the requested collgen_transport_t */
  int32_t reserved;
} rank_info;

/* The second exchange: whether the rank mapped every peer, and its row of
** the P2P matrix. */
typedef struct {
  int32_t status;          /* COLLGEN_OK or the rank's error code */
  int32_t p2p[COLLGEN_MAX_DEVICES];
} rank_status;

/* The local ordinal of the GPU with this UUID, or -1 if this process does
** not see it. */
static int device_of_uuid(const uint8_t uuid[16]) {
  int count = 0;
  collgen__cu.cuDeviceGetCount(&count);
  for (int d = 0; d < count; ++d) {
    CUdevice dev;
    CUuuid u;
    if (collgen__cu.cuDeviceGet(&dev, d) == CUDA_SUCCESS &&
        collgen__cu.cuDeviceGetUuid(&u, dev) == CUDA_SUCCESS && memcmp(u.bytes, uuid, 16) == 0)
      return d;
  }
  return -1;
}

/* Opens this rank's device: primary context, arch, UUID. */
static int open_device(collgen_comm_t *c, int device, rank_info *me) {
  const int r = c->self;
  int count = 0, major = 0, minor = 0, rc = COLLGEN_OK;
  CUuuid uuid;
  collgen__cu.cuDeviceGetCount(&count);
  if (device < 0 || device >= count)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_NO_DEVICE,
                         "device %d does not exist (%d visible)", device, count);
  c->devices[r] = device;
  COLLGEN_CU_GOTO(collgen__cu.cuDeviceGet(&c->cudev[r], device), rc, c->err, sizeof c->err, out);
  COLLGEN_CU_GOTO(collgen__cu.cuDevicePrimaryCtxRetain(&c->ctx[r], c->cudev[r]), rc, c->err,
                  sizeof c->err, out);
  c->retained[r] = 1;
  COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
  collgen__cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->cudev[r]);
  collgen__cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->cudev[r]);
  rc = collgen__comm_check_arch(c, device, major, minor);
  if (rc != COLLGEN_OK) return rc;
  COLLGEN_CU_GOTO(collgen__cu.cuDeviceGetUuid(&uuid, c->cudev[r]), rc, c->err, sizeof c->err, out);
  me->device = device;
  memcpy(me->uuid, uuid.bytes, 16);
  me->sm = major * 10 + minor;
out:
  return rc;
}

/* Allocates, zeroes and exports this rank's signal buffer and staging area. */
static int share_own_buffers(collgen_comm_t *c, rank_info *me, int fds[2]) {
  const int r = c->self;
  int rc = collgen__shared_alloc(c->cudev[r], sizeof(collgen__signal), &c->shared_signal[r],
                                 c->err, sizeof c->err);
  if (rc == COLLGEN_OK)
    rc = collgen__shared_alloc(c->cudev[r], c->staging_bytes, &c->shared_staging[r], c->err,
                               sizeof c->err);
  if (rc != COLLGEN_OK) return rc;
  COLLGEN_CU_GOTO(collgen__cu.cuMemsetD8(c->shared_signal[r].ptr, 0, c->shared_signal[r].bytes), rc,
                  c->err, sizeof c->err, out);
  COLLGEN_CU_GOTO(collgen__cu.cuCtxSynchronize(), rc, c->err, sizeof c->err, out);
  rc = collgen__shared_export(&c->shared_signal[r], &fds[0], c->err, sizeof c->err);
  if (rc == COLLGEN_OK) rc = collgen__shared_export(&c->shared_staging[r], &fds[1], c->err, sizeof c->err);
  me->signal_bytes = c->shared_signal[r].bytes;
  me->staging_bytes = c->shared_staging[r].bytes;
out:
  return rc;
}

/* Checks the peers' records and maps their buffers; fills this rank's P2P
** row. Peers whose GPU this rank cannot reach (another host, no P2P, or no
** descriptor: fds[] holds -1) are recorded, not refused: routing sends
** their groups to NCCL, or (forced P2P) the ops refuse them. */
static int map_peers(collgen_comm_t *c, const rank_info *all, const int *fds, int32_t *p2p_row) {
  const int self = c->self;
  for (int r = 0; r < c->ndev; ++r) {
    const rank_info *p = &all[r];
    if (p->version != RANK_INFO_VERSION)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                           "rank %d runs another collgen (record version %u, this one %u)", r,
                           (unsigned)p->version, RANK_INFO_VERSION);
    if (p->max_blocks != all[self].max_blocks)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "ranks %d and %d were created with different max_blocks (%d, %d): "
                           "every rank must launch the same grid", self, r,
                           (int)all[self].max_blocks, (int)p->max_blocks);
    if (p->staging_request != all[self].staging_request)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "ranks %d and %d were created with different staging_bytes (%llu, "
                           "%llu): every rank must cut large calls alike", self, r,
                           (unsigned long long)all[self].staging_request,
                           (unsigned long long)p->staging_request);
    if (p->transport != all[self].transport)
      return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_INVALID_ARG,
                           "ranks %d and %d asked for different transports (%s, %s): every "
                           "rank must route alike (options->transport, COLLGEN_TRANSPORT)",
                           self, r, collgen__transport_name((collgen_transport_t)all[self].transport),
                           collgen__transport_name((collgen_transport_t)p->transport));
    snprintf(c->arch[r], sizeof c->arch[r], "sm_%d", (int)p->sm);
    c->devices[r] = p->device;
    if (r == self) {
      p2p_row[r] = 1;
      continue;
    }
    /* Memory of another host cannot be mapped (and its fds, which the
    ** socket of a one-host test still carries, are closed unused). */
    const collgen__boot_peer *mine = collgen__boot_peer_info(c->boot, self),
                             *theirs = collgen__boot_peer_info(c->boot, r);
    if (memcmp(mine->host, theirs->host, COLLGEN__HOST_ID_BYTES) != 0 || fds[2 * r] < 0) {
      p2p_row[r] = 0;
      continue;
    }
    const int local = device_of_uuid(p->uuid);
    int can = 1;
    if (local >= 0 && local != c->devices[self]) {
      CUdevice dev;
      if (collgen__cu.cuDeviceGet(&dev, local) != CUDA_SUCCESS ||
          collgen__cu.cuDeviceCanAccessPeer(&can, c->cudev[self], dev) != CUDA_SUCCESS)
        can = 0;
    }
    if (!can) {
      p2p_row[r] = 0;
      continue;
    }
    int rc = collgen__shared_import(fds[2 * r], (size_t)p->signal_bytes, c->cudev[self],
                                    &c->shared_signal[r], c->err, sizeof c->err);
    if (rc == COLLGEN_OK)
      rc = collgen__shared_import(fds[2 * r + 1], (size_t)p->staging_bytes, c->cudev[self],
                                  &c->shared_staging[r], c->err, sizeof c->err);
    if (rc != COLLGEN_OK) {
      char why[COLLGEN_ERRBUF];
      snprintf(why, sizeof why, "%s", c->err);
      return collgen__fail(c->err, sizeof c->err, rc, "mapping rank %d's buffers: %s", r, why);
    }
    p2p_row[r] = 1;
  }
  return COLLGEN_OK;
}

/* How the ranks meet: the socket of a unique id, or the application's
** all-gather. */
typedef struct {
  const collgen_unique_id_t *id;
  collgen_allgather_fn fn;
  void *ctx;
} meeting;

/* Opens c->boot. Through a callback, when every rank is on one host, the
** socket is opened over it so that descriptors can travel; across hosts
** the callback stays (nothing is mapped between processes). */
static int open_bootstrap(collgen_comm_t *c, const meeting *m) {
  collgen__boot_options bo;
  collgen__boot_options_init(&bo);
  bo.timeout_ms = c->timeout_ms;
  const char *fake = getenv("COLLGEN_TEST_HOST_ID"); /* tests: fake several hosts */
  bo.host_id = fake && *fake ? fake : NULL;
  if (m->id) return collgen__boot_create(&c->boot, m->id, c->self, c->ndev, &bo, c->err, sizeof c->err);
  collgen__boot *via = NULL;
  int rc = collgen__boot_create_callback(&via, m->fn, m->ctx, c->self, c->ndev, &bo, c->err,
                                         sizeof c->err);
  if (rc != COLLGEN_OK) return rc;
  int hosts_of[COLLGEN_MAX_DEVICES];
  if (collgen__boot_hosts(via, hosts_of) > 1) {
    c->boot = via;
    return COLLGEN_OK;
  }
  rc = collgen__boot_create_socket_over(&c->boot, via, &bo, c->err, sizeof c->err);
  collgen__boot_destroy(via);
  return rc;
}

/* The bootstrap, both exchanges and the mappings. */
static int connect_ranks(collgen_comm_t *c, const meeting *m, rank_info *me) {
  const int n = c->ndev;
  int own_fds[2] = {-1, -1}, fds[2 * COLLGEN_MAX_DEVICES];
  rank_info all[COLLGEN_MAX_DEVICES];
  rank_status st, all_st[COLLGEN_MAX_DEVICES];
  for (int i = 0; i < 2 * n; ++i) fds[i] = -1;
  int rc = open_bootstrap(c, m);
  if (rc == COLLGEN_OK) rc = share_own_buffers(c, me, own_fds);
  if (rc != COLLGEN_OK) goto out; /* the peers see this rank leave */
  const int nfds = (collgen__boot_caps(c->boot) & COLLGEN__BOOT_CAP_FDS) ? 2 : 0;
  rc = collgen__boot_exchange(c->boot, me, all, sizeof *me, own_fds, nfds, fds);
  if (rc != COLLGEN_OK) {
    snprintf(c->err, sizeof c->err, "%s", collgen__boot_last_error(c->boot));
    goto out;
  }
  memset(&st, 0, sizeof st);
  st.status = map_peers(c, all, fds, st.p2p);
  /* every rank learns whether every rank mapped every peer */
  rc = collgen__boot_allgather(c->boot, &st, all_st, sizeof st);
  if (rc != COLLGEN_OK) {
    snprintf(c->err, sizeof c->err, "%s", collgen__boot_last_error(c->boot));
    goto out;
  }
  rc = st.status;
  for (int r = 0; rc == COLLGEN_OK && r < n; ++r) {
    if (all_st[r].status != COLLGEN_OK)
      rc = collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_PEER,
                         "rank %d could not map its peers' buffers (%s)", r,
                         collgen_status_name(all_st[r].status));
    for (int q = 0; q < n; ++q) c->p2p[r][q] = all_st[r].p2p[q];
  }
  if (rc == COLLGEN_OK) {
    c->nhosts = collgen__boot_hosts(c->boot, c->host);
    collgen__route_decide(c, (collgen_transport_t)me->transport);
    rc = collgen__comm_nccl_open(c);
  }
out:
  for (int i = 0; i < 2; ++i)
    if (own_fds[i] >= 0) close(own_fds[i]);
  for (int i = 0; i < 2 * n; ++i)
    if (fds[i] >= 0) close(fds[i]);
  return rc;
}

/* c->release_rank: unmaps every rank's shared buffers, closes the NCCL
** communicators and the bootstrap. */
static void release_rank(collgen_comm_t *c) {
  collgen__cu.cuCtxSetCurrent(c->ctx[c->self]);
  collgen__comm_nccl_close(c);
  for (int r = 0; r < c->ndev; ++r) {
    collgen__shared_free(&c->shared_signal[r]);
    collgen__shared_free(&c->shared_staging[r]);
    c->signal[r] = 0;
  }
  collgen__boot_destroy(c->boot);
  c->boot = NULL;
}

/* Both entry points, after their own argument checks. */
static int init_rank(collgen_comm_t **out, int nranks, const meeting *m, int rank, int device,
                     const collgen_comm_options_t *options) {
  char err[COLLGEN_ERRBUF];
  if (nranks < 1 || nranks > COLLGEN_MAX_DEVICES)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "nranks must be 1..%d, got %d",
                             COLLGEN_MAX_DEVICES, nranks);
  if (rank < 0 || rank >= nranks)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "rank must be 0..%d, got %d", nranks - 1,
                             rank);
  collgen_comm_options_t defaults;
  collgen_comm_options_init(&defaults);
  collgen_transport_t transport;
  int rc = collgen__transport_requested(options ? options : &defaults, &transport, err, sizeof err);
  if (rc == COLLGEN_OK) rc = collgen__driver_load(err, sizeof err);
  if (rc != COLLGEN_OK) return collgen__fail_tls(rc, "%s", err);
  collgen_comm_t *c = NULL;
  rc = collgen__comm_new(&c, nranks, options);
  if (rc != COLLGEN_OK) return rc;
  c->self = rank;
  c->release_rank = release_rank;
  rank_info me;
  memset(&me, 0, sizeof me);
  me.version = RANK_INFO_VERSION;
  me.max_blocks = c->max_blocks;
  me.staging_request = c->staging_bytes;
  me.transport = (int32_t)transport;
  rc = open_device(c, device, &me);
  if (rc == COLLGEN_OK) rc = connect_ranks(c, m, &me);
  for (int r = 0; rc == COLLGEN_OK && r < nranks; ++r) {
    c->signal[r] = c->shared_signal[r].ptr;
    c->staging[r] = c->shared_staging[r].ptr;
  }
  if (rc == COLLGEN_OK) rc = collgen__comm_host_state(c);
  if (rc != COLLGEN_OK) {
    collgen__set_tls_error(c->err);
    collgen__comm_release(c);
    return rc;
  }
  collgen__cu.cuCtxSetCurrent(NULL);
  *out = c;
  return COLLGEN_OK;
}

int collgen_comm_init_rank(collgen_comm_t **out, int nranks, const collgen_unique_id_t *id,
                           int rank, int device, const collgen_comm_options_t *options) {
  if (!out) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  if (!id) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "id is NULL");
  const meeting m = {id, NULL, NULL};
  return init_rank(out, nranks, &m, rank, device, options);
}

int collgen_comm_init_rank_callback(collgen_comm_t **out, int nranks, collgen_allgather_fn fn,
                                    void *ctx, int rank, int device,
                                    const collgen_comm_options_t *options) {
  if (!out) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  if (!fn) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "fn is NULL");
  const meeting m = {NULL, fn, ctx};
  return init_rank(out, nranks, &m, rank, device, options);
}
