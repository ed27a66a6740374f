/*
** bench_model.c -- collgen-bench --model: a tensor-parallel decode step.
**
** LAYERS layers, each a stand-in compute kernel that writes this rank's
** partial sums x (tokens x hidden, bf16), then the collective that ends
** the block: the fused allreduce + residual + RMSNorm, in place. Variants:
** compute only; collgen's fused op; the same with programmatic dependent
** launch (options.pdl; the stand-in signals its dependents at once, as a
** GEMM built for PDL does); collgen_allreduce_sum + the plain
** add+RMSNorm kernel; ncclAllReduce + the plain kernel, on default buffers
** and on NCCL symmetric windows (x and sum in the window). A step is
** captured once per rank into one CUDA graph (STEPS_PER_GRAPH steps per
** graph, so the host's graph launch is not in the time) and replayed;
** time per step = time_calls' median of the slowest rank. The collective
** share of a step is (step - compute only) / step.
**
** The stand-in compute: a row-parallel GEMM at <= 128 tokens is bound by
** reading its weights (hidden x hidden/TP bf16; 8192 at TP 2: 64 MB, ~15 us
** at ~4.4 TB/s, while 128 x 8192 x 4096 x 2 = 8.6 GFLOP is ~9 us at the
** ~990 TFLOP/s of dense bf16), so the kernel streams one weight slab of
** that size per layer (a slab per layer: 32 of them exceed the 60 MB L2, as
** a model's weights do) and ignores the FLOPs. The slabs are zero, so the
** loads only cost time; x[i] is a hash of (layer, rank, i) in [-1, 1),
** the same values on every replay.
**
** Checked before timing, per variant: layer 0 alone (compute, then the
** collective) on a fresh residual, against the CPU reference of the fused
** op (rr_result_ok: the fused op's residual_out bit for bit, the unfused
** ones within baseline_tolerance, normed within the rounding model on
** every rank). A wrong fused op fails the run; a wrong baseline is
** reported and left out (n/a).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define LAYERS 32
#define STEPS_PER_GRAPH 4
#define COMPUTE_BLOCK 512
#define MAX_HIDDEN 8192

static const char compute_src[] =
    "extern \"C\" __global__ void __launch_bounds__(512)\n"
    "standin_gemm(const uint4 *w, unsigned long long nvec, unsigned short *x,\n"
    "             unsigned long long n, unsigned seed) {\n"
    "#if __CUDA_ARCH__ >= 900\n"
    "  /* the next kernel may launch now (it waits for this one to finish): */\n"
    "  /* what a GEMM with programmatic dependent launch does */\n"
    "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
    "#endif\n"
    "  const unsigned long long first = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
    "  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;\n"
    "  unsigned acc = 0;\n"
    "#pragma unroll 4\n"
    "  for (unsigned long long i = first; i < nvec; i += stride) {\n"
    "    const uint4 v = __ldg(w + i);\n"
    "    acc |= v.x | v.y | v.z | v.w;\n"
    "  }\n"
    "  for (unsigned long long i = first; i < n; i += stride) {\n"
    "    unsigned h = (unsigned)i * 2654435761u ^ seed;\n"
    "    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;\n"
    "    const float f = (float)(h & 0xffffu) / 32768.0f - 1.0f + (float)acc; /* acc is 0 */\n"
    "    unsigned short v;\n"
    "    asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(v) : \"f\"(f));\n"
    "    x[i] = v;\n"
    "  }\n"
    "}\n";

enum { V_COMPUTE, V_FUSED, V_PDL, V_UNFUSED, V_NCCL, V_SYM, V_COUNT };
static const char *const variant_name[V_COUNT] = {
    "compute only",       "collgen fused", "collgen fused + PDL",
    "collgen AR + plain", "NCCL + plain",  "NCCL sym + plain"};

typedef struct {
  rr_arg rr; /* first, so rr_result_ok's fn gets the model_arg back */
  collgen_comm_t *pdl_comm; /* the same ranks with options.pdl; NULL if refused */
  int variant;
  char *w[8];  /* LAYERS weight slabs per rank */
  size_t slab; /* bytes of one slab */
  CUfunction fn[8];
  unsigned blocks[8];
} model_arg;

