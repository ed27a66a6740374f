/*
** collgen.h -- public C API of collgen.
**
** collgen generates CUDA C kernels for single-node multi-GPU collectives
** from Lua templates, compiles them with NVRTC, caches the cubins on disk and
** launches them over peer-to-peer mapped buffers on up to 8 GPUs driven from
** one process. Three operations: allreduce sum, fused all-gather + RMSNorm
** and fused allreduce + residual add + RMSNorm (its normed output also as
** float8 e4m3).
**
** Conventions: every function returns 0 (COLLGEN_OK) or a negative
** COLLGEN_ERR_* code. A handle keeps a readable message of its last error
** (collgen_generator_last_error, collgen_comm_last_error); calls without a
** handle leave theirs in a thread-local buffer (collgen_last_error).
** No function prints: diagnostics (e.g. an unusable cache directory) go to
** the log handler (collgen_set_log_handler), else to stderr only when the
** environment asks for it (COLLGEN_LOG=warn|info; default off).
**
** Every public function carries COLLGEN_API; the shared library is built
** with hidden visibility, so it exports exactly these functions.
*/
#ifndef COLLGEN_H
#define COLLGEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a public function: exported from libcollgen.so (built with
** -fvisibility=hidden, so nothing without it is exported). */
#ifndef COLLGEN_API
#if defined(__GNUC__) || defined(__clang__)
#define COLLGEN_API __attribute__((visibility("default")))
#else
#define COLLGEN_API
#endif
#endif

#define COLLGEN_VERSION_MAJOR 0
#define COLLGEN_VERSION_MINOR 1
#define COLLGEN_VERSION_PATCH 0
#define COLLGEN_VERSION_STRING "0.1.0"
#define COLLGEN_MAX_DEVICES 8
/* Largest element count of any tensor of a call (2^40): larger shapes, and
** shapes whose dimensions multiply past it, are refused with
** COLLGEN_ERR_INVALID_ARG before anything is computed. */
#define COLLGEN_MAX_ELEMS ((int64_t)1 << 40)
/* Largest wait bound, in milliseconds (24 hours), for the option and
** COLLGEN_TIMEOUT_MS. */
#define COLLGEN_MAX_TIMEOUT_MS 86400000
/* Default wait bound: 10 minutes. It is a safety net against a dead peer,
** not a scheduler: a healthy peer may be seconds late under real load.
** Lower it (option or COLLGEN_TIMEOUT_MS) to find a dead peer sooner. */
#define COLLGEN_DEFAULT_TIMEOUT_MS 600000

/* Status codes: XX(name, value, description). */
#define COLLGEN_ERRNO_MAP(XX)                                                  \
  XX(OK, 0, "success")                                                         \
  XX(INVALID_ARG, -1, "invalid argument")                                      \
  XX(NO_MEMORY, -2, "out of host memory")                                      \
  XX(NO_NVRTC, -3, "NVRTC library could not be loaded")                        \
  XX(NO_DRIVER, -4, "CUDA driver (libcuda.so.1) could not be loaded")          \
  XX(TEMPLATE, -5, "template or generator error")                              \
  XX(COMPILE, -6, "NVRTC compilation failed")                                  \
  XX(CACHE, -7, "cache entry missing or invalid")                              \
  XX(IO, -8, "file system error")                                              \
  XX(CUDA, -9, "CUDA driver call failed")                                      \
  XX(NO_DEVICE, -10, "no such CUDA device")                                    \
  XX(NO_P2P, -11, "peer access not possible between group members")           \
  XX(TIMEOUT, -12, "a peer never arrived at a barrier")                        \
  XX(UNSUPPORTED, -13, "unsupported configuration")                            \
  XX(ALIGNMENT, -14, "pointer not aligned to the element size")              \
  XX(ABORTED, -15, "the communicator was aborted")                            \
  XX(PEER, -16, "a peer process left, was refused or broke the protocol")     \
  XX(NO_NCCL, -17, "NCCL (libnccl.so.2) is needed but could not be loaded")   \
  XX(NCCL, -18, "an NCCL call failed")

typedef enum {
#define COLLGEN_ENUM_ENTRY(name, value, desc) COLLGEN_ERR_##name = value,
  COLLGEN_ERRNO_MAP(COLLGEN_ENUM_ENTRY)
#undef COLLGEN_ENUM_ENTRY
} collgen_status_t;

#define COLLGEN_OK COLLGEN_ERR_OK

/* Describes a status code ("peer access not possible ..."). Never NULL. */
COLLGEN_API const char *collgen_status_str(int status);
/* Names a status code ("COLLGEN_ERR_NO_P2P"). Never NULL. */
COLLGEN_API const char *collgen_status_name(int status);
/* Message of the last error of a handle-less call on this thread. */
COLLGEN_API const char *collgen_last_error(void);

/* ---- Logging ---------------------------------------------------------- */

/* Levels of a log message: a warning (something did not work as asked, the
** call went on, e.g. memory-only caching) or information (e.g. a stale cache
** entry removed). */
#define COLLGEN_LOG_WARN 1
#define COLLGEN_LOG_INFO 2

/* Receives one message: `level` is COLLGEN_LOG_*, `message` one line without
** the "collgen: " prefix or a newline, valid only during the call. May be
** called from any thread that calls collgen, several at once. */
typedef void (*collgen_log_fn)(int level, const char *message, void *user);

/* Sends every later message of the library, of every level, to `fn` with
** `user`. NULL restores the default: print to stderr, as "collgen: warning:
** <message>" or "collgen: <message>", the levels $COLLGEN_LOG asks for
** ("warn", "info"; unset or "off" prints nothing). A process-wide setting,
** safe to change from any thread: the pair (fn, user) is swapped under a
** lock, and a message being delivered at that moment may still reach the
** previous pair. `fn` is called without that lock. Never fails or prints. */
COLLGEN_API void collgen_set_log_handler(collgen_log_fn fn, void *user);

/* ---- Shapes and plans ------------------------------------------------- */

/* The operations, described once:
** XX(NAME, value, id, template, minimum tensor rank, computes, fp8).
** `id` is the name the CLI, the planner and the kernels use; `template` is
** the kernel family's file in templates/; `computes` is 1 for an op that
** computes on elements (it refuses a copy-only dtype) and 0 for one that
** only moves bits (it takes every dtype); `fp8` is 1 for an op that can
** write its normed output as float8 e4m3 (its `_fp8` entry points, the
** scalar `fp8` of collgen_call_t). Each op's buffer roles and scalar
** arguments are COLLGEN_ROLES_<NAME> and COLLGEN_SCALARS_<NAME> in
** src/catalog.h (bindings read them as the catalog tables "op_role" and
** "op_scalar"); what a plan of the op needs from the runtime (which roles
** peers read or write, whether a group is a copy) the planner says per
** plan (collgen_plan_t).
** The generator, the runtime and the docs read this list (docs/architecture.md
** says what to touch to add one). */
#define COLLGEN_OP_MAP(XX)                                                     \
  XX(ALLREDUCE_SUM, 0, allreduce_sum, "allreduce.cu.tpl", 1, 1, 0)             \
  XX(ALLGATHER_RMSNORM, 1, allgather_rmsnorm, "allgather_rmsnorm.cu.tpl", 2, 1, 0) \
  XX(ALLREDUCE_RESIDUAL_RMSNORM, 2, allreduce_residual_rmsnorm,                \
     "allreduce_residual_rmsnorm.cu.tpl", 2, 1, 1)                             \
  XX(ALL_GATHER, 3, all_gather, "all_gather.cu.tpl", 1, 0, 0)                  \
  XX(REDUCE_SCATTER_SUM, 4, reduce_scatter_sum, "reduce_scatter_sum.cu.tpl", 1, 1, 0) \
  XX(BROADCAST, 5, broadcast, "broadcast.cu.tpl", 1, 0, 0)                     \
  XX(REDUCE_SCATTER_RMSNORM, 6, reduce_scatter_rmsnorm,                        \
     "reduce_scatter_rmsnorm.cu.tpl", 2, 1, 1)                                 \
  XX(SCATTER, 7, scatter, "scatter.cu.tpl", 1, 0, 0)

