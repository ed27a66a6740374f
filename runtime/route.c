/*
** route.c -- which path each group of a communicator takes
** (docs/multinode.md#routing): collgen's kernels over P2P where every rank
** of the group is on one host and every pair has peer access, else NCCL.
** Decided once, at creation, for every group of every group size, from
** facts every rank shares (host ids and the P2P matrix, both all-gathered),
** so every rank decides the same.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "escape.h"

const char *collgen__transport_name(collgen_transport_t t) {
  switch (t) {
#define NAME(N, value, id) case COLLGEN_TRANSPORT_##N: return #id;
    COLLGEN_TRANSPORT_MAP(NAME)
#undef NAME
  }
  return "unknown";
}

int collgen__transport_requested(const collgen_comm_options_t *o, collgen_transport_t *out,
                                 char *err, size_t n) {
  switch (o->transport) {
#define KNOWN(N, value, id) case COLLGEN_TRANSPORT_##N:
    COLLGEN_TRANSPORT_MAP(KNOWN)
#undef KNOWN
    break;
    default:
      return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                           "options->transport %d is not a collgen_transport_t",
                           (int)o->transport);
  }
  *out = o->transport;
  if (o->transport != COLLGEN_TRANSPORT_AUTO) return COLLGEN_OK; /* the option wins */
  const char *v = getenv("COLLGEN_TRANSPORT");
  if (!v || !*v) return COLLGEN_OK;
#define MATCH(N, value, id)                                                                 \
  if (strcmp(v, #id) == 0) {                                                                \
    *out = COLLGEN_TRANSPORT_##N;                                                           \
    return COLLGEN_OK;                                                                      \
  }
  COLLGEN_TRANSPORT_MAP(MATCH)
#undef MATCH
  char shown[COLLGEN_ESCAPED_SIZE(64)];
  return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                       "COLLGEN_TRANSPORT=\"%s\": must be auto, p2p or nccl (lower case)",
                       collgen__escape(v, shown, sizeof shown));
}

/* Why the group [base, base+size) cannot run on P2P, into why[n]; 0 if it
** can. */
static int p2p_blocked(const collgen_comm_t *c, int base, int size, char *why, size_t n) {
  for (int a = base; a < base + size; ++a)
    for (int b = base; b < base + size; ++b) {
      if (c->host[a] != c->host[b]) {
        snprintf(why, n, "ranks %d and %d are on different hosts", a, b);
        return 1;
      }
      if (!c->p2p[a][b]) {
        snprintf(why, n, "rank %d cannot access rank %d's memory (no P2P, or not mapped)", a, b);
        return 1;
      }
    }
  return 0;
}

void collgen__route_decide(collgen_comm_t *c, collgen_transport_t mode) {
  memset(c->route, 0, sizeof c->route);
  for (int s = 1; s <= c->ndev; ++s) {
    if (c->ndev % s) continue;
    for (int g = 0; g < c->ndev / s; ++g) {
      char why[128] = "";
      /* A group of one rank has no peer: it always runs collgen's kernels. */
      const int blocked = s > 1 && p2p_blocked(c, g * s, s, why, sizeof why);
      collgen_transport_t t = COLLGEN_TRANSPORT_P2P;
      if (s > 1 && (mode == COLLGEN_TRANSPORT_NCCL || (mode == COLLGEN_TRANSPORT_AUTO && blocked)))
        t = COLLGEN_TRANSPORT_NCCL;
      c->route[s][g] = (unsigned char)t;
      if (s > 1 && (g * s <= c->self && c->self < g * s + s))
        collgen__log(COLLGEN_LOG_INFO,
                     "rank %d: transport %s: group size %d, ranks %d..%d: %s%s%s%s", c->self,
                     collgen__transport_name(mode), s, g * s, g * s + s - 1,
                     collgen__transport_name(t), blocked ? " (" : "", why, blocked ? ")" : "");
    }
  }
}

void collgen__route_all_p2p(collgen_comm_t *c) {
  memset(c->route, 0, sizeof c->route);
  for (int s = 1; s <= c->ndev; ++s)
    for (int g = 0; c->ndev % s == 0 && g < c->ndev / s; ++g)
      c->route[s][g] = (unsigned char)COLLGEN_TRANSPORT_P2P;
}

collgen_transport_t collgen__route_of(const collgen_comm_t *c, int size, int base) {
  return (collgen_transport_t)c->route[size][base / size];
}
