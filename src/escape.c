/*
** escape.c -- names printed escaped (see escape.h): what the file system,
** the environment or a cache entry holds reaches a terminal or a log as
** printable ASCII on one line.
*/
#include "escape.h"

#include <string.h>

/* The escaped form of byte c into piece[4]; returns its length. */
static size_t escape_byte(unsigned char c, char piece[4]) {
  static const char hex[] = "0123456789abcdef";
  if (c == '\\') {
    piece[0] = piece[1] = '\\';
    return 2;
  }
  if (c >= 0x20 && c <= 0x7e) {
    piece[0] = (char)c;
    return 1;
  }
  piece[0] = '\\';
  piece[1] = 'x';
  piece[2] = hex[c >> 4];
  piece[3] = hex[c & 15];
  return 4;
}

const char *collgen__escape(const char *s, char *buf, size_t n) {
  static const char cut[] = "\\...";
  if (!buf || n < sizeof cut) {
    if (buf && n) buf[0] = 0;
    return buf;
  }
  if (!s) s = "(null)";
  char piece[4];
  size_t total = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; ++p)
    total += escape_byte(*p, piece);
  /* Whole when it fits; else whole pieces while the cut mark still fits. */
  size_t limit = total < n ? n : n - (sizeof cut - 1), out = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
    size_t len = escape_byte(*p, piece);
    if (out + len >= limit) break;
    memcpy(buf + out, piece, len);
    out += len;
  }
  if (total < n) buf[out] = 0;
  else memcpy(buf + out, cut, sizeof cut); /* with its NUL */
  return buf;
}
