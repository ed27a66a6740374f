/*
** test_cache.c -- the cubin cache: hits and misses at each level, corrupt
** and truncated entries detected and rebuilt, many processes filling one
** directory at once, an unusable directory, LRU eviction.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "collgen.h"
#include "test_util.h"

static char dir[4096];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir); }
static void teardown(void) { tu_remove_tree(dir); }

TestSuite(cache, .init = setup, .fini = teardown, .timeout = 300);

static collgen_shape_t shape_n(int n) {
  collgen_shape_t s;
  collgen_shape_init(&s, n % 2 ? COLLGEN_OP_ALLGATHER_RMSNORM : COLLGEN_OP_ALLREDUCE_SUM);
  s.ngpus = 2 + n / 2;
  s.cols = 1024;
  return s;
}

static int get(const char *d, const collgen_shape_t *s, collgen_kernel_info_t *info,
               collgen_generator_t **keep) {
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, d), COLLGEN_OK, "%s", collgen_last_error());
  int rc = collgen_get_kernel(g, s, info);
  cr_assert_eq(rc, COLLGEN_OK, "%s", collgen_generator_last_error(g));
  int hit = info->cache_hit;
  if (keep) *keep = g;
  else collgen_generator_destroy(g);
  return hit;
}

typedef struct { char paths[64][4800]; int n; } found;
static void collect(const char *path, int64_t size, int64_t atime, void *ctx) {
  (void)size; (void)atime;
  found *f = ctx;
  if (f->n < 64) snprintf(f->paths[f->n++], sizeof f->paths[0], "%s", path);
}

static void only_entry(char *path, size_t n) {
  found f = {.n = 0};
  collgen__cache_walk(dir, collect, &f);
  cr_assert_eq(f.n, 1, "expected one entry, found %d", f.n);
  snprintf(path, n, "%s", f.paths[0]);
}

Test(cache, miss_then_memory_then_disk) {
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t i1, i2, i3;
  collgen_generator_t *g;
  cr_expect_eq(get(dir, &s, &i1, &g), 0, "first fetch compiles");
  cr_expect_eq(collgen_get_kernel(g, &s, &i2), COLLGEN_OK);
  cr_expect_eq(i2.cache_hit, 2, "second fetch in the same generator is a memory hit");
  cr_expect_eq(get(dir, &s, &i3, NULL), 1, "a new generator finds it on disk");
  cr_expect_str_eq(i1.key, i3.key);
  cr_expect_eq(i1.cubin_size, i3.cubin_size);
  cr_expect(memcmp(i1.cubin, i2.cubin, i1.cubin_size) == 0);
  cr_expect_eq(i3.registers, i1.registers);
  collgen_generator_destroy(g);
}

static void damage_and_expect_rebuild(void (*damage)(const char *path)) {
  collgen_shape_t s = shape_n(1);
  collgen_kernel_info_t info;
  char path[4800];
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  only_entry(path, sizeof path);
  damage(path);
  collgen__entry e;
  char why[256];
  cr_expect_neq(collgen__cache_read_file(path, &e, why, sizeof why), COLLGEN_OK,
                "damaged entry must not verify");
  cr_expect_eq(get(dir, &s, &info, NULL), 0, "a damaged entry is a miss and is rebuilt");
  cr_expect_eq(collgen__cache_read_file(path, &e, why, sizeof why), COLLGEN_OK,
               "rebuilt entry verifies: %s", why);
  free(e.cubin);
  cr_expect_eq(get(dir, &s, &info, NULL), 1, "and is then a disk hit");
}

static void flip_payload_byte(const char *path) {
  size_t n;
  char *d = tu_read_file(path, &n);
  d[n - n / 3] ^= 0x40;
  cr_assert_eq(tu_write_file(path, d, n), 0);
  free(d);
}
static void truncate_half(const char *path) {
  struct stat st;
  stat(path, &st);
  cr_assert_eq(truncate(path, st.st_size / 2), 0);
}
static void break_magic(const char *path) {
  size_t n;
  char *d = tu_read_file(path, &n);
  memcpy(d, "\177ELF", 4);
  cr_assert_eq(tu_write_file(path, d, n), 0);
  free(d);
}
static void flip_header_field(const char *path) {
  size_t n;
  char *d = tu_read_file(path, &n);
  d[120] ^= 1; /* inside the kernel name / metadata, covered by the checksum */
  cr_assert_eq(tu_write_file(path, d, n), 0);
  free(d);
}

Test(cache, flipped_payload_byte_is_rebuilt) { damage_and_expect_rebuild(flip_payload_byte); }
Test(cache, truncated_entry_is_rebuilt) { damage_and_expect_rebuild(truncate_half); }
Test(cache, bad_magic_is_rebuilt) { damage_and_expect_rebuild(break_magic); }
Test(cache, flipped_header_is_rebuilt) { damage_and_expect_rebuild(flip_header_field); }

