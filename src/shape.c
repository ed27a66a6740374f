/*
** shape.c -- call shapes as the planner sees them: defaults, checked
** element counts, and the scatter rule of the reduce-scatter ops.
*/
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "shape.h"

/* The default of a field of each kind (COLLGEN_SHAPE_FIELDS). */
#define SET_SCALAR(f, v) (f) = (v)
#define SET_DEFAULT_OP SET_SCALAR
#define SET_DEFAULT_DTYPE SET_SCALAR
#define SET_DEFAULT_FP8 SET_SCALAR
#define SET_DEFAULT_INT SET_SCALAR
#define SET_DEFAULT_INT64 SET_SCALAR
#define SET_DEFAULT_GROUP SET_SCALAR
#define SET_DEFAULT_BOOL SET_SCALAR
#define SET_DEFAULT_ARCH(f, v) snprintf((f), sizeof(f), "%s", (v))

void collgen_shape_init(collgen_shape_t *shape, collgen_op_t op) {
  memset(shape, 0, sizeof *shape);
  const collgen__op_desc *d = collgen__op_find(op);
  const int min_rank = d ? d->min_rank : 1;
#define SET_DEFAULT(type, name, bound, kind, lo, hi, dflt, doc) \
  SET_DEFAULT_##kind(shape->name, dflt);
  COLLGEN_SHAPE_FIELDS(SET_DEFAULT)
#undef SET_DEFAULT
}

int collgen__shape_product(const int64_t *dims, int lo, int hi, int64_t *out) {
  int64_t n = 1;
  for (int k = lo; k < hi; ++k) {
    if (dims[k] < 0) return -1;
    if (dims[k] > COLLGEN_MAX_ELEMS) return -2;
    if (n != 0 && dims[k] > COLLGEN_MAX_ELEMS / n) return -2;
    n *= dims[k];
  }
  *out = n;
  return 0;
}

void collgen__scatter_chunk(int64_t n, int g, int i, int64_t *start, int64_t *count) {
  const int64_t each = n / g, extra = n % g;
  *count = each + (i < extra ? 1 : 0);
  *start = (int64_t)i * each + (i < extra ? i : extra);
}

int collgen_scatter_chunk(int64_t rows, int group_size, int group_rank, int64_t *start,
                          int64_t *count) {
  if (!start || !count)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "collgen_scatter_chunk: %s is NULL",
                             start ? "count" : "start");
  if (rows < 0)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "collgen_scatter_chunk: rows is %lld, must be >= 0",
                             (long long)rows);
  if (group_size < 1)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "collgen_scatter_chunk: group_size is %d, must be >= 1",
                             group_size);
  if (group_rank < 0 || group_rank >= group_size)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "collgen_scatter_chunk: group_rank %d is not in [0, %d)",
                             group_rank, group_size);
  collgen__scatter_chunk(rows, group_size, group_rank, start, count);
  return COLLGEN_OK;
}
