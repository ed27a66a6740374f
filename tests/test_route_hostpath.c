/*
** test_route_hostpath.c -- routing of the one-process-per-GPU communicator
** (docs/multinode.md) on the stand-in driver and the stand-in NCCL
** (fake_cuda.c, fake_nccl.c), in forked processes: host ids equal or faked
** apart, a P2P matrix with holes, forced and bad transports, a missing
** libnccl, collgen_comm_info's report, and exactly which NCCL calls and
** local kernels each op makes on the NCCL path. No GPU and no NCCL needed.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "comm_internal.h"
#include "devbuf.h"
#include "fake_nccl.h"
#include "rank_fork.h"

static fake_nccl_stats_t *nccl;

static void setup(void) {
  rank_fork_setup();
  nccl = fake_nccl_use(FAKE_NCCL_PATH);
  cr_assert(nccl, "%s", dlerror());
  unsetenv("COLLGEN_TRANSPORT");
  unsetenv("COLLGEN_TEST_HOST_ID");
}

TestSuite(route, .init = setup, .fini = rank_fork_teardown);

/* Rank `rank` on device `rank`, with a transport option; NULL (and the
** status in *rc) on failure. */
static collgen_comm_t *open_rank(const collgen_unique_id_t *id, int nranks, int rank,
                                 collgen_transport_t transport, int *rc) {
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.timeout_ms = 5000;
  o.staging_bytes = 4u << 20;
  o.transport = transport;
  collgen_comm_t *c = NULL;
  *rc = collgen_comm_init_rank(&c, nranks, id, rank, rank, &o);
  return c;
}

/* "p2p" / "nccl" / "-" for each group of each size, as info reports it:
** "s1:p2p,p2p s2:nccl" (sizes dividing ndev, in order). */
static void routes_text(const collgen_comm_info_t *info, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (int s = 1; s <= info->ndev; ++s) {
    if (info->ndev % s) continue;
    k += (size_t)snprintf(out + k, n - k, "%ss%d:", k ? " " : "", s);
    for (int g = 0; g < info->ndev / s; ++g)
      k += (size_t)snprintf(out + k, n - k, "%s%s", g ? "," : "",
                            info->route[s - 1][g] == COLLGEN_TRANSPORT_P2P    ? "p2p"
                            : info->route[s - 1][g] == COLLGEN_TRANSPORT_NCCL ? "nccl"
                                                                              : "-");
  }
}

/* ---- Hosts and transports ------------------------------------------------ */

typedef struct {
  const char *env_transport;      /* COLLGEN_TRANSPORT in every child, or NULL */
  int different_hosts;            /* COLLGEN_TEST_HOST_ID = "host-<rank>" */
  const char *routes;             /* expected routes_text */
  int nhosts, p2p01;
  long nccl_inits;                /* per rank */
} route_case;

static route_case the_case;

