/*
** bench_floor.c -- collgen-bench --floor: the floor of a cross-GPU kernel.
**
** A do-nothing kernel of one thread per GPU (ranks 0 and 1) writes a flag
** into the peer's memory over P2P (st.release.sys) and waits for the
** peer's flag (ld.acquire.sys). Flags carry an epoch that each GPU counts
** in its own memory, so graph replays need no reset; a wait gives up after
** FLOOR_TIMEOUT_NS (%globaltimer), records it, and every later kernel of
** that GPU returns at once, so a lost peer costs seconds, not a hang.
** FLOOR_BATCH kernels per rank are captured in one CUDA graph and replayed
** (time_calls: slowest rank, median): the time per kernel is the floor of
** one exchange. Then collgen's small allreduce (1 KB, 8 KB, graph replay,
** checked first) is reported as a multiple of that floor. Needs 2 GPUs.
*/
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define FLOOR_BATCH 1000
#define FLOOR_TIMEOUT_NS 1000000000ull

/* mine[0]: the flag the peer writes; mine[1]: this GPU's epoch; mine[2]:
** 1 after a timed-out wait. */
static const char flag_src[] =
    "extern \"C\" __global__ void flag_exchange(unsigned *mine, unsigned *peer_flag,\n"
    "                                           unsigned long long timeout_ns) {\n"
    "  if (*(volatile unsigned *)&mine[2]) return;\n"
    "  const unsigned e = mine[1] + 1;\n"
    "  mine[1] = e;\n"
    "  asm volatile(\"st.release.sys.global.u32 [%0], %1;\" :: \"l\"(peer_flag), \"r\"(e) : \"memory\");\n"
    "  unsigned long long t0, t;\n"
    "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
    "  do {\n"
    "    unsigned v;\n"
    "    asm volatile(\"ld.acquire.sys.global.u32 %0, [%1];\" : \"=r\"(v) : \"l\"(mine) : \"memory\");\n"
    "    if ((int)(v - e) >= 0) return;\n"
    "    asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t));\n"
    "  } while (t - t0 < timeout_ns);\n"
    "  *(volatile unsigned *)&mine[2] = 1u;\n"
    "}\n";

typedef struct {
  CUfunction fn[8];
  unsigned *word[2]; /* ranks 0 and 1: three words each */
} floor_arg;

static void launch_exchange(bench_t *b, void *vp, int iter) {
  floor_arg *f = vp;
  (void)iter;
  for (int r = 0; r < 2; ++r) {
    unsigned *peer_flag = f->word[1 - r];
    unsigned long long timeout = FLOOR_TIMEOUT_NS;
    void *args[] = {&f->word[r], &peer_flag, &timeout};
    CU(collgen__cu.cuCtxSetCurrent(b->comm->ctx[r]));
    CU(collgen__cu.cuLaunchKernel(f->fn[r], 1, 1, 1, 1, 1, 1, 0, (CUstream)b->streams[r], args,
                                  NULL));
  }
}

void bench_floor(bench_t *b) {
  printf("\nfloor of a cross-GPU kernel (one thread per GPU: one flag write to the peer, one "
         "flag wait; %d kernels per CUDA graph, graph replay, slowest rank)\n", FLOOR_BATCH);
  if (b->n < 2) {
    printf("floor: needs 2 GPUs\n");
    return;
  }
  if (b->comm->self >= 0 || !b->comm->p2p[0][1] || !b->comm->p2p[1][0]) {
    printf("floor: needs P2P between GPUs 0 and 1 in this process\n");
    return;
  }
  floor_arg f;
  memset(&f, 0, sizeof f);
  static const char *const names[] = {"flag_exchange"};
  CUfunction *const fns[] = {f.fn};
  bench_load_kernels(b, flag_src, "flag_exchange.cu", 1, names, fns);
  for (int r = 0; r < 2; ++r) {
    if (collgen__dev_alloc(b->comm, r, 256, (void **)&f.word[r]) != COLLGEN_OK ||
        collgen__dev_fill(b->comm, r, f.word[r], 0, 256) != COLLGEN_OK)
      die("alloc", collgen_comm_last_error(b->comm));
  }
  const double floor_us = time_calls(b, launch_exchange, &f, FLOOR_BATCH, 1);
  unsigned w[2][3];
  for (int r = 0; r < 2; ++r) collgen__dev_download(b->comm, r, w[r], f.word[r], sizeof w[r]);
  for (int r = 0; r < 2; ++r) collgen__dev_free(b->comm, r, f.word[r]);
  if (w[0][2] || w[1][2] || w[0][1] != w[1][1]) {
    printf("floor: a flag wait timed out (GPU 0: epoch %u%s, GPU 1: epoch %u%s); no floor\n",
           w[0][1], w[0][2] ? " timed out" : "", w[1][1], w[1][2] ? " timed out" : "");
    return;
  }
  printf("floor: %.2f us per exchange (%u exchanges, every flag arrived)\n", floor_us, w[0][1]);
  if (b->csv)
    fprintf(b->csv, "flag_exchange_floor,,%d,2,4,0,0,,%.3f,,,,,,,,,,\n", b->n, floor_us);
  static const size_t sizes[] = {1024, 8192};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    const double us = collgen_allreduce_graph_us(b, sizes[i]);
    printf("collgen allreduce_sum %s %zu bytes, graph: %.2f us = %.2f x the floor\n",
           collgen__dtype_name(b->dt), sizes[i], us, us / floor_us);
  }
}
