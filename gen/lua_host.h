/*
** lua_host.h -- the embedded Lua generator: one sandboxed lua_State that
** plans shapes and renders CUDA C from the templates, bounded in time and
** memory (docs/templates.md, "Sandbox").
*/
#ifndef COLLGEN_LUA_HOST_H
#define COLLGEN_LUA_HOST_H
#include "internal.h"

typedef struct collgen__lua collgen__lua;

/* What one call into the Lua state may use. A call that exceeds `work` or
** `wall_ms` fails with "generator ran too long", one that needs more memory
** with "memory budget"; both are COLLGEN_ERR_TEMPLATE, and the state is
** recreated before the next call. Internal only: there is no variable. */
typedef struct {
  size_t memory;      /* bytes the state may hold in all */
  size_t max_object;  /* bytes of one allocation: the largest string or table part */
  uint64_t work;      /* per call: VM instructions plus C work (bytes, match steps) */
  uint32_t wall_ms;   /* per call: wall-clock time */
} collgen__lua_limits;

/* 256 MiB, 16 MiB, 2e8, 10 s. */
extern const collgen__lua_limits collgen__lua_default_limits;

/* Creates a state and loads gen/main.lua. The Lua sources and templates
** are read once, here: the embedded copies, or every file of the embedded
** list from $COLLGEN_TEMPLATE_DIR, which must be a template tree (an error
** otherwise, never a fallback). On failure writes a message into err. */
int collgen__lua_create(collgen__lua **out, char *err, size_t n);
void collgen__lua_destroy(collgen__lua *L);
/* Replaces the limits (for tests and the fuzzer); applies from the next
** call. */
void collgen__lua_set_limits(collgen__lua *L, const collgen__lua_limits *limits);
/* Hash of every Lua source and template the state can load, and of the
** catalog (32 bytes): exactly the bytes the state renders from. */
const uint8_t *collgen__lua_bundle_hash(const collgen__lua *L);
/* Plans a shape; COLLGEN_ERR_INVALID_ARG with the planner's reason. */
int collgen__lua_plan(collgen__lua *L, const collgen_shape_t *shape,
                      collgen_plan_t *plan, char *err, size_t n);
/* Every kernel the planner can pick for a class (gen/planner.lua,
** variants): one representative shape per distinct canonical spec, in a
** malloc'd array (*shapes, *count; NULL and 0 on error or none).
** COLLGEN_ERR_INVALID_ARG with the planner's reason on a bad class. */
int collgen__lua_variants(collgen__lua *L, const collgen_shape_class_t *cls,
                          collgen_shape_t **shapes, int *count, char *err, size_t n);
/* Renders the CUDA C source of a shape (malloc'd). COLLGEN_ERR_TEMPLATE
** with "templates/<file>:<line>: ..." and a traceback on template errors. */
int collgen__lua_render(collgen__lua *L, const collgen_shape_t *shape,
                        int line_directives, char **source, char *err,
                        size_t n);
/* Renders template text (len bytes, any content) as if it were the op's
** template, with the variables of `shape`'s spec; it may include the real
** templates. For tests and the fuzzer. Same results as collgen__lua_render;
** the text's errors name "templates/<text>". */
int collgen__lua_render_text(collgen__lua *L, const collgen_shape_t *shape,
                             const char *text, size_t len, int line_directives,
                             char **source, char *err, size_t n);
#endif
