/*
** test_cache.c -- the cubin cache: hits and misses at each level, corrupt
** and truncated entries detected and rebuilt, many processes filling one
** directory at once, an unusable directory, LRU eviction; files in the
** cache tree that are not what they should be (symlinks, FIFOs, misnamed
** copies) are never followed, never block and are refused by `verify` as by
** the loader; private new directories; private, unpredictable source dumps.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
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

/* ---- Files in the cache directory are not trusted (issue 10) ----------
** Anything in the tree may be a symlink, a FIFO, a misnamed copy: walks and
** opens never follow a link out of the tree, never block, and `verify`
** refuses exactly what the loader refuses. */

static void mkdir_or_die(const char *path) {
  cr_assert(mkdir(path, 0700) == 0 || access(path, F_OK) == 0, "mkdir %s", path);
}

/* <dir>/outside/victim: a file that no cache operation may touch. */
static void make_victim(char *outside, size_t on, char *victim, size_t vn) {
  snprintf(outside, on, "%s/outside", dir);
  mkdir_or_die(outside);
  snprintf(victim, vn, "%s/victim", outside);
  cr_assert_eq(tu_write_file(victim, "precious", 8), 0);
  struct timespec ts[2] = {{1000, 0}, {1000, 0}}; /* oldest of all, older than an hour */
  cr_assert_eq(utimensat(AT_FDCWD, victim, ts, 0), 0);
}

/* A cache tree whose shard entries/zz is a symlink to <dir>/outside. */
static void make_symlinked_shard(char *victim, size_t vn) {
  char outside[4200], p[4300];
  snprintf(p, sizeof p, "%s/entries", dir);
  mkdir_or_die(p);
  snprintf(p, sizeof p, "%s/tmp", dir);
  mkdir_or_die(p);
  make_victim(outside, sizeof outside, victim, vn);
  snprintf(p, sizeof p, "%s/entries/zz", dir);
  cr_assert_eq(symlink(outside, p), 0);
}

static int run_cli(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run_cli(char **out, const char *fmt, ...) {
  char args[4096], cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "timeout 60 %s %s", COLLGEN_CLI_PATH, args);
  return tu_run(cmd, out);
}

Test(cache, clear_does_not_follow_symlinks) {
  char victim[4300], out_tmp[4300], tmp_victim[4400], p[4300], *out = NULL;
  make_symlinked_shard(victim, sizeof victim);
  /* tmp/ itself a link elsewhere too */
  snprintf(out_tmp, sizeof out_tmp, "%s/outside-tmp", dir);
  mkdir_or_die(out_tmp);
  snprintf(tmp_victim, sizeof tmp_victim, "%s/entry.abcdef", out_tmp);
  cr_assert_eq(tu_write_file(tmp_victim, "x", 1), 0);
  snprintf(p, sizeof p, "%s/tmp", dir);
  cr_assert_eq(rmdir(p), 0);
  cr_assert_eq(symlink(out_tmp, p), 0);
  cr_expect_eq(run_cli(&out, "cache clear --cache-dir '%s'", dir), 0, "%s", out);
  free(out);
  cr_expect_eq(access(victim, F_OK), 0, "clear deleted a file outside the cache");
  cr_expect_eq(access(tmp_victim, F_OK), 0, "clear deleted a file behind a symlinked tmp/");
  collgen__cache_clear(dir);
  cr_expect_eq(access(victim, F_OK), 0);
  cr_expect_eq(access(tmp_victim, F_OK), 0);
}

Test(cache, verify_does_not_follow_symlinks) {
  char victim[4300], *out = NULL;
  make_symlinked_shard(victim, sizeof victim); /* "precious" is not an entry: bad */
  cr_expect_eq(run_cli(&out, "cache ls --cache-dir '%s'", dir), 1, "%s", out);
  free(out);
  cr_expect_eq(access(victim, F_OK), 0);
  out = NULL;
  int rc = run_cli(&out, "cache verify --cache-dir '%s'", dir);
  cr_expect_eq(access(victim, F_OK), 0, "verify deleted a file outside the cache: %s", out);
  cr_expect_eq(rc, 1, "a symlink in the cache is reported as bad: %s", out);
  free(out);
}

