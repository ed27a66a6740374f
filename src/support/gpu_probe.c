/*
** gpu_probe.c -- counts the visible GPUs from a child process (see
** gpu_probe.h).
*/
#define _POSIX_C_SOURCE 200809L
#include "gpu_probe.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "driver.h"
#include "internal.h"

#define PROBE_MS 60000 /* bound on counting the GPUs */

/* Reads everything from fd into buf (at most n - 1 bytes, NUL-terminated)
** until EOF or timeout_ms; returns the byte count. */
static size_t read_all(int fd, char *buf, size_t n, int timeout_ms) {
  size_t len = 0;
  double end = collgen__now_ms() + timeout_ms;
  while (len + 1 < n) {
    struct pollfd p = {fd, POLLIN, 0};
    int left = (int)(end - collgen__now_ms());
    if (left <= 0 || poll(&p, 1, left) <= 0) break;
    ssize_t r = read(fd, buf + len, n - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  buf[len] = 0;
  return len;
}

int collgen__gpu_count_in_child(char *why, size_t n) {
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(why, n, "pipe: %s", strerror(errno));
    return 0;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    char err[512], msg[600];
    int count = 0;
    if (collgen__driver_load(err, sizeof err) == COLLGEN_OK)
      collgen__cu.cuDeviceGetCount(&count);
    else
      count = -1;
    int len = count >= 0 ? snprintf(msg, sizeof msg, "%d", count)
                         : snprintf(msg, sizeof msg, "-1 %s", err);
    ssize_t w = write(fds[1], msg, (size_t)len);
    _exit(w == len ? 0 : 1);
  }
  close(fds[1]);
  char msg[600] = "";
  if (pid > 0) read_all(fds[0], msg, sizeof msg, PROBE_MS);
  close(fds[0]);
  if (pid > 0) {
    kill(pid, SIGKILL); /* it has written or is stuck; either way it is done */
    waitpid(pid, NULL, 0);
  }
  int count = pid > 0 ? atoi(msg) : 0;
  if (pid < 0) snprintf(why, n, "fork: %s", strerror(errno));
  else if (count < 0) snprintf(why, n, "%s", strchr(msg, ' ') ? strchr(msg, ' ') + 1 : msg);
  else if (count == 0) snprintf(why, n, "%s", msg[0] ? "the driver reports 0 devices"
                                                     : "the GPU count did not come back");
  return count > 0 ? count : 0;
}