typedef enum {
#define COLLGEN_OP_ENUM_ENTRY(NAME, value, id, tpl, min_rank, computes, fp8) \
  COLLGEN_OP_##NAME = value,
  COLLGEN_OP_MAP(COLLGEN_OP_ENUM_ENTRY)
#undef COLLGEN_OP_ENUM_ENTRY
} collgen_op_t;

/* The element types, described once:
** XX(NAME, value, id, bytes, device C type, accumulate type, minimum sm).
** An op that computes on elements accumulates in the accumulate type and
** rounds once per output. A copy-only dtype (accumulate type NULL) is only
** moved as bits: the ops that compute refuse it (COLLGEN_ERR_INVALID_ARG),
** the ops that only move bits take it. torch.bool and float8 tensors are
** moved as u8 (same bytes); f64 has no accumulate type here yet. */
#define COLLGEN_DTYPE_MAP(XX)                                                  \
  XX(BF16, 0, bf16, 2, "unsigned short", "float", 80)                          \
  XX(F16, 1, f16, 2, "unsigned short", "float", 80)                            \
  XX(F32, 2, f32, 4, "float", "float", 80)                                     \
  XX(U8, 3, u8, 1, "unsigned char", NULL, 80)                                  \
  XX(I8, 4, i8, 1, "signed char", NULL, 80)                                    \
  XX(I16, 5, i16, 2, "short", NULL, 80)                                        \
  XX(I32, 6, i32, 4, "int", NULL, 80)                                          \
  XX(I64, 7, i64, 8, "long long", NULL, 80)                                    \
  XX(F64, 8, f64, 8, "double", NULL, 80)

typedef enum {
#define COLLGEN_DTYPE_ENUM_ENTRY(NAME, value, id, bytes, ctype, acc, sm) COLLGEN_DTYPE_##NAME = value,
  COLLGEN_DTYPE_MAP(COLLGEN_DTYPE_ENUM_ENTRY)
#undef COLLGEN_DTYPE_ENUM_ENTRY
} collgen_dtype_t;

/* How allreduce_residual_rmsnorm writes normed, described once:
** XX(NAME, value, id, minimum sm). `none` writes it in the call's dtype;
** the others as float8 e4m3 (OCP E4M3FN, one byte per element), divided by
** a scale computed per row by the kernel (`dynamic`) or given by the caller
** for the whole tensor (`static`). The e4m3 conversion
** (cvt.rn.satfinite.e4m3x2.f32) needs sm_89 or newer. */
#define COLLGEN_FP8_MAP(XX)                                                    \
  XX(NONE, 0, none, 0)                                                         \
  XX(DYNAMIC, 1, dynamic, 89)                                                  \
  XX(STATIC, 2, static, 89)

typedef enum {
#define COLLGEN_FP8_ENUM_ENTRY(NAME, value, id, sm) COLLGEN_FP8_##NAME = value,
  COLLGEN_FP8_MAP(COLLGEN_FP8_ENUM_ENTRY)
#undef COLLGEN_FP8_ENUM_ENTRY
} collgen_fp8_mode_t;

/* The shape of one collective call, as the planner sees it, described once:
** X(C type, name, array bound, kind, lo, hi, default, "comment"), in the
** struct's (ABI) order. The struct below, collgen_shape_init's defaults and
** both directions of the planner bridge (gen/lua_bridge.c: the shape pushed to
** gen/planner.lua, a variant's shape read back) follow from these rows;
** python/tests/test_header.py expands them to check the package's struct.
** `kind` says how the field crosses into Lua:
**   OP, DTYPE, FP8  an enum, as its catalog name (COLLGEN_*_MAP's id);
**   INT, INT64      an integer; read back only within [lo, hi];
**   GROUP           INT, but 0 is pushed as ngpus (one group of all ranks);
**   BOOL            an int that is 0 or 1, as a Lua boolean;
**   ARCH            a string in a char array ("" is pushed as the default).
** `default` is collgen_shape_init's value: an expression that may use `op`
** (its argument) and `min_rank` (that op's minimum tensor rank). lo and hi
** matter only to INT, INT64 and GROUP (COLLGEN_MAX_BLOCKS: src/device_abi.h,
** 256). A new field is one row here (plus the package's ctypes struct,
** python/collgen/_abi.py, which the header test checks against this). */
#define COLLGEN_SHAPE_FIELDS(X)                                                \
  X(collgen_op_t, op, , OP, 0, 0, op, "the operation")                         \
  X(collgen_dtype_t, dtype, , DTYPE, 0, 0, COLLGEN_DTYPE_BF16, "element type") \
  X(int, ngpus, , INT, 1, COLLGEN_MAX_DEVICES, 2, "ranks in the communicator, 1..8") \
  X(int, group_size, , GROUP, 1, COLLGEN_MAX_DEVICES, 0,                       \
    "ranks per group; 0 means one group of all ngpus")                         \
  X(int, tensor_rank, , INT, 1, 8, min_rank,                                   \
    "1..8; tensors are flattened, so it is only checked")                      \
  X(int64_t, elems, , INT64, 0, INT64_MAX, 1, "allreduce_sum: elements per rank; all_gather: gathered elements") \
  X(int64_t, rows, , INT64, 0, INT64_MAX, 1,                                   \
    "allgather_rmsnorm: gathered rows (sum of shards); "                       \
    "allreduce_residual_rmsnorm: rows per rank; "                              \
    "reduce_scatter_rmsnorm: rows of the largest chunk")                       \
  X(int64_t, cols, , INT64, 0, INT64_MAX, 4096, "the RMSNorm ops: columns")    \
  X(int, aligned16, , BOOL, 0, 1, 1,                                           \
    "1 if every pointer of the call is 16-byte aligned")                       \
  X(int, inplace, , BOOL, 0, 1, 0,                                             \
    "allreduce_sum: 1 if outputs alias inputs (the other ops' kernels are "    \
    "the same either way)")                                                    \
  X(collgen_fp8_mode_t, fp8, , FP8, 0, 0, COLLGEN_FP8_NONE,                    \
    "allreduce_residual_rmsnorm, reduce_scatter_rmsnorm: how normed is "       \
    "written (COLLGEN_FP8_*); "                                                \
    "COLLGEN_FP8_NONE for the other ops")                                      \
  X(int, max_blocks, , INT, 0, COLLGEN_MAX_BLOCKS, 0,                          \
    "grid cap, 0 = planner default (at most 256; one block per row for a "    \
    "group of one of the norm ops)")                                           \
  X(char, arch, [16], ARCH, 0, 0, "sm_90", "target, e.g. \"sm_90\" (empty = \"sm_90\")")

typedef struct collgen_shape {
#define COLLGEN_SHAPE_MEMBER(type, name, bound, kind, lo, hi, dflt, doc) type name bound;
  COLLGEN_SHAPE_FIELDS(COLLGEN_SHAPE_MEMBER)
#undef COLLGEN_SHAPE_MEMBER
} collgen_shape_t;

/* Fills a shape with defaults: bf16 allreduce, 2 ranks, 1 element. */
COLLGEN_API void collgen_shape_init(collgen_shape_t *shape, collgen_op_t op);

/* The chunk of rows group rank `group_rank` of a group of `group_size`
** ranks owns when `rows` rows are scattered (the reduce-scatter ops):
** *count = rows / group_size, plus one for the first rows % group_size
** ranks; *start = the rows of the ranks before it (chunks are contiguous,
** in group-rank order). Returns COLLGEN_OK, or COLLGEN_ERR_INVALID_ARG
** (message in collgen_last_error, outputs untouched) when rows < 0,
** group_size < 1, group_rank is not in [0, group_size), or an output is
** NULL. For bindings that size outputs; the runtime applies the same rule. */
COLLGEN_API int collgen_scatter_chunk(int64_t rows, int group_size, int group_rank,
                                      int64_t *start, int64_t *count);

