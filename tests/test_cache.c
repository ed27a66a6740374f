/*
** test_cache.c -- the cubin cache: hits and misses at each level, corrupt
** and truncated entries detected and rebuilt, many processes filling one
** directory at once, an unusable directory, LRU eviction; files in the
** cache tree that are not what they should be (symlinks, FIFOs, misnamed
** copies) are never followed, never block and are refused by `verify` as by
** the loader; private new directories; private, unpredictable source dumps;
** a read-only cache served from disk to another user without NVRTC; entries
** over the size cap (a sparse 4 GiB file) refused at once; `cache clear`
** failing loudly; names from the file system and the environment escaped.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "collgen.h"
#include "escape.h"
#include "generator.h"
#include "test_util.h"

static char dir[4096];

static void setup(void) { tu_make_temp_dir(dir, sizeof dir); }
static void teardown(void) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null", dir); /* read-only tests */
  if (system(cmd) != 0) {} /* rm -rf reports what it cannot remove */
  tu_remove_tree(dir);
}

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
  collgen__cache_clear_result r;
  cr_expect_eq(collgen__cache_clear(dir, &r), 0);
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

/* ---- A read-only shared cache (issue: "a read-only shared cache is
** ignored") -------------------------------------------------------------
** `collgen pregen` into a directory, `chmod -R a+rX,a-w`, then another user
** without NVRTC. Root passes every permission check, so as root the "other
** user" is a forked child that drops to nobody (65534); otherwise the
** directory made read-only is enough. */

#define NOBODY 65534

static void make_read_only(void) {
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "chmod -R a+rX,a-w '%s'", dir);
  cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* In a forked child: becomes another user when root; exits 99 when the
** cache directory is still writable (the test would prove nothing), 96
** when that user cannot reach it (a private $TMPDIR: the test is skipped). */
static void become_reader(void) {
  if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0))
    _exit(98);
  if (access(dir, R_OK | X_OK) != 0) _exit(96);
  if (access(dir, W_OK) == 0) _exit(99);
}

/* Skips the test when the reader could not reach the directory. */
static void skip_if_unreachable(int status) {
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 96) return;
  teardown(); /* a skipped test is not torn down */
  cr_skip_test("user %d cannot reach the test's folder (a private TMPDIR?)", NOBODY);
}

/* Runs `sh -c cmd` as the reader (see become_reader), stdout and stderr
** captured into *out (malloc'd). Returns the exit status. */
static int run_as_reader(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run_as_reader(char **out, const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    become_reader();
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(97);
  }
  close(fds[1]);
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  ssize_t got;
  while ((got = read(fds[0], buf + len, cap - len - 1)) > 0) {
    len += (size_t)got;
    if (cap - len < 1024) buf = realloc(buf, cap *= 2);
  }
  buf[len] = 0;
  close(fds[0]);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  skip_if_unreachable(status);
  cr_assert(WIFEXITED(status), "%s died: %s", cmd, buf);
  int rc = WEXITSTATUS(status);
  cr_assert(rc < 96, "`%s` as the reader could not run (%d: 97 exec, 98 setuid, 99 the "
            "directory is still writable): %s", cmd, rc, buf);
  *out = buf;
  return rc;
}

static int count_of(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; p && (p = strstr(p, what)) != NULL; p += strlen(what)) ++n;
  return n;
}

Test(cache, read_only_cache_serves_compile_without_nvrtc) {
  char *out = NULL;
  cr_assert_eq(run_cli(&out, "compile allreduce_sum --cache-dir '%s'", dir), 0, "%s", out);
  free(out);
  make_read_only();
  int rc = run_as_reader(&out, "COLLGEN_NVRTC_LIBRARY=/nonexistent timeout 60 %s compile "
                         "allreduce_sum --cache-dir '%s'", COLLGEN_CLI_PATH, dir);
  cr_expect_eq(rc, 0, "a read-only cache must be read: %s", out);
  cr_expect(strstr(out, "hit (disk)"), "%s", out);
  cr_expect_eq(count_of(out, "warning:"), 1, "one warning: %s", out);
  cr_expect(strstr(out, "read-only") && strstr(out, "memory only"), "%s", out);
  char stored[4400];
  snprintf(stored, sizeof stored, "stored:    %s\n", dir);
  cr_expect(strstr(out, stored), "the entry is reported on disk: %s", out);
  free(out);
}

