/*
** example.c -- the smallest complete collgen program (docs/api.md).
**
** It allreduces one bf16 vector over every visible GPU (up to 8) with the
** CUDA runtime's streams and buffers. Without a GPU it still shows the JIT
** side: it plans and compiles the kernel it would launch.
*/
#include <collgen.h>
#include <cuda_runtime.h>
#include <stdio.h>

#define N 1000003 /* any element count works */

static int jit_only(void) {
  collgen_generator_t *gen;
  if (collgen_generator_create(&gen, NULL) != COLLGEN_OK) {
    fprintf(stderr, "generator: %s\n", collgen_last_error());
    return 1;
  }
  collgen_shape_t shape;
  collgen_shape_init(&shape, COLLGEN_OP_ALLREDUCE_SUM);
  shape.elems = N;
  collgen_kernel_info_t info;
  int rc = collgen_get_kernel(gen, &shape, &info);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "%s: %s\n", collgen_status_name(rc), collgen_generator_last_error(gen));
  } else {
    printf("no GPU: compiled %s (%zu-byte cubin, %d registers)\n", info.kernel,
           info.cubin_size, info.registers);
  }
  collgen_generator_destroy(gen);
  return rc != COLLGEN_OK;
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return jit_only();
  if (ndev > COLLGEN_MAX_DEVICES) ndev = COLLGEN_MAX_DEVICES;

  int devices[COLLGEN_MAX_DEVICES];
  void *bufs[COLLGEN_MAX_DEVICES];
  cudaStream_t streams[COLLGEN_MAX_DEVICES];
  int64_t shape[1] = {N};
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  for (int d = 0; d < ndev; ++d) {
    devices[d] = d;
    shapes[d] = shape;
    cudaSetDevice(d);
    cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking);
    cudaMalloc(&bufs[d], N * 2);
    cudaMemset(bufs[d], 0, N * 2); /* bf16 zeros */
  }

  collgen_comm_t *comm;
  int rc = collgen_comm_create(&comm, ndev, devices, NULL);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "comm: %s: %s\n", collgen_status_name(rc), collgen_last_error());
    return 1;
  }
  /* In place: every device ends with the sum over all devices. */
  rc = collgen_allreduce_sum(comm, COLLGEN_DTYPE_BF16, 1, shapes, (const void *const *)bufs,
                             bufs, 0, (const collgen_stream_t *)streams);
  if (rc != COLLGEN_OK)
    fprintf(stderr, "allreduce: %s: %s\n", collgen_status_name(rc), collgen_comm_last_error(comm));
  for (int d = 0; d < ndev; ++d) {
    cudaSetDevice(d);
    cudaStreamSynchronize(streams[d]);
  }
  if (rc == COLLGEN_OK) rc = collgen_comm_check(comm);
  printf("allreduce over %d GPU(s): %s\n", ndev, collgen_status_str(rc));
  collgen_comm_destroy(comm);
  for (int d = 0; d < ndev; ++d) {
    cudaSetDevice(d);
    cudaFree(bufs[d]);
    cudaStreamDestroy(streams[d]);
  }
  return rc != COLLGEN_OK;
}
