/*
** cubin_info.c -- a minimal ELF64 reader for cubins. .nv.info attributes are
** records of (format, attribute, payload): format 4 carries a 16-bit length
** and that many bytes, formats 1-3 a 16-bit inline value.
*/
#include <stdint.h>
#include <string.h>

#include "cubin_info.h"

#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_REGCOUNT 0x2f
#define EIATTR_FRAME_SIZE 0x11

typedef struct {
  uint32_t name, type;
  uint64_t flags, addr, offset, size;
  uint32_t link, info;
  uint64_t align, entsize;
} sec_t;

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static int read_sec(const uint8_t *d, size_t size, uint64_t off, sec_t *s) {
  if (off + 64 > size) return -1;
  s->name = rd32(d + off);
  s->type = rd32(d + off + 4);
  s->flags = rd64(d + off + 8);
  s->addr = rd64(d + off + 16);
  s->offset = rd64(d + off + 24);
  s->size = rd64(d + off + 32);
  s->link = rd32(d + off + 40);
  s->info = rd32(d + off + 44);
  s->align = rd64(d + off + 48);
  s->entsize = rd64(d + off + 56);
  return s->offset + s->size <= size || s->type == 8 /* NOBITS */ ? 0 : -1;
}

/* Calls fn(attr, payload, len, ctx) for each record of an .nv.info section. */
static void each_attr(const uint8_t *p, uint64_t n,
                      void (*fn)(int, const uint8_t *, int, void *), void *ctx) {
  uint64_t i = 0;
  while (i + 4 <= n) {
    int fmt = p[i], attr = p[i + 1];
    if (fmt == 4) {
      int len = rd16(p + i + 2);
      if (i + 4 + (uint64_t)len > n) return;
      fn(attr, p + i + 4, len, ctx);
      i += 4 + (uint64_t)len;
    } else {
      fn(attr, p + i + 2, 2, ctx);
      i += 4;
    }
  }
}

typedef struct {
  collgen__cubin_kernel *out;
  uint32_t sym_index;
} attr_ctx;

static void kernel_attr(int attr, const uint8_t *p, int len, void *vctx) {
  attr_ctx *c = vctx;
  if (attr == EIATTR_KPARAM_INFO) c->out->param_count++;
  if (attr == EIATTR_CBANK_PARAM_SIZE && len >= 2) c->out->param_bytes = rd16(p);
}

static void global_attr(int attr, const uint8_t *p, int len, void *vctx) {
  attr_ctx *c = vctx;
  if (attr == EIATTR_REGCOUNT && len >= 8 && rd32(p) == c->sym_index)
    c->out->registers = (int)rd32(p + 4);
  if (attr == EIATTR_FRAME_SIZE && len >= 8 && rd32(p) == c->sym_index)
    c->out->frame_bytes = (int)rd32(p + 4);
}

int collgen__cubin_inspect(const void *cubin, size_t size, const char *kernel,
                           collgen__cubin_kernel *out) {
  const uint8_t *d = cubin;
  memset(out, 0, sizeof *out);
  out->registers = -1;
  if (size < 64 || memcmp(d, "\177ELF", 4) != 0 || d[4] != 2) return -1;
  uint64_t shoff = rd64(d + 0x28);
  uint16_t shentsize = rd16(d + 0x3a), shnum = rd16(d + 0x3c), shstrndx = rd16(d + 0x3e);
  if (shentsize != 64 || shstrndx >= shnum) return -1;
  sec_t strsec;
  if (read_sec(d, size, shoff + (uint64_t)shstrndx * 64, &strsec) != 0) return -1;

  char want[256];
  strncpy(want, ".nv.info.", sizeof want - 1);
  want[sizeof want - 1] = 0;
  strncat(want, kernel, sizeof want - strlen(want) - 1);
  attr_ctx ctx = {out, 0};
  int sym_found = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint16_t i = 0; i < shnum; ++i) {
      sec_t s;
      if (read_sec(d, size, shoff + (uint64_t)i * 64, &s) != 0) return -1;
      if (strsec.offset + s.name >= size) return -1;
      const char *name = (const char *)d + strsec.offset + s.name;
      if (pass == 0 && s.type == 2 /* SYMTAB */ && s.entsize == 24) {
        sec_t strtab;
        if (read_sec(d, size, shoff + (uint64_t)s.link * 64, &strtab) != 0) return -1;
        for (uint64_t k = 0; k < s.size / 24; ++k) {
          const uint8_t *sym = d + s.offset + k * 24;
          uint32_t nm = rd32(sym);
          if (strtab.offset + nm >= size) continue;
          const char *sname = (const char *)d + strtab.offset + nm;
          int bind = sym[4] >> 4, type = sym[4] & 15;
          if (type == 2 && bind == 1 && strcmp(sname, kernel) == 0) {
            sym_found = 1;
            ctx.sym_index = (uint32_t)k;
          }
        }
      }
      if (pass == 1 && strcmp(name, want) == 0)
        each_attr(d + s.offset, s.size, kernel_attr, &ctx);
      if (pass == 1 && strcmp(name, ".nv.info") == 0 && sym_found)
        each_attr(d + s.offset, s.size, global_attr, &ctx);
    }
  }
  out->found = sym_found;
  return 0;
}
