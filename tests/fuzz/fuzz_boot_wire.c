/*
** fuzz_boot_wire.c -- libFuzzer harness for the bootstrap's message parser
** (runtime/bootstrap_wire.c), which reads what peer processes send on the
** one-process-per-GPU socket. The input's first four bytes choose how it is
** read, the rest is the byte stream a peer sends:
**   byte 0: the reader -- 0 rank 0 reading a first message (then
**           collgen__wire_check_hello), 1 a contribution (then
**           collgen__wire_check_contrib), 2 a WELCOME, RESULT or RETRY,
**           3 an FDS message; bits 2..4: how many descriptors ride along
**           (0..7); bit 5: the stream arrives late, in two parts: the
**           reader reads the first until it runs dry (as rank 0 does with
**           a HELLO that is not all there), then the rest is sent;
**   byte 1: the payload room (times 8 bytes) and, for FDS, the descriptor
**           allowance;
**   bytes 2..3: where in the stream the descriptors ride, which is where
**           a late stream is split (big-endian).
** The stream goes through a real socketpair with real SCM_RIGHTS, the
** writer is closed (when late, once the reader ran dry on the first part),
** and messages are read until the first error or the end. Checked for
** every input: no crash, leak or UB (ASan/UBSan); every step ends (no read
** without progress); an accepted message respects its header, the room
** and the allowance, its descriptors are open and close-on-exec; an
** ERROR's text is printable; a RETRY carries nothing; and afterwards
** exactly the descriptors of before are open (nothing received is leaked).
** The id's tag and secret are fixed (bytes 0x11 and 0x22) so the seed
** corpus (tests/fuzz/corpus/boot_wire/) can hold members' HELLOs.
*/
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_wire.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PROBE 64 /* descriptors 0..PROBE-1 are compared before and after */
static uint8_t open_before[PROBE];
static uint8_t tag[COLLGEN__UID_TAG_BYTES], secret[COLLGEN__UID_SECRET_BYTES];
static int spare_fd; /* what rides along: dups of one memfd */

static void snapshot(uint8_t *open_now) {
  for (int fd = 0; fd < PROBE; ++fd) open_now[fd] = fcntl(fd, F_GETFD) >= 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  memset(tag, 0x11, sizeof tag);
  memset(secret, 0x22, sizeof secret);
  spare_fd = memfd_create("fuzz-boot-wire", MFD_CLOEXEC);
  if (spare_fd < 0) abort();
  return 0;
}

/* Sends len bytes of the stream with `nfds` descriptors (dups of one memfd)
** riding on the first; a zero byte carries them if there are no bytes. */
static void send_part(int fd, const uint8_t *p, size_t len, int nfds) {
  static const uint8_t zero = 0;
  int fds[8], closed;
  char err[256];
  for (int i = 0; i < nfds; ++i) fds[i] = spare_fd;
  if (len == 0 && nfds > 0) p = &zero, len = 1;
  if (collgen__wire_send2(fd, p, len, NULL, 0, fds, nfds, 1e18, &closed, err, sizeof err) != 0)
    abort();
}

/* Sends the stream's second part (with the descriptors) and closes the
** writer *w. */
static void send_rest(int *w, const uint8_t *p, size_t len, int nfds) {
  send_part(*w, p, len, nfds);
  close(*w);
  *w = -1;
}

