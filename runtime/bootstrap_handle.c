/*
** bootstrap_handle.c -- what the bootstrap's front end (bootstrap.c) and
** its transports (bootstrap_socket.c, bootstrap_callback.c) share below
** them: the handle's failure record and the socket name of an id's tag
** (bootstrap_handle.h).
*/
#include <stdarg.h>
#include <stdio.h>

#include "bootstrap_handle.h"

int collgen__boot_fail(collgen__boot *b, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  collgen__vfail(b->err, sizeof b->err, status, fmt, ap);
  va_end(ap);
  return status;
}

void collgen__boot_name(const uint8_t tag[COLLGEN__UID_TAG_BYTES], char name[48]) {
  static const char digits[] = "0123456789abcdef";
  int k = snprintf(name, 48, "collgen-boot-");
  for (int i = 0; i < COLLGEN__UID_TAG_BYTES; ++i) {
    name[k++] = digits[tag[i] >> 4];
    name[k++] = digits[tag[i] & 15];
  }
  name[k] = 0;
}
