/*
** driver.h -- the CUDA driver API loaded at run time (dlopen libcuda.so.1).
** Nothing links -lcuda, so collgen loads on machines without a GPU; calls
** go through collgen__cu.<name>, with the same names and types as cuda.h.
*/
#ifndef COLLGEN_DRIVER_H
#define COLLGEN_DRIVER_H
#include <cuda.h>

#include "internal.h"

#define COLLGEN_CU_FUNCS(XX)                                                    \
  XX(cuInit) XX(cuDriverGetVersion) XX(cuDeviceGetCount) XX(cuDeviceGet)        \
  XX(cuDeviceGetName) XX(cuDeviceGetAttribute) XX(cuDeviceCanAccessPeer)        \
  XX(cuDeviceGetP2PAttribute) XX(cuDevicePrimaryCtxRetain)                      \
  XX(cuDevicePrimaryCtxRelease) XX(cuCtxSetCurrent) XX(cuCtxGetCurrent)         \
  XX(cuCtxEnablePeerAccess) XX(cuCtxSynchronize) XX(cuMemAlloc) XX(cuMemFree)   \
  XX(cuMemsetD8) XX(cuMemHostAlloc) XX(cuMemFreeHost)                           \
  XX(cuMemHostGetDevicePointer) XX(cuMemcpyHtoD) XX(cuMemcpyDtoH)               \
  XX(cuMemcpyDtoDAsync) XX(cuMemcpyHtoDAsync)                                  \
  XX(cuModuleLoadData) XX(cuModuleUnload) XX(cuModuleGetFunction)               \
  XX(cuLaunchKernel) XX(cuLaunchKernelEx) XX(cuGetErrorName) XX(cuGetErrorString) XX(cuStreamCreate) \
  XX(cuStreamDestroy) XX(cuStreamSynchronize) XX(cuStreamBeginCapture)          \
  XX(cuStreamEndCapture) XX(cuGraphInstantiate) XX(cuGraphLaunch)               \
  XX(cuGraphExecDestroy) XX(cuGraphDestroy) XX(cuEventCreate) XX(cuEventRecord) \
  XX(cuEventSynchronize) XX(cuEventElapsedTime) XX(cuEventDestroy)              \
  XX(cuThreadExchangeStreamCaptureMode) XX(cuMemGetInfo) XX(cuStreamQuery)      \
  XX(cuMemCreate) XX(cuMemRelease) XX(cuMemAddressReserve) XX(cuMemAddressFree) \
  XX(cuMemMap) XX(cuMemUnmap) XX(cuMemSetAccess) XX(cuMemGetAllocationGranularity) \
  XX(cuMemExportToShareableHandle) XX(cuMemImportFromShareableHandle)           \
  XX(cuDeviceGetUuid) XX(cuMemGetAddressRange) XX(cuMemRetainAllocationHandle)      \
  XX(cuMemGetAllocationPropertiesFromHandle) XX(cuIpcGetMemHandle)              \
  XX(cuIpcOpenMemHandle) XX(cuIpcCloseMemHandle)                                \
  XX(cuStreamGetCaptureInfo) XX(cuUserObjectCreate) XX(cuGraphRetainUserObject)

typedef struct {
#define COLLGEN_CU_FIELD(name) __typeof__(&name) name;
  COLLGEN_CU_FUNCS(COLLGEN_CU_FIELD)
#undef COLLGEN_CU_FIELD
} collgen__cu_api;

extern collgen__cu_api collgen__cu;

/* Loads libcuda.so.1 ($COLLGEN_CUDA_LIBRARY overrides) and calls cuInit
** once per process. COLLGEN_ERR_NO_DRIVER when the library is missing or
** cuInit fails (e.g. the stub library, or no GPU). Thread-safe. */
int collgen__driver_load(char *err, size_t n);

/* Formats a failed driver call into err and returns COLLGEN_ERR_CUDA (or 0
** when r is CUDA_SUCCESS). */
int collgen__cu_fail(CUresult r, const char *what, char *err, size_t n);

/* Evaluates a driver call; on failure records it in (err, n) and jumps. */
#define COLLGEN_CU_GOTO(call, rc, err, n, label)                                \
  do {                                                                          \
    CUresult cu_r_ = (call);                                                    \
    if (cu_r_ != CUDA_SUCCESS) {                                                \
      rc = collgen__cu_fail(cu_r_, #call, err, n);                              \
      goto label;                                                               \
    }                                                                           \
  } while (0)
#endif