Test(cache, eviction_does_not_follow_symlinks) {
  char victim[4300];
  make_symlinked_shard(victim, sizeof victim);
  collgen__cache_evict(dir, 0, NULL);
  cr_expect_eq(access(victim, F_OK), 0, "eviction deleted a file outside the cache");
}

Test(cache, temp_sweep_does_not_follow_symlinks) {
  char outside[4200], victim[4300], p[4300];
  snprintf(p, sizeof p, "%s/entries", dir);
  mkdir_or_die(p);
  make_victim(outside, sizeof outside, victim, sizeof victim); /* older than an hour */
  snprintf(p, sizeof p, "%s/tmp", dir);
  cr_assert_eq(symlink(outside, p), 0);
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, dir), COLLGEN_OK);
  collgen_generator_destroy(g);
  cr_expect_eq(access(victim, F_OK), 0, "opening the cache swept a file outside it");
}

Test(cache, symlinked_entry_is_not_loaded) {
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t info;
  char path[4800], copy[4300], outside[4200];
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  only_entry(path, sizeof path);
  snprintf(outside, sizeof outside, "%s/outside", dir);
  mkdir_or_die(outside);
  snprintf(copy, sizeof copy, "%s/entry", outside);
  cr_assert_eq(rename(path, copy), 0);
  cr_assert_eq(symlink(copy, path), 0);
  cr_expect_eq(get(dir, &s, &info, NULL), 0, "an entry behind a symlink is a miss");
  struct stat st;
  cr_expect_eq(lstat(path, &st), 0);
  cr_expect(S_ISREG(st.st_mode), "the link is replaced by a real entry");
  cr_expect_eq(access(copy, F_OK), 0, "the link's target is left alone");
}

Test(cache, fifo_entry_does_not_hang, .timeout = 60) {
  char *out = NULL, path[4800];
  cr_assert_eq(run_cli(&out, "compile allreduce_sum --cache-dir '%s'", dir), 0, "%s", out);
  free(out);
  only_entry(path, sizeof path);
  cr_assert_eq(unlink(path), 0);
  cr_assert_eq(mkfifo(path, 0600), 0);
  out = NULL;
  cr_expect_eq(run_cli(&out, "compile allreduce_sum --cache-dir '%s'", dir), 0,
               "compile over a FIFO entry (124 = hung): %s", out);
  cr_expect(out && strstr(out, "miss"), "a FIFO is a miss: %s", out);
  free(out);
  struct stat st;
  cr_expect_eq(lstat(path, &st), 0);
  cr_expect(S_ISREG(st.st_mode), "the rebuilt entry replaced the FIFO");
  /* a FIFO in the tree does not block maintenance either */
  char fifo[4900];
  snprintf(fifo, sizeof fifo, "%s.fifo", path);
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  out = NULL;
  cr_expect_eq(run_cli(&out, "cache verify --cache-dir '%s'", dir), 1, "%s", out);
  free(out);
  out = NULL;
  cr_expect_eq(run_cli(&out, "cache clear --cache-dir '%s'", dir), 0, "%s", out);
  free(out);
}

/* A valid entry under a name the loader would never look it up by. */
static void expect_misplaced_is_bad(const char *from, const char *to) {
  size_t n;
  char *d = tu_read_file(from, &n), *out = NULL;
  cr_assert(d);
  cr_assert_eq(tu_write_file(to, d, n), 0);
  free(d);
  collgen__entry e;
  char why[256];
  int rc = collgen__cache_read_file(to, &e, why, sizeof why);
  if (rc == COLLGEN_OK) free(e.cubin);
  cr_expect_neq(rc, COLLGEN_OK, "%s: the loader would refuse it", to);
  cr_expect_eq(run_cli(&out, "cache verify --cache-dir '%s'", dir), 1, "%s", out);
  cr_expect(out && strstr(out, to), "verify names %s: %s", to, out);
  free(out);
  cr_expect_neq(access(to, F_OK), 0, "verify removed %s", to);
  cr_expect_eq(access(from, F_OK), 0, "and kept the good entry");
}

