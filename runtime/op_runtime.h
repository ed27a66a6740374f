/*
** op_runtime.h -- one descriptor per op and the one driver that runs any
** of them: validate every group -> plan each group -> load its kernel on
** every rank -> fill each rank's parameters -> launch every rank.
**
** An op supplies: its buffer roles and scalar arguments (once,
** COLLGEN_ROLES_<op> and COLLGEN_SCALARS_<op> in src/catalog.h: which
** roles are optional or follow the FP8 mode, each scalar's check, all read
** by the driver), which role pairs may be the same buffer, how a per-rank
** call larger than the staging area is cut (pieces), measure_group (checks
** one group's shapes, gives each buffer's extent per rank and the
** planner's view of the group) and fill_rank (one rank's op-specific
** kernel parameters). What an
** algorithm needs of the runtime the plan says (collgen_plan_t: the roles
** peers read or write, or a copy instead of a kernel). The driver does all
** the rest once for every op: argument and pointer checks (NULL, element
** alignment, overlap between every pair of buffers of a rank), the P2P
** check, planning, loading, common parameters, the staging of the
** one-process-per-GPU mode, copies and launches. The steps are per group
** and per rank so a mode with one rank per process can call them.
*/
#ifndef COLLGEN_OP_RUNTIME_H
#define COLLGEN_OP_RUNTIME_H
#include "comm_internal.h"

/* ROLE_<id> = k for role k of an op: an op file writes
** enum { COLLGEN_ROLES_<OP>(COLLGEN_ROLE_ENUM) }; */
#define COLLGEN_ROLE_ENUM(id, label, is_output, elem_bytes, use) ROLE_##id,
/* SCALAR_<id> = j for scalar j of an op (call->scalars[j]): an op file
** writes enum { COLLGEN_SCALARS_<OP>(COLLGEN_SCALAR_ENUM) }; */
#define COLLGEN_SCALAR_ENUM(id, type, check, dflt, doc) SCALAR_##id,

/* The arguments of one call, op-neutral. buffers[k][r] is rank r's buffer
** of role k (the op's role k, catalog.h). */
typedef struct {
  collgen_op_t op;
  collgen_dtype_t dtype;
  int tensor_rank;
  const int64_t *const *shapes;        /* per rank, tensor_rank dims each */
  const void *const *buffers[COLLGEN_MAX_ROLES];
  unsigned unused_roles;               /* bit k: the call has no role k (an
                                          optional role left out, or one the
                                          FP8 mode does not write; its array
                                          may be NULL; nothing checked). Set
                                          by the driver. */
  double scalars[COLLGEN_MAX_SCALARS]; /* the op's scalars, in its catalog
                                          order (SCALAR_<id>) */
  int group_size;                      /* resolved by the driver (0 = all) */
  const collgen_stream_t *streams;
  /* A collgen_rank_* call (one process per GPU): only this process's rank
  ** (c->self) has buffers and a stream; every rank's shape is given. */
  int per_rank;
} collgen__call;

/* What measure_group learned about one group (ranks base..base+size-1). */
typedef struct collgen__group {
  int64_t bytes[COLLGEN_MAX_ROLES][COLLGEN_MAX_DEVICES]; /* extent per role, rank; 0 = unused */
  int64_t rank_rows[COLLGEN_MAX_DEVICES]; /* op-defined per-rank sizes (shard rows) */
  /* In place at an offset: rank r's buffer of a same_buffer_ok pair's
  ** first role may sit this many bytes into its second role's buffer (and
  ** end inside it); 0 (the default): exactly the same buffer. */
  int64_t inplace_at[COLLGEN_MAX_DEVICES];
  collgen_shape_t shape;  /* the planner's view; elems/rows/cols/inplace set by the op */
  int empty;              /* nothing to do for this group */
} collgen__group;

struct collgen__local_call; /* below */

