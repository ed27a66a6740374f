/*
** host_id.c -- the host identity each rank reports at the rendezvous
** (docs/multiprocess.md#host-identity): ranks with equal ids run on one
** kernel with one host name, so they can share memory and descriptors.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bootstrap.h"
#include "internal.h"
#include "sha256.h"

/* The first line of a small system file (at most 127 bytes), or "" when it
** cannot be read. */
static void first_line(const char *path, char out[128]) {
  out[0] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  ssize_t r;
  do r = read(fd, out, 127);
  while (r < 0 && errno == EINTR);
  close(fd);
  out[r > 0 ? r : 0] = 0;
  out[strcspn(out, "\n")] = 0;
}

void collgen__host_id(const char *override, uint8_t host[COLLGEN__HOST_ID_BYTES]) {
  collgen__sha256_ctx h;
  uint8_t digest[32];
  collgen__sha256_init(&h);
  if (override) {
    collgen__sha256_field(&h, "collgen host id override v1", override, strlen(override));
  } else {
    /* boot_id: random per boot of this kernel, so equal across containers of
    ** one machine and different on every other machine or VM; the host
    ** name (as NCCL's host hash does) keeps apart containers that say they
    ** are different hosts. */
    char kernel[128];
    first_line("/proc/sys/kernel/random/boot_id", kernel);
    if (!kernel[0]) first_line("/etc/machine-id", kernel);
    struct utsname u;
    const char *node = uname(&u) == 0 ? u.nodename : "";
    if (!kernel[0])
      collgen__log(COLLGEN_LOG_WARN, "host id: no /proc/sys/kernel/random/boot_id or "
                                     "/etc/machine-id; using the host name \"%s\" alone", node);
    collgen__sha256_field(&h, "collgen host id v1", kernel, strlen(kernel));
    collgen__sha256_field(&h, "nodename", node, strlen(node));
  }
  collgen__sha256_final(&h, digest);
  memcpy(host, digest, COLLGEN__HOST_ID_BYTES);
}
