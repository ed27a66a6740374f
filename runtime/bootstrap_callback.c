/*
** bootstrap_callback.c -- the callback transport of the bootstrap: the
** application's own all-gather (collgen_allgather_fn: MPI, a torch store)
** carries the rank records and every exchange. Each exchange is two calls:
** a fixed-size record (exchange number, size, status) that lets every rank
** check the others before any variable-size call, then the bytes. A rank
** that fails locally still makes the first call, with its error, so the
** others fail at once with its reason instead of waiting in the second.
** bootstrap.c calls it through collgen__boot_callback_ops (at the end).
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap_handle.h"

#define REC_MAGIC 0x43424743u /* "CGBC" */
#define JOIN_BYTES (8 + COLLGEN__WIRE_INFO)
#define STEP_TEXT 112

/* The first call of an exchange, in the machine's byte order: the ranks of
** a job run one collgen on one architecture (a foreign layout would show
** as a bad magic, never be misread). */
typedef struct {
  uint32_t magic, seq;
  uint64_t bytes;
  int32_t status;
  uint32_t reserved;
  char text[STEP_TEXT]; /* the failure, NUL-padded */
} step_rec;

/* Calls the application's all-gather; its failure becomes b's error. */
static int call(collgen__boot *b, const void *mine, void *all, size_t bytes, const char *when) {
  int rc = b->fn(b->ctx, mine, all, bytes);
  if (rc == 0) return COLLGEN_OK;
  return collgen__boot_fail(b, COLLGEN_ERR_PEER,
                            "%s: the application's allgather callback failed (returned %d, "
                            "rank %d, %zu bytes)", when, rc, b->rank, bytes);
}

/* The table's join: all-gathers every rank's record through fn and checks
** every slot. */
static int callback_join(collgen__boot *b, const collgen__wire_info *self,
                         const uint8_t tag[COLLGEN__UID_TAG_BYTES],
                         const uint8_t secret[COLLGEN__UID_SECRET_BYTES]) {
  (void)tag, (void)secret; /* the application's callback needs no id */
  uint8_t mine[JOIN_BYTES];
  collgen__wire_put32(mine, REC_MAGIC);
  collgen__wire_put32(mine + 4, COLLGEN__WIRE_VERSION);
  collgen__wire_pack_info(mine + 8, self);
  uint8_t *all = calloc((size_t)b->nranks, JOIN_BYTES);
  if (!all) return collgen__boot_fail(b, COLLGEN_ERR_NO_MEMORY, "rendezvous: out of memory");
  int rc = call(b, mine, all, JOIN_BYTES, "rendezvous");
  for (int r = 0; r < b->nranks && rc == COLLGEN_OK; ++r) {
    const uint8_t *rec = all + (size_t)r * JOIN_BYTES;
    collgen__wire_info in;
    char why[256];
    if (collgen__wire_get32(rec) != REC_MAGIC ||
        collgen__wire_get32(rec + 4) != COLLGEN__WIRE_VERSION)
      rc = collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                              "rendezvous: slot %d of the allgather callback's output holds no "
                              "collgen %u record (the callback must put rank i's bytes at all "
                              "+ i * bytes)", r, COLLGEN__WIRE_VERSION);
    else if (collgen__wire_parse_info(rec + 8, &in, why, sizeof why) != COLLGEN_OK)
      rc = collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG, "rendezvous: slot %d: %s", r, why);
    else if ((int)in.nranks != b->nranks)
      rc = collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                              "rendezvous: rank %u (pid %u) has nranks %u, rank %d has %d",
                              in.rank, in.pid, in.nranks, b->rank, b->nranks);
    else if ((int)in.rank != r)
      rc = collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                              "rendezvous: slot %d of the allgather callback's output holds "
                              "rank %u's record (pid %u): two processes claim rank %u, or the "
                              "callback misplaces slots", r, in.rank, in.pid, in.rank);
    else if (r == b->rank && memcmp(rec, mine, JOIN_BYTES) != 0)
      rc = collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                              "rendezvous: the allgather callback changed this rank's own "
                              "record");
    if (rc == COLLGEN_OK) {
      b->peers[r].pid = (int)in.pid;
      memcpy(b->peers[r].host, in.host, COLLGEN__HOST_ID_BYTES);
    }
  }
  free(all);
  return rc;
}

