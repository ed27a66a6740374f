/*
** cmd_cache.c -- `collgen cache ls|verify|clear [--cache-dir D]`. Every
** name printed (the directory, entry paths, the kernel and arch read from
** an entry, arguments echoed in errors) goes through collgen__escape.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "escape.h"
#include "sha256.h"

static const char help[] =
    "usage: collgen cache ls|verify|clear [--cache-dir D]\n"
    "  ls      one line per entry: key prefix, bytes, registers, kernel, arch\n"
    "  verify  check every entry as the loader does; remove bad files and\n"
    "          symlinks (exit 1 if anything was bad)\n"
    "  clear   remove every entry (exit 1 if D is not a cache directory or\n"
    "          something could not be removed)\n"
    "Names are printed escaped: bytes outside printable ASCII as \\xNN, a\n"
    "backslash as \\\\.\n";

/* A name as printed: an entry path (< 4800 bytes) escaped. */
typedef struct { char text[COLLGEN_ESCAPED_SIZE(4800)]; } shown;
static const char *show(const char *name, shown *s) {
  return collgen__escape(name, s->text, sizeof s->text);
}

typedef struct {
  int entries, bad, kept; /* kept: bad items verify failed to remove */
  int first_error;        /* errno of the first of them */
  int64_t bytes;
  int verify, list;
} walk_state;

static void visit(const char *path, int64_t size, const collgen__entry *e, const char *why,
                  int removed, void *ctx) {
  walk_state *w = ctx;
  shown p;
  w->entries++;
  w->bytes += size;
  if (!e) {
    w->bad++;
    char note[160] = "";
    if (w->verify && removed > 0) snprintf(note, sizeof note, " (removed)");
    else if (w->verify && removed == 0) snprintf(note, sizeof note, " (left in place)");
    else if (w->verify) snprintf(note, sizeof note, " (cannot remove: %s)", strerror(-removed));
    if (removed < 0 && !w->kept++) w->first_error = -removed;
    printf("BAD  %s: %s%s\n", show(path, &p), why, note);
    return;
  }
  if (w->list) {
    char hex[65], arch[sizeof e->canonical] = "", kernel[COLLGEN_ESCAPED_SIZE(sizeof e->kernel)];
    char arch_shown[COLLGEN_ESCAPED_SIZE(sizeof e->canonical)];
    collgen__hex(e->key, hex);
    const char *a = strstr(e->canonical, "arch=");
    if (a) snprintf(arch, sizeof arch, "%.*s", (int)strcspn(a + 5, ";"), a + 5);
    printf("%.12s %8zu B %3d regs  %-52s %s\n", hex, e->size, e->registers,
           collgen__escape(e->kernel, kernel, sizeof kernel),
           collgen__escape(arch, arch_shown, sizeof arch_shown));
  }
}

/* `cache clear`: exit 0 when everything went, 1 when dir is no cache
** directory or something could not be removed. */
static int clear(const char *dir) {
  shown d;
  collgen__cache_clear_result r;
  int rc = collgen__cache_clear(dir, &r);
  if (rc == -ENOENT && access(dir, F_OK) != 0) {
    printf("cache clear: %s does not exist (nothing to clear)\n", show(dir, &d));
    return 0;
  }
  if (rc < 0) {
    struct stat st;
    char why[128];
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) snprintf(why, sizeof why, "not a folder");
    else if (rc == -ENOENT) snprintf(why, sizeof why, "it has no entries/ folder");
    else snprintf(why, sizeof why, "entries/: %s", strerror(-rc));
    fprintf(stderr, "collgen cache clear: %s is not a cache directory (%s); nothing removed\n",
            show(dir, &d), why);
    return 1;
  }
  printf("cache clear: removed %d entries from %s\n", r.removed, show(dir, &d));
  if (!r.failed) return 0;
  fprintf(stderr, "collgen cache clear: %d files could not be removed from %s (%s)\n", r.failed,
          d.text, strerror(r.error));
  return 1;
}

int cmd_cache(int argc, char **argv) {
  shown arg;
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(help, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "ls") != 0 && strcmp(sub, "verify") != 0 && strcmp(sub, "clear") != 0)
    return cli_bad_value("cache", "unknown subcommand", show(sub, &arg), "ls, verify, clear");
  char dir[4096] = "";
  for (int i = 2; i < argc; ++i) {
    if (cli_is_help(argv[i])) { fputs(help, stdout); return 0; }
    if (strcmp(argv[i], "--cache-dir") != 0)
      return cli_bad_value("cache", "unknown option", show(argv[i], &arg), "--cache-dir");
    if (i + 1 >= argc) return cli_usage_error("cache", "--cache-dir needs a value (a directory)");
    /* An empty value must not fall back to the default cache (clear!). */
    const char *v = argv[++i];
    if (cli_cache_dir_arg("cache", v) != 0 || strlen(v) >= sizeof dir) return 2;
    snprintf(dir, sizeof dir, "%s", v);
  }
  if (!dir[0] && collgen__default_cache_dir(dir, sizeof dir) != 0) {
    fprintf(stderr, "collgen cache: no cache directory (set COLLGEN_CACHE_DIR)\n");
    return 1;
  }
  if (strcmp(sub, "clear") == 0) return clear(dir);
  shown d;
  show(dir, &d);
  walk_state w = {0, 0, 0, 0, 0, strcmp(sub, "verify") == 0, strcmp(sub, "ls") == 0};
  if (access(dir, F_OK) != 0) {
    printf("cache %s: %s does not exist (0 entries)\n", sub, d.text);
    return 0;
  }
  int rc = collgen__cache_check(dir, w.verify, visit, &w);
  if (rc < 0 && rc != -ENOENT) {
    printf("cache %s: %s/entries is not a usable folder (%s)\n", sub, d.text, strerror(-rc));
    return 1;
  }
  printf("cache %s: %d entries, %lld bytes, %d bad, in %s\n", sub, w.entries,
         (long long)w.bytes, w.bad, d.text);
  if (w.kept)
    fprintf(stderr, "collgen cache verify: %d bad items could not be removed (%s); they stay "
            "until someone who can write %s runs verify\n", w.kept, strerror(w.first_error),
            d.text);
  return w.bad ? 1 : 0;
}
