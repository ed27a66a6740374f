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
**
** Nothing found inside the tree is trusted. The root is the user's choice
** and may be a symlink; below it every step is taken from a directory fd
** with O_NOFOLLOW (openat, fstatat(AT_SYMLINK_NOFOLLOW), unlinkat,
** renameat), so no operation reaches outside the tree through a link, and
** files are opened O_NONBLOCK and accepted only when fstat says they are
** regular, so a FIFO or device cannot block or feed a reader. Cleaning
** removes only regular files and symlinks themselves (never a target, never
** a FIFO, device or directory). One function, load_entry, decides whether
** a file is a valid entry, for the loader, `collgen cache ls/verify` and
** collgen__cache_read_file alike; it refuses a file over the entry size cap
** from its fstat size, before reading or allocating anything. Directories
** are created 0700.
**
** A directory this process cannot write (a shared cache opened up
** read-only, a read-only mount) still serves its entries; what the process
** compiles then stays in memory, and one warning says so. Paths are
** printed through collgen__escape.
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "escape.h"
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
  int writable;           /* 0 = entries are read from dir, new ones stay in memory */
  collgen__entry *table[BUCKETS];
};

/* A path as it is printed: escaped (escape.h), at most ~1 KiB. */
typedef struct { char text[1040]; } shown_path;
static const char *show(const char *path, shown_path *s) {
  return collgen__escape(path, s->text, sizeof s->text);
}

enum { WARN_MEMORY_ONLY, WARN_READ_ONLY };

/* Warns that the cache at `dir` is memory only or read-only, once per
** process, directory and kind: every generator opens its cache, `collgen
** compile` opens it twice, and forked workers inherit what was said. */
static void warn_dir(int kind, const char *dir, const char *why) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static uint64_t said[64];
  static int nsaid;
  uint64_t h = 1469598103934665603ULL ^ (uint64_t)kind; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)dir; *p; ++p)
    h = (h ^ *p) * 1099511628211ULL;
  pthread_mutex_lock(&lock);
  int before = 0;
  for (int i = 0; i < nsaid && !before; ++i) before = said[i] == h;
  if (!before && nsaid < (int)(sizeof said / sizeof said[0])) said[nsaid++] = h;
  pthread_mutex_unlock(&lock);
  if (before) return;
  shown_path d;
  if (kind == WARN_READ_ONLY)
    collgen__log(COLLGEN_LOG_WARN, "cache directory %s is read-only (%s): its entries are used, "
                 "new ones are cached in memory only", show(dir, &d), why);
  else
    collgen__log(COLLGEN_LOG_WARN, "cache directory %s is not usable (%s); caching in memory only",
                 show(dir, &d), why);
}

/* ---- File-system steps that never leave the tree ---------------------- */

/* The cache root: the one path component chain that may contain links
** (the user chose it). Returns an fd or -1 (errno set). */
static int open_root(const char *dir) {
  return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* Opens the directory `name` of dirfd, refusing a symlink (ELOOP) or
** anything that is not a directory (ENOTDIR). Returns an fd or -1. */
static int open_subdir(int dirfd, const char *name) {
  return openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Opens <root>/entries/<shard> without following links below the root.
** Returns an fd or -1 (errno set). */
static int open_shard(const char *root, const char *shard) {
  int r = open_root(root);
  if (r < 0) return -1;
  int e = open_subdir(r, "entries");
  close(r);
  if (e < 0) return -1;
  int s = open_subdir(e, shard);
  int saved = errno;
  close(e);
  errno = saved;
  return s;
}

/* Creates `path` and its missing parents, each 0700 (an existing parent
** is used as it is, links included: this is the user's chosen root). The
** final component must end up a directory. Returns 0 or -errno. */
static int mkdirs_private(const char *path) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -ENAMETOOLONG;
  for (char *p = tmp + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -errno;
    *p = '/';
  }
  if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -errno;
  return 0;
}

/* Returns an fd on the real directory `name` of dirfd, creating it 0700
** when missing. A symlink in its place is removed (the link itself, never
** its target) and replaced by a directory; anything else is an error.
** Returns an fd or -errno. */
static int ensure_subdir(int dirfd, const char *name) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    int fd = open_subdir(dirfd, name);
    if (fd >= 0) return fd;
    if (errno == ENOENT) {
      if (mkdirat(dirfd, name, 0700) != 0 && errno != EEXIST) return -errno;
      continue;
    }
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
      collgen__log(COLLGEN_LOG_WARN, "cache: replacing symlink '%s' by a directory", name);
      if (unlinkat(dirfd, name, 0) != 0 && errno != ENOENT) return -errno;
      continue;
    }
    return -ENOTDIR;
  }
  return -ELOOP;
}

