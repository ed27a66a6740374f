/*
** sha256.h -- SHA-256 (FIPS 180-4), used for cache keys and entry checksums.
*/
#ifndef COLLGEN_SHA256_H
#define COLLGEN_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint32_t state[8];
  uint64_t bytes;
  uint8_t block[64];
  size_t fill;
} collgen__sha256_ctx;

void collgen__sha256_init(collgen__sha256_ctx *h);
void collgen__sha256_update(collgen__sha256_ctx *h, const void *data, size_t n);
void collgen__sha256_final(collgen__sha256_ctx *h, uint8_t digest[32]);
/* Adds a labelled, length-framed field: label, 8-byte big-endian length,
** bytes. Framing makes concatenations of fields unambiguous. */
void collgen__sha256_field(collgen__sha256_ctx *h, const char *label,
                           const void *data, size_t n);
/* One-shot digest. */
void collgen__sha256(const void *data, size_t n, uint8_t digest[32]);
/* Lower-case hex of a digest into out[65]. */
void collgen__hex(const uint8_t digest[32], char out[65]);
#endif
