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

#include "collgen.h"
#include "test_util.h"

static char tree[4096];

/* Copies gen/ and templates/ into a temp tree, inserts `line` before line
** `at` of templates/<file>, and points COLLGEN_TEMPLATE_DIR at the tree. */
static void broken_tree(const char *file, int at, const char *line) {
  char cmd[9000], path[4200];
  tu_make_temp_dir(tree, sizeof tree);
  snprintf(cmd, sizeof cmd, "cp -r '%s/gen' '%s/templates' '%s/'", COLLGEN_SOURCE_DIR,
           COLLGEN_SOURCE_DIR, tree);
  cr_assert_eq(system(cmd), 0);
  snprintf(path, sizeof path, "%s/templates/%s", tree, file);
  size_t size;
  char *text = tu_read_file(path, &size);
  cr_assert(text);
  FILE *fp = fopen(path, "w");
  cr_assert(fp);
  int lineno = 1;
  for (char *p = text; *p; ++p) {
    if (lineno == at && (p == text || p[-1] == '\n')) fprintf(fp, "%s\n", line);
    fputc(*p, fp);
    if (*p == '\n') ++lineno;
  }
  fclose(fp);
  free(text);
  setenv("COLLGEN_TEMPLATE_DIR", tree, 1);
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
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
  cr_expect(strstr(err, "ran too long"), "message: %s", err);
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
