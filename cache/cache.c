/*
** cache.c -- the cubin cache.
**
** Disk layout: <dir>/entries/<hex[0:2]>/<hex> holds one entry; <dir>/tmp
** holds files being written. An entry is a fixed header (magic, format,
** lengths, SHA-256 of everything after the checksum field) followed by the
** cubin. Writers write a temp file, fsync and rename() it into place, so a
** reader sees either nothing or a whole entry, and many processes may fill
** one directory at once (two writers of one key both write a valid entry;
** the last rename wins). Readers take no locks. A hit bumps the file's
** atime explicitly (relatime would not), which drives LRU eviction.
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "sha256.h"

static const char MAGIC[8] = {'\x93', 'C', 'G', 'C', 'U', 'B', 'I', 'N'};

/* On-disk header, little-endian host layout (x86-64/aarch64 only). */
typedef struct {
  char magic[8];
  uint32_t format;
  uint32_t header_bytes;
  uint64_t payload_bytes;
  uint8_t checksum[32];    /* SHA-256 of every byte after this field */
  uint8_t key[32];
  int32_t registers, spill_bytes, nvrtc_major, nvrtc_minor;
  char kernel[96];
  char canonical[256];
} disk_header;

#define BUCKETS 256

struct collgen__cache {
  char dir[4096];
  int disk;               /* 0 = memory only */
  collgen__entry *table[BUCKETS];
};

static void warn_memory_only(const char *dir, const char *why) {
  collgen__log(COLLGEN_LOG_WARN,
               "cache directory %s is not usable (%s); caching in memory only",
               dir, why);
}

/* Removes the regular files in <dir>/tmp last modified more than
** `min_age_s` seconds ago (-1: all of them). */
static void remove_temp_files(const char *dir, time_t min_age_s) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s/tmp", dir);
  DIR *d = opendir(tmp);
  if (!d) return;
  time_t now = time(NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char p[4500];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", tmp, de->d_name);
    if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > min_age_s) unlink(p);
  }
  closedir(d);
}

int collgen__cache_open(collgen__cache **out, const char *dir) {
  collgen__cache *c = calloc(1, sizeof *c);
  *out = c;
  if (!c) return COLLGEN_ERR_NO_MEMORY;
  if (collgen__param_cache_disable()) return COLLGEN_OK;
  if (dir && *dir) snprintf(c->dir, sizeof c->dir, "%s", dir);
  else if (collgen__default_cache_dir(c->dir, sizeof c->dir) != 0) {
    warn_memory_only("(none)", "no COLLGEN_CACHE_DIR, XDG_CACHE_HOME or HOME");
    return COLLGEN_OK;
  }
  char sub[4200];
  snprintf(sub, sizeof sub, "%s/tmp", c->dir);
  int rc = collgen__mkdirs(sub);
  if (rc == 0) {
    snprintf(sub, sizeof sub, "%s/entries", c->dir);
    rc = collgen__mkdirs(sub);
  }
  if (rc == 0) {
    snprintf(sub, sizeof sub, "%s/tmp", c->dir);
    if (access(sub, W_OK) != 0) rc = -errno;
  }
  if (rc != 0) {
    warn_memory_only(c->dir, strerror(-rc));
    return COLLGEN_OK;
  }
  c->disk = 1;
  /* Temp files older than an hour are leftovers of writers that died between
  ** mkstemp and rename; younger ones may belong to a live writer. */
  remove_temp_files(c->dir, 3600);
  return COLLGEN_OK;
}

static void free_entry(collgen__entry *e) {
  if (!e) return;
  free(e->cubin);
  free(e);
}

void collgen__cache_close(collgen__cache *c) {
  if (!c) return;
  for (int b = 0; b < BUCKETS; ++b) {
    collgen__entry *e = c->table[b];
    while (e) {
      collgen__entry *next = e->next;
      free_entry(e);
      e = next;
    }
  }
  free(c);
}

const char *collgen__cache_dir(const collgen__cache *c) {
  return c->disk ? c->dir : NULL;
}

const collgen__entry *collgen__cache_find_memory(collgen__cache *c,
                                                 const uint8_t key[32]) {
  for (collgen__entry *e = c->table[key[0]]; e; e = e->next)
    if (memcmp(e->key, key, 32) == 0) return e;
  return NULL;
}

static void entry_path(const collgen__cache *c, const uint8_t key[32],
                       char *path, size_t n, int dir_only) {
  char hex[65];
  collgen__hex(key, hex);
  if (dir_only) snprintf(path, n, "%s/entries/%.2s", c->dir, hex);
  else snprintf(path, n, "%s/entries/%.2s/%s", c->dir, hex, hex);
}

static int read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