typedef struct { int warnings; char text[4][1024]; } warn_log;
static void count_warnings(int level, const char *message, void *user) {
  warn_log *w = user;
  if (level != COLLGEN_LOG_WARN) return;
  if (w->warnings < 4) snprintf(w->text[w->warnings], sizeof w->text[0], "%s", message);
  w->warnings++;
}

/* The reader's side of read_only_cache_keeps_new_entries_in_memory; the
** exit code says what went wrong. */
static int read_only_reader(void) {
  warn_log w = {0};
  collgen_set_log_handler(count_warnings, &w);
  collgen_generator_t *g1, *g2;
  collgen_kernel_info_t info;
  if (collgen_generator_create(&g1, dir) != COLLGEN_OK) return 10;
  if (!collgen__generator_cache_dir(g1)) return 11; /* memory only */
  collgen_shape_t on_disk = shape_n(0), fresh = shape_n(1);
  if (collgen_get_kernel(g1, &on_disk, &info) != COLLGEN_OK || info.cache_hit != 1) return 12;
  if (collgen_get_kernel(g1, &fresh, &info) != COLLGEN_OK || info.cache_hit != 0) return 13;
  if (collgen_get_kernel(g1, &fresh, &info) != COLLGEN_OK || info.cache_hit != 2) return 14;
  if (collgen_generator_create(&g2, dir) != COLLGEN_OK) return 15;
  if (collgen_get_kernel(g2, &on_disk, &info) != COLLGEN_OK || info.cache_hit != 1) return 16;
  collgen_generator_destroy(g1);
  collgen_generator_destroy(g2);
  if (w.warnings != 1) return 17;
  if (!strstr(w.text[0], "read-only") || !strstr(w.text[0], "memory only")) return 18;
  return 0;
}

Test(cache, read_only_cache_keeps_new_entries_in_memory) {
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t info;
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  make_read_only();
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    become_reader();
    _exit(read_only_reader());
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  skip_if_unreachable(status);
  cr_assert(WIFEXITED(status));
  cr_expect_eq(WEXITSTATUS(status), 0,
               "reader failed at step %d (11: memory only, 12/16: no disk hit, 13/14: the new "
               "kernel, 17/18: not one read-only warning)", WEXITSTATUS(status));
  found f = {.n = 0};
  collgen__cache_walk(dir, collect, &f);
  cr_expect_eq(f.n, 1, "nothing was added to the read-only directory");
}

/* Compiles shape_n(0) into the cache (info, and its path in entry[4800]),
** then writes junk called `name` next to it (path in junk[4900]): a file
** that ls and verify call bad. */
static void entry_and_junk(const char *name, collgen_kernel_info_t *info, char *entry,
                           char *junk) {
  collgen_shape_t s = shape_n(0);
  cr_assert_eq(get(dir, &s, info, NULL), 0);
  only_entry(entry, 4800);
  snprintf(junk, 4900, "%.*s/%s", (int)(strrchr(entry, '/') - entry), entry, name);
  cr_assert_eq(tu_write_file(junk, "junk", 4), 0);
}

Test(cache, read_only_cache_ls_verify_and_clear) {
  collgen_kernel_info_t info;
  char bad[4900], entry[4800], *out = NULL;
  entry_and_junk("notakey", &info, entry, bad);
  make_read_only();
  int rc = run_as_reader(&out, "timeout 60 %s cache ls --cache-dir '%s'", COLLGEN_CLI_PATH, dir);
  cr_expect_eq(rc, 1, "one bad file: %s", out);
  cr_expect(strstr(out, info.kernel) && strstr(out, "2 entries"), "ls lists the entry: %s", out);
  free(out);
  rc = run_as_reader(&out, "timeout 60 %s cache verify --cache-dir '%s'", COLLGEN_CLI_PATH, dir);
  cr_expect_eq(rc, 1, "%s", out);
  cr_expect(strstr(out, "notakey") && strstr(out, "cannot remove") &&
            strstr(out, "Permission denied"), "verify says it could not remove it: %s", out);
  free(out);
  cr_expect_eq(access(bad, F_OK), 0);
  rc = run_as_reader(&out, "timeout 60 %s cache clear --cache-dir '%s'", COLLGEN_CLI_PATH, dir);
  cr_expect_eq(rc, 1, "clear removed nothing and must say so: %s", out);
  cr_expect(strstr(out, "could not") && strstr(out, "Permission denied"), "%s", out);
  free(out);
  cr_expect_eq(access(entry, F_OK), 0);
}