Test(cache, verify_checks_what_the_loader_checks) {
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t info;
  char path[4800], to[4800], shard[4300];
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  only_entry(path, sizeof path);
  /* same shard, another key: the header's key does not match the name */
  snprintf(to, sizeof to, "%s", path);
  char *last = to + strlen(to) - 1;
  *last = *last == '0' ? '1' : '0';
  expect_misplaced_is_bad(path, to);
  /* the right key in the wrong shard */
  snprintf(shard, sizeof shard, "%s/entries/%s", dir, info.key[0] == 'f' ? "00" : "ff");
  mkdir_or_die(shard);
  snprintf(to, sizeof to, "%s/%s", shard, info.key);
  expect_misplaced_is_bad(path, to);
  /* not a key at all */
  snprintf(to, sizeof to, "%.*s/notakey", (int)(strrchr(path, '/') - path), path);
  expect_misplaced_is_bad(path, to);
}

static mode_t mode_of(const char *path) {
  struct stat st;
  cr_assert_eq(lstat(path, &st), 0, "%s", path);
  return st.st_mode & 07777;
}

Test(cache, new_directories_are_private) {
  char root[4200], p[4400];
  snprintf(root, sizeof root, "%s/new/cache", dir);
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t info;
  cr_assert_eq(get(root, &s, &info, NULL), 0);
  snprintf(p, sizeof p, "%s/new", dir);
  cr_expect_eq(mode_of(p), 0700, "%s: %o", p, mode_of(p));
  cr_expect_eq(mode_of(root), 0700, "%s: %o", root, mode_of(root));
  snprintf(p, sizeof p, "%s/entries", root);
  cr_expect_eq(mode_of(p), 0700, "%s: %o", p, mode_of(p));
  snprintf(p, sizeof p, "%s/tmp", root);
  cr_expect_eq(mode_of(p), 0700, "%s: %o", p, mode_of(p));
  snprintf(p, sizeof p, "%s/entries/%.2s", root, info.key);
  cr_expect_eq(mode_of(p), 0700, "%s: %o", p, mode_of(p));
}

/* ---- Source dumps (COLLGEN_DUMP_SOURCE, compile errors) ---------------- */

Test(cache, source_dump_is_private_unique_and_no_follow) {
  char tmp[4200], victim[4300], planted[4600], cmd[4400], *out = NULL;
  snprintf(tmp, sizeof tmp, "%s/t", dir);
  mkdir_or_die(tmp);
  snprintf(victim, sizeof victim, "%s/victim", dir);
  cr_assert_eq(tu_write_file(victim, "precious", 8), 0);
  setenv("TMPDIR", tmp, 1);
  setenv("COLLGEN_DUMP_SOURCE", "1", 1);
  collgen_shape_t s = shape_n(0);
  collgen_generator_t *g;
  collgen_plan_t plan;
  cr_assert_eq(collgen_generator_create(&g, dir), COLLGEN_OK);
  cr_assert_eq(collgen_plan(g, &s, &plan), COLLGEN_OK);
  /* the name the dump used to take, planted as a link */
  snprintf(planted, sizeof planted, "%s/collgen-%s-%d.cu", tmp, plan.kernel, (int)getpid());
  cr_assert_eq(symlink(victim, planted), 0);
  collgen_kernel_info_t info;
  cr_assert_eq(collgen_get_kernel(g, &s, &info), COLLGEN_OK, "%s",
               collgen_generator_last_error(g));
  collgen_generator_destroy(g);
  size_t n;
  char *v = tu_read_file(victim, &n);
  cr_expect(v && n == 8 && memcmp(v, "precious", 8) == 0, "the dump followed a planted symlink");
  free(v);
  snprintf(cmd, sizeof cmd, "find '%s' -name 'collgen-*.cu' -type f -perm 0600 | wc -l", tmp);
  tu_run(cmd, &out);
  cr_expect_eq(atoi(out), 1, "one private (0600) regular dump file: %s", out);
  free(out);
}
