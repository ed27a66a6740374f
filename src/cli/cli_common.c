/*
** cli_common.c -- argument parsing and small helpers for the CLI. Nothing
** here has a side effect other than messages on cli_diag(): the fuzz
** harness (tests/fuzz/fuzz_cli_args.c) compiles this file in and runs every
** parser on arbitrary argument vectors.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "cli.h"
#include "device_abi.h"
#include "internal.h"
#include "parse_int.h"
#include "sha256.h"

static FILE *diag;

FILE *cli_diag(void) { return diag ? diag : stderr; }
void cli_set_diag(FILE *f) { diag = f; }

/* Writes count names (name_at(0), ...) joined by `sep` into buf. */
static void join_names(char *buf, size_t n, const char *sep, int count,
                       const char *(*name_at)(int)) {
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < count && len < n; ++i)
    len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? sep : "", name_at(i));
}

static const char *op_name_at(int i) { return collgen__op_at(i)->name; }
static const char *dtype_name_at(int i) { return collgen__dtype_at(i)->name; }
static const char *fp8_name_at(int i) { return collgen__fp8_at(i)->name; }

void cli_op_names(char *buf, size_t n, const char *sep) {
  join_names(buf, n, sep, collgen__op_count(), op_name_at);
}

void cli_dtype_names(char *buf, size_t n, const char *sep) {
  join_names(buf, n, sep, collgen__dtype_count(), dtype_name_at);
}

/* The catalog's FP8 output mode names joined by `sep`. */
static void fp8_names(char *buf, size_t n, const char *sep) {
  join_names(buf, n, sep, collgen__fp8_count(), fp8_name_at);
}

void cli_print_spec_help(FILE *out) {
  char dtypes[256], fp8[256];
  cli_dtype_names(dtypes, sizeof dtypes, "|");
  fp8_names(fp8, sizeof fp8, "|");
  fprintf(out,
          "spec flags:\n"
          "  --dtype %-14s element type (bf16)\n"
          "  --ngpus N              ranks in the communicator, 1..8 (2)\n"
          "  --group-size G         ranks per group, 0 = all (0)\n"
          "  --rank R               tensor rank, 1..8 (1 for allreduce, 2 otherwise)\n"
          "  --elems N              allreduce: elements per rank, 0..2^40 (1)\n"
          "  --rows N               RMSNorm ops: rows (allgather_rmsnorm: gathered),\n"
          "                         0..2^40 (1)\n"
          "  --cols C               RMSNorm ops: columns, 1..2^40 (4096)\n"
          "  --arch sm_XY           target arch: sm_80 sm_86 sm_89 sm_90 sm_100 ... (sm_90)\n"
          "  --max-blocks N         grid cap, 0 = default, at most 256 (0)\n"
          "  --unaligned            pointers not 16-byte aligned (scalar kernel)\n"
          "  --inplace              allreduce output aliases input\n"
          "  --fp8 %-15s allreduce_residual_rmsnorm: normed as float8 e4m3 with a\n"
          "                         scale per row or one static scale, sm_89+ (none)\n",
          dtypes, fp8);
}

