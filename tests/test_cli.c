/*
** test_cli.c -- the collgen command-line tool: help and usage errors, exit
** codes, golden `gen` output, compile/pregen through a cache, the cache
** subcommands, and the demo's hook table.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "test_util.h"
/* The demo's hook entries, compiled in (the CLI is not a library), as
** tests/fuzz/fuzz_cli_args.c does with cli_common.c. */
#include "cli/demo_data.c"
#include "cli/demo_ops.c"

static char dir[4096];
static void setup(void) {
  tu_make_temp_dir(dir, sizeof dir);
  unsetenv("COLLGEN_TEMPLATE_DIR");
}
static void teardown(void) { tu_remove_tree(dir); }
TestSuite(cli, .init = setup, .fini = teardown, .timeout = 300);

/* Runs `collgen <args>`; returns the exit status and the output. */
static int cg(const char *args, char **out) {
  char cmd[8000];
  snprintf(cmd, sizeof cmd, "%s %s", COLLGEN_CLI_PATH, args);
  return tu_run(cmd, out);
}

/* Runs `collgen <args>`; returns the exit status and what it wrote on
** stderr alone (stdout dropped). */
static int cg_stderr(const char *args, char **err) {
  char cmd[8000];
  snprintf(cmd, sizeof cmd, "{ %s %s 2>&1 >/dev/null; }", COLLGEN_CLI_PATH, args);
  return tu_run(cmd, err);
}

/* The summary line of pregen ("pregen: N compiled, ..." at a line start),
** not a "collgen pregen: ..." message. */
static int pregen_summary(const char *out, int *compiled, int *cached, int *failed) {
  for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (sscanf(p, "pregen: %d compiled, %d already cached, %d failed", compiled, cached,
               failed) == 3)
      return 1;
  return 0;
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
  cr_expect(strstr(out, "unknown command: 'frobnicate'"));
  free(out);
  cr_expect_eq(cg("gen no_such_op", &out), 2);
  cr_expect(strstr(out, "unknown op: 'no_such_op'"));
  free(out);
  cr_expect_eq(cg("gen allreduce_sum --dtype f128", &out), 2);
  cr_expect(strstr(out, "unknown dtype: 'f128'"));
  free(out);
  cr_expect_eq(cg("gen allreduce_sum --ngpus", &out), 2);
  free(out);
  cr_expect_eq(cg("gen allreduce_sum --ngpus 2 --group-size 3", &out), 2);
  cr_expect(strstr(out, "group_size 3 does not divide ngpus 2"), "%s", out);
  free(out);
}

