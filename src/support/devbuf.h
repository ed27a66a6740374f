/*
** devbuf.h -- device-buffer helpers for the demo, the GPU tests and the
** benchmark: allocate on a rank's device, copy, create streams. Test
** support (collgen_support), not part of libcollgen: it uses the runtime's
** hidden collgen__comm_* accessors (comm_device.h), so it links with
** collgen_static only.
*/
#ifndef COLLGEN_DEVBUF_H
#define COLLGEN_DEVBUF_H
#include "comm_device.h"

/* Allocates `bytes` on rank r's device (bytes 0 gives a 256-byte buffer). */
int collgen__dev_alloc(collgen_comm_t *c, int r, size_t bytes, void **ptr);
void collgen__dev_free(collgen_comm_t *c, int r, void *ptr);
int collgen__dev_upload(collgen_comm_t *c, int r, void *dst, const void *src, size_t bytes);
int collgen__dev_download(collgen_comm_t *c, int r, void *dst, const void *src, size_t bytes);
/* Fills with a byte pattern (poison before a run). */
int collgen__dev_fill(collgen_comm_t *c, int r, void *dst, unsigned char byte, size_t bytes);
int collgen__dev_stream_create(collgen_comm_t *c, int r, collgen_stream_t *s);
void collgen__dev_stream_destroy(collgen_comm_t *c, int r, collgen_stream_t s);
/* Synchronizes the stream of every rank this process drives (all of a
** collgen_comm_create communicator, the own rank of collgen_comm_init_rank's;
** streams[] is indexed by rank); returns COLLGEN_ERR_CUDA on failure, else
** collgen_comm_check's code. */
int collgen__dev_sync_all(collgen_comm_t *c, const collgen_stream_t *streams);
#endif
