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

#include "catalog.h"
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
  for (int op = 0; op < collgen__op_count(); ++op) {
    for (int dt = 0; dt < 3; ++dt) {
      collgen_shape_t s;
      collgen_shape_init(&s, collgen__op_at(op)->op);
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

/* A Lua error inside the planner (here a broken COLLGEN_TEMPLATE_DIR tree)
** is the generator's fault, COLLGEN_ERR_TEMPLATE, for plans and variants
** alike; only the planner's own refusals ("planner: ...") are the caller's
** COLLGEN_ERR_INVALID_ARG. */
Test(template, planner_lua_error_is_a_template_error) {
  copy_tree();
  tree_insert("gen/planner.lua", 0, "function M.plan(", "  local broken = nil; broken.x = 1");
  tree_insert("gen/planner.lua", 0, "function M.variants(", "  error('variants broke')");
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  collgen_plan_t plan;
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_TEMPLATE, "%s",
               collgen_generator_last_error(g));
  cr_expect(strstr(collgen_generator_last_error(g), "gen/planner.lua:"), "message: %s",
            collgen_generator_last_error(g));
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = COLLGEN_OP_ALLREDUCE_SUM;
  cls.dtype = COLLGEN_DTYPE_BF16;
  cls.ngpus = 2;
  collgen_shape_t *shapes = NULL;
  int count = -1;
  cr_expect_eq(collgen_plan_variants(g, &cls, &shapes, &count), COLLGEN_ERR_TEMPLATE, "%s",
               collgen_generator_last_error(g));
  cr_expect(strstr(collgen_generator_last_error(g), "variants broke"), "message: %s",
            collgen_generator_last_error(g));
  collgen_generator_destroy(g);
  tu_remove_tree(tree);
}

/* A plan's grid is bounded by the signal slots (COLLGEN_MAX_BLOCKS) unless
** its group is one rank, which touches no slot (COLLGEN_LOCAL_MAX_GRID): a
** planner that plans more blocks for a real group is the generator's
** fault. Here the tree's planner asks for 100000 blocks for every plan. */
Test(template, grid_above_the_signal_slots_only_for_a_group_of_one) {
  copy_tree();
  tree_insert("gen/planner.lua", 0, "function M.plan(",
              "  do local spec = check_runtime_facts(PLANNERS[s.op](s)); spec.grid = 100000;"
              " check_common(s); return spec end");
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.ngpus = 2;
  s.rows = 100000;
  collgen_plan_t plan;
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_TEMPLATE, "a group of 2");
  cr_expect(strstr(collgen_generator_last_error(g), "grid"), "message: %s",
            collgen_generator_last_error(g));
  s.group_size = 1;
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_OK, "%s", collgen_generator_last_error(g));
  cr_expect_eq(plan.grid, 100000);
  collgen_generator_destroy(g);
  tu_remove_tree(tree);
}

/* Patches gen/main.lua so that variants() hands back, as its one variant,
** a copy of the last shape plan() was given (the C->Lua direction), with
** the field override BAD[class.ngpus] when there is one. */
static void echo_tree(void) {
  copy_tree();
  tree_insert("gen/main.lua", 0, "function M.variants(",
              "local plan0, last = M.plan, nil\n"
              "M.plan = function(s) last = s; return plan0(s) end\n"
              "local BAD = { {'tensor_rank', 9}, {'max_blocks', 257},\n"
              "  {'group_size', (1 << 32) + 4}, {'elems', -1}, {'aligned16', 1},\n"
              "  {'arch', 'sm_90_and_far_too_long'},\n"
              "  {'fp8', 'e5m2'}, {'cols', 1.5}, {'inplace', nil}, {'op', 7} }\n"
              "M.variants = function(c)\n"
              "  local s = {}\n"
              "  for k, v in pairs(last) do s[k] = v end\n"
              "  local b = BAD[c.ngpus]\n"
              "  if b then s[b[1]] = b[2] end\n"
              "  return { { shape = s } }\n"
              "end");
}

/* A generator on an echo_tree whose last plan() was of *s. */
static collgen_generator_t *echo_generator(const collgen_shape_t *s) {
  echo_tree();
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  collgen_plan_t plan;
  cr_assert_eq(collgen_plan(g, s, &plan), COLLGEN_OK, "%s", collgen_generator_last_error(g));
  return g;
}

