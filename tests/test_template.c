/*
** test_template.c -- the template engine: deterministic output across
** fresh Lua states, #line directives, and errors that name the template
** file and line (Lua syntax, Lua runtime, CUDA syntax), plus the sandbox.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "collgen.h"
#include "lua_host.h"
#include "test_util.h"

static char tree[4096];

/* Copies gen/ and templates/ into a temp tree and points
** COLLGEN_TEMPLATE_DIR at it. */
static void copy_tree(void) {
  char cmd[9000];
  tu_make_temp_dir(tree, sizeof tree);
  snprintf(cmd, sizeof cmd, "cp -r '%s/gen' '%s/templates' '%s/'", COLLGEN_SOURCE_DIR,
           COLLGEN_SOURCE_DIR, tree);
  cr_assert_eq(system(cmd), 0);
  setenv("COLLGEN_TEMPLATE_DIR", tree, 1);
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
}

/* Inserts `line` into <tree>/<rel>: before line `at`, or (at == 0) after
** the first line that starts with `after`. */
static void tree_insert(const char *rel, int at, const char *after, const char *line) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", tree, rel);
  size_t size;
  char *text = tu_read_file(path, &size);
  cr_assert(text, "cannot read %s", path);
  char *cut = NULL; /* the new line goes before this character */
  int lineno = 1;
  for (char *p = text; *p && !cut; ++p) {
    int bol = p == text || p[-1] == '\n';
    if (bol && at && lineno == at) cut = p;
    if (bol && !at && strncmp(p, after, strlen(after)) == 0) {
      char *eol = strchr(p, '\n');
      cut = eol ? eol + 1 : p + strlen(p);
    }
    if (*p == '\n') ++lineno;
  }
  cr_assert(cut, "%s: no place to insert", rel);
  FILE *fp = fopen(path, "w");
  cr_assert(fp);
  fwrite(text, 1, (size_t)(cut - text), fp);
  fprintf(fp, "%s\n", line);
  fputs(cut, fp);
  fclose(fp);
  free(text);
}

/* A template tree with `line` inserted before line `at` of templates/<file>. */
static void broken_tree(const char *file, int at, const char *line) {
  char rel[512];
  copy_tree();
  snprintf(rel, sizeof rel, "templates/%s", file);
  tree_insert(rel, at, NULL, line);
}

/* A template tree with `line` inserted as the first statement of
** gen/main.lua's M.render. */
static void broken_main(const char *line) {
  copy_tree();
  tree_insert("gen/main.lua", 0, "function M.render(", line);
}