typedef struct {
  collgen_op_t op;        /* its roles: collgen__op_find(op)->roles */
  /* Role pairs that may be exactly the same buffer (in place; the first
  ** of a pair at g->inplace_at[r] bytes into the second); any other
  ** overlap between a rank's buffers, where one of them is written, is
  ** refused. Terminated by {-1, -1}. */
  int same_buffer_ok[4][2];
  /* How a collgen_rank_* call larger than half the staging area runs
  ** (op_rank.c): COLLGEN__PIECES_NONE (it must fit: the staging plan
  ** refuses it, naming staging_bytes), _ELEMS (consecutive runs of
  ** elements, every role advancing by its element) or _ROWS (consecutive
  ** runs of rows of [rows, cols]; the roles of fixed_roles, such as gamma,
  ** stay the same for every piece). Every rank cuts alike, so the pieces
  ** give the bits of one call. */
  int pieces;
  unsigned fixed_roles;   /* _ROWS: roles the same for every piece (gamma) */
  unsigned per_row_roles; /* _ROWS: roles of one element per row (row scales) */
  /* One process per GPU (op_staging.c): 1 when a buffer that is not
  ** 16-byte aligned goes through staging (the planner saw aligned
  ** buffers), 0 when such a call is refused with COLLGEN_ERR_ALIGNMENT. */
  int stage_unaligned;
  /* Checks the shapes of the group [base, base+size) and fills g: extents
  ** of every role per rank (0 for the call's unused_roles), shape fields,
  ** empty. g->shape already holds the common fields; the op may clear
  ** g->shape.aligned16 when its own offsets into the buffers are not
  ** 16-byte aligned (kept in both process models). Must not launch or
  ** write anything. */
  int (*measure_group)(collgen_comm_t *c, const collgen__call *call, int base, int size,
                       collgen__group *g);
  /* After the pointers were checked: lets the op derive flags from them
  ** (e.g. in place) before planning. NULL if none. */
  void (*finish_group)(const collgen__call *call, int base, int size, collgen__group *g);
  /* Writes rank r's op-specific parameters; the driver wrote the common
  ** ones (signal pointers, error record, timeout, rank, group base). */
  void (*fill_rank)(const collgen__call *call, const collgen__group *g, int base, int size,
                    int r, collgen__kparams *kp);
  /* NCCL path (a group routed to NCCL, docs/multinode.md). nccl_local
  ** runs first, before anything is queued: it checks what this path needs
  ** (refusing as the P2P path would) and fills `local` with the op as a
  ** call on rank r alone (a group of one) over what the exchange delivers,
  ** or sets local->call.op to -1 when the exchange is the whole op.
  ** nccl_exchange then queues the collective part on `s` through this
  ** rank's NCCL communicator of the group (its ranks in group order). */
  int (*nccl_local)(collgen_comm_t *c, const collgen__call *call, const collgen__group *g,
                    int base, int size, int r, struct collgen__local_call *local);
  int (*nccl_exchange)(collgen_comm_t *c, const collgen__call *call,
                       const collgen__group *g, int base, int size, int r,
                       collgen__nccl_comm_t comm, CUstream s);
} collgen__op_runtime;

/* A call over one rank that finishes an op on the NCCL path: `call` with
** its arrays held here. */
typedef struct collgen__local_call {
  collgen__call call;
  int64_t shape[8];
  const int64_t *shapes[COLLGEN_MAX_DEVICES];
  const void *buffers[COLLGEN_MAX_ROLES][COLLGEN_MAX_DEVICES];
  collgen_stream_t streams[COLLGEN_MAX_DEVICES];
} collgen__local_call;

/* Starts `local` as a copy of rank r's part of `call`, on rank r alone:
** group size 1, the same buffers and scalars, shape `shape` (tensor_rank
** dims); the op's nccl_local then replaces the buffers the exchange
** feeds. */
void collgen__local_call_init(collgen__local_call *local, const collgen__call *call, int r,
                              const int64_t *shape, int tensor_rank);

/* Runs rank c->self's part of a validated call whose group [base,
** base+size) routes to NCCL (op_nccl.c): nccl_local, then planning and
** loading of the local kernel, then the exchange, then the launch. */
int collgen__nccl_group_run(collgen_comm_t *c, const collgen__op_runtime *rt,
                            const collgen__call *call, const collgen__group *g, int base,
                            int size);

/* The NCCL exchange of the gathering ops (allgather_rmsnorm, all_gather):
** rank r of group [base, base+size) sends its units[r] * unit_elems
** elements of dtype at `in` and receives every rank's, in group-rank
** order, into `gathered`. Equal shards: one ncclAllGather; uneven ones: a
** send to and a receive from every peer with data, in one NCCL group, and
** a copy of this rank's own (none when `in` already sits at its offset). */
int collgen__nccl_gather(collgen_comm_t *c, collgen_dtype_t dtype, const int64_t *units,
                         int64_t unit_elems, int base, int size, int r, const void *in,
                         void *gathered, collgen__nccl_comm_t comm, CUstream s);

/* The parameters every kernel takes (signal pointers, error record,
** timeout, rank, group base) for rank r of group [base, base+size). */
void collgen__common_params(const collgen_comm_t *c, int base, int size, int r,
                            collgen__kparams *kp);
/* The planner's view of a call's group, before the op adds its sizes. */
void collgen__common_shape(const collgen_comm_t *c, const collgen__call *call, collgen_shape_t *s);
/* Launches rank r's kernel fn (grid x block, parameters kp) on `stream`
** in r's context (nothing when the test option launch_mask leaves r out). */
int collgen__launch(collgen_comm_t *c, CUfunction fn, int grid, int block,
                    const collgen__kparams *kp, int r, CUstream stream);

