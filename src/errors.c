/*
** errors.c -- status code names and descriptions, the thread-local
** last-error buffer, and small helpers shared by every module.
*/
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>
#include <time.h>

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

int collgen__fail(char *buf, size_t n, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (buf && n) vsnprintf(buf, n, fmt, ap);
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

double collgen__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *const op_names[] = {"allreduce_sum", "allgather_rmsnorm"};
static const char *const dtype_names[] = {"bf16", "f16", "f32"};

const char *collgen__op_name(collgen_op_t op) {
  return (unsigned)op < 2 ? op_names[op] : "?";
}

const char *collgen__dtype_name(collgen_dtype_t dtype) {
  return (unsigned)dtype < 3 ? dtype_names[dtype] : "?";
}

int collgen__dtype_bytes(collgen_dtype_t dtype) {
  return dtype == COLLGEN_DTYPE_F32 ? 4 : 2;
}

int collgen__parse_op(const char *s, collgen_op_t *op) {
  for (int i = 0; i < 2; ++i)
    if (strcmp(s, op_names[i]) == 0) { *op = (collgen_op_t)i; return 0; }
  return -1;
}

int collgen__parse_dtype(const char *s, collgen_dtype_t *dtype) {
  for (int i = 0; i < 3; ++i)
    if (strcmp(s, dtype_names[i]) == 0) { *dtype = (collgen_dtype_t)i; return 0; }
  return -1;
}

const char *collgen_version(void) { return COLLGEN_VERSION_STRING; }

void collgen_shape_init(collgen_shape_t *shape, collgen_op_t op) {
  memset(shape, 0, sizeof *shape);
  shape->op = op;
  shape->dtype = COLLGEN_DTYPE_BF16;
  shape->ngpus = 2;
  shape->group_size = 0;
  shape->tensor_rank = op == COLLGEN_OP_ALLREDUCE_SUM ? 1 : 2;
  shape->elems = 1;
  shape->rows = 1;
  shape->cols = 4096;
  shape->aligned16 = 1;
  snprintf(shape->arch, sizeof shape->arch, "sm_90");
}