Test(cache, clear_fails_on_what_is_not_a_cache) {
  char file[4300], home[4300], junk[4400], *out = NULL;
  snprintf(file, sizeof file, "%s/a-file", dir);
  cr_assert_eq(tu_write_file(file, "x", 1), 0);
  cr_expect_eq(run_cli(&out, "cache clear --cache-dir '%s'", file), 1, "a regular file: %s", out);
  cr_expect(strstr(out, "not a cache directory"), "%s", out);
  free(out);
  /* a folder with a tmp/ but no entries/ (a home directory, say): untouched */
  snprintf(home, sizeof home, "%s/home", dir);
  snprintf(junk, sizeof junk, "%s/tmp", home);
  cr_assert_eq(mkdir(home, 0700), 0);
  cr_assert_eq(mkdir(junk, 0700), 0);
  snprintf(junk, sizeof junk, "%s/tmp/entry.abcdef", home);
  cr_assert_eq(tu_write_file(junk, "x", 1), 0);
  cr_expect_eq(run_cli(&out, "cache clear --cache-dir '%s'", home), 1, "no entries/: %s", out);
  cr_expect(strstr(out, "not a cache directory"), "%s", out);
  free(out);
  cr_expect_eq(access(junk, F_OK), 0, "clear removed a file from a folder that is no cache");
  /* nothing there at all: nothing to do */
  cr_expect_eq(run_cli(&out, "cache clear --cache-dir '%s/none'", dir), 0, "%s", out);
  cr_expect(strstr(out, "does not exist"), "%s", out);
  free(out);
}

/* ---- Entry sizes are capped (issue: "a sparse entry file makes the loader
** allocate its declared size") ------------------------------------------ */

#define OFF_PAYLOAD_BYTES 16
#define HEADER_BYTES 456
#define SPARSE_BYTES ((int64_t)4 << 30)

/* Turns the one entry into a header declaring `declared` payload bytes,
** the file cut (sparse) to `file_bytes`. Returns the entry's path. */
static void make_sparse_entry(char *path, size_t n, uint64_t declared, int64_t file_bytes) {
  only_entry(path, n);
  size_t len;
  char *d = tu_read_file(path, &len);
  cr_assert(d && len > HEADER_BYTES);
  memcpy(d + OFF_PAYLOAD_BYTES, &declared, 8);
  cr_assert_eq(tu_write_file(path, d, HEADER_BYTES), 0);
  free(d);
  cr_assert_eq(truncate(path, file_bytes), 0);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void count_check(const char *path, int64_t size, const collgen__entry *e, const char *why,
                        int removed, void *ctx) {
  (void)path; (void)size; (void)why; (void)removed;
  *(int *)ctx += e == NULL;
}

/* In a forked child (alarm: the old loader took 78-93 s): reads, checks and
** looks up the entry at `path`; each must refuse it within 50 ms and the
** peak RSS must not grow by more than 16 MiB. Returns 0 or a step number. */
static int refuse_quickly(const char *path, const uint8_t key[32], char *why, size_t n) {
  alarm(20);
  struct rusage r0, r1;
  getrusage(RUSAGE_SELF, &r0);
  collgen__entry e;
  double t0 = now_ms();
  if (collgen__cache_read_file(path, &e, why, n) == COLLGEN_OK) return 1;
  double t1 = now_ms();
  int bad = 0;
  if (collgen__cache_check(dir, 0, count_check, &bad) != 1 || bad != 1) return 2;
  double t2 = now_ms();
  collgen__cache *c = NULL;
  if (collgen__cache_open(&c, dir) != COLLGEN_OK) return 3;
  double t3 = now_ms();
  if (collgen__cache_find_disk(c, key, -1, -1) != NULL) return 4;
  double t4 = now_ms();
  collgen__cache_close(c);
  getrusage(RUSAGE_SELF, &r1);
  if (t1 - t0 > 50 || t2 - t1 > 50 || t4 - t3 > 50) return 5;
  if (r1.ru_maxrss - r0.ru_maxrss > 16 * 1024) return 6;
  return 0;
}

static void expect_refused_quickly(const char *path, const char *key_hex) {
  uint8_t key[32];
  for (int i = 0; i < 32; ++i) sscanf(key_hex + 2 * i, "%2hhx", &key[i]);
  char why[256] = "";
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) _exit(refuse_quickly(path, key, why, sizeof why));
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status), "the loader was killed (signal %d: 14 = it read the whole file)",
            WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  cr_expect_eq(WEXITSTATUS(status), 0, "step %d failed (1: accepted, 2: check, 4: loaded, "
               "5: over 50 ms, 6: peak memory grew)", WEXITSTATUS(status));
  cr_expect_neq(access(path, F_OK), 0, "the lookup removes the refused entry");
}