static void route_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                        int pipe_w, int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  const route_case *k = &the_case;
  char host[32];
  snprintf(host, sizeof host, "host-%d", rank);
  if (k->different_hosts) setenv("COLLGEN_TEST_HOST_ID", host, 1);
  if (k->env_transport) setenv("COLLGEN_TRANSPORT", k->env_transport, 1);
  int rc;
  collgen_comm_t *c = open_rank(id, nranks, rank, COLLGEN_TRANSPORT_AUTO, &rc);
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_OK, "init_rank: %s: %s", collgen_status_name(rc),
              collgen_last_error());
  collgen_comm_info_t info;
  CHILD_CHECK(rep, rank, 2, collgen_comm_info(c, &info) == COLLGEN_OK, "info");
  char got[96];
  routes_text(&info, got, sizeof got);
  CHILD_CHECK(rep, rank, 3, strcmp(got, k->routes) == 0, "routes \"%s\", expected \"%s\"", got,
              k->routes);
  CHILD_CHECK(rep, rank, 4, info.nhosts == k->nhosts && info.host[0] == 0 &&
              info.host[1] == (k->different_hosts ? 1 : 0), "hosts: %d (%d %d)", info.nhosts,
              info.host[0], info.host[1]);
  /* (this mode does not query NVLink: a mapped pair says "PCIe") */
  CHILD_CHECK(rep, rank, 5, info.p2p[0][1] == k->p2p01 && info.p2p[1][0] == k->p2p01 &&
              strcmp(info.link[0][1], k->p2p01 ? "PCIe" : "none") == 0,
              "p2p %d %d link %s", info.p2p[0][1], info.p2p[1][0], info.link[0][1]);
  CHILD_CHECK(rep, rank, 6, nccl->inits == k->nccl_inits && nccl->live == k->nccl_inits &&
              nccl->unique_ids == (rank == 0 ? k->nccl_inits : 0),
              "NCCL: %ld inits, %ld live, %ld ids", nccl->inits, nccl->live, nccl->unique_ids);
  if (k->nccl_inits)
    CHILD_CHECK(rep, rank, 7, nccl->last_nranks == 2 && nccl->last_rank == rank &&
                strncmp((const char *)nccl->last_id, "fake-nccl-id", 12) == 0,
                "ncclCommInitRank(%d, rank %d, \"%.20s\")", nccl->last_nranks, nccl->last_rank,
                (const char *)nccl->last_id);
  collgen_comm_destroy(c);
  CHILD_CHECK(rep, rank, 8, nccl->live == 0 && nccl->destroys == k->nccl_inits &&
              stats->vmm_handles == 0, "after destroy: %ld NCCL communicators, %ld VMM handles",
              nccl->live, stats->vmm_handles);
  _exit(0);
}

static void run_case(route_case k) {
  the_case = k;
  run_ranks(route_child, 2);
}

Test(route, one_host_with_p2p_is_p2p_and_loads_no_nccl) {
  run_case((route_case){NULL, 0, "s1:p2p,p2p s2:p2p", 1, 1, 0});
}

Test(route, two_hosts_go_through_nccl_and_map_nothing_across) {
  run_case((route_case){NULL, 1, "s1:p2p,p2p s2:nccl", 2, 0, 1});
}

Test(route, forced_nccl_on_one_host) {
  run_case((route_case){"nccl", 0, "s1:p2p,p2p s2:nccl", 1, 1, 1});
}

Test(route, explicit_auto_is_auto) {
  run_case((route_case){"auto", 1, "s1:p2p,p2p s2:nccl", 2, 0, 1});
}

Test(route, forced_p2p_across_hosts_routes_p2p) {
  run_case((route_case){"p2p", 1, "s1:p2p,p2p s2:p2p", 2, 0, 0});
}

/* Forced P2P between two hosts: creation works (routing obeys), the call
** is refused with COLLGEN_ERR_NO_P2P naming the pair, before any launch. */
static void forced_p2p_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                             int pipe_w, int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  char host[32];
  snprintf(host, sizeof host, "node-%c", 'a' + rank);
  setenv("COLLGEN_TEST_HOST_ID", host, 1);
  int rc;
  collgen_comm_t *c = open_rank(id, nranks, rank, COLLGEN_TRANSPORT_P2P, &rc);
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_OK, "init_rank: %s", collgen_last_error());
  collgen_stream_t s;
  CHILD_CHECK(rep, rank, 2, collgen__dev_stream_create(c, rank, &s) == COLLGEN_OK, "stream");
  int64_t n = 1024;
  float *buf = aligned_alloc(256, 4096);
  memset(stats, 0, sizeof *stats);
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, &n, buf, buf, 0, s);
  CHILD_CHECK(rep, rank, 3, rc == COLLGEN_ERR_NO_P2P &&
              strstr(collgen_comm_last_error(c), "ranks 0 (device 0) and 1 (device 1)") &&
              strstr(collgen_comm_last_error(c), "different hosts") && stats->launches == 0,
              "%s: %s", collgen_status_name(rc), collgen_comm_last_error(c));
  /* groups of one still run */
  rc = collgen_rank_allreduce_sum(c, COLLGEN_DTYPE_F32, 1, &n, buf, buf, 1, s);
  CHILD_CHECK(rep, rank, 4, rc == COLLGEN_OK, "group of one: %s", collgen_comm_last_error(c));
  free(buf);
  collgen__dev_stream_destroy(c, rank, s);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(route, forced_p2p_across_hosts_is_refused_by_the_call) { run_ranks(forced_p2p_child, 2); }