/* What the planner chose for a shape. */
typedef struct collgen_plan {
  char kernel[96];   /* kernel symbol, also names the specialization */
  char algo[16];     /* "ll", "oneshot", "twoshot", "unrolled", "looped", "rowsplit", "pull" */
  char canonical[256]; /* canonical spec text hashed into the cache key */
  int group, vec, block, grid, items;
  int64_t cols;
  /* What the runtime must know of the algorithm (the planner derives it
  ** from the algorithm; it is not part of the kernel's cache key). Bit k
  ** stands for the op's buffer role k, in the order of COLLGEN_ROLES_<op>
  ** in src/catalog.h (e.g. allreduce_sum: 0 input, 1 output). */
  unsigned peer_reads;  /* roles the kernel reads on peers directly */
  unsigned peer_writes; /* roles the kernel writes on peers directly */
  int copy_from, copy_to; /* a group where the op is the identity (allreduce
                       over one rank): no kernel runs, role copy_from is
                       copied into role copy_to; -1, -1 otherwise */
} collgen_plan_t;

/* ---- Generator (JIT) -------------------------------------------------- */

typedef struct collgen_generator collgen_generator_t;

/* Creates a generator: one Lua state plus access to the cubin cache.
** `cache_dir` NULL means the default ($COLLGEN_CACHE_DIR, else
** $XDG_CACHE_HOME/collgen, else ~/.cache/collgen). A generator is used by one
** thread at a time; create one per thread. On failure *out is NULL and
** collgen_last_error() says why. */
COLLGEN_API int collgen_generator_create(collgen_generator_t **out, const char *cache_dir);
/* Frees a generator (NULL is fine). */
COLLGEN_API void collgen_generator_destroy(collgen_generator_t *gen);
/* Message of the generator's last error (Lua traceback, NVRTC log, ...). */
COLLGEN_API const char *collgen_generator_last_error(const collgen_generator_t *gen);

/* NVRTC log (ptxas figures, warnings) of the generator's last compile. */
COLLGEN_API const char *collgen_generator_last_log(const collgen_generator_t *gen);

/* Plans a shape. COLLGEN_ERR_INVALID_ARG with a message on a bad shape. */
COLLGEN_API int collgen_plan(collgen_generator_t *gen, const collgen_shape_t *shape,
                             collgen_plan_t *plan);

/* A class of calls: every call of one op and dtype on `ngpus` ranks with
** one of the group sizes (and, for the RMSNorm ops, one of the cols; for
** allreduce_residual_rmsnorm, one of the FP8 output modes), whatever its
** element or row count, alignment, aliasing or grid cap. */
typedef struct collgen_shape_class {
  collgen_op_t op;
  collgen_dtype_t dtype;
  int ngpus;                /* ranks in the communicator, 1..8 */
  const int *group_sizes;   /* each dividing ngpus; NULL = every divisor */
  int group_size_count;
  const int64_t *cols;      /* the RMSNorm ops: at least one; else unused */
  int cols_count;
  const collgen_fp8_mode_t *fp8_modes; /* the ops with FP8 output
                               (allreduce_residual_rmsnorm,
                               reduce_scatter_rmsnorm): how normed is written (COLLGEN_FP8_NONE too), each
                               supported by the arch; NULL = every mode the
                               arch has. Other ops: unused (always NONE). */
  int fp8_mode_count;
  char arch[16];            /* target, e.g. "sm_90" (empty = "sm_90") */
} collgen_shape_class_t;

/* Lists every kernel the planner can pick for any call of a class, as one
** representative shape per distinct kernel (distinct canonical spec):
** *shapes is a malloc'd array of *count shapes that the caller frees (NULL
** when *count is 0). collgen_get_kernel on each fills a cache that serves
** every call of the class without NVRTC (what `collgen pregen` does).
** A group of one of allreduce_sum, all_gather, reduce_scatter_sum or
** broadcast is a copy in the runtime and contributes no kernel. COLLGEN_ERR_INVALID_ARG with the planner's reason on a bad class
** (unknown op or dtype, group size not dividing ngpus, no or bad cols,
** unsupported arch, an FP8 mode unknown or not on the arch); *shapes is
** then NULL and *count 0. */
COLLGEN_API int collgen_plan_variants(collgen_generator_t *gen,
                                      const collgen_shape_class_t *cls,
                                      collgen_shape_t **shapes, int *count);

/* Renders the CUDA C source for a shape into a malloc'd string the caller
** frees. `line_directives` = 1 adds #line directives naming the templates. */
COLLGEN_API int collgen_generate_source(collgen_generator_t *gen,
                                        const collgen_shape_t *shape, int line_directives,
                                        char **source);

/* One compiled kernel, as returned by collgen_get_kernel. */
typedef struct collgen_kernel_info {
  char key[65];          /* hex SHA-256 cache key */
  char kernel[96];       /* kernel symbol in the cubin */
  int cache_hit;         /* 0 = compiled now, 1 = disk, 2 = memory */
  int registers;         /* per thread, from ptxas */
  int spill_bytes;       /* spill stores + loads, from ptxas */
  double milliseconds;   /* time of this fetch */
  const void *cubin;     /* owned by the generator; valid until destroy */
  size_t cubin_size;
} collgen_kernel_info_t;

/* Gets the cubin for a shape: memory table, then disk cache, then NVRTC
** (written back to disk). COLLGEN_ERR_COMPILE carries the NVRTC log and the
** path of the dumped source in the generator's message. */
COLLGEN_API int collgen_get_kernel(collgen_generator_t *gen, const collgen_shape_t *shape,
                                   collgen_kernel_info_t *info);

/* Versions: collgen, Lua, NVRTC ("13.0" or "unavailable"). */
COLLGEN_API const char *collgen_version(void);
COLLGEN_API const char *collgen_lua_version(void);
COLLGEN_API int collgen_nvrtc_version(int *major, int *minor);

/* ---- Runtime: communicator and ops ------------------------------------ */

typedef struct collgen_comm collgen_comm_t;
typedef struct CUstream_st *collgen_stream_t; /* same type as CUstream */

/* How a group of ranks moves its data, described once: XX(NAME, value, id).
** `p2p`: collgen's own kernels over P2P-mapped buffers (every rank of the
** group on one host, every pair with peer access); `nccl`: NCCL underneath
** (libnccl.so.2, loaded at run time) plus collgen's local RMSNorm kernels;
** `auto`: p2p where the group allows it, else nccl (docs/multinode.md). */
#define COLLGEN_TRANSPORT_MAP(XX)                                              \
  XX(AUTO, 0, auto)                                                            \
  XX(P2P, 1, p2p)                                                              \
  XX(NCCL, 2, nccl)

typedef enum {
#define COLLGEN_TRANSPORT_ENUM_ENTRY(NAME, value, id) COLLGEN_TRANSPORT_##NAME = value,
  COLLGEN_TRANSPORT_MAP(COLLGEN_TRANSPORT_ENUM_ENTRY)
#undef COLLGEN_TRANSPORT_ENUM_ENTRY
} collgen_transport_t;

typedef struct collgen_comm_options {
  const char *cache_dir;   /* NULL = default cache location */
  int timeout_ms;          /* wait bound, a safety net: 0 = $COLLGEN_TIMEOUT_MS or
                              COLLGEN_DEFAULT_TIMEOUT_MS (10 minutes) */
  int max_blocks;          /* grid cap for every launch; 0 = planner default */
  int allow_shared_devices; /* test only: several ranks may map onto one GPU */
  unsigned launch_mask;    /* test only: launch only these ranks (0 = all) */
  size_t staging_bytes;    /* one process per GPU: each rank's staging area, which
                              peers read; 0 = COLLGEN_DEFAULT_STAGING_BYTES */
  int pdl;                 /* 1 = launch every kernel with programmatic dependent
                              launch, so it can start while the previous kernel on
                              its stream finishes (it waits for that kernel's
                              results before touching memory); needs sm_90+ and
                              one rank per GPU. 0 (default) = plain launches */
  collgen_transport_t transport; /* one process per GPU: the path of every group;
                              COLLGEN_TRANSPORT_AUTO (0) = $COLLGEN_TRANSPORT, else
                              auto. P2P or NCCL here win over the variable. Every
                              rank must ask for the same. */
} collgen_comm_options_t;

