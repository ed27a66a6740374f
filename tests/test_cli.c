/*
** test_cli.c -- the collgen command-line tool: help and usage errors, exit
** codes, golden `gen` output, compile/pregen through a cache, and the
** cache subcommands.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static char dir[4096];
static void setup(void) {
  tu_make_temp_dir(dir, sizeof dir);
  unsetenv("COLLGEN_TEMPLATE_DIR");
}
static void teardown(void) { tu_remove_tree(dir); }
TestSuite(cli, .init = setup, .fini = teardown, .timeout = 300);

/* Runs `collgen <args>`; returns the exit status and the output. */
static int cg(const char *args, char **out) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "%s %s", COLLGEN_CLI_PATH, args);
  return tu_run(cmd, out);
}

Test(cli, help_and_usage_errors) {
  static const char *const cmds[] = {"gen", "compile", "pregen", "cache", "info", "demo"};
  char *out = NULL;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i) {
    char args[64], want[64];
    snprintf(args, sizeof args, "%s --help", cmds[i]);
    snprintf(want, sizeof want, "usage: collgen %s", cmds[i]);
    cr_expect_eq(cg(args, &out), 0, "%s", args);
    cr_expect(strstr(out, want), "`collgen %s` printed: %s", args, out);
    free(out);
  }
  cr_expect_eq(cg("", &out), 2);
  cr_expect(strstr(out, "usage: collgen COMMAND"));
  free(out);
  cr_expect_eq(cg("frobnicate", &out), 2);
  cr_expect(strstr(out, "unknown command 'frobnicate'"));
  free(out);
  cr_expect_eq(cg("gen no_such_op", &out), 2);
  cr_expect(strstr(out, "unknown op 'no_such_op'"));
  free(out);
  cr_expect_eq(cg("gen allreduce_sum --dtype f64", &out), 2);
  cr_expect(strstr(out, "unknown dtype 'f64'"));
  free(out);
  cr_expect_eq(cg("gen allreduce_sum --ngpus", &out), 2);
  free(out);
  cr_expect_eq(cg("gen allreduce_sum --ngpus 2 --group-size 3", &out), 1);
  cr_expect(strstr(out, "group_size 3 does not divide ngpus 2"), "%s", out);
  free(out);
}

/* Integer flags are range-checked, never truncated or wrapped: 4294967298
** once became a 2-GPU kernel and 2^62 elements an LL plan with grid 1. */
Test(cli, integer_flags_are_range_checked) {
  static const char *const bad[] = {
      "--ngpus 4294967298", "--ngpus 0", "--ngpus 9", "--ngpus 2x", "--ngpus ''",
      "--elems 4611686018427387904", "--elems 99999999999999999999", "--elems -1",
      "--rows 1099511627777", "--cols 0", "--max-blocks 257", "--rank 9", "--group-size -1",
      "--ngpus ' 2'", "--elems 0x10"};
  char *out = NULL;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    char args[128];
    snprintf(args, sizeof args, "gen allreduce_sum %s", bad[i]);
    cr_expect_eq(cg(args, &out), 2, "`collgen %s` exit status; printed: %s", args, out);
    cr_expect(strstr(out, "needs an integer in"), "`collgen %s` printed: %s", args, out);
    free(out);
  }
  cr_expect_eq(cg("gen allreduce_sum --elems 1099511627776 --ngpus 8", &out), 0, "%s", out);
  free(out);
}

static void expect_golden(const char *args, const char *golden) {
  char *out = NULL, path[4200];
  snprintf(path, sizeof path, "%s/tests/golden/%s", COLLGEN_SOURCE_DIR, golden);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  char *want = tu_read_file(path, NULL);
  cr_assert(want, "missing golden file %s", path);
  cr_expect_str_eq(out, want, "`collgen %s` differs from tests/golden/%s (regenerate it if the "
                   "template change is intended)", args, golden);
  free(out);
  free(want);
}

Test(cli, gen_matches_golden_sources) {
  expect_golden("gen allreduce_sum --elems 1000000 --no-line-directives",
                "allreduce_twoshot_bf16_g2_v8.cu");
  expect_golden("gen allreduce_sum --elems 1000 --unaligned --no-line-directives",
                "allreduce_oneshot_bf16_g2_v1.cu");
  expect_golden("gen allreduce_sum --no-line-directives", "allreduce_ll_bf16_g2_v8.cu");
  expect_golden("gen allgather_rmsnorm --dtype f16 --ngpus 4 --cols 5120 --rows 1000 "
                "--no-line-directives",
                "allgather_rmsnorm_f16_g4_c5120.cu");
}

