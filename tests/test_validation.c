/*
 * test_validation.c: published allreduce, reduce-scatter and allgather bus bandwidths (sources in
 * the table), simulated
 * on clusters written from the presets (scenarios/validation/, one file per system, nothing tuned
 * per row) with the NCCL model, through `rehearsal collective` as a user runs it.  Every row must
 * land within 10% of the published figure, large messages (1 GB and up) within 5%.  The test
 * prints the table docs/validation.md shows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

typedef struct row {
  const char *system, *scenario, *size_text;
  double bytes, published; /* GB/s */
  const char *source, *coll; /* coll NULL: allreduce */
} row;

static const row rows[] = {
    {"8x A100, NVLink3, one node", "dgx-a100", "64 MB", 67108864, 166.6, "Azure ND A100 v4", NULL},
    {"8x A100, NVLink3, one node", "dgx-a100", "1 GB", 1073741824, 228.1, "Azure ND A100 v4", NULL},
    {"8x A100, NVLink3, one node", "dgx-a100", "8 GB", 8589934592, 231.6, "Azure ND A100 v4", NULL},
    {"8x H100, NVLink4, ring", "dgx-h100-ring", "8 GB", 8589934592, 370, "nccl-tests #212", NULL},
    {"8x H100, NVLS", "dgx-h100", "64 MB", 67108864, 361.8, "Azure ND H100 v5", NULL},
    {"8x H100, NVLS", "dgx-h100", "1 GB", 1073741824, 466.4, "Azure ND H100 v5", NULL},
    {"8x H100, NVLS", "dgx-h100", "8 GB", 8589934592, 478.9, "Azure ND H100 v5 (calibrates NVLS)",
     NULL},
    {"4 DGX A100, 8x 200G IB", "dgx-a100-4nodes", "8 GB", 8589934592, 192, "nccl #812", NULL},
    {"one 100G NIC", "one-nic-100g", "8 GB", 8589934592, 12, "nccl-tests #119", NULL},
    {"one 200G NIC", "one-nic-200g", "8 GB", 8589934592, 24, "nccl-tests #267", NULL},
    {"one 400G NIC", "one-nic-400g", "8 GB", 8589934592, 47.5, "nccl-tests #290 (46-49)", NULL},
    /* reduce-scatter on one H100 node with NCCL_ALGO=Ring (NCCL's ring: NVLS moves no more), out
     * of place; and allgather across two NDmv4 nodes, in place */
    {"8x H100, NVLink4", "dgx-h100", "128 MB", 134217728, 311.34, "nccl #1047", "reduce_scatter"},
    {"8x H100, NVLink4", "dgx-h100", "1 GB", 1073741824, 349.36, "nccl #1047", "reduce_scatter"},
    {"8x H100, NVLink4", "dgx-h100", "8 GB", 8589934592, 362.16, "nccl #1047", "reduce_scatter"},
    {"2 nodes of 8x A100, 8x 200G IB", "dgx-a100-2nodes", "1 GB", 1073741824, 177.05,
     "mscclpp NDmv4, NCCL 2.17.1", "allgather"},
    {"2 nodes of 8x A100, 8x 200G IB", "dgx-a100-2nodes", "4 GB", 4294967296, 186.01,
     "mscclpp NDmv4, NCCL 2.17.1", "allgather"},
};

/* busbw and algorithm of one size through `rehearsal collective` */
static void simulate(const row *r, double *busbw, char *algo, size_t len) {
  char file[256], size[32], *out = rh_test_path(tmpdir, r->scenario), json[320];
  snprintf(file, sizeof file, "scenarios/validation/%s.yaml", r->scenario);
  snprintf(size, sizeof size, "%.0fB", r->bytes);
  char *argv[] = {RH_BINARY, "collective", file, "--min", size, "--max", size, "--mem-limit",
                  "1MiB", "--out", out, "--coll", (char *)(r->coll ? r->coll : "allreduce"), NULL};
  assert_int_equal(rh_test_spawn_expect(argv, NULL, 0), 0);
  snprintf(json, sizeof json, "%s/collective.json", out);
  json_error_t err;
  json_t *root = json_load_file(json, 0, &err);
  assert_non_null(root);
  json_t *first = json_array_get(json_object_get(root, "rows"), 0);
  assert_non_null(first);
  *busbw = json_real_value(json_object_get(first, "busbw_GBps"));
  snprintf(algo, len, "%s", json_string_value(json_object_get(first, "algorithm")));
  json_decref(root);
}

static void test_published_busbw(void **state) {
  (void)state;
  int failed = 0;
  printf("| system | collective | size | published GB/s | simulated GB/s | error | bound | algorithm "
         "| source |\n|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const row *r = &rows[i];
    double busbw;
    char algo[32];
    simulate(r, &busbw, algo, sizeof algo);
    double err = 100 * (busbw - r->published) / r->published;
    double bound = r->bytes >= 1e9 ? 5 : 10;
    bool ok = fabs(err) <= bound;
    printf("| %s | %s | %s | %.1f | %.1f | %+.1f%% | ±%.0f%% | %s | %s |%s\n", r->system,
           r->coll ? r->coll : "allreduce", r->size_text, r->published, busbw, err, bound, algo,
           r->source, ok ? "" : "  <- out of bounds");
    if (!ok) failed++;
  }
  fflush(stdout);
  assert_int_equal(failed, 0);
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "validation");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_published_busbw)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
