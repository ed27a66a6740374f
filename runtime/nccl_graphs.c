/*
** nccl_graphs.c -- an NCCL communicator's release never waits for CUDA
** graphs.
**
** NCCL counts the CUDA graphs that captured work of a communicator and
** drops the count only when each graph is destroyed (a CUDA user object);
** ncclCommDestroy and ncclCommAbort both spin until the count is zero
** (commDestroySync polling localPersistentRefs). So destroying a
** collgen communicator while a graph holding one of its NCCL-path calls is
** alive blocked forever, and Python frees objects in no fixed order.
**
** collgen keeps its own count the same way: every NCCL-path call captured
** into a graph attaches a user object to that graph (collgen__nccl_graphs_track),
** whose destructor (run by CUDA when the graph goes) decrements it. A
** release (collgen__nccl_release) with no live graph destroys or aborts
** the NCCL communicator at once, as before; with live graphs it hands the
** communicator to a detached thread that makes the same NCCL call, which
** returns once those graphs are destroyed (or never, if the process exits
** first: the system frees it then), and the caller returns at once.
*/
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "comm_internal.h"
#include "driver.h"

struct collgen__nccl_graphs {
  atomic_int graphs; /* live CUDA graphs that captured calls on the communicator */
  atomic_int holds;  /* the communicator's hold (1 until released) + one per graph */
};

collgen__nccl_graphs *collgen__nccl_graphs_new(void) {
  collgen__nccl_graphs *t = malloc(sizeof *t);
  if (t) {
    atomic_init(&t->graphs, 0);
    atomic_init(&t->holds, 1);
  }
  return t;
}

static void drop_hold(collgen__nccl_graphs *t) {
  if (atomic_fetch_sub(&t->holds, 1) == 1) free(t);
}

/* The user object's destructor: a graph that captured a call is gone. Runs
** on a CUDA thread, so it calls no CUDA or NCCL function. */
static void CUDA_CB graph_gone(void *p) {
  collgen__nccl_graphs *t = p;
  atomic_fetch_sub(&t->graphs, 1);
  drop_hold(t);
}

int collgen__nccl_graphs_track(collgen__nccl_graphs *t, CUstream stream, char *err, size_t n) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = NULL;
  int rc = collgen__cu_fail(collgen__cu.cuStreamGetCaptureInfo(stream, &status, NULL, &graph,
                                                               NULL, NULL, NULL),
                            "cuStreamGetCaptureInfo", err, n);
  if (rc != COLLGEN_OK || status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return rc;
  CUuserObject obj;
  atomic_fetch_add(&t->graphs, 1);
  atomic_fetch_add(&t->holds, 1);
  rc = collgen__cu_fail(collgen__cu.cuUserObjectCreate(&obj, t, graph_gone, 1,
                                                       CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
                        "cuUserObjectCreate", err, n);
  if (rc != COLLGEN_OK) {
    atomic_fetch_sub(&t->graphs, 1);
    drop_hold(t);
    return rc;
  }
  /* The graph takes the one reference (MOVE): its destruction runs graph_gone. */
  return collgen__cu_fail(collgen__cu.cuGraphRetainUserObject(graph, obj, 1,
                                                              CU_GRAPH_USER_OBJECT_MOVE),
                          "cuGraphRetainUserObject", err, n);
}

typedef struct {
  collgen__nccl_comm_t comm;
  collgen__nccl_graphs *graphs;
  int abort;
} release_job;

static void *release_in_background(void *p) {
  release_job *job = p;
  if (job->abort)
    collgen__nccl.ncclCommAbort(job->comm);
  else
    collgen__nccl.ncclCommDestroy(job->comm);
  drop_hold(job->graphs);
  free(job);
  return NULL;
}

collgen__nccl_result collgen__nccl_release(collgen__nccl_comm_t comm, collgen__nccl_graphs *graphs,
                                           int abort) {
  const int live = graphs ? atomic_load(&graphs->graphs) : 0;
  if (live > 0) {
    release_job *job = malloc(sizeof *job);
    pthread_t th;
    pthread_attr_t attr;
    int started = 0;
    if (job && pthread_attr_init(&attr) == 0) {
      *job = (release_job){comm, graphs, abort};
      started = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
                pthread_create(&th, &attr, release_in_background, job) == 0;
      pthread_attr_destroy(&attr);
    }
    if (started) {
      collgen__log(COLLGEN_LOG_INFO,
                   "the NCCL communicator is %s in the background: %d CUDA graph%s that "
                   "captured its calls %s still alive (NCCL waits for them)",
                   abort ? "aborted" : "destroyed", live, live == 1 ? "" : "s",
                   live == 1 ? "is" : "are");
      return COLLGEN__NCCL_SUCCESS;
    }
    free(job);
    /* No thread: leaving the communicator to the process's exit is better
    ** than blocking the caller until the graphs go. */
    collgen__log(COLLGEN_LOG_WARN,
                 "the NCCL communicator is left unreleased until the process exits: %d CUDA "
                 "graph%s that captured its calls %s alive and no thread could be started",
                 live, live == 1 ? "" : "s", live == 1 ? "is" : "are");
    return COLLGEN__NCCL_SUCCESS;
  }
  collgen__nccl_result r =
      abort ? collgen__nccl.ncclCommAbort(comm) : collgen__nccl.ncclCommDestroy(comm);
  if (graphs) drop_hold(graphs);
  return r;
}