Test(cache, sparse_entry_over_the_cap_is_refused_at_once) {
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t info;
  char path[4800], *out = NULL;
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  /* header and file size agree: only the cap refuses it */
  make_sparse_entry(path, sizeof path, (uint64_t)SPARSE_BYTES, HEADER_BYTES + SPARSE_BYTES);
  expect_refused_quickly(path, info.key);
  /* and the CLI: ls refuses it at once, verify removes it */
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  make_sparse_entry(path, sizeof path, (uint64_t)SPARSE_BYTES, HEADER_BYTES + SPARSE_BYTES);
  double t0 = now_ms();
  cr_expect_eq(run_cli(&out, "cache ls --cache-dir '%s'", dir), 1, "%s", out);
  cr_expect_lt(now_ms() - t0, 5000, "cache ls took %.0f ms", now_ms() - t0);
  cr_expect(strstr(out, "cap"), "ls names the cap: %s", out);
  free(out);
  cr_expect_eq(run_cli(&out, "cache verify --cache-dir '%s'", dir), 1, "%s", out);
  cr_expect(strstr(out, "(removed)"), "%s", out);
  free(out);
  cr_expect_neq(access(path, F_OK), 0, "verify removed the sparse entry");
}

Test(cache, declared_size_must_match_the_file) {
  collgen_shape_t s = shape_n(0);
  collgen_kernel_info_t info;
  char path[4800];
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  make_sparse_entry(path, sizeof path, (uint64_t)SPARSE_BYTES, SPARSE_BYTES); /* 456 short */
  expect_refused_quickly(path, info.key);
  cr_assert_eq(get(dir, &s, &info, NULL), 0);
  struct stat st;
  only_entry(path, sizeof path);
  cr_assert_eq(stat(path, &st), 0);
  make_sparse_entry(path, sizeof path, (uint64_t)(st.st_size - HEADER_BYTES), st.st_size + 1);
  expect_refused_quickly(path, info.key);
}

/* A cubin over the cap is kept in memory only: no reader would load it. */
Test(cache, entry_over_the_cap_is_not_written) {
  collgen__cache *c = NULL;
  cr_assert_eq(collgen__cache_open(&c, dir), COLLGEN_OK);
  collgen__entry *e = calloc(1, sizeof *e);
  e->size = (size_t)64 << 20;
  e->cubin = calloc(1, e->size);
  cr_assert(e->cubin);
  memset(e->key, 0xab, 32);
  snprintf(e->kernel, sizeof e->kernel, "huge");
  cr_expect_eq(collgen__cache_put(c, e), e);
  cr_expect_eq(collgen__cache_find_memory(c, e->key), e, "kept in memory");
  found f = {.n = 0};
  collgen__cache_walk(dir, collect, &f);
  cr_expect_eq(f.n, 0, "an entry over the cap is not written");
  collgen__cache_close(c);
}

/* ---- Names are printed escaped (issue: "file names ... are printed
** raw") ----------------------------------------------------------------- */