/* Removes `name` from dirfd if it is a regular file or a symlink (the link
** itself) and, when `seen` is given, still the file that was examined
** (same device and inode). FIFOs, devices, sockets and directories stay.
** Returns 1 when removed, 0 when it was not to be removed (or is gone),
** -errno when unlinking it failed (a read-only directory). */
static int remove_if_safe(int dirfd, const char *name, const struct stat *seen) {
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
  if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) return 0;
  if (seen && (st.st_dev != seen->st_dev || st.st_ino != seen->st_ino)) return 0;
  if (unlinkat(dirfd, name, 0) == 0) return 1;
  return errno == ENOENT ? 0 : -errno;
}

static const char TEMP_DIGITS[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/* Whether `name` is one write_atomic_at makes: "entry." and 6 digits of
** TEMP_DIGITS. Nothing else in tmp/ is ever removed, in case the cache
** directory was pointed at a folder with a tmp/ of its own. */
static int is_temp_name(const char *name) {
  if (strncmp(name, "entry.", 6) != 0 || strlen(name) != 12) return 0;
  for (int i = 6; i < 12; ++i)
    if (!strchr(TEMP_DIGITS, name[i])) return 0;
  return 1;
}

/* Removes the temp files (is_temp_name: regular files and symlinks) in
** <dir>/tmp last modified more than `min_age_s` seconds ago (-1: all of
** them). A tmp that is not a real directory is left alone. Counts what
** could not be removed into *failed (and its errno into *error, first
** failure only) when given. Returns the number removed. */
static int remove_temp_files(int rootfd, time_t min_age_s, int *failed, int *error) {
  int t = open_subdir(rootfd, "tmp");
  if (t < 0) return 0;
  DIR *d = fdopendir(t);
  if (!d) {
    close(t);
    return 0;
  }
  time_t now = time(NULL);
  int removed = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!is_temp_name(de->d_name)) continue;
    struct stat st;
    if (fstatat(t, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || now - st.st_mtime <= min_age_s)
      continue;
    int rc = remove_if_safe(t, de->d_name, &st);
    removed += rc > 0;
    if (rc < 0 && failed) {
      if (!*failed) *error = -rc;
      ++*failed;
    }
  }
  closedir(d);
  return removed;
}

/* Makes tmp/ and entries/ of rootfd real folders (ensure_subdir) that
** this process may write. Returns 0, or -errno with *what naming the
** folder in the way. */
static int prepare_for_writing(int rootfd, const char **what) {
  static const char *const names[] = {"tmp", "entries"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    *what = names[i];
    int fd = ensure_subdir(rootfd, names[i]);
    if (fd < 0) return fd;
    int rc = faccessat(fd, ".", W_OK, AT_EACCESS) == 0 ? 0 : -errno;
    close(fd);
    if (rc != 0) return rc;
  }
  return 0;
}

