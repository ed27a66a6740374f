/*
** test_util.h -- helpers shared by the Criterion tests.
*/
#ifndef COLLGEN_TEST_UTIL_H
#define COLLGEN_TEST_UTIL_H
#include <stddef.h>
#include <stdint.h>

/* Creates a fresh empty directory under $TMPDIR and returns its path
** (static storage per call site is not needed: caller copies). */
void tu_make_temp_dir(char *out, size_t n);
/* Removes a directory tree (rm -rf). */
void tu_remove_tree(const char *path);
/* Runs a shell command, capturing stdout+stderr into a malloc'd string;
** returns the exit status. */
int tu_run(const char *cmd, char **output);
/* Reads a whole file (malloc'd, NUL-terminated) or NULL. */
char *tu_read_file(const char *path, size_t *size);
/* Writes a file; returns 0 on success. */
int tu_write_file(const char *path, const char *data, size_t size);
/* xorshift random numbers seeded from time and pid (fresh data per run). */
uint64_t tu_rand(void);
#endif
