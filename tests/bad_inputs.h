/*
** bad_inputs.h -- the table of refused calls through the public API, shared
** by test_hostpath (stand-in driver, CI) and test_gpu (the GPU machine).
** Every case names the call, the status it must return and a fragment of
** its message. The caller checks afterwards that nothing was launched and
** nothing was written.
*/
#ifndef COLLGEN_BAD_INPUTS_H
#define COLLGEN_BAD_INPUTS_H
#include "comm_internal.h" /* white-box: the communicator's fields */
#include "devbuf.h"

#define BAD_BUFFERS 6            /* per rank */
#define BAD_BUFFER_BYTES (1 << 16)
#define BAD_POISON 0xab

/* A 2-rank communicator with BAD_BUFFERS poisoned device buffers per rank. */
typedef struct {
  collgen_comm_t *c;
  collgen_stream_t streams[2];
  void *buf[2][BAD_BUFFERS];
} bad_env;

/* Creates the environment over devices[0..1] (options may be NULL). */
void bad_env_create(bad_env *e, const int devices[2], const collgen_comm_options_t *options);
/* Checks every buffer still holds BAD_POISON, then frees everything. */
void bad_env_check_and_destroy(bad_env *e);

/* Runs every case of the table with Criterion expectations; returns the
** number of cases run. `ndevices` is the number of visible devices. */
int bad_inputs_run(bad_env *e, int ndevices);
#endif
