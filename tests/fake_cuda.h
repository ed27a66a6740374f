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
  collgen__kparams params; /* the kernel's one parameter, as launched */
} fake_cuda_launch_t;

typedef struct {
  long launches;       /* cuLaunchKernel calls */
  long copies;         /* cuMemcpyDtoDAsync calls */
  long uploads;        /* cuMemcpyHtoDAsync calls */
  long upload_bytes;   /* bytes they copied */
  long vmm_handles;    /* live cuMemCreate/cuMemImportFromShareableHandle handles */
  long module_loads;   /* cuModuleLoadData calls */
  long ctx_switches;   /* cuCtxSetCurrent calls */
  long wrong_context;  /* launches/async copies on a stream of another context */
  fake_cuda_launch_t log[FAKE_CUDA_MAX_LAUNCHES]; /* the first launches */
} fake_cuda_stats_t;

/* The process-wide counters (zero them to start a measurement). */
fake_cuda_stats_t *fake_cuda_stats(void);
#endif
