/*
** comm.c -- the communicator: devices, primary contexts, peer access,
** per-rank signal buffers and the host-mapped error records.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

int collgen__comm_is_local(const collgen_comm_t *c, int r) { return c->self < 0 || r == c->self; }

int collgen__comm_ranks(const collgen_comm_t *c) { return c->ndev; }

int collgen__comm_self(const collgen_comm_t *c) { return c->self; }

CUcontext collgen__comm_context(const collgen_comm_t *c, int r) { return c->ctx[r]; }

int collgen__comm_cu_fail(collgen_comm_t *c, CUresult r, const char *what) {
  return collgen__cu_fail(r, what, c->err, sizeof c->err);
}

void collgen_comm_options_init(collgen_comm_options_t *o) {
  memset(o, 0, sizeof *o);
}

void collgen__comm_release(collgen_comm_t *c) {
  for (int i = 0; i < c->nloaded; ++i) {
    collgen__cu.cuCtxSetCurrent(c->loaded[i].ctx);
    collgen__cu.cuModuleUnload(c->loaded[i].module);
  }
  free(c->loaded);
  collgen__comm_buffers_release(c);
  if (c->release_rank) c->release_rank(c);
  for (int r = 0; r < c->ndev; ++r) {
    if (c->signal[r] || c->abort_stream[r]) collgen__cu.cuCtxSetCurrent(c->ctx[r]);
    if (c->abort_stream[r]) collgen__cu.cuStreamDestroy(c->abort_stream[r]);
    if (c->signal[r]) collgen__cu.cuMemFree(c->signal[r]);
  }
  if (c->errors) collgen__cu.cuMemFreeHost(c->errors);
  if (c->abort_fill) collgen__cu.cuMemFreeHost(c->abort_fill);
  for (int r = 0; r < c->ndev; ++r)
    if (c->retained[r]) collgen__cu.cuDevicePrimaryCtxRelease(c->cudev[r]);
  collgen__cu.cuCtxSetCurrent(NULL);
  collgen_generator_destroy(c->gen);
  free(c);
}

static int validate_devices(int ndev, const int *devices, int allow_shared,
                            char *err, size_t n) {
  if (ndev < 1 || ndev > COLLGEN_MAX_DEVICES)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "ndev must be 1..%d, got %d", COLLGEN_MAX_DEVICES, ndev);
  if (!devices) return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG, "devices is NULL");
  int count = 0;
  collgen__cu.cuDeviceGetCount(&count);
  for (int i = 0; i < ndev; ++i) {
    if (devices[i] < 0 || devices[i] >= count)
      return collgen__fail(err, n, COLLGEN_ERR_NO_DEVICE,
                           "device %d does not exist (%d visible)", devices[i], count);
    for (int j = 0; j < i; ++j)
      if (devices[j] == devices[i] && !allow_shared)
        return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                             "device %d is listed twice (ranks %d and %d)",
                             devices[i], j, i);
  }
  return COLLGEN_OK;
}

/* Enables peer access from rank a's context to rank b's, recording the
** matrix. Distinct devices without P2P are recorded, not refused: the ops
** refuse a group that contains such a pair. */
static int connect_peers(collgen_comm_t *c) {
  int rc = COLLGEN_OK;
  for (int a = 0; a < c->ndev; ++a) {
    for (int b = 0; b < c->ndev; ++b) {
      if (c->devices[a] == c->devices[b]) {
        c->p2p[a][b] = 1;
        continue;
      }
      int can = 0;
      COLLGEN_CU_GOTO(collgen__cu.cuDeviceCanAccessPeer(&can, c->cudev[a], c->cudev[b]),
                      rc, c->err, sizeof c->err, out);
      c->p2p[a][b] = can;
      if (!can) continue;
      COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[a]), rc, c->err, sizeof c->err, out);
      CUresult r = collgen__cu.cuCtxEnablePeerAccess(c->ctx[b], 0);
      if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
        rc = collgen__cu_fail(r, "cuCtxEnablePeerAccess", c->err, sizeof c->err);
        goto out;
      }
      int perf = 0;
      collgen__cu.cuDeviceGetP2PAttribute(&perf, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                                          c->cudev[a], c->cudev[b]);
      c->nvlink[a][b] = perf; /* native atomics over the link: NVLink on H200s */
    }
  }
out:
  return rc;
}

int collgen__comm_check_arch(collgen_comm_t *c, int device, int major, int minor) {
  if (major < 8)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                         "device %d is sm_%d%d; collgen needs sm_80 or newer", device, major, minor);
  if (c->pdl && major * 10 + minor < COLLGEN_PDL_MIN_SM)
    return collgen__fail(c->err, sizeof c->err, COLLGEN_ERR_UNSUPPORTED,
                         "device %d is sm_%d%d; the pdl option needs sm_%d or newer", device, major,
                         minor, COLLGEN_PDL_MIN_SM);
  return COLLGEN_OK;
}

