/*
** cmd_gen.c -- `collgen gen` (print the generated CUDA C) and
** `collgen compile` (compile through the cache and report).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "escape.h"
#include "generator.h"
#include "internal.h"

static void print_help(const char *cmd, const char *extra_help) {
  char ops[256];
  cli_op_names(ops, sizeof ops, " | ");
  printf("usage: collgen %s OP [spec flags]\n  OP: %s\n\n", cmd, ops);
  cli_print_spec_help(stdout);
  fputs(extra_help, stdout);
}

/* Parses the command line and plans the spec: returns -1 to go on with a
** generator in *g and the plan in *plan, else the exit code. A spec the
** planner refuses (group size not dividing ngpus, an FP8 mode the arch
** lacks, ...) is a usage error, like any other bad value; a fault of the
** planner itself is a failure (cli_planner_failure). */
static int prepare(const char *cmd, const char *extra_help, unsigned extras, int argc,
                   char **argv, cli_spec_args *a, collgen_generator_t **g,
                   collgen_plan_t *plan) {
  *g = NULL;
  int rc = cli_parse_spec_args(cmd, argc, argv, extras, a);
  if (rc == CLI_HELP) {
    print_help(cmd, extra_help);
    return 0;
  }
  if (rc != 0) return rc;
  rc = collgen_generator_create(g, a->cache_dir);
  if (rc != COLLGEN_OK) return cli_failure(cmd, rc, collgen_last_error());
  rc = collgen_plan(*g, &a->shape, plan);
  if (rc == COLLGEN_OK) return -1;
  rc = cli_planner_failure(cmd, rc, collgen_generator_last_error(*g));
  collgen_generator_destroy(*g);
  *g = NULL;
  return rc;
}

int cmd_gen(int argc, char **argv) {
  cli_spec_args a;
  collgen_generator_t *g;
  collgen_plan_t plan;
  int rc = prepare("gen", "  --no-line-directives   omit #line directives\n",
                   CLI_EXTRA_LINE_DIRECTIVES, argc, argv, &a, &g, &plan);
  if (rc >= 0) return rc;
  char *src = NULL;
  rc = collgen_generate_source(g, &a.shape, a.line_directives, &src);
  if (rc != COLLGEN_OK) {
    rc = cli_planner_failure("gen", rc, collgen_generator_last_error(g));
    collgen_generator_destroy(g);
    return rc;
  }
  fputs(src, stdout);
  free(src);
  collgen_generator_destroy(g);
  return 0;
}

int cmd_compile(int argc, char **argv) {
  cli_spec_args a;
  collgen_generator_t *g;
  collgen_plan_t plan;
  int rc = prepare("compile", "  --cache-dir D          cache directory\n", CLI_EXTRA_CACHE_DIR,
                   argc, argv, &a, &g, &plan);
  if (rc >= 0) return rc;
  collgen_kernel_info_t info;
  rc = collgen_get_kernel(g, &a.shape, &info);
  if (rc != COLLGEN_OK) {
    rc = cli_failure("compile", rc, collgen_generator_last_error(g));
    collgen_generator_destroy(g);
    return rc;
  }
  static const char *const hit[] = {"miss (compiled)", "hit (disk)", "hit (memory)"};
  printf("kernel:    %s\n", info.kernel);
  printf("plan:      algo=%s vec=%d block=%d grid=%d items=%d\n", plan.algo, plan.vec,
         plan.block, plan.grid, plan.items);
  printf("key:       %s\n", info.key);
  printf("cache:     %s\n", hit[info.cache_hit]);
  printf("cubin:     %zu bytes\n", info.cubin_size);
  printf("registers: %d\n", info.registers);
  printf("spills:    %d bytes\n", info.spill_bytes);
  printf("time:      %.3f ms\n", info.milliseconds);
  /* what is really on disk, not what was meant to be */
  const char *dir = collgen__generator_cache_dir(g);
  char why[4600];
  char shown[COLLGEN_ESCAPED_SIZE(4096)];
  if (cli_entry_on_disk(dir, info.key, why, sizeof why))
    printf("stored:    %s\n", collgen__escape(dir, shown, sizeof shown));
  else
    printf("stored:    no (%s)\n", collgen__escape(why, shown, sizeof shown));
  collgen_generator_destroy(g);
  return 0;
}
