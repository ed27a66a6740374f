/*
** cli.h -- shared pieces of the collgen command-line tool.
**
** Everything that reads argv lives in cli_common.c and has no side effect
** other than messages on the diagnostics stream (stderr unless set), so
** tests/fuzz/fuzz_cli_args.c runs all of it on arbitrary argument vectors.
**
** Exit codes of every command: 0 success, 1 failure (a template or planner
** error included), 2 usage error (bad option or value, or a spec the
** planner refuses); a failed write to stdout turns 0 into 1 (main.c).
**
** Every usage error is one line on the diagnostics stream, in one style:
**   collgen CMD: WHAT IS WRONG: 'VALUE' (ACCEPTED VALUES OR RANGE); try 'collgen CMD --help'
** (cli_usage_error, cli_bad_value); a failure is
**   collgen CMD: COLLGEN_ERR_...: message
** (cli_failure).
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

/* Limits of the CLI's own values: a --cache-dir path (bytes, with the
** NUL), pregen's -j and its --cols items. */
#define CLI_PATH_MAX 4096
#define CLI_MAX_JOBS 256
#define CLI_PREGEN_MAX_COLS (1LL << 31)

/* Where diagnostics go: stderr unless set (NULL restores stderr). */
FILE *cli_diag(void);
void cli_set_diag(FILE *f);

/* Writes the catalog's op, dtype, FP8 mode or arch names joined by `sep`
** into buf[n] (cut short if it does not fit). */
void cli_op_names(char *buf, size_t n, const char *sep);
void cli_dtype_names(char *buf, size_t n, const char *sep);
void cli_fp8_names(char *buf, size_t n, const char *sep);
void cli_arch_names(char *buf, size_t n, const char *sep);

/* Prints the usage error "collgen CMD: <fmt...>; try 'collgen CMD --help'"
** (CMD NULL: the `collgen` command itself) and returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* cli_usage_error of "WHAT: 'VALUE' (ACCEPTED)"; returns 2. */
int cli_bad_value(const char *cmd, const char *what, const char *value, const char *accepted);
/* Prints the failure "collgen CMD: <status name>: message" and returns 1. */
int cli_failure(const char *cmd, int status, const char *message);
/* The exit code of a failed call that ran the planner (collgen_plan,
** collgen_plan_variants, collgen_generate_source), its message printed:
** 2, a usage error, when the planner refused the spec (its refusals are
** COLLGEN_ERR_INVALID_ARG with a message starting "planner: ", the
** convention of gen/planner.lua's fail()); else 1, a failure. The library
** reports a Lua error or a sandbox refusal inside the planner as
** COLLGEN_ERR_INVALID_ARG too; without the "planner: " prefix it is a
** fault of the template tree, and is labelled COLLGEN_ERR_TEMPLATE. */
int cli_planner_failure(const char *cmd, int status, const char *message);
/* 1 if arg is -h or --help. */
int cli_is_help(const char *arg);

/* Parses the value `v` of integer flag `flag` into *out when it is in
** [lo, hi]: 0; else a usage error of `cmd` saying whether `v` is out of
** range or not an integer, with "FLAG must be LO..HI": 2. */
int cli_parse_int_arg(const char *cmd, const char *flag, const char *v, int64_t lo, int64_t hi,
                      int64_t *out);
/* Checks the value of --cache-dir: 0, or a usage error of `cmd` (2) when
** it is empty (which must never mean the default cache) or longer than
** CLI_PATH_MAX - 1 bytes. One message for every command that takes it. */
int cli_cache_dir_arg(const char *cmd, const char *v);

/* Parses spec flag argv[i] (--dtype, --ngpus, ...; --rank as the alias of
** --tensor-rank) of command `cmd`; returns the number of argv entries
** consumed (0 = not a spec flag, -1 = bad value, with a usage error
** echoing it). An --arch must be one of the catalog. */
int cli_parse_spec_flag(const char *cmd, int argc, char **argv, int i, collgen_shape_t *shape);
/* Prints the help text of the spec flags to `out`. */
void cli_print_spec_help(FILE *out);

/* `collgen gen|compile OP [spec flags] [extras]` (argv[0] is the command). */
enum { CLI_EXTRA_CACHE_DIR = 1, CLI_EXTRA_LINE_DIRECTIVES = 2 };
typedef struct {
  collgen_shape_t shape;
  const char *cache_dir;  /* --cache-dir D (CLI_EXTRA_CACHE_DIR) */
  int line_directives;    /* 0 after --no-line-directives */
} cli_spec_args;
/* Returns 0, 2 or CLI_HELP. `extras` says which extra flags are valid.
** The deprecated --rank prints one warning on the diagnostics stream. */
int cli_parse_spec_args(const char *cmd, int argc, char **argv, unsigned extras,
                        cli_spec_args *a);

/* A comma list split strictly: at least one item, none empty. */
typedef struct {
  char *text;   /* private copy, split in place */
  char **items;
  int n;
} cli_list;
/* Returns 0, 1 (out of memory) or 2 (empty list or empty item: a usage
** error of `cmd` naming `flag`, echoing the whole value and saying
** `accepted`). `l` can be given to cli_list_free whatever the result. */
int cli_list_split(const char *cmd, const char *flag, const char *s, const char *accepted,
                   cli_list *l);
void cli_list_free(cli_list *l);

/* `collgen pregen` options, validated: every list non-empty, every item
** an op, dtype, FP8 mode or arch of the catalog, or an integer in range. */
typedef struct {
  const char *cache_dir;
  long jobs;                 /* 1..CLI_MAX_JOBS */
  cli_list archs, ops, dtypes, fp8s;
  collgen_op_t *op;          /* ops.n */
  collgen_dtype_t *dtype;    /* dtypes.n */
  collgen_fp8_mode_t *fp8;   /* fp8s.n; NULL without --fp8 (every mode the arch has) */
  int64_t *ngpus, *cols;     /* ngpus_count, cols_count */
  int ngpus_count, cols_count;
  const char *ops_text, *ngpus_text; /* as given, for messages */
  int all_dtypes;            /* no --dtypes: copy-only dtypes an op refuses are skipped */
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
