/*
** fake_cuda.h -- what the stand-in CUDA driver (fake_cuda.c) records, read by
** the host-path tests through dlsym("fake_cuda_stats").
*/
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include "device_abi.h"

#define FAKE_CUDA_MAX_LAUNCHES 256

typedef struct {
  char kernel[128];   /* function name */
  unsigned int grid, block;
  int device;         /* device of the context current at launch */
  int pdl;            /* launched by cuLaunchKernelEx with programmatic stream
                         serialization allowed */
  collgen__kparams params; /* the kernel's one parameter, as launched */
} fake_cuda_launch_t;

typedef struct {
  long launches;       /* cuLaunchKernel and cuLaunchKernelEx calls */
  long copies;         /* cuMemcpyDtoDAsync calls */
  long uploads;        /* cuMemcpyHtoDAsync calls */
  long upload_bytes;   /* bytes they copied */
  long vmm_handles;    /* live cuMemCreate/cuMemImportFromShareableHandle/
                          cuMemRetainAllocationHandle handles */
  long ipc_open;       /* live cuIpcOpenMemHandle mappings */
  long module_loads;   /* cuModuleLoadData calls */
  long ctx_switches;   /* cuCtxSetCurrent calls */
  long wrong_context;  /* launches/async copies on a stream of another context */
  long user_objects;   /* cuUserObjectCreate objects not yet destroyed with their graph */
  fake_cuda_launch_t log[FAKE_CUDA_MAX_LAUNCHES]; /* the first launches */
} fake_cuda_stats_t;

/* The process-wide counters (zero them to start a measurement). */
fake_cuda_stats_t *fake_cuda_stats(void);

#ifdef FAKE_CUDA_PATH /* only in the test programs that use the stand-in */
#include <dlfcn.h>
#include <stdlib.h>

/* For the tests that run collgen on the stand-in: points collgen at the
** library `path` ($COLLGEN_CUDA_LIBRARY), clears the FAKE_CUDA_* settings
** and returns the library's counters (the same handle collgen dlopens), or
** NULL with dlerror() saying why. */
static inline fake_cuda_stats_t *fake_cuda_use(const char *path) {
  setenv("COLLGEN_CUDA_LIBRARY", path, 1);
  unsetenv("FAKE_CUDA_NO_P2P");
  unsetenv("FAKE_CUDA_NO_P2P_PAIRS");
  unsetenv("FAKE_CUDA_SM");
  unsetenv("FAKE_CUDA_DEVICES");
  unsetenv("FAKE_CUDA_VMM_NO_FD");
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return NULL;
  fake_cuda_stats_t *(*get)(void) = (fake_cuda_stats_t * (*)(void)) dlsym(lib, "fake_cuda_stats");
  return get ? get() : NULL;
}
#endif
#endif