/* The first call of exchange b->seq: every rank's step record; checks that
** all are at this exchange with this size and none failed. */
static int step(collgen__boot *b, size_t bytes, int status) {
  step_rec mine;
  memset(&mine, 0, sizeof mine);
  mine.magic = REC_MAGIC;
  mine.seq = b->seq;
  mine.bytes = bytes;
  mine.status = status;
  if (status != COLLGEN_OK) /* truncated to the record's room */
    memcpy(mine.text, b->err, strnlen(b->err, sizeof mine.text - 1));
  step_rec *all = calloc((size_t)b->nranks, sizeof *all);
  if (!all) return collgen__boot_fail(b, COLLGEN_ERR_NO_MEMORY, "exchange: out of memory");
  char when[48];
  snprintf(when, sizeof when, "exchange #%u", b->seq);
  int rc = call(b, &mine, all, sizeof mine, when);
  for (int r = 0; r < b->nranks && rc == COLLGEN_OK && status == COLLGEN_OK; ++r) {
    const step_rec *x = &all[r];
    if (r == b->rank) continue;
    if (x->magic != REC_MAGIC) {
      rc = collgen__boot_fail(b, COLLGEN_ERR_PEER, "%s: slot %d of the allgather callback's "
                              "output holds no collgen record", when, r);
    } else if (x->status != 0) {
      uint8_t payload[4 + STEP_TEXT];
      char text[STEP_TEXT + 1];
      collgen__wire_put32(payload, (uint32_t)x->status);
      memcpy(payload + 4, x->text, STEP_TEXT);
      size_t len = 4 + strnlen(x->text, STEP_TEXT);
      int code = collgen__wire_parse_error(payload, len, text, sizeof text);
      rc = collgen__boot_fail(b, code, "%s: rank %d (pid %d) failed: %s", when, r,
                              b->peers[r].pid, text);
    } else if (x->seq != b->seq || x->bytes != bytes) {
      rc = collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                              "%s: rank %d (pid %d) is at exchange #%u with %llu bytes, rank %d "
                              "with %zu (every rank must make the same exchanges in the same "
                              "order)", when, r, b->peers[r].pid, x->seq,
                              (unsigned long long)x->bytes, b->rank, bytes);
    }
  }
  free(all);
  return rc;
}

/* The table's exchange: the step record, then the bytes. Descriptors never
** come: this table has no COLLGEN__BOOT_CAP_FDS, so bootstrap.c refuses
** them first. */
static int callback_exchange(collgen__boot *b, const void *mine, void *all, size_t bytes,
                             const int *mine_fds, int nfds, int *all_fds) {
  (void)mine_fds, (void)nfds, (void)all_fds;
  int rc = step(b, bytes, COLLGEN_OK);
  if (rc != COLLGEN_OK || bytes == 0) return rc;
  char when[48];
  snprintf(when, sizeof when, "exchange #%u", b->seq);
  rc = call(b, mine, all, bytes, when);
  if (rc == COLLGEN_OK && memcmp((const uint8_t *)all + (size_t)b->rank * bytes, mine, bytes))
    rc = collgen__boot_fail(b, COLLGEN_ERR_INVALID_ARG,
                            "%s: the allgather callback did not put this rank's bytes in its "
                            "slot %d", when, b->rank);
  return rc;
}

/* The table's abort: this rank's step record carries status and b->err to
** the others; b->err is kept. */
static void callback_abort(collgen__boot *b, int status) {
  char saved[COLLGEN_ERRBUF];
  snprintf(saved, sizeof saved, "%s", b->err);
  step(b, 0, status); /* tells the others; its own outcome does not matter */
  snprintf(b->err, sizeof b->err, "%s", saved);
}

const struct collgen__boot_ops collgen__boot_callback_ops = {
  .join = callback_join,
  .exchange = callback_exchange,
  .abort = callback_abort,
  .caps = 0, /* no descriptors; fn's waits are the application's to bound */
};
