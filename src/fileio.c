/*
** fileio.c -- small POSIX I/O helpers shared by the cache and the CLI.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

#include "internal.h"

int collgen__read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}
