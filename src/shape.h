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

/* The rows group rank i of a group of g ranks owns when n rows are
** scattered (reduce_scatter_sum, reduce_scatter_rmsnorm): *count = n / g,
** plus one for the first n % g ranks; *start = the rows of the ranks
** before it. Requires n >= 0, 1 <= g, 0 <= i < g (collgen_scatter_chunk,
** the public form, checks them). */
void collgen__scatter_chunk(int64_t n, int g, int i, int64_t *start, int64_t *count);
#endif
