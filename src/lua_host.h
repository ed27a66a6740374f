/*
** lua_host.h -- the embedded Lua generator: one sandboxed lua_State that
** plans shapes and renders CUDA C from the templates.
*/
#ifndef COLLGEN_LUA_HOST_H
#define COLLGEN_LUA_HOST_H
#include "internal.h"

typedef struct collgen__lua collgen__lua;

/* Creates a state and loads gen/main.lua (embedded, or from
** $COLLGEN_TEMPLATE_DIR). On failure writes a message into err. */
int collgen__lua_create(collgen__lua **out, char *err, size_t n);
void collgen__lua_destroy(collgen__lua *L);
/* Hash of every Lua source and template the state can load (32 bytes). */
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
#endif
