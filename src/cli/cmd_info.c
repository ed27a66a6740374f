/*
** cmd_info.c -- `collgen info`: versions of collgen, Lua, NVRTC and the
** driver; GPUs and their P2P matrix when a driver loads; the cache.
*/
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "cli.h"
#include "driver.h"
#include "escape.h"

static void count(const char *path, int64_t size, int64_t atime, void *ctx) {
  (void)path;
  (void)atime;
  int64_t *t = ctx;
  t[0]++;
  t[1] += size;
}

int cmd_info(int argc, char **argv) {
  if (argc > 1) {
    if (cli_is_help(argv[1])) {
      puts("usage: collgen info\nPrints versions, GPUs with their P2P matrix, and the cache.");
      return 0;
    }
    return cli_bad_value("info", "unexpected argument", argv[1], "info takes no arguments");
  }
  printf("collgen  %s\n", collgen_version());
  printf("Lua      %s\n", collgen_lua_version());
  int major, minor;
  if (collgen_nvrtc_version(&major, &minor) == COLLGEN_OK) printf("NVRTC    %d.%d\n", major, minor);
  else printf("NVRTC    unavailable (%s)\n", collgen_last_error());
  char err[512];
  if (collgen__driver_load(err, sizeof err) != COLLGEN_OK) {
    printf("driver   unavailable (%s)\nGPUs     none\n", err);
  } else {
    int v = 0, n = 0;
    collgen__cu.cuDriverGetVersion(&v);
    collgen__cu.cuDeviceGetCount(&n);
    printf("driver   CUDA %d.%d\nGPUs     %d\n", v / 1000, (v % 1000) / 10, n);
    CUdevice dev[16];
    for (int i = 0; i < n && i < 16; ++i) {
      char name[256];
      int ma = 0, mi = 0, sms = 0;
      collgen__cu.cuDeviceGet(&dev[i], i);
      collgen__cu.cuDeviceGetName(name, sizeof name, dev[i]);
      collgen__cu.cuDeviceGetAttribute(&ma, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev[i]);
      collgen__cu.cuDeviceGetAttribute(&mi, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev[i]);
      collgen__cu.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev[i]);
      printf("  GPU %d: %s, sm_%d%d, %d SMs\n", i, name, ma, mi, sms);
    }
    if (n > 1) {
      printf("P2P (row can access column; A = native atomics):\n     ");
      for (int j = 0; j < n && j < 16; ++j) printf(" %3d", j);
      printf("\n");
      for (int i = 0; i < n && i < 16; ++i) {
        printf("  %2d ", i);
        for (int j = 0; j < n && j < 16; ++j) {
          int can = 0, atom = 0;
          if (i != j) {
            collgen__cu.cuDeviceCanAccessPeer(&can, dev[i], dev[j]);
            collgen__cu.cuDeviceGetP2PAttribute(&atom, CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED,
                                                dev[i], dev[j]);
          }
          printf(" %3s", i == j ? "X" : !can ? "-" : atom ? "yA" : "y");
        }
        printf("\n");
      }
    }
  }
  char dir[4096];
  if (collgen__default_cache_dir(dir, sizeof dir) == 0) {
    int64_t t[2] = {0, 0};
    collgen__cache_walk(dir, count, t);
    char shown[COLLGEN_ESCAPED_SIZE(sizeof dir)];
    printf("cache    %s (%lld entries, %lld bytes)\n", collgen__escape(dir, shown, sizeof shown),
           (long long)t[0], (long long)t[1]);
  } else {
    printf("cache    none (no COLLGEN_CACHE_DIR, XDG_CACHE_HOME or HOME)\n");
  }
  return 0;
}
