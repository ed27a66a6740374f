/*
** bench_processes.c -- collgen-bench --processes N: the one-process-per-GPU
** mode against the one-process mode and against NCCL from ncclCommInitRank,
** in one run.
**
** The parent never initializes CUDA, so forking stays safe: a child counts
** the GPUs (collgen__gpu_count_in_child, as the demo does); a second child times the one-process communicator
** (collgen_comm_create, N ranks round robin on the GPUs); then N rank
** processes each create their rank (collgen_comm_init_rank), time their
** collgen_rank_* calls and, when every rank has a GPU of its own (NCCL
** refuses two ranks on one GPU), NCCL from ncclCommInitRank.
**
** Points: allreduce_sum bf16 at 8 KB, 256 KB, 16 MB and 256 MB, and
** allreduce_residual_rmsnorm 8 x 8192 in place (NCCL: ncclAllReduce, then
** the plain residual add + RMSNorm kernel). Every path is checked against
** the CPU reference before it is timed: collgen bit for bit, NCCL within
** baseline_tolerance. Every process makes every rank's inputs from the same
** seeds, so it checks its own outputs without the others' buffers. Timing
** is time_calls' (graph replay, median of the trials); the rank processes
** meet at a shared-memory barrier before each batch, and a point's time is
** the slowest rank's.
*/
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "gpu_probe.h"

#define NPOINTS 5
#define MEET_MS 120000.0 /* bound on a rank reaching the barrier or the NCCL id */

/* rows == 0: an allreduce of `bytes`; else the fused op rows x cols. */
static const struct {
  size_t bytes;
  int64_t rows, cols;
} points[NPOINTS] = {{8192, 0, 0}, {256u << 10, 0, 0}, {16u << 20, 0, 0}, {256u << 20, 0, 0},
                     {0, 8, 8192}};

/* What the processes share (one anonymous shared mapping). */
typedef struct {
  unsigned arrived; /* barrier arrivals over all rounds */
  int gpus;
  int nccl_ready;
  ncclUniqueId nccl_id;
  double one[NPOINTS];     /* one-process collgen, us per call */
  double rank[8][NPOINTS]; /* each rank process's collgen */
  double nccl[8][NPOINTS]; /* each rank process's NCCL; NaN when not run */
} shared_t;

static shared_t *sh;
static int nprocs;     /* processes meeting at the barrier */
static unsigned rounds;/* barriers this process has passed */

/* Waits until every rank process has arrived here as often as this one. */
static void barrier(void) {
  const unsigned target = ++rounds * (unsigned)nprocs;
  __atomic_add_fetch(&sh->arrived, 1, __ATOMIC_SEQ_CST);
  const double end = collgen__now_ms() + MEET_MS;
  while (__atomic_load_n(&sh->arrived, __ATOMIC_SEQ_CST) < target) {
    if (collgen__now_ms() > end) die("--processes", "a rank did not reach the barrier in 120 s");
    sched_yield();
  }
}

/* Rank r's input `which` (0: allreduce input or x; 1: residual; 2: gamma),
** n values, from a seed every process computes alike. */
static void *seeded(const bench_t *b, int r, int which, int64_t n) {
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(r + 1) + (uint64_t)which;
  void *p = malloc((size_t)n * (size_t)esize_of(b));
  if (!p) die("inputs", "out of memory");
  collgen__ref_fill_random(b->dt, p, n, &seed);
  return p;
}

/* Allocates rank r's arena of nslots slots and fills every slot with the
** `bytes` of host (the timed calls rotate through the slots). */
static char *arena_of(bench_t *b, int r, size_t slot, int nslots, const void *host, size_t bytes) {
  char *p = NULL;
  if (collgen__dev_alloc(b->comm, r, slot * (size_t)nslots, (void **)&p) != COLLGEN_OK)
    die("alloc", collgen_comm_last_error(b->comm));
  for (int k = 0; k < nslots; ++k)
    if (collgen__dev_upload(b->comm, r, p + (size_t)k * slot, host, bytes) != COLLGEN_OK)
      die("upload", collgen_comm_last_error(b->comm));
  return p;
}

/* Slots of `bytes` (rounded to 4 KB) filling ARENA_MIN, at least 2. */
static int slots_for(size_t bytes, size_t *slot) {
  *slot = (bytes + 4095) & ~(size_t)4095;
  size_t n = ARENA_MIN / *slot;
  return n < 2 ? 2 : n > 256 ? 256 : (int)n;
}

/* ---- allreduce_sum ------------------------------------------------------ */

