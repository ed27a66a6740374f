/*
** lua_snapshot.c -- the files a generator's Lua state can read, read once
** when the generator is created.
**
** The snapshot is the embedded copies of gen/ and templates/, or the same
** list of files from $COLLGEN_TEMPLATE_DIR (which must hold all of them).
** Lua code can load nothing else: read_source(path) and import(name)
** (lua_host_fns.c) look a name up here, and refuse absolute paths and
** '.'/'..' components. The bundle hash covers exactly the snapshot and the
** catalog, so the cache key covers every byte a render can read.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "embedded.h"
#include "lua_internal.h"

#define MAX_SOURCE_BYTES (16 << 20)  /* largest file read from a template dir */

/* Reads a regular file of at most MAX_SOURCE_BYTES into a malloc'd
** NUL-terminated buffer; NULL with errno set on failure. */
static char *read_file(const char *path, size_t *size) {
  struct stat st;
  if (stat(path, &st) != 0) return NULL;
  if (!S_ISREG(st.st_mode)) {
    errno = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    return NULL;
  }
  if (st.st_size > MAX_SOURCE_BYTES) {
    errno = EFBIG;
    return NULL;
  }
  FILE *fp = fopen(path, "rb");
  if (!fp) return NULL;
  size_t cap = (size_t)st.st_size + 1;
  char *buf = malloc(cap + 1);
  size_t len = buf ? fread(buf, 1, cap, fp) : 0;
  int bad = !buf ? ENOMEM : ferror(fp) || len >= cap ? EIO : 0; /* EIO: grew while read */
  fclose(fp);
  if (bad) {
    free(buf);
    errno = bad;
    return NULL;
  }
  buf[len] = 0;
  *size = len;
  return buf;
}

void collgen__lua_free_files(collgen__lua *h) {
  for (int i = 0; i < h->nfiles; ++i)
    if (h->files[i].owned) free((char *)h->files[i].text);
  free(h->files);
  h->files = NULL;
  h->nfiles = 0;
}

/* Fills h->files: every file of the embedded list, from the embedded
** copies or from the template dir, which must be a template tree holding
** all of them. */
int collgen__lua_load_files(collgen__lua *h, char *err, size_t n) {
  int count = 0;
  while (collgen__embedded_files[count].path) ++count;
  h->files = calloc((size_t)count, sizeof *h->files);
  if (!h->files) return collgen__fail(err, n, COLLGEN_ERR_NO_MEMORY, "out of memory");
  const char *dir = h->template_dir;
  struct stat st;
  int bad_dir = !dir ? 0 : stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
  if (bad_dir)
    return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE,
                         "COLLGEN_TEMPLATE_DIR=%s is not a template tree (%s); unset it to "
                         "use the embedded templates", dir, strerror(bad_dir));
  /* gen/main.lua first: without it the directory is not a template tree */
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < count; ++i) {
      const collgen__embedded_file *f = &collgen__embedded_files[i];
      int is_main = strcmp(f->path, "gen/main.lua") == 0;
      if (is_main != (pass == 0)) continue;
      collgen__lua_file *s = &h->files[h->nfiles++];
      s->path = f->path;
      if (!dir) {
        s->text = (const char *)f->bytes;
        s->size = f->size;
        continue;
      }
      char full[4096];
      if (snprintf(full, sizeof full, "%s/%s", dir, f->path) >= (int)sizeof full)
        return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE,
                             "COLLGEN_TEMPLATE_DIR=%s: path too long", dir);
      char *text = read_file(full, &s->size);
      if (!text)
        return collgen__fail(err, n, COLLGEN_ERR_TEMPLATE,
                             is_main ? "COLLGEN_TEMPLATE_DIR=%s is not a template tree: "
                                       "cannot read %s (%s)"
                                     : "COLLGEN_TEMPLATE_DIR=%s: cannot read %s (%s); a "
                                       "template tree holds every file of gen/ and templates/",
                             dir, f->path, strerror(errno));
      s->text = text;
      s->owned = 1;
    }
  }
  return COLLGEN_OK;
}

const collgen__lua_file *collgen__lua_find_file(const collgen__lua *h, const char *path) {
  for (int i = 0; i < h->nfiles; ++i)
    if (strcmp(h->files[i].path, path) == 0) return &h->files[i];
  return NULL;
}

/* 1 when path names a place inside the tree: relative, no empty, '.' or
** '..' component, no backslash. Whether the file exists is another matter. */
int collgen__lua_path_inside_tree(const char *path, size_t len) {
  if (len == 0 || path[0] == '/' || strlen(path) != len || strchr(path, '\\')) return 0;
  for (const char *c = path; *c;) {
    size_t l = strcspn(c, "/");
    if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.')) return 0;
    c += l;
    if (*c == '/') ++c;
    if (*c == 0 && c[-1] == '/') return 0;
  }
  return 1;
}

/* Hashes the snapshot into s, in the embedded list's order. */
void collgen__lua_hash_files(const collgen__lua *h, collgen__sha256_ctx *s) {
  for (const collgen__embedded_file *e = collgen__embedded_files; e->path; ++e) {
    const collgen__lua_file *f = collgen__lua_find_file(h, e->path);
    collgen__sha256_field(s, e->path, f->text, f->size);
  }
}
