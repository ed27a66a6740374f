/*
** test_catalog.c -- the catalog (ops, dtypes, archs) against everything
** that must agree with it: the Lua side (planner and templates accept
** exactly the catalog's entries), the files each op needs, and
** docs/architecture.md (every file it names exists; every op and dtype is
** documented).
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "test_util.h"

static char *read_source(const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", COLLGEN_SOURCE_DIR, rel);
  size_t size = 0;
  return tu_read_file(path, &size);
}

static int source_exists(const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", COLLGEN_SOURCE_DIR, rel);
  return access(path, R_OK) == 0;
}

/* Every op and every dtype it computes on (one with an accumulate type) of
** the catalog plans and renders with the dtype's C type, and the ops that
** move bits (`computes` 0) with every dtype, as the unsigned type of its
** size; a copy-only dtype is refused by every op that computes, naming the
** op and the dtype; values next to them are refused by the planner, not
** defaulted. */
Test(catalog, lua_accepts_exactly_the_catalog) {
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK, "%s", collgen_last_error());
  for (int o = 0; o < collgen__op_count(); ++o)
    for (int d = 0; d < collgen__dtype_count(); ++d) {
      collgen_shape_t s;
      collgen_shape_init(&s, collgen__op_at(o)->op);
      s.dtype = collgen__dtype_at(d)->dtype;
      char *src = NULL;
      const int moves_bits = !collgen__op_at(o)->computes;
      if (!collgen__dtype_at(d)->acc_type && !moves_bits) {
        char want[160];
        snprintf(want, sizeof want, "planner: %s computes on elements: %s is a copy-only dtype",
                 collgen__op_at(o)->name, collgen__dtype_at(d)->name);
        cr_expect_eq(collgen_generate_source(g, &s, 0, &src), COLLGEN_ERR_INVALID_ARG);
        cr_expect(!src);
        cr_expect(strstr(collgen_generator_last_error(g), want), "%s",
                  collgen_generator_last_error(g));
        continue;
      }
      cr_expect_eq(collgen_generate_source(g, &s, 0, &src), COLLGEN_OK, "%s/%s: %s",
                   collgen__op_at(o)->name, collgen__dtype_at(d)->name,
                   collgen_generator_last_error(g));
      /* an op that moves bits: the size class (gen/planner.lua SIZE_CLASSES) */
      static const char *const by_size[9] = {[1] = "typedef unsigned char elem_t;",
                                             [2] = "typedef unsigned short elem_t;",
                                             [4] = "typedef unsigned int elem_t;",
                                             [8] = "typedef unsigned long long elem_t;"};
      const int bytes = collgen__dtype_at(d)->bytes;
      cr_assert(bytes >= 1 && bytes <= 8 && by_size[bytes]);
      cr_expect(src && strstr(src, moves_bits ? by_size[bytes] : collgen__dtype_at(d)->ctype),
                "%s/%s: element type missing", collgen__op_at(o)->name,
                collgen__dtype_at(d)->name);
      free(src);
    }
  collgen_shape_t s;
  collgen_plan_t plan;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  s.dtype = (collgen_dtype_t)collgen__dtype_count();
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(g), "unknown dtype"), "%s",
            collgen_generator_last_error(g));
  int unknown_op = 0; /* past every op's value (the values may have gaps) */
  for (int o = 0; o < collgen__op_count(); ++o)
    if ((int)collgen__op_at(o)->op >= unknown_op) unknown_op = (int)collgen__op_at(o)->op + 1;
  collgen_shape_init(&s, (collgen_op_t)unknown_op);
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(g), "unknown op"), "%s",
            collgen_generator_last_error(g));
  for (int a = 0; a < collgen__arch_count(); ++a) {
    collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
    snprintf(s.arch, sizeof s.arch, "%s", collgen__arch_at(a)->name);
    cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_OK, "%s: %s", s.arch,
                 collgen_generator_last_error(g));
  }
  snprintf(s.arch, sizeof s.arch, "sm_75");
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_INVALID_ARG, "sm_75 is not in the catalog");
  collgen_generator_destroy(g);
}

