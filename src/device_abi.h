/*
** device_abi.h -- limits of the device interface shared by the host and
** the generated kernels (pushed into Lua as catalog.limits).
*/
#ifndef COLLGEN_DEVICE_ABI_H
#define COLLGEN_DEVICE_ABI_H
#include "collgen.h"

/* Blocks per launch; the signal buffer has one slot per (block, peer). */
#define COLLGEN_MAX_BLOCKS 256
/* LL lines per (bank, sender), 8 payload bytes each: 256 KiB per message. */
#define COLLGEN_LL_LINES 32768
#endif