int cli_is_help(const char *arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  FILE *out = cli_diag();
  va_list ap;
  fprintf(out, "collgen %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fprintf(out, "\n(try `collgen %s --help`)\n", cmd);
  return 2;
}

int cli_parse_spec_flag(int argc, char **argv, int i, collgen_shape_t *shape) {
  const char *f = argv[i];
  if (strcmp(f, "--unaligned") == 0) { shape->aligned16 = 0; return 1; }
  if (strcmp(f, "--inplace") == 0) { shape->inplace = 1; return 1; }
  static const char *const valued[] = {"--dtype", "--ngpus", "--group-size", "--rank",
                                       "--elems", "--rows", "--cols", "--arch",
                                       "--max-blocks", "--fp8", NULL};
  int known = 0;
  for (int k = 0; valued[k]; ++k) known |= strcmp(f, valued[k]) == 0;
  if (!known) return 0;
  if (i + 1 >= argc) {
    fprintf(cli_diag(), "collgen: %s needs a value\n", f);
    return -1;
  }
  const char *v = argv[i + 1];
  if (strcmp(f, "--dtype") == 0) {
    if (collgen__parse_dtype(v, &shape->dtype) != 0) {
      char names[256];
      cli_dtype_names(names, sizeof names, ", ");
      fprintf(cli_diag(), "collgen: unknown dtype '%s' (%s)\n", v, names);
      return -1;
    }
    return 2;
  }
  if (strcmp(f, "--fp8") == 0) {
    if (collgen__parse_fp8(v, &shape->fp8) != 0) {
      char names[256];
      fp8_names(names, sizeof names, ", ");
      fprintf(cli_diag(), "collgen: unknown --fp8 mode '%s' (%s)\n", v, names);
      return -1;
    }
    return 2;
  }
  if (strcmp(f, "--arch") == 0) {
    if (!*v || strlen(v) >= sizeof shape->arch) {
      fprintf(cli_diag(), "collgen: --arch needs an arch like sm_90, got '%s'\n", v);
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
      fprintf(cli_diag(), "collgen: %s needs an integer in %lld..%lld, got '%s'\n", f,
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

int cli_parse_spec_args(const char *cmd, int argc, char **argv, unsigned extras,
                        cli_spec_args *a) {
  memset(a, 0, sizeof *a);
  a->line_directives = 1;
  char ops[256];
  cli_op_names(ops, sizeof ops, ", ");
  if (argc < 2) return cli_usage_error(cmd, "missing OP (%s)", ops);
  if (cli_is_help(argv[1])) return CLI_HELP;
  collgen_op_t op;
  if (collgen__parse_op(argv[1], &op) != 0)
    return cli_usage_error(cmd, "unknown op '%s' (%s)", argv[1], ops);
  collgen_shape_init(&a->shape, op);
  for (int i = 2; i < argc;) {
    if (cli_is_help(argv[i])) return CLI_HELP;
    int used = cli_parse_spec_flag(argc, argv, i, &a->shape);
    if (used < 0) return 2;
    if (used == 0 && (extras & CLI_EXTRA_LINE_DIRECTIVES) &&
        strcmp(argv[i], "--no-line-directives") == 0) {
      a->line_directives = 0;
      used = 1;
    } else if (used == 0 && (extras & CLI_EXTRA_CACHE_DIR) &&
               strcmp(argv[i], "--cache-dir") == 0) {
      if (i + 1 >= argc) return cli_usage_error(cmd, "--cache-dir needs a value");
      a->cache_dir = argv[i + 1];
      used = 2;
    }
    if (used == 0) return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
    i += used;
  }
  return 0;
}

void cli_list_free(cli_list *l) {
  free(l->text);
  free(l->items);
  l->text = NULL;
  l->items = NULL;
  l->n = 0;
}

int cli_list_split(const char *cmd, const char *flag, const char *s, cli_list *l) {
  l->text = NULL;
  l->items = NULL;
  l->n = 0;
  if (!*s) return cli_usage_error(cmd, "%s needs at least one value, got ''", flag);
  int max = 1;
  for (const char *p = s; *p; ++p) max += *p == ',';
  l->text = strdup(s);
  l->items = calloc((size_t)max, sizeof *l->items);
  if (!l->text || !l->items) {
    fprintf(cli_diag(), "collgen %s: out of memory\n", cmd);
    return 1;
  }
  /* Every item, empty ones included (strtok would drop them silently). */
  char *p = l->text;
  for (;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = 0;
    if (!*p) return cli_usage_error(cmd, "%s: empty item in '%s'", flag, s);
    l->items[l->n++] = p;
    if (!comma) break;
    p = comma + 1;
  }
  return 0;
}

/* Parses every item of `s` as an integer in [lo, hi] into a malloc'd array
** *out of *n values. Returns 0, 1 or 2 (usage error echoing the item). */
static int parse_int_list(const char *flag, const char *s, int64_t lo, int64_t hi,
                          int64_t **out, int *n) {
  cli_list l;
  int rc = cli_list_split("pregen", flag, s, &l);
  if (rc == 0) {
    *out = calloc((size_t)l.n, sizeof **out);
    if (!*out) {
      fprintf(cli_diag(), "collgen pregen: out of memory\n");
      rc = 1;
    }
  }
  for (int i = 0; rc == 0 && i < l.n; ++i)
    if (collgen__parse_int(l.items[i], lo, hi, &(*out)[i]) != 0)
      rc = cli_usage_error("pregen", "%s: '%s' is not an integer in %lld..%lld", flag,
                           l.items[i], (long long)lo, (long long)hi);
  if (rc == 0) *n = l.n;
  cli_list_free(&l);
  return rc;
}

void cli_pregen_free(cli_pregen_opts *o) {
  cli_list_free(&o->archs);
  cli_list_free(&o->ops);
  cli_list_free(&o->dtypes);
  cli_list_free(&o->fp8s);
  free(o->op);
  free(o->dtype);
  free(o->fp8);
  o->fp8 = NULL;
  free(o->ngpus);
  free(o->cols);
  o->op = NULL;
  o->dtype = NULL;
  o->ngpus = o->cols = NULL;
  o->ngpus_count = o->cols_count = 0;
}

int cli_pregen_parse(int argc, char **argv, long default_jobs, cli_pregen_opts *o) {
  memset(o, 0, sizeof *o);
  const char *arch = "sm_90", *ops = NULL, *dtypes = NULL, *fp8 = NULL;
  const char *ngpus = "2,4,8", *cols = "1024,2048,4096,5120,7168,8192,16384";
  static char all_ops[256]; /* outlives the call: o->ops_text may point at it */
  char all_dtypes[256];
  cli_op_names(all_ops, sizeof all_ops, ",");
  cli_dtype_names(all_dtypes, sizeof all_dtypes, ",");
  ops = all_ops;
  dtypes = all_dtypes;
  o->jobs = default_jobs < 1 ? 1 : default_jobs > 256 ? 256 : default_jobs;
  static const char *const flags[] = {"--arch", "--ops", "--dtypes", "--ngpus",
                                      "--cols", "--cache-dir", "-j", "--fp8", NULL};
  for (int i = 1; i < argc; ++i) {
    if (cli_is_help(argv[i])) return CLI_HELP;
    const char *f = argv[i];
    int k = 0;
    while (flags[k] && strcmp(f, flags[k]) != 0) ++k;
    if (!flags[k]) {
      if (f[0] == '-') return cli_usage_error("pregen", "unknown option '%s'", f);
      return cli_usage_error("pregen", "unexpected argument '%s'", f);
    }
    if (i + 1 >= argc) return cli_usage_error("pregen", "%s needs a value", f);
    const char *v = argv[++i];
    switch (k) {
      case 0: arch = v; break;
      case 1: ops = v; break;
      case 2: dtypes = v; break;
      case 3: ngpus = v; break;
      case 4: cols = v; break;
      case 5:
        if (!*v) return cli_usage_error("pregen", "--cache-dir needs a directory, got ''");
        o->cache_dir = v;
        break;
      case 7: fp8 = v; break;
      default: {
        int64_t jobs = 0;
        if (collgen__parse_int(v, 1, 256, &jobs) != 0)
          return cli_usage_error("pregen", "-j: '%s' is not an integer in 1..256", v);
        o->jobs = (long)jobs;
      }
    }
  }
  o->ops_text = ops;
  o->ngpus_text = ngpus;
  int rc = cli_list_split("pregen", "--arch", arch, &o->archs);
  if (rc == 0) rc = cli_list_split("pregen", "--ops", ops, &o->ops);
  if (rc == 0) rc = cli_list_split("pregen", "--dtypes", dtypes, &o->dtypes);
  if (rc == 0) rc = parse_int_list("--ngpus", ngpus, 1, COLLGEN_MAX_DEVICES, &o->ngpus,
                                   &o->ngpus_count);
  if (rc == 0) rc = parse_int_list("--cols", cols, 1, (int64_t)1 << 31, &o->cols,
                                   &o->cols_count);
  if (rc == 0 && fp8) rc = cli_list_split("pregen", "--fp8", fp8, &o->fp8s);
  if (rc != 0) return rc;
  for (int a = 0; a < o->archs.n; ++a)
    if (strlen(o->archs.items[a]) >= sizeof(((collgen_shape_class_t *)0)->arch))
      return cli_usage_error("pregen", "unknown arch '%s'", o->archs.items[a]);
  o->op = calloc((size_t)o->ops.n, sizeof *o->op);
  o->dtype = calloc((size_t)o->dtypes.n, sizeof *o->dtype);
  if (!o->op || !o->dtype) {
    fprintf(cli_diag(), "collgen pregen: out of memory\n");
    return 1;
  }
  char names[256];
  for (int k = 0; k < o->ops.n; ++k)
    if (collgen__parse_op(o->ops.items[k], &o->op[k]) != 0) {
      cli_op_names(names, sizeof names, ", ");
      return cli_usage_error("pregen", "unknown op '%s' (%s)", o->ops.items[k], names);
    }
  for (int d = 0; d < o->dtypes.n; ++d)
    if (collgen__parse_dtype(o->dtypes.items[d], &o->dtype[d]) != 0) {
      cli_dtype_names(names, sizeof names, ", ");
      return cli_usage_error("pregen", "unknown dtype '%s' (%s)", o->dtypes.items[d], names);
    }
  if (fp8 && !(o->fp8 = calloc((size_t)o->fp8s.n, sizeof *o->fp8))) {
    fprintf(cli_diag(), "collgen pregen: out of memory\n");
    return 1;
  }
  for (int m = 0; fp8 && m < o->fp8s.n; ++m)
    if (collgen__parse_fp8(o->fp8s.items[m], &o->fp8[m]) != 0) {
      fp8_names(names, sizeof names, ", ");
      return cli_usage_error("pregen", "unknown --fp8 mode '%s' (%s)", o->fp8s.items[m], names);
    }
  return 0;
}

int cli_entry_on_disk(const char *dir, const char *hex_key, char *why, size_t n) {
  if (!dir) {
    snprintf(why, n, "the cache is memory only");
    return 0;
  }
  uint8_t key[32];
  int ok = strlen(hex_key) == 64;
  for (int i = 0; ok && i < 64; ++i) {
    char ch = hex_key[i];
    int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    ok = v >= 0;
    if (i % 2 == 0) key[i / 2] = (uint8_t)(v << 4);
    else key[i / 2] |= (uint8_t)v;
  }
  if (!ok) {
    snprintf(why, n, "bad key '%s'", hex_key);
    return 0;
  }
  /* A fresh look through the cache's own reader (layout, checksum, key),
  ** not through anything a generator still holds in memory. */
  collgen__cache *c = NULL;
  if (collgen__cache_open(&c, dir) != COLLGEN_OK || !collgen__cache_dir(c)) {
    snprintf(why, n, "cache directory %s is not usable", dir);
    collgen__cache_close(c);
    return 0;
  }
  ok = collgen__cache_find_disk(c, key, -1, -1) != NULL;
  collgen__cache_close(c);
  if (!ok) snprintf(why, n, "no valid entry %.12s... in %s", hex_key, dir);
  return ok;
}

int cli_demo_parse(int argc, char **argv, int *processes) {
  *processes = 0;
  for (int i = 1; i < argc; ++i) {
    if (cli_is_help(argv[i])) return CLI_HELP;
    if (strcmp(argv[i], "--processes") != 0)
      return cli_usage_error("demo", "unexpected argument '%s'", argv[i]);
    if (*processes != 0) return cli_usage_error("demo", "--processes given twice");
    *processes = -1;
    if (i + 1 < argc && argv[i + 1][0] != '-') {
      int64_t n = 0;
      if (collgen__parse_int(argv[i + 1], 2, COLLGEN_MAX_DEVICES, &n) != 0)
        return cli_usage_error("demo", "--processes: '%s' is not an integer in 2..%d",
                               argv[i + 1], COLLGEN_MAX_DEVICES);
      *processes = (int)n;
      ++i;
    }
  }
  return 0;
}