int collgen__cache_open(collgen__cache **out, const char *dir) {
  collgen__cache *c = calloc(1, sizeof *c);
  *out = c;
  if (!c) return COLLGEN_ERR_NO_MEMORY;
  if (collgen__param_cache_disable()) return COLLGEN_OK;
  if (dir && *dir) snprintf(c->dir, sizeof c->dir, "%s", dir);
  else if (collgen__default_cache_dir(c->dir, sizeof c->dir) != 0) {
    warn_dir(WARN_MEMORY_ONLY, "(none)", "no COLLGEN_CACHE_DIR, XDG_CACHE_HOME or HOME");
    return COLLGEN_OK;
  }
  const char *what = NULL;
  int rc = mkdirs_private(c->dir), root = -1;
  if (rc == 0 && (root = open_root(c->dir)) < 0) rc = -errno;
  if (rc == 0) rc = prepare_for_writing(root, &what);
  if (rc == 0) {
    c->disk = c->writable = 1;
    /* Temp files older than an hour are leftovers of writers that died
    ** between creating and renaming them; younger ones may belong to a live
    ** writer. */
    remove_temp_files(root, 3600, NULL, NULL);
    close(root);
    return COLLGEN_OK;
  }
  /* Not writable: what is in a real entries/ folder is still served. */
  char why[300];
  snprintf(why, sizeof why, "%s%s%s", what ? what : "", what ? ": " : "", strerror(-rc));
  if (root < 0) root = open_root(c->dir);
  int entries = root >= 0 ? open_subdir(root, "entries") : -1;
  if (entries >= 0) {
    close(entries);
    c->disk = 1;
    warn_dir(WARN_READ_ONLY, c->dir, why);
  } else {
    warn_dir(WARN_MEMORY_ONLY, c->dir, why);
  }
  if (root >= 0) close(root);
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

int collgen__cache_writable(const collgen__cache *c) { return c->writable; }

const collgen__entry *collgen__cache_find_memory(collgen__cache *c,
                                                 const uint8_t key[32]) {
  for (collgen__entry *e = c->table[key[0]]; e; e = e->next)
    if (memcmp(e->key, key, 32) == 0) return e;
  return NULL;
}

static void entry_path(const char *dir, const char *hex, char *path, size_t n) {
  snprintf(path, n, "%s/entries/%.2s/%s", dir, hex, hex);
}

static int hex_value(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  return -1;
}

/* The key an entry file must hold: its name is the lowercase hex key and
** its shard the first two digits. Returns 0 or -1. */
static int key_of_name(const char *shard, const char *name, uint8_t key[32]) {
  if (strlen(name) != 64 || strncmp(shard, name, 2) != 0 || shard[2] != 0) return -1;
  for (int i = 0; i < 32; ++i) {
    int hi = hex_value(name[2 * i]), lo = hex_value(name[2 * i + 1]);
    if (hi < 0 || lo < 0) return -1;
    key[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

enum { LOAD_OK, LOAD_MISSING, LOAD_BAD };

/* The one test of an entry file, used by the loader, ls/verify and
** collgen__cache_read_file: `name` in the directory shardfd (the shard
** called `shard`) is opened without following a link or blocking, must be
** a regular file named after its key, no larger than the entry size cap
** (its fstat size, before anything is read or allocated), with magic,
** format, header size, total size, checksum and key all right. On LOAD_OK
** fills *e (the caller frees e->cubin) and, when fd_out is given, hands
** over the open fd. On LOAD_BAD writes the reason into err and, when seen
** is given, the stat of what was examined (fstat of the open file, else
** its lstat), so that a removal can check it is still the same file. */
static int load_entry(int shardfd, const char *shard, const char *name,
                      collgen__entry *e, char *err, size_t n, int *fd_out,
                      struct stat *seen) {
  memset(e, 0, sizeof *e);
  if (seen) memset(seen, 0, sizeof *seen);
  uint8_t want[32];
  if (key_of_name(shard, name, want) != 0) {
    if (seen) fstatat(shardfd, name, seen, AT_SYMLINK_NOFOLLOW);
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "file name is not an entry key of this shard");
    return LOAD_BAD;
  }
  int fd = openat(shardfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    int er = errno;
    if (er == ENOENT) {
      collgen__fail(err, n, COLLGEN_ERR_CACHE, "missing");
      return LOAD_MISSING;
    }
    if (seen) fstatat(shardfd, name, seen, AT_SYMLINK_NOFOLLOW);
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "%s",
                  er == ELOOP ? "a symbolic link, not a regular file" : strerror(er));
    return LOAD_BAD;
  }
  struct stat st;
  disk_header h;
  int rc = LOAD_BAD;
  uint8_t *payload = NULL;
  if (fstat(fd, &st) != 0) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "cannot stat: %s", strerror(errno));
    goto out;
  }
  if (seen) *seen = st;
  if (!S_ISREG(st.st_mode)) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "not a regular file");
    goto out;
  }
  /* The real size, not the header's claim: a sparse file may say 4 GiB. */
  if ((uint64_t)st.st_size > COLLGEN_CACHE_ENTRY_MAX_BYTES) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "%lld bytes, over the entry size cap of %d MiB",
                  (long long)st.st_size, (int)(COLLGEN_CACHE_ENTRY_MAX_BYTES >> 20));
    goto out;
  }
  if ((size_t)st.st_size < sizeof h || collgen__read_full(fd, &h, sizeof h) != 0) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "truncated header");
    goto out;
  }
  if (memcmp(h.magic, MAGIC, 8) != 0 || h.format != COLLGEN_CACHE_FORMAT ||
      h.header_bytes != sizeof h) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "bad magic or format version");
    goto out;
  }
  /* Compared without forming sizeof h + payload_bytes, which may wrap; with
  ** the cap above it also bounds the allocation below. */
  if ((uint64_t)st.st_size - sizeof h != h.payload_bytes) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "size %lld does not match header (%zu + %llu)",
                  (long long)st.st_size, sizeof h, (unsigned long long)h.payload_bytes);
    goto out;
  }
  payload = malloc(h.payload_bytes ? h.payload_bytes : 1);
  if (!payload || collgen__read_full(fd, payload, h.payload_bytes) != 0) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "cannot read payload");
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
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "checksum mismatch");
    goto out;
  }
  if (memcmp(h.key, want, 32) != 0) {
    collgen__fail(err, n, COLLGEN_ERR_CACHE, "key in header does not match file name");
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
  rc = LOAD_OK;
out:
  free(payload);
  if (rc == LOAD_OK && fd_out) *fd_out = fd;
  else close(fd);
  return rc;
}

