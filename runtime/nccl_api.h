/*
** nccl_api.h -- NCCL loaded at run time (dlopen libnccl.so.2), as the driver
** is (driver.h): nothing links -lnccl and nothing includes nccl.h. The few
** types and enum values collgen uses are declared here from NCCL's stable
** ABI (unchanged since NCCL 2.14); calls go through collgen__nccl.<name>.
*/
#ifndef COLLGEN_NCCL_API_H
#define COLLGEN_NCCL_API_H
#include "driver.h"

/* ncclResult_t, ncclComm_t, ncclUniqueId, ncclDataType_t, ncclRedOp_t. */
typedef int collgen__nccl_result;
typedef struct collgen__nccl_comm *collgen__nccl_comm_t;
#define COLLGEN__NCCL_ID_BYTES 128
typedef struct {
  char internal[COLLGEN__NCCL_ID_BYTES];
} collgen__nccl_id;
typedef int collgen__nccl_dtype;
#define COLLGEN__NCCL_SUCCESS 0
#define COLLGEN__NCCL_IN_PROGRESS 7 /* non-blocking communicator: not finished yet */
#define COLLGEN__NCCL_INT8 0
#define COLLGEN__NCCL_UINT8 1
#define COLLGEN__NCCL_INT32 2
#define COLLGEN__NCCL_INT64 4
#define COLLGEN__NCCL_FLOAT16 6
#define COLLGEN__NCCL_FLOAT32 7
#define COLLGEN__NCCL_FLOAT64 8
#define COLLGEN__NCCL_BFLOAT16 9
#define COLLGEN__NCCL_SUM 0
/* The oldest NCCL with everything used here (non-blocking communicators
** and ncclCommInitRankConfig came with 2.14), as ncclGetVersion codes it
** (major * 10000 + minor * 100 + patch). */
#define COLLGEN__NCCL_MIN_VERSION 21400

/* ncclConfig_t as NCCL 2.14 declared it: NCCL reads a config by its size and
** version, so a program built against 2.14's header works with every later
** NCCL. Unset fields hold NCCL_CONFIG_UNDEF_INT (INT_MIN) or NULL. */
typedef struct {
  size_t size;           /* sizeof this struct */
  unsigned int magic;    /* COLLGEN__NCCL_CONFIG_MAGIC */
  unsigned int version;  /* COLLGEN__NCCL_MIN_VERSION: the layout above */
  int blocking;          /* 0: calls may return COLLGEN__NCCL_IN_PROGRESS */
  int cgaClusterSize, minCTAs, maxCTAs;
  const char *netName;
} collgen__nccl_config;
#define COLLGEN__NCCL_CONFIG_MAGIC 0xcafebeefu

/* XX(name, return type, parameter list): every NCCL function collgen calls. */
#define COLLGEN_NCCL_FUNCS(XX)                                                          \
  XX(ncclGetVersion, collgen__nccl_result, (int *version))                              \
  XX(ncclGetUniqueId, collgen__nccl_result, (collgen__nccl_id * id))                    \
  XX(ncclCommInitRankConfig, collgen__nccl_result,                                      \
     (collgen__nccl_comm_t * comm, int nranks, collgen__nccl_id id, int rank,           \
      collgen__nccl_config *config))                                                    \
  XX(ncclCommDestroy, collgen__nccl_result, (collgen__nccl_comm_t comm))                \
  XX(ncclCommAbort, collgen__nccl_result, (collgen__nccl_comm_t comm))                  \
  XX(ncclCommGetAsyncError, collgen__nccl_result,                                       \
     (collgen__nccl_comm_t comm, collgen__nccl_result * error))                         \
  XX(ncclGetErrorString, const char *, (collgen__nccl_result result))                   \
  XX(ncclAllReduce, collgen__nccl_result,                                               \
     (const void *send, void *recv, size_t count, collgen__nccl_dtype dtype, int op,    \
      collgen__nccl_comm_t comm, CUstream stream))                                      \
  XX(ncclAllGather, collgen__nccl_result,                                               \
     (const void *send, void *recv, size_t count, collgen__nccl_dtype dtype,            \
      collgen__nccl_comm_t comm, CUstream stream))                                      \
  XX(ncclSend, collgen__nccl_result,                                                    \
     (const void *send, size_t count, collgen__nccl_dtype dtype, int peer,              \
      collgen__nccl_comm_t comm, CUstream stream))                                      \
  XX(ncclRecv, collgen__nccl_result,                                                    \
     (void *recv, size_t count, collgen__nccl_dtype dtype, int peer,                    \
      collgen__nccl_comm_t comm, CUstream stream))                                      \
  XX(ncclBroadcast, collgen__nccl_result,                                               \
     (const void *send, void *recv, size_t count, collgen__nccl_dtype dtype, int root,  \
      collgen__nccl_comm_t comm, CUstream stream))                                      \
  XX(ncclReduceScatter, collgen__nccl_result,                                           \
     (const void *send, void *recv, size_t count, collgen__nccl_dtype dtype, int op,    \
      collgen__nccl_comm_t comm, CUstream stream))                                      \
  XX(ncclReduce, collgen__nccl_result,                                                  \
     (const void *send, void *recv, size_t count, collgen__nccl_dtype dtype, int op,    \
      int root, collgen__nccl_comm_t comm, CUstream stream))                            \
  XX(ncclGroupStart, collgen__nccl_result, (void))                                      \
  XX(ncclGroupEnd, collgen__nccl_result, (void))

typedef struct {
#define COLLGEN_NCCL_FIELD(name, ret, params) ret(*name) params;
  COLLGEN_NCCL_FUNCS(COLLGEN_NCCL_FIELD)
#undef COLLGEN_NCCL_FIELD
  int version; /* ncclGetVersion's code */
} collgen__nccl_api;

extern collgen__nccl_api collgen__nccl;

/* Loads libnccl.so.2 ($COLLGEN_NCCL_LIBRARY overrides the name) and
** resolves every function, once per process; thread-safe. Called only when
** some group routes to NCCL. COLLGEN_ERR_NO_NCCL (naming the library tried
** and why: not found, a missing function, older than 2.14) otherwise. */
int collgen__nccl_load(char *err, size_t n);

/* Formats a failed NCCL call into err and returns COLLGEN_ERR_NCCL (or 0
** when r is success). */
int collgen__nccl_fail(collgen__nccl_result r, const char *what, char *err, size_t n);

/* The outcome of NCCL call `what` on the non-blocking communicator comm,
** which returned r: when r is COLLGEN__NCCL_IN_PROGRESS, polls
** ncclCommGetAsyncError until the work is done or timeout_ms pass. 0, the
** call's COLLGEN_ERR_NCCL, or COLLGEN_ERR_TIMEOUT (a rank of the group never
** took part: it died or is stuck; the caller aborts comm). Message in err. */
int collgen__nccl_settle(collgen__nccl_comm_t comm, collgen__nccl_result r, const char *what,
                         int timeout_ms, char *err, size_t n);

/* NCCL's data type for a collgen dtype (-1 for none). i16, which NCCL
** lacks, is moved as float16: a copy-only dtype only ever goes to NCCL
** calls that move bits, which never interpret an element. */
collgen__nccl_dtype collgen__nccl_dtype_of(collgen_dtype_t dtype);
#endif