/* Each op has its template and its runtime descriptor file. */
Test(catalog, every_op_has_its_files) {
  for (int o = 0; o < collgen__op_count(); ++o) {
    const collgen__op_desc *op = collgen__op_at(o);
    char rel[256];
    snprintf(rel, sizeof rel, "templates/%s", op->template_file);
    cr_expect(source_exists(rel), "%s: %s missing", op->name, rel);
    snprintf(rel, sizeof rel, "runtime/op_%s.c", op->name);
    cr_expect(source_exists(rel), "%s: %s missing", op->name, rel);
    cr_expect(collgen__op_find(op->op) == op);
    collgen_op_t parsed;
    cr_expect(collgen__parse_op(op->name, &parsed) == 0 && parsed == op->op);
  }
  for (int d = 0; d < collgen__dtype_count(); ++d) {
    const collgen__dtype_desc *dt = collgen__dtype_at(d);
    collgen_dtype_t parsed;
    cr_expect(collgen__parse_dtype(dt->name, &parsed) == 0 && parsed == dt->dtype);
    cr_expect_eq(collgen__dtype_bytes(dt->dtype), dt->bytes);
    cr_expect_eq(collgen__dtype_reduces(dt->dtype), dt->acc_type != NULL, "%s", dt->name);
  }
  /* The table itself: the float types compute, the integer and byte types
  ** (and f64, which has no accumulate type) are copy-only. */
  static const struct { const char *name; int bytes, reduces; } want[] = {
      {"bf16", 2, 1}, {"f16", 2, 1}, {"f32", 4, 1}, {"u8", 1, 0}, {"i8", 1, 0},
      {"i16", 2, 0},  {"i32", 4, 0}, {"i64", 8, 0}, {"f64", 8, 0}};
  cr_expect_eq(collgen__dtype_count(), (int)(sizeof want / sizeof *want));
  for (size_t i = 0; i < sizeof want / sizeof *want; ++i) {
    collgen_dtype_t parsed;
    cr_assert_eq(collgen__parse_dtype(want[i].name, &parsed), 0, "%s", want[i].name);
    cr_expect_eq(collgen__dtype_bytes(parsed), want[i].bytes, "%s", want[i].name);
    cr_expect_eq(collgen__dtype_reduces(parsed), want[i].reduces, "%s", want[i].name);
  }
  cr_expect_eq(collgen__dtype_reduces((collgen_dtype_t)99), 0);
  collgen_op_t op;
  collgen_dtype_t dt;
  cr_expect_eq(collgen__parse_op("allreduce", &op), -1);
  cr_expect_eq(collgen__parse_dtype("f128", &dt), -1);
  cr_expect_eq(collgen__dtype_bytes((collgen_dtype_t)99), 0);
  cr_expect_str_eq(collgen__dtype_name((collgen_dtype_t)99), "?");
}

/* docs/architecture.md: every repository path it names in backticks exists
** (with <id> read as each op's name), and the API docs name every op and
** dtype. */
Test(catalog, docs_agree_with_the_tree_and_the_catalog) {
  char *doc = read_source("docs/architecture.md");
  cr_assert(doc, "docs/architecture.md is missing");
  static const char *const roots[] = {"src/", "runtime/", "gen/", "templates/", "cache/",
                                      "tests/", "docs/", "CMakeLists.txt"};
  int checked = 0;
  for (char *p = strchr(doc, '`'); p; p = strchr(p, '`')) {
    char *end = strchr(p + 1, '`');
    if (!end) break;
    char name[512];
    size_t len = (size_t)(end - p - 1);
    if (len < sizeof name) {
      memcpy(name, p + 1, len);
      name[len] = 0;
      int is_path = 0;
      for (size_t r = 0; r < sizeof roots / sizeof roots[0]; ++r)
        is_path |= strncmp(name, roots[r], strlen(roots[r])) == 0;
      if (is_path && !strchr(name, ' ') && !strchr(name, '*')) {
        char *id = strstr(name, "<id>");
        for (int o = 0; o < (id ? collgen__op_count() : 1); ++o) {
          char path[600];
          if (id)
            snprintf(path, sizeof path, "%.*s%s%s", (int)(id - name), name,
                     collgen__op_at(o)->name, id + 4);
          else
            snprintf(path, sizeof path, "%s", name);
          /* "src/support/reference.c / .h" style pairs name the .c file */
          if (strstr(path, "<")) continue;
          cr_expect(source_exists(path), "docs/architecture.md names `%s`, which does not exist",
                    path);
          checked++;
        }
      }
    }
    p = end + 1;
  }
  cr_expect_gt(checked, 15, "only %d paths found in docs/architecture.md", checked);
  free(doc);
  char *api = read_source("docs/api.md");
  cr_assert(api);
  for (int o = 0; o < collgen__op_count(); ++o) {
    char fn[128];
    snprintf(fn, sizeof fn, "collgen_%s", collgen__op_at(o)->name);
    cr_expect(strstr(api, fn), "docs/api.md does not document %s", fn);
  }
  for (int d = 0; d < collgen__dtype_count(); ++d)
    cr_expect(strstr(api, collgen__dtype_at(d)->name), "docs/api.md does not mention dtype %s",
              collgen__dtype_at(d)->name);
  free(api);
}

