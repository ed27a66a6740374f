/*
** cli_common.c -- spec-flag parsing and small helpers for the CLI.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "device_abi.h"
#include "internal.h"
#include "parse_int.h"

void cli_op_names(char *buf, size_t n, const char *sep) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < collgen__op_count() && len < n; ++i)
    len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? sep : "", collgen__op_at(i)->name);
}

void cli_dtype_names(char *buf, size_t n, const char *sep) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < collgen__dtype_count() && len < n; ++i)
    len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? sep : "", collgen__dtype_at(i)->name);
}

void cli_print_spec_help(FILE *out) {
  char dtypes[256];
  cli_dtype_names(dtypes, sizeof dtypes, "|");
  fprintf(out,
          "spec flags:\n"
          "  --dtype %-14s element type (bf16)\n"
          "  --ngpus N              ranks in the communicator, 1..8 (2)\n"
          "  --group-size G         ranks per group, 0 = all (0)\n"
          "  --rank R               tensor rank, 1..8 (1 for allreduce, 2 otherwise)\n"
          "  --elems N              allreduce: elements per rank, 0..2^40 (1)\n"
          "  --rows N               allgather_rmsnorm: gathered rows, 0..2^40 (1)\n"
          "  --cols C               allgather_rmsnorm: columns, 1..2^40 (4096)\n"
          "  --arch sm_XY           target arch: sm_80 sm_86 sm_89 sm_90 sm_100 ... (sm_90)\n"
          "  --max-blocks N         grid cap, 0 = default, at most 256 (0)\n"
          "  --unaligned            pointers not 16-byte aligned (scalar kernel)\n"
          "  --inplace              allreduce output aliases input\n",
          dtypes);
}

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
  if (strcmp(f, "--dtype") == 0) {
    if (collgen__parse_dtype(v, &shape->dtype) != 0) {
      char names[256];
      cli_dtype_names(names, sizeof names, ", ");
      fprintf(stderr, "collgen: unknown dtype '%s' (%s)\n", v, names);
      return -1;
    }
    return 2;
  }
  if (strcmp(f, "--arch") == 0) {
    if (strlen(v) >= sizeof shape->arch) {
      fprintf(stderr, "collgen: --arch '%s' is too long\n", v);
      return -1;
    }
    snprintf(shape->arch, sizeof shape->arch, "%s", v);
    return 2;
  }
  /* Each integer flag with its range: out-of-range values are refused,
  ** never truncated (--ngpus 4294967298 is not 2). */
  static const struct {
    const char *flag;
    int64_t lo, hi;
  } ranges[] = {
      {"--ngpus", 1, COLLGEN_MAX_DEVICES},     {"--group-size", 0, COLLGEN_MAX_DEVICES},
      {"--rank", 1, 8},                        {"--elems", 0, COLLGEN_MAX_ELEMS},
      {"--rows", 0, COLLGEN_MAX_ELEMS},        {"--cols", 1, COLLGEN_MAX_ELEMS},
      {"--max-blocks", 0, COLLGEN_MAX_BLOCKS},
  };
  int64_t x = 0;
  for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; ++k) {
    if (strcmp(f, ranges[k].flag) != 0) continue;
    if (collgen__parse_int(v, ranges[k].lo, ranges[k].hi, &x) != 0) {
      fprintf(stderr, "collgen: %s needs an integer in %lld..%lld, got '%s'\n", f,
              (long long)ranges[k].lo, (long long)ranges[k].hi, v);
      return -1;
    }
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
