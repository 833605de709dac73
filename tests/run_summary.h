/*
 * run_summary.h: `rehearsal run FILE --out OUT` in a child, and its summary.json, for the tests
 * that read what a run reports (they link jansson through rh_tool; the harness does not).
 */
#ifndef RH_TEST_RUN_SUMMARY_H
#define RH_TEST_RUN_SUMMARY_H

#include "harness.h"

#include <jansson.h>
#include <stdio.h>

/* OUT/summary.json (caller decrefs); fails the test if there is none. */
static inline json_t *rh_test_summary_in(const char *out) {
  char path[1100];
  snprintf(path, sizeof path, "%s/summary.json", out);
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  assert_non_null(root);
  return root;
}

/* The run's summary.json (caller decrefs); fails the test if the run or the file does. */
static inline json_t *rh_test_run_summary(const char *file, const char *out) {
  char *argv[] = {RH_BINARY, "run", (char *)file, "--out", (char *)out, NULL};
  assert_int_equal(rh_test_spawn(argv, NULL, NULL), 0);
  return rh_test_summary_in(out);
}

#endif
