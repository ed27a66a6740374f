/*
** parse_int.h -- the one checked integer parser for every CLI flag and
** environment variable: decimal only, whole string, range-checked, never
** truncated or wrapped.
*/
#ifndef COLLGEN_PARSE_INT_H
#define COLLGEN_PARSE_INT_H
#include <stdint.h>

/* Parses all of `s` (optional sign, decimal digits; no spaces, no trailing
** characters) into *out when lo <= value <= hi. Returns 0, or -1 when `s`
** is NULL, empty, not a number, out of int64 range (ERANGE) or outside
** [lo, hi]; *out is then untouched. */
int collgen__parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
#endif