/* Default staging area per rank in the one-process-per-GPU mode. Calls
** larger than it run in chunks (docs/multiprocess.md). */
#define COLLGEN_DEFAULT_STAGING_BYTES ((size_t)64 << 20)
#define COLLGEN_MIN_STAGING_BYTES ((size_t)1 << 20)
#define COLLGEN_MAX_STAGING_BYTES ((size_t)16 << 30)

/* Fills options with defaults. */
COLLGEN_API void collgen_comm_options_init(collgen_comm_options_t *options);

/* Creates a communicator over `ndev` CUDA device ordinals (1..8), one rank
** per entry in order. Retains each device's primary context, enables peer
** access between all ranks, allocates and zeroes a signal buffer per rank.
** Errors (nothing left allocated): COLLGEN_ERR_NO_DRIVER, _INVALID_ARG (bad
** count, duplicate device without allow_shared_devices, a bad
** $COLLGEN_TRANSPORT), _NO_DEVICE, _NO_P2P (two ranks cannot access each
** other), _UNSUPPORTED (transport nccl: this communicator runs on P2P
** only), _CUDA. */
COLLGEN_API int collgen_comm_create(collgen_comm_t **out, int ndev, const int *devices,
                                    const collgen_comm_options_t *options);
/* Frees everything the communicator holds. Waits for nothing: the caller
** must have synchronized its streams. NULL is fine. An NCCL communicator
** of it that a live CUDA graph still holds work of (which NCCL's destroy
** would wait for) is released on a thread of its own once that graph is
** destroyed (docs/multinode.md); graphs captured with this communicator
** must not be launched afterwards. */
COLLGEN_API void collgen_comm_destroy(collgen_comm_t *comm);
/* Message of the communicator's last error. */
COLLGEN_API const char *collgen_comm_last_error(const collgen_comm_t *comm);

typedef struct collgen_comm_info {
  int ndev;
  int devices[COLLGEN_MAX_DEVICES];
  char arch[COLLGEN_MAX_DEVICES][16];
  int p2p[COLLGEN_MAX_DEVICES][COLLGEN_MAX_DEVICES]; /* 1 = peer access */
  char link[COLLGEN_MAX_DEVICES][COLLGEN_MAX_DEVICES][16]; /* "self","NVLink","PCIe","none" */
  size_t signal_bytes_per_rank;
  /* Appended with the NCCL transport (docs/multinode.md). */
  int nhosts;                       /* hosts the ranks run on */
  int host[COLLGEN_MAX_DEVICES];    /* rank r's host, numbered 0.. in the order of
                                       each host's lowest rank */
  /* route[s - 1][g]: the path of group g (ranks g*s .. g*s+s-1) of calls
  ** with group size s, for every s dividing ndev: COLLGEN_TRANSPORT_P2P or
  ** COLLGEN_TRANSPORT_NCCL; COLLGEN_TRANSPORT_AUTO (0) where there is no
  ** such group. Decided once, when the communicator was created. */
  collgen_transport_t route[COLLGEN_MAX_DEVICES][COLLGEN_MAX_DEVICES];
} collgen_comm_info_t;

/* Reports devices, archs, the P2P matrix, hosts and each group's path. */
COLLGEN_API int collgen_comm_info(collgen_comm_t *comm, collgen_comm_info_t *info);

/* Returns COLLGEN_ERR_ABORTED after collgen_comm_abort, COLLGEN_ERR_TIMEOUT
** (message names the device that never arrived) if any kernel of this
** communicator gave up waiting, else 0. Reads host memory only: safe while
** kernels run. */
COLLGEN_API int collgen_comm_check(collgen_comm_t *comm);

/* How one rank's kernels ended their waits, as seen from the host. */
/* XX(NAME, value, id): OK, no wait gave up (idle, running or waiting);
** TIMED_OUT, gave up waiting for `peer` (the bound passed); ABORTED,
** collgen_comm_abort ran and its kernels stop. */
#define COLLGEN_RANK_STATE_MAP(XX)                                             \
  XX(OK, 0, ok)                                                                \
  XX(TIMED_OUT, 1, timed_out)                                                  \
  XX(ABORTED, 2, aborted)

typedef enum {
#define COLLGEN_RANK_STATE_ENUM_ENTRY(NAME, value, id) COLLGEN_RANK_##NAME = value,
  COLLGEN_RANK_STATE_MAP(COLLGEN_RANK_STATE_ENUM_ENTRY)
#undef COLLGEN_RANK_STATE_ENUM_ENTRY
} collgen_rank_state_t;

typedef struct collgen_comm_health {
  int ndev;
  struct {
    collgen_rank_state_t state;
    int peer;                 /* communicator rank it waited for, or -1 */
  } rank[COLLGEN_MAX_DEVICES];
} collgen_comm_health_t;

/* Reads every rank's state from host-mapped memory (no CUDA call, safe while
** kernels run and from any thread). Unlike collgen_comm_check, it names the
** state of every rank and writes no message. A wait still in progress shows
** as COLLGEN_RANK_OK: kernels do not report waits as they happen (see
** docs/signals.md). */
COLLGEN_API int collgen_comm_health(const collgen_comm_t *comm, collgen_comm_health_t *health);

/* Stops the communicator now: every kernel of it that is waiting for a peer
** stops within milliseconds, kernels queued behind return at once, and
** every later call on it returns COLLGEN_ERR_ABORTED; only
** collgen_comm_destroy remains (after the caller's streams are
** synchronized, which no longer waits for a peer). Outputs of calls in
** flight are unspecified. Safe from any thread while kernels run, and
** while another thread waits on a stream; not concurrently with
** collgen_comm_destroy. Idempotent. Makes no launch: it writes every
** rank's signal buffer by DMA (docs/signals.md), so it works while every
** SM is busy. Returns COLLGEN_OK, or COLLGEN_ERR_CUDA when a copy failed
** (the communicator still counts as aborted). */
COLLGEN_API int collgen_comm_abort(collgen_comm_t *comm);

/* Loads, on every rank of every group, the kernel each of `count` call
** shapes needs, so that later calls of those shapes load nothing. Loading
** code into a device's context waits until that device is idle (the CUDA
** driver's behaviour, measured: docs/signals.md), so a first call made
** while a GPU is busy would stall the host for as long as its queued work;
** prepare beforehand. Per shape the caller sets op, dtype, tensor_rank,
** elems or rows and cols, aligned16, inplace and group_size (0 = all);
** ngpus, arch and max_blocks come from the communicator. Validates every
** shape before loading anything. */
COLLGEN_API int collgen_comm_prepare(collgen_comm_t *comm, const collgen_shape_t *shapes,
                                     int count);

/* Loads every kernel a class of calls can need (collgen_plan_variants) on
** every rank: with a cache filled by `collgen pregen` for the class, this
** preloads what the cache holds for this communicator. cls->ngpus must be
** the communicator's rank count; cls->arch is ignored (each group uses its
** devices' arch). */
COLLGEN_API int collgen_comm_prepare_class(collgen_comm_t *comm,
                                           const collgen_shape_class_t *cls);

/* allreduce sum. Rank d's input `inputs[d]` (shape[0..rank-1], same within
** a group) is summed over its group into `outputs[d]` (may equal inputs[d]).
** `group_size` 0 = all ranks. `streams[d]` is rank d's stream (a CUstream;
** cudaStream_t works). Everything is validated and every kernel loaded on
** every device before any launch. Zero elements: success, no launch. */
COLLGEN_API int collgen_allreduce_sum(collgen_comm_t *comm, collgen_dtype_t dtype,
                                      int rank, const int64_t *const *shapes,
                                      const void *const *inputs, void *const *outputs,
                                      int group_size, const collgen_stream_t *streams);

