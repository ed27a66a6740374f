/*
** clock.c -- the monotonic clock every module times with.
*/
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "internal.h"

double collgen__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int collgen__ms_left(double deadline) {
  double left = deadline - collgen__now_ms();
  if (left <= 0) return 0;
  return left >= 1e9 ? 1000000000 : (int)left + 1;
}
