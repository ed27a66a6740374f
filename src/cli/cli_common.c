/*
** cli_common.c -- spec-flag parsing and small helpers for the CLI.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "internal.h"

const char cli_spec_help[] =
    "spec flags:\n"
    "  --dtype bf16|f16|f32   element type (bf16)\n"
    "  --ngpus N              ranks in the communicator, 1..8 (2)\n"
    "  --group-size G         ranks per group, 0 = all (0)\n"
    "  --rank R               tensor rank, 1..8 (1 for allreduce, 2 otherwise)\n"
    "  --elems N              allreduce: elements per rank (1)\n"
    "  --rows N               allgather_rmsnorm: gathered rows (1)\n"
    "  --cols C               allgather_rmsnorm: columns (4096)\n"
    "  --arch sm_XY           target arch: sm_80 sm_86 sm_89 sm_90 sm_100 ... (sm_90)\n"
    "  --max-blocks N         grid cap, 0 = default (0)\n"
    "  --unaligned            pointers not 16-byte aligned (scalar kernel)\n"
    "  --inplace              allreduce output aliases input\n";

int cli_is_help(const char *arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "collgen %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(try `collgen %s --help`)\n", cmd);
  return 2;
}

int cli_split(char *s, char **items, int max) {
  int n = 0;
  for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
    items[n++] = tok;
  return n;
}

static int parse_int(const char *s, int64_t *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end) return -1;
  *out = v;
  return 0;
}

int cli_parse_spec_flag(int argc, char **argv, int i, collgen_shape_t *shape) {
  const char *f = argv[i];
  if (strcmp(f, "--unaligned") == 0) { shape->aligned16 = 0; return 1; }
  if (strcmp(f, "--inplace") == 0) { shape->inplace = 1; return 1; }
  static const char *const valued[] = {"--dtype", "--ngpus", "--group-size", "--rank",
                                       "--elems", "--rows", "--cols", "--arch",
                                       "--max-blocks", NULL};
  int known = 0;
  for (int k = 0; valued[k]; ++k) known |= strcmp(f, valued[k]) == 0;
  if (!known) return 0;
  if (i + 1 >= argc) {
    fprintf(stderr, "collgen: %s needs a value\n", f);
    return -1;
  }
  const char *v = argv[i + 1];
  int64_t x = 0;
  if (strcmp(f, "--dtype") == 0) {
    if (collgen__parse_dtype(v, &shape->dtype) != 0) {
      fprintf(stderr, "collgen: unknown dtype '%s' (bf16, f16, f32)\n", v);
      return -1;
    }
    return 2;
  }
  if (strcmp(f, "--arch") == 0) {
    snprintf(shape->arch, sizeof shape->arch, "%s", v);
    return 2;
  }
  if (parse_int(v, &x) != 0) {
    fprintf(stderr, "collgen: %s needs an integer, got '%s'\n", f, v);
    return -1;
  }
  if (strcmp(f, "--ngpus") == 0) shape->ngpus = (int)x;
  else if (strcmp(f, "--group-size") == 0) shape->group_size = (int)x;
  else if (strcmp(f, "--rank") == 0) shape->tensor_rank = (int)x;
  else if (strcmp(f, "--elems") == 0) shape->elems = x;
  else if (strcmp(f, "--rows") == 0) shape->rows = x;
  else if (strcmp(f, "--cols") == 0) shape->cols = x;
  else if (strcmp(f, "--max-blocks") == 0) shape->max_blocks = (int)x;
  return 2;
}