Test(cache, concurrent_writers_leave_valid_entries) {
  enum { PROCS = 6, SPECS = 4 };
  for (int p = 0; p < PROCS; ++p) {
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
      collgen_generator_t *g;
      if (collgen_generator_create(&g, dir) != COLLGEN_OK) _exit(3);
      for (int k = 0; k < SPECS; ++k) {
        collgen_shape_t s = shape_n((k + p) % SPECS); /* different orders */
        collgen_kernel_info_t info;
        if (collgen_get_kernel(g, &s, &info) != COLLGEN_OK) _exit(4);
      }
      collgen_generator_destroy(g);
      _exit(0);
    }
  }
  int status, ok = 0;
  while (wait(&status) > 0) ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  cr_expect_eq(ok, PROCS, "every writer succeeded");
  found f = {.n = 0};
  collgen__cache_walk(dir, collect, &f);
  cr_expect_eq(f.n, SPECS, "one entry per distinct spec");
  for (int i = 0; i < f.n; ++i) {
    collgen__entry e;
    char why[256];
    cr_expect_eq(collgen__cache_read_file(f.paths[i], &e, why, sizeof why), COLLGEN_OK,
                 "%s: %s", f.paths[i], why);
    free(e.cubin);
  }
  char cmd[4300], *out = NULL;
  snprintf(cmd, sizeof cmd, "ls -A '%s/tmp' | wc -l", dir);
  tu_run(cmd, &out);
  cr_expect_eq(atoi(out), 0, "no temp files left behind");
  free(out);
}

Test(cache, unusable_directory_degrades_to_memory) {
  char file[4200], bad[4300];
  snprintf(file, sizeof file, "%s/a-file", dir);
  cr_assert_eq(tu_write_file(file, "x", 1), 0);
  snprintf(bad, sizeof bad, "%s/sub", file); /* a directory under a file */
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, bad), COLLGEN_OK);
  cr_expect_null(collgen__generator_cache_dir(g));
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t info;
  cr_expect_eq(collgen_get_kernel(g, &s, &info), COLLGEN_OK);
  cr_expect_eq(info.cache_hit, 0);
  cr_expect_eq(collgen_get_kernel(g, &s, &info), COLLGEN_OK);
  cr_expect_eq(info.cache_hit, 2, "memory still caches");
  collgen_generator_destroy(g);
}

static void set_atime(const char *path, time_t t) {
  struct timespec ts[2] = {{t, 0}, {0, UTIME_OMIT}};
  cr_assert_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

Test(cache, evicts_least_recently_used) {
  collgen_kernel_info_t info[3];
  char paths[3][4800];
  int64_t total = 0, sizes[3];
  for (int k = 0; k < 3; ++k) {
    collgen_shape_t s = shape_n(k);
    cr_assert_eq(get(dir, &s, &info[k], NULL), 0);
    snprintf(paths[k], sizeof paths[k], "%s/entries/%.2s/%s", dir, info[k].key, info[k].key);
    struct stat st;
    cr_assert_eq(stat(paths[k], &st), 0);
    sizes[k] = st.st_size;
    total += st.st_size;
  }
  time_t now = time(NULL);
  set_atime(paths[0], now);        /* most recent */
  set_atime(paths[1], now - 100);  /* oldest */
  set_atime(paths[2], now - 50);
  int removed = collgen__cache_evict(dir, total - 1, NULL);
  cr_expect_eq(removed, 1);
  cr_expect_neq(access(paths[1], F_OK), 0, "the least recently used entry went first");
  cr_expect_eq(access(paths[0], F_OK), 0);
  cr_expect_eq(access(paths[2], F_OK), 0);
  removed = collgen__cache_evict(dir, sizes[0], NULL);
  cr_expect_eq(removed, 1);
  cr_expect_eq(access(paths[0], F_OK), 0, "the most recent entry stays");
  /* A hit bumps atime: fetch entry 0 from disk, then it must be newest. */
  set_atime(paths[0], now - 1000);
  collgen_shape_t s0 = shape_n(0);
  cr_expect_eq(get(dir, &s0, &info[0], NULL), 1);
  struct stat st;
  stat(paths[0], &st);
  cr_expect_geq(st.st_atime, now - 5, "a disk hit refreshes atime");
}

Test(cache, size_cap_applies_on_write) {
  setenv("COLLGEN_CACHE_MAX_BYTES", "1", 1); /* smaller than any entry */
  collgen_kernel_info_t info;
  for (int k = 0; k < 3; ++k) {
    collgen_shape_t s = shape_n(k);
    get(dir, &s, &info, NULL);
  }
  found f = {.n = 0};
  collgen__cache_walk(dir, collect, &f);
  cr_expect_eq(f.n, 1, "only the entry just written is kept");
}

Test(cache, stale_temp_files_are_swept_on_open) {
  char tmpdir[4200], old[4300], young[4300];
  snprintf(tmpdir, sizeof tmpdir, "%s/tmp", dir);
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, dir), COLLGEN_OK); /* creates tmp/ */
  collgen_generator_destroy(g);
  snprintf(old, sizeof old, "%s/entry.dead01", tmpdir);
  snprintf(young, sizeof young, "%s/entry.live01", tmpdir);
  cr_assert_eq(tu_write_file(old, "x", 1), 0);
  cr_assert_eq(tu_write_file(young, "y", 1), 0);
  struct timespec ts[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
  cr_assert_eq(utimensat(AT_FDCWD, old, ts, 0), 0);
  cr_assert_eq(collgen_generator_create(&g, dir), COLLGEN_OK);
  collgen_generator_destroy(g);
  cr_expect_neq(access(old, F_OK), 0, "a temp file older than an hour is removed");
  cr_expect_eq(access(young, F_OK), 0, "a young one may belong to a live writer");
}
