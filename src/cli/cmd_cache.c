/*
** cmd_cache.c -- `collgen cache ls|verify|clear [--cache-dir D]`.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "sha256.h"

static const char help[] =
    "usage: collgen cache ls|verify|clear [--cache-dir D]\n"
    "  ls      one line per entry: key prefix, bytes, registers, kernel, arch\n"
    "  verify  check every entry as the loader does; remove bad files and\n"
    "          symlinks (exit 1 if anything was bad)\n"
    "  clear   remove every entry\n";

typedef struct {
  int entries, bad;
  int64_t bytes;
  int verify, list;
} walk_state;

static void visit(const char *path, int64_t size, const collgen__entry *e, const char *why,
                  int removed, void *ctx) {
  walk_state *w = ctx;
  w->entries++;
  w->bytes += size;
  if (!e) {
    w->bad++;
    printf("BAD  %s: %s%s\n", path, why,
           !w->verify ? "" : removed ? " (removed)" : " (left in place)");
    return;
  }
  if (w->list) {
    char hex[65];
    collgen__hex(e->key, hex);
    const char *arch = strstr(e->canonical, "arch=");
    printf("%.12s %8zu B %3d regs  %-52s %.*s\n", hex, e->size, e->registers, e->kernel,
           arch ? (int)strcspn(arch + 5, ";") : 0, arch ? arch + 5 : "");
  }
}

int cmd_cache(int argc, char **argv) {
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(help, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "ls") != 0 && strcmp(sub, "verify") != 0 && strcmp(sub, "clear") != 0)
    return cli_usage_error("cache", "unknown subcommand '%s'", sub);
  char dir[4096] = "";
  for (int i = 2; i < argc; ++i) {
    if (cli_is_help(argv[i])) { fputs(help, stdout); return 0; }
    if (strcmp(argv[i], "--cache-dir") != 0)
      return cli_usage_error("cache", "unknown option '%s'", argv[i]);
    if (i + 1 >= argc) return cli_usage_error("cache", "--cache-dir needs a value");
    /* An empty value must not fall back to the default cache (clear!). */
    const char *v = argv[++i];
    if (!*v || strlen(v) >= sizeof dir)
      return cli_usage_error("cache", "--cache-dir '%s' is empty or too long", v);
    snprintf(dir, sizeof dir, "%s", v);
  }
  if (!dir[0] && collgen__default_cache_dir(dir, sizeof dir) != 0) {
    fprintf(stderr, "collgen cache: no cache directory (set COLLGEN_CACHE_DIR)\n");
    return 1;
  }
  if (strcmp(sub, "clear") == 0) {
    printf("cache clear: removed %d entries from %s\n", collgen__cache_clear(dir), dir);
    return 0;
  }
  walk_state w = {0, 0, 0, strcmp(sub, "verify") == 0, strcmp(sub, "ls") == 0};
  if (access(dir, F_OK) != 0) {
    printf("cache %s: %s does not exist (0 entries)\n", sub, dir);
    return 0;
  }
  int rc = collgen__cache_check(dir, w.verify, visit, &w);
  if (rc < 0 && rc != -ENOENT) {
    printf("cache %s: %s/entries is not a usable folder (%s)\n", sub, dir, strerror(-rc));
    return 1;
  }
  printf("cache %s: %d entries, %lld bytes, %d bad, in %s\n", sub, w.entries,
         (long long)w.bytes, w.bad, dir);
  return w.bad ? 1 : 0;
}