/* Fused all-gather + RMSNorm. Rank d holds a row shard `inputs[d]` of shape
** shard_shapes[d][0..rank-1] (leading dims flattened into rows, last dim =
** cols, equal within a group; rows may be 0). Outputs `out_normed[d]` and
** `out_residual[d]` hold [sum of the group's rows, cols]. `gammas[d]` has
** cols elements. group_size must be >= 1 and divide the rank count. */
COLLGEN_API int collgen_allgather_rmsnorm(collgen_comm_t *comm, collgen_dtype_t dtype,
                                          int rank, const int64_t *const *shard_shapes,
                                          const void *const *inputs,
                                          void *const *out_normed,
                                          void *const *out_residual,
                                          const void *const *gammas, float eps,
                                          float weight_offset, int group_size,
                                          const collgen_stream_t *streams);

/* Fused allreduce + residual add + RMSNorm, the op that ends every
** attention and MLP block of a tensor-parallel decoder. Rank d holds
** partial sums `x[d]` of shape shapes[d][0..rank-1] (rank >= 2, leading
** dims flattened into rows, last dim = cols, the same shape within a
** group), its residual stream `residual_in[d]` and `gammas[d]` (cols
** elements), all of `dtype`. The arguments come in the order of
** collgen_allgather_rmsnorm: inputs, normed, residual, gammas, scalars.
** With s = x_0 + ... + x_{G-1} summed in f32 in group rank order (the
** allreduce_sum order), every rank gets
**   residual_out[d] = round(s + residual_in)
**   out_normed[d]   = round(r * rsqrt(mean(r^2) + eps) * (gamma + weight_offset))
** where r = f32(residual_out), the rounded value; all math in f32.
** Precondition: residual_in and gamma hold the same values on every rank
** of a group (the replicated residual stream of tensor parallelism); then
** every rank gets bitwise identical outputs, run after run. Which rank's
** residual_in a row is read from depends on the planned algorithm
** (docs/api.md), so ranks with differing residuals get differing outputs.
** residual_out[d] may be residual_in[d] (in place); out_normed[d] may
** overlap nothing; x is only read. eps must be finite and >= 0,
** weight_offset finite (it is rounded to dtype, as the dtype holds it).
** group_size 0 = all ranks; a group of one rank still adds and normalizes.
** Zero rows (or cols): success, no launch. Everything is validated and
** every kernel loaded on every device before any launch; a refused call
** (COLLGEN_ERR_INVALID_ARG, _ALIGNMENT, _NO_P2P, ...) writes nothing. */
COLLGEN_API int collgen_allreduce_residual_rmsnorm(collgen_comm_t *comm, collgen_dtype_t dtype,
                                                   int rank, const int64_t *const *shapes,
                                                   const void *const *x,
                                                   const void *const *residual_in,
                                                   void *const *out_normed,
                                                   void *const *residual_out,
                                                   const void *const *gammas, float eps,
                                                   float weight_offset, int group_size,
                                                   const collgen_stream_t *streams);

/* collgen_allreduce_residual_rmsnorm with normed written as float8 e4m3
** (OCP E4M3FN, one byte per element), for a following FP8 GEMM. Arguments,
** preconditions, checks and residual_out (the same bits) are those of
** collgen_allreduce_residual_rmsnorm. Let y be normed before its rounding:
**   y = r * rsqrt(mean(r^2) + eps) * (gamma + weight_offset), r = f32(residual_out),
** in f32 as that op computes it. Then, with e4m3() rounding to nearest even
** and saturating to +-448 (PTX cvt.rn.satfinite; NaN stays NaN) and every
** division IEEE f32 round-to-nearest:
**   mode COLLGEN_FP8_DYNAMIC: per row, scale = max|y| / 448, written to
**     row_scales[d][row] (rows floats per rank); normed_fp8[d] = e4m3(y / scale).
**     NaN values of y do not count toward the max. A row whose scale is 0
**     (every y is 0 or NaN, as in an all-zero row, also with eps 0) gets
**     scale 0 and code 0x00 everywhere, never NaN. static_scale must be 0.
**   mode COLLGEN_FP8_STATIC: normed_fp8[d] = e4m3(y / static_scale), with
**     static_scale finite and > 0; row_scales must be NULL (none written).
** normed_fp8[d] holds rows*cols bytes and row_scales[d] rows floats; they
** may overlap no other buffer. Every rank of a group writes the same bytes.
** Errors before anything is loaded or launched, besides those of
** collgen_allreduce_residual_rmsnorm: COLLGEN_ERR_INVALID_ARG for another
** mode, a bad static_scale or row_scales given when it must not be;
** COLLGEN_ERR_UNSUPPORTED when any rank's GPU is older than sm_89. */
COLLGEN_API int collgen_allreduce_residual_rmsnorm_fp8(
    collgen_comm_t *comm, collgen_dtype_t dtype, int rank, const int64_t *const *shapes,
    const void *const *x, const void *const *residual_in, void *const *normed_fp8,
    float *const *row_scales, void *const *residual_out, const void *const *gammas, float eps,
    float weight_offset, collgen_fp8_mode_t mode, float static_scale, int group_size,
    const collgen_stream_t *streams);

/* broadcast: `root` is a group rank (0..group_size-1, the same for every
** group); the root's inputs[] (same shape on every rank of the group) goes
** to every rank's outputs[] of its group, bit-exact. Takes every dtype,
** copy-only ones included. Non-root inputs are not read (their entries
** may be NULL). The root's output may be its input (in place); another
** rank's output may overlap nothing it is given. A root outside
** 0..group_size-1 is COLLGEN_ERR_INVALID_ARG before anything is launched.
** A group of one is a copy. Zero elements: success, no launch. */
COLLGEN_API int collgen_broadcast(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                  const int64_t *const *shapes, const void *const *inputs,
                                  void *const *outputs, int root, int group_size,
                                  const collgen_stream_t *streams);

/* all_gather: rank d's shard inputs[d] has shape shard_shapes[d] (equal in
** every dim but the first; the first may be 0); outputs[d] holds
** [sum of the group's first dims, ...]: the shards in group-rank order,
** bit for bit. Any dtype, the copy-only ones too. In place: inputs[d] ==
** outputs[d] + (rows before d) * row_bytes exactly (any other overlap is
** COLLGEN_ERR_INVALID_ARG). A group of one is a copy (nothing in place).
** Checks and errors as collgen_allgather_rmsnorm's, before anything is
** loaded or launched; buffers need only their element alignment. */
COLLGEN_API int collgen_all_gather(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                   const int64_t *const *shard_shapes,
                                   const void *const *inputs, void *const *outputs,
                                   int group_size, const collgen_stream_t *streams);

/* reduce-scatter sum. Every rank of a group holds `inputs[d]` of shape
** shapes[d][0..rank-1] = [N, ...] (the same within a group; rank >= 1).
** Group rank i gets rows [start_i, start_i + count_i) of the sum over the
** group into `outputs[d]`, of shape [count_i, ...]: count_i = N/G + (i <
** N%G), start_i = i*(N/G) + min(i, N%G) (collgen_scatter_chunk); a rank
** past N gets 0 rows. The sum is taken in f32 in group-rank order and
** rounded once: the bits of collgen_allreduce_sum for those rows. Computing
** dtypes only (a copy-only dtype is COLLGEN_ERR_INVALID_ARG). An output
** may not overlap its rank's input (no in place). A group of one copies
** its input. Zero elements: success, no launch. */
COLLGEN_API int collgen_reduce_scatter_sum(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                           const int64_t *const *shapes,
                                           const void *const *inputs, void *const *outputs,
                                           int group_size, const collgen_stream_t *streams);

