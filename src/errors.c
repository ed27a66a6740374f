/*
** errors.c -- status code names and descriptions, and the error buffers
** (per handle and thread-local) every module reports into.
*/
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local char tls_error[COLLGEN_ERRBUF];

const char *collgen_status_str(int status) {
  switch (status) {
#define DESC(name, value, desc) case value: return desc;
    COLLGEN_ERRNO_MAP(DESC)
#undef DESC
  }
  return "unknown status code";
}

const char *collgen_status_name(int status) {
  switch (status) {
#define NAME(name, value, desc) case value: return "COLLGEN_ERR_" #name;
    COLLGEN_ERRNO_MAP(NAME)
#undef NAME
  }
  return "COLLGEN_ERR_UNKNOWN";
}

const char *collgen_last_error(void) { return tls_error; }

void collgen__set_tls_error(const char *msg) {
  snprintf(tls_error, sizeof tls_error, "%s", msg ? msg : "");
}

int collgen__vfail(char *buf, size_t n, int status, const char *fmt, va_list ap) {
  if (buf && n) vsnprintf(buf, n, fmt, ap);
  return status;
}

int collgen__fail(char *buf, size_t n, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  collgen__vfail(buf, n, status, fmt, ap);
  va_end(ap);
  return status;
}

int collgen__fail_tls(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tls_error, sizeof tls_error, fmt, ap);
  va_end(ap);
  return status;
}