/* The binding catalog (collgen_catalog_entry) says what the header says:
** every status, op, dtype, FP8 mode, transport and rank state in order
** with its value and detail, each public struct's sizeof, the constants;
** and refuses an unknown table or an index out of range, touching no
** output. */
Test(catalog, binding_catalog_matches_the_header) {
  struct row { const char *name; int64_t value, detail; };
#define STATUS_ROW(name, value, desc) {#name, value, 0},
  static const struct row status[] = {COLLGEN_ERRNO_MAP(STATUS_ROW)};
#define DTYPE_ROW(NAME, value, id, bytes, ctype, acc, sm) {#id, value, bytes},
  static const struct row dtype[] = {COLLGEN_DTYPE_MAP(DTYPE_ROW)};
#define DTYPE_REDUCES_ROW(NAME, value, id, bytes, ctype, acc, sm) {#id, value, (acc) != NULL},
  static const struct row dtype_reduces[] = {COLLGEN_DTYPE_MAP(DTYPE_REDUCES_ROW)};
#define OP_ROW(NAME, value, id, tpl, min_rank, computes, fp8) {#id, value, min_rank},
  static const struct row op[] = {COLLGEN_OP_MAP(OP_ROW)};
#define OP_COMPUTES_ROW(NAME, value, id, tpl, min_rank, computes, fp8) {#id, value, computes},
  static const struct row op_computes[] = {COLLGEN_OP_MAP(OP_COMPUTES_ROW)};
#define OP_FP8_ROW(NAME, value, id, tpl, min_rank, computes, fp8) {#id, value, fp8},
  static const struct row op_fp8[] = {COLLGEN_OP_MAP(OP_FP8_ROW)};
#define FP8_ROW(NAME, value, id, sm) {#id, value, sm},
  static const struct row fp8[] = {COLLGEN_FP8_MAP(FP8_ROW)};
#define NAMED_ROW(NAME, value, id) {#id, value, 0},
  static const struct row transport[] = {COLLGEN_TRANSPORT_MAP(NAMED_ROW)};
  static const struct row rank_state[] = {COLLGEN_RANK_STATE_MAP(NAMED_ROW)};
  const struct { const char *table; const struct row *rows; int n; } tables[] = {
      {"status", status, sizeof status / sizeof *status},
      {"dtype", dtype, sizeof dtype / sizeof *dtype},
      {"dtype_reduces", dtype_reduces, sizeof dtype_reduces / sizeof *dtype_reduces},
      {"op", op, sizeof op / sizeof *op},
      {"op_computes", op_computes, sizeof op_computes / sizeof *op_computes},
      {"op_fp8", op_fp8, sizeof op_fp8 / sizeof *op_fp8},
      {"fp8", fp8, sizeof fp8 / sizeof *fp8},
      {"transport", transport, sizeof transport / sizeof *transport},
      {"rank_state", rank_state, sizeof rank_state / sizeof *rank_state}};
  for (size_t t = 0; t < sizeof tables / sizeof *tables; ++t) {
    cr_assert_eq(collgen_catalog_count(tables[t].table), tables[t].n, "%s", tables[t].table);
    for (int i = 0; i < tables[t].n; ++i) {
      const char *name = NULL;
      int64_t value = 99, detail = 99;
      cr_assert_eq(collgen_catalog_entry(tables[t].table, i, &name, &value, &detail), COLLGEN_OK);
      cr_expect_str_eq(name, tables[t].rows[i].name, "%s[%d]", tables[t].table, i);
      cr_expect_eq(value, tables[t].rows[i].value, "%s %s", tables[t].table, name);
      cr_expect_eq(detail, tables[t].rows[i].detail, "%s %s", tables[t].table, name);
    }
  }
  const struct { const char *name; size_t size; } structs[] = {
      {"collgen_shape_t", sizeof(collgen_shape_t)}, {"collgen_plan_t", sizeof(collgen_plan_t)},
      {"collgen_shape_class_t", sizeof(collgen_shape_class_t)},
      {"collgen_kernel_info_t", sizeof(collgen_kernel_info_t)},
      {"collgen_comm_options_t", sizeof(collgen_comm_options_t)},
      {"collgen_comm_info_t", sizeof(collgen_comm_info_t)},
      {"collgen_comm_health_t", sizeof(collgen_comm_health_t)},
      {"collgen_unique_id_t", sizeof(collgen_unique_id_t)},
      {"collgen_call_t", sizeof(collgen_call_t)}};
  int n = collgen_catalog_count("struct");
  cr_assert_eq(n, (int)(sizeof structs / sizeof *structs));
  for (int i = 0; i < n; ++i) {
    const char *name;
    int64_t size, align;
    cr_assert_eq(collgen_catalog_entry("struct", i, &name, &size, &align), COLLGEN_OK);
    cr_expect_str_eq(name, structs[i].name);
    cr_expect_eq(size, (int64_t)structs[i].size, "%s", name);
    cr_expect(align >= 1 && align <= 16 && size % align == 0, "%s align %lld", name,
              (long long)align);
  }
  int found = 0;
  for (int i = 0; i < collgen_catalog_count("constant"); ++i) {
    const char *name;
    int64_t value;
    cr_assert_eq(collgen_catalog_entry("constant", i, &name, &value, NULL), COLLGEN_OK);
    if (strcmp(name, "MAX_DEVICES") == 0) found += value == COLLGEN_MAX_DEVICES;
    if (strcmp(name, "MAX_ELEMS") == 0) found += value == COLLGEN_MAX_ELEMS;
    if (strcmp(name, "UNIQUE_ID_BYTES") == 0) found += value == COLLGEN_UNIQUE_ID_BYTES;
  }
  cr_expect_eq(found, 3, "MAX_DEVICES, MAX_ELEMS and UNIQUE_ID_BYTES with their values");

  const char *name = "untouched";
  int64_t value = 7;
  cr_expect_eq(collgen_catalog_count("colors"), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "unknown table 'colors'"), "%s", collgen_last_error());
  cr_expect_eq(collgen_catalog_count(NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_catalog_entry("dtype", -1, &name, &value, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_catalog_entry("dtype", collgen_catalog_count("dtype"), &name, &value,
                                     NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_last_error(), "outside 0.."), "%s", collgen_last_error());
  cr_expect_str_eq(name, "untouched");
  cr_expect_eq(value, 7);
}

/* The op_role and op_scalar tables: every op's roles and scalars in its
** order, with the facts a binding needs (a few rows checked by hand: an
** optional role, an FP8 role, a scalar's check and default). */
Test(catalog, binding_tables_of_roles_and_scalars) {
  int roles = 0, scalars = 0;
  for (int i = 0; i < collgen__op_count(); ++i) {
    roles += collgen__op_at(i)->nroles;
    scalars += collgen__op_at(i)->nscalars;
  }
  cr_assert_eq(collgen_catalog_count("op_role"), roles);
  cr_assert_eq(collgen_catalog_count("op_scalar"), scalars);
  cr_assert_eq(collgen_catalog_count("op_scalar_default"), scalars);
  int seen_optional = 0, seen_row_scales = 0, seen_root = 0, seen_eps = 0;
  for (int i = 0; i < roles; ++i) {
    const char *name;
    int64_t op, detail;
    cr_assert_eq(collgen_catalog_entry("op_role", i, &name, &op, &detail), COLLGEN_OK);
    const int use = (int)(detail >> 1 & 7), out = (int)(detail & 1), bytes = (int)(detail >> 8);
    if (strcmp(name, "residual_in") == 0) {
      cr_expect_eq(use, op == COLLGEN_OP_REDUCE_SCATTER_RMSNORM ? 1 : 0, "op %lld", (long long)op);
      seen_optional += use == 1;
    }
    if (strcmp(name, "row_scales") == 0) {
      cr_expect(out && bytes == 4 && use == 4, "row_scales of op %lld", (long long)op);
      seen_row_scales++;
    }
  }
  for (int i = 0; i < scalars; ++i) {
    const char *name, *dname;
    int64_t op, detail, dop, bits;
    cr_assert_eq(collgen_catalog_entry("op_scalar", i, &name, &op, &detail), COLLGEN_OK);
    cr_assert_eq(collgen_catalog_entry("op_scalar_default", i, &dname, &dop, &bits), COLLGEN_OK);
    cr_expect_str_eq(name, dname);
    cr_expect_eq(op, dop);
    double dflt;
    memcpy(&dflt, &bits, sizeof dflt);
    if (strcmp(name, "root") == 0) {
      cr_expect_eq(detail, 0 | 0 << 4, "root: an integer checked as a group rank");
      cr_expect_eq(dflt, 0.0);
      seen_root++;
    }
    if (strcmp(name, "eps") == 0) {
      cr_expect_eq(detail, 1 | 1 << 4, "eps: a float checked as an eps");
      cr_expect_eq(dflt, 1e-6);
      seen_eps++;
    }
  }
  cr_expect_eq(seen_optional, 1);
  cr_expect_eq(seen_row_scales, 2);
  cr_expect_eq(seen_root, 2); /* broadcast and scatter */
  cr_expect_eq(seen_eps, 3);
}