/* Caps the address space of this test process (Criterion forks one per
** test) at 2 GiB, so that a template without a memory budget fails with
** "not enough memory" instead of taking the machine. Not under ASan, which
** reserves terabytes of shadow memory. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#endif
static void cap_address_space(void) {
#ifndef TEST_UNDER_ASAN
  struct rlimit r = {(rlim_t)2 << 30, (rlim_t)2 << 30};
  cr_assert_eq(setrlimit(RLIMIT_AS, &r), 0);
#endif
}

static int render(const collgen_shape_t *s, char **src, char *err, size_t n) {
  collgen_generator_t *g;
  int rc = collgen_generator_create(&g, NULL);
  if (rc != COLLGEN_OK) {
    snprintf(err, n, "%s", collgen_last_error());
    return rc;
  }
  rc = collgen_generate_source(g, s, 1, src);
  snprintf(err, n, "%s", collgen_generator_last_error(g));
  collgen_generator_destroy(g);
  return rc;
}

Test(template, deterministic_across_fresh_states) {
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
  for (int op = 0; op < 2; ++op) {
    for (int dt = 0; dt < 3; ++dt) {
      collgen_shape_t s;
      collgen_shape_init(&s, (collgen_op_t)op);
      s.dtype = (collgen_dtype_t)dt;
      s.ngpus = 8;
      s.cols = 5120;
      char *a = NULL, *b = NULL, err[4096];
      cr_assert_eq(render(&s, &a, err, sizeof err), COLLGEN_OK, "%s", err);
      cr_assert_eq(render(&s, &b, err, sizeof err), COLLGEN_OK, "%s", err);
      cr_expect_str_eq(a, b);
      cr_expect(strstr(a, "#line 1 \"templates/") == a, "starts with a #line directive");
      free(a);
      free(b);
    }
  }
}

Test(template, lua_syntax_error_names_file_and_line) {
  broken_tree("allreduce.cu.tpl", 12, "% for i = 1, do");
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  char *src = NULL, err[8192];
  cr_expect_eq(render(&s, &src, err, sizeof err), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(err, "templates/allreduce.cu.tpl:12:"), "message: %s", err);
  tu_remove_tree(tree);
}

Test(template, undefined_variable_names_file_and_line) {
  broken_tree("allgather_rmsnorm.cu.tpl", 20, "int x = ${no_such_thing};");
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLGATHER_RMSNORM);
  char *src = NULL, err[8192];
  cr_expect_eq(render(&s, &src, err, sizeof err), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(err, "templates/allgather_rmsnorm.cu.tpl:20: undefined template variable "
                        "'no_such_thing'"), "message: %s", err);
  tu_remove_tree(tree);
}

Test(template, error_in_included_snippet_names_the_snippet) {
  broken_tree("signal.cuh.tpl", 30, "% local y = nil + 1");
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  char *src = NULL, err[8192];
  cr_expect_eq(render(&s, &src, err, sizeof err), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(err, "templates/signal.cuh.tpl:30:"), "message: %s", err);
  tu_remove_tree(tree);
}

Test(template, sandbox_has_no_os_or_io) {
  broken_tree("allreduce.cu.tpl", 12, "% os.execute('touch /tmp/collgen-pwned')");
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  char *src = NULL, err[8192];
  cr_expect_eq(render(&s, &src, err, sizeof err), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(err, "undefined template variable 'os'"), "message: %s", err);
  tu_remove_tree(tree);
}

Test(template, runaway_template_is_stopped) {
  broken_tree("allreduce.cu.tpl", 12, "% while true do end");
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  char *src = NULL, err[8192];
  cr_expect_eq(render(&s, &src, err, sizeof err), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(err, "templates/allreduce.cu.tpl:12: generator ran too long"), "message: %s",
            err);
  tu_remove_tree(tree);
}

Test(template, cuda_error_points_at_template_line) {
  broken_tree("allreduce.cu.tpl", 40, "this is not CUDA;");
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK);
  collgen_kernel_info_t info;
  cr_expect_eq(collgen_get_kernel(g, &s, &info), COLLGEN_ERR_COMPILE);
  const char *err = collgen_generator_last_error(g);
  cr_expect(strstr(err, "templates/allreduce.cu.tpl(40)"), "message: %s", err);
  cr_expect(strstr(err, "source: /"), "names the dumped source: %s", err);
  collgen_generator_destroy(g);
  tu_remove_tree(tree);
}

/* Extracts the "key:" line of `collgen compile` output. */
static void key_of(const char *out, char *key, size_t n) {
  const char *k = strstr(out, "key:");
  cr_assert(k, "no key in: %s", out);
  snprintf(key, n, "%.*s", (int)strcspn(k, "\n"), k);
}

