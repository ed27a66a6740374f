/*
** kparams.h -- host mirror of the kernels' parameter struct and signal
** buffer (templates/common.cuh.tpl, templates/signal.cuh.tpl). The template
** conformance test checks the cubins' parameter size against sizeof here.
*/
#ifndef COLLGEN_KPARAMS_H
#define COLLGEN_KPARAMS_H
#include <stdint.h>

#include "device_abi.h"

typedef struct {
  const void *in[8];
  void *out[8];
  void *signal[8];
  void *normed;
  void *residual;
  const void *gamma;
  unsigned int *error;
  unsigned long long count;
  unsigned long long row_start[9];
  unsigned long long timeout_ns;
  float eps;
  float weight_offset;
  unsigned int rank;
  unsigned int group_base;
} collgen__kparams;

/* One rank's signal buffer: counters and peer flags (see signal.cuh.tpl). */
typedef struct {
  unsigned int counter[COLLGEN_MAX_BLOCKS][8];
  unsigned int peer_flag[2][COLLGEN_MAX_BLOCKS][8];
  unsigned int ll_epoch[8];
  unsigned int ll_done;
  unsigned int ll_pad[7];
  unsigned int ll_token[2][COLLGEN_MAX_BLOCKS][8];
  unsigned int ll_lines[2][8][COLLGEN_LL_LINES][4];
} collgen__signal;

/* Words of a rank's host-mapped error record: {flag, rank, peer, block}. */
#define COLLGEN_ERROR_WORDS 4
#endif
