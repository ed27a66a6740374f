/*
** escape.h -- the one way collgen prints a name it did not choose (a path
** from the file system, a value from the environment, a kernel name read
** from a cache entry): escaped, so it can neither drive the terminal nor
** split a line.
*/
#ifndef COLLGEN_ESCAPE_H
#define COLLGEN_ESCAPE_H
#include <stddef.h>

/* Bytes of a buffer that holds any escaped name of up to n bytes. */
#define COLLGEN_ESCAPED_SIZE(n) (4 * (n) + 1)

/* Writes `s` into buf[n] with each byte outside printable ASCII (0x20 ..
** 0x7e: control characters, DEL and every byte of a non-ASCII character)
** as \xNN (two lowercase hex digits) and a backslash as \\; everything else
** is copied (UTF-8 names show as their bytes: \xc3\xa9 for an e acute). A
** result that does not fit is cut after a whole character or escape and
** ends in "\..." instead: read from the left, a backslash followed by a dot,
** which a whole result never has. NULL prints as "(null)". Needs n >= 5
** (else buf gets ""). Returns buf. */
const char *collgen__escape(const char *s, char *buf, size_t n);
#endif