/* Splits "<root>/entries/<shard>/<name>" and opens the shard without
** following links below root. Returns an fd (shard and *name filled) or -1
** (errno set; EINVAL when the path has no such shape). */
static int open_shard_of(const char *path, char shard[3], const char **name) {
  const char *s3 = strrchr(path, '/');
  if (!s3 || s3 == path) goto bad;
  const char *s2 = memrchr(path, '/', (size_t)(s3 - path));
  if (!s2 || s3 - s2 != 3) goto bad;
  const char *s1 = memrchr(path, '/', (size_t)(s2 - path));
  const char *ent = s1 ? s1 + 1 : path;
  if (s2 - ent != 7 || strncmp(ent, "entries", 7) != 0) goto bad;
  char root[4096];
  if (!s1) snprintf(root, sizeof root, ".");
  else if (s1 == path) snprintf(root, sizeof root, "/");
  else if (snprintf(root, sizeof root, "%.*s", (int)(s1 - path), path) >= (int)sizeof root)
    goto bad;
  shard[0] = s2[1];
  shard[1] = s2[2];
  shard[2] = 0;
  *name = s3 + 1;
  return open_shard(root, shard);
bad:
  errno = EINVAL;
  return -1;
}

int collgen__cache_read_file(const char *path, collgen__entry *e, char *err,
                             size_t n) {
  memset(e, 0, sizeof *e);
  char shard[3];
  const char *name;
  int sfd = open_shard_of(path, shard, &name);
  if (sfd < 0)
    return collgen__fail(err, n, COLLGEN_ERR_CACHE, "%s",
                         errno == EINVAL ? "not a path <dir>/entries/<shard>/<key>"
                         : errno == ELOOP ? "a shard folder is a symbolic link"
                                          : strerror(errno));
  int rc = load_entry(sfd, shard, name, e, err, n, NULL, NULL);
  close(sfd);
  return rc == LOAD_OK ? COLLGEN_OK : COLLGEN_ERR_CACHE;
}

static collgen__entry *insert_memory(collgen__cache *c, collgen__entry *e) {
  e->next = c->table[e->key[0]];
  c->table[e->key[0]] = e;
  return e;
}

/* Removes a bad entry (see remove_if_safe) and logs it under `path`. */
static void discard(int shardfd, const char *name, const char *path, const char *why,
                    const struct stat *seen) {
  int removed = remove_if_safe(shardfd, name, seen);
  shown_path p;
  collgen__log(COLLGEN_LOG_INFO, "%s cache entry %s: %s%s%s",
               removed > 0 ? "discarding" : "ignoring", show(path, &p), why,
               removed < 0 ? "; cannot remove it: " : "", removed < 0 ? strerror(-removed) : "");
}