/* The variants of an echo_tree generator for a class of `ngpus`. */
static int echo_variants(collgen_generator_t *g, int ngpus, collgen_shape_t **shapes,
                         int *count) {
  collgen_shape_class_t cls;
  memset(&cls, 0, sizeof cls);
  cls.op = COLLGEN_OP_ALLREDUCE_SUM;
  cls.dtype = COLLGEN_DTYPE_BF16;
  cls.ngpus = ngpus;
  return collgen_plan_variants(g, &cls, shapes, count);
}

/* A shape whose every field differs from collgen_shape_init's default. */
static collgen_shape_t odd_shape(void) {
  collgen_shape_t s, d;
  collgen_shape_init(&d, COLLGEN_OP_ALLREDUCE_SUM);
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_RESIDUAL_RMSNORM);
  s.dtype = COLLGEN_DTYPE_F16;
  s.ngpus = 8;
  s.group_size = 4;
  s.tensor_rank = 3;
  s.elems = ((int64_t)1 << 33) + 5; /* past 32 bits: a truncation shows */
  s.rows = 777;
  s.cols = 2056;
  s.aligned16 = 0;
  s.inplace = 1;
  s.fp8 = COLLGEN_FP8_DYNAMIC;
  s.max_blocks = 17;
  snprintf(s.arch, sizeof s.arch, "sm_89");
#define DIFFERS(type, name, bound, kind, lo, hi, dflt, doc) \
  cr_assert(memcmp(&s.name, &d.name, sizeof s.name) != 0,         \
            "odd_shape leaves " #name " at its default");
  COLLGEN_SHAPE_FIELDS(DIFFERS)
#undef DIFFERS
  return s;
}

/* Every field of collgen_shape_t (COLLGEN_SHAPE_FIELDS) crosses into the
** planner and back unchanged: a field the bridge drops, misreads or
** truncates fails here, and so does a new field odd_shape does not set. */
Test(template, shape_bridge_round_trips_every_field) {
  collgen_shape_t s = odd_shape();
  collgen_generator_t *g = echo_generator(&s);
  collgen_shape_t *shapes = NULL;
  int count = 0;
  cr_assert_eq(echo_variants(g, 0, &shapes, &count), COLLGEN_OK, "%s",
               collgen_generator_last_error(g));
  cr_assert_eq(count, 1);
#define SAME(type, name, bound, kind, lo, hi, dflt, doc) \
  cr_expect(memcmp(&shapes[0].name, &s.name, sizeof s.name) == 0, #name " changed on the way");
  COLLGEN_SHAPE_FIELDS(SAME)
#undef SAME
  cr_expect(memcmp(&shapes[0], &s, sizeof s) == 0, "the shapes differ in padding");
  free(shapes);
  /* group_size 0 crosses as ngpus; an empty arch as its default */
  s.group_size = 0;
  s.arch[0] = 0;
  collgen_plan_t plan;
  cr_assert_eq(collgen_plan(g, &s, &plan), COLLGEN_OK, "%s", collgen_generator_last_error(g));
  cr_assert_eq(echo_variants(g, 0, &shapes, &count), COLLGEN_OK, "%s",
               collgen_generator_last_error(g));
  cr_expect_eq(shapes[0].group_size, 8);
  cr_expect_str_eq(shapes[0].arch, "sm_90");
  free(shapes);
  /* an enum value the catalog lacks never reaches the planner */
  s.fp8 = (collgen_fp8_mode_t)7;
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(g), "unknown fp8 mode 7"), "%s",
            collgen_generator_last_error(g));
  collgen_generator_destroy(g);
  tu_remove_tree(tree);
}