Test(escape, bytes_outside_printable_ascii_and_backslashes) {
  char buf[64];
  cr_expect_str_eq(collgen__escape("plain name-1.cu", buf, sizeof buf), "plain name-1.cu");
  cr_expect_str_eq(collgen__escape("", buf, sizeof buf), "");
  cr_expect_str_eq(collgen__escape(NULL, buf, sizeof buf), "(null)");
  cr_expect_str_eq(collgen__escape("a\033[31m\n\\\x7f\xc3\xa9", buf, sizeof buf),
                   "a\\x1b[31m\\x0a\\\\\\x7f\\xc3\\xa9");
  /* exactly filling the buffer is whole; one byte more is cut at a whole
  ** escape and marked with "\...", which no whole result contains */
  cr_expect_str_eq(collgen__escape("abcde", buf, 6), "abcde");
  cr_expect_str_eq(collgen__escape("abcdef", buf, 6), "a\\...");
  cr_expect_str_eq(collgen__escape("ab\ncdefgh", buf, 10), "ab\\...");
  cr_expect_str_eq(collgen__escape("ab\ncdefgh", buf, 11), "ab\\x0a\\...");
  cr_expect_str_eq(collgen__escape("abc", buf, 4), "", "too small for the cut mark");
  char big[COLLGEN_ESCAPED_SIZE(256)], all[256];
  for (int i = 0; i < 255; ++i) all[i] = (char)(i + 1);
  all[255] = 0;
  collgen__escape(all, big, sizeof big);
  for (const char *p = big; *p; ++p) cr_assert(*p >= 0x20 && *p <= 0x7e, "0x%02x", *p);
  cr_expect_null(strstr(big, "\\..."), "COLLGEN_ESCAPED_SIZE holds any name: %s", big);
}

/* No control byte but the newlines ending lines, and no line starts with
** the text smuggled after a newline in a name. */
static void expect_clean_output(const char *out, const char *what) {
  for (const unsigned char *p = (const unsigned char *)out; *p; ++p)
    cr_expect(*p == '\n' || (*p >= 0x20 && *p != 0x7f), "%s: raw byte 0x%02x in: %s", what, *p,
              out);
  cr_expect_null(strstr(out, "\nFAKE"), "%s: a name split a line: %s", what, out);
}

Test(cache, ls_and_verify_escape_names) {
  collgen_kernel_info_t info;
  char entry[4800], evil[4900], *out = NULL;
  entry_and_junk("x\033[2J\nFAKE ok\\", &info, entry, evil);
  /* a valid entry whose kernel name (from its header) is hostile too */
  collgen__cache *c = NULL;
  cr_assert_eq(collgen__cache_open(&c, dir), COLLGEN_OK);
  collgen__entry *e = calloc(1, sizeof *e);
  e->size = 16;
  e->cubin = calloc(1, 16);
  memset(e->key, 0xcd, 32);
  snprintf(e->kernel, sizeof e->kernel, "k\033]0;owned\007\nFAKE");
  snprintf(e->canonical, sizeof e->canonical, "arch=sm_90\033[1m;");
  collgen__cache_put(c, e);
  collgen__cache_close(c);
  const char *subs[] = {"ls", "verify"};
  for (int i = 0; i < 2; ++i) {
    cr_expect_eq(run_cli(&out, "cache %s --cache-dir '%s'", subs[i], dir), 1, "%s", out);
    expect_clean_output(out, subs[i]);
    cr_expect(strstr(out, "x\\x1b[2J\\x0aFAKE ok\\\\"), "%s: the name escaped: %s", subs[i], out);
    if (i == 0)
      cr_expect(strstr(out, "k\\x1b]0;owned\\x07\\x0aFAKE"), "the kernel escaped: %s", out);
    free(out);
  }
}

Test(cache, directory_names_are_escaped) {
  char file[4300], bad[4400], *out = NULL;
  snprintf(file, sizeof file, "%s/x\033[2J\nFAKE", dir);
  cr_assert_eq(tu_write_file(file, "x", 1), 0);
  snprintf(bad, sizeof bad, "%s/sub", file); /* unusable: a folder under a file */
  warn_log w = {0};
  collgen_set_log_handler(count_warnings, &w);
  collgen__cache *c = NULL;
  cr_assert_eq(collgen__cache_open(&c, bad), COLLGEN_OK);
  collgen__cache_close(c);
  collgen_set_log_handler(NULL, NULL);
  cr_assert_eq(w.warnings, 1);
  expect_clean_output(w.text[0], "the cache warning");
  cr_expect(strstr(w.text[0], "x\\x1b[2J\\x0aFAKE/sub"), "%s", w.text[0]);
  const char *subs[] = {"ls", "verify", "clear"};
  for (int i = 0; i < 3; ++i) {
    run_cli(&out, "cache %s --cache-dir '%s'", subs[i], file);
    expect_clean_output(out, subs[i]);
    free(out);
  }
}

