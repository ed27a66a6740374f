/*
** cli.h -- shared pieces of the collgen command-line tool.
**
** Everything that reads argv lives in cli_common.c and has no side effect
** other than messages on the diagnostics stream (stderr unless set), so
** tests/fuzz/fuzz_cli_args.c runs all of it on arbitrary argument vectors.
**
** Exit codes of every command: 0 success, 1 failure, 2 usage error (bad
** option or value, including a spec the planner refuses); a failed write
** to stdout turns 0 into 1 (main.c).
*/
#ifndef COLLGEN_CLI_H
#define COLLGEN_CLI_H
#include <stdint.h>
#include <stdio.h>

#include "collgen.h"

/* Parser results besides 0 (parsed), 1 (failure) and 2 (usage error,
** message printed): --help was asked for; the caller prints the help on
** stdout and exits 0. */
#define CLI_HELP (-1)

/* Where diagnostics go: stderr unless set (NULL restores stderr). */
FILE *cli_diag(void);
void cli_set_diag(FILE *f);

/* Parses spec flags (--dtype, --ngpus, ...) from argv[i]; returns the
** number of argv entries consumed (0 = not a spec flag, -1 = bad value,
** with a message echoing it). */
int cli_parse_spec_flag(int argc, char **argv, int i, collgen_shape_t *shape);
/* Prints the help text of the spec flags to `out`. */
void cli_print_spec_help(FILE *out);
/* Writes the catalog's op (or dtype) names joined by `sep` into buf. */
void cli_op_names(char *buf, size_t n, const char *sep);
void cli_dtype_names(char *buf, size_t n, const char *sep);
/* Prints "collgen CMD: msg" and a --help hint; returns 2 (usage error). */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* 1 if arg is -h or --help. */
int cli_is_help(const char *arg);

/* `collgen gen|compile OP [spec flags] [extras]` (argv[0] is the command). */
enum { CLI_EXTRA_CACHE_DIR = 1, CLI_EXTRA_LINE_DIRECTIVES = 2 };
typedef struct {
  collgen_shape_t shape;
  const char *cache_dir;  /* --cache-dir D (CLI_EXTRA_CACHE_DIR) */
  int line_directives;    /* 0 after --no-line-directives */
} cli_spec_args;
/* Returns 0, 2 or CLI_HELP. `extras` says which extra flags are valid. */
int cli_parse_spec_args(const char *cmd, int argc, char **argv, unsigned extras,
                        cli_spec_args *a);

/* A comma list split strictly: at least one item, none empty. */
typedef struct {
  char *text;   /* private copy, split in place */
  char **items;
  int n;
} cli_list;
/* Returns 0, 1 (out of memory) or 2 (empty list or empty item: a usage
** error of `cmd` naming `flag` and echoing the whole value). `l` can be
** given to cli_list_free whatever the result. */
int cli_list_split(const char *cmd, const char *flag, const char *s, cli_list *l);
void cli_list_free(cli_list *l);

/* `collgen pregen` options, validated: every list non-empty, every item
** a known op, dtype or FP8 mode, an integer in range, or an arch of a sane
** length (the planner judges the arch itself). */
typedef struct {
  const char *cache_dir;
  long jobs;                 /* 1..256 */
  cli_list archs, ops, dtypes, fp8s;
  collgen_op_t *op;          /* ops.n */
  collgen_dtype_t *dtype;    /* dtypes.n */
  collgen_fp8_mode_t *fp8;   /* fp8s.n; NULL without --fp8 (every mode the arch has) */
  int64_t *ngpus, *cols;     /* ngpus_count, cols_count */
  int ngpus_count, cols_count;
  const char *ops_text, *ngpus_text; /* as given, for messages */
} cli_pregen_opts;
/* Returns 0, 1, 2 or CLI_HELP; `default_jobs` is used without -j. Call
** cli_pregen_free afterwards whatever the result. */
int cli_pregen_parse(int argc, char **argv, long default_jobs, cli_pregen_opts *o);
void cli_pregen_free(cli_pregen_opts *o);

/* `collgen demo [--processes [N]]`: *processes is 0 without the flag (one
** process drives every GPU), N when given (2..8), or -1 for "one process per
** visible GPU". Returns 0, 2 or CLI_HELP. */
int cli_demo_parse(int argc, char **argv, int *processes);

/* Checks that the entry of `hex_key` (64 hex digits) is on disk, whole and
** valid, in the cache directory `dir`. Returns 1, or 0 with the reason in
** why. */
int cli_entry_on_disk(const char *dir, const char *hex_key, char *why, size_t n);

int cmd_gen(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_pregen(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
#endif
