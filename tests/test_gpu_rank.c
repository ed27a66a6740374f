/*
** test_gpu_rank.c -- the one-process-per-GPU mode on real GPUs: forked
** processes, one rank each (round robin over at most two GPUs; several
** ranks share a GPU with small grids), each creating its rank with
** collgen_comm_init_rank and calling collgen_rank_allreduce_sum. Every
** process builds every rank's inputs from one shared seed, so each checks
** its own output against the CPU reference, bit for bit (the same bits as
** the one-process mode, whose reference is the same). Outputs are poisoned
** before each call; in place and out of place; sizes from 1 element to
** calls cut into pieces by the staging area; CUDA-graph replay with new
** data. A child reports failures through shared memory.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collgen.h"
#include "reference.h"
#include "test_gpu.h"
#include "test_util.h"

typedef struct {
  int failed[8];
  char why[8][384];
} rank_report;

#define RANK_CHECK(rep, r, cond, ...)                                           \
  do {                                                                          \
    if (!(cond)) {                                                              \
      (rep)->failed[r] = 1;                                                     \
      snprintf((rep)->why[r], sizeof (rep)->why[r], __VA_ARGS__);                \
      _exit(1);                                                                 \
    }                                                                           \
  } while (0)

/* Inputs of every rank for one round, from the shared seed. */
static void make_inputs(collgen_dtype_t dt, int64_t n, int nranks, uint64_t seed, void **host) {
  uint64_t state = seed | 1;
  for (int r = 0; r < nranks; ++r) collgen__ref_fill_random(dt, host[r], n, &state);
}

typedef struct {
  collgen_comm_t *c;
  collgen_stream_t s;
  int rank, nranks;
  rank_report *rep;
  void *host[8], *want, *got, *in, *out;
} rank_ctx;

/* One checked call: fresh inputs (seed), poisoned output, exact result. */
static void rank_round(rank_ctx *x, collgen_dtype_t dt, int64_t n, int inplace, uint64_t seed,
                       CUgraphExec replay) {
  const size_t bytes = (size_t)n * (size_t)collgen__dtype_bytes(dt);
  make_inputs(dt, n, x->nranks, seed, x->host);
  void *out = inplace ? x->in : x->out;
  RANK_CHECK(x->rep, x->rank, collgen__dev_upload(x->c, x->rank, x->in, x->host[x->rank], bytes) ==
             COLLGEN_OK, "upload");
  if (!inplace) RANK_CHECK(x->rep, x->rank, collgen__dev_fill(x->c, x->rank, out, 0xff, bytes) ==
                           COLLGEN_OK, "poison");
  if (replay) {
    RANK_CHECK(x->rep, x->rank, collgen__cu.cuGraphLaunch(replay, (CUstream)x->s) == CUDA_SUCCESS,
               "graph launch");
  } else {
    int rc = collgen_rank_allreduce_sum(x->c, dt, 1, &n, x->in, out, 0, x->s);
    RANK_CHECK(x->rep, x->rank, rc == COLLGEN_OK, "dtype %d n %lld: %s", (int)dt, (long long)n,
               collgen_comm_last_error(x->c));
  }
  RANK_CHECK(x->rep, x->rank, collgen__cu.cuStreamSynchronize((CUstream)x->s) == CUDA_SUCCESS,
             "sync");
  RANK_CHECK(x->rep, x->rank, collgen_comm_check(x->c) == COLLGEN_OK, "check: %s",
             collgen_comm_last_error(x->c));
  collgen__ref_allreduce(dt, n, x->nranks, (const void *const *)x->host, x->want);
  RANK_CHECK(x->rep, x->rank, collgen__dev_download(x->c, x->rank, x->got, out, bytes) == COLLGEN_OK,
             "download");
  if (memcmp(x->got, x->want, bytes) != 0) {
    int64_t i = 0;
    const int es = collgen__dtype_bytes(dt);
    while (memcmp((char *)x->got + i * es, (char *)x->want + i * es, (size_t)es) == 0) ++i;
    RANK_CHECK(x->rep, x->rank, 0, "dtype %d n %lld inplace %d graph %d: element %lld: got %g want %g",
               (int)dt, (long long)n, inplace, replay != NULL, (long long)i,
               collgen__ref_load(dt, x->got, i), collgen__ref_load(dt, x->want, i));
  }
}

static const int64_t RANK_SIZES[] = {1, 7, 4097, 65536 + 3, 1 << 20, 3 * (1 << 20) + 5};