Test(cache, environment_values_are_escaped_in_warnings) {
  warn_log w = {0};
  collgen_set_log_handler(count_warnings, &w);
  setenv("COLLGEN_CACHE_MAX_BYTES", "12\033[2J\nFAKE\\", 1);
  cr_expect_eq(collgen__param_cache_max_bytes(), (int64_t)1 << 30, "the default is kept");
  collgen_set_log_handler(NULL, NULL);
  cr_assert_eq(w.warnings, 1);
  expect_clean_output(w.text[0], "the parameter warning");
  cr_expect(strstr(w.text[0], "COLLGEN_CACHE_MAX_BYTES=12\\x1b[2J\\x0aFAKE\\\\"), "%s",
            w.text[0]);
}

/* Building ahead on several threads (collgen_comm_prepare's first step):
** every missing kernel is built once, lands in memory and on disk, and is
** byte for byte the cubin a serial fetch builds; kernels already cached
** and repeated shapes are not built again. */
Test(cache, build_ahead_on_threads_matches_serial_builds) {
  enum { N = 4 };
  collgen_shape_t s[N + 2];
  for (int i = 0; i < N; ++i) s[i] = shape_n(i);
  s[N] = s[0];     /* a repeat */
  s[N + 1] = s[1]; /* another */
  collgen_kernel_info_t cached;
  cr_expect_eq(get(dir, &s[3], &cached, NULL), 0, "s[3] is on disk before the build");
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, dir), COLLGEN_OK);
  cr_expect_eq(collgen__generator_build_ahead(g, s, N + 2, 3), N - 1,
               "the three kernels missing from the cache, each once");
  for (int i = 0; i < N; ++i) {
    collgen_kernel_info_t info;
    cr_assert_eq(collgen_get_kernel(g, &s[i], &info), COLLGEN_OK);
    cr_expect_eq(info.cache_hit, 2, "shape %d: the fetch after the build is a memory hit", i);
    char serial_dir[4200];
    snprintf(serial_dir, sizeof serial_dir, "%s/serial-%d", dir, i);
    collgen_kernel_info_t one;
    collgen_generator_t *sg;
    cr_expect_eq(get(serial_dir, &s[i], &one, &sg), 0, "a fresh cache compiles");
    cr_expect_eq(one.cubin_size, info.cubin_size, "shape %d", i);
    cr_expect(one.cubin_size == info.cubin_size && memcmp(one.cubin, info.cubin, one.cubin_size) == 0,
              "shape %d: the thread's cubin is the serial one", i);
    collgen_generator_destroy(sg);
  }
  collgen_generator_destroy(g);
  for (int i = 0; i < N; ++i) {
    collgen_kernel_info_t info;
    cr_expect_eq(get(dir, &s[i], &info, NULL), 1, "shape %d is on disk for the next process", i);
  }
  cr_assert_eq(collgen_generator_create(&g, dir), COLLGEN_OK);
  cr_expect_eq(collgen__generator_build_ahead(g, s, N, 4), 0, "all cached: nothing to build");
  cr_expect_eq(collgen__generator_build_ahead(g, s, 1, 4), 0, "one kernel is the caller's fetch");
  cr_expect_eq(collgen__generator_build_ahead(g, s, N, 1), 0, "one thread: the caller's fetches");
  collgen_generator_destroy(g);
}

/* A cache that cannot write (here a directory under a file, as root passes
** every permission check): the kernels built ahead still serve the process
** from memory, none compiled twice. */
Test(cache, build_ahead_into_a_memory_only_cache_serves_from_memory) {
  char file[4200], bad[4300];
  snprintf(file, sizeof file, "%s/a-file", dir);
  cr_assert_eq(tu_write_file(file, "x", 1), 0);
  snprintf(bad, sizeof bad, "%s/sub", file);
  collgen_shape_t s[3] = {shape_n(4), shape_n(5), shape_n(6)};
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, bad), COLLGEN_OK);
  cr_expect_null(collgen__generator_cache_dir(g));
  cr_expect_eq(collgen__generator_build_ahead(g, s, 3, 2), 3);
  for (int i = 0; i < 3; ++i) {
    collgen_kernel_info_t info;
    cr_assert_eq(collgen_get_kernel(g, &s[i], &info), COLLGEN_OK);
    cr_expect_eq(info.cache_hit, 2, "shape %d from memory", i);
  }
  collgen_generator_destroy(g);
}
