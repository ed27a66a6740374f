/*
** main.c -- the `collgen` command: dispatches to its subcommands.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: collgen COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  gen OP       print the generated CUDA C for a spec\n"
    "  compile OP   compile a spec through the cache and report it\n"
    "  pregen       compile a matrix of specs into a cache (offline)\n"
    "  cache        ls | verify | clear the on-disk cache\n"
    "  info         versions, GPUs and P2P matrix, cache location\n"
    "  demo         run both ops on all GPUs and check them (the main job)\n"
    "\n"
    "OP is allreduce_sum or allgather_rmsnorm. `collgen COMMAND --help` for\n"
    "each command's options. Environment: see docs/environment.md.\n";

int main(int argc, char **argv) {
  /* The library prints nothing unless asked; the command asks for all of it
  ** (cache warnings included) unless the user chose a COLLGEN_LOG level. */
  setenv("COLLGEN_LOG", "info", 0);
  if (argc < 2 || cli_is_help(argv[1])) {
    fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
      {"gen", cmd_gen},     {"compile", cmd_compile}, {"pregen", cmd_pregen},
      {"cache", cmd_cache}, {"info", cmd_info},       {"demo", cmd_demo}};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i)
    if (strcmp(argv[1], cmds[i].name) == 0) return cmds[i].fn(argc - 1, argv + 1);
  if (strcmp(argv[1], "--version") == 0) {
    printf("collgen %s\n", collgen_version());
    return 0;
  }
  fprintf(stderr, "collgen: unknown command '%s'\n\n%s", argv[1], usage);
  return 2;
}