int collgen__comm_new(collgen_comm_t **out, int ndev, const collgen_comm_options_t *options) {
  collgen_comm_options_t defaults;
  collgen_comm_options_init(&defaults);
  if (!options) options = &defaults;
  *out = NULL;
  if (options->max_blocks < 0 || options->max_blocks > COLLGEN_MAX_BLOCKS)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "max_blocks must be 0..%d",
                             COLLGEN_MAX_BLOCKS);
  if (options->timeout_ms < 0 || options->timeout_ms > COLLGEN_MAX_TIMEOUT_MS)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "timeout_ms must be 0..%d, got %d",
                             COLLGEN_MAX_TIMEOUT_MS, options->timeout_ms);
  if (options->staging_bytes != 0 && (options->staging_bytes < COLLGEN_MIN_STAGING_BYTES ||
                                      options->staging_bytes > COLLGEN_MAX_STAGING_BYTES))
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "staging_bytes must be 0 (default) or %zu..%zu, got %zu",
                             COLLGEN_MIN_STAGING_BYTES, COLLGEN_MAX_STAGING_BYTES,
                             options->staging_bytes);
  if (options->pdl != 0 && options->pdl != 1)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "pdl must be 0 or 1, got %d", options->pdl);
  if (options->pdl && options->allow_shared_devices)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "pdl needs one rank per GPU: a rank's next kernel, resident early "
                             "and waiting, could hold the SMs another rank on that GPU needs");
  collgen_comm_t *c = calloc(1, sizeof *c);
  if (!c) return collgen__fail_tls(COLLGEN_ERR_NO_MEMORY, "out of memory");
  c->ndev = ndev;
  c->self = -1;
  c->timeout_ms = options->timeout_ms > 0 ? options->timeout_ms : collgen__param_timeout_ms();
  c->max_blocks = options->max_blocks;
  c->pdl = options->pdl;
  c->launch_mask = options->launch_mask;
  c->staging_bytes = options->staging_bytes ? options->staging_bytes : COLLGEN_DEFAULT_STAGING_BYTES;
  c->nhosts = 1; /* one host, every group on P2P, until a rank's bootstrap says otherwise */
  collgen__route_all_p2p(c);
  int rc = collgen_generator_create(&c->gen, options->cache_dir);
  if (rc != COLLGEN_OK) {
    free(c);
    return rc; /* the generator's message is the thread's last error */
  }
  *out = c;
  return COLLGEN_OK;
}

int collgen__comm_host_state(collgen_comm_t *c) {
  int rc = COLLGEN_OK;
  const int first = c->self < 0 ? 0 : c->self;
  /* Pinned allocations need a current context. */
  COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[first]), rc, c->err, sizeof c->err, out);
  COLLGEN_CU_GOTO(collgen__cu.cuMemHostAlloc((void **)&c->errors,
                                             sizeof(unsigned int) * COLLGEN_HOST_WORDS,
                                             CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
                  rc, c->err, sizeof c->err, out);
  memset(c->errors, 0, sizeof(unsigned int) * COLLGEN_HOST_WORDS);
  COLLGEN_CU_GOTO(collgen__cu.cuMemHostGetDevicePointer(&c->errors_dev, c->errors, 0), rc, c->err,
                  sizeof c->err, out);
  /* What collgen_comm_abort copies over every signal buffer, allocated now
  ** so that the abort allocates nothing (runtime/comm_abort.c). */
  COLLGEN_CU_GOTO(collgen__cu.cuMemHostAlloc(&c->abort_fill, sizeof(collgen__signal),
                                             CU_MEMHOSTALLOC_PORTABLE),
                  rc, c->err, sizeof c->err, out);
  memset(c->abort_fill, COLLGEN_ABORT_FILL, sizeof(collgen__signal));
  for (int r = 0; r < c->ndev; ++r) {
    if (!collgen__comm_is_local(c, r)) continue;
    COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, out);
    COLLGEN_CU_GOTO(collgen__cu.cuStreamCreate(&c->abort_stream[r], CU_STREAM_NON_BLOCKING), rc,
                    c->err, sizeof c->err, out);
  }
out:
  return rc;
}