/* ---- A P2P matrix with holes --------------------------------------------- */

/* Four ranks on four devices, devices 1 and 2 without P2P: groups holding
** that pair go through NCCL, the others stay on P2P. */
static void holes_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                        int pipe_w, int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  int rc;
  collgen_comm_t *c = open_rank(id, nranks, rank, COLLGEN_TRANSPORT_AUTO, &rc);
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_OK, "init_rank: %s", collgen_last_error());
  collgen_comm_info_t info;
  collgen_comm_info(c, &info);
  char got[96];
  routes_text(&info, got, sizeof got);
  const char *want = "s1:p2p,p2p,p2p,p2p s2:p2p,p2p s4:nccl";
  CHILD_CHECK(rep, rank, 2, strcmp(got, want) == 0, "routes \"%s\", expected \"%s\"", got, want);
  CHILD_CHECK(rep, rank, 3, info.nhosts == 1 && !info.p2p[1][2] && !info.p2p[2][1] &&
              info.p2p[0][3] && info.p2p[2][3], "p2p matrix");
  CHILD_CHECK(rep, rank, 4, nccl->inits == 1 && nccl->last_nranks == 4 && nccl->last_rank == rank,
              "NCCL: %ld inits of %d ranks", nccl->inits, nccl->last_nranks);
  collgen_comm_destroy(c);
  _exit(0);
}

Test(route, holes_in_the_p2p_matrix_route_their_groups_to_nccl) {
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  setenv("FAKE_CUDA_NO_P2P_PAIRS", "1:2", 1);
  run_ranks(holes_child, 4);
}

/* ---- Refusals ------------------------------------------------------------ */

Test(route, bad_transport_values_are_refused) {
  collgen_unique_id_t id;
  cr_assert_eq(collgen_get_unique_id(&id), COLLGEN_OK);
  const char *bad[] = {"NCCL", "p2p ", "nccl2", "1", "none"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    setenv("COLLGEN_TRANSPORT", bad[i], 1);
    int rc;
    collgen_comm_t *c = open_rank(&id, 1, 0, COLLGEN_TRANSPORT_AUTO, &rc);
    cr_expect_eq(rc, COLLGEN_ERR_INVALID_ARG, "%s: %s", bad[i], collgen_status_name(rc));
    cr_expect(strstr(collgen_last_error(), "COLLGEN_TRANSPORT") &&
              strstr(collgen_last_error(), "must be auto, p2p or nccl"), "%s",
              collgen_last_error());
    cr_expect_null(c);
  }
  /* the option wins over the variable, even a bad one */
  int rc;
  collgen_comm_t *c = open_rank(&id, 1, 0, COLLGEN_TRANSPORT_P2P, &rc);
  cr_expect_eq(rc, COLLGEN_OK, "%s", collgen_last_error());
  collgen_comm_destroy(c);
  unsetenv("COLLGEN_TRANSPORT");
  c = open_rank(&id, 1, 0, (collgen_transport_t)7, &rc);
  cr_expect_eq(rc, COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "options->transport 7"), "%s", collgen_last_error());
  /* one rank: no group of two, so nothing needs NCCL even when forced */
  c = open_rank(&id, 1, 0, COLLGEN_TRANSPORT_NCCL, &rc);
  cr_expect_eq(rc, COLLGEN_OK, "%s", collgen_last_error());
  cr_expect_eq(nccl->inits, 0);
  collgen_comm_destroy(c);
}

