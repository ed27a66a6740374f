/*
** cli_common.c -- argument parsing and the messages of the CLI. Nothing
** here has a side effect other than messages on cli_diag(): the fuzz
** harness (tests/fuzz/fuzz_cli_args.c) compiles this file in and runs every
** parser on arbitrary argument vectors. Every usage error is written by
** cli_usage_error, so every command words them alike (cli.h).
*/
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "catalog.h"
#include "cli.h"
#include "device_abi.h"
#include "internal.h"
#include "parse_int.h"
#include "sha256.h"

static FILE *diag;

FILE *cli_diag(void) { return diag ? diag : stderr; }
void cli_set_diag(FILE *f) { diag = f; }

/* ---- Names from the catalog ------------------------------------------- */

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
static const char *arch_name_at(int i) { return collgen__arch_at(i)->name; }

void cli_op_names(char *buf, size_t n, const char *sep) {
  join_names(buf, n, sep, collgen__op_count(), op_name_at);
}

void cli_dtype_names(char *buf, size_t n, const char *sep) {
  join_names(buf, n, sep, collgen__dtype_count(), dtype_name_at);
}

void cli_fp8_names(char *buf, size_t n, const char *sep) {
  join_names(buf, n, sep, collgen__fp8_count(), fp8_name_at);
}

void cli_arch_names(char *buf, size_t n, const char *sep) {
  join_names(buf, n, sep, collgen__arch_count(), arch_name_at);
}

/* ---- Messages ---------------------------------------------------------- */

int cli_is_help(const char *arg) {
  return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  FILE *out = cli_diag();
  const char *sp = cmd ? " " : "", *name = cmd ? cmd : "";
  va_list ap;
  fprintf(out, "collgen%s%s: ", sp, name);
  va_start(ap, fmt);
  vfprintf(out, fmt, ap);
  va_end(ap);
  fprintf(out, "; try 'collgen%s%s --help'\n", sp, name);
  return 2;
}

int cli_bad_value(const char *cmd, const char *what, const char *value, const char *accepted) {
  return cli_usage_error(cmd, "%s: '%s' (%s)", what, value, accepted);
}

int cli_failure(const char *cmd, int status, const char *message) {
  fprintf(cli_diag(), "collgen %s: %s: %s\n", cmd, collgen_status_name(status),
          message ? message : "");
  return 1;
}

int cli_planner_failure(const char *cmd, int status, const char *message) {
  static const char refusal[] = "planner: ";
  if (!message) message = "";
  if (status == COLLGEN_ERR_INVALID_ARG && strncmp(message, refusal, sizeof refusal - 1) == 0)
    return cli_usage_error(cmd, "%s", message);
  return cli_failure(cmd, status == COLLGEN_ERR_INVALID_ARG ? COLLGEN_ERR_TEMPLATE : status,
                     message);
}

/* ---- Values ------------------------------------------------------------ */

/* 1 if s is an optional sign and decimal digits: an integer of any size. */
static int integer_syntax(const char *s) {
  if (*s == '+' || *s == '-') ++s;
  if (!*s) return 0;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return 0;
  return 1;
}

int cli_parse_int_arg(const char *cmd, const char *flag, const char *v, int64_t lo, int64_t hi,
                      int64_t *out) {
  if (collgen__parse_int(v, lo, hi, out) == 0) return 0;
  char what[128], range[160];
  snprintf(what, sizeof what, "%s is %s", flag,
           integer_syntax(v) ? "out of range" : "not an integer");
  snprintf(range, sizeof range, "%s must be %lld..%lld", flag, (long long)lo, (long long)hi);
  return cli_bad_value(cmd, what, v, range);
}

int cli_cache_dir_arg(const char *cmd, const char *v) {
  /* An empty value must never mean the default cache (`cache clear`!). */
  if (!*v)
    return cli_bad_value(cmd, "--cache-dir is empty", v,
                         "a directory; leave --cache-dir out for the default cache");
  if (strlen(v) >= CLI_PATH_MAX)
    return cli_usage_error(cmd, "--cache-dir is too long: '%s' (at most %d bytes)", v,
                           CLI_PATH_MAX - 1);
  return 0;
}

/* ---- Spec flags -------------------------------------------------------- */

