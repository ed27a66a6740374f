/*
** main.c -- the `collgen` command: dispatches to its subcommands and owns
** the exit status of all of them: whatever a command returns, a failed
** write to stdout (disk full, closed descriptor) makes it 1, with a message
** on stderr.
*/
#define _DEFAULT_SOURCE /* sbrk */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#include <sys/mman.h>
#endif

#include "cli.h"

static const char usage[] =
    "usage: collgen COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  gen OP       print the generated CUDA C for a spec\n"
    "  compile OP   compile a spec through the cache and report it\n"
    "  pregen       compile a matrix of specs into a cache (offline)\n"
    "  cache        ls | verify | clear the on-disk cache\n"
    "  info         versions, GPUs and P2P matrix, cache location\n"
    "  demo         run every op on all GPUs and check them (the main job)\n"
    "  help [CMD]   this text, or the options of CMD\n"
    "\n"
    "OP is an op of the catalog (`collgen gen --help` lists them). `collgen\n"
    "help CMD` or `collgen CMD --help` for each command's options. Exit\n"
    "status: 0 success, 1 failure, 2 usage error. Environment: see\n"
    "docs/environment.md.\n";

typedef int (*cmd_fn)(int, char **);
static const struct {
  const char *name;
  cmd_fn fn;
} cmds[] = {{"gen", cmd_gen},     {"compile", cmd_compile}, {"pregen", cmd_pregen},
            {"cache", cmd_cache}, {"info", cmd_info},       {"demo", cmd_demo}};

static cmd_fn find(const char *name) {
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i)
    if (strcmp(name, cmds[i].name) == 0) return cmds[i].fn;
  return NULL;
}

/* The usage error of an unknown command; lists the commands. */
static int unknown(const char *name) {
  char names[256];
  size_t len = 0;
  names[0] = 0;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0] && len < sizeof names; ++i)
    len += (size_t)snprintf(names + len, sizeof names - len, "%s, ", cmds[i].name);
  if (len < sizeof names) snprintf(names + len, sizeof names - len, "help");
  return cli_bad_value(NULL, "unknown command", name, names);
}

/* `collgen help [CMD]`: the same as `collgen --help` / `collgen CMD --help`. */
static int help(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(usage, stdout);
    return 0;
  }
  if (argc > 2)
    return cli_bad_value("help", "unexpected argument", argv[2], "help takes at most one command");
  if (strcmp(argv[1], "help") == 0) return help(1, argv);
  cmd_fn fn = find(argv[1]);
  if (!fn) return unknown(argv[1]);
  char flag[] = "--help";
  char *args[] = {argv[1], flag, NULL};
  return fn(2, args);
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return 2;
  }
  if (cli_is_help(argv[1])) {
    fputs(usage, stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("collgen %s\n", collgen_version());
    return 0;
  }
  if (strcmp(argv[1], "help") == 0) return help(argc - 1, argv + 1);
  cmd_fn fn = find(argv[1]);
  return fn ? fn(argc - 1, argv + 1) : unknown(argv[1]);
}

/* The heap of a process that JIT-compiles, on glibc (docs/perf-notes.md,
** "The `collgen` command's malloc set-up"): NVRTC mallocs and touches ~20 MB per
** compile, and on the 2-core CI machines each first touch of a 4 KiB page
** is a page fault of ~12 us, about 4000 faults (50 ms) in a process's first
** compile; glibc's trimming hands the memory back after each compile, so
** every later one faults ~1300 times again. So: big blocks from the heap
** instead of fresh mmaps, the heap kept after a compile, and its first
** 64 MiB (reserved now, touched only as used) in transparent huge pages
** where the kernel gives them on request (THP "madvise"). The settings are
** the process's, which the command owns; the library never changes them.
** GLIBC_TUNABLES set by the user means the user tunes malloc: left alone. */
static void tune_heap_for_jit(void) {
#ifdef __GLIBC__
  const size_t pad = (size_t)64 << 20, huge = (size_t)2 << 20;
  if (getenv("GLIBC_TUNABLES")) return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, (int)pad);
  uintptr_t lo = (uintptr_t)sbrk(0);
  void *volatile grow = malloc(1 << 20); /* volatile: not optimized away */
  free(grow); /* the heap grew by the pad and keeps it (trim threshold) */
  uintptr_t hi = (uintptr_t)sbrk(0), start = (lo + huge - 1) & ~(huge - 1);
  if (lo != (uintptr_t)-1 && hi != (uintptr_t)-1 && hi > start)
    madvise((void *)start, hi - start, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
}

int main(int argc, char **argv) {
  tune_heap_for_jit();
  /* A descriptor 0-2 closed by the caller would be handed to the next
  ** open() (a cache file, say) and printf would write into it: park
  ** /dev/null there, and remember that stdout was missing. */
  int stdout_closed = 0;
  for (;;) {
    int fd = open("/dev/null", O_RDWR); /* the lowest free descriptor */
    if (fd < 0) break;
    if (fd > 2) {
      close(fd);
      break;
    }
    stdout_closed |= fd == 1;
  }
  /* The library prints nothing unless asked; the command asks for all of it
  ** (cache warnings included) unless the user chose a COLLGEN_LOG level. */
  setenv("COLLGEN_LOG", "info", 0);
  int rc = dispatch(argc, argv);
  /* Checked once here for every command: buffered output is only known to
  ** be written after the flush, and close can report a deferred error. */
  errno = 0;
  int bad = stdout_closed;
  int err = stdout_closed ? EBADF : 0;
  if (fflush(stdout) != 0 || ferror(stdout)) {
    bad = 1;
    if (!err) err = errno;
  }
  if (fclose(stdout) != 0 && !stdout_closed) {
    bad = 1;
    if (!err) err = errno;
  }
  if (bad) {
    fprintf(stderr, "collgen: cannot write to standard output: %s\n",
            err ? strerror(err) : "write error");
    if (rc == 0) rc = 1;
  }
  return rc;
}