/* The fused op on the communicator whose kernels launch with programmatic
** dependent launch (same devices and contexts, so the streams serve both). */
static void rr_launch_fused_pdl(bench_t *b, void *vp, int iter) {
  collgen_comm_t *plain = b->comm;
  b->comm = ((model_arg *)vp)->pdl_comm;
  rr_launch_fused(b, vp, iter);
  b->comm = plain;
}

/* The collective of a layer (x slot = the layer), per variant. */
static const launch_fn collective[V_COUNT] = {NULL, rr_launch_fused, rr_launch_fused_pdl,
                                              rr_launch_unfused, rr_launch_nccl, rr_launch_nccl};

/* Layer l's stand-in compute on every local rank, into x slot l. */
static void compute(bench_t *b, model_arg *m, int l) {
  FOR_LOCAL(b, r) {
    const void *w = m->w[r] + (size_t)l * m->slab;
    void *x = m->rr.x[r] + (size_t)l * m->rr.slot;
    unsigned long long nvec = m->slab / 16, n = (unsigned long long)(m->rr.rows * m->rr.cols);
    unsigned seed = (unsigned)l * 0x9e3779b9u + (unsigned)r * 0x85ebca6bu + 1u;
    void *args[] = {&w, &nvec, &x, &n, &seed};
    CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
    CU(collgen__cu.cuLaunchKernel(m->fn[r], m->blocks[r], 1, 1, COMPUTE_BLOCK, 1, 1, 0,
                                  (CUstream)b->streams[r], args, NULL));
  }
}

/* Layer `iter`: compute, then the variant's collective. */
static void layer(bench_t *b, void *vp, int iter) {
  model_arg *m = vp;
  compute(b, m, iter);
  if (collective[m->variant]) collective[m->variant](b, &m->rr, iter);
}

static void step(bench_t *b, void *vp, int iter) {
  (void)iter;
  for (int l = 0; l < LAYERS; ++l) layer(b, vp, l);
}

/* Checks variant v on m (see the top); 1 when right. */
static int variant_ok(bench_t *b, model_arg *m, int v) {
  m->variant = v;
  if (v == V_COMPUTE) return 1;
  compute(b, m, 0); /* x slot 0 as layer 0 writes it: rr_result_ok reads it first */
  sync_all(b);
  return rr_result_ok(b, &m->rr, layer, variant_name[v], v == V_FUSED || v == V_PDL, 0);
}

/* One point: every variant checked, then timed; prints a row. */
static void model_point(bench_t *b, model_arg *m, int64_t tokens, int64_t hidden, uint64_t *seed) {
  const int g = group_of(b);
  double t[V_COUNT];
  model_arg sm;
  sym_buf w;
  m->slab = (size_t)hidden * (size_t)(hidden / g) * 2;
  rr_alloc(b, &m->rr, tokens, hidden, LAYERS, seed);
  sm = *m;
  const int sym = rr_sym_attach(b, &m->rr, &sm.rr, &w) == 0;
  for (int v = 0; v < V_COUNT; ++v) {
    model_arg *a = v == V_SYM ? &sm : m;
    t[v] = NAN;
    if ((v == V_SYM && !sym) || (v == V_PDL && !m->pdl_comm)) continue;
    if (!variant_ok(b, a, v)) {
      if (v == V_FUSED || v == V_PDL) exit(1);
      fprintf(stderr, "collgen-bench: model baseline %s is wrong; left out (n/a)\n", variant_name[v]);
      continue;
    }
    t[v] = time_calls(b, step, a, STEPS_PER_GRAPH, 1);
  }
  double share[V_COUNT];
  for (int v = 0; v < V_COUNT; ++v) share[v] = (t[v] - t[V_COMPUTE]) / t[v];
  const double best = fmin(share[V_NCCL], share[V_SYM]); /* fmin ignores a NaN side */
  printf("%6lld %6lld", (long long)tokens, (long long)hidden);
  for (int v = 0; v < V_COUNT; ++v) print_us(10, t[v]);
  for (int v = V_FUSED; v < V_COUNT; ++v) {
    if (isnan(share[v])) printf("%8s", "n/a");
    else printf("%7.1f%%", 100.0 * share[v]);
  }
  printf("%9.2f\n", best / share[V_FUSED]);
  fflush(stdout);
  if (b->csv) {
    const size_t bytes = (size_t)(tokens * hidden) * 2;
    fprintf(b->csv, "decode_step_%d_layers,bf16,%d,%d,%zu,%lld,%lld,,%.3f,,%.3f,,,,,%.3f,,%.3f,%.3f\n",
            LAYERS, b->n, g, bytes, (long long)tokens, (long long)hidden, t[V_FUSED], t[V_NCCL],
            t[V_UNFUSED], t[V_SYM], fmin(t[V_NCCL], t[V_SYM]) / t[V_FUSED]);
    fprintf(b->csv, "decode_step_compute_only,bf16,%d,%d,%zu,%lld,%lld,,%.3f,,,,,,,,,,\n", b->n, g,
            bytes, (long long)tokens, (long long)hidden, t[V_COMPUTE]);
  }
  if (sym) sym_free(b, &w);
  rr_free(b, &m->rr);
}

