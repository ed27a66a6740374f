/*
** device_abi.h -- the device interface, described once: the limits, the
** kernels' parameter struct and the signal buffer layout.
**
** The X-macros below are the only description of both structs. This header
** defines the host structs from them (collgen__kparams, collgen__signal);
** gen/lua_catalog.c pushes the same rows, with the host compiler's offsetof
** and sizeof, into Lua as catalog.abi, and the templates render the device
** structs (collgen_kparams, collgen_signal) from that table together with
** static_asserts that every device offset and size equals the host's.
**
** A row is one of
**   F(type, name, dims, comment)                     one type on both sides
**   FP(host_type, device_type, name, dims, comment)  a host/device type pair
** where `type` is spelled as C and CUDA C both accept it, `dims` is empty or
** array dimensions written with the named limits, and `comment` is the
** comment the generated code prints after the field.
*/
#ifndef COLLGEN_DEVICE_ABI_H
#define COLLGEN_DEVICE_ABI_H
#include "collgen.h"

/* Blocks per launch; the signal buffer has one slot per (block, peer). */
#define COLLGEN_MAX_BLOCKS 256
/* Blocks per launch of a group of one, which touches no signal slot: the
** CUDA limit of gridDim.x. */
#define COLLGEN_LOCAL_MAX_GRID 2147483647
/* LL lines per (bank, sender), 8 payload bytes each: 256 KiB per message. */
#define COLLGEN_LL_LINES 32768

/* A rank's host-mapped status record (COLLGEN_STATUS_WORDS words), which
** its kernels write (templates/signal.cuh.tpl, record_timeout) and the host
** reads while they run. Word indices: */
#define COLLGEN_ST_STOPPED 0   /* 0 running, else COLLGEN_STOP_*: why it stopped */
#define COLLGEN_ST_RANK 1      /* group rank of the block that stopped */
#define COLLGEN_ST_PEER 2      /* group rank it waited for */
#define COLLGEN_ST_BLOCK 3     /* block that stopped */
#define COLLGEN_STATUS_WORDS 4
#define COLLGEN_STOP_TIMEOUT 1 /* the wait bound passed */
#define COLLGEN_STOP_ABORTED 2 /* read the abort mark (this or another process aborted) */

/* collgen_comm_abort (runtime/comm_abort.c) overwrites the count words of
** every signal buffer (everything before ll_token), then every byte, with
** 0xFF, so every word a kernel reads or waits on reads COLLGEN_ABORT_MARK;
** kernels stop on it (templates/signal.cuh.tpl). Counters and epochs skip
** this value. */
#define COLLGEN_ABORT_FILL 0xFF

/* Programmatic dependent launch (griddepcontrol) needs sm_90: the oldest
** arch the communicator's `pdl` option accepts, and the one from which the
** kernels wait for their predecessor (templates/signal.cuh.tpl). */
#define COLLGEN_PDL_MIN_SM 90
#define COLLGEN_ABORT_MARK 0xFFFFFFFFu

/* The limits the device structs are dimensioned with, rendered into the
** kernels as #defines of the same names (catalog.abi.limits) and given to
** the planner as catalog.limits.<name without COLLGEN_>.
** L(name, comment). */
#define COLLGEN_ABI_LIMITS(L)                                                      \
  L(COLLGEN_MAX_DEVICES, "ranks per communicator: per-rank slots")                 \
  L(COLLGEN_MAX_BLOCKS, "blocks per launch: per-block signal slots")               \
  L(COLLGEN_LOCAL_MAX_GRID, "blocks per launch of a group of one (no signal slots)") \
  L(COLLGEN_LL_LINES, "16-byte LL lines per (bank, sender)")                     \
  L(COLLGEN_ABORT_MARK, "a signal word after collgen_comm_abort (never a count)") \
  L(COLLGEN_STOP_TIMEOUT, "status record: a wait passed its bound")               \
  L(COLLGEN_STOP_ABORTED, "status record: a wait or count read the abort mark")  \
  L(COLLGEN_PDL_MIN_SM, "programmatic dependent launch: oldest arch (sm_90 = 90)")