/* Fused reduce-scatter + residual add + RMSNorm (sequence parallelism).
** Rank d holds x[d] of shape shapes[d][0..rank-1] (rank >= 2, leading dims
** flattened into rows, last dim = cols, the same shape within a group).
** Group rank i owns chunk i of the rows, count_i = rows/G + (i < rows%G)
** rows from start_i = i*(rows/G) + min(i, rows%G) (reduce_scatter_sum's
** rule; a chunk may be empty). residual_in (optional: the array may be
** NULL, or every entry NULL), residual_out[d] and out_normed[d] are
** [count_i, cols]; gammas[d] has cols elements. With s the f32 sum of the
** chunk's rows of x over the group in group rank order (the allreduce_sum
** order):
**   residual_out[d] = round(s + residual_in)    (round(s) without residual_in)
**   out_normed[d]   = round(r * rsqrt(mean(r^2) + eps) * (gamma + weight_offset))
** with r = f32(residual_out), all math in f32 (as
** collgen_allreduce_residual_rmsnorm). Bitwise the same on every rerun.
** residual_out[d] may be residual_in[d] (in place); no other pair may
** overlap where one is written; x is only read. Computing dtypes only.
** Scalars, group_size, zero rows, refusals and a group of one (it still
** adds and normalizes) as collgen_allreduce_residual_rmsnorm. */
COLLGEN_API int collgen_reduce_scatter_rmsnorm(collgen_comm_t *comm, collgen_dtype_t dtype,
                                               int rank, const int64_t *const *shapes,
                                               const void *const *x,
                                               const void *const *residual_in,
                                               void *const *out_normed,
                                               void *const *residual_out,
                                               const void *const *gammas, float eps,
                                               float weight_offset, int group_size,
                                               const collgen_stream_t *streams);

/* collgen_reduce_scatter_rmsnorm with normed written as float8 e4m3: the
** modes, scales, checks and errors of collgen_allreduce_residual_rmsnorm_fp8
** over this op's rows (normed_fp8[d] holds count_i*cols bytes, row_scales[d]
** count_i floats). */
COLLGEN_API int collgen_reduce_scatter_rmsnorm_fp8(
    collgen_comm_t *comm, collgen_dtype_t dtype, int rank, const int64_t *const *shapes,
    const void *const *x, const void *const *residual_in, void *const *normed_fp8,
    float *const *row_scales, void *const *residual_out, const void *const *gammas, float eps,
    float weight_offset, collgen_fp8_mode_t mode, float static_scale, int group_size,
    const collgen_stream_t *streams);

/* scatter: `root` is a group rank (0..group_size-1, the same for every
** group); every rank of a group gives shapes[d] = the root's input shape
** [N, ...] (the same on every rank; tensor rank >= 1). Group rank i gets
** rows [start_i, start_i + count_i) of the root's input in outputs[d], of
** shape [count_i, ...], bit for bit, with count_i and start_i those of
** collgen_scatter_chunk (the first N % G ranks get one more row; a rank
** past N gets none, and its output may then be NULL). Takes every dtype,
** copy-only ones included. Non-root inputs are not read (their entries may
** be NULL). The root's output may sit inside its input exactly at its own
** chunk (in place: nothing is moved for it); any other overlap is
** COLLGEN_ERR_INVALID_ARG. A root outside 0..group_size-1 is
** COLLGEN_ERR_INVALID_ARG before anything is launched. A group of one is a
** copy. Zero elements: success, no launch. */
COLLGEN_API int collgen_scatter(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                const int64_t *const *shapes, const void *const *inputs,
                                void *const *outputs, int root, int group_size,
                                const collgen_stream_t *streams);

/* ---- Any op: the op-neutral call ------------------------------------- */

/* The most buffer roles and scalar arguments an op has. */
#define COLLGEN_MAX_ROLES 8
#define COLLGEN_MAX_SCALARS 4

/* One call of any op of COLLGEN_OP_MAP, for collgen_run and
** collgen_rank_run; every op's entry point above is such a call. Roles and
** scalars are numbered in the op's catalog order: COLLGEN_ROLES_<NAME> and
** COLLGEN_SCALARS_<NAME> of src/catalog.h, which bindings read as the
** catalog tables "op_role" and "op_scalar" and docs/api.md lists.
**   op, dtype, tensor_rank, group_size: as the entry points take them.
**   shapes: every rank's shape (tensor_rank dims each), in both functions.
**   buffers[k] (collgen_run): rank d's buffer of role k is buffers[k][d];
**     NULL leaves out an optional role (or one the FP8 mode does not write).
**   mine[k] (collgen_rank_run): this rank's buffer of role k, or NULL.
**   scalars[j]: scalar j of the op (an integer scalar, such as broadcast's
**     root, must hold an integer; the FP8 mode holds a collgen_fp8_mode_t);
**     unused entries are ignored. Zero-initialize the struct: a scalar
**     left at 0 is 0 (e.g. COLLGEN_FP8_NONE, normed in the dtype).
**   streams[d] (collgen_run) / stream (collgen_rank_run): as the entry
**     points take them. */
typedef struct collgen_call {
  collgen_op_t op;
  collgen_dtype_t dtype;
  int tensor_rank;
  int group_size;
  const int64_t *const *shapes;
  const void *const *buffers[COLLGEN_MAX_ROLES];
  const void *mine[COLLGEN_MAX_ROLES];
  double scalars[COLLGEN_MAX_SCALARS];
  const collgen_stream_t *streams;
  collgen_stream_t stream;
} collgen_call_t;

/* Runs `call` on a communicator of collgen_comm_create: the op's entry
** point with these arguments, with the same checks, errors and bits (every
** argument is checked, every kernel loaded on every rank before anything
** is launched; a refused call writes nothing). A scalar that is not a
** value its op takes (a root that is no group rank, an eps that is NaN, a
** fractional integer) is COLLGEN_ERR_INVALID_ARG naming it. */
COLLGEN_API int collgen_run(collgen_comm_t *comm, const collgen_call_t *call);

/* Runs `call` on a communicator of collgen_comm_init_rank: this rank's part
** (mine[], stream), as the op's collgen_rank_* entry point does, with the
** same checks, errors and cut into pieces of a call larger than the
** staging area where the op allows it. */
COLLGEN_API int collgen_rank_run(collgen_comm_t *comm, const collgen_call_t *call);

/* ---- One process per GPU: the unique id ------------------------------ */

/* Bytes of a unique id, and characters of its text form (lower-case hex,
** without the terminating NUL). */
#define COLLGEN_UNIQUE_ID_BYTES 128
#define COLLGEN_UNIQUE_ID_TEXT_LEN (2 * COLLGEN_UNIQUE_ID_BYTES)

/* Names one rendezvous of the processes of a job (docs/multiprocess.md).
** Opaque: a format tag, a random socket tag, a random 256-bit secret and a
** checksum. Only a process that holds the id can join the rendezvous, so
** hand it to the job's processes only (MPI_Bcast, a torch store, a 0600
** file, an environment variable) and make a fresh one for every job. */
typedef struct collgen_unique_id {
  unsigned char internal[COLLGEN_UNIQUE_ID_BYTES];
} collgen_unique_id_t;

/* Makes a fresh id: its tag and secret come from getrandom(2) (else
** /dev/urandom). Any process may make it (it starts nothing, binds
** nothing). COLLGEN_ERR_INVALID_ARG if `id` is NULL, COLLGEN_ERR_IO if the
** system gives no randomness; the message is in collgen_last_error(). */
COLLGEN_API int collgen_get_unique_id(collgen_unique_id_t *id);

/* Writes the id as COLLGEN_UNIQUE_ID_TEXT_LEN lower-case hex digits plus a
** NUL into `text`, which has `size` bytes (at least
** COLLGEN_UNIQUE_ID_TEXT_LEN + 1). COLLGEN_ERR_INVALID_ARG on NULL, a short
** buffer (nothing written) or an id that is not a valid collgen id. */
COLLGEN_API int collgen_unique_id_to_text(const collgen_unique_id_t *id, char *text,
                                          size_t size);

/* Reads an id from its text: exactly COLLGEN_UNIQUE_ID_TEXT_LEN hex digits
** (either case) and nothing else (no spaces, newline or prefix), whose bytes
** are a valid id (format tag, version, zero reserved bytes, checksum).
** COLLGEN_ERR_INVALID_ARG otherwise, naming the first offending character
** or the failed check; *id is then left untouched. */
COLLGEN_API int collgen_unique_id_from_text(const char *text, collgen_unique_id_t *id);

/* ---- One process per GPU: the communicator --------------------------- */

