/*
** log.c -- the library's one way to say something: the process-wide log
** handler (collgen_set_log_handler), else stderr at the levels $COLLGEN_LOG
** asks for (default: nothing).
*/
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The handler and its argument change together: both under handler_lock. */
static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static collgen_log_fn handler_fn;
static void *handler_user;

/* Highest level printed to stderr when there is no handler; 0 = none.
** Read once from $COLLGEN_LOG (not through param.c, which logs itself). */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_level;

static void read_env(void) {
  const char *v = getenv("COLLGEN_LOG");
  if (v && strcmp(v, "warn") == 0) env_level = COLLGEN_LOG_WARN;
  else if (v && strcmp(v, "info") == 0) env_level = COLLGEN_LOG_INFO;
  else env_level = 0; /* unset, "off" or anything else */
}

void collgen_set_log_handler(collgen_log_fn fn, void *user) {
  pthread_mutex_lock(&handler_lock);
  handler_fn = fn;
  handler_user = user;
  pthread_mutex_unlock(&handler_lock);
}

void collgen__log(int level, const char *fmt, ...) {
  pthread_mutex_lock(&handler_lock);
  collgen_log_fn fn = handler_fn;
  void *user = handler_user;
  pthread_mutex_unlock(&handler_lock);
  if (!fn) {
    pthread_once(&env_once, read_env);
    if (level > env_level) return;
  }
  char msg[COLLGEN_ERRBUF];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (fn) fn(level, msg, user); /* called unlocked: it may log or swap itself */
  else fprintf(stderr, "collgen: %s%s\n", level == COLLGEN_LOG_WARN ? "warning: " : "", msg);
}