/* Launch parameters, passed by value (one kernel parameter). */
#define COLLGEN_KPARAMS_FIELDS(F, FP)                                              \
  F(const void *, in, [COLLGEN_MAX_DEVICES],                                       \
    "per-rank inputs / row shards (P2P pointers)")                                 \
  F(void *, out, [COLLGEN_MAX_DEVICES],                                            \
    "every rank's output; allreduce_residual_rmsnorm: every residual_out")         \
  F(void *, signal, [COLLGEN_MAX_DEVICES], "per-rank signal buffers")              \
  F(void *, normed, ,                                                              \
    "rmsnorm ops: this rank's normed output (e4m3 bytes with FP8 output)")         \
  F(void *, residual, , "allgather_rmsnorm: this rank's gathered rows")            \
  F(const void *, gamma, , "rmsnorm ops: this rank's gamma[cols]")                 \
  F(const void *, residual_in, ,                                                   \
    "allreduce_residual_rmsnorm: this rank's residual_in")                         \
  F(unsigned int *, error, , "this rank's error record (host-mapped)")             \
  F(unsigned long long, count, ,                                                   \
    "allreduce: elements; rmsnorm ops: (gathered) rows")                           \
  F(unsigned long long, row_start, [COLLGEN_MAX_DEVICES + 1],                      \
    "rmsnorm: first gathered row of each rank")                                    \
  F(unsigned long long, timeout_ns, , "bound on every barrier wait")               \
  F(float, eps, , "rmsnorm epsilon")                                               \
  F(float, weight_offset, , "rmsnorm: added to gamma (1.0 = Gemma style)")         \
  F(unsigned int, rank, , "this rank's index in its group")                        \
  F(unsigned int, group_base, , "communicator index of the group's rank 0")       \
  /* last, so the fields above keep the offsets the kernels were tuned with  \
  ** (moving them made two LL allreduce kernels spill on sm_80) */            \
  F(float, static_scale, , "FP8 static output: normed is divided by it")           \
  F(float *, row_scales, ,                                                         \
    "FP8 dynamic output: this rank's scale of each row")                    \
  F(unsigned int, root, , "broadcast: the group rank that sends")

/* One rank's signal buffer (docs/signals.md). Peer slots are indexed by
** communicator rank. */
#define COLLGEN_SIGNAL_FIELDS(F, FP)                                               \
  F(unsigned int, counter, [COLLGEN_MAX_BLOCKS][COLLGEN_MAX_DEVICES],              \
    "[block][peer]: barriers passed (local)")                                      \
  F(unsigned int, peer_flag, [2][COLLGEN_MAX_BLOCKS][COLLGEN_MAX_DEVICES],         \
    "[barrier % 2][block][peer]: written by peers")                                \
  F(unsigned int, ll_epoch, [COLLGEN_MAX_DEVICES],                                 \
    "LL: calls shared with each peer")                                             \
  F(unsigned int, ll_done, , "LL: blocks of the running call that finished")       \
  F(unsigned int, abort_flag, , "nonzero: collgen_comm_abort ran (read by hosts)")  \
  F(unsigned int, ll_pad, [6], "pads the header to 64 bytes")                   \
  F(unsigned int, ll_token, [2][COLLGEN_MAX_BLOCKS][COLLGEN_MAX_DEVICES],          \
    "LL: [epoch % 2][block][sender]")                                              \
  FP(collgen__u32x4, uint4, ll_lines, [2][COLLGEN_MAX_DEVICES][COLLGEN_LL_LINES],  \
     "LL: [epoch % 2][sender][line]")

/* The host's stand-in for CUDA's uint4: same size and alignment. */
typedef struct {
  _Alignas(16) unsigned int v[4];
} collgen__u32x4;

#define COLLGEN__ABI_MEMBER(type, name, dims, comment) type name dims;
#define COLLGEN__ABI_MEMBER_PAIR(host_type, device_type, name, dims, comment) \
  host_type name dims;

typedef struct {
  COLLGEN_KPARAMS_FIELDS(COLLGEN__ABI_MEMBER, COLLGEN__ABI_MEMBER_PAIR)
} collgen__kparams;

typedef struct {
  COLLGEN_SIGNAL_FIELDS(COLLGEN__ABI_MEMBER, COLLGEN__ABI_MEMBER_PAIR)
} collgen__signal;

_Static_assert(sizeof(collgen__u32x4) == 16 && _Alignof(collgen__u32x4) == 16,
               "collgen__u32x4 must match CUDA's uint4");

#endif