Test(template, template_dir_overrides_sources_and_key) {
  broken_tree("allreduce.cu.tpl", 2, "// an extra comment line");
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  char *src = NULL, err[4096];
  cr_assert_eq(render(&s, &src, err, sizeof err), COLLGEN_OK, "%s", err);
  cr_expect(strstr(src, "// an extra comment line"), "the override tree is used");
  free(src);
  char cmd[9000], *with = NULL, *without = NULL, k1[256], k2[256];
  snprintf(cmd, sizeof cmd, "COLLGEN_TEMPLATE_DIR='%s' %s compile allreduce_sum", tree,
           COLLGEN_CLI_PATH);
  cr_assert_eq(tu_run(cmd, &with), 0, "%s", with);
  snprintf(cmd, sizeof cmd, "env -u COLLGEN_TEMPLATE_DIR %s compile allreduce_sum",
           COLLGEN_CLI_PATH);
  cr_assert_eq(tu_run(cmd, &without), 0, "%s", without);
  key_of(with, k1, sizeof k1);
  key_of(without, k2, sizeof k2);
  cr_expect_str_neq(k1, k2, "a changed template must change the cache key");
  free(with);
  free(without);
  tu_remove_tree(tree);
}

/* ---- The sandbox's bounds (issue 10) ----------------------------------- */

/* Renders allreduce of `dtype` with generator g: the status, the source in
** *src (caller frees) and the message in err. */
static int render_with(collgen_generator_t *g, collgen_dtype_t dtype, char **src, char *err,
                       size_t n) {
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  s.dtype = dtype;
  *src = NULL;
  int rc = collgen_generate_source(g, &s, 0, src);
  snprintf(err, n, "%s", collgen_generator_last_error(g));
  return rc;
}

/* Expects a render of allreduce to fail with COLLGEN_ERR_TEMPLATE and a
** message containing `want`, and the same generator to render the other
** dtypes afterwards (the state survives, or is recreated). */
static void expect_stopped(const char *want) {
  collgen_generator_t *g;
  char *src = NULL, err[8192];
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  cr_expect_eq(render_with(g, COLLGEN_DTYPE_BF16, &src, err, sizeof err), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(err, want), "want '%s' in: %.2000s", want, err);
  free(src);
  cr_expect_eq(render_with(g, COLLGEN_DTYPE_F16, &src, err, sizeof err), COLLGEN_OK, "%s", err);
  cr_expect(src && strstr(src, "__global__"), "the generator still renders");
  free(src);
  collgen_generator_destroy(g);
}

/* A gen-code line that runs only for bf16, so f16 renders cleanly after. */
#define FOR_BF16(code) "if spec.dtype == 'bf16' then " code " end"
#define TPL_BF16(code) "% if dtype == 'bf16' then " code " end"

Test(template, pcall_cannot_swallow_the_time_budget, .timeout = 60) {
  broken_main(FOR_BF16("while true do pcall(function() while true do end end) end"));
  expect_stopped("ran too long");
  tu_remove_tree(tree);
}

Test(template, xpcall_cannot_swallow_the_time_budget, .timeout = 60) {
  broken_main(FOR_BF16("while true do xpcall(function() while true do end end, "
                       "function(e) while true do end end) end"));
  expect_stopped("ran too long");
  tu_remove_tree(tree);
}

Test(template, string_rep_of_nothing_is_bounded, .timeout = 60) {
  broken_tree("allreduce.cu.tpl", 12, "// ${#string.rep('', 1 << 50)} ${#(''):rep(1 << 50, '')}");
  collgen_generator_t *g;
  char *src = NULL, err[8192];
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  cr_expect_eq(render_with(g, COLLGEN_DTYPE_BF16, &src, err, sizeof err), COLLGEN_OK, "%s", err);
  cr_expect(src && strstr(src, "// 0 0\n"), "renders the empty repetitions");
  free(src);
  collgen_generator_destroy(g);
  tu_remove_tree(tree);
}

Test(template, string_rep_beyond_the_string_cap_is_refused, .timeout = 60) {
  cap_address_space();
  broken_tree("allreduce.cu.tpl", 12, TPL_BF16("local s = ('x'):rep(1 << 31)"));
  expect_stopped("string.rep: a result of");
  tu_remove_tree(tree);
}

Test(template, pattern_backtracking_is_bounded, .timeout = 60) {
  broken_tree("allreduce.cu.tpl", 12,
              TPL_BF16("local s = string.find(('a'):rep(40), ('a-'):rep(20) .. 'b')"));
  expect_stopped("ran too long");
  tu_remove_tree(tree);
}

