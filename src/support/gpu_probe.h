/*
** gpu_probe.h -- the GPU count for programs that fork ranks (`collgen demo
** --processes`, `collgen-bench --processes`): a process that has
** initialized CUDA must not fork processes that use it, so the count comes
** from a short-lived child. Test and demo support (collgen_support).
*/
#ifndef COLLGEN_GPU_PROBE_H
#define COLLGEN_GPU_PROBE_H
#include <stddef.h>

/* The number of visible GPUs, counted in a child process (this one never
** initializes CUDA and can fork afterwards), within 60 s; 0 with the reason
** in why (no driver, no device, the child failed). */
int collgen__gpu_count_in_child(char *why, size_t n);
#endif