/* Every usage error of every command exits 2 (never 1) and its message
** echoes the offending value. A planner refusal of a bad spec is a usage
** error too. */
Test(cli, usage_errors_exit_2_and_echo_the_value) {
  static const struct { const char *args, *echo; } cases[] = {
      {"frobnicate", "'frobnicate'"},
      {"help frobnicate", "'frobnicate'"},
      {"gen allreduce_sum --ngpus 2 --group-size 3", "group_size 3 does not divide ngpus 2"},
      {"compile allreduce_sum --ngpus 2 --group-size 3 --cache-dir @", "group_size 3"},
      {"gen allreduce_sum --dtype i32",
       "allreduce_sum computes on elements: i32 is a copy-only dtype"},
      {"compile allgather_rmsnorm --dtype u8 --cache-dir @",
       "allgather_rmsnorm computes on elements: u8 is a copy-only dtype"},
      {"pregen --ops allreduce_residual_rmsnorm --dtypes bf16,i64 --ngpus 2 --cache-dir @",
       "allreduce_residual_rmsnorm computes on elements: i64 is a copy-only dtype"},
      /* the default dtype list skips the copy-only ones the op refuses: only
      ** the groups of one's copies are left, so there is nothing to compile */
      {"pregen --ops allreduce_sum --ngpus 1 --cache-dir @", "the matrix has no kernel to compile"},
      {"gen allreduce_sum --arch sm_1", "'sm_1'"},
      {"compile allreduce_sum --arch sm_1 --cache-dir @", "'sm_1'"},
      {"gen allreduce_sum --arch sm_90_and_then_some_more", "sm_90_and_then_some_more"},
      {"gen allgather_rmsnorm --cols 5000000000000", "5000000000000"},
      {"gen allreduce_sum --bogus", "'--bogus'"},
      {"gen allreduce_residual_rmsnorm --fp8 dynamic --arch sm_80",
       "FP8 output (fp8 dynamic) needs sm_89 or newer, not sm_80"},
      {"compile allreduce_residual_rmsnorm --fp8 static --arch sm_86 --cache-dir @",
       "needs sm_89 or newer, not sm_86"},
      {"gen allreduce_sum --fp8 static", "allreduce_sum has no FP8 output"},
      {"gen allreduce_residual_rmsnorm --fp8 e5m2", "unknown FP8 mode: 'e5m2'"},
      {"gen allreduce_residual_rmsnorm --fp8", "--fp8"},
      {"gen allreduce_sum --cache-dir", "--cache-dir"},
      {"compile allreduce_sum --cache-dir", "--cache-dir"},
      {"compile allreduce_sum --frob 1 --cache-dir @", "'--frob'"},
      {"gen allreduce_sum --dtype", "--dtype"},
      {"gen allreduce_sum --dtype ''", "''"},
      {"gen ''", "''"},
      {"pregen --arch sm_1 --ops allreduce_sum --dtypes f32 --ngpus 2 --cache-dir @", "sm_1"},
      {"pregen --ops allreduce_sum --dtypes f32 --ngpus 2 --arch '' --cache-dir @", "''"},
      {"pregen -j 0 --cache-dir @", "'0'"},
      {"pregen --fp8 e5m2 --cache-dir @", "unknown FP8 mode: 'e5m2'"},
      {"pregen --fp8 none, --cache-dir @", "--fp8 has an empty item: 'none,'"},
      {"pregen --arch sm_80 --ops allreduce_residual_rmsnorm --dtypes f32 --ngpus 1 --cols 8 "
       "--fp8 none,dynamic --cache-dir @", "needs sm_89 or newer, not sm_80"},
      {"pregen -j 257 --cache-dir @", "'257'"},
      {"pregen --cache-dir", "--cache-dir"},
      {"pregen --frob x --cache-dir @", "'--frob'"},
      {"pregen stray --cache-dir @", "'stray'"},
      {"cache", "usage: collgen cache"},
      {"cache frob --cache-dir @", "'frob'"},
      {"cache ls --frob --cache-dir @", "'--frob'"},
      {"info extra", "'extra'"},
      {"demo extra", "'extra'"},
      {"demo --processes 9", "--processes is out of range: '9' (--processes must be 2..8)"},
      {"demo --processes 1", "--processes is out of range: '1' (--processes must be 2..8)"},
      {"demo --processes 2x", "'2x'"},
      {"demo --processes --processes", "--processes given twice"},
      {"demo --processes 3 extra", "'extra'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char args[6000], *out = NULL;
    /* @ stands for the test's temporary cache directory */
    const char *at = strchr(cases[i].args, '@');
    if (at)
      snprintf(args, sizeof args, "%.*s'%s'%s", (int)(at - cases[i].args), cases[i].args, dir,
               at + 1);
    else
      snprintf(args, sizeof args, "%s", cases[i].args);
    cr_expect_eq(cg(args, &out), 2, "`collgen %s` exit status; printed: %s", args, out);
    cr_expect(out && strstr(out, cases[i].echo), "`collgen %s` does not echo %s: %s", args,
              cases[i].echo, out);
    free(out);
  }
}

/* `collgen help` and `collgen help CMD` are the same as --help. */
Test(cli, help_command) {
  char *out = NULL;
  cr_expect_eq(cg("help 2>/dev/null", &out), 0, "%s", out);
  cr_expect(strstr(out, "usage: collgen COMMAND"), "%s", out);
  cr_expect(strstr(out, "help [CMD]"), "the usage lists `help`: %s", out);
  free(out);
  static const char *const cmds[] = {"gen", "compile", "pregen", "cache", "info", "demo"};
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i) {
    char args[64], want[64];
    snprintf(args, sizeof args, "help %s 2>/dev/null", cmds[i]);
    snprintf(want, sizeof want, "usage: collgen %s", cmds[i]);
    cr_expect_eq(cg(args, &out), 0, "`collgen %s`: %s", args, out);
    cr_expect(strstr(out, want), "`collgen %s` printed on stdout: %s", args, out);
    free(out);
  }
  cr_expect_eq(cg("help gen extra", &out), 2, "%s", out);
  free(out);
}

/* A failed write to stdout (disk full, closed pipe) is an error (exit 1
** with a message on stderr) for every command, never a silent exit 0. */
Test(cli, stdout_write_errors_exit_1) {
  if (access("/dev/full", W_OK) != 0) cr_skip_test("no /dev/full");
  static const char *const cases[] = {
      "gen allreduce_sum", "gen allreduce_sum --help", "compile allreduce_sum --cache-dir @",
      "info", "info --help", "--help", "--version", "help", "help pregen", "pregen --help",
      "pregen --ops allgather_rmsnorm --dtypes f32 --ngpus 1 --cols 1024 --cache-dir @ -j 1",
      "cache ls --cache-dir @", "cache verify --cache-dir @", "cache clear --cache-dir @",
      "cache --help", "demo --help"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char cmd[6000], *out = NULL;
    /* stdout to /dev/full inside the group, stderr (tu_run's 2>&1) to us */
    const char *at = strchr(cases[i], '@');
    if (at)
      snprintf(cmd, sizeof cmd, "{ %s %.*s'%s'%s >/dev/full; }", COLLGEN_CLI_PATH,
               (int)(at - cases[i]), cases[i], dir, at + 1);
    else
      snprintf(cmd, sizeof cmd, "{ %s %s >/dev/full; }", COLLGEN_CLI_PATH, cases[i]);
    cr_expect_eq(tu_run(cmd, &out), 1, "`%s` exit status; printed: %s", cmd, out);
    cr_expect(out && strstr(out, "collgen: cannot write to standard output"), "`%s` printed: %s",
              cmd, out);
    free(out);
  }
  /* a closed stdout too */
  char cmd[4400], *out = NULL;
  snprintf(cmd, sizeof cmd, "{ %s info >&-; }", COLLGEN_CLI_PATH);
  cr_expect_eq(tu_run(cmd, &out), 1, "%s", out);
  cr_expect(out && strstr(out, "collgen: cannot write to standard output"), "%s", out);
  free(out);
}

