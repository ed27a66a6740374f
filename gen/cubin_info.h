/*
** cubin_info.h -- reads what the runtime relies on out of a cubin without
** cuobjdump: the kernel symbol, its parameter layout and register count
** (from the ELF symbol table and the .nv.info sections).
*/
#ifndef COLLGEN_CUBIN_INFO_H
#define COLLGEN_CUBIN_INFO_H
#include <stddef.h>

typedef struct {
  int found;         /* a global function symbol with the kernel's name */
  int param_count;   /* EIATTR_KPARAM_INFO entries */
  int param_bytes;   /* EIATTR_CBANK_PARAM_SIZE */
  int registers;     /* EIATTR_REGCOUNT, -1 if absent */
  int frame_bytes;   /* EIATTR_FRAME_SIZE: local memory (spills, arrays) */
} collgen__cubin_kernel;

/* Inspects `kernel` in a cubin. Returns 0, or -1 if the data is not a
** well-formed 64-bit ELF. */
int collgen__cubin_inspect(const void *cubin, size_t size, const char *kernel,
                           collgen__cubin_kernel *out);
#endif