int collgen_comm_create(collgen_comm_t **out, int ndev, const int *devices,
                        const collgen_comm_options_t *options) {
  char err[COLLGEN_ERRBUF];
  if (!out) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "out is NULL");
  *out = NULL;
  collgen_comm_options_t defaults;
  collgen_comm_options_init(&defaults);
  if (!options) options = &defaults;
  collgen_transport_t transport;
  int rc = collgen__transport_requested(options, &transport, err, sizeof err);
  if (rc != COLLGEN_OK) return collgen__fail_tls(rc, "%s", err);
  if (transport == COLLGEN_TRANSPORT_NCCL)
    return collgen__fail_tls(COLLGEN_ERR_UNSUPPORTED,
                             "transport nccl (options->transport or COLLGEN_TRANSPORT): the "
                             "one-process communicator runs on P2P only; NCCL needs one process "
                             "per GPU (collgen_comm_init_rank)");
  rc = collgen__driver_load(err, sizeof err);
  if (rc != COLLGEN_OK) return collgen__fail_tls(rc, "%s", err);
  rc = validate_devices(ndev, devices, options->allow_shared_devices, err, sizeof err);
  if (rc != COLLGEN_OK) return collgen__fail_tls(rc, "%s", err);
  collgen_comm_t *c = NULL;
  rc = collgen__comm_new(&c, ndev, options);
  if (rc != COLLGEN_OK) return rc;
  for (int r = 0; r < ndev; ++r) {
    c->devices[r] = devices[r];
    COLLGEN_CU_GOTO(collgen__cu.cuDeviceGet(&c->cudev[r], devices[r]), rc, c->err, sizeof c->err, fail);
    COLLGEN_CU_GOTO(collgen__cu.cuDevicePrimaryCtxRetain(&c->ctx[r], c->cudev[r]), rc, c->err,
                    sizeof c->err, fail);
    c->retained[r] = 1;
    int major = 0, minor = 0;
    collgen__cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->cudev[r]);
    collgen__cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->cudev[r]);
    snprintf(c->arch[r], sizeof c->arch[r], "sm_%d%d", major, minor);
    rc = collgen__comm_check_arch(c, devices[r], major, minor);
    if (rc != COLLGEN_OK) goto fail;
  }
  rc = connect_peers(c);
  if (rc != COLLGEN_OK) goto fail;
  rc = collgen__comm_host_state(c);
  if (rc != COLLGEN_OK) goto fail;
  for (int r = 0; r < ndev; ++r) {
    COLLGEN_CU_GOTO(collgen__cu.cuCtxSetCurrent(c->ctx[r]), rc, c->err, sizeof c->err, fail);
    COLLGEN_CU_GOTO(collgen__cu.cuMemAlloc(&c->signal[r], sizeof(collgen__signal)), rc, c->err,
                    sizeof c->err, fail);
    COLLGEN_CU_GOTO(collgen__cu.cuMemsetD8(c->signal[r], 0, sizeof(collgen__signal)), rc, c->err,
                    sizeof c->err, fail);
    COLLGEN_CU_GOTO(collgen__cu.cuCtxSynchronize(), rc, c->err, sizeof c->err, fail);
  }
  collgen__cu.cuCtxSetCurrent(NULL);
  *out = c;
  return COLLGEN_OK;
fail:
  collgen__set_tls_error(c->err);
  collgen__comm_release(c);
  return rc;
}

void collgen_comm_destroy(collgen_comm_t *c) {
  if (c) collgen__comm_release(c);
}

const char *collgen_comm_last_error(const collgen_comm_t *c) {
  return c ? c->err : collgen_last_error();
}

int collgen_comm_info(collgen_comm_t *c, collgen_comm_info_t *info) {
  if (!c || !info) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "NULL argument");
  memset(info, 0, sizeof *info);
  info->ndev = c->ndev;
  info->signal_bytes_per_rank = sizeof(collgen__signal);
  for (int a = 0; a < c->ndev; ++a) {
    info->devices[a] = c->devices[a];
    snprintf(info->arch[a], sizeof info->arch[a], "%s", c->arch[a]);
    for (int b = 0; b < c->ndev; ++b) {
      info->p2p[a][b] = c->p2p[a][b];
      const char *link = c->devices[a] == c->devices[b] ? "self"
                         : !c->p2p[a][b]                ? "none"
                         : c->nvlink[a][b]              ? "NVLink"
                                                        : "PCIe";
      snprintf(info->link[a][b], sizeof info->link[a][b], "%s", link);
    }
  }
  info->nhosts = c->nhosts;
  for (int r = 0; r < c->ndev; ++r) info->host[r] = c->host[r];
  for (int s = 1; s <= c->ndev; ++s)
    for (int g = 0; c->ndev % s == 0 && g < c->ndev / s; ++g)
      info->route[s - 1][g] = collgen__route_of(c, s, g * s);
  return COLLGEN_OK;
}
