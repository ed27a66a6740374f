/*
** cache.h -- the cubin cache: an in-memory table in front of an on-disk
** store of checksummed entries (layout in docs/cache.md).
*/
#ifndef COLLGEN_CACHE_H
#define COLLGEN_CACHE_H
#include <stdint.h>
#include <stdio.h>

#include "internal.h"

#define COLLGEN_CACHE_FORMAT 1
/* The largest entry file (header + cubin) the cache reads or writes:
** 64 MiB, far above any real cubin (tens to hundreds of KiB). A larger
** file is refused from its size alone, before anything is read. */
#define COLLGEN_CACHE_ENTRY_MAX_BYTES ((uint64_t)64 << 20)

/* One cache entry: the cubin plus what collgen needs without parsing it. */
typedef struct collgen__entry {
  uint8_t key[32];
  uint8_t *cubin;          /* owned by the entry */
  size_t size;
  int registers;
  int spill_bytes;
  int nvrtc_major, nvrtc_minor;
  char kernel[96];
  char canonical[256];
  struct collgen__entry *next; /* memory-table chain */
} collgen__entry;

typedef struct collgen__cache collgen__cache;

/* Opens a cache at `dir` (NULL = default location), creating missing
** folders 0700 (a symlink where entries/ or tmp/ belongs is replaced by a
** folder). A directory this process cannot write but whose entries/ is a
** real folder it can open is used read-only: its entries are served, new
** ones stay in memory. Anything else unusable gives a memory-only cache.
** Either way one warning is logged (once per process, directory and kind);
** this never fails except for lack of memory. */
int collgen__cache_open(collgen__cache **out, const char *dir);
void collgen__cache_close(collgen__cache *c);
/* The directory entries are read from (writable or not), or NULL when the
** cache is memory only. */
const char *collgen__cache_dir(const collgen__cache *c);
/* 1 when new entries are written to the directory, 0 when they stay in
** memory (read-only directory or memory-only cache). */
int collgen__cache_writable(const collgen__cache *c);

/* Memory lookup; the entry stays owned by the cache. */
const collgen__entry *collgen__cache_find_memory(collgen__cache *c,
                                                 const uint8_t key[32]);
/* Disk lookup: on a valid entry loads it into memory and returns it. A
** corrupt, truncated, oversized or mismatched entry is deleted (when the
** directory allows) and counts as a miss (NULL), as is anything that is
** not a regular file (a symlink is removed, never followed; a FIFO or
** device is left alone and never opened for a blocking read).
** `nvrtc_major` >= 0 also rejects entries built by another NVRTC. The
** checks are those of collgen__cache_read_file. */
const collgen__entry *collgen__cache_find_disk(collgen__cache *c,
                                               const uint8_t key[32],
                                               int nvrtc_major, int nvrtc_minor);
/* Stores an entry (takes ownership of e and its cubin) in memory and, when
** the cache is writable, on disk; then evicts least-recently-used files
** beyond $COLLGEN_CACHE_MAX_BYTES. An entry over
** COLLGEN_CACHE_ENTRY_MAX_BYTES stays in memory. Disk failures only warn. */
const collgen__entry *collgen__cache_put(collgen__cache *c, collgen__entry *e);

/* Reads and verifies one entry file <dir>/entries/<shard>/<key> with the
** loader's own checks: no link is followed below <dir>, the file must be a
** regular file (opened without blocking) named after the key in its header,
** no larger than COLLGEN_CACHE_ENTRY_MAX_BYTES (checked on its fstat size
** before anything is read), with the right magic, format, sizes (the
** header's payload size must match the file's) and checksum. Returns 0 and
** fills *e (caller frees e->cubin) or a negative code with a reason in err. */
int collgen__cache_read_file(const char *path, collgen__entry *e, char *err,
                             size_t n);

/* Walks every regular entry file under dir: cb(path, size, atime, ctx).
** Never follows a link below dir; anything that is not a regular file is
** skipped. Returns the number of files, or -1 without an entries folder. */
typedef void (*collgen__cache_walk_fn)(const char *path, int64_t size,
                                       int64_t atime, void *ctx);
int collgen__cache_walk(const char *dir, collgen__cache_walk_fn cb, void *ctx);

/* Checks everything under <dir>/entries as the loader would (`cache ls`
** and `cache verify`). For each item: cb(path, size, e, why, removed, ctx)
** with e the valid entry (valid only during the call) and why NULL, or e
** NULL and why the reason it is bad: a file that fails the loader's
** checks, a symlink (never followed), a FIFO, device or stray folder. With
** remove_bad, bad regular files and symlinks (the links themselves) are
** removed; `removed` is 1 when it was, 0 when it was not to be (no
** remove_bad, another kind of item, replaced meanwhile) and -errno when
** removing it failed (a read-only directory). Returns the number of bad
** items, or -errno when <dir>/entries cannot be opened (-ENOENT: none;
** -ELOOP / -ENOTDIR: not a real folder). */
typedef void (*collgen__cache_check_fn)(const char *path, int64_t size,
                                        const collgen__entry *e, const char *why,
                                        int removed, void *ctx);
int collgen__cache_check(const char *dir, int remove_bad, collgen__cache_check_fn cb,
                         void *ctx);
/* What collgen__cache_clear did. */
typedef struct {
  int removed; /* entries (regular files, symlinks) removed from entries/ */
  int failed;  /* entries and temp files that could not be removed */
  int error;   /* errno of the first failure, 0 when none */
} collgen__cache_clear_result;
/* Removes all entries and temp files (writers' entry.XXXXXX names only)
** under dir: regular files and symlinks (the links themselves), never
** through a link; FIFOs, devices and folders stay. Fills *r. Returns 0, or
** -errno without touching anything when <dir>/entries is not a real folder
** (-ENOENT: none, so dir is no cache; -ELOOP / -ENOTDIR / -EACCES...). */
int collgen__cache_clear(const char *dir, collgen__cache_clear_result *r);
/* Evicts least-recently-used entries until the total is <= max_bytes,
** sparing `keep` (may be NULL). Returns the number removed. */
int collgen__cache_evict(const char *dir, int64_t max_bytes, const char *keep);
#endif