int collgen__cache_read_file(const char *path, collgen__entry *e, char *err,
                             size_t n) {
  memset(e, 0, sizeof *e);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return collgen__fail(err, n, COLLGEN_ERR_CACHE, "missing");
  struct stat st;
  disk_header h;
  int rc = COLLGEN_ERR_CACHE;
  uint8_t *payload = NULL;
  if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof h ||
      read_all(fd, &h, sizeof h) != 0) {
    collgen__fail(err, n, rc, "truncated header");
    goto out;
  }
  if (memcmp(h.magic, MAGIC, 8) != 0 || h.format != COLLGEN_CACHE_FORMAT ||
      h.header_bytes != sizeof h) {
    collgen__fail(err, n, rc, "bad magic or format version");
    goto out;
  }
  if ((uint64_t)st.st_size != sizeof h + h.payload_bytes) {
    collgen__fail(err, n, rc, "size %lld does not match header (%llu)",
                  (long long)st.st_size,
                  (unsigned long long)(sizeof h + h.payload_bytes));
    goto out;
  }
  payload = malloc(h.payload_bytes ? h.payload_bytes : 1);
  if (!payload || read_all(fd, payload, h.payload_bytes) != 0) {
    collgen__fail(err, n, rc, "cannot read payload");
    goto out;
  }
  collgen__sha256_ctx s;
  uint8_t sum[32];
  size_t after = offsetof(disk_header, key);
  collgen__sha256_init(&s);
  collgen__sha256_update(&s, (const char *)&h + after, sizeof h - after);
  collgen__sha256_update(&s, payload, h.payload_bytes);
  collgen__sha256_final(&s, sum);
  if (memcmp(sum, h.checksum, 32) != 0) {
    collgen__fail(err, n, rc, "checksum mismatch");
    goto out;
  }
  memcpy(e->key, h.key, 32);
  e->cubin = payload;
  payload = NULL;
  e->size = h.payload_bytes;
  e->registers = h.registers;
  e->spill_bytes = h.spill_bytes;
  e->nvrtc_major = h.nvrtc_major;
  e->nvrtc_minor = h.nvrtc_minor;
  memcpy(e->kernel, h.kernel, sizeof e->kernel);
  e->kernel[sizeof e->kernel - 1] = 0;
  memcpy(e->canonical, h.canonical, sizeof e->canonical);
  e->canonical[sizeof e->canonical - 1] = 0;
  rc = COLLGEN_OK;
out:
  free(payload);
  close(fd);
  return rc;
}

static collgen__entry *insert_memory(collgen__cache *c, collgen__entry *e) {
  e->next = c->table[e->key[0]];
  c->table[e->key[0]] = e;
  return e;
}

const collgen__entry *collgen__cache_find_disk(collgen__cache *c,
                                               const uint8_t key[32],
                                               int nvrtc_major, int nvrtc_minor) {
  if (!c->disk) return NULL;
  char path[4300], why[256];
  entry_path(c, key, path, sizeof path, 0);
  collgen__entry tmp;
  int rc = collgen__cache_read_file(path, &tmp, why, sizeof why);
  if (rc == COLLGEN_OK && memcmp(tmp.key, key, 32) != 0) {
    rc = COLLGEN_ERR_CACHE;
    snprintf(why, sizeof why, "key in header does not match file name");
  }
  if (rc == COLLGEN_OK && nvrtc_major >= 0 &&
      (tmp.nvrtc_major != nvrtc_major || tmp.nvrtc_minor != nvrtc_minor)) {
    rc = COLLGEN_ERR_CACHE;
    snprintf(why, sizeof why, "built by NVRTC %d.%d", tmp.nvrtc_major, tmp.nvrtc_minor);
  }
  if (rc != COLLGEN_OK) {
    if (access(path, F_OK) == 0) {
      collgen__log(COLLGEN_LOG_INFO, "discarding cache entry %s: %s", path, why);
      unlink(path);
    }
    free(tmp.cubin);
    return NULL;
  }
  /* Bump atime for LRU; leave mtime alone. Failure is harmless. */
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
    futimens(fd, ts);
    close(fd);
  }
  collgen__entry *e = malloc(sizeof *e);
  if (!e) { free(tmp.cubin); return NULL; }
  *e = tmp;
  return insert_memory(c, e);
}