enum { SPEC_SWITCH, SPEC_DTYPE, SPEC_FP8, SPEC_ARCH, SPEC_INT };
typedef struct {
  const char *flag;
  int kind;
  int64_t lo, hi; /* SPEC_INT: the range, refused outside, never truncated */
} spec_flag;

/* Every spec flag; the deprecated alias --rank last (cli_parse_spec_args
** warns about it, the lists of flags leave it out). */
static const spec_flag spec_flags[] = {
    {"--dtype", SPEC_DTYPE, 0, 0},
    {"--ngpus", SPEC_INT, 1, COLLGEN_MAX_DEVICES},
    {"--group-size", SPEC_INT, 0, COLLGEN_MAX_DEVICES},
    {"--tensor-rank", SPEC_INT, 1, 8},
    {"--elems", SPEC_INT, 0, COLLGEN_MAX_ELEMS},
    {"--rows", SPEC_INT, 0, COLLGEN_MAX_ELEMS},
    {"--cols", SPEC_INT, 1, COLLGEN_MAX_ELEMS},
    {"--arch", SPEC_ARCH, 0, 0},
    {"--max-blocks", SPEC_INT, 0, COLLGEN_MAX_BLOCKS},
    {"--fp8", SPEC_FP8, 0, 0},
    {"--unaligned", SPEC_SWITCH, 0, 0},
    {"--inplace", SPEC_SWITCH, 0, 0},
    {"--rank", SPEC_INT, 1, 8},
};
#define SPEC_FLAG_COUNT (sizeof spec_flags / sizeof spec_flags[0])
static const char deprecated_rank[] = "--rank";
static const char *spec_flag_at(int i) { return spec_flags[i].flag; }

/* The accepted values of a valued flag, for its messages. */
static void spec_accepted(const spec_flag *f, char *buf, size_t n) {
  switch (f->kind) {
    case SPEC_DTYPE: cli_dtype_names(buf, n, ", "); break;
    case SPEC_FP8: cli_fp8_names(buf, n, ", "); break;
    case SPEC_ARCH: cli_arch_names(buf, n, ", "); break;
    default:
      snprintf(buf, n, "%s must be %lld..%lld", f->flag, (long long)f->lo, (long long)f->hi);
  }
}

void cli_print_spec_help(FILE *out) {
  char dtypes[256], fp8[256], archs[256];
  cli_dtype_names(dtypes, sizeof dtypes, "|");
  cli_fp8_names(fp8, sizeof fp8, "|");
  cli_arch_names(archs, sizeof archs, " ");
  fprintf(out,
          "spec flags:\n"
          "  --dtype %-14s element type (bf16)\n"
          "  --ngpus N              ranks in the communicator, 1..8 (2)\n"
          "  --group-size G         ranks per group, 0 = all (0)\n"
          "  --tensor-rank R        tensor rank (dimensions), 1..8 (1 for allreduce, 2\n"
          "                         otherwise); --rank R is a deprecated alias\n"
          "  --elems N              allreduce: elements per rank, 0..2^40 (1)\n"
          "  --rows N               RMSNorm ops: rows (allgather_rmsnorm: gathered),\n"
          "                         0..2^40 (1)\n"
          "  --cols C               RMSNorm ops: columns, 1..2^40 (4096)\n"
          "  --arch ARCH            target arch (sm_90), one of:\n"
          "                         %s\n"
          "  --max-blocks N         grid cap, 0 = default, at most 256 (0)\n"
          "  --unaligned            pointers not 16-byte aligned (scalar kernel)\n"
          "  --inplace              allreduce output aliases input\n"
          "  --fp8 MODE             the residual RMSNorm ops: normed as float8 e4m3 with a\n"
          "                         scale per row or one static scale, sm_89+ (none):\n"
          "                         %s\n",
          dtypes, archs, fp8);
}