Test(template, gsub_backtracking_is_bounded, .timeout = 60) {
  broken_tree("allreduce.cu.tpl", 12,
              TPL_BF16("local s = (('a'):rep(40)):gsub(('.-'):rep(20) .. 'b', 'x')"));
  expect_stopped("ran too long");
  tu_remove_tree(tree);
}

Test(template, table_move_range_is_bounded, .timeout = 60) {
  broken_tree("allreduce.cu.tpl", 12, TPL_BF16("table.move({}, 1, 1 << 50, 2)"));
  expect_stopped("ran too long");
  tu_remove_tree(tree);
}

Test(template, memory_budget_stops_a_greedy_template, .timeout = 120) {
  cap_address_space();
  broken_tree("allreduce.cu.tpl", 12,
              TPL_BF16("local t = {} for i = 1, 1 << 30 do t[i] = ('x'):rep(4000) .. i end"));
  expect_stopped("memory budget");
  tu_remove_tree(tree);
}

Test(template, table_concat_is_bounded_by_the_memory_budget, .timeout = 120) {
  cap_address_space();
  broken_tree("allreduce.cu.tpl", 12,
              TPL_BF16("local t, x = {}, ('x'):rep(100000) for i = 1, 100000 do t[i] = x end "
                       "local s = table.concat(t)"));
  expect_stopped("memory budget");
  tu_remove_tree(tree);
}

Test(template, include_cannot_leave_the_template_tree) {
  copy_tree();
  char path[4200];
  snprintf(path, sizeof path, "%s/secret.txt", tree);
  cr_assert_eq(tu_write_file(path, "TOPSECRET\n", 10), 0);
  tree_insert("templates/allreduce.cu.tpl", 12, NULL, TPL_BF16("include('../secret.txt')"));
  expect_stopped("'templates/../secret.txt' is outside the template tree");
  tu_remove_tree(tree);
}

Test(template, include_outside_the_file_list_is_refused) {
  copy_tree();
  char path[4200];
  snprintf(path, sizeof path, "%s/templates/extra.cuh.tpl", tree);
  cr_assert_eq(tu_write_file(path, "// extra\n", 9), 0);
  tree_insert("templates/allreduce.cu.tpl", 12, NULL, TPL_BF16("include('extra.cuh.tpl')"));
  expect_stopped("no template named 'extra.cuh.tpl'");
  tu_remove_tree(tree);
}

Test(template, read_source_cannot_leave_the_template_tree) {
  copy_tree();
  char path[4200];
  snprintf(path, sizeof path, "%s/secret.txt", tree);
  cr_assert_eq(tu_write_file(path, "TOPSECRET\n", 10), 0);
  tree_insert("gen/main.lua", 0, "function M.render(",
              FOR_BF16("error('read: ' .. tostring(read_source('gen/../secret.txt')), 0)"));
  expect_stopped("outside the template tree");
  tu_remove_tree(tree);
}

Test(template, import_cannot_leave_the_template_tree) {
  copy_tree();
  char path[4200];
  snprintf(path, sizeof path, "%s/evil.lua", tree);
  cr_assert_eq(tu_write_file(path, "return 'EVIL'\n", 14), 0);
  tree_insert("gen/main.lua", 0, "function M.render(",
              FOR_BF16("error('import: ' .. tostring(import('../evil')), 0)"));
  expect_stopped("not a generator module name");
  tu_remove_tree(tree);
}

/* The bundle hash of a fresh state over the current tree. */
static void bundle_hash(uint8_t out[32]) {
  collgen__lua *L;
  char err[4096];
  cr_assert_eq(collgen__lua_create(&L, err, sizeof err), COLLGEN_OK, "%s", err);
  memcpy(out, collgen__lua_bundle_hash(L), 32);
  collgen__lua_destroy(L);
}