/* Integer flags are range-checked, never truncated or wrapped: 4294967298
** once became a 2-GPU kernel and 2^62 elements an LL plan with grid 1. The
** message says the flag's range. */
Test(cli, integer_flags_are_range_checked) {
  static const char *const bad[] = {
      "--ngpus 4294967298", "--ngpus 0", "--ngpus 9", "--ngpus 2x", "--ngpus ''",
      "--elems 4611686018427387904", "--elems 99999999999999999999", "--elems -1",
      "--rows 1099511627777", "--cols 0", "--max-blocks 257", "--tensor-rank 9",
      "--group-size -1",
      "--ngpus ' 2'", "--elems 0x10"};
  char *out = NULL;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    char args[128];
    snprintf(args, sizeof args, "gen allreduce_sum %s", bad[i]);
    cr_expect_eq(cg(args, &out), 2, "`collgen %s` exit status; printed: %s", args, out);
    char range[64];
    snprintf(range, sizeof range, "(%.*s must be ", (int)strcspn(bad[i], " "), bad[i]);
    cr_expect(strstr(out, range), "`collgen %s` printed: %s", args, out);
    free(out);
  }
  cr_expect_eq(cg("gen allreduce_sum --elems 1099511627776 --ngpus 8", &out), 0, "%s", out);
  free(out);
}

/* `cache clear --cache-dir ''` once fell back to the default cache and
** cleared it; a missing value or a bad subcommand is a usage error before
** any directory is resolved. */
Test(cli, cache_refuses_empty_dir_and_bad_subcommands) {
  char home[4200], cmd[20000], *out = NULL;
  snprintf(home, sizeof home, "%s/home", dir);
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/.cache/collgen/entries/ab' && touch '%s/.cache/collgen/"
           "entries/ab/keep' && HOME='%s' XDG_CACHE_HOME= COLLGEN_CACHE_DIR= %s cache clear "
           "--cache-dir ''", home, home, home, COLLGEN_CLI_PATH);
  cr_expect_eq(tu_run(cmd, &out), 2, "%s", out);
  cr_expect(strstr(out, "collgen cache: --cache-dir is empty: '' (a directory"), "%s", out);
  free(out);
  snprintf(cmd, sizeof cmd, "%s/.cache/collgen/entries/ab/keep", home);
  cr_expect_eq(access(cmd, F_OK), 0, "the default cache was not touched");
  cr_expect_eq(cg("cache ls --cache-dir", &out), 2);
  cr_expect(strstr(out, "--cache-dir needs a value"), "%s", out);
  free(out);
  cr_expect_eq(tu_run("env -u HOME -u XDG_CACHE_HOME -u COLLGEN_CACHE_DIR " COLLGEN_CLI_PATH
                      " cache frob", &out), 2, "%s", out);
  cr_expect(strstr(out, "collgen cache: unknown subcommand: 'frob' (ls, verify, clear); try "
                        "'collgen cache --help'"), "%s", out);
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
  expect_golden("gen allreduce_residual_rmsnorm --ngpus 4 --rows 8 --cols 8192 "
                "--no-line-directives",
                "allreduce_residual_rmsnorm_ll_bf16_g4_c8192.cu");
  expect_golden("gen allreduce_residual_rmsnorm --ngpus 1 --rows 8192 --cols 8192 "
                "--no-line-directives",
                "allreduce_residual_rmsnorm_local_bf16_g1_c8192.cu");
  expect_golden("gen allreduce_residual_rmsnorm --ngpus 1 --rows 2048 --cols 4096 "
                "--no-line-directives",
                "allreduce_residual_rmsnorm_local_bf16_g1_c4096_cs.cu");
  expect_golden("gen allreduce_residual_rmsnorm --ngpus 4 --rows 8 --cols 8192 --fp8 dynamic "
                "--no-line-directives",
                "allreduce_residual_rmsnorm_ll_bf16_g4_c8192_e4m3_dynamic.cu");
  /* the ops that move bits: one kernel per element size (u8 and i8: b1) */
  expect_golden("gen broadcast --dtype u8 --ngpus 4 --elems 1000 --no-line-directives",
                "broadcast_b1_g4_v16.cu");
  expect_golden("gen broadcast --dtype i8 --ngpus 4 --elems 1000 --no-line-directives",
                "broadcast_b1_g4_v16.cu");
  expect_golden("gen all_gather --dtype u8 --ngpus 4 --elems 1000 --no-line-directives",
                "all_gather_b1_g4.cu");
  expect_golden("gen reduce_scatter_sum --ngpus 4 --elems 4096 --no-line-directives",
                "reduce_scatter_sum_bf16_g4_v8.cu");
  expect_golden("gen reduce_scatter_rmsnorm --ngpus 4 --rows 3 --cols 4096 --no-line-directives",
                "reduce_scatter_rmsnorm_bf16_g4_c4096.cu");
  expect_golden("gen scatter --dtype f32 --ngpus 4 --elems 1000 --no-line-directives",
                "scatter_b4_g4.cu");
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
  cr_assert(pregen_summary(out, &compiled, &cached, &failed), "%s", out);
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

