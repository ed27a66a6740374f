/*
** version.c -- collgen's own version (Lua's and NVRTC's are reported by the
** modules that load them).
*/
#include "internal.h"

const char *collgen_version(void) { return COLLGEN_VERSION_STRING; }