Test(cli, compile_reports_miss_then_hit) {
  char args[4400], *out = NULL;
  snprintf(args, sizeof args, "compile allgather_rmsnorm --cols 2048 --cache-dir '%s'", dir);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  cr_expect(strstr(out, "cache:     miss (compiled)"), "%s", out);
  cr_expect(strstr(out, "spills:    0 bytes"), "%s", out);
  free(out);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  cr_expect(strstr(out, "cache:     hit (disk)"), "%s", out);
  free(out);
}

Test(cli, pregen_fills_then_finds_everything) {
  char args[4400], *out = NULL;
  snprintf(args, sizeof args,
           "pregen --ops allreduce_sum,allgather_rmsnorm --dtypes f32 --ngpus 2 --cols 1024 "
           "--cache-dir '%s' -j 2", dir);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  int compiled = -1, cached = -1, failed = -1;
  const char *line = strstr(out, "pregen: ");
  cr_assert(line, "%s", out);
  cr_assert_eq(sscanf(line, "pregen: %d compiled, %d already cached, %d failed", &compiled,
                      &cached, &failed), 3);
  cr_expect_eq(compiled, 9, "g1: 2 rmsnorm (allreduce copies); g2: 4 allreduce + 3 rmsnorm\n%s", out);
  cr_expect_eq(cached, 0);
  cr_expect_eq(failed, 0);
  free(out);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  cr_expect(strstr(out, "pregen: 0 compiled, 9 already cached, 0 failed"), "%s", out);
  free(out);

  snprintf(args, sizeof args, "cache ls --cache-dir '%s'", dir);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  cr_expect(strstr(out, "cache ls: 9 entries"), "%s", out);
  cr_expect(strstr(out, "collgen_allreduce_twoshot_f32_g2_v4"), "%s", out);
  free(out);
  snprintf(args, sizeof args, "cache verify --cache-dir '%s'", dir);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  cr_expect(strstr(out, "9 entries"), "%s", out);
  free(out);

  /* Corrupt one entry: verify reports and removes it, exit 1. */
  char cmd[4600];
  snprintf(cmd, sizeof cmd,
           "f=$(find '%s/entries' -type f | head -1); printf 'XXXX' | dd of=\"$f\" bs=1 seek=300 "
           "conv=notrunc 2>/dev/null", dir);
  cr_assert_eq(tu_run(cmd, NULL), 0);
  cr_expect_eq(cg(args, &out), 1, "%s", out);
  cr_expect(strstr(out, "BAD") && strstr(out, "checksum mismatch"), "%s", out);
  free(out);
  cr_expect_eq(cg(args, &out), 0, "the bad entry was removed: %s", out);
  cr_expect(strstr(out, "8 entries"), "%s", out);
  free(out);

  snprintf(args, sizeof args, "cache clear --cache-dir '%s'", dir);
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  cr_expect(strstr(out, "removed 8 entries"), "%s", out);
  free(out);
}

Test(cli, unusable_cache_dir_warns_and_works) {
  char *out = NULL;
  char args[4400];
  snprintf(args, sizeof args, "compile allreduce_sum --dtype f32 --cache-dir /proc/collgen-nope");
  cr_assert_eq(cg(args, &out), 0, "%s", out);
  cr_expect(strstr(out, "warning: cache directory /proc/collgen-nope is not usable"), "%s", out);
  cr_expect(strstr(out, "miss (compiled)"), "%s", out);
  free(out);
}

Test(cli, info_and_demo_without_gpu) {
  char *out = NULL;
  cr_assert_eq(cg("info", &out), 0, "%s", out);
  cr_expect(strstr(out, "collgen  0.1.0") && strstr(out, "Lua      Lua 5.4"), "%s", out);
  int no_gpu = strstr(out, "GPUs     none") != NULL;
  free(out);
  if (!no_gpu) return; /* the GPU path is covered by test_gpu */
  char cmd[4400];
  snprintf(cmd, sizeof cmd, "COLLGEN_CACHE_DIR='%s' %s demo", dir, COLLGEN_CLI_PATH);
  cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
  cr_expect(strstr(out, "no GPU found"), "%s", out);
  cr_expect(strstr(out, "collgen_allreduce_twoshot_bf16_g2_v8"), "%s", out);
  cr_expect(strstr(out, "collgen_allgather_rmsnorm_bf16_g2_c8192_v8_u2"), "%s", out);
  /* the demo's 129 x 8192 bf16 gathered rows exceed the LL range */
  free(out);
}