static void rank_child(rank_report *rep, const collgen_unique_id_t *id, int nranks, int rank,
                       uint64_t seed) {
  int ngpu = gpu_count();
  int device = rank % (ngpu >= 2 ? 2 : 1);
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.timeout_ms = 60000;
  o.staging_bytes = 8u << 20; /* the largest size runs as pieces */
  o.max_blocks = nranks > (ngpu >= 2 ? 2 : 1) ? 8 : 0;
  rank_ctx x;
  memset(&x, 0, sizeof x);
  x.rank = rank;
  x.nranks = nranks;
  x.rep = rep;
  int rc = collgen_comm_init_rank(&x.c, nranks, id, rank, device, &o);
  RANK_CHECK(rep, rank, rc == COLLGEN_OK, "init_rank: %s", collgen_last_error());
  const size_t cap = (size_t)(3 * (1 << 20) + 5) * 4;
  for (int r = 0; r < nranks; ++r) x.host[r] = malloc(cap);
  x.want = malloc(cap);
  x.got = malloc(cap);
  RANK_CHECK(rep, rank, collgen__dev_stream_create(x.c, rank, &x.s) == COLLGEN_OK &&
             collgen__dev_alloc(x.c, rank, cap, &x.in) == COLLGEN_OK &&
             collgen__dev_alloc(x.c, rank, cap, &x.out) == COLLGEN_OK, "alloc");
  static const collgen_dtype_t dts[] = {COLLGEN_DTYPE_BF16, COLLGEN_DTYPE_F16, COLLGEN_DTYPE_F32};
  uint64_t round = 0;
  for (size_t d = 0; d < 3; ++d)
    for (size_t k = 0; k < sizeof RANK_SIZES / sizeof RANK_SIZES[0]; ++k)
      for (int inplace = 0; inplace < 2; ++inplace)
        rank_round(&x, dts[d], RANK_SIZES[k], inplace, seed + 1000 * ++round, NULL);
  /* graph replay with new data: LL, and a staged two-shot size */
  const int64_t graph_sizes[2] = {4097, 1 << 20};
  for (int k = 0; k < 2; ++k) {
    int64_t n = graph_sizes[k];
    CUgraph g;
    CUgraphExec ge;
    rank_round(&x, COLLGEN_DTYPE_BF16, n, 0, seed + 77 + k, NULL); /* loads the kernel first */
    RANK_CHECK(rep, rank, collgen__cu.cuStreamBeginCapture((CUstream)x.s, CU_STREAM_CAPTURE_MODE_GLOBAL) ==
               CUDA_SUCCESS, "begin capture");
    rc = collgen_rank_allreduce_sum(x.c, COLLGEN_DTYPE_BF16, 1, &n, x.in, x.out, 0, x.s);
    RANK_CHECK(rep, rank, rc == COLLGEN_OK, "captured call: %s", collgen_comm_last_error(x.c));
    RANK_CHECK(rep, rank, collgen__cu.cuStreamEndCapture((CUstream)x.s, &g) == CUDA_SUCCESS &&
               collgen__cu.cuGraphInstantiate(&ge, g, 0) == CUDA_SUCCESS, "instantiate");
    for (int i = 0; i < 5; ++i) rank_round(&x, COLLGEN_DTYPE_BF16, n, 0, seed + 500 + 10 * k + i, ge);
    collgen__cu.cuGraphExecDestroy(ge);
    collgen__cu.cuGraphDestroy(g);
  }
  collgen__dev_free(x.c, rank, x.in);
  collgen__dev_free(x.c, rank, x.out);
  collgen__dev_stream_destroy(x.c, rank, x.s);
  collgen_comm_destroy(x.c);
  _exit(0);
}

static void run_ranks(int nranks) {
  collgen_unique_id_t id;
  cr_assert_eq(collgen_get_unique_id(&id), COLLGEN_OK);
  rank_report *rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  cr_assert(rep != MAP_FAILED);
  memset(rep, 0, sizeof *rep);
  const uint64_t seed = tu_rand();
  pid_t pids[8];
  for (int r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) rank_child(rep, &id, nranks, r, seed);
  }
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    cr_assert_eq(waitpid(pids[r], &status, 0), pids[r]);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%d processes: rank %d: %s", nranks,
              r, rep->failed[r] ? rep->why[r] : "died");
  }
  munmap(rep, sizeof *rep);
}

Test(rank, two_processes_allreduce_every_dtype_size_and_graph, .timeout = 600) { run_ranks(2); }

Test(rank, four_processes_mapped_onto_the_gpus, .timeout = 600) { run_ranks(4); }