/* Creates this process's rank `rank` (0..nranks-1, nranks 1..8) of a
** communicator whose other ranks are other processes, each
** calling this with the same `id` (from collgen_get_unique_id, made once
** and passed to every process) and nranks. `device` is the CUDA ordinal
** this process drives. The processes meet on a Unix socket named by the id
** (docs/multiprocess.md), share their signal buffers and staging areas
** (options->staging_bytes each) as cuMem VMM allocations passed as file
** descriptors, and check every pair for P2P. Collective: returns when every
** rank has joined, or with COLLGEN_ERR_TIMEOUT naming the ranks that never
** came (the bound is options->timeout_ms, else $COLLGEN_TIMEOUT_MS, else
** COLLGEN_DEFAULT_TIMEOUT_MS). Every rank must pass the same max_blocks.
** Other errors: _INVALID_ARG, _NO_DEVICE, _UNSUPPORTED (older than sm_80),
** _PEER (a rank left or failed; named), _CUDA, _NO_DRIVER. Calls on it
** use the collgen_rank_* functions; collgen_comm_abort in one process
** stops the kernels of every process. Destroy with collgen_comm_destroy
** (not collective).
** Routing (docs/multinode.md): every group of every group size takes one
** path, decided here from each rank's host, the P2P matrix and
** options->transport (else $COLLGEN_TRANSPORT): collgen's kernels where the
** group is on one host with P2P between every pair, else NCCL, whose
** communicators are created here (one per such group). More errors:
** _NO_NCCL (a group needs NCCL and some rank cannot load it; named),
** _NCCL (ncclCommInitRankConfig failed; _TIMEOUT when it did not finish
** within the bound), _INVALID_ARG (a bad $COLLGEN_TRANSPORT,
** or ranks asking for different transports). The socket rendezvous joins
** processes of one host only; for several hosts use
** collgen_comm_init_rank_callback. */
COLLGEN_API int collgen_comm_init_rank(collgen_comm_t **comm, int nranks,
                                       const collgen_unique_id_t *id, int rank, int device,
                                       const collgen_comm_options_t *options);

/* allreduce sum on a communicator of collgen_comm_init_rank: this
** process's rank gives its input, output and stream; `shape` is the shape
** every rank of the group holds. Same semantics, checks and error codes
** as collgen_allreduce_sum, and the same bits. The kernel reads only the
** peers' staging areas: inputs are copied into this rank's staging area on
** `stream` when the planned algorithm needs it (not for LL), and calls
** larger than half the staging area run as consecutive pieces. Capturable
** in a CUDA graph (the copies are stream work). */
COLLGEN_API int collgen_rank_allreduce_sum(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                           const int64_t *shape, const void *input, void *output,
                                           int group_size, collgen_stream_t stream);

/* allgather_rmsnorm on a communicator of collgen_comm_init_rank: this
** rank gives its shard, outputs, gamma and stream; `shard_shapes` holds
** every rank's shard shape (nranks entries, as in collgen_allgather_rmsnorm).
** Same semantics, checks, error codes and bits as collgen_allgather_rmsnorm,
** plus two limits of this mode: buffers must be 16-byte aligned
** (COLLGEN_ERR_ALIGNMENT), and a shard must fit half the staging area
** (COLLGEN_ERR_INVALID_ARG names the staging_bytes to ask for). */
COLLGEN_API int collgen_rank_allgather_rmsnorm(collgen_comm_t *comm, collgen_dtype_t dtype,
                                               int rank, const int64_t *const *shard_shapes,
                                               const void *input, void *out_normed,
                                               void *out_residual, const void *gamma, float eps,
                                               float weight_offset, int group_size,
                                               collgen_stream_t stream);

/* allreduce_residual_rmsnorm on a communicator of collgen_comm_init_rank:
** this rank's x, residual_in, outputs, gamma and stream; `shape` is the
** shape every rank holds. Same semantics, checks, error codes and bits as
** collgen_allreduce_residual_rmsnorm; buffers must be 16-byte aligned
** (COLLGEN_ERR_ALIGNMENT). Calls larger than half the staging area run as
** consecutive row ranges. */
COLLGEN_API int collgen_rank_allreduce_residual_rmsnorm(
    collgen_comm_t *comm, collgen_dtype_t dtype, int rank, const int64_t *shape, const void *x,
    const void *residual_in, void *out_normed, void *residual_out, const void *gamma, float eps,
    float weight_offset, int group_size, collgen_stream_t stream);

/* collgen_allreduce_residual_rmsnorm_fp8 on a communicator of
** collgen_comm_init_rank: this rank's x, residual_in, normed_fp8,
** row_scales (NULL with COLLGEN_FP8_STATIC), residual_out, gamma and
** stream; `shape` is the shape every rank holds. Same semantics, checks,
** error codes and bits as collgen_allreduce_residual_rmsnorm_fp8
** (COLLGEN_ERR_UNSUPPORTED when any rank's GPU is older than sm_89), with
** the limits of collgen_rank_allreduce_residual_rmsnorm: 16-byte aligned
** buffers, and calls larger than half the staging area run as consecutive
** row ranges. */
COLLGEN_API int collgen_rank_allreduce_residual_rmsnorm_fp8(
    collgen_comm_t *comm, collgen_dtype_t dtype, int rank, const int64_t *shape, const void *x,
    const void *residual_in, void *normed_fp8, float *row_scales, void *residual_out,
    const void *gamma, float eps, float weight_offset, collgen_fp8_mode_t mode,
    float static_scale, int group_size, collgen_stream_t stream);

/* broadcast on a communicator of collgen_comm_init_rank: this rank gives
** its input (read on the root only; may be NULL elsewhere), output and
** stream; `shape` is the shape every rank of the group holds. Same
** semantics, checks, error codes and bits as collgen_broadcast. The root's
** input is copied into its staging area (or read where it is when it lies
** in a registered buffer: then every rank must pass its input at the same
** offset of that registration, the symmetric contract); calls larger than
** half the staging area run as consecutive pieces. */
COLLGEN_API int collgen_rank_broadcast(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                       const int64_t *shape, const void *input, void *output,
                                       int root, int group_size, collgen_stream_t stream);

/* scatter on a communicator of collgen_comm_init_rank: this rank gives its
** input (read on the root only; may be NULL elsewhere), output and
** stream; `shape` is the root's input shape, the same on every rank of
** the group. Same semantics, checks, error codes and bits as
** collgen_scatter. On the P2P path the root's input is copied into its
** staging area, so it must fit half of it (else COLLGEN_ERR_INVALID_ARG
** naming staging_bytes): a call is never cut, since pieces would change
** every rank's chunk. Where the root's input lies in a registered buffer
** it is read in place instead, and then every rank must pass its input at
** the same offset of its registration (the symmetric contract; a NULL
** input of a non-root rank then reads the root's staging area, which
** holds nothing). A group routed to NCCL stages nothing. */
COLLGEN_API int collgen_rank_scatter(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                     const int64_t *shape, const void *input, void *output,
                                     int root, int group_size, collgen_stream_t stream);

/* all_gather on a communicator of collgen_comm_init_rank: this rank gives
** its shard, output and stream; `shard_shapes` holds every rank's shard
** shape (nranks entries, as in collgen_all_gather). Same semantics, checks,
** error codes and bits as collgen_all_gather, plus the limit of this mode:
** a shard, and an output that is not 16-byte aligned, must fit half the
** staging area (COLLGEN_ERR_INVALID_ARG names the staging_bytes to ask for). */
COLLGEN_API int collgen_rank_all_gather(collgen_comm_t *comm, collgen_dtype_t dtype, int rank,
                                        const int64_t *const *shard_shapes, const void *input,
                                        void *output, int group_size, collgen_stream_t stream);

/* reduce_scatter_sum on a communicator of collgen_comm_init_rank: this
** rank gives its input, output and stream; `shape` is the shape every rank
** of the group holds. Same semantics, checks, error codes and bits as
** collgen_reduce_scatter_sum. Peers read this rank's whole input: it is
** staged (unless registered) and must fit half the staging area
** (COLLGEN_ERR_INVALID_ARG names the staging_bytes to ask for); a chunk of
** a peer is not a contiguous piece of the input, so the call is not cut.
** Capturable in a CUDA graph. */
COLLGEN_API int collgen_rank_reduce_scatter_sum(collgen_comm_t *comm, collgen_dtype_t dtype,
                                                int rank, const int64_t *shape,
                                                const void *input, void *output,
                                                int group_size, collgen_stream_t stream);