const collgen__entry *collgen__cache_put(collgen__cache *c, collgen__entry *e) {
  insert_memory(c, e);
  if (!c->disk) return e;
  disk_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MAGIC, 8);
  h.format = COLLGEN_CACHE_FORMAT;
  h.header_bytes = sizeof h;
  h.payload_bytes = e->size;
  memcpy(h.key, e->key, 32);
  h.registers = e->registers;
  h.spill_bytes = e->spill_bytes;
  h.nvrtc_major = e->nvrtc_major;
  h.nvrtc_minor = e->nvrtc_minor;
  snprintf(h.kernel, sizeof h.kernel, "%s", e->kernel);
  snprintf(h.canonical, sizeof h.canonical, "%s", e->canonical);
  collgen__sha256_ctx s;
  size_t after = offsetof(disk_header, key);
  collgen__sha256_init(&s);
  collgen__sha256_update(&s, (const char *)&h + after, sizeof h - after);
  collgen__sha256_update(&s, e->cubin, e->size);
  collgen__sha256_final(&s, h.checksum);

  size_t total = sizeof h + e->size;
  char *buf = malloc(total);
  if (!buf) return e;
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, e->cubin, e->size);
  char dir[4300], path[4300], tmpdir[4200];
  entry_path(c, e->key, dir, sizeof dir, 1);
  entry_path(c, e->key, path, sizeof path, 0);
  snprintf(tmpdir, sizeof tmpdir, "%s/tmp", c->dir);
  int rc = collgen__mkdirs(dir);
  if (rc == 0) rc = collgen__write_atomic(tmpdir, path, buf, total);
  free(buf);
  if (rc != 0) {
    collgen__log(COLLGEN_LOG_WARN, "cannot write cache entry %s: %s",
                 path, strerror(-rc));
    return e;
  }
  int64_t cap = collgen__param_cache_max_bytes();
  if (cap > 0) collgen__cache_evict(c->dir, cap, path);
  return e;
}

int collgen__cache_walk(const char *dir, collgen__cache_walk_fn cb, void *ctx) {
  char top[4200];
  snprintf(top, sizeof top, "%s/entries", dir);
  DIR *d = opendir(top);
  if (!d) return -1;
  struct dirent *de;
  int count = 0;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue;
    char sub[4500];
    snprintf(sub, sizeof sub, "%s/%s", top, de->d_name);
    DIR *s = opendir(sub);
    if (!s) continue;
    struct dirent *fe;
    while ((fe = readdir(s)) != NULL) {
      if (fe->d_name[0] == '.') continue;
      char path[4800];
      struct stat st;
      snprintf(path, sizeof path, "%s/%s", sub, fe->d_name);
      if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      cb(path, (int64_t)st.st_size, (int64_t)st.st_atim.tv_sec * 1000000000LL + st.st_atim.tv_nsec, ctx);
      ++count;
    }
    closedir(s);
  }
  closedir(d);
  return count;
}

typedef struct {
  char (*paths)[4800];
  int64_t *sizes, *atimes;
  int n, cap;
  int64_t total;
} file_list;

static void collect(const char *path, int64_t size, int64_t atime, void *ctx) {
  file_list *l = ctx;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    void *p = realloc(l->paths, (size_t)cap * sizeof *l->paths);
    void *s = realloc(l->sizes, (size_t)cap * sizeof *l->sizes);
    void *a = realloc(l->atimes, (size_t)cap * sizeof *l->atimes);
    if (p) l->paths = p;
    if (s) l->sizes = s;
    if (a) l->atimes = a;
    if (!p || !s || !a) return;
    l->cap = cap;
  }
  snprintf(l->paths[l->n], sizeof l->paths[0], "%s", path);
  l->sizes[l->n] = size;
  l->atimes[l->n] = atime;
  l->total += size;
  l->n++;
}

int collgen__cache_evict(const char *dir, int64_t max_bytes, const char *keep) {
  file_list l = {0};
  collgen__cache_walk(dir, collect, &l);
  int removed = 0;
  while (l.total > max_bytes) {
    int oldest = -1;
    for (int i = 0; i < l.n; ++i) {
      if (l.sizes[i] < 0 || (keep && strcmp(l.paths[i], keep) == 0)) continue;
      if (oldest < 0 || l.atimes[i] < l.atimes[oldest]) oldest = i;
    }
    if (oldest < 0) break;
    /* Delete only if the file is as we saw it: a replaced entry (rename) or
    ** one read since (a hit bumps atime) is left alone. */
    struct stat st;
    if (stat(l.paths[oldest], &st) == 0 && st.st_size == l.sizes[oldest] &&
        (int64_t)st.st_atim.tv_sec * 1000000000LL + st.st_atim.tv_nsec == l.atimes[oldest] &&
        unlink(l.paths[oldest]) == 0)
      ++removed;
    l.total -= l.sizes[oldest];
    l.sizes[oldest] = -1;
  }
  free(l.paths);
  free(l.sizes);
  free(l.atimes);
  return removed;
}

static void remove_file(const char *path, int64_t size, int64_t atime, void *ctx) {
  COLLGEN_UNUSED(size);
  COLLGEN_UNUSED(atime);
  if (unlink(path) == 0) ++*(int *)ctx;
}

int collgen__cache_clear(const char *dir) {
  int removed = 0;
  collgen__cache_walk(dir, remove_file, &removed);
  remove_temp_files(dir, -1);
  return removed;
}
