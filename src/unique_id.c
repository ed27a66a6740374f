/*
** unique_id.c -- collgen_unique_id_t: making one from the system's
** randomness, checking one, and its strict hex text form (see
** unique_id.h for the layout, docs/multiprocess.md for its use).
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "internal.h"
#include "sha256.h"
#include "unique_id.h"

static const uint8_t uid_magic[8] = {'c', 'o', 'l', 'l', 'g', 'e', 'n', 'I'};

static uint32_t get_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int collgen__random_bytes(void *buf, size_t n, char *err, size_t errlen) {
  uint8_t *p = buf;
  size_t got = 0;
  while (got < n) {
    ssize_t r = getrandom(p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  if (got == n) return 0;
  /* No getrandom (old kernel, seccomp): the kernel's pool as a file. */
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  int ok = fd >= 0 && collgen__read_full(fd, p, n) == 0;
  int e = errno;
  if (fd >= 0) close(fd);
  if (ok) return 0;
  collgen__fail(err, errlen, COLLGEN_ERR_IO,
                "no randomness for the id: getrandom and /dev/urandom failed (%s)", strerror(e));
  return -1;
}

void collgen__uid_seal(collgen_unique_id_t *id) {
  uint8_t *b = id->internal;
  memcpy(b, uid_magic, sizeof uid_magic);
  b[COLLGEN__UID_OFF_VERSION] = (uint8_t)COLLGEN__UID_VERSION;
  memset(b + COLLGEN__UID_OFF_VERSION + 1, 0, 3);
  collgen__sha256(b, COLLGEN__UID_OFF_SUM, b + COLLGEN__UID_OFF_SUM);
}

int collgen__uid_open(const collgen_unique_id_t *id, uint8_t tag[COLLGEN__UID_TAG_BYTES],
                      uint8_t secret[COLLGEN__UID_SECRET_BYTES], char *err, size_t n) {
  const uint8_t *b = id->internal;
  if (memcmp(b, uid_magic, sizeof uid_magic) != 0)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "not a collgen unique id (its first 8 bytes are not \"collgenI\")");
  uint32_t version = get_le32(b + COLLGEN__UID_OFF_VERSION);
  if (version != COLLGEN__UID_VERSION)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "unique id of version %u; this collgen reads version %u",
                         version, COLLGEN__UID_VERSION);
  uint32_t flags = get_le32(b + COLLGEN__UID_OFF_FLAGS);
  if (flags != 0)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "unique id with unknown flags 0x%x", flags);
  for (int i = COLLGEN__UID_OFF_RESERVED; i < COLLGEN__UID_OFF_SUM; ++i)
    if (b[i] != 0)
      return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                           "unique id with a nonzero reserved byte (%d)", i);
  uint8_t sum[32];
  collgen__sha256(b, COLLGEN__UID_OFF_SUM, sum);
  if (memcmp(sum, b + COLLGEN__UID_OFF_SUM, sizeof sum) != 0)
    return collgen__fail(err, n, COLLGEN_ERR_INVALID_ARG,
                         "unique id checksum mismatch (the id was altered or truncated)");
  memcpy(tag, b + COLLGEN__UID_OFF_TAG, COLLGEN__UID_TAG_BYTES);
  memcpy(secret, b + COLLGEN__UID_OFF_SECRET, COLLGEN__UID_SECRET_BYTES);
  return COLLGEN_OK;
}

int collgen_get_unique_id(collgen_unique_id_t *id) {
  if (!id) return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "collgen_get_unique_id: id is NULL");
  collgen_unique_id_t fresh;
  memset(&fresh, 0, sizeof fresh);
  char err[256];
  if (collgen__random_bytes(fresh.internal + COLLGEN__UID_OFF_TAG,
                            COLLGEN__UID_TAG_BYTES + COLLGEN__UID_SECRET_BYTES, err,
                            sizeof err) != 0)
    return collgen__fail_tls(COLLGEN_ERR_IO, "collgen_get_unique_id: %s", err);
  collgen__uid_seal(&fresh);
  *id = fresh;
  return COLLGEN_OK;
}

int collgen_unique_id_to_text(const collgen_unique_id_t *id, char *text, size_t size) {
  if (!id || !text)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "collgen_unique_id_to_text: %s is NULL",
                             id ? "text" : "id");
  if (size < COLLGEN_UNIQUE_ID_TEXT_LEN + 1)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "collgen_unique_id_to_text: the buffer has %zu bytes, the text "
                             "needs %d (COLLGEN_UNIQUE_ID_TEXT_LEN + 1)",
                             size, COLLGEN_UNIQUE_ID_TEXT_LEN + 1);
  uint8_t tag[COLLGEN__UID_TAG_BYTES], secret[COLLGEN__UID_SECRET_BYTES];
  char err[256];
  if (collgen__uid_open(id, tag, secret, err, sizeof err) != COLLGEN_OK)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "collgen_unique_id_to_text: %s", err);
  for (int i = 0; i < COLLGEN_UNIQUE_ID_BYTES; i += 32) { /* collgen__hex: 32 at a time */
    char hex[65];
    collgen__hex(id->internal + i, hex);
    memcpy(text + 2 * i, hex, 64);
  }
  text[COLLGEN_UNIQUE_ID_TEXT_LEN] = 0;
  return COLLGEN_OK;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int collgen_unique_id_from_text(const char *text, collgen_unique_id_t *id) {
  if (!text || !id)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "collgen_unique_id_from_text: %s is NULL", text ? "id" : "text");
  /* Never read past the expected length plus one: the text may be huge or
  ** unterminated garbage from an environment variable or a file. */
  size_t len = strnlen(text, COLLGEN_UNIQUE_ID_TEXT_LEN + 1);
  collgen_unique_id_t parsed;
  for (size_t i = 0; i < len && i < COLLGEN_UNIQUE_ID_TEXT_LEN; ++i) {
    int v = hex_value(text[i]);
    if (v < 0) {
      unsigned char c = (unsigned char)text[i];
      if (c >= 0x20 && c < 0x7f)
        return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                                 "unique id text: character %zu is '%c', not a hex digit",
                                 i + 1, c);
      return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                               "unique id text: character %zu is byte 0x%02x, not a hex digit",
                               i + 1, c);
    }
    if (i % 2 == 0) parsed.internal[i / 2] = (unsigned char)(v << 4);
    else parsed.internal[i / 2] |= (unsigned char)v;
  }
  if (len != COLLGEN_UNIQUE_ID_TEXT_LEN)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG,
                             "unique id text has %s%zu characters, expected exactly %d hex "
                             "digits", len > COLLGEN_UNIQUE_ID_TEXT_LEN ? "more than " : "",
                             len > COLLGEN_UNIQUE_ID_TEXT_LEN ? len - 1 : len,
                             COLLGEN_UNIQUE_ID_TEXT_LEN);
  uint8_t tag[COLLGEN__UID_TAG_BYTES], secret[COLLGEN__UID_SECRET_BYTES];
  char err[256];
  if (collgen__uid_open(&parsed, tag, secret, err, sizeof err) != COLLGEN_OK)
    return collgen__fail_tls(COLLGEN_ERR_INVALID_ARG, "unique id text: %s", err);
  *id = parsed;
  return COLLGEN_OK;
}
