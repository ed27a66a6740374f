/*
** generator.h -- what the layers above the generator (the runtime, the CLI,
** the tests) call besides collgen.h's collgen_generator_* functions.
*/
#ifndef COLLGEN_GENERATOR_H
#define COLLGEN_GENERATOR_H
#include "cache.h"
#include "internal.h"

/* Cache directory of a generator, or NULL when it caches in memory only. */
const char *collgen__generator_cache_dir(const collgen_generator_t *g);

/* The runtime's per-call lookup: plan and cache entry of a shape, with one
** memo lookup once the shape was seen (no key or name strings formatted).
** *plan points into the generator's memo, or at `spare` when the memo is
** full; *entry (cache.h) stays valid for the generator's lifetime. */
int collgen__resolve_kernel(collgen_generator_t *g, const collgen_shape_t *shape,
                            collgen_plan_t *spare, const collgen_plan_t **plan,
                            const collgen__entry **entry);

/* Builds ahead, on up to `threads` threads (this one included), every
** kernel of shapes[0..count) that neither g's memory nor its disk cache
** holds, and adds each to g's cache (memory, and disk where writable), so
** that the caller's fetches that follow are hits. Each thread renders with
** a Lua state of its own; NVRTC compiles programs of different threads at
** once. Fewer than two kernels to build, or NVRTC missing: builds nothing
** (the caller's own fetch then compiles, or reports why it cannot). A
** kernel that fails to build is left out: the caller's fetch meets the
** failure again and reports it. Returns the number of kernels built. */
int collgen__generator_build_ahead(collgen_generator_t *g, const collgen_shape_t *shapes,
                                   int count, int threads);
#endif