const collgen__entry *collgen__cache_find_disk(collgen__cache *c,
                                               const uint8_t key[32],
                                               int nvrtc_major, int nvrtc_minor) {
  if (!c->disk) return NULL;
  char hex[65], shard[3], why[256];
  collgen__hex(key, hex);
  snprintf(shard, sizeof shard, "%.2s", hex);
  int sfd = open_shard(c->dir, shard);
  if (sfd < 0) return NULL;
  collgen__entry tmp;
  struct stat seen;
  int fd = -1;
  int rc = load_entry(sfd, shard, hex, &tmp, why, sizeof why, &fd, &seen);
  if (rc == LOAD_OK && nvrtc_major >= 0 &&
      (tmp.nvrtc_major != nvrtc_major || tmp.nvrtc_minor != nvrtc_minor)) {
    rc = LOAD_BAD;
    snprintf(why, sizeof why, "built by NVRTC %d.%d", tmp.nvrtc_major, tmp.nvrtc_minor);
  }
  if (rc != LOAD_OK) {
    if (rc == LOAD_BAD) {
      char path[4300];
      entry_path(c->dir, hex, path, sizeof path);
      discard(sfd, hex, path, why, &seen);
    }
    if (fd >= 0) close(fd);
    close(sfd);
    free(tmp.cubin);
    return NULL;
  }
  close(sfd);
  /* Bump atime for LRU; leave mtime alone. Failure is harmless. */
  struct timespec ts[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
  futimens(fd, ts);
  close(fd);
  collgen__entry *e = malloc(sizeof *e);
  if (!e) { free(tmp.cubin); return NULL; }
  *e = tmp;
  return insert_memory(c, e);
}

/* Writes `size` bytes as `name` in dstfd atomically: a fresh file in tmpfd
** (O_CREAT|O_EXCL|O_NOFOLLOW, random name), write, fsync, renameat. Returns
** 0 or -errno. */
static int write_atomic_at(int tmpfd, int dstfd, const char *name, const void *data,
                           size_t size) {
  char tmp[32];
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    unsigned char r[6];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
      /* no entropy yet: time, pid and attempt still differ between writers */
      struct timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      uint64_t x = (uint64_t)now.tv_nsec ^ ((uint64_t)now.tv_sec << 30) ^
                   ((uint64_t)getpid() << 40) ^ ((uint64_t)attempt * 0x9e3779b97f4a7c15ULL);
      for (int i = 0; i < 6; ++i) r[i] = (unsigned char)(x >> (8 * i));
    }
    snprintf(tmp, sizeof tmp, "entry.");
    for (int i = 0; i < 6; ++i) tmp[6 + i] = TEMP_DIGITS[r[i] % (sizeof TEMP_DIGITS - 1)];
    tmp[12] = 0;
    fd = openat(tmpfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return -errno;
  }
  if (fd < 0) return -EEXIST;
  const char *p = data;
  size_t left = size;
  int rc = 0;
  while (left > 0) {
    ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      rc = -errno;
      break;
    }
    p += w;
    left -= (size_t)w;
  }
  if (rc == 0 && fsync(fd) != 0) rc = -errno;
  if (rc == 0 && fchmod(fd, 0644) != 0) rc = -errno;
  if (close(fd) != 0 && rc == 0) rc = -errno;
  if (rc == 0 && renameat(tmpfd, tmp, dstfd, name) != 0) rc = -errno;
  if (rc != 0) unlinkat(tmpfd, tmp, 0);
  return rc;
}

/* Writes one entry file under c->dir, recreating missing directories (0700)
** and replacing a symlink where a directory belongs. Returns 0 or -errno. */
static int write_entry(collgen__cache *c, const char *hex, const void *buf, size_t size) {
  char shard[3];
  snprintf(shard, sizeof shard, "%.2s", hex);
  int root = open_root(c->dir);
  if (root < 0) {
    int rc = mkdirs_private(c->dir);
    if (rc != 0) return rc;
    root = open_root(c->dir);
    if (root < 0) return -errno;
  }
  int rc = 0, tmpfd = -1, entries = -1, sfd = -1;
  if ((tmpfd = ensure_subdir(root, "tmp")) < 0) rc = tmpfd;
  else if ((entries = ensure_subdir(root, "entries")) < 0) rc = entries;
  else if ((sfd = ensure_subdir(entries, shard)) < 0) rc = sfd;
  else rc = write_atomic_at(tmpfd, sfd, hex, buf, size);
  if (sfd >= 0) close(sfd);
  if (entries >= 0) close(entries);
  if (tmpfd >= 0) close(tmpfd);
  close(root);
  return rc;
}

