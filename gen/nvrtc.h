/*
** nvrtc.h -- NVRTC loaded at run time with dlopen (never linked), and the
** compile step that turns generated CUDA C into a cubin.
*/
#ifndef COLLGEN_NVRTC_H
#define COLLGEN_NVRTC_H
#include "internal.h"

/* Fixed NVRTC options (besides the arch); hashed into every cache key. */
extern const char *const collgen__nvrtc_options[];

/* Loads NVRTC once per process ($COLLGEN_NVRTC_LIBRARY, libnvrtc.so.13,
** .12, .so). Thread-safe. COLLGEN_ERR_NO_NVRTC with the dlerror text. */
int collgen__nvrtc_load(char *err, size_t n);

/* 1 and the version if NVRTC is already loaded in this process; never
** loads it (loading costs ~25 ms, too much for a warm cache hit). */
int collgen__nvrtc_loaded(int *major, int *minor);

typedef struct {
  uint8_t *cubin;   /* malloc'd */
  size_t size;
  char *log;        /* malloc'd compile log (may be empty) */
  int registers;    /* from the ptxas -v lines, -1 if absent */
  int spill_bytes;  /* spill stores + loads */
} collgen__compiled;

/* Compiles `source` for `arch` ("sm_90"). On COLLGEN_ERR_COMPILE the log is
** in out->log (caller frees out->cubin and out->log in every case). */
int collgen__nvrtc_compile(const char *source, const char *name,
                           const char *arch, collgen__compiled *out,
                           char *err, size_t n);

/* Parses "Used N registers" and spill lines from a ptxas -v log. */
void collgen__parse_ptxas_log(const char *log, int *registers, int *spills);
#endif