typedef struct {
  int64_t shape[1];
  size_t slot;
  int nslots;
  char *in[8], *out[8];
} ar_t;

static void launch_ar(bench_t *b, void *vp, int iter) {
  ar_t *a = vp;
  const size_t off = (size_t)(iter % a->nslots) * a->slot;
  const int me = b->comm->self;
  int rc;
  if (me >= 0) {
    rc = collgen_rank_allreduce_sum(b->comm, b->dt, 1, a->shape, a->in[me] + off,
                                    a->out[me] + off, 0, b->streams[me]);
  } else {
    const void *in[8];
    void *out[8];
    const int64_t *shapes[8];
    for (int r = 0; r < b->n; ++r) {
      in[r] = a->in[r] + off;
      out[r] = a->out[r] + off;
      shapes[r] = a->shape;
    }
    rc = collgen_allreduce_sum(b->comm, b->dt, 1, shapes, in, out, 0, b->streams);
  }
  if (rc != COLLGEN_OK) die("allreduce_sum", collgen_comm_last_error(b->comm));
}

static void launch_nccl_ar(bench_t *b, void *vp, int iter) {
  ar_t *a = vp;
  const size_t off = (size_t)(iter % a->nslots) * a->slot;
  NC(ncclGroupStart());
  FOR_LOCAL(b, r)
    NC(ncclAllReduce(a->in[r] + off, a->out[r] + off, (size_t)a->shape[0], nccl_type(b->dt),
                     ncclSum, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
}

/* 1 when collgen's group of every rank runs its own kernels (their bits are
** the reference's); 0 on NCCL ($COLLGEN_TRANSPORT=nccl, or simulated
** hosts), whose sums round differently (docs/multinode.md#bits) and are
** checked within the NCCL baseline's tolerance. */
static int on_p2p(bench_t *b) {
  collgen_comm_info_t info;
  return collgen_comm_info(b->comm, &info) != COLLGEN_OK ||
         info.route[b->n - 1][0] != COLLGEN_TRANSPORT_NCCL;
}

/* Runs fn once into poisoned outputs and checks each local rank's against
** want; dies naming the rank otherwise. */
static void check_ar(bench_t *b, ar_t *a, launch_fn fn, const char *who, const void *want,
                     int exact) {
  const size_t bytes = (size_t)a->shape[0] * (size_t)esize_of(b);
  void *got = malloc(bytes);
  if (!got) die("check", "out of memory");
  FOR_LOCAL(b, r) collgen__dev_fill(b->comm, r, a->out[r], 0xff, bytes);
  fn(b, a, 0);
  sync_all(b);
  FOR_LOCAL(b, r) {
    collgen__dev_download(b->comm, r, got, a->out[r], bytes);
    if (!values_match(b, got, want, a->shape[0], exact)) {
      fprintf(stderr, "collgen-bench: %s allreduce %zu bytes: rank %d differs from the CPU "
                      "reference\n", who, bytes, r);
      exit(1);
    }
  }
  free(got);
}

static void point_allreduce(bench_t *b, size_t bytes, double *us, double *nccl_us) {
  ar_t a;
  memset(&a, 0, sizeof a);
  a.shape[0] = (int64_t)(bytes / (size_t)esize_of(b));
  a.nslots = slots_for(bytes, &a.slot);
  void *host[8], *want = malloc(bytes);
  if (!want) die("inputs", "out of memory");
  for (int r = 0; r < b->n; ++r) host[r] = seeded(b, r, 0, a.shape[0]);
  collgen__ref_allreduce(b->dt, a.shape[0], b->n, (const void *const *)host, want);
  FOR_LOCAL(b, r) {
    a.in[r] = arena_of(b, r, a.slot, a.nslots, host[r], bytes);
    if (collgen__dev_alloc(b->comm, r, a.slot * (size_t)a.nslots, (void **)&a.out[r]) != COLLGEN_OK)
      die("alloc", collgen_comm_last_error(b->comm));
  }
  const int batch = batch_for(bytes);
  check_ar(b, &a, launch_ar, "collgen", want, on_p2p(b));
  *us = time_calls(b, launch_ar, &a, batch, 1);
  if (nccl_us) {
    check_ar(b, &a, launch_nccl_ar, "NCCL", want, 0);
    *nccl_us = time_calls(b, launch_nccl_ar, &a, batch, 1);
  }
  FOR_LOCAL(b, r) {
    collgen__dev_free(b->comm, r, a.in[r]);
    collgen__dev_free(b->comm, r, a.out[r]);
  }
  for (int r = 0; r < b->n; ++r) free(host[r]);
  free(want);
}

/* ---- allreduce_residual_rmsnorm ---------------------------------------- */

typedef struct {
  int64_t shape[2];
  size_t slot;
  int nslots;
  char *x[8];
  void *res[8], *normed[8], *gamma[8], *sum[8];
} rr_t;

/* In place: residual_out is residual_in, as in a decoder. */
static void launch_rr(bench_t *b, void *vp, int iter) {
  rr_t *a = vp;
  const size_t off = (size_t)(iter % a->nslots) * a->slot;
  const int me = b->comm->self;
  int rc;
  if (me >= 0) {
    rc = collgen_rank_allreduce_residual_rmsnorm(b->comm, b->dt, 2, a->shape, a->x[me] + off,
                                                 a->res[me], a->normed[me], a->res[me],
                                                 a->gamma[me], 1e-6f, 1.0f, 0, b->streams[me]);
  } else {
    const void *x[8];
    const int64_t *shapes[8];
    for (int r = 0; r < b->n; ++r) {
      x[r] = a->x[r] + off;
      shapes[r] = a->shape;
    }
    rc = collgen_allreduce_residual_rmsnorm(b->comm, b->dt, 2, shapes, x,
                                            (const void *const *)a->res, a->normed, a->res,
                                            (const void *const *)a->gamma, 1e-6f, 1.0f, 0,
                                            b->streams);
  }
  if (rc != COLLGEN_OK) die("allreduce_residual_rmsnorm", collgen_comm_last_error(b->comm));
}

static void launch_nccl_rr(bench_t *b, void *vp, int iter) {
  rr_t *a = vp;
  const size_t off = (size_t)(iter % a->nslots) * a->slot;
  NC(ncclGroupStart());
  FOR_LOCAL(b, r)
    NC(ncclAllReduce(a->x[r] + off, a->sum[r], (size_t)(a->shape[0] * a->shape[1]),
                     nccl_type(b->dt), ncclSum, b->nccl[r], (cudaStream_t)b->streams[r]));
  NC(ncclGroupEnd());
  FOR_LOCAL(b, r)
    launch_plain_add_rmsnorm(b, r, a->sum[r], a->res[r], a->gamma[r], a->normed[r], a->shape[0],
                             a->shape[1]);
}

/* Runs fn once on the seeded residual with poisoned normed outputs and
** checks each local rank: residual_out against want_r (exact or within
** tolerance), normed by normed_rows_ok. Dies naming the rank otherwise. */
static void check_rr(bench_t *b, rr_t *a, launch_fn fn, const char *who, const void *res,
                     const void *gamma, const void *want_r, int exact) {
  const int64_t n = a->shape[0] * a->shape[1];
  const size_t bytes = (size_t)n * (size_t)esize_of(b);
  void *got = malloc(bytes);
  if (!got) die("check", "out of memory");
  FOR_LOCAL(b, r) {
    collgen__dev_upload(b->comm, r, a->res[r], res, bytes);
    collgen__dev_fill(b->comm, r, a->normed[r], 0xff, bytes);
  }
  fn(b, a, 0);
  sync_all(b);
  FOR_LOCAL(b, r) {
    int64_t bad_row = -1;
    collgen__dev_download(b->comm, r, got, a->res[r], bytes);
    int ok = values_match(b, got, want_r, n, exact);
    collgen__dev_download(b->comm, r, got, a->normed[r], bytes);
    if (!ok || !normed_rows_ok(b, a->shape[0], a->shape[1], got, want_r, gamma, &bad_row)) {
      fprintf(stderr, "collgen-bench: %s residual_rmsnorm %lldx%lld: rank %d's %s differs from "
                      "the CPU reference\n", who, (long long)a->shape[0], (long long)a->shape[1],
              r, ok ? "normed" : "residual_out");
      exit(1);
    }
  }
  free(got);
}

static void point_fused(bench_t *b, int64_t rows, int64_t cols, double *us, double *nccl_us) {
  rr_t a;
  memset(&a, 0, sizeof a);
  a.shape[0] = rows;
  a.shape[1] = cols;
  const int64_t n = rows * cols;
  const size_t bytes = (size_t)n * (size_t)esize_of(b), gb = (size_t)cols * (size_t)esize_of(b);
  a.nslots = slots_for(bytes, &a.slot);
  void *hx[8], *res = seeded(b, 0, 1, n), *gamma = seeded(b, 0, 2, cols);
  void *want_r = malloc(bytes), *want_n = malloc(bytes);
  if (!want_r || !want_n) die("inputs", "out of memory");
  for (int r = 0; r < b->n; ++r) hx[r] = seeded(b, r, 0, n);
  collgen__ref_allreduce_residual_rmsnorm(b->dt, b->n, rows, cols, (const void *const *)hx, res,
                                          gamma, 1e-6f, 1.0f, want_n, want_r);
  FOR_LOCAL(b, r) {
    a.x[r] = arena_of(b, r, a.slot, a.nslots, hx[r], bytes);
    if (collgen__dev_alloc(b->comm, r, bytes, &a.res[r]) != COLLGEN_OK ||
        collgen__dev_alloc(b->comm, r, bytes, &a.normed[r]) != COLLGEN_OK ||
        collgen__dev_alloc(b->comm, r, bytes, &a.sum[r]) != COLLGEN_OK ||
        collgen__dev_alloc(b->comm, r, gb, &a.gamma[r]) != COLLGEN_OK ||
        collgen__dev_upload(b->comm, r, a.gamma[r], gamma, gb) != COLLGEN_OK)
      die("alloc", collgen_comm_last_error(b->comm));
  }
  const int batch = batch_for(bytes);
  check_rr(b, &a, launch_rr, "collgen", res, gamma, want_r, on_p2p(b));
  *us = time_calls(b, launch_rr, &a, batch, 1);
  if (nccl_us) {
    check_rr(b, &a, launch_nccl_rr, "NCCL", res, gamma, want_r, 0);
    *nccl_us = time_calls(b, launch_nccl_rr, &a, batch, 1);
  }
  FOR_LOCAL(b, r) {
    collgen__dev_free(b->comm, r, a.x[r]);
    collgen__dev_free(b->comm, r, a.res[r]);
    collgen__dev_free(b->comm, r, a.normed[r]);
    collgen__dev_free(b->comm, r, a.sum[r]);
    collgen__dev_free(b->comm, r, a.gamma[r]);
  }
  for (int r = 0; r < b->n; ++r) free(hx[r]);
  free(res);
  free(gamma);
  free(want_r);
  free(want_n);
}

/* ---- processes ---------------------------------------------------------- */

/* Every point on b: collgen into us[], NCCL into nccl_us[] unless NULL. */
static void run_points(bench_t *b, double *us, double *nccl_us) {
  for (int p = 0; p < NPOINTS; ++p) {
    if (points[p].rows)
      point_fused(b, points[p].rows, points[p].cols, &us[p], nccl_us ? &nccl_us[p] : NULL);
    else
      point_allreduce(b, points[p].bytes, &us[p], nccl_us ? &nccl_us[p] : NULL);
  }
}

static void load_driver(void) {
  char err[512];
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) die("driver", err);
}

/* Child: the one-process communicator over n ranks, round robin on the
** GPUs as the rank processes are. */
static int one_process(int n) {
  load_driver();
  int devs[8];
  for (int r = 0; r < n; ++r) devs[r] = r % sh->gpus;
  bench_t b;
  memset(&b, 0, sizeof b);
  b.n = n;
  b.dt = COLLGEN_DTYPE_BF16;
  /* $COLLGEN_TRANSPORT is for the rank processes; this one runs on P2P */
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.allow_shared_devices = n > sh->gpus; /* as the rank processes share them */
  o.transport = COLLGEN_TRANSPORT_P2P;
  if (collgen_comm_create(&b.comm, n, devs, &o) != COLLGEN_OK) die("comm", collgen_last_error());
  bench_prepare_ranks(&b);
  run_points(&b, sh->one, NULL);
  collgen_comm_destroy(b.comm);
  return 0;
}

/* Rank r's NCCL communicator: rank 0 makes the id, the others wait for it. */
static void nccl_join(bench_t *b, int r) {
  if (r == 0) {
    NC(ncclGetUniqueId(&sh->nccl_id));
    __atomic_store_n(&sh->nccl_ready, 1, __ATOMIC_SEQ_CST);
  }
  const double end = collgen__now_ms() + MEET_MS;
  while (!__atomic_load_n(&sh->nccl_ready, __ATOMIC_SEQ_CST)) {
    if (collgen__now_ms() > end) die("NCCL", "rank 0's unique id did not come in 120 s");
    sched_yield();
  }
  if (cudaSetDevice(r % sh->gpus) != cudaSuccess) die("cudaSetDevice", "failed");
  NC(ncclCommInitRank(&b->nccl[r], b->n, sh->nccl_id, r));
}

/* Child: rank r of n in its own process. */
static int rank_process(const collgen_unique_id_t *id, int n, int r) {
  load_driver();
  nprocs = n;
  bench_t b;
  memset(&b, 0, sizeof b);
  b.n = n;
  b.dt = COLLGEN_DTYPE_BF16;
  b.align = barrier;
  if (collgen_comm_init_rank(&b.comm, n, id, r, r % sh->gpus, NULL) != COLLGEN_OK)
    die("collgen_comm_init_rank", collgen_last_error());
  bench_prepare_ranks(&b);
  const int nccl = n <= sh->gpus; /* NCCL refuses two ranks on one GPU */
  if (nccl) nccl_join(&b, r);
  run_points(&b, sh->rank[r], nccl ? sh->nccl[r] : NULL);
  if (nccl) ncclCommDestroy(b.nccl[r]);
  collgen_comm_destroy(b.comm);
  return 0;
}

/* Forks fn's process; returns its pid. */
static pid_t spawn(int (*fn)(const collgen_unique_id_t *, int, int), const collgen_unique_id_t *id,
                   int n, int r) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) die("fork", "failed");
  if (pid == 0) _exit(fn(id, n, r));
  return pid;
}