void bench_model(bench_t *b) {
  static const int64_t tokens_list[] = {1, 8, 32, 128};
  static const int64_t hidden_list[] = {4096, 8192};
  const int g = group_of(b);
  printf("\ndecode step: %d layers of (stand-in GEMM: hidden x hidden/%d bf16 weights streamed; "
         "then the collective at tokens x hidden, in place), one CUDA graph per rank, us per "
         "step (median, slowest rank); share = (step - compute only) / step; x_share = best NCCL "
         "share / collgen fused share\n", LAYERS, g);
  if (b->dt != COLLGEN_DTYPE_BF16) {
    printf("model: bf16 only (run without --dtype)\n");
    return;
  }
  model_arg m;
  memset(&m, 0, sizeof m);
  static const char *const names[] = {"standin_gemm"};
  CUfunction *const fns[] = {m.fn};
  bench_load_kernels(b, compute_src, "standin_gemm.cu", 1, names, fns);
  const size_t max_slab = (size_t)MAX_HIDDEN * (size_t)(MAX_HIDDEN / g) * 2;
  FOR_LOCAL(b, r) {
    int sms = 0;
    CU(collgen__cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                        b->comm->cudev[r]));
    m.blocks[r] = 4u * (unsigned)sms;
    if (collgen__dev_alloc(b->comm, r, max_slab * LAYERS, (void **)&m.w[r]) != COLLGEN_OK ||
        collgen__dev_fill(b->comm, r, m.w[r], 0, max_slab * LAYERS) != COLLGEN_OK)
      die("model weights", collgen_comm_last_error(b->comm));
  }
  printf("%6s %6s", "tokens", "hidden");
  static const char *const column[V_COUNT] = {"compute", "fused", "fus_pdl", "unfused", "nccl",
                                              "sym"};
  for (int v = 0; v < V_COUNT; ++v) printf("%10s", column[v]);
  printf("%8s%8s%8s%8s%8s%9s\n", "sh_fus", "sh_pdl", "sh_unf", "sh_nccl", "sh_sym", "x_share");
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.pdl = 1;
  if (b->comm->self >= 0 ||
      collgen_comm_create(&m.pdl_comm, b->n, b->comm->devices, &o) != COLLGEN_OK) {
    printf("model: the PDL variant is n/a: %s\n",
           b->comm->self >= 0 ? "not in the --processes mode" : collgen_last_error());
    m.pdl_comm = NULL;
  }
  uint64_t seed = 0x5eed0ull + (uint64_t)getpid();
  for (size_t hi = 0; hi < sizeof hidden_list / sizeof hidden_list[0]; ++hi)
    for (size_t ti = 0; ti < sizeof tokens_list / sizeof tokens_list[0]; ++ti)
      model_point(b, &m, tokens_list[ti], hidden_list[hi], &seed);
  FOR_LOCAL(b, r) collgen__dev_free(b->comm, r, m.w[r]);
  if (m.pdl_comm) collgen_comm_destroy(m.pdl_comm);
}
