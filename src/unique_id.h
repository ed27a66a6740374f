/*
** unique_id.h -- the layout of a collgen_unique_id_t, for the bootstrap
** (runtime/bootstrap*.c) and the tests; the public functions are in
** collgen.h. Not installed.
**
** Layout (128 bytes, integers little-endian):
**   0..7    format tag "collgenI"
**   8..11   version (1)
**   12..15  flags (0: rendezvous on an abstract Unix socket)
**   16..31  socket tag: random, names the socket; not secret
**   32..63  secret: random, proves membership; never shown
**   64..95  reserved, zero
**   96..127 SHA-256 of bytes 0..95
*/
#ifndef COLLGEN_UNIQUE_ID_H
#define COLLGEN_UNIQUE_ID_H
#include <stddef.h>
#include <stdint.h>

#include "collgen.h"

#define COLLGEN__UID_TAG_BYTES 16
#define COLLGEN__UID_SECRET_BYTES 32
#define COLLGEN__UID_VERSION 1u
enum { COLLGEN__UID_OFF_VERSION = 8, COLLGEN__UID_OFF_FLAGS = 12, COLLGEN__UID_OFF_TAG = 16,
       COLLGEN__UID_OFF_SECRET = 32, COLLGEN__UID_OFF_RESERVED = 64,
       COLLGEN__UID_OFF_SUM = 96 };

/* Checks an id (tag, version, flags, reserved bytes, checksum) and copies
** out its socket tag and secret. Returns 0, or COLLGEN_ERR_INVALID_ARG
** with the failed check in err (tag and secret untouched). Pure function,
** thread-safe. */
int collgen__uid_open(const collgen_unique_id_t *id, uint8_t tag[COLLGEN__UID_TAG_BYTES],
                      uint8_t secret[COLLGEN__UID_SECRET_BYTES], char *err, size_t n);

/* Writes the format tag, version and checksum of an id whose tag and
** secret are already in place (collgen_get_unique_id; tests that forge
** ids). */
void collgen__uid_seal(collgen_unique_id_t *id);

/* Fills buf with n random bytes from getrandom(2), else /dev/urandom.
** Returns 0, or -1 with the reason in err. */
int collgen__random_bytes(void *buf, size_t n, char *err, size_t errlen);
#endif
