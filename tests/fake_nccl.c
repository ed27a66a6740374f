/*
** fake_nccl.c -- a stand-in NCCL (libfakenccl.so) for the routing tests on
** machines without a GPU or NCCL; collgen loads it through
** $COLLGEN_NCCL_LIBRARY. It moves no data: it records every call with its
** arguments (fake_nccl.h), so tests can check exactly what collgen asked
** NCCL to do. Declares NCCL's ABI itself, as collgen does. Settings:
**   FAKE_NCCL_VERSION    what ncclGetVersion reports (default 22803)
**   FAKE_NCCL_INIT_FAIL  when set, ncclCommInitRank(Config) fails (ncclSystemError)
**   FAKE_NCCL_PENDING    N: on a non-blocking communicator (config.blocking
**                        0), its creation and each collective or group end
**                        return ncclInProgress and stay in progress for N
**                        ncclCommGetAsyncError polls; -1: forever (a peer
**                        that never comes)
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_nccl.h"

typedef struct {
  char internal[128];
} fake_id;

struct fake_comm {
  int nranks, rank;
  int nonblocking;
  long pending; /* polls left before the work in progress completes; -1 never */
  pthread_t creator; /* the thread that made it */
};


/* ncclConfig_t as NCCL 2.14 laid it out (what collgen passes). */
typedef struct {
  size_t size;
  unsigned int magic, version;
  int blocking, cgaClusterSize, minCTAs, maxCTAs;
  const char *netName;
} fake_config;

/* On a non-blocking communicator, marks new work in progress (FAKE_NCCL_PENDING
** polls) and returns ncclInProgress (7); else ncclSuccess. */
static int start_work(struct fake_comm *comm) {
  const char *e = getenv("FAKE_NCCL_PENDING");
  if (!comm || !comm->nonblocking || !e || !*e) return 0;
  comm->pending = atol(e);
  return comm->pending == 0 ? 0 : 7;
}

static fake_nccl_stats_t stats;
static long next_id;

fake_nccl_stats_t *fake_nccl_stats(void) { return &stats; }

int ncclGetVersion(int *v) {
  const char *e = getenv("FAKE_NCCL_VERSION");
  *v = e && *e ? atoi(e) : 22803;
  return 0;
}

int ncclGetUniqueId(fake_id *id) {
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "fake-nccl-id %d %ld", (int)getpid(), ++next_id);
  stats.unique_ids++;
  return 0;
}

int ncclCommInitRank(struct fake_comm **comm, int nranks, fake_id id, int rank) {
  if (getenv("FAKE_NCCL_INIT_FAIL")) return 2; /* ncclSystemError */
  if (nranks < 1 || rank < 0 || rank >= nranks) return 4; /* ncclInvalidArgument */
  *comm = calloc(1, sizeof **comm);
  if (!*comm) return 2;
  (*comm)->nranks = nranks;
  (*comm)->rank = rank;
  (*comm)->creator = pthread_self();
  stats.inits++;
  stats.live++;
  stats.last_nranks = nranks;
  stats.last_rank = rank;
  memcpy(stats.last_id, id.internal, sizeof stats.last_id);
  return 0;
}

int ncclCommInitRankConfig(struct fake_comm **comm, int nranks, fake_id id, int rank,
                           fake_config *config) {
  if (!config || config->magic != 0xcafebeefu || config->size < sizeof(fake_config) ||
      config->version < 21400)
    return 4; /* ncclInvalidArgument, as NCCL answers a config without its initializer */
  int r = ncclCommInitRank(comm, nranks, id, rank);
  if (r != 0) return r;
  (*comm)->nonblocking = config->blocking == 0;
  stats.last_blocking = config->blocking;
  return start_work(*comm);
}

/* Counts a destroy or abort made on another thread than the creation. */
static void note_release_thread(const struct fake_comm *comm) {
  if (!pthread_equal(comm->creator, pthread_self())) stats.released_elsewhere++;
}

int ncclCommDestroy(struct fake_comm *comm) {
  note_release_thread(comm);
  free(comm);
  stats.destroys++;
  stats.live--;
  return 0;
}

int ncclCommAbort(struct fake_comm *comm) {
  note_release_thread(comm);
  free(comm);
  stats.aborts++;
  stats.live--;
  return 0;
}

int ncclCommGetAsyncError(struct fake_comm *comm, int *error) {
  stats.polls++;
  if (comm->pending > 0) comm->pending--;
  *error = comm->pending == 0 ? 0 : 7; /* ncclInProgress */
  return 0;
}

const char *ncclGetErrorString(int r) { return r ? "error from the fake NCCL" : "no error"; }

static int record(const char *fn, const void *send, void *recv, size_t count, int dtype, int op,
                  int peer, const struct fake_comm *comm, void *stream) {
  if (stats.calls < FAKE_NCCL_MAX_CALLS) {
    fake_nccl_call_t *c = &stats.log[stats.calls];
    snprintf(c->fn, sizeof c->fn, "%s", fn);
    c->send = send;
    c->recv = recv;
    c->count = count;
    c->dtype = dtype;
    c->op = op;
    c->peer = peer;
    c->comm_rank = comm ? comm->rank : -1;
    c->comm_nranks = comm ? comm->nranks : -1;
    c->stream = stream;
  }
  stats.calls++;
  return 0;
}

/* The collectives and the group end start work that may be in progress. */
static struct fake_comm *group_comm; /* the communicator of the open group's calls */

int ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op,
                  struct fake_comm *comm, void *stream) {
  record("ncclAllReduce", send, recv, count, dtype, op, -1, comm, stream);
  return start_work(comm);
}

int ncclAllGather(const void *send, void *recv, size_t count, int dtype, struct fake_comm *comm,
                  void *stream) {
  record("ncclAllGather", send, recv, count, dtype, -1, -1, comm, stream);
  return start_work(comm);
}

int ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root,
                  struct fake_comm *comm, void *stream) {
  record("ncclBroadcast", send, recv, count, dtype, -1, root, comm, stream);
  return start_work(comm);
}

int ncclReduceScatter(const void *send, void *recv, size_t count, int dtype, int op,
                      struct fake_comm *comm, void *stream) {
  record("ncclReduceScatter", send, recv, count, dtype, op, -1, comm, stream);
  return start_work(comm);
}

/* Called inside a group (the reduce-scatter ops' uneven chunks): the
** group's end starts the work; peer records the root. */
int ncclReduce(const void *send, void *recv, size_t count, int dtype, int op, int root,
               struct fake_comm *comm, void *stream) {
  group_comm = comm;
  return record("ncclReduce", send, recv, count, dtype, op, root, comm, stream);
}

int ncclSend(const void *send, size_t count, int dtype, int peer, struct fake_comm *comm,
             void *stream) {
  group_comm = comm;
  return record("ncclSend", send, NULL, count, dtype, -1, peer, comm, stream);
}

int ncclRecv(void *recv, size_t count, int dtype, int peer, struct fake_comm *comm, void *stream) {
  group_comm = comm;
  return record("ncclRecv", NULL, recv, count, dtype, -1, peer, comm, stream);
}

int ncclGroupStart(void) {
  group_comm = NULL;
  return record("ncclGroupStart", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
}

int ncclGroupEnd(void) {
  record("ncclGroupEnd", NULL, NULL, 0, -1, -1, -1, NULL, NULL);
  return start_work(group_comm);
}
