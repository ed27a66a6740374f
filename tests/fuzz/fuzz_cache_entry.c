/*
** fuzz_cache_entry.c -- libFuzzer harness for the cache's entry loader.
** Arbitrary bytes are written as the entry file of a temp cache directory,
** named after the key at the header's key offset (so the real entries of
** the seed corpus load), then looked up (collgen__cache_find_disk) and
** checked (collgen__cache_check, which is `collgen cache verify`). Neither
** may crash, leak or hang; an accepted file must be a well-formed entry
** (checked here independently: magic, format, sizes, SHA-256, key) and give
** back its payload; a refused file must be removed; the loader and verify
** must agree. An input whose header declares more payload than it carries
** is then also tried as a sparse file of the declared size (ftruncate):
** over the 64 MiB entry cap it must be refused from its size alone (a
** loader that read or allocated it would blow -rss_limit_mb or -timeout);
** up to 64 KiB of payload it is judged like any entry, zeros and all. One
** temp directory serves every run; each run leaves it empty.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "sha256.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The header layout and entry size cap of docs/cache.md, restated here on
** purpose. */
enum { OFF_FORMAT = 8, OFF_HEADER = 12, OFF_PAYLOAD = 16, OFF_SUM = 24, OFF_KEY = 56,
       HEADER = 456 };
#define CAP ((uint64_t)64 << 20)
/* Sparse files: judged up to this payload, refused by size above CAP, not
** tried beyond 1 TiB (or in between: hashing 64 MiB per run is too slow). */
#define SPARSE_JUDGED ((uint64_t)64 << 10)
#define SPARSE_MAX ((uint64_t)1 << 40)

static char root[4096];
static collgen__cache *cache;

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
  (void)st; (void)flag; (void)f;
  remove(p);
  return 0;
}

static void cleanup(void) {
  collgen__cache_close(cache);
  if (root[0]) nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  setenv("COLLGEN_CACHE_DISABLE", "0", 1); /* run.sh disables the cache */
  setenv("COLLGEN_LOG", "off", 1);
  const char *t = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
  snprintf(root, sizeof root, "%s/collgen-fuzz-cache-XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(root)) abort();
  if (collgen__cache_open(&cache, root) != COLLGEN_OK || !collgen__cache_writable(cache)) abort();
  if (COLLGEN_CACHE_ENTRY_MAX_BYTES != CAP) abort(); /* docs/cache.md and this file disagree */
  atexit(cleanup);
  return 0;
}

static uint32_t u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Whether the bytes are a valid entry for `key`, judged without the cache. */
static int well_formed(const uint8_t *d, size_t n, const uint8_t key[32]) {
  static const uint8_t magic[8] = {0x93, 'C', 'G', 'C', 'U', 'B', 'I', 'N'};
  if (n < HEADER || n > CAP || memcmp(d, magic, 8) != 0 ||
      u32(d + OFF_FORMAT) != COLLGEN_CACHE_FORMAT || u32(d + OFF_HEADER) != HEADER ||
      u64(d + OFF_PAYLOAD) != n - HEADER)
    return 0;
  collgen__sha256_ctx s;
  uint8_t sum[32];
  collgen__sha256_init(&s);
  collgen__sha256_update(&s, d + OFF_KEY, n - OFF_KEY);
  collgen__sha256_final(&s, sum);
  return memcmp(sum, d + OFF_SUM, 32) == 0 && memcmp(d + OFF_KEY, key, 32) == 0;
}

static void write_file(const char *path, const uint8_t *d, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) abort();
  while (n > 0) {
    ssize_t w = write(fd, d, n);
    if (w <= 0) abort();
    d += w;
    n -= (size_t)w;
  }
  close(fd);
}

typedef struct { int items, good; } tally;
static void count(const char *path, int64_t size, const collgen__entry *e, const char *why,
                  int removed, void *ctx) {
  (void)path; (void)size; (void)why; (void)removed;
  tally *t = ctx;
  t->items++;
  t->good += e != NULL;
}

/* Writes the entry file: `n` bytes of d, then (sparse) zeros up to `total`
** bytes. Returns 0, or -1 when the file system refuses that size. */
static int put_file(const char *path, const uint8_t *d, size_t n, uint64_t total) {
  write_file(path, d, n);
  return total > n && truncate(path, (off_t)total) != 0 ? -1 : 0;
}

/* One file through the loader, then through verify: both must say `valid`;
** an accepted entry gives back `want` (the payload, `total` - HEADER
** bytes), a refused one is removed. */
static void judge(const char *path, const uint8_t key[32], const uint8_t *d, size_t n,
                  uint64_t total, int valid, const uint8_t *want) {
  if (put_file(path, d, n, total) != 0) { /* too large for this file system */
    unlink(path);
    return;
  }
  const collgen__entry *e = collgen__cache_find_disk(cache, key, -1, -1);
  if ((e != NULL) != valid) abort(); /* loader accepted garbage or refused an entry */
  struct stat st;
  int present = lstat(path, &st) == 0;
  if (e) {
    if (!present || e->size != total - HEADER || memcmp(e->cubin, want, e->size) != 0 ||
        memcmp(e->key, key, 32) != 0)
      abort();
    /* the memory table would grow with every accepted input: start afresh */
    collgen__cache_close(cache);
    if (collgen__cache_open(&cache, root) != COLLGEN_OK) abort();
  } else if (present) {
    abort(); /* a refused regular file is removed */
  }

  if (put_file(path, d, n, total) != 0) abort();
  tally t = {0, 0};
  int bad = collgen__cache_check(root, 1, count, &t);
  if (t.items != 1 || t.good != valid || bad != !valid) abort(); /* verify == loader */
  if ((lstat(path, &st) == 0) != valid) abort();
  unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t key[32] = {0};
  if (size >= OFF_KEY + 32) memcpy(key, data + OFF_KEY, 32);
  char hex[65], shard[4200], path[4400];
  collgen__hex(key, hex);
  snprintf(shard, sizeof shard, "%s/entries/%.2s", root, hex);
  snprintf(path, sizeof path, "%s/%s", shard, hex);
  if (mkdir(shard, 0700) != 0 && errno != EEXIST) abort();
  judge(path, key, data, size, size, well_formed(data, size, key), data + HEADER);

  /* The header promises more than the bytes carry: the same bytes as a
  ** sparse file of the promised size. */
  uint64_t declared = size >= HEADER ? u64(data + OFF_PAYLOAD) : 0;
  if (size >= HEADER && declared > size - HEADER && declared <= SPARSE_MAX - HEADER) {
    uint64_t total = HEADER + declared;
    if (total > CAP) {
      judge(path, key, data, size, total, 0, NULL); /* refused by size, never read */
    } else if (declared <= SPARSE_JUDGED) {
      uint8_t *full = calloc(1, (size_t)total);
      if (!full) abort();
      memcpy(full, data, size);
      judge(path, key, data, size, total, well_formed(full, (size_t)total, key), full + HEADER);
      free(full);
    }
  }
  rmdir(shard);
  return 0;
}