const collgen__entry *collgen__cache_put(collgen__cache *c, collgen__entry *e) {
  insert_memory(c, e);
  if (!c->writable) return e; /* memory only or read-only: said once, at open */
  char hex[65], path[4300];
  shown_path p;
  collgen__hex(e->key, hex);
  entry_path(c->dir, hex, path, sizeof path);
  if (e->size > COLLGEN_CACHE_ENTRY_MAX_BYTES - sizeof(disk_header)) { /* no reader takes it */
    collgen__log(COLLGEN_LOG_WARN, "not writing cache entry %s: its %zu-byte cubin is over the "
                 "entry size cap of %d MiB (kept in memory)", show(path, &p), e->size,
                 (int)(COLLGEN_CACHE_ENTRY_MAX_BYTES >> 20));
    return e;
  }
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
  int rc = write_entry(c, hex, buf, total);
  free(buf);
  if (rc != 0) {
    collgen__log(COLLGEN_LOG_WARN, "cannot write cache entry %s: %s", show(path, &p),
                 strerror(-rc));
    return e;
  }
  int64_t cap = collgen__param_cache_max_bytes();
  if (cap > 0) collgen__cache_evict(c->dir, cap, path);
  return e;
}

/* ---- Walking the tree ------------------------------------------------- */

/* One thing found under <dir>/entries: either directly in it (shard NULL:
** anything but a directory, which is walked as a shard) or inside a shard
** (anything at all). `st` is its lstat; dirfd the directory holding it. */
typedef struct {
  int dirfd;
  const char *shard, *name, *path;
  struct stat st;
} tree_item;

typedef void (*tree_fn)(const tree_item *it, void *ctx);

