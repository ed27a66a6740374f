/*
** test_api.c -- the public API's contracts that need no GPU: status codes
** and their text, NULL and bad arguments refused with a message, and the
** runtime's refusal when no CUDA driver is present.
*/
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "collgen.h"
#include "shape.h"
#include "driver.h"

Test(api, status_codes_have_names_and_text) {
  cr_expect_str_eq(collgen_status_name(COLLGEN_OK), "COLLGEN_ERR_OK");
  cr_expect_str_eq(collgen_status_name(COLLGEN_ERR_NO_P2P), "COLLGEN_ERR_NO_P2P");
  cr_expect_str_eq(collgen_status_name(COLLGEN_ERR_TIMEOUT), "COLLGEN_ERR_TIMEOUT");
  cr_expect_str_eq(collgen_status_str(COLLGEN_ERR_NO_NVRTC), "NVRTC library could not be loaded");
  cr_expect_str_eq(collgen_status_name(-999), "COLLGEN_ERR_UNKNOWN");
  cr_expect_str_eq(collgen_status_str(-999), "unknown status code");
  for (int code = 0; code >= COLLGEN_ERR_PEER; --code) {
    cr_expect(strncmp(collgen_status_name(code), "COLLGEN_ERR_", 12) == 0);
    cr_expect_str_neq(collgen_status_str(code), "unknown status code", "code %d", code);
  }
}

Test(api, null_arguments_are_refused) {
  collgen_plan_t plan;
  collgen_shape_t shape;
  collgen_kernel_info_t info;
  char *src;
  collgen_shape_init(&shape, COLLGEN_OP_ALLREDUCE_SUM);
  cr_expect_eq(collgen_generator_create(NULL, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_plan(NULL, &shape, &plan), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_generate_source(NULL, &shape, 1, &src), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_get_kernel(NULL, &shape, &info), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strlen(collgen_last_error()) > 0);
  cr_expect_eq(collgen_comm_check(NULL), COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_allreduce_sum(NULL, COLLGEN_DTYPE_BF16, 1, NULL, NULL, NULL, 0, NULL),
               COLLGEN_ERR_INVALID_ARG);
  cr_expect_eq(collgen_comm_info(NULL, NULL), COLLGEN_ERR_INVALID_ARG);
  collgen_generator_destroy(NULL);
  collgen_comm_destroy(NULL);
}

Test(api, unknown_op_and_dtype_are_refused) {
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK);
  collgen_shape_t s;
  collgen_plan_t plan;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  s.op = (collgen_op_t)99;
  cr_expect_eq(collgen_plan(g, &s, &plan), COLLGEN_ERR_INVALID_ARG);
  cr_expect(strstr(collgen_generator_last_error(g), "unknown op"));
  collgen_generator_destroy(g);
}

Test(api, comm_create_without_driver_says_why) {
  char err[512];
  if (collgen__driver_load(err, sizeof err) == COLLGEN_OK) cr_skip_test("a CUDA driver is present");
  int dev[2] = {0, 1};
  collgen_comm_t *comm = (collgen_comm_t *)0x1;
  cr_expect_eq(collgen_comm_create(&comm, 2, dev, NULL), COLLGEN_ERR_NO_DRIVER);
  cr_expect_null(comm, "nothing is returned on failure");
  cr_expect(strstr(collgen_last_error(), "CUDA driver") || strstr(collgen_last_error(), "cuInit"),
            "%s", collgen_last_error());
}

Test(api, missing_nvrtc_is_a_clear_error) {
  /* An explicit library path that does not exist: no fallback, and with an
  ** empty cache the kernel cannot be built; the error must say so. */
  setenv("COLLGEN_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so", 1);
  setenv("COLLGEN_CACHE_DISABLE", "1", 1);
  collgen_generator_t *g;
  cr_assert_eq(collgen_generator_create(&g, NULL), COLLGEN_OK);
  collgen_shape_t s;
  collgen_kernel_info_t info;
  collgen_shape_init(&s, COLLGEN_OP_ALLREDUCE_SUM);
  cr_expect_eq(collgen_get_kernel(g, &s, &info), COLLGEN_ERR_NO_NVRTC);
  cr_expect(strstr(collgen_generator_last_error(g), "not in the cache and cannot load NVRTC"),
            "%s", collgen_generator_last_error(g));
  int major, minor;
  cr_expect_eq(collgen_nvrtc_version(&major, &minor), COLLGEN_ERR_NO_NVRTC);
  collgen_generator_destroy(g);
}

/* The scatter rule of the reduce-scatter ops: contiguous chunks in group
** rank order covering every row, the first n % g one row longer. */
Test(api, scatter_chunks_cover_the_rows_in_order) {
  for (int64_t n = 0; n <= 40; ++n)
    for (int g = 1; g <= 8; ++g) {
      int64_t next = 0;
      for (int i = 0; i < g; ++i) {
        int64_t start = -1, count = -1;
        collgen__scatter_chunk(n, g, i, &start, &count);
        cr_assert_eq(start, next, "n %lld g %d rank %d starts at %lld", (long long)n, g, i,
                     (long long)start);
        cr_assert_eq(count, n / g + (i < n % g), "n %lld g %d rank %d has %lld rows",
                     (long long)n, g, i, (long long)count);
        next += count;
      }
      cr_assert_eq(next, n);
    }
  int64_t start = 0, count = 0;
  collgen__scatter_chunk((int64_t)1 << 40, 7, 6, &start, &count);
  cr_assert_eq(start + count, (int64_t)1 << 40);
}

/* The public form of the rule (bindings size outputs with it): the same
** chunks, and every bad argument refused with a message, outputs untouched. */
Test(api, public_scatter_chunk_is_the_rule_and_checks_its_arguments) {
  for (int64_t n = 0; n <= 20; ++n)
    for (int g = 1; g <= 8; ++g)
      for (int i = 0; i < g; ++i) {
        int64_t s0, c0, s1 = -1, c1 = -1;
        collgen__scatter_chunk(n, g, i, &s0, &c0);
        cr_assert_eq(collgen_scatter_chunk(n, g, i, &s1, &c1), COLLGEN_OK);
        cr_assert(s0 == s1 && c0 == c1, "n %lld g %d rank %d", (long long)n, g, i);
      }
  static const struct {
    int64_t n;
    int g, i;
    const char *msg;
  } bad[] = {{-1, 2, 0, "rows is -1"},
             {4, 0, 0, "group_size is 0"},
             {4, 2, 2, "group_rank 2 is not in [0, 2)"},
             {4, 2, -1, "group_rank -1 is not in [0, 2)"}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
    int64_t start = 77, count = 77;
    cr_assert_eq(collgen_scatter_chunk(bad[k].n, bad[k].g, bad[k].i, &start, &count),
                 COLLGEN_ERR_INVALID_ARG);
    cr_assert(strstr(collgen_last_error(), bad[k].msg), "%s", collgen_last_error());
    cr_assert(start == 77 && count == 77);
  }
  int64_t start;
  cr_assert_eq(collgen_scatter_chunk(4, 2, 0, &start, NULL), COLLGEN_ERR_INVALID_ARG);
  cr_assert(strstr(collgen_last_error(), "count is NULL"));
}