/* A variant's shape field out of its range, of the wrong type, too long
** or missing is refused (COLLGEN_ERR_TEMPLATE: the generator's fault) with
** a message naming the field, never truncated or defaulted. */
Test(template, shape_bridge_refuses_a_bad_variant_field) {
  collgen_shape_t s = odd_shape();
  collgen_generator_t *g = echo_generator(&s);
  static const char *const field[] = {"tensor_rank", "max_blocks", "group_size", "elems",
                                      "aligned16", "arch", "fp8", "cols", "inplace", "op"};
  for (int i = 0; i < (int)(sizeof field / sizeof field[0]); ++i) {
    collgen_shape_t *shapes = (collgen_shape_t *)&s;
    int count = -1;
    cr_expect_eq(echo_variants(g, i + 1, &shapes, &count), COLLGEN_ERR_TEMPLATE, "%s",
                 field[i]);
    cr_expect(shapes == NULL && count == 0, "%s: a half-read list came back", field[i]);
    char want[64];
    snprintf(want, sizeof want, "shape field '%s'", field[i]);
    cr_expect(strstr(collgen_generator_last_error(g), want), "%s: %s", field[i],
              collgen_generator_last_error(g));
  }
  collgen_generator_destroy(g);
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
  setenv("TMPDIR", tree, 1); /* the source dump lands in the tree, removed below */
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

Test(template, table_functions_refuse_a_length_they_cannot_trust, .timeout = 60) {
  broken_main(FOR_BF16("table.insert(setmetatable({}, {__len = function() return 1 << 40 end}), "
                       "1, 0)"));
  expect_stopped("a table with a __len metamethod");
  tu_remove_tree(tree);
}

Test(template, memory_budget_stops_a_greedy_template, .timeout = 120) {
#ifdef __SANITIZE_ADDRESS__
  /* Under ASan on a loaded 2-core CI machine, filling 256 MiB takes longer
  ** than the 10 s wall-clock backstop, which then stops the render first.
  ** The plain build (same CI run) checks the memory budget. */
  cr_skip_test("the wall-clock backstop comes first under ASan");
#endif
  cap_address_space();
  broken_tree("allreduce.cu.tpl", 12,
              TPL_BF16("local t = {} for i = 1, 1 << 30 do t[i] = ('x'):rep((8 << 20) + i) end"));
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

/* ---- The sandbox's pattern functions ------------------------------------ */

/* Renders `text` with the variables of an allreduce spec in state L. */
static int render_text(collgen__lua *L, const char *text, char **out, char *err, size_t n) {
  collgen_shape_t s;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  return collgen__lua_render_text(L, &s, text, strlen(text), 0, out, err, n);
}

/* Expressions and what Lua 5.4's own string library returns for them (all
** results, comma-separated): the sandbox implements find, match, gmatch
** and gsub itself, with a step count, and must agree. */
static const struct {
  const char *expr, *want;
} pattern_cases[] = {
    {"(\"hello world\"):find(\"o w\")",
     "5,7"},
    {"(\"hello world\"):find(\"o\", 6)",
     "8,8"},
    {"(\"hello world\"):find(\"l+\")",
     "3,4"},
    {"(\"hello world\"):find(\"(l+)(o)\")",
     "3,5,ll,o"},
    {"(\"hello\"):find(\"\", 10)",
     "nil"},
    {"(\"hello\"):find(\"\", 6)",
     "6,5"},
    {"(\"hello\"):find(\"l\", -2)",
     "4,4"},
    {"(\"a.b\"):find(\".\", 1, true)",
     "2,2"},
    {"(\"a+b\"):find(\"+\", 1, true)",
     "2,2"},
    {"(\"hello\"):match(\"^(h)(.-)()o$\")",
     "h,ell,5"},
    {"(\"  key = value  \"):match(\"^%s*(%w+)%s*=%s*(%w+)%s*$\")",
     "key,value"},
    {"(\"THE (quick) fox\"):find(\"%f[%a]%a+\", 5)",
     "6,10"},
    {"(\"x(a(b)c)y\"):match(\"%b()\")",
     "(a(b)c)"},
    {"(\"abcabc\"):match(\"(a)(b)c%1%2\")",
     "a,b"},
    {"(\"[x]\"):match(\"[]]\")",
     "]"},
    {"(\"a-b\"):match(\"[%a-]+\")",
     "a-b"},
    {"(\"a^b\"):match(\"[%^b]+\")",
     "^b"},
    {"(\"AbC9_\"):match(\"%u%l%u%d%p\")",
     "AbC9_"},
    {"(\"\\t x\"):match(\"%S\")",
     "x"},
    {"(\"0xFF\"):match(\"%x+$\")",
     "FF"},
    {"(\"a\\0b\"):find(\"%z\")",
     "2,2"},
    {"(\"aaa\"):match(\"a-b\")",
     "nil"},
    {"(\"aaab\"):match(\"a-b\")",
     "aaab"},
    {"(\"aaab\"):match(\"a*\")",
     "aaa"},
    {"(\"aaab\"):match(\"a+?\")",
     "nil"},
    {"(\"b\"):match(\"a?b\")",
     "b"},
    {"(\"x = 1, y = 2\"):gsub(\"(%w+) = (%w+)\", \"%2 = %1\")",
     "1 = x, 2 = y,2"},
    {"(\"hello\"):gsub(\"\", \"-\")",
     "-h-e-l-l-o-,6"},
    {"(\"hello\"):gsub(\"l\", \"L\", 1)",
     "heLlo,1"},
    {"(\"hello\"):gsub(\"^h\", \"H\")",
     "Hello,1"},
    {"(\"abc\"):gsub(\"%w\", \"%0%0\")",
     "aabbcc,3"},
    {"(\"abc\"):gsub(\"%w\", \"%%\")",
     "%%%,3"},
    {"(\"abc\"):gsub(\"(b)\", function(c) return c:upper() end)",
     "aBc,1"},
    {"(\"abc\"):gsub(\"%w\", {a = \"1\", b = false})",
     "1bc,3"},
    {"(\"abc\"):gsub(\"()\", \"%1\")",
     "1a2b3c4,4"},
    {"(\"abc\"):gsub(\"b*\", \"-\")",
     "-a-c-,3"},
    {"(\"one two  three\"):gsub(\"%s+\", \"_\")",
     "one_two_three,2"},
    {"(\"$x and $y\"):gsub(\"%$(%w+)\", {x = \"X\", y = 7})",
     "X and 7,2"},
    {"table.concat((function() local t = {} for k, v in (\"a=1, b=2\"):gmatch(\"(%w+)=(%w+)\") do t[#t + 1] = k .. v end return t end)(), \";\")",
     "a1;b2"},
    {"table.concat((function() local t = {} for w in (\"one two\"):gmatch(\"%a*\") do t[#t + 1] = \"<\" .. w .. \">\" end return t end)(), \"\")",
     "<one><two>"},
    {"table.concat((function() local t = {} for p in (\"abc\"):gmatch(\"()\") do t[#t + 1] = p end return t end)(), \",\")",
     "1,2,3,4"},
    {"table.concat((function() local t = {} for w in (\"abcabc\"):gmatch(\"b\", 3) do t[#t + 1] = w end return t end)(), \",\")",
     "b"},
    {"(\"f(a, (b)) g\"):gsub(\"%b()\", \"[]\")",
     "f[] g,1"},
    {"(\"THE (quick) fox\"):gsub(\"%f[%w]%w+\", \"W\")",
     "W (W) W,3"},
    {"(\"hello.world\"):find(\".\", 1)",
     "1,1"},
    {"(\"x$\"):find(\"$\")",
     "3,2"},
    {"(\"x$y\"):find(\"x$y\")",
     "1,3"},
    {"(\"a\\nb\\r\\nc\"):gsub(\"(.-)\\r?\\n\", \"[%1]\")",
     "[a][b]c,2"},
    {"(\"%d\"):find(\"%%d\")",
     "1,2"},
    {"string.rep(\"ab\", 3, \", \")",
     "ab, ab, ab"},
    {"#string.rep(\"\", 1 << 50)", "0"},
};

Test(template, pattern_functions_match_lua) {
  unsetenv("COLLGEN_TEMPLATE_DIR");
  collgen__lua *L;
  char err[8192], *out = NULL;
  cr_assert_eq(collgen__lua_create(&L, err, sizeof err), COLLGEN_OK, "%s", err);
  size_t ncases = sizeof pattern_cases / sizeof pattern_cases[0], cap = 4096, len = 0;
  char *text = malloc(cap);
  len += (size_t)snprintf(text, cap, "%% local function show(...) local t = table.pack(...) "
                          "local r = {} for i = 1, t.n do r[i] = tostring(t[i]) end "
                          "return table.concat(r, ',') end\n");
  for (size_t i = 0; i < ncases; ++i) {
    size_t need = strlen(pattern_cases[i].expr) + 16;
    if (len + need >= cap) text = realloc(text, cap *= 2);
    len += (size_t)snprintf(text + len, cap - len, "${show(%s)}\n", pattern_cases[i].expr);
  }
  cr_assert_eq(render_text(L, text, &out, err, sizeof err), COLLGEN_OK, "%s", err);
  const char *line = out;
  for (size_t i = 0; i < ncases && line; ++i) {
    size_t l = strcspn(line, "\n");
    cr_expect(l == strlen(pattern_cases[i].want) && memcmp(line, pattern_cases[i].want, l) == 0,
              "%s: got '%.*s', Lua gives '%s'", pattern_cases[i].expr, (int)l, line,
              pattern_cases[i].want);
    line = line[l] ? line + l + 1 : NULL;
  }
  free(out);
  free(text);
  collgen__lua_destroy(L);
}

/* ---- Limits, through the internal entry points ---------------------------- */

/* State L with small limits: 8 MiB, 1 MiB objects, 4e6 units, 5 s. */
static collgen__lua *small_state(void) {
  unsetenv("COLLGEN_TEMPLATE_DIR");
  collgen__lua *L;
  char err[8192];
  cr_assert_eq(collgen__lua_create(&L, err, sizeof err), COLLGEN_OK, "%s", err);
  collgen__lua_limits lim = {.memory = (size_t)8 << 20, .max_object = (size_t)1 << 20,
                             .work = 4000000, .wall_ms = 5000};
  collgen__lua_set_limits(L, &lim);
  return L;
}

/* Renders `bad`, expecting COLLGEN_ERR_TEMPLATE with `want`, then a small
** good template in the same state. */
static void expect_limit(const char *bad, const char *want) {
  collgen__lua *L = small_state();
  char err[8192], *out = NULL;
  cr_expect_eq(render_text(L, bad, &out, err, sizeof err), COLLGEN_ERR_TEMPLATE, "%s", bad);
  cr_expect(strstr(err, want), "%s: want '%s' in: %.1000s", bad, want, err);
  free(out);
  out = NULL;
  cr_expect_eq(render_text(L, "${kernel} ${('x'):rep(3)}\n", &out, err, sizeof err), COLLGEN_OK,
               "%s", err);
  cr_expect(out && strstr(out, " xxx\n"), "the state is usable after '%s'", bad);
  free(out);
  collgen__lua_destroy(L);
}

Test(template, limits_are_enforced_per_state, .timeout = 60) {
  expect_limit("% local t = {} for i = 1, 1 << 30 do t[i] = ('x'):rep(100) .. i end\n",
               "memory budget");
  expect_limit("% local s = ('x'):rep(1 << 19) .. ('y'):rep(1 << 19) .. 'z'\n",
               "one string or table of more than 1048576 bytes");
  expect_limit("% local s = ('x'):rep(1 << 21)\n", "string.rep: a result of more than");
  expect_limit("% while true do end\n", "templates/<text>:1: generator ran too long");
  expect_limit("% local s = ('a'):rep(30) for i = 1, 1e9 do s:find('b', 1, true) end\n",
               "ran too long");
  expect_limit("% local t = {} for i = 1, 10000 do table.insert(t, 1, i) end\n",
               "ran too long");
  expect_limit("% local f f = function() return f() + 1 end f()\n", "");
}

Test(template, sandbox_tables_are_read_only) {
  collgen__lua *L = small_state();
  static const char *const writes[] = {
      "% string.upper = nil\n", "% math.pi = 3\n", "% table.concat = nil\n",
      "% abi.kparams.size = 0\n", "% abi.limits[1] = nil\n", "% spec.x = 1 abi.x = 1\n"};
  for (size_t i = 0; i < sizeof writes / sizeof writes[0]; ++i) {
    char err[8192], *out = NULL;
    cr_expect_eq(render_text(L, writes[i], &out, err, sizeof err), COLLGEN_ERR_TEMPLATE, "%s",
                 writes[i]);
    cr_expect(strstr(err, "attempt to modify a read-only table"), "%s: %s", writes[i], err);
    free(out);
  }
  collgen__lua_destroy(L);
}
