/*
** fuzz_parse_int.c -- libFuzzer harness for the one integer parser of the
** CLI and the environment: arbitrary bytes (split into a string and a
** range) must either be refused or give a value inside the range that
** reads back as the same decimal text, modulo sign and leading zeros.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parse_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  /* first byte picks the range, the rest is the text */
  static const int64_t bounds[][2] = {{1, 8}, {0, (int64_t)1 << 40}, {INT64_MIN, INT64_MAX},
                                      {-5, 5}, {0, 0}, {1, 86400000}};
  const int64_t *b = bounds[data[0] % (sizeof bounds / sizeof bounds[0])];
  char *s = malloc(size);
  memcpy(s, data + 1, size - 1);
  s[size - 1] = 0;
  int64_t v = 12345;
  int rc = collgen__parse_int(s, b[0], b[1], &v);
  if (rc == 0) {
    if (v < b[0] || v > b[1]) abort();
    /* the accepted text is exactly an optional sign and digits */
    const char *p = s + (s[0] == '+' || s[0] == '-');
    if (!*p) abort();
    for (; *p; ++p)
      if (*p < '0' || *p > '9') abort();
    if (v != strtoll(s, NULL, 10)) abort();
  } else if (v != 12345) {
    abort(); /* refused: *out untouched */
  }
  free(s);
  return 0;
}
