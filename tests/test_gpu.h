/*
** test_gpu.h -- helpers shared by the GPU test sources of the test_gpu
** binary (defined in test_gpu.c, which also holds its main()).
*/
#ifndef COLLGEN_TEST_GPU_H
#define COLLGEN_TEST_GPU_H
#include "comm_internal.h" /* white-box: the communicator's fields */
#include "devbuf.h"

/* Name of a driver result, for messages. */
const char *cu_name(CUresult r);
/* Visible CUDA devices; 0 without a driver. */
int gpu_count(void);
/* A communicator of `ranks` ranks over at most two GPUs, round robin;
** ranks sharing a GPU get small grids (max_blocks, default 8) so that all
** of them stay resident. timeout_ms and mask as in collgen_comm_options_t. */
collgen_comm_t *make_comm(int ranks, int max_blocks, int timeout_ms, unsigned mask);
/* One stream per rank of c, and their release. */
void make_streams(collgen_comm_t *c, collgen_stream_t *s);
void free_streams(collgen_comm_t *c, collgen_stream_t *s);
/* Fills n elements with fresh random values (seeded from time and pid). */
void fill_random(collgen_dtype_t dt, void *p, int64_t n);
/* CUDA graphs of one call per rank: capture every rank's stream (global
** mode) around the call, end every capture and instantiate each graph,
** launch each, destroy each. */
void graph_capture_begin(collgen_comm_t *c, const collgen_stream_t *s);
void graph_capture_end(collgen_comm_t *c, const collgen_stream_t *s, CUgraph *graph,
                       CUgraphExec *exec);
void graph_launch(collgen_comm_t *c, const collgen_stream_t *s, CUgraphExec *exec);
void graph_destroy(collgen_comm_t *c, CUgraph *graph, CUgraphExec *exec);
/* One checked allreduce_sum of n elements (test_gpu.c); `runs` rounds of
** fresh data. */
void ar_check(collgen_comm_t *c, collgen_dtype_t dt, int64_t n, int group, int inplace,
              int misalign, int runs);
/* One checked allgather_rmsnorm with shards rows[r] x cols (test_gpu.c). */
void rms_check(collgen_comm_t *c, collgen_dtype_t dt, int group, const int64_t *rows,
               int64_t cols, float eps, float offset);
#endif