int cli_parse_spec_flag(const char *cmd, int argc, char **argv, int i, collgen_shape_t *shape) {
  const spec_flag *f = NULL;
  for (size_t k = 0; k < SPEC_FLAG_COUNT && !f; ++k)
    if (strcmp(argv[i], spec_flags[k].flag) == 0) f = &spec_flags[k];
  if (!f) return 0;
  if (f->kind == SPEC_SWITCH) {
    if (strcmp(f->flag, "--unaligned") == 0) shape->aligned16 = 0;
    else shape->inplace = 1;
    return 1;
  }
  char accepted[512];
  spec_accepted(f, accepted, sizeof accepted);
  if (i + 1 >= argc) {
    cli_usage_error(cmd, "%s needs a value (%s)", f->flag, accepted);
    return -1;
  }
  const char *v = argv[i + 1];
  int bad = 0;
  int64_t x = 0;
  switch (f->kind) {
    case SPEC_DTYPE:
      if (collgen__parse_dtype(v, &shape->dtype) != 0)
        bad = cli_bad_value(cmd, "unknown dtype", v, accepted);
      break;
    case SPEC_FP8:
      if (collgen__parse_fp8(v, &shape->fp8) != 0)
        bad = cli_bad_value(cmd, "unknown FP8 mode", v, accepted);
      break;
    case SPEC_ARCH:
      if (!collgen__arch_find(v) || strlen(v) >= sizeof shape->arch)
        bad = cli_bad_value(cmd, "unknown arch", v, accepted);
      else snprintf(shape->arch, sizeof shape->arch, "%s", v);
      break;
    default:
      bad = cli_parse_int_arg(cmd, f->flag, v, f->lo, f->hi, &x);
  }
  if (bad) return -1;
  if (f->kind != SPEC_INT) return 2;
  if (strcmp(f->flag, "--ngpus") == 0) shape->ngpus = (int)x;
  else if (strcmp(f->flag, "--group-size") == 0) shape->group_size = (int)x;
  else if (strcmp(f->flag, "--tensor-rank") == 0 || strcmp(f->flag, deprecated_rank) == 0)
    shape->tensor_rank = (int)x;
  else if (strcmp(f->flag, "--elems") == 0) shape->elems = x;
  else if (strcmp(f->flag, "--rows") == 0) shape->rows = x;
  else if (strcmp(f->flag, "--cols") == 0) shape->cols = x;
  else if (strcmp(f->flag, "--max-blocks") == 0) shape->max_blocks = (int)x;
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
  if (collgen__parse_op(argv[1], &op) != 0) return cli_bad_value(cmd, "unknown op", argv[1], ops);
  collgen_shape_init(&a->shape, op);
  int warned = 0;
  for (int i = 2; i < argc;) {
    if (cli_is_help(argv[i])) return CLI_HELP;
    if (strcmp(argv[i], deprecated_rank) == 0 && !warned++)
      fprintf(cli_diag(), "collgen: warning: --rank is deprecated; use --tensor-rank\n");
    int used = cli_parse_spec_flag(cmd, argc, argv, i, &a->shape);
    if (used < 0) return 2;
    if (used == 0 && (extras & CLI_EXTRA_LINE_DIRECTIVES) &&
        strcmp(argv[i], "--no-line-directives") == 0) {
      a->line_directives = 0;
      used = 1;
    } else if (used == 0 && (extras & CLI_EXTRA_CACHE_DIR) &&
               strcmp(argv[i], "--cache-dir") == 0) {
      if (i + 1 >= argc) return cli_usage_error(cmd, "--cache-dir needs a value (a directory)");
      if (cli_cache_dir_arg(cmd, argv[i + 1]) != 0) return 2;
      a->cache_dir = argv[i + 1];
      used = 2;
    }
    if (used == 0) {
      char flags[512];
      join_names(flags, sizeof flags, ", ", (int)SPEC_FLAG_COUNT - 1, spec_flag_at);
      size_t len = strlen(flags);
      snprintf(flags + len, sizeof flags - len, "%s%s",
               extras & CLI_EXTRA_LINE_DIRECTIVES ? ", --no-line-directives" : "",
               extras & CLI_EXTRA_CACHE_DIR ? ", --cache-dir" : "");
      return cli_bad_value(cmd, "unknown option", argv[i], flags);
    }
    i += used;
  }
  return 0;
}

/* ---- Comma lists and pregen ------------------------------------------- */

void cli_list_free(cli_list *l) {
  free(l->text);
  free(l->items);
  l->text = NULL;
  l->items = NULL;
  l->n = 0;
}

int cli_list_split(const char *cmd, const char *flag, const char *s, const char *accepted,
                   cli_list *l) {
  l->text = NULL;
  l->items = NULL;
  l->n = 0;
  if (!*s) return cli_usage_error(cmd, "%s is empty: '' (%s)", flag, accepted);
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
    if (!*p) return cli_usage_error(cmd, "%s has an empty item: '%s' (%s)", flag, s, accepted);
    l->items[l->n++] = p;
    if (!comma) break;
    p = comma + 1;
  }
  return 0;
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