/* The descriptor of every op of COLLGEN_OP_MAP (one file each:
** runtime/op_<id>.c). */
#define COLLGEN_RT_DECL(NAME, value, id, tpl, min_rank, computes, fp8) \
  extern const collgen__op_runtime collgen__rt_##id;
COLLGEN_OP_MAP(COLLGEN_RT_DECL)
#undef COLLGEN_RT_DECL

/* Runs one call of any op: everything is validated before anything is
** loaded, and every kernel is loaded on every rank before any launch.
** Returns COLLGEN_OK or an error with c->err (or the thread-local message
** when c is NULL) saying why; on error nothing was launched or written. */
int collgen__op_run(collgen_comm_t *c, collgen__call *call);

/* Checks the call's scalars as their catalog rows say, and works out
** which roles it uses (call->unused_roles): an optional role none of whose
** entries is set, and a role its FP8 mode does not write (which must then
** be NULL), are unused; any other role's array must be given. Writes
** c->err and returns an error otherwise (op_arguments.c). */
int collgen__check_arguments(collgen_comm_t *c, collgen__call *call);

/* The parameters of the ops that move byte ranges (all_gather, scatter:
** roles input 0 and output 1): in[k] and out[k], group rank k's input and
** output; row_start[k], the byte offset of rank k's range, rank_rows[]
** elements each (row_start[size] = their sum); count = that sum
** (op_all_gather.c). */
void collgen__fill_byte_ranges(const collgen__call *call, const collgen__group *g, int base,
                               int size, collgen__kparams *kp);

/* ---- The RMSNorm family (op_rmsnorm.c) ---- */
/* The RMSNorm parameters of rank r's kernel: gamma (rank r's buffer of role
** gamma_role), the row count of group g's shape, eps, and weight_offset as
** the dtype holds it (the kernels add it in the dtype's precision). Every
** RMSNorm op's scalars start with COLLGEN_SCALARS_NORM (eps,
** weight_offset). */
void collgen__norm_params(const collgen__call *call, const collgen__group *g, int r,
                          int gamma_role, collgen__kparams *kp);

/* The FP8 output parameters of rank r's kernel for the ops with FP8 output
** (COLLGEN_ROLES_RESIDUAL_RMSNORM's roles, COLLGEN_SCALARS_FP8 after the
** norm scalars): normed (in the dtype or as e4m3), row scales, the static
** scale. */
void collgen__norm_fp8_params(const collgen__call *call, int r, collgen__kparams *kp);

/* The FP8 mode of a call of an op with FP8 output (its scalar fp8). */
collgen_fp8_mode_t collgen__call_fp8(const collgen__call *call);

/* COLLGEN_ERR_UNSUPPORTED (with c->err) when a rank's arch lacks what FP8
** output mode `fp8` needs (catalog: COLLGEN_FP8_MAP), INVALID_ARG for an
** unknown mode; COLLGEN_OK for COLLGEN_FP8_NONE and any arch. */
int collgen__check_fp8_arch(collgen_comm_t *c, collgen_fp8_mode_t fp8);

/* For ops whose ranks all hold one shape: checks that every rank of the
** group [base, base+size) has rank base's shape, with no negative
** dimension and at most COLLGEN_MAX_ELEMS elements; *elems = its element
** count. Writes c->err and returns COLLGEN_ERR_INVALID_ARG otherwise. */
int collgen__group_same_shape(collgen_comm_t *c, const collgen__call *call, int base, int size,
                              int64_t *elems);

/* ---- One process per GPU: staging (op_staging.c) ---- */
/* Rank r's staging area at `offset`, as mapped in this process. Each area
** has two regions of staging_bytes / 2: IN at 0 (what peers read) and OUT
** at staging_bytes / 2 (what peers write, and this rank's own outputs that
** cannot take the kernel's stores in place). */
void *collgen__staging_at(const collgen_comm_t *c, int r, size_t offset);
/* Queues a device-to-device copy on s (nothing for 0 bytes). */
int collgen__stage_copy(collgen_comm_t *c, void *dst, const void *src, size_t bytes, CUstream s);
/* COLLGEN_ERR_INVALID_ARG (naming `what` and the staging size to ask for)
** when `bytes` do not fit one staging region. */
int collgen__stage_fits(collgen_comm_t *c, const char *what, size_t bytes);
/* COLLGEN_ERR_ALIGNMENT unless every used buffer of rank r is 16-byte
** aligned (ops whose staging does not take any alignment). */
int collgen__stage_check_aligned(collgen_comm_t *c, const collgen__op_runtime *rt,
                                 const collgen__call *call, const collgen__group *g, int r);