/* Calls fn for every item under <dir>/entries, descending only into real
** directories (never through a link). Returns 0, or -errno when entries/
** cannot be opened (-ELOOP/-ENOTDIR: it is not a real directory). */
static int walk_tree(const char *dir, tree_fn fn, void *ctx) {
  int root = open_root(dir);
  if (root < 0) return -errno;
  int top = open_subdir(root, "entries");
  int er = errno;
  close(root);
  if (top < 0) return -er;
  DIR *d = fdopendir(top);
  if (!d) {
    er = errno;
    close(top);
    return -er;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (de->d_name[0] == '.') continue; /* ".", ".." and hidden names (.nfs*) */
    tree_item it = {top, NULL, de->d_name, NULL, {0}};
    char spath[4400];
    snprintf(spath, sizeof spath, "%s/entries/%s", dir, de->d_name);
    it.path = spath;
    if (fstatat(top, de->d_name, &it.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(it.st.st_mode)) {
      fn(&it, ctx);
      continue;
    }
    int sfd = open_subdir(top, de->d_name);
    if (sfd < 0) continue; /* replaced since the fstatat */
    DIR *s = fdopendir(sfd);
    if (!s) {
      close(sfd);
      continue;
    }
    struct dirent *fe;
    while ((fe = readdir(s)) != NULL) {
      if (fe->d_name[0] == '.') continue;
      char path[4800];
      tree_item e = {sfd, de->d_name, fe->d_name, path, {0}};
      snprintf(path, sizeof path, "%s/%s", spath, fe->d_name);
      if (fstatat(sfd, fe->d_name, &e.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      fn(&e, ctx);
    }
    closedir(s);
  }
  closedir(d);
  return 0;
}

static int64_t atime_ns(const struct stat *st) {
  return (int64_t)st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec;
}

typedef struct {
  collgen__cache_walk_fn cb;
  void *ctx;
  int count;
} regular_walk;

static void visit_regular(const tree_item *it, void *ctx) {
  regular_walk *w = ctx;
  if (!it->shard || !S_ISREG(it->st.st_mode)) return;
  w->cb(it->path, (int64_t)it->st.st_size, atime_ns(&it->st), w->ctx);
  w->count++;
}

int collgen__cache_walk(const char *dir, collgen__cache_walk_fn cb, void *ctx) {
  regular_walk w = {cb, ctx, 0};
  if (walk_tree(dir, visit_regular, &w) != 0) return -1;
  return w.count;
}

typedef struct {
  int remove_bad;
  collgen__cache_check_fn cb;
  void *ctx;
  int bad;
} check_walk;

static void visit_check(const tree_item *it, void *ctx) {
  check_walk *w = ctx;
  char why[256];
  int64_t size = S_ISREG(it->st.st_mode) ? (int64_t)it->st.st_size : 0;
  if (it->shard && S_ISREG(it->st.st_mode)) {
    collgen__entry e;
    struct stat seen;
    int rc = load_entry(it->dirfd, it->shard, it->name, &e, why, sizeof why, NULL, &seen);
    if (rc == LOAD_MISSING) return; /* removed since the readdir (eviction, clear) */
    if (rc == LOAD_OK) {
      w->cb(it->path, size, &e, NULL, 0, w->ctx);
      free(e.cubin);
      return;
    }
    int removed = w->remove_bad ? remove_if_safe(it->dirfd, it->name, &seen) : 0;
    w->bad++;
    w->cb(it->path, size, NULL, why, removed, w->ctx);
    return;
  }
  snprintf(why, sizeof why, "%s",
           S_ISLNK(it->st.st_mode)  ? "a symbolic link, not followed"
           : S_ISREG(it->st.st_mode) ? "a file where a shard folder belongs"
           : S_ISDIR(it->st.st_mode) ? "a folder where an entry belongs"
                                     : "not a regular file");
  int removed = w->remove_bad ? remove_if_safe(it->dirfd, it->name, &it->st) : 0;
  w->bad++;
  w->cb(it->path, size, NULL, why, removed, w->ctx);
}

int collgen__cache_check(const char *dir, int remove_bad, collgen__cache_check_fn cb,
                         void *ctx) {
  check_walk w = {remove_bad, cb, ctx, 0};
  int rc = walk_tree(dir, visit_check, &w);
  return rc != 0 ? rc : w.bad;
}

/* ---- Eviction and clearing ------------------------------------------- */

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
    if (p) l->paths = p;
    void *s = realloc(l->sizes, (size_t)cap * sizeof *l->sizes);
    if (s) l->sizes = s;
    void *a = realloc(l->atimes, (size_t)cap * sizeof *l->atimes);
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

/* Removes the entry at `path` (as walked) if it is still a regular file of
** `size` bytes last read at `atime`. Returns 1 when removed. */
static int evict_one(const char *path, int64_t size, int64_t atime) {
  char shard[3];
  const char *name;
  int sfd = open_shard_of(path, shard, &name);
  if (sfd < 0) return 0;
  struct stat st;
  int removed = fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                st.st_size == size && atime_ns(&st) == atime &&
                unlinkat(sfd, name, 0) == 0;
  close(sfd);
  return removed;
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
    removed += evict_one(l.paths[oldest], l.sizes[oldest], l.atimes[oldest]);
    l.total -= l.sizes[oldest];
    l.sizes[oldest] = -1;
  }
  free(l.paths);
  free(l.sizes);
  free(l.atimes);
  return removed;
}

static void clear_item(const tree_item *it, void *ctx) {
  collgen__cache_clear_result *r = ctx;
  if (!S_ISREG(it->st.st_mode) && !S_ISLNK(it->st.st_mode)) return; /* kept: not an entry */
  int rc = remove_if_safe(it->dirfd, it->name, &it->st);
  r->removed += rc > 0;
  if (rc < 0) {
    if (!r->failed) r->error = -rc;
    r->failed++;
  }
}

int collgen__cache_clear(const char *dir, collgen__cache_clear_result *r) {
  memset(r, 0, sizeof *r);
  int rc = walk_tree(dir, clear_item, r); /* refuses a folder without entries/ */
  if (rc != 0) return rc;
  int root = open_root(dir);
  if (root >= 0) {
    remove_temp_files(root, -1, &r->failed, &r->error);
    close(root);
  }
  return 0;
}