/* pregen's options, in the order of its help. */
enum { PG_ARCH, PG_OPS, PG_DTYPES, PG_NGPUS, PG_COLS, PG_FP8, PG_CACHE_DIR, PG_JOBS, PG_COUNT };
static const char *const pregen_flags[PG_COUNT] = {
    "--arch", "--ops", "--dtypes", "--ngpus", "--cols", "--fp8", "--cache-dir", "-j"};
static const char *pregen_flag_at(int i) { return pregen_flags[i]; }

/* The catalog's names that pregen option k takes ("" for the others). */
static void pregen_names(int k, char *buf, size_t n) {
  buf[0] = 0;
  if (k == PG_ARCH) cli_arch_names(buf, n, ", ");
  else if (k == PG_OPS) cli_op_names(buf, n, ", ");
  else if (k == PG_DTYPES) cli_dtype_names(buf, n, ", ");
  else if (k == PG_FP8) cli_fp8_names(buf, n, ", ");
}

/* The accepted values of pregen option k, for its messages. */
static void pregen_accepted(int k, char *buf, size_t n) {
  char names[400];
  pregen_names(k, names, sizeof names);
  if (names[0]) snprintf(buf, n, "a comma list of: %s", names);
  else if (k == PG_NGPUS) snprintf(buf, n, "a comma list, each 1..%d", COLLGEN_MAX_DEVICES);
  else if (k == PG_COLS) snprintf(buf, n, "a comma list, each 1..%lld", CLI_PREGEN_MAX_COLS);
  else if (k == PG_CACHE_DIR) snprintf(buf, n, "a directory");
  else snprintf(buf, n, "-j must be 1..%d", CLI_MAX_JOBS);
}

/* Splits the value `s` of pregen list option k into l and, with `elem`
** bytes per item, fills a calloc'd array *vals (elem 0: none) through
** parse(item, value), which returns 0 for a known item. Returns 0, 1 or 2
** (usage error echoing the item, `what` is wrong with it). *vals is the
** caller's to free whatever the result. */
static int split_items(int k, const char *s, cli_list *l, const char *what,
                       int (*parse)(const char *, void *), size_t elem, void **vals) {
  char accepted[512], names[400];
  pregen_accepted(k, accepted, sizeof accepted);
  pregen_names(k, names, sizeof names);
  *vals = NULL;
  int rc = cli_list_split("pregen", pregen_flags[k], s, accepted, l);
  if (rc == 0 && elem && !(*vals = calloc((size_t)l->n, elem))) {
    fprintf(cli_diag(), "collgen pregen: out of memory\n");
    rc = 1;
  }
  for (int i = 0; rc == 0 && i < l->n; ++i)
    if (parse(l->items[i], elem ? (char *)*vals + (size_t)i * elem : NULL) != 0)
      rc = cli_bad_value("pregen", what, l->items[i], names);
  return rc;
}

static int parse_arch(const char *s, void *out) {
  (void)out;
  return collgen__arch_find(s) && strlen(s) < sizeof(((collgen_shape_class_t *)0)->arch) ? 0 : -1;
}
static int parse_op(const char *s, void *out) { return collgen__parse_op(s, out); }
static int parse_dtype(const char *s, void *out) { return collgen__parse_dtype(s, out); }
static int parse_fp8(const char *s, void *out) { return collgen__parse_fp8(s, out); }

/* Parses every item of the value `s` of pregen option k (--ngpus, --cols)
** as an integer in [lo, hi] into a calloc'd array *out of *n values.
** Returns 0, 1 or 2 (usage error echoing the item). */
static int parse_int_list(int k, const char *s, int64_t lo, int64_t hi, int64_t **out, int *n) {
  char accepted[160];
  pregen_accepted(k, accepted, sizeof accepted);
  cli_list l;
  int rc = cli_list_split("pregen", pregen_flags[k], s, accepted, &l);
  if (rc == 0 && !(*out = calloc((size_t)l.n, sizeof **out))) {
    fprintf(cli_diag(), "collgen pregen: out of memory\n");
    rc = 1;
  }
  for (int i = 0; rc == 0 && i < l.n; ++i)
    rc = cli_parse_int_arg("pregen", pregen_flags[k], l.items[i], lo, hi, &(*out)[i]);
  if (rc == 0) *n = l.n;
  cli_list_free(&l);
  return rc;
}

