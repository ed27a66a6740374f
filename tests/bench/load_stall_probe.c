/*
** load_stall_probe.c -- measures how long each way of loading a kernel
** blocks the host while the target GPU is busy (issue: a first call stalled
** for as long as a peer's queued work). Each way runs right after a 2 s
** spin kernel was queued on device 1; the time is host time of the load
** (and of the first launch, where loading is lazy). Build on the GPU
** machine: nvcc -cubin -arch=sm_90 -o probe.cubin k.cu; gcc ... -lcuda.
** Usage: load_stall_probe SPIN.cubin OTHER.cubin
*/
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { \
  const char *s_; cuGetErrorString(r_, &s_); fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_); exit(1); } } while (0)

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *read_all(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { perror(path); exit(1); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *p = malloc(n);
  if (fread(p, 1, n, f) != (size_t)n) exit(1);
  fclose(f);
  return p;
}

static CUcontext ctx1;
static CUstream s1;
static CUfunction spin;

static void busy(unsigned long long ns) {
  CK(cuCtxSetCurrent(ctx1));
  void *args[] = {&ns};
  CK(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, s1, args, NULL));
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  void *spin_bin = read_all(argv[1]), *other = read_all(argv[2]);
  CK(cuInit(0));
  CUdevice d1;
  CK(cuDeviceGet(&d1, 1));
  CK(cuDevicePrimaryCtxRetain(&ctx1, d1));
  CK(cuCtxSetCurrent(ctx1));
  CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  CUmodule m;
  CK(cuModuleLoadData(&m, spin_bin));
  CK(cuModuleGetFunction(&spin, m, "spin"));
  const unsigned long long two_s = 2000000000ull;
  double t;

  busy(two_s);
  t = now_ms();
  CUmodule m2;
  CK(cuModuleLoadData(&m2, other));
  CUfunction f2;
  CK(cuModuleGetFunction(&f2, m2, "other"));
  printf("cuModuleLoadData+GetFunction (ctx of busy GPU):   %8.2f ms\n", now_ms() - t);
  CK(cuCtxSynchronize());

  busy(two_s);
  t = now_ms();
  CUlibrary lib;
  CK(cuLibraryLoadData(&lib, other, NULL, NULL, 0, NULL, NULL, 0));
  CUkernel k;
  CK(cuLibraryGetKernel(&k, lib, "other"));
  double t_lib = now_ms() - t;
  t = now_ms();
  CUfunction kf;
  CK(cuKernelGetFunction(&kf, k));
  printf("cuLibraryLoadData+GetKernel:                      %8.2f ms\n", t_lib);
  printf("  then cuKernelGetFunction (ctx of busy GPU):     %8.2f ms\n", now_ms() - t);
  CK(cuCtxSynchronize());

  busy(two_s);
  t = now_ms();
  CUlibrary lib2;
  CK(cuLibraryLoadData(&lib2, other, NULL, NULL, 0, NULL, NULL, 0));
  CUkernel k2;
  CK(cuLibraryGetKernel(&k2, lib2, "other"));
  double t_load = now_ms() - t;
  unsigned long long zero = 0;
  void *args[] = {&zero};
  t = now_ms();
  CK(cuLaunchKernel((CUfunction)k2, 1, 1, 1, 32, 1, 1, 0, s1, args, NULL));
  printf("cuLibraryLoadData+GetKernel, no context:          %8.2f ms\n", t_load);
  printf("  then first launch of the CUkernel (busy GPU):   %8.2f ms\n", now_ms() - t);
  CK(cuCtxSynchronize());

  busy(two_s);
  t = now_ms();
  CUlibrary lib3;
  CUlibraryOption opt = CU_LIBRARY_BINARY_IS_PRESERVED;
  unsigned int one = 1;
  void *optv[] = {&one};
  (void)optv;
  CK(cuLibraryLoadData(&lib3, other, NULL, NULL, 0, &opt, (void **)optv, 0));
  printf("(sanity) second library load:                     %8.2f ms\n", now_ms() - t);
  CK(cuCtxSynchronize());
  printf("done\n");
  return 0;
}
