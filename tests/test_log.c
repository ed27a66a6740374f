/*
** test_log.c -- the library prints nothing unless asked: a log handler
** receives the cache's and the parameters' warnings, COLLGEN_LOG picks the
** levels printed to stderr without one, and unset means silence. Each test
** runs in its own process, so each reads COLLGEN_LOG afresh.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "internal.h"
#include "test_util.h"

/* A directory no one can create, root included. */
#define UNUSABLE_DIR "/proc/collgen-nope/cache"

typedef struct {
  int count;
  int level[8];
  char text[8][512];
} captured;

static void capture(int level, const char *message, void *user) {
  captured *c = user;
  if (c->count < 8) {
    c->level[c->count] = level;
    snprintf(c->text[c->count], sizeof c->text[0], "%s", message);
  }
  ++c->count;
}

/* Runs fn with stderr sent to a temp file; returns what it wrote (malloc'd). */
static char *stderr_of(void (*fn)(void)) {
  char path[] = "/tmp/collgen-test-log-XXXXXX";
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  fn();
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(fd);
  char *text = tu_read_file(path, NULL);
  unlink(path);
  cr_assert(text);
  return text;
}

static void open_unusable_cache(void) {
  collgen__cache *c = NULL;
  cr_assert_eq(collgen__cache_open(&c, UNUSABLE_DIR), COLLGEN_OK);
  cr_expect_null(collgen__cache_dir(c), "the cache falls back to memory");
  collgen__cache_close(c);
}

static void log_both_levels(void) {
  collgen__log(COLLGEN_LOG_WARN, "a warning %d", 1);
  collgen__log(COLLGEN_LOG_INFO, "some information %d", 2);
}

static void quiet_env(void) {
  unsetenv("COLLGEN_LOG");
  unsetenv("COLLGEN_CACHE_DISABLE");
}

Test(log, handler_receives_cache_warning, .init = quiet_env) {
  captured got = {0};
  collgen_set_log_handler(capture, &got);
  char *err = stderr_of(open_unusable_cache);
  cr_expect_str_empty(err, "a handler takes the message off stderr: %s", err);
  free(err);
  cr_assert_eq(got.count, 1);
  cr_expect_eq(got.level[0], COLLGEN_LOG_WARN);
  cr_expect(strstr(got.text[0], "cache directory " UNUSABLE_DIR " is not usable"), "%s",
            got.text[0]);
  cr_expect_null(strchr(got.text[0], '\n'), "one line, no newline");
  cr_expect_neq(strncmp(got.text[0], "collgen:", 8), 0, "no prefix: %s", got.text[0]);
}

Test(log, handler_receives_parameter_warning, .init = quiet_env) {
  captured got = {0};
  collgen_set_log_handler(capture, &got);
  setenv("COLLGEN_TIMEOUT_MS", "soon", 1);
  cr_expect_eq(collgen__param_timeout_ms(), COLLGEN_DEFAULT_TIMEOUT_MS, "a bad value keeps the default");
  cr_assert_eq(got.count, 1);
  cr_expect_eq(got.level[0], COLLGEN_LOG_WARN);
  cr_expect_str_eq(got.text[0], "ignoring COLLGEN_TIMEOUT_MS=soon (not an integer in 1..86400000)");
}

/* Values that once wrapped through an int cast (to 0 ns, or to no bound)
** are refused whole; each test is its own process, so each reads afresh. */
Test(log, timeout_that_wraps_an_int_is_refused, .init = quiet_env) {
  captured got = {0};
  collgen_set_log_handler(capture, &got);
  setenv("COLLGEN_TIMEOUT_MS", "4294967296", 1);
  cr_expect_eq(collgen__param_timeout_ms(), COLLGEN_DEFAULT_TIMEOUT_MS, "2^32 ms once became 0");
  cr_expect_eq(got.count, 1);
}

Test(log, timeout_past_int64_is_refused, .init = quiet_env) {
  captured got = {0};
  collgen_set_log_handler(capture, &got);
  setenv("COLLGEN_TIMEOUT_MS", "99999999999999999999", 1);
  cr_expect_eq(collgen__param_timeout_ms(), COLLGEN_DEFAULT_TIMEOUT_MS, "ERANGE is an error, not LLONG_MAX");
  cr_expect_eq(got.count, 1);
}

Test(log, timeout_in_range_is_taken, .init = quiet_env) {
  setenv("COLLGEN_TIMEOUT_MS", "86400000", 1);
  cr_expect_eq(collgen__param_timeout_ms(), 86400000);
}

Test(log, handler_gets_every_level_and_null_restores_default, .init = quiet_env) {
  captured got = {0};
  collgen_set_log_handler(capture, &got);
  log_both_levels();
  cr_assert_eq(got.count, 2);
  cr_expect_eq(got.level[1], COLLGEN_LOG_INFO);
  cr_expect_str_eq(got.text[1], "some information 2");
  collgen_set_log_handler(NULL, NULL);
  char *err = stderr_of(log_both_levels);
  cr_expect_str_empty(err, "%s", err);
  free(err);
  cr_expect_eq(got.count, 2, "the old handler is not called any more");
}

Test(log, silent_without_collgen_log, .init = quiet_env) {
  char *err = stderr_of(open_unusable_cache);
  cr_expect_str_empty(err, "nothing on stderr without COLLGEN_LOG: %s", err);
  free(err);
  err = stderr_of(log_both_levels);
  cr_expect_str_empty(err, "%s", err);
  free(err);
}

Test(log, collgen_log_off_is_silent, .init = quiet_env) {
  setenv("COLLGEN_LOG", "off", 1);
  char *err = stderr_of(open_unusable_cache);
  cr_expect_str_empty(err, "%s", err);
  free(err);
}

Test(log, collgen_log_warn_prints_warnings_only, .init = quiet_env) {
  setenv("COLLGEN_LOG", "warn", 1);
  char *err = stderr_of(log_both_levels);
  cr_expect_str_eq(err, "collgen: warning: a warning 1\n");
  free(err);
  err = stderr_of(open_unusable_cache);
  cr_expect(strstr(err, "collgen: warning: cache directory " UNUSABLE_DIR " is not usable"),
            "%s", err);
  free(err);
}

Test(log, collgen_log_info_prints_both_levels, .init = quiet_env) {
  setenv("COLLGEN_LOG", "info", 1);
  char *err = stderr_of(log_both_levels);
  cr_expect_str_eq(err, "collgen: warning: a warning 1\ncollgen: some information 2\n");
  free(err);
}