int cli_pregen_parse(int argc, char **argv, long default_jobs, cli_pregen_opts *o) {
  memset(o, 0, sizeof *o);
  const char *v_of[PG_COUNT] = {"sm_90", NULL, NULL, "2,4,8",
                                "1024,2048,4096,5120,7168,8192,16384", NULL, NULL, NULL};
  static char all_ops[256]; /* outlives the call: o->ops_text may point at it */
  char all_dtypes[256];
  cli_op_names(all_ops, sizeof all_ops, ",");
  cli_dtype_names(all_dtypes, sizeof all_dtypes, ",");
  v_of[PG_OPS] = all_ops;
  v_of[PG_DTYPES] = all_dtypes;
  o->jobs = default_jobs < 1 ? 1 : default_jobs > CLI_MAX_JOBS ? CLI_MAX_JOBS : default_jobs;
  for (int i = 1; i < argc; ++i) {
    if (cli_is_help(argv[i])) return CLI_HELP;
    const char *f = argv[i];
    int k = 0;
    while (k < PG_COUNT && strcmp(f, pregen_flags[k]) != 0) ++k;
    if (k == PG_COUNT) {
      if (f[0] != '-')
        return cli_bad_value("pregen", "unexpected argument", f, "pregen takes options only");
      char flags[256];
      join_names(flags, sizeof flags, ", ", PG_COUNT, pregen_flag_at);
      return cli_bad_value("pregen", "unknown option", f, flags);
    }
    if (i + 1 >= argc) {
      char accepted[512];
      pregen_accepted(k, accepted, sizeof accepted);
      return cli_usage_error("pregen", "%s needs a value (%s)", f, accepted);
    }
    const char *v = argv[++i];
    if (k == PG_CACHE_DIR && cli_cache_dir_arg("pregen", v) != 0) return 2;
    int64_t jobs = 0;
    if (k == PG_JOBS) {
      if (cli_parse_int_arg("pregen", f, v, 1, CLI_MAX_JOBS, &jobs) != 0) return 2;
      o->jobs = (long)jobs;
    }
    v_of[k] = v;
  }
  o->cache_dir = v_of[PG_CACHE_DIR];
  o->all_dtypes = v_of[PG_DTYPES] == all_dtypes;
  o->ops_text = v_of[PG_OPS];
  o->ngpus_text = v_of[PG_NGPUS];
  void *vals = NULL;
  int rc = split_items(PG_ARCH, v_of[PG_ARCH], &o->archs, "unknown arch", parse_arch, 0, &vals);
  if (rc == 0) {
    rc = split_items(PG_OPS, v_of[PG_OPS], &o->ops, "unknown op", parse_op, sizeof *o->op,
                     &vals);
    o->op = vals;
  }
  if (rc == 0) {
    rc = split_items(PG_DTYPES, v_of[PG_DTYPES], &o->dtypes, "unknown dtype", parse_dtype,
                     sizeof *o->dtype, &vals);
    o->dtype = vals;
  }
  if (rc == 0)
    rc = parse_int_list(PG_NGPUS, v_of[PG_NGPUS], 1, COLLGEN_MAX_DEVICES, &o->ngpus,
                        &o->ngpus_count);
  if (rc == 0)
    rc = parse_int_list(PG_COLS, v_of[PG_COLS], 1, CLI_PREGEN_MAX_COLS, &o->cols,
                        &o->cols_count);
  if (rc == 0 && v_of[PG_FP8]) {
    rc = split_items(PG_FP8, v_of[PG_FP8], &o->fp8s, "unknown FP8 mode", parse_fp8,
                     sizeof *o->fp8, &vals);
    o->fp8 = vals;
  }
  return rc;
}

/* ---- The cache and demo ------------------------------------------------ */

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
      return cli_bad_value("demo", "unexpected argument", argv[i], "demo takes --processes [N]");
    if (*processes != 0) return cli_usage_error("demo", "--processes given twice (at most once)");
    *processes = -1;
    if (i + 1 < argc && argv[i + 1][0] != '-') {
      int64_t n = 0;
      if (cli_parse_int_arg("demo", "--processes", argv[i + 1], 2, COLLGEN_MAX_DEVICES, &n) != 0)
        return 2;
      *processes = (int)n;
      ++i;
    }
  }
  return 0;
}
