/*
** test_util.c -- helpers shared by the Criterion tests.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

void tu_make_temp_dir(char *out, size_t n) {
  const char *tmp = getenv("TMPDIR");
  snprintf(out, n, "%s/collgen-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(out)) out[0] = 0;
}

void tu_remove_tree(const char *path) {
  char cmd[4200];
  if (!path || !path[0] || strcmp(path, "/") == 0) return;
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path);
}

int tu_run(const char *cmd, char **output) {
  char full[8192];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
    len += got;
    if (cap - len < 2048) {
      cap *= 2;
      buf = realloc(buf, cap);
    }
  }
  if (buf) buf[len] = 0;
  int st = pclose(p);
  if (output) *output = buf;
  else free(buf);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

char *tu_read_file(const char *path, size_t *size) {
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(fp);
  if (buf) buf[n] = 0;
  if (size) *size = (size_t)n;
  return buf;
}

int tu_write_file(const char *path, const char *data, size_t size) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return -1;
  size_t w = fwrite(data, 1, size, fp);
  return fclose(fp) == 0 && w == size ? 0 : -1;
}

static uint64_t state;

uint64_t tu_rand(void) {
  if (!state) {
    state = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 17;
    if (!state) state = 1;
  }
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}