/* The checks of a message the reader accepted. */
static void accepted(const collgen__wire_rx *rx, int reader, size_t cap) {
  const collgen__wire_header *h = &rx->h;
  collgen__wire_header again;
  char why[512];
  if (collgen__wire_parse_header(rx->head, &again, why, sizeof why) != 0) abort();
  if (memcmp(&again, h, sizeof again) != 0) abort();
  if (h->type != COLLGEN__MSG_ERROR && h->length > cap) abort();
  if (rx->nfds != (int)h->nfds || rx->nfds > rx->max_fds) abort();
  for (int i = 0; i < rx->nfds; ++i)
    if (!(fcntl(rx->fds[i], F_GETFD) & FD_CLOEXEC)) abort();
  collgen__wire_info info;
  if (h->type == COLLGEN__MSG_ERROR) {
    char text[COLLGEN__WIRE_MAX_TEXT + 1];
    int st = collgen__wire_parse_error(rx->text, h->length, text, sizeof text);
    if (st >= 0 || strlen(text) != h->length - 4) abort();
    for (const char *c = text; *c; ++c)
      if (*c < 0x20 || *c > 0x7e) abort();
  } else if (reader == 0) {
    why[0] = 0;
    int rc = collgen__wire_check_hello(h, rx->buf, tag, secret, 3, 1234, &info, why, sizeof why);
    if (rc == 0 && (info.nranks != 3 || info.rank < 1 || info.rank > 2 || info.flags)) abort();
    if (rc > 2 || (rc != 0 && !why[0])) abort();
  } else if (reader == 1) {
    int rc = collgen__wire_check_contrib(h, 1, 1, cap, (int)h->nfds, why, sizeof why);
    if (rc == 0 && (h->seq != 1 || h->rank != 1 || h->length != cap)) abort();
  } else if (h->type == COLLGEN__MSG_RETRY) {
    if (h->length != 0 || rx->nfds != 0) abort(); /* a bare "connect again" */
  } else if (h->type == COLLGEN__MSG_WELCOME) {
    for (uint32_t off = 0; off < h->length; off += COLLGEN__WIRE_INFO)
      if (collgen__wire_parse_info(rx->buf + off, &info, why, sizeof why) == 0 &&
          (info.rank >= info.nranks || info.nranks > COLLGEN__BOOT_MAX_RANKS))
        abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int have_snapshot;
  if (!have_snapshot) { /* before the first input: what is open now stays so */
    snapshot(open_before);
    have_snapshot = 1;
  }
  if (size < 4 || size > 60000) return 0;
  int reader = data[0] & 3, nfds = (data[0] >> 2) & 7, late = (data[0] >> 5) & 1;
  size_t cap = reader == 0 ? COLLGEN__WIRE_HELLO : reader == 3 ? 0 : (size_t)data[1] * 8;
  int allowance = reader == 1 ? COLLGEN__BOOT_MAX_FDS : reader == 3 ? data[1] % 9 : 0;
  size_t at = (size_t)data[2] << 8 | data[3];
  const uint8_t *stream = data + 4;
  size_t len = size - 4;
  if (at > len) at = len;

  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) abort();
  int buf = 1 << 20;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
  send_part(sv[0], stream, at, 0);
  if (!late) send_rest(&sv[0], stream + at, len - at, nfds);

  uint8_t *room = malloc(cap ? cap : 1);
  for (int msgs = 0; msgs < 64; ++msgs) {
    collgen__wire_rx rx;
    char err[512];
    collgen__wire_rx_init(&rx, room, cap, allowance);
    int rc;
    size_t before;
    do {
      before = rx.got;
      rc = collgen__wire_rx_step(&rx, sv[1], err, sizeof err);
      if (rc == 0 && rx.got == before && sv[0] >= 0) { /* ran dry: the rest comes late */
        send_rest(&sv[0], stream + at, len - at, nfds);
        continue;
      }
      /* the writer is closed: every step reads, or ends the message */
      if (rc == 0 && rx.got == before) abort();
    } while (rc == 0);
    if (rc < 0) {
      if (rc != COLLGEN_ERR_PEER || !err[0] || rx.nfds != 0) abort();
      break;
    }
    accepted(&rx, reader, cap);
    collgen__wire_rx_close_fds(&rx);
  }
  free(room);
  if (sv[0] >= 0) close(sv[0]); /* the first part held an error or 64 messages */
  close(sv[1]);

  uint8_t now[PROBE];
  snapshot(now);
  if (memcmp(now, open_before, sizeof now) != 0) abort(); /* a descriptor leaked */
  return 0;
}
