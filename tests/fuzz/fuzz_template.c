/*
** fuzz_template.c -- libFuzzer harness for the template sandbox: arbitrary
** bytes are rendered as template text (collgen__lua_render_text) with the
** variables of an allreduce spec, in one Lua state reused across inputs
** under small budgets. Every input must render or fail with
** COLLGEN_ERR_TEMPLATE, and never crash, leak or hang (the budgets bound
** each input well below libFuzzer's -timeout). No input may change what the
** next one sees: after each, a probe template that reads the shared tables
** must render the bytes it rendered first, and every 256 inputs the real
** kernel must too.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_host.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Reads what an input could try to change: the string metatable and
** library tables, math, table, the catalog (abi), the helpers, the spec. */
static const char probe_text[] =
    "${('a'):upper()} ${string.rep('ab', 3, '-')} ${math.pi} ${math.huge} ${#abi.limits}\n"
    "${abi.kparams.host} ${abi.kparams.size} ${#abi.kparams.fields} ${abi.limits[1].name}\n"
    "${join(range(1, 4), ',')} ${kernel} ${dtype} ${G} ${spec.algo} ${tostring(string.x)}\n"
    "${tostring(math.x)} ${tostring(table.x)} ${type(table.concat)} ${ctype} ${esize}\n"
    "${('k=v'):gsub('(%w+)=(%w+)', '%2=%1')} ${('x'):rep(3)}\n";
static const char kernel_text[] = "% include('allreduce.cu.tpl')\n";

static collgen__lua *gen;
static collgen_shape_t shape;
static char *probe_ref, *kernel_ref;
static unsigned long execs;

static char *render(const char *text, size_t len, int *rc) {
  char err[COLLGEN_ERRBUF], *out = NULL;
  *rc = collgen__lua_render_text(gen, &shape, text, len, 1, &out, err, sizeof err);
  if (*rc != COLLGEN_OK && *rc != COLLGEN_ERR_TEMPLATE) {
    fprintf(stderr, "fuzz_template: status %d: %s\n", *rc, err);
    abort();
  }
  if ((*rc == COLLGEN_OK) != (out != NULL)) abort();
  return out;
}

/* The reference rendering of a text that must always render. */
static char *must_render(const char *text) {
  int rc;
  char *out = render(text, strlen(text), &rc);
  if (rc != COLLGEN_OK) {
    fprintf(stderr, "fuzz_template: the reference template no longer renders\n");
    abort();
  }
  return out;
}

static void expect_same(const char *text, const char *ref) {
  char *out = must_render(text);
  if (strcmp(out, ref) != 0) {
    fprintf(stderr, "fuzz_template: an input changed the next render:\n--- before\n%s\n"
            "--- after\n%s\n", ref, out);
    abort();
  }
  free(out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  char err[COLLGEN_ERRBUF];
  if (collgen__lua_create(&gen, err, sizeof err) != COLLGEN_OK) {
    fprintf(stderr, "fuzz_template: %s\n", err);
    abort();
  }
  /* small budgets keep each input in milliseconds, even under ASan */
  collgen__lua_limits lim = {.memory = (size_t)64 << 20, .max_object = (size_t)4 << 20,
                             .work = 4000000, .wall_ms = 3000};
  collgen__lua_set_limits(gen, &lim);
  collgen_shape_init(&shape, COLLGEN_OP_ALLREDUCE_SUM);
  shape.ngpus = 4;
  shape.elems = 1 << 20;
  probe_ref = must_render(probe_text);
  kernel_ref = must_render(kernel_text);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int rc;
  free(render((const char *)data, size, &rc));
  expect_same(probe_text, probe_ref);
  if (++execs % 256 == 0) expect_same(kernel_text, kernel_ref);
  return 0;
}
