/*
** internal.h -- declarations shared by collgen's C modules (not installed).
** Internal names are collgen__<module>_*; nothing here is public API.
*/
#ifndef COLLGEN_INTERNAL_H
#define COLLGEN_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog.h"
#include "collgen.h"

#define COLLGEN_ERRBUF 8192
#define COLLGEN_UNUSED(x) ((void)(x))

/* Formats a message into buf (truncating) and returns `status`, so callers
** can write `return collgen__fail(buf, n, COLLGEN_ERR_X, "...", ...)`. */
int collgen__fail(char *buf, size_t n, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with a va_list, for other failure helpers. */
int collgen__vfail(char *buf, size_t n, int status, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
/* The same, recording into the thread-local last-error buffer. */
int collgen__fail_tls(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Copies a message into the thread-local last-error buffer. */
void collgen__set_tls_error(const char *msg);

/* Monotonic time in milliseconds. */
double collgen__now_ms(void);
/* Milliseconds from now until `deadline` (a collgen__now_ms time), rounded
** up, for poll(2): 0 once it has passed, at most 10^9. */
int collgen__ms_left(double deadline);


/* Environment parameters, read once (see docs/environment.md). */
const char *collgen__param_template_dir(void);  /* COLLGEN_TEMPLATE_DIR or NULL */
int collgen__param_dump_source(void);           /* COLLGEN_DUMP_SOURCE=1 */
int64_t collgen__param_cache_max_bytes(void);   /* COLLGEN_CACHE_MAX_BYTES */
int collgen__param_cache_disable(void);         /* COLLGEN_CACHE_DISABLE=1 */
int collgen__param_timeout_ms(void);            /* COLLGEN_TIMEOUT_MS */
int collgen__param_jit_threads(void);           /* COLLGEN_JIT_THREADS: compile threads of prepare */
#define COLLGEN_DEFAULT_JIT_THREADS 8            /* at most this many unless the variable says */
#define COLLGEN_MAX_JIT_THREADS 64

/* Reads exactly n bytes from fd (retrying on EINTR); 0, or -1 on an error
** or an early end of file. */
int collgen__read_full(int fd, void *buf, size_t n);

/* Resolves the default cache directory into buf; returns 0 or -1. */
int collgen__default_cache_dir(char *buf, size_t n);

/* Sends one message (printf format, no newline) of `level` (COLLGEN_LOG_*)
** to the log handler, else to stderr if $COLLGEN_LOG asks for the level,
** else nowhere (src/log.c). Thread-safe. */
void collgen__log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
