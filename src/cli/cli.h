/*
** cli.h -- shared pieces of the collgen command-line tool.
*/
#ifndef COLLGEN_CLI_H
#define COLLGEN_CLI_H
#include <stdio.h>

#include "collgen.h"

/* Parses spec flags (--dtype, --ngpus, ...) from argv[i]; returns the
** number of argv entries consumed (0 = not a spec flag, -1 = bad value). */
int cli_parse_spec_flag(int argc, char **argv, int i, collgen_shape_t *shape);
/* Prints the help text of the spec flags to `out`. */
void cli_print_spec_help(FILE *out);
/* Writes the catalog's op (or dtype) names joined by `sep` into buf. */
void cli_op_names(char *buf, size_t n, const char *sep);
void cli_dtype_names(char *buf, size_t n, const char *sep);
/* Prints "collgen CMD: msg" to stderr; returns 2 (usage error). */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Splits a comma list into at most max items (modifies s). */
int cli_split(char *s, char **items, int max);
/* 1 if argv[i] is -h or --help. */
int cli_is_help(const char *arg);

int cmd_gen(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_pregen(int argc, char **argv);
int cmd_cache(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_demo(int argc, char **argv);
#endif