/* allreduce_residual_rmsnorm's kernels per FP8 output mode: a group of one
** at 1024 f32 cols has 2 (vector and scalar) per mode, and on the default
** arch (sm_90a) a third plain one, streamed just above the L2; --fp8 picks
** modes, and without it every mode the arch has is compiled (sm_80: none
** of the e4m3 ones). */
Test(cli, pregen_fp8_modes) {
  static const struct { const char *flags; int compiled; } cases[] = {
      {"--fp8 none", 3},  {"--fp8 static", 2}, {"--fp8 dynamic,none", 5},
      {"", 7},            {"--arch sm_89", 6}, {"--arch sm_80", 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char args[4600], *out = NULL;
    snprintf(args, sizeof args, "pregen --ops allreduce_residual_rmsnorm --dtypes f32 --ngpus 1 "
             "--cols 1024 %s --cache-dir '%s/%zu'", cases[i].flags, dir, i);
    cr_assert_eq(cg(args, &out), 0, "%s", out);
    int compiled = -1, cached = -1, failed = -1;
    cr_assert(pregen_summary(out, &compiled, &cached, &failed), "%s", out);
    cr_expect_eq(compiled, cases[i].compiled, "%s: %s", cases[i].flags, out);
    cr_expect_eq(failed, 0);
    free(out);
  }
}

/* pregen counts a kernel as done only when it is on disk in the target
** cache at the end: an unusable directory (memory-only cache), a disabled
** cache or a size cap that evicts what was just written are failures. */
Test(cli, pregen_fails_when_entries_are_not_on_disk) {
  static const char *const envs[] = {"", "COLLGEN_CACHE_DISABLE=1", "COLLGEN_CACHE_MAX_BYTES=1"};
  for (size_t i = 0; i < sizeof envs / sizeof envs[0]; ++i) {
    char cmd[6000], *out = NULL, cache[4200];
    if (i == 0) snprintf(cache, sizeof cache, "/proc/collgen-nope");
    else snprintf(cache, sizeof cache, "%s/c%zu", dir, i);
    snprintf(cmd, sizeof cmd,
             "%s %s pregen --ops allreduce_sum --dtypes f32 --ngpus 2 --cache-dir '%s' -j 2",
             envs[i], COLLGEN_CLI_PATH, cache);
    cr_expect_eq(tu_run(cmd, &out), 1, "`%s` exit status; printed: %s", cmd, out);
    int compiled = -1, cached = -1, failed = -1;
    if (out && pregen_summary(out, &compiled, &cached, &failed))
      cr_expect_gt(failed, 0, "`%s` reported no failure: %s", cmd, out);
    else
      cr_expect(out && strstr(out, "collgen pregen:") && strstr(out, "not usable"),
                "`%s` printed: %s", cmd, out);
    free(out);
  }
  /* the evicting cap: three of the four kernels are gone, and pregen says so */
  char cmd[6000], *out = NULL;
  snprintf(cmd, sizeof cmd,
           "COLLGEN_CACHE_MAX_BYTES=1 %s pregen --ops allreduce_sum --dtypes f32 --ngpus 2 "
           "--cache-dir '%s/cap' -j 1", COLLGEN_CLI_PATH, dir);
  cr_expect_eq(tu_run(cmd, &out), 1, "%s", out);
  cr_expect(out && strstr(out, "3 failed"), "%s", out);
  cr_expect(out && strstr(out, "not on disk"), "%s", out);
  free(out);
}

/* Empty lists, empty items and invalid items are usage errors that echo
** the value; nothing is silently dropped. */
Test(cli, pregen_rejects_empty_and_invalid_lists) {
  static const struct { const char *args, *echo; } cases[] = {
      {"--dtypes bf16,,f99", "'bf16,,f99'"}, {"--dtypes bf16,,f32", "'bf16,,f32'"},
      {"--dtypes ''", "--dtypes"},           {"--dtypes ,", "','"},
      {"--dtypes f32,f99", "'f99'"},         {"--ngpus 2,x", "'x'"},
      {"--ngpus 2,", "'2,'"},                {"--ngpus ,2", "',2'"},
      {"--ngpus ''", "--ngpus"},             {"--ngpus 9", "'9'"},
      {"--ops ''", "--ops"},                 {"--ops allreduce_sum,foo", "'foo'"},
      {"--ops foo", "'foo'"},                {"--cols 1024,,2048", "'1024,,2048'"},
      {"--cols 0", "'0'"},                   {"--arch sm_90,", "'sm_90,'"},
      {"--arch ''", "--arch"},               {"--ngpus 1", "no kernel"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char args[6000], *out = NULL;
    snprintf(args, sizeof args, "pregen --ops allreduce_sum --dtypes f32 --ngpus 2 %s "
             "--cache-dir '%s/x' -j 1", cases[i].args, dir);
    cr_expect_eq(cg(args, &out), 2, "`collgen %s` exit status; printed: %s", args, out);
    cr_expect(out && strstr(out, cases[i].echo), "`collgen %s` does not echo %s: %s", args,
              cases[i].echo, out);
    cr_expect(out && !strstr(out, "compiled,"), "`collgen %s` ran: %s", args, out);
    free(out);
  }
}

/* Every early return of pregen frees what it allocated (valgrind, when
** installed; the ASan build checks the same through the whole suite). */
Test(cli, pregen_error_paths_do_not_leak) {
  if (tu_run("command -v valgrind >/dev/null", NULL) != 0) cr_skip_test("no valgrind");
  static const char *const cases[] = {
      "--ops foo", "--ops allreduce_sum,foo", "--dtypes f32,x", "--dtypes bf16,,f32",
      "--ngpus 2,x", "--cols x", "--arch sm_1", "--arch sm_90,sm_1", "-j 0", "--ops",
      "--ops ''", "--frob 1", "--help", "--fp8 none,e5m2", "--fp8 none,", "-j x",
      "--cache-dir ''"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char cmd[6000], *out = NULL;
    snprintf(cmd, sizeof cmd,
             "valgrind -q --leak-check=full --show-leak-kinds=all --errors-for-leak-kinds=all "
             "--error-exitcode=99 %s pregen --ops allgather_rmsnorm --dtypes f32 --ngpus 2 "
             "--cols 1024 %s --cache-dir '%s/v' -j 1", COLLGEN_CLI_PATH, cases[i], dir);
    int rc = tu_run(cmd, &out);
    cr_expect(rc != 99, "`pregen %s` leaks or misbehaves under valgrind:\n%s", cases[i], out);
    free(out);
  }
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

/* What the demo says of its kernels: one per op of the catalog, and the
** FP8 output of the fused residual op. */
static const char *demo_kernels(int all) {
  static char text[2][64];
  const int n = collgen__op_count() + 1;
  snprintf(text[all], sizeof text[all], "%d of %d demo kernels are in the cache", all ? n : 0, n);
  return text[all];
}
#define all_demo_kernels demo_kernels(1)
#define no_demo_kernels demo_kernels(0)

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
  cr_expect(strstr(out, "collgen_all_gather_b2_g2"), "%s", out);
  /* the demo's 129 x 8192 bf16 gathered rows exceed the LL range; its 8
  ** decode rows of the fused residual op are LL */
  cr_expect(strstr(out, "collgen_allreduce_residual_rmsnorm_bf16_g2_c8192_v8_ll_u2 "), "%s", out);
  cr_expect(strstr(out, "collgen_allreduce_residual_rmsnorm_bf16_g2_c8192_v8_ll_u2_e4m3_dynamic"),
            "%s", out);
  cr_expect(strstr(out, "collgen_broadcast_b2_g2_v8"), "%s", out);
  cr_expect(strstr(out, "collgen_reduce_scatter_rmsnorm_bf16_g2_c8192_v8_u2"), "%s", out);
  cr_expect(strstr(out, "collgen_scatter_b2_g2"), "%s", out);
  cr_expect(strstr(out, all_demo_kernels), "%s", out);
  free(out);
  /* one process per rank: the GPUs are counted in a child, which finds none */
  snprintf(cmd, sizeof cmd, "COLLGEN_CACHE_DIR='%s' %s demo --processes", dir, COLLGEN_CLI_PATH);
  cr_assert_eq(tu_run(cmd, &out), 0, "%s", out);
  cr_expect(strstr(out, "no GPU found"), "%s", out);
  cr_expect(strstr(out, all_demo_kernels), "%s", out);
  free(out);
}

/* Every op of the catalog has a demo hook entry (src/cli/demo_ops.c) with
** every hook: one case each, and the FP8 output of the fused residual op
** (the kernels demo_kernels counts). */
Test(cli, every_catalog_op_has_a_demo_hook) {
  char why[256] = "";
  cr_assert_eq(demo_ops_check(why, sizeof why), 0, "%s", why);
  int cases = 0;
  for (int i = 0; i < collgen__op_count(); ++i) {
    const collgen__op_desc *op = collgen__op_at(i);
    const demo_op *e = demo_op_of(op->op);
    cr_assert(e != NULL, "op %s has no demo hook entry", op->name);
    cr_expect_geq(demo_case_count(e), 1, "op %s has no demo case", op->name);
    cases += demo_case_count(e);
  }
  cr_expect_eq(cases, collgen__op_count() + 1, "%d demo cases", cases);
  cr_expect_null(demo_op_of((collgen_op_t)-1));
}

/* The demo without a GPU says what really happened to each kernel: without
** NVRTC (and an empty cache) nothing was built, and a memory-only cache
** keeps nothing. */
Test(cli, demo_without_gpu_reports_what_happened) {
  char *out = NULL, cmd[4400];
  cr_assert_eq(cg("info", &out), 0, "%s", out);
  int no_gpu = strstr(out, "GPUs     none") != NULL;
  free(out);
  if (!no_gpu) cr_skip_test("a GPU is present; test_gpu covers the demo");
  snprintf(cmd, sizeof cmd, "COLLGEN_CACHE_DIR='%s' COLLGEN_NVRTC_LIBRARY=/nonexistent %s demo",
           dir, COLLGEN_CLI_PATH);
  cr_expect_eq(tu_run(cmd, &out), 1, "%s", out);
  cr_expect(!strstr(out, "demo: kernels are in the cache"), "%s", out);
  cr_expect(strstr(out, no_demo_kernels), "%s", out);
  cr_expect(strstr(out, "cannot load NVRTC"), "%s", out);
  free(out);
  /* compiled fine, but nothing kept: exit 0, and it says so */
  snprintf(cmd, sizeof cmd, "COLLGEN_CACHE_DISABLE=1 %s demo", COLLGEN_CLI_PATH);
  cr_expect_eq(tu_run(cmd, &out), 0, "%s", out);
  cr_expect(!strstr(out, "demo: kernels are in the cache"), "%s", out);
  cr_expect(strstr(out, no_demo_kernels), "%s", out);
  cr_expect(strstr(out, "memory only"), "%s", out);
  free(out);
}

/* ---- Template and planner errors --------------------------------------- */

/* Makes a template tree at dir/tree (copies of gen/ and templates/) with
** `line` inserted after the first line of `file` that starts with `after`
** (NULL: before the first line). Writes the tree's path into tree[n]. */
static void broken_tree(const char *file, const char *after, const char *line, char *tree,
                        size_t n) {
  char cmd[13000], path[4400];
  snprintf(tree, n, "%s/tree", dir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s' && cp -r '%s/gen' '%s/templates' '%s/'",
           tree, tree, COLLGEN_SOURCE_DIR, COLLGEN_SOURCE_DIR, tree);
  cr_assert_eq(tu_run(cmd, NULL), 0, "%s", cmd);
  if (!file) return;
  snprintf(path, sizeof path, "%s/%s", tree, file);
  size_t size = 0;
  char *text = tu_read_file(path, &size);
  cr_assert(text, "cannot read %s", path);
  size_t at = 0;
  if (after) {
    const char *p = text;
    while (p && strncmp(p, after, strlen(after)) != 0)
      p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL;
    cr_assert(p, "%s has no line starting with %s", path, after);
    at = (size_t)(strchr(p, '\n') + 1 - text);
  }
  size_t len = strlen(line);
  char *out = malloc(size + len + 2);
  cr_assert(out);
  memcpy(out, text, at);
  memcpy(out + at, line, len);
  out[at + len] = '\n';
  memcpy(out + at + len + 1, text + at, size - at);
  cr_assert_eq(tu_write_file(path, out, size + len + 1), 0);
  free(out);
  free(text);
}

/* A Lua error in the planner of a COLLGEN_TEMPLATE_DIR tree, the sandbox's
** refusals included, is a template error like one in a template: exit 1
** with the COLLGEN_ERR_TEMPLATE label, no usage hint. Once it exited 2
** without the label, as if the spec were bad. */
Test(cli, template_and_planner_errors_exit_1_with_the_label) {
  static const struct { const char *file, *after, *line; } breaks[] = {
      {"gen/planner.lua", "function M.plan(s)", "local nothing = nil; nothing.field = 1"},
      {"gen/planner.lua", "function M.plan(s)", "read_source('/etc/passwd')"},
      {"gen/planner.lua", "function M.plan(s)", "setmetatable({}, {__gc = function() end})"},
      {"templates/allreduce.cu.tpl", NULL, "// ${no_such_variable}"},
  };
  static const char *const cmds[] = {
      "gen allreduce_sum", "compile allreduce_sum --cache-dir '%s/c'",
      "pregen --ops allreduce_sum --dtypes f32 --ngpus 2 --cache-dir '%s/c' -j 1"};
  for (size_t b = 0; b < sizeof breaks / sizeof breaks[0]; ++b) {
    char tree[4200];
    broken_tree(breaks[b].file, breaks[b].after, breaks[b].line, tree, sizeof tree);
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; ++c) {
      char args[4400], cmd[13000], *out = NULL;
      snprintf(args, sizeof args, cmds[c], dir);
      snprintf(cmd, sizeof cmd, "COLLGEN_TEMPLATE_DIR='%s' %s %s", tree, COLLGEN_CLI_PATH, args);
      cr_expect_eq(tu_run(cmd, &out), 1, "%s + `%s`: exit status; printed: %s", breaks[b].line,
                   args, out);
      cr_expect(out && strstr(out, "COLLGEN_ERR_TEMPLATE"), "%s + `%s`: no label: %s",
                breaks[b].line, args, out);
      cr_expect(out && !strstr(out, "--help"), "%s + `%s`: a usage hint: %s", breaks[b].line,
                args, out);
      free(out);
    }
  }
  /* the same tree unbroken: a spec the planner refuses is still a usage error */
  char tree[4200], cmd[9000], *out = NULL;
  broken_tree(NULL, NULL, NULL, tree, sizeof tree);
  snprintf(cmd, sizeof cmd, "COLLGEN_TEMPLATE_DIR='%s' %s gen allreduce_sum --ngpus 2 "
           "--group-size 3", tree, COLLGEN_CLI_PATH);
  cr_expect_eq(tu_run(cmd, &out), 2, "%s", out);
  cr_expect(out && strstr(out, "group_size 3 does not divide ngpus 2"), "%s", out);
  free(out);
}

/* ---- --cache-dir '' ----------------------------------------------------- */

/* The text of a usage error between "collgen CMD: " and "; try": the same
** for every command that says the same thing. */
static void usage_text(const char *out, char *buf, size_t n) {
  const char *p = out ? strstr(out, ": ") : NULL;
  const char *end = p ? strstr(p, "; try '") : NULL;
  snprintf(buf, n, "%.*s", p && end ? (int)(end - p - 2) : 0, p ? p + 2 : "");
}

/* An empty --cache-dir is refused by every command that takes one, with one
** message, before any cache is opened: `compile --cache-dir ''` once wrote
** to the default cache. */
Test(cli, empty_cache_dir_is_refused_everywhere) {
  static const char *const cmds[] = {
      "compile allreduce_sum --cache-dir ''",
      "pregen --ops allreduce_sum --dtypes f32 --ngpus 2 --cache-dir '' -j 1",
      "cache ls --cache-dir ''", "cache clear --cache-dir ''"};
  char first[512] = "";
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i) {
    char home[4200], cmd[13000], *out = NULL;
    snprintf(home, sizeof home, "%s/home%zu", dir, i);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && HOME='%s' XDG_CACHE_HOME= COLLGEN_CACHE_DIR= "
             "%s %s", home, home, COLLGEN_CLI_PATH, cmds[i]);
    cr_expect_eq(tu_run(cmd, &out), 2, "`%s`: exit status; printed: %s", cmds[i], out);
    cr_expect(out && strstr(out, "--cache-dir") && strstr(out, "''") && strstr(out, "empty"),
              "`%s` printed: %s", cmds[i], out);
    snprintf(cmd, sizeof cmd, "%s/.cache", home);
    cr_expect_neq(access(cmd, F_OK), 0, "`%s` created the default cache %s", cmds[i], cmd);
    /* cmd_cache.c words it itself; compile and pregen share the parser's */
    char text[512];
    usage_text(out, text, sizeof text);
    if (i == 0) snprintf(first, sizeof first, "%s", text);
    else if (i == 1) cr_expect_str_eq(text, first, "`%s` words it differently", cmds[i]);
    free(out);
  }
  /* a path no directory can have is refused too, not turned into a warning */
  char args[6000], *out = NULL;
  snprintf(args, sizeof args, "compile allreduce_sum --cache-dir /%04100d", 0);
  cr_expect_eq(cg(args, &out), 2, "%.300s", out);
  cr_expect(out && strstr(out, "--cache-dir is too long"), "%.300s", out);
  free(out);
}