Test(template, editing_an_included_file_changes_the_key) {
  copy_tree();
  uint8_t before[32], after[32];
  bundle_hash(before);
  tree_insert("templates/signal.cuh.tpl", 2, NULL, "// edited");
  bundle_hash(after);
  cr_expect(memcmp(before, after, 32) != 0, "an included file is part of the key");
  tu_remove_tree(tree);
}

Test(template, files_are_read_once_when_the_generator_is_created) {
  copy_tree();
  collgen_generator_t *g;
  char *src = NULL, err[8192];
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  /* an edit after the key was computed must not reach the rendered source:
  ** it would be cached under the key of the unedited tree */
  tree_insert("templates/signal.cuh.tpl", 2, NULL, "// edited after create");
  cr_expect_eq(render_with(g, COLLGEN_DTYPE_BF16, &src, err, sizeof err), COLLGEN_OK, "%s", err);
  cr_expect(src && !strstr(src, "edited after create"), "served from the files the key covers");
  free(src);
  collgen_generator_destroy(g);
  tu_remove_tree(tree);
}

/* A render that changes shared tables must not change the next render. */
static void expect_isolated(void) {
  collgen_generator_t *g;
  char *src = NULL, err[8192];
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  (void)render_with(g, COLLGEN_DTYPE_BF16, &src, err, sizeof err);
  free(src);
  cr_assert_eq(render_with(g, COLLGEN_DTYPE_F16, &src, err, sizeof err), COLLGEN_OK, "%s", err);
  static const char want[] = "// probe A 3.14159265f collgen__kparams nil nil\n";
  const char *probe = src ? strstr(src, "// probe") : NULL;
  cr_expect(probe && strncmp(probe, want, sizeof want - 1) == 0, "%.200s", probe ? probe : err);
  free(src);
  collgen_generator_destroy(g);
}

#define PROBE \
  "// probe ${('a'):upper()} ${math.pi} ${abi.kparams.host} ${tostring(string.leak)} " \
  "${tostring(math.leak)}"

Test(template, a_template_cannot_change_the_next_render) {
  copy_tree();
  tree_insert("templates/allreduce.cu.tpl", 12, NULL, PROBE);
  tree_insert("templates/allreduce.cu.tpl", 12, NULL,
              TPL_BF16("string.leak = 1; math.leak = 1; string.upper = string.lower; "
                       "math.pi = 3; abi.kparams.host = 'x'"));
  expect_isolated();
  tu_remove_tree(tree);
}

Test(template, gen_code_cannot_change_the_next_render) {
  copy_tree();
  tree_insert("templates/allreduce.cu.tpl", 12, NULL, PROBE);
  tree_insert("gen/main.lua", 0, "function M.render(",
              FOR_BF16("rawset(string, 'leak', 1); rawset(math, 'leak', 1); "
                       "getmetatable('').__index = { upper = string.lower }; "
                       "rawset(catalog.abi.kparams, 'host', 'x'); math.pi = 3"));
  expect_isolated();
  tu_remove_tree(tree);
}

Test(template, a_missing_template_dir_is_an_error) {
  setenv("COLLGEN_TEMPLATE_DIR", "/nonexistent/collgen-templates", 1);
  collgen_generator_t *g = NULL;
  cr_expect_eq(collgen_generator_create(&g, NULL), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(collgen_last_error(), "COLLGEN_TEMPLATE_DIR"), "%s", collgen_last_error());
  collgen_generator_destroy(g);
}

Test(template, a_template_dir_without_gen_main_is_an_error) {
  tu_make_temp_dir(tree, sizeof tree);
  setenv("COLLGEN_TEMPLATE_DIR", tree, 1);
  collgen_generator_t *g = NULL;
  cr_expect_eq(collgen_generator_create(&g, NULL), COLLGEN_ERR_TEMPLATE);
  cr_expect(strstr(collgen_last_error(), "gen/main.lua"), "%s", collgen_last_error());
  collgen_generator_destroy(g);
  tu_remove_tree(tree);
}
