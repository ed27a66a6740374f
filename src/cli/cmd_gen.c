/*
** cmd_gen.c -- `collgen gen` (print the generated CUDA C) and
** `collgen compile` (compile through the cache and report).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "internal.h"

typedef struct {
  collgen_shape_t shape;
  const char *cache_dir;
  int line_directives;
} spec_args;

/* Parses OP and flags shared by gen and compile; returns 0, 1 (help
** printed) or 2 (usage error). */
static int parse(const char *cmd, const char *extra_help, int argc, char **argv,
                 spec_args *a) {
  a->cache_dir = NULL;
  a->line_directives = 1;
  char ops[256];
  cli_op_names(ops, sizeof ops, " | ");
  if (argc < 2 || cli_is_help(argv[1])) {
    FILE *out = argc < 2 ? stderr : stdout;
    fprintf(out, "usage: collgen %s OP [spec flags]\n  OP: %s\n\n", cmd, ops);
    cli_print_spec_help(out);
    fputs(extra_help, out);
    return argc < 2 ? 2 : 1;
  }
  collgen_op_t op;
  if (collgen__parse_op(argv[1], &op) != 0)
    return cli_usage_error(cmd, "unknown op '%s' (%s)", argv[1], ops);
  collgen_shape_init(&a->shape, op);
  for (int i = 2; i < argc;) {
    if (cli_is_help(argv[i])) {
      printf("usage: collgen %s OP [spec flags]\n  OP: %s\n\n", cmd, ops);
      cli_print_spec_help(stdout);
      fputs(extra_help, stdout);
      return 1;
    }
    int used = cli_parse_spec_flag(argc, argv, i, &a->shape);
    if (used < 0) return 2;
    if (used == 0 && strcmp(argv[i], "--no-line-directives") == 0) {
      a->line_directives = 0;
      used = 1;
    } else if (used == 0 && strcmp(argv[i], "--cache-dir") == 0 && i + 1 < argc) {
      a->cache_dir = argv[i + 1];
      used = 2;
    }
    if (used == 0) return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
    i += used;
  }
  return 0;
}

int cmd_gen(int argc, char **argv) {
  spec_args a;
  int rc = parse("gen", "  --no-line-directives   omit #line directives\n", argc, argv, &a);
  if (rc) return rc == 1 ? 0 : rc;
  collgen_generator_t *g;
  if (collgen_generator_create(&g, NULL) != COLLGEN_OK) {
    fprintf(stderr, "collgen gen: %s\n", collgen_last_error());
    return 1;
  }
  char *src = NULL;
  rc = collgen_generate_source(g, &a.shape, a.line_directives, &src);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "collgen gen: %s: %s\n", collgen_status_name(rc),
            collgen_generator_last_error(g));
    collgen_generator_destroy(g);
    return 1;
  }
  fputs(src, stdout);
  free(src);
  collgen_generator_destroy(g);
  return 0;
}

int cmd_compile(int argc, char **argv) {
  spec_args a;
  int rc = parse("compile", "  --cache-dir D          cache directory\n", argc, argv, &a);
  if (rc) return rc == 1 ? 0 : rc;
  collgen_generator_t *g;
  if (collgen_generator_create(&g, a.cache_dir) != COLLGEN_OK) {
    fprintf(stderr, "collgen compile: %s\n", collgen_last_error());
    return 1;
  }
  collgen_plan_t plan;
  collgen_kernel_info_t info;
  rc = collgen_plan(g, &a.shape, &plan);
  if (rc == COLLGEN_OK) rc = collgen_get_kernel(g, &a.shape, &info);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "collgen compile: %s: %s\n", collgen_status_name(rc),
            collgen_generator_last_error(g));
    collgen_generator_destroy(g);
    return 1;
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
  collgen_generator_destroy(g);
  return 0;
}