/* ---- One error style ----------------------------------------------------- */

/* Usage errors read "collgen CMD: WHAT: 'VALUE' (ACCEPTED); try 'collgen
** CMD --help'", one line on stderr, for every command. */
Test(cli, usage_errors_share_one_style) {
  static const struct { const char *args, *cmd, *value; } cases[] = {
      {"gen no_such_op", "gen", "no_such_op"},
      {"gen allreduce_sum --bogus", "gen", "--bogus"},
      {"compile allreduce_sum --frob", "compile", "--frob"},
      {"gen allreduce_sum --dtype f128", "gen", "f128"},
      {"gen allreduce_sum --ngpus 9", "gen", "9"},
      {"gen allreduce_sum --ngpus 2x", "gen", "2x"},
      {"gen allreduce_sum --arch sm_1", "gen", "sm_1"},
      {"gen allreduce_residual_rmsnorm --fp8 e5m2", "gen", "e5m2"},
      {"pregen -j 0", "pregen", "0"},
      {"pregen -j x", "pregen", "x"},
      {"pregen --frob 1", "pregen", "--frob"},
      {"pregen stray", "pregen", "stray"},
      {"pregen --dtypes bf16,,f32", "pregen", "bf16,,f32"},
      {"pregen --dtypes ''", "pregen", ""},
      {"pregen --dtypes f32,f99", "pregen", "f99"},
      {"pregen --ops foo", "pregen", "foo"},
      {"pregen --ngpus 2,9", "pregen", "9"},
      {"pregen --cols 0", "pregen", "0"},
      {"pregen --arch sm_90,sm_1", "pregen", "sm_1"},
      {"pregen --fp8 e5m2", "pregen", "e5m2"},
      {"demo --processes 9", "demo", "9"},
      {"demo extra", "demo", "extra"},
      {"info extra", "info", "extra"},
      {"help gen extra", "help", "extra"},
      {"frobnicate", NULL, "frobnicate"},
      {"help frobnicate", NULL, "frobnicate"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *out = NULL, head[64], tail[128], value[128];
    cr_expect_eq(cg_stderr(cases[i].args, &out), 2, "`collgen %s`: exit status; printed: %s",
                 cases[i].args, out);
    snprintf(head, sizeof head, "collgen%s%s: ", cases[i].cmd ? " " : "",
             cases[i].cmd ? cases[i].cmd : "");
    snprintf(tail, sizeof tail, "); try 'collgen%s%s --help'\n", cases[i].cmd ? " " : "",
             cases[i].cmd ? cases[i].cmd : "");
    snprintf(value, sizeof value, ": '%s' (", cases[i].value);
    size_t len = out ? strlen(out) : 0;
    cr_expect(out && strncmp(out, head, strlen(head)) == 0 && strstr(out, value) &&
                  len > strlen(tail) && strcmp(out + len - strlen(tail), tail) == 0 &&
                  strchr(out, '\n') == out + len - 1,
              "`collgen %s` does not read \"%sWHAT%sACCEPTED%s\": %s", cases[i].args, head,
              value, tail, out);
    free(out);
  }
}

/* What is wrong is said right, with the accepted range or values: -j 0 is
** an integer, out of range; an unknown arch lists the catalog's archs. */
Test(cli, usage_errors_say_the_range_and_the_accepted_values) {
  char archs[512] = "";
  for (int i = 0; i < collgen__arch_count(); ++i)
    snprintf(archs + strlen(archs), sizeof archs - strlen(archs), "%s%s", i ? ", " : "",
             collgen__arch_at(i)->name);
  char arch_gen[1024], arch_pregen[1024];
  snprintf(arch_gen, sizeof arch_gen, "collgen gen: unknown arch: 'sm_1' (%s); try 'collgen gen "
           "--help'\n", archs);
  snprintf(arch_pregen, sizeof arch_pregen, "collgen pregen: unknown arch: 'sm_1' (%s); try "
           "'collgen pregen --help'\n", archs);
  const struct { const char *args, *want; } cases[] = {
      {"pregen -j 0", "collgen pregen: -j is out of range: '0' (-j must be 1..256); try "
                      "'collgen pregen --help'\n"},
      {"pregen -j 2x", "collgen pregen: -j is not an integer: '2x' (-j must be 1..256); try "
                       "'collgen pregen --help'\n"},
      {"gen allreduce_sum --ngpus 9", "collgen gen: --ngpus is out of range: '9' (--ngpus must "
                                      "be 1..8); try 'collgen gen --help'\n"},
      {"demo --processes 1", "collgen demo: --processes is out of range: '1' (--processes must "
                             "be 2..8); try 'collgen demo --help'\n"},
      {"gen allreduce_sum --arch sm_1", arch_gen},
      {"pregen --ops allreduce_sum --arch sm_90,sm_1", arch_pregen},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *out = NULL;
    cr_expect_eq(cg_stderr(cases[i].args, &out), 2, "`collgen %s`: %s", cases[i].args, out);
    cr_expect_str_eq(out ? out : "", cases[i].want, "`collgen %s`", cases[i].args);
    free(out);
  }
}

/* ---- --tensor-rank and the deprecated --rank ------------------------------ */

/* --tensor-rank sets the tensor rank; --rank still does, with one warning
** on stderr; the help names --tensor-rank. */
Test(cli, tensor_rank_flag_and_the_deprecated_rank_alias) {
  static const char warning[] = "collgen: warning: --rank is deprecated; use --tensor-rank\n";
  char args[256], *out = NULL;
  /* allgather_rmsnorm needs tensor rank 2..8: the value reaches the planner */
  static const char *const flags[] = {"--tensor-rank", "--rank"};
  for (size_t i = 0; i < 2; ++i) {
    snprintf(args, sizeof args, "gen allgather_rmsnorm %s 1", flags[i]);
    cr_expect_eq(cg_stderr(args, &out), 2, "%s", out);
    cr_expect(out && strstr(out, "allgather_rmsnorm needs tensor rank 2..8"), "%s: %s", flags[i],
              out);
    cr_expect(out && (strstr(out, warning) != NULL) == (i == 1), "%s: %s", flags[i], out);
    free(out);
    snprintf(args, sizeof args, "gen allgather_rmsnorm %s 3 --no-line-directives", flags[i]);
    cr_expect_eq(cg_stderr(args, &out), 0, "%s", out);
    cr_expect_str_eq(out ? out : "", i == 1 ? warning : "", "%s: stderr", flags[i]);
    free(out);
  }
  /* one warning however often --rank is given */
  cr_expect_eq(cg_stderr("gen allgather_rmsnorm --rank 3 --rank 2 --no-line-directives",
                         &out), 0, "%s", out);
  cr_expect_str_eq(out ? out : "", warning);
  free(out);
  cr_expect_eq(cg("gen allreduce_sum --tensor-rank 9", &out), 2, "%s", out);
  cr_expect(out && strstr(out, "--tensor-rank is out of range: '9'"), "%s", out);
  free(out);
  cr_expect_eq(cg("gen --help", &out), 0, "%s", out);
  cr_expect(out && strstr(out, "--tensor-rank R"), "%s", out);
  free(out);
}

/* Library paths from the environment reach messages escaped (dlerror()
** echoes them): an escape code or a newline in $COLLGEN_CUDA_LIBRARY or
** $COLLGEN_NVRTC_LIBRARY neither drives the terminal nor splits a line. */
Test(cli, library_paths_from_the_environment_are_escaped) {
  char *out = NULL;
  cr_expect_eq(tu_run("COLLGEN_CUDA_LIBRARY=\"$(printf '/none\\033[31mX\\nY')\" " COLLGEN_CLI_PATH
                      " info", &out), 0, "%s", out);
  cr_expect(strstr(out, "/none\\x1b[31mX\\x0aY: cannot open"), "%s", out);
  cr_expect(!strchr(out, '\033'), "a raw escape code reached the output: %s", out);
  free(out);
  cr_expect_eq(tu_run("COLLGEN_CACHE_DISABLE=1 COLLGEN_NVRTC_LIBRARY=\"$(printf '/no\\033nv')\" "
                      COLLGEN_CLI_PATH " compile allreduce_sum", &out), 1, "%s", out);
  cr_expect(strstr(out, "/no\\x1bnv: cannot open"), "%s", out);
  cr_expect(!strchr(out, '\033'), "a raw escape code reached the output: %s", out);
  free(out);
}
