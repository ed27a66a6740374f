/*
** shape.c -- call shapes as the planner sees them: defaults and checked
** element counts.
*/
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "shape.h"

void collgen_shape_init(collgen_shape_t *shape, collgen_op_t op) {
  memset(shape, 0, sizeof *shape);
  shape->op = op;
  shape->dtype = COLLGEN_DTYPE_BF16;
  shape->ngpus = 2;
  shape->group_size = 0;
  const collgen__op_desc *d = collgen__op_find(op);
  shape->tensor_rank = d ? d->min_rank : 1;
  shape->elems = 1;
  shape->rows = 1;
  shape->cols = 4096;
  shape->aligned16 = 1;
  snprintf(shape->arch, sizeof shape->arch, "sm_90");
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