/* reduce_scatter_rmsnorm (and its _fp8 form) on a communicator of
** collgen_comm_init_rank: this rank's x, residual_in (NULL: none), outputs
** ([count_i, cols] for this rank's chunk), gamma and stream; `shape` is
** x's shape, the same on every rank. Same semantics, checks, error codes
** and bits as collgen_reduce_scatter_rmsnorm(_fp8); buffers must be
** 16-byte aligned (COLLGEN_ERR_ALIGNMENT) and x must fit half the staging
** area (COLLGEN_ERR_INVALID_ARG names the staging_bytes to ask for). */
COLLGEN_API int collgen_rank_reduce_scatter_rmsnorm(
    collgen_comm_t *comm, collgen_dtype_t dtype, int rank, const int64_t *shape, const void *x,
    const void *residual_in, void *out_normed, void *residual_out, const void *gamma, float eps,
    float weight_offset, int group_size, collgen_stream_t stream);
COLLGEN_API int collgen_rank_reduce_scatter_rmsnorm_fp8(
    collgen_comm_t *comm, collgen_dtype_t dtype, int rank, const int64_t *shape, const void *x,
    const void *residual_in, void *normed_fp8, float *row_scales, void *residual_out,
    const void *gamma, float eps, float weight_offset, collgen_fp8_mode_t mode,
    float static_scale, int group_size, collgen_stream_t stream);

/* A user buffer registered with collgen_register_buffer. */
typedef struct collgen_buffer collgen_buffer_t;

/* Registers [ptr, ptr + bytes), device memory of this rank's GPU, so that
** the peers' kernels read it directly: a collgen_rank_* call whose peer-read
** input (the input of allreduce_sum, all_gather, reduce_scatter_sum and
** broadcast; allgather_rmsnorm's shard; the residual ops' x) lies inside a registered buffer is not copied into the staging area
** (zero copy). Collective: every rank of the communicator calls it, in the
** same order as its other collective calls, with its own buffer and the
** same `bytes`; bounded by the communicator's timeout (a rank that never
** calls: COLLGEN_ERR_TIMEOUT naming it, and the communicator can register
** nothing more). The buffer is shared by legacy CUDA IPC
** (cuIpcGetMemHandle of its allocation: cudaMalloc, cuMemAlloc) or, when it
** is a cuMem (VMM) allocation, as a POSIX file descriptor (the allocation
** must have been created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, else
** COLLGEN_ERR_UNSUPPORTED). It must lie inside one allocation and start
** 16-byte aligned (COLLGEN_ERR_ALIGNMENT).
** The caller's contract (symmetric buffers, as NCCL's symmetric windows):
** a call that uses a registered input passes, on every rank, the same
** offset into that rank's buffer of the same registration; collgen checks
** only what a rank sees (inside the buffer, alignment) and cannot detect a
** rank that breaks it (its peers would read other bytes). The buffer must
** stay allocated until collgen_deregister_buffer or collgen_comm_destroy.
** On success *handle is the registration; on any error, on every rank,
** nothing stays mapped and *handle is NULL: COLLGEN_ERR_INVALID_ARG (NULL
** arguments, bytes 0, not device memory, a range past its allocation,
** ranks with different bytes: named), _ALIGNMENT, _UNSUPPORTED, _PEER (a
** rank failed: named), _TIMEOUT, _CUDA. On a communicator of
** collgen_comm_create (one process reads every buffer directly) it maps
** nothing and returns COLLGEN_OK with a handle, so code stays portable. */
COLLGEN_API int collgen_register_buffer(collgen_comm_t *comm, void *ptr, size_t bytes,
                                        collgen_buffer_t **handle);

/* Ends a registration: waits for this rank's device (cuCtxSynchronize),
** unmaps the peers' buffers, then waits for every rank to do the same
** (collective, bounded like collgen_register_buffer), so that on return no
** process maps this rank's buffer and it may be freed. Calls queued or
** CUDA graphs captured with the registration must not run afterwards.
** COLLGEN_ERR_INVALID_ARG for NULL, or a handle that is not a live
** registration of `comm` (e.g. deregistered twice: nothing else happens).
** collgen_comm_destroy ends every registration left (not collectively). */
COLLGEN_API int collgen_deregister_buffer(collgen_comm_t *comm, collgen_buffer_t *handle);

/* An application's own all-gather, for programs that already have a
** bootstrap (MPI, torch.distributed): it must block until every rank's
** `bytes` bytes `mine` are in `all`, rank i's at all + i * bytes (the
** caller's own included), and return 0; any other value is a failure, which
** collgen reports as COLLGEN_ERR_PEER. Every rank calls it the same number
** of times with the same `bytes`; collgen calls it from one thread at a time
** per process. collgen cannot bound its duration: a rank that never calls
** it blocks the others for as long as the application's exchange waits.
** File descriptors cannot travel through it (docs/multiprocess.md). */
typedef int (*collgen_allgather_fn)(void *ctx, const void *mine, void *all, size_t bytes);

/* collgen_comm_init_rank with the processes meeting through the
** application's all-gather `fn(ctx, ...)` (MPI, a torch store) instead of a
** unique id: the way to build a communicator whose ranks span hosts. When
** every rank is on one host, collgen opens its socket through `fn` and
** everything is as with collgen_comm_init_rank. Otherwise no memory is
** shared between processes (descriptors cannot cross hosts through `fn`),
** so every group of more than one rank runs on NCCL (forcing
** COLLGEN_TRANSPORT_P2P makes such calls fail with COLLGEN_ERR_NO_P2P).
** Collective; its waits are those of `fn` (not bounded by timeout_ms).
** Errors as collgen_comm_init_rank, and _PEER when `fn` fails. */
COLLGEN_API int collgen_comm_init_rank_callback(collgen_comm_t **comm, int nranks,
                                                collgen_allgather_fn fn, void *ctx, int rank,
                                                int device,
                                                const collgen_comm_options_t *options);

/* ---- For language bindings ------------------------------------------ */

/* The library describes itself, so that a binding (the Python package)
** reads these facts at load time instead of copying this header. Tables,
** each a list of (name, value, detail) entries:
**   "status"     status codes: "INVALID_ARG", -1, 0 (the name without
**                COLLGEN_ERR_; collgen_status_str describes the code)
**   "op"         ops: "allreduce_sum", COLLGEN_OP_*, minimum tensor rank
**   "op_computes" the same ops: "allreduce_sum", COLLGEN_OP_*, 1 for an op
**                that computes on elements (it refuses a copy-only dtype),
**                0 for one that only moves bits ("broadcast")
**   "dtype"      element types: "bf16", COLLGEN_DTYPE_*, bytes per element
**   "dtype_reduces" the same element types: "bf16", COLLGEN_DTYPE_*, 1 when
**                the ops that compute take it, 0 for a copy-only dtype
**                ("i32": moved as bits, never computed on)
**   "fp8"        FP8 output modes: "dynamic", COLLGEN_FP8_*, minimum sm
**   "transport"  transports: "auto", COLLGEN_TRANSPORT_*, 0
**   "rank_state" rank states of collgen_comm_health: "ok", value, 0
**   "struct"     public structs: "collgen_comm_options_t", sizeof, alignof
**   "constant"   the numeric macros above: "MAX_DEVICES" (without COLLGEN_),
**                value, 0
** Returns the number of entries of `table`, or COLLGEN_ERR_INVALID_ARG
** (a negative count) for NULL or an unknown table. Never prints. */
COLLGEN_API int collgen_catalog_count(const char *table);

/* Entry `index` (0 <= index < collgen_catalog_count(table)) of `table`:
** *name (static storage, never freed), *value and *detail as the table
** says; each output may be NULL when not wanted. COLLGEN_ERR_INVALID_ARG,
** with the outputs untouched, for an unknown table or an index out of
** range; the message is in collgen_last_error(). */
COLLGEN_API int collgen_catalog_entry(const char *table, int index, const char **name,
                                      int64_t *value, int64_t *detail);

#ifdef __cplusplus
}
#endif
#endif /* COLLGEN_H */