static int one_process_fn(const collgen_unique_id_t *id, int n, int r) {
  (void)id, (void)r;
  return one_process(n);
}

/* Waits for the pids; when one fails, kills the rest. 0 if all exited 0. */
static int wait_all(pid_t *pids, int n) {
  int failed = 0, left = n;
  while (left > 0) {
    int st = 0;
    pid_t p = wait(&st);
    if (p < 0) break;
    --left;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      if (!failed)
        for (int k = 0; k < n; ++k) kill(pids[k], SIGKILL);
      failed = 1;
    }
  }
  return failed;
}

/* The slowest rank's time of point p. */
static double slowest(const double (*t)[NPOINTS], int n, int p) {
  double m = 0;
  for (int r = 0; r < n; ++r) m = t[r][p] > m || isnan(t[r][p]) ? t[r][p] : m;
  return m;
}

int bench_processes(int n) {
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) die("mmap", "failed");
  memset(sh, 0, sizeof *sh);
  for (int r = 0; r < 8; ++r)
    for (int p = 0; p < NPOINTS; ++p) sh->nccl[r][p] = NAN;
  setenv("NCCL_NVLS_ENABLE", "0", 1); /* never multicast */
  pid_t pids[8];
  char why[600];
  sh->gpus = collgen__gpu_count_in_child(why, sizeof why);
  if (sh->gpus < 1) die("--processes: no GPU found", why);
  printf("collgen-bench --processes %d: %d ranks on %d GPU(s), bf16, graph replay, us per call "
         "(median of the trials, slowest rank)%s\n", n, n, sh->gpus,
         n > sh->gpus ? "; ranks share GPUs, so NCCL (which refuses that) is skipped and the "
                        "times say nothing about NVLink" : "");
  fflush(stdout);
  pids[0] = spawn(one_process_fn, NULL, n, 0);
  if (wait_all(pids, 1)) die("--processes", "the one-process run failed (see above)");
  collgen_unique_id_t id;
  if (collgen_get_unique_id(&id) != COLLGEN_OK) die("collgen_get_unique_id", collgen_last_error());
  for (int r = 0; r < n; ++r) pids[r] = spawn(rank_process, &id, n, r);
  if (wait_all(pids, n)) die("--processes", "a rank process failed (see above)");
  printf("%-22s %12s %12s %9s %12s %9s\n", "point", "one-process", "per-process", "per/one",
         "NCCL rank", "NCCL/per");
  for (int p = 0; p < NPOINTS; ++p) {
    char name[64];
    if (points[p].rows)
      snprintf(name, sizeof name, "fused %lldx%lld", (long long)points[p].rows,
               (long long)points[p].cols);
    else
      snprintf(name, sizeof name, "allreduce %zu KB", points[p].bytes >> 10);
    const double per = slowest((const double (*)[NPOINTS])sh->rank, n, p);
    const double nc = slowest((const double (*)[NPOINTS])sh->nccl, n, p);
    printf("%-22s %12.2f %12.2f %9.3f %12.2f %9.2f\n", name, sh->one[p], per, per / sh->one[p],
           nc, nc / per);
  }
  printf("\ncollgen-bench: done (all results checked against the CPU reference)\n");
  munmap(sh, sizeof *sh);
  return 0;
}
