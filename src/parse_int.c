/*
** parse_int.c -- checked decimal integers (see parse_int.h).
*/
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "parse_int.h"

int collgen__parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  if (!s || !*s || isspace((unsigned char)*s)) return -1;
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno == ERANGE || end == s || *end) return -1;
  if (v < lo || v > hi) return -1;
  *out = (int64_t)v;
  return 0;
}
