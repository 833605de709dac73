/*
 * test_trust.c: how far to trust a run's figures (tool/report/trust.c).
 * - Every scenario of the validation suite (scenarios/papers/suite.yaml) is of a GPU generation
 *   whose scaling the note calls validated, and an H100 one is not;
 * - a model timed on the roofline says its compute is not validated, one at given tflops does not;
 * - `rehearsal run` carries the notes on its throughput and mfu lines, and in summary.json.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "scenario.h"
#include "trust.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "trust");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

static void load(const char *path, rh_scenario *sc) {
  char err[1024];
  if (rh_scenario_load(path, sc, err, sizeof err) != RH_OK) fail_msg("%s: %s", path, err);
}

/* The suite's series, each a scenario of scenarios/papers/ named on a "scenario:" line. */
static void test_suite_setups_validated(void **state) {
  (void)state;
  FILE *f = fopen("scenarios/papers/suite.yaml", "r");
  assert_non_null(f);
  char line[512], name[256], path[400];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, " scenario: %255s", name) == 1) {
      snprintf(path, sizeof path, "scenarios/papers/%s", name);
      rh_scenario sc;
      load(path, &sc);
      if (!rh_trust_validated(&sc)) fail_msg("%s: the suite's own setup is not called validated", path);
      rh_scenario_free(&sc);
      n++;
    }
  fclose(f);
  assert_true(n >= 10);
  rh_scenario sc;
  load("scenarios/h100-1gpu.yaml", &sc); /* Hopper: no series of the suite */
  assert_false(rh_trust_validated(&sc));
  char note[400];
  rh_trust_note(&sc, RH_TRUST_MFU, note, sizeof note);
  assert_non_null(strstr(note, "roofline, not validated"));
  rh_trust_note(&sc, RH_TRUST_THROUGHPUT, note, sizeof note);
  assert_non_null(strstr(note, "scaling not validated for hopper"));
  rh_scenario_free(&sc);
  load("scenarios/papers/dlperf-resnet50-fp32.yaml", &sc); /* V100 at a given tflops */
  rh_trust_note(&sc, RH_TRUST_THROUGHPUT, note, sizeof note);
  assert_null(strstr(note, "roofline"));
  assert_non_null(strstr(note, "on validated setups of this kind (volta)"));
  rh_scenario_free(&sc);
}

/* The run's lines and summary.json carry the notes. */
static void test_run_says_it(void **state) {
  (void)state;
  char out[300], text_file[320];
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "h100"));
  snprintf(text_file, sizeof text_file, "%s.txt", out);
  char *argv[] = {RH_BINARY, "run", "scenarios/h100-1gpu.yaml", "--no-what-if", "--out", out, NULL};
  assert_int_equal(rh_test_spawn(argv, text_file, NULL), 0);
  char *text = rh_test_slurp(text_file);
  assert_non_null(text);
  const char *thr = strstr(text, "\n  throughput   "), *mfu = strstr(text, "\n  mfu          ");
  assert_non_null(thr);
  assert_non_null(mfu);
  const char *thr_end = strchr(thr + 1, '\n'), *mfu_end = strchr(mfu + 1, '\n');
  const char *a = strstr(thr, "(compute roofline, not validated"), *b = strstr(mfu, "(compute roofline");
  if (!a || a > thr_end || !b || b > mfu_end) fail_msg("no note on the figures' lines:\n%s", text);
  char summary[400];
  snprintf(summary, sizeof summary, "%s/summary.json", out);
  json_error_t err;
  json_t *root = json_load_file(summary, 0, &err);
  assert_non_null(root);
  json_t *trust = json_object_get(root, "trust");
  assert_non_null(trust);
  assert_string_equal(json_string_value(json_object_get(trust, "compute")), "roofline");
  assert_true(json_is_false(json_object_get(trust, "scaling_validated")));
  json_decref(root);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_suite_setups_validated),
      cmocka_unit_test(test_run_says_it),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
