/*
** comm_device.h -- what the layer above the runtime (src/support, the CLI,
** the tests) may know of a communicator besides collgen.h: its ranks, the
** context of a rank, whether this process drives it, and its error record.
** comm_internal.h (the communicator's fields) stays inside runtime/
** (tests/check_layers.cmake checks it).
*/
#ifndef COLLGEN_COMM_DEVICE_H
#define COLLGEN_COMM_DEVICE_H
#include "driver.h"

/* The number of ranks of c. */
int collgen__comm_ranks(const collgen_comm_t *c);
/* The retained primary context of rank r (NULL for a rank another process
** drives). */
CUcontext collgen__comm_context(const collgen_comm_t *c, int r);
/* The one rank this process drives, or -1 when it drives every rank. */
int collgen__comm_self(const collgen_comm_t *c);
/* 1 if this process drives rank r (every rank in the one-process mode). */
int collgen__comm_is_local(const collgen_comm_t *c, int r);
/* Records a failed driver call `what` in c's error record (read by
** collgen_comm_last_error) and returns COLLGEN_ERR_CUDA; COLLGEN_OK when r
** is CUDA_SUCCESS. */
int collgen__comm_cu_fail(collgen_comm_t *c, CUresult r, const char *what);
/* COLLGEN_ERR_TIMEOUT when a kernel gave up waiting (message in c->err),
** else COLLGEN_OK. */
int collgen__comm_check_errors(collgen_comm_t *c);
#endif