Test(route, the_one_process_communicator_refuses_nccl) {
  int devices[2] = {0, 1};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.cache_dir = cache_dir;
  o.transport = COLLGEN_TRANSPORT_NCCL;
  collgen_comm_t *c = NULL;
  cr_expect_eq(collgen_comm_create(&c, 2, devices, &o), COLLGEN_ERR_UNSUPPORTED);
  cr_expect(strstr(collgen_last_error(), "one process per GPU"), "%s", collgen_last_error());
  setenv("COLLGEN_TRANSPORT", "nccl", 1);
  o.transport = COLLGEN_TRANSPORT_AUTO;
  cr_expect_eq(collgen_comm_create(&c, 2, devices, &o), COLLGEN_ERR_UNSUPPORTED);
  o.transport = COLLGEN_TRANSPORT_P2P; /* the option wins */
  cr_assert_eq(collgen_comm_create(&c, 2, devices, &o), COLLGEN_OK, "%s", collgen_last_error());
  collgen_comm_info_t info;
  cr_assert_eq(collgen_comm_info(c, &info), COLLGEN_OK);
  cr_expect_eq(info.nhosts, 1);
  cr_expect_eq(info.route[1][0], COLLGEN_TRANSPORT_P2P);
  cr_expect_eq(info.route[0][1], COLLGEN_TRANSPORT_P2P);
  cr_expect_eq(info.route[2][0], COLLGEN_TRANSPORT_AUTO); /* no groups of 3 */
  collgen_comm_destroy(c);
}

/* Ranks asking for different transports are refused on both. */
static void mismatch_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                           int pipe_w, int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  int rc;
  collgen_comm_t *c = open_rank(id, nranks, rank,
                                rank ? COLLGEN_TRANSPORT_AUTO : COLLGEN_TRANSPORT_NCCL, &rc);
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_ERR_INVALID_ARG && !c &&
              strstr(collgen_last_error(), "different transports (") &&
              stats->vmm_handles == 0 && nccl->inits == 0,
              "%s: %s", collgen_status_name(rc), collgen_last_error());
  _exit(0);
}

Test(route, ranks_must_ask_for_the_same_transport) { run_ranks(mismatch_child, 2); }

/* libnccl missing on one rank (or both): every rank fails with
** COLLGEN_ERR_NO_NCCL naming the rank and the library, and nothing is left
** (no VMM handle, no NCCL communicator). */
static int missing_on_rank0;

static void missing_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                          int pipe_w, int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  setenv("COLLGEN_TRANSPORT", "nccl", 1);
  if (rank == 1 || missing_on_rank0)
    setenv("COLLGEN_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  int rc;
  collgen_comm_t *c = open_rank(id, nranks, rank, COLLGEN_TRANSPORT_AUTO, &rc);
  const char *e = collgen_last_error();
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_ERR_NO_NCCL && !c, "%s: %s", collgen_status_name(rc), e);
  CHILD_CHECK(rep, rank, 2, strstr(e, missing_on_rank0 ? "rank 0" : "rank 1") &&
              strstr(e, "/nonexistent/libnccl.so.2") && strstr(e, "COLLGEN_NCCL_LIBRARY"), "%s", e);
  CHILD_CHECK(rep, rank, 3, stats->vmm_handles == 0 && nccl->live == 0 && nccl->inits == 0,
              "left %ld VMM handles, %ld NCCL communicators", stats->vmm_handles, nccl->live);
  _exit(0);
}

Test(route, a_missing_libnccl_fails_every_rank_cleanly) {
  missing_on_rank0 = 0;
  run_ranks(missing_child, 2);
  missing_on_rank0 = 1;
  run_ranks(missing_child, 2);
}

/* An NCCL older than 2.14 (no non-blocking communicators, so no bounded
** creation) counts as missing: 2.13.4 is refused. */
static void old_nccl_child(report_t *rep, const collgen_unique_id_t *id, int rank, int nranks,
                           int pipe_w, int pipe_r) {
  (void)pipe_w;
  (void)pipe_r;
  setenv("FAKE_NCCL_VERSION", "21304", 1);
  int rc;
  collgen_comm_t *c = open_rank(id, nranks, rank, COLLGEN_TRANSPORT_NCCL, &rc);
  CHILD_CHECK(rep, rank, 1, rc == COLLGEN_ERR_NO_NCCL && !c && strstr(collgen_last_error(), "21304") &&
                  strstr(collgen_last_error(), "needs 2.14 or newer"),
              "%s: %s", collgen_status_name(rc), collgen_last_error());
  _exit(0);
}

Test(route, an_nccl_older_than_2_14_is_refused) { run_ranks(old_nccl_child, 2); }
