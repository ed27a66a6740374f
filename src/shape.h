/*
** shape.h -- overflow-checked arithmetic on call shapes.
*/
#ifndef COLLGEN_SHAPE_H
#define COLLGEN_SHAPE_H
#include <stdint.h>

/* *out = dims[lo] * ... * dims[hi-1] (1 when lo == hi). Returns 0, or -1
** when a dimension is negative, or -2 when a dimension or the product is
** above COLLGEN_MAX_ELEMS (never wraps). */
int collgen__shape_product(const int64_t *dims, int lo, int hi, int64_t *out);
#endif
