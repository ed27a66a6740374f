/*
** fuzz_op_validation.c -- libFuzzer harness for the validation of every
** public op, on the stand-in driver (tests/fake_cuda.c) with NVRTC made
** unloadable: the input bytes become a call (op or the FP8 variant, dtype,
** tensor rank, shapes, raw pointer values, group size, eps, weight_offset,
** FP8 mode and static scale) on a 4-rank
** communicator. Nothing may crash, overflow or leak; the status must be a
** known one with a message; nothing may be launched or copied (launch_mask
** names no rank, and a call that passes validation stops at "no NVRTC").
*/
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collgen.h"
#include "fake_cuda.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RANKS 4

static collgen_comm_t *comm;
static fake_cuda_stats_t *stats;
static collgen_stream_t streams[RANKS]; /* the stand-in driver accepts NULL streams */

static void init(void) {
  setenv("COLLGEN_CUDA_LIBRARY", FAKE_CUDA_PATH, 1);
  setenv("COLLGEN_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
  setenv("FAKE_CUDA_DEVICES", "4", 1);
  void *lib = dlopen(FAKE_CUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!lib) abort();
  fake_cuda_stats_t *(*get)(void) = (fake_cuda_stats_t * (*)(void)) dlsym(lib, "fake_cuda_stats");
  if (!get) abort();
  stats = get();
  int devices[RANKS] = {0, 1, 2, 3};
  collgen_comm_options_t o;
  collgen_comm_options_init(&o);
  o.launch_mask = 1u << 31; /* no rank: nothing is ever launched or copied */
  if (collgen_comm_create(&comm, RANKS, devices, &o) != COLLGEN_OK) abort();
}

/* Reads n bytes (zero past the end) as an unsigned integer. */
static uint64_t take(const uint8_t **p, const uint8_t *end, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | (*p < end ? *(*p)++ : 0);
  return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!comm) init();
  const uint8_t *p = data, *end = data + size;
  /* 3: allreduce_residual_rmsnorm_fp8, 4: broadcast, 5: all_gather, 6: reduce_scatter_sum,
  ** 7, 8: reduce_scatter_rmsnorm(_fp8), 9: scatter */
  int op = (int)(take(&p, end, 1) % 10);
  collgen_dtype_t dtype = (collgen_dtype_t)((int)(take(&p, end, 1) % 5) - 1);
  int trank = (int)(take(&p, end, 1) % 10);
  int group = (int)(take(&p, end, 1) % 10) - 1;
  int64_t dims[RANKS][8];
  const int64_t *shapes[RANKS];
  for (int r = 0; r < RANKS; ++r) {
    for (int k = 0; k < 8; ++k) {
      /* mostly small sizes, sometimes any 64-bit value */
      uint64_t sel = take(&p, end, 1);
      dims[r][k] = sel < 200 ? (int64_t)(sel % 9) * (int64_t)(1 + take(&p, end, 1))
                             : (int64_t)take(&p, end, 8);
    }
    shapes[r] = (take(&p, end, 1) == 255) ? NULL : dims[r];
  }
  void *ptr[6][RANKS];
  for (int k = 0; k < 6; ++k)
    for (int r = 0; r < RANKS; ++r) {
      /* small offsets into one "arena" address make overlaps likely */
      uint64_t sel = take(&p, end, 1);
      ptr[k][r] = sel == 0 ? NULL
                  : sel < 200 ? (void *)(uintptr_t)(0x100000000ull + take(&p, end, 2) * 2)
                              : (void *)(uintptr_t)take(&p, end, 8);
    }
  uint32_t eb = (uint32_t)take(&p, end, 4), wb = (uint32_t)take(&p, end, 4);
  float eps, wo, static_scale;
  memcpy(&eps, &eb, 4);
  memcpy(&wo, &wb, 4);
  collgen_fp8_mode_t mode = (collgen_fp8_mode_t)((int)(take(&p, end, 1) % 5) - 1);
  uint32_t sb = (uint32_t)take(&p, end, 4);
  memcpy(&static_scale, &sb, 4);
  stats->launches = stats->copies = 0;
  int rc;
  if (op == 0)
    rc = collgen_allreduce_sum(comm, dtype, trank, shapes, (const void *const *)ptr[0],
                               ptr[1], group, streams);
  else if (op == 1)
    rc = collgen_allgather_rmsnorm(comm, dtype, trank, shapes, (const void *const *)ptr[0],
                                   ptr[1], ptr[2], (const void *const *)ptr[3], eps, wo, group,
                                   streams);
  else if (op == 2)
    rc = collgen_allreduce_residual_rmsnorm(comm, dtype, trank, shapes,
                                            (const void *const *)ptr[0],
                                            (const void *const *)ptr[1], ptr[2], ptr[3],
                                            (const void *const *)ptr[4], eps, wo, group, streams);
  else if (op == 4) /* the root from the eps bits: mostly in range, sometimes not */
    rc = collgen_broadcast(comm, dtype, trank, shapes, (const void *const *)ptr[0], ptr[1],
                           (int)(eb % 12) - 2, group, streams);
  else if (op == 9) /* the root as broadcast's */
    rc = collgen_scatter(comm, dtype, trank, shapes, (const void *const *)ptr[0], ptr[1],
                         (int)(eb % 12) - 2, group, streams);
  else if (op == 5)
    rc = collgen_all_gather(comm, dtype, trank, shapes, (const void *const *)ptr[0], ptr[1],
                            group, streams);
  else if (op == 6)
    rc = collgen_reduce_scatter_sum(comm, dtype, trank, shapes, (const void *const *)ptr[0],
                                    ptr[1], group, streams);
  else if (op == 7)
    rc = collgen_reduce_scatter_rmsnorm(comm, dtype, trank, shapes, (const void *const *)ptr[0],
                                        (const void *const *)ptr[1], ptr[2], ptr[3],
                                        (const void *const *)ptr[4], eps, wo, group, streams);
  else if (op == 8)
    rc = collgen_reduce_scatter_rmsnorm_fp8(
        comm, dtype, trank, shapes, (const void *const *)ptr[0], (const void *const *)ptr[1],
        ptr[2], (float *const *)ptr[5], ptr[3], (const void *const *)ptr[4], eps, wo, mode,
        static_scale, group, streams);
  else
    rc = collgen_allreduce_residual_rmsnorm_fp8(
        comm, dtype, trank, shapes, (const void *const *)ptr[0], (const void *const *)ptr[1],
        ptr[2], (float *const *)ptr[5], ptr[3], (const void *const *)ptr[4], eps, wo, mode,
        static_scale, group, streams);
  if (strcmp(collgen_status_name(rc), "COLLGEN_ERR_UNKNOWN") == 0) abort();
  if (rc != COLLGEN_OK && !collgen_comm_last_error(comm)[0]) abort();
  if (stats->launches || stats->copies) abort();
  return 0;
}