/* How rank r's kernel of one planned group reaches its buffers in the
** one-process-per-GPU mode, where the kernel reaches the peers' signal
** buffers, staging areas and registered buffers only, never their user
** buffers: `view` is the call with every role's array replaced by what
** the kernel must use (peers' slots included), and the copies to queue
** before and after the launch. */
typedef struct {
  collgen__call view;
  const void *at[COLLGEN_MAX_ROLES][COLLGEN_MAX_DEVICES];
  struct collgen__stage_copy_op {
    void *dst;
    const void *src;
    size_t bytes;
  } in[COLLGEN_MAX_ROLES], out[COLLGEN_MAX_ROLES];
  int nin, nout;
} collgen__staging;

/* Works out st for rank r of group g [base, base+size) planned as `plan`
** (its peer_reads and peer_writes), from the plan alone, never an
** algorithm's name. Each role peers read is read in place when r's buffer
** of it is registered (collgen__registered_input), else copied into region
** IN; each role peers write is written into region OUT and copied back;
** an output of r's alone goes through region OUT when its buffer is a
** registered role that peers read, or (rt->stage_unaligned) is not 16-byte
** aligned; an unaligned input of r's alone is copied into region IN. With
** rt->stage_unaligned 0 an unaligned buffer is COLLGEN_ERR_ALIGNMENT. Roles
** share a region in role order, each at a 16-byte aligned offset, the
** peers' roles first (their offsets follow from every rank's extents, so
** every rank computes the same); more than a region holds is
** COLLGEN_ERR_INVALID_ARG. Queues nothing. */
int collgen__staging_plan(collgen_comm_t *c, const collgen__op_runtime *rt,
                          const collgen__call *call, const collgen__group *g,
                          const collgen_plan_t *plan, int base, int size, int r,
                          collgen__staging *st);

/* Queues st's copies into staging (when = 0) or back out of it (1) on s. */
int collgen__staging_copies(collgen_comm_t *c, const collgen__staging *st, int when, CUstream s);

/* Zero copy (registered buffers, comm_register.c): *used = 1 when rank r's
** buffer of `role` lies inside one of this rank's registrations and is
** 16-byte aligned; then, when `at` is not NULL, at[base+k] is rank base+k's
** buffer at the same offset of that registration (the symmetric contract).
** *used = 0 (stage it) otherwise; COLLGEN_ERR_INVALID_ARG when the buffer
** runs past the end of its registration. */
int collgen__registered_input(collgen_comm_t *c, const collgen__op_runtime *rt,
                              const collgen__call *call, const collgen__group *g, int role,
                              int base, int size, int r, const void **at, int *used);

/* The ways a per-rank call is cut (collgen__op_runtime.pieces). */
#define COLLGEN__PIECES_NONE 0
#define COLLGEN__PIECES_ELEMS 1
#define COLLGEN__PIECES_ROWS 2

/* ---- The collgen_rank_* entry points (op_rank.c) ---- */
/* Runs a collgen_rank_* call: `call` holds the op, dtype, tensor rank,
** scalars and group size; every rank holds `shape` (NULL: call->shapes is
** every rank's already); mine[k] is this rank's buffer of role k (NULL:
** none; the driver decides whether the role may be left out). A call
** larger than half the staging area is cut as the op's descriptor says
** (pieces). */
int collgen__rank_run(collgen_comm_t *c, collgen__call *call, const int64_t *shape,
                      const void *const *mine, collgen_stream_t stream);

/* collgen_rank_run of `pc` whose ranks all hold `shape` (the entry points
** of the ops whose ranks share one shape), or with pc->shapes as every
** rank's when `shape` is NULL (op_call.c). */
int collgen__rank_run_call(collgen_comm_t *comm, const collgen_call_t *pc,
                           const int64_t *shape);

/* The descriptor of an op, or NULL for an unknown one. */
const collgen__op_runtime *collgen__op_runtime_find(collgen_op_t op);

/* Sets shape->arch to the arch of rank `base`, the group's first rank:
** the arch every kernel of that group is built for. */
void collgen__group_arch(const collgen_comm_t *c, collgen_shape_t *shape, int base);

/* Plans `shape` (arch set here from rank base) for the group [base,
** base+size), and unless the plan is a copy (plan->copy_from >= 0: no
** kernel), fetches its cubin through the cache and loads it on every
** local rank of the group: fn[r] for each. *plan (when not NULL) is the
** plan. Loading waits for an idle device (CUDA driver behaviour). */
int collgen__group_prepare(collgen_comm_t *c, collgen_shape_t *shape, int base, int size,
                           CUfunction *fn, collgen_plan_t *plan);

/* Finds or loads the kernel of cache entry `entry` in rank r's context. */
struct collgen__entry;
int collgen__kernel_load(collgen_comm_t *c, int r, const struct collgen__entry *entry,
                         CUfunction *fn);
#endif
