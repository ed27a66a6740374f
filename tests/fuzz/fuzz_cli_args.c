/*
** fuzz_cli_args.c -- libFuzzer harness for the CLI's argument parsers
** (src/cli/cli_common.c, compiled in: the CLI is not a library). The input
** is split at NUL bytes into an argument vector, which goes through every
** parser that reads argv without side effects: the spec flags of gen and
** compile (cli_parse_spec_args, cli_parse_spec_flag), pregen's options and
** lists (cli_pregen_parse, cli_list_split), demo's (cli_demo_parse), and the
** value checks (cli_parse_int_arg, cli_cache_dir_arg). None may crash, leak,
** read out of bounds or hit UB, and what they accept must be in range: an
** arch of the catalog, a non-empty --cache-dir.
*/
#define _POSIX_C_SOURCE 200809L /* before any header, as in cli_common.c */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.c"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  /* usage messages would flood the log: they go nowhere (still formatted) */
  FILE *null = fopen("/dev/null", "w");
  if (null) cli_set_diag(null);
  return 0;
}

static void check_shape(const collgen_shape_t *s) {
  if (s->ngpus < 1 || s->ngpus > COLLGEN_MAX_DEVICES) abort();
  if (s->group_size < 0 || s->group_size > COLLGEN_MAX_DEVICES) abort();
  if (s->tensor_rank < 1 || s->tensor_rank > 8) abort();
  if (s->elems < 0 || s->elems > COLLGEN_MAX_ELEMS) abort();
  if (s->rows < 0 || s->rows > COLLGEN_MAX_ELEMS) abort();
  if (s->cols < 1 || s->cols > COLLGEN_MAX_ELEMS) abort();
  if (s->max_blocks < 0 || s->max_blocks > COLLGEN_MAX_BLOCKS) abort();
  if (memchr(s->arch, 0, sizeof s->arch) == NULL) abort();
  if (s->arch[0] && !collgen__arch_find(s->arch)) abort();
  if ((int)s->dtype < 0 || (int)s->dtype >= collgen__dtype_count()) abort();
  if ((int)s->op < 0 || (int)s->op >= collgen__op_count()) abort();
}

static void check_list(const cli_list *l) {
  if (l->n < 1) abort();
  for (int i = 0; i < l->n; ++i)
    if (!l->items[i] || !l->items[i][0] || strchr(l->items[i], ',')) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* argv[0] is the command name, as the subcommands receive it */
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = 0;
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  argv[argc++] = (char *)"cmd";
  for (size_t i = 0; i <= size && argc < MAX_ARGS + 1;) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  argv[argc] = NULL;

  /* gen and compile: OP, spec flags and their extras */
  static const unsigned extras[] = {0, CLI_EXTRA_LINE_DIRECTIVES, CLI_EXTRA_CACHE_DIR,
                                    CLI_EXTRA_LINE_DIRECTIVES | CLI_EXTRA_CACHE_DIR};
  for (size_t e = 0; e < sizeof extras / sizeof extras[0]; ++e) {
    cli_spec_args a;
    int rc = cli_parse_spec_args("gen", argc, argv, extras[e], &a);
    if (rc != 0 && rc != 2 && rc != CLI_HELP) abort();
    if (rc == 0) {
      check_shape(&a.shape);
      if (a.cache_dir && !(extras[e] & CLI_EXTRA_CACHE_DIR)) abort();
      if (!a.line_directives && !(extras[e] & CLI_EXTRA_LINE_DIRECTIVES)) abort();
      if (a.cache_dir && (!a.cache_dir[0] || strlen(a.cache_dir) >= CLI_PATH_MAX)) abort();
    }
  }

  /* spec flags one by one from every position, on a default shape */
  for (int i = 1; i < argc; ++i) {
    collgen_shape_t s;
    collgen_shape_init(&s, COLLGEN_OP_ALLGATHER_RMSNORM);
    int used = cli_parse_spec_flag("gen", argc, argv, i, &s);
    if (used < -1 || used > 2 || (used == 2 && i + 1 >= argc)) abort();
    check_shape(&s);
  }

  /* pregen: options, then every list parsed and validated */
  cli_pregen_opts o;
  int rc = cli_pregen_parse(argc, argv, 4, &o);
  if (rc != 0 && rc != 1 && rc != 2 && rc != CLI_HELP) abort();
  if (rc == 0) {
    if (o.jobs < 1 || o.jobs > CLI_MAX_JOBS) abort();
    check_list(&o.archs);
    check_list(&o.ops);
    check_list(&o.dtypes);
    if (o.ngpus_count < 1 || o.cols_count < 1) abort();
    for (int i = 0; i < o.ngpus_count; ++i)
      if (o.ngpus[i] < 1 || o.ngpus[i] > COLLGEN_MAX_DEVICES) abort();
    for (int i = 0; i < o.cols_count; ++i)
      if (o.cols[i] < 1 || o.cols[i] > CLI_PREGEN_MAX_COLS) abort();
    for (int i = 0; i < o.archs.n; ++i)
      if (!collgen__arch_find(o.archs.items[i]) ||
          strlen(o.archs.items[i]) >= sizeof(((collgen_shape_class_t *)0)->arch))
        abort();
    if (o.cache_dir && (!o.cache_dir[0] || strlen(o.cache_dir) >= CLI_PATH_MAX)) abort();
  }
  cli_pregen_free(&o);

  /* each argument as a comma list */
  for (int i = 1; i < argc; ++i) {
    cli_list l;
    int lrc = cli_list_split("pregen", "--list", argv[i], "anything", &l);
    if (lrc == 0) check_list(&l);
    else if (lrc != 1 && lrc != 2) abort();
    cli_list_free(&l);
  }
  /* demo's options */
  int procs = 99;
  int drc = cli_demo_parse(argc, argv, &procs);
  if (drc != 0 && drc != 2 && drc != CLI_HELP) abort();
  if (drc == 0 && procs != 0 && procs != -1 && (procs < 2 || procs > COLLGEN_MAX_DEVICES)) abort();
  /* the help predicate, the integer and --cache-dir checks on every argument */
  for (int i = 1; i < argc; ++i) {
    (void)cli_is_help(argv[i]);
    int64_t x = 0;
    int irc = cli_parse_int_arg("gen", "--n", argv[i], -3, 3, &x);
    if (irc != 0 && irc != 2) abort();
    if (irc == 0 && (x < -3 || x > 3)) abort();
    int crc = cli_cache_dir_arg("gen", argv[i]);
    if ((crc == 0) != (argv[i][0] && strlen(argv[i]) < CLI_PATH_MAX)) abort();
  }

  free(buf);
  return 0;
}
