/*
 * test_validate.c: `rehearsal validate` and its suite file (tool/validate/suite.c): bad suites
 * named by file, line and field with exit 2 and nothing written; a small suite's table and
 * validate.json, its published efficiencies and errors worked out here from the figures written
 * in the suite and the sweep's own samples/s; and the exit code that a point outside its bound
 * gives.  The shipped suite runs as its own entry (`ctest -L validation`).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "trust.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static char *write_suite(const char *name, const char *text) {
  char *path = strdup(rh_test_path(tmpdir, name));
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

typedef struct bad_suite {
  const char *name, *text;
  int line;
  const char *field, *phrase;
} bad_suite;

static const bad_suite bad[] = {
    {"unknown-key.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    colour: red\n", 4, "colour",
     "unknown key"},
    {"no-bound.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    source: s\n"
                      "    efficiency: {8: 90}\n", 2, "bound", "missing"},
    {"falling.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    source: s\n    bound: 3\n"
                     "    efficiency: {16: 90, 8: 95}\n", 6, "efficiency", "GPU counts go up"},
    {"one-gpu-count.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    source: s\n    bound: 3\n"
                           "    efficiency: {1: 100}\n", 6, "efficiency", "a whole number from 2"},
    {"no-one-gpu.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    source: s\n    bound: 3\n"
                        "    samples_per_s: {8: 900}\n", 6, "one_gpu", "needs the one-GPU throughput"},
    {"bad-number.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    source: s\n    bound: lots\n"
                        "    efficiency: {8: 90}\n", 5, "bound", "expected a number above 0"},
    {"twice.yaml", "series:\n  - {name: a, scenario: x.yaml, source: s, bound: 3, efficiency: {8: 9}}\n"
                   "  - {name: a, scenario: y.yaml, source: s, bound: 3, efficiency: {8: 9}}\n", 3,
     "name", "names two series"},
    {"slash.yaml", "series:\n  - {name: a/b, scenario: x.yaml, source: s, bound: 3, efficiency: {8: 9}}\n",
     2, "name", "a folder's name"},
    {"not-yaml.yaml", "series: [\n", 2, NULL, "not YAML"},
    {"empty.yaml", "series: []\n", 1, "series", "expected a list of series"},
    {"huge-bound.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    source: s\n    bound: 1e308\n"
                        "    efficiency: {8: 90}\n", 5, "bound", "at most 100, got 1e308"},
    {"huge-efficiency.yaml", "series:\n  - name: a\n    scenario: x.yaml\n    source: s\n"
                             "    bound: 3\n    efficiency: {2: 1e9}\n", 6, "efficiency",
     "at most 110, got 1e9"},
    {"point-unknown.yaml", "points:\n  - name: a\n    scenario: x.yaml\n    flavour: sweet\n", 4,
     "flavour", "unknown key"},
    {"point-no-published.yaml", "points:\n  - name: a\n    scenario: x.yaml\n    source: s\n"
                                "    setup: u\n    bound: 10\n", 2, "published", "missing"},
    {"point-bad-set.yaml", "points:\n  - name: a\n    scenario: x.yaml\n    set: [1, 2]\n", 4, "set",
     "expected a mapping"},
    /* every key is good but the scenario is not there: refused before any sweep runs */
    {"no-scenario.yaml", "series:\n  - name: a\n    scenario: nothere.yaml\n    source: s\n"
                         "    bound: 12\n    efficiency: {2: 90}\n", 3, "scenario",
     "nothere.yaml: No such file or directory (series a)"},
    {"failure-unknown.yaml", "failures:\n  - name: a\n    scenario: x.yaml\n    mtbf: 3\n", 4,
     "mtbf", "unknown key"},
    {"failure-no-count.yaml", "failures:\n  - name: a\n    scenario: x.yaml\n    source: s\n"
                              "    setup: u\n", 2, "interruptions", "missing"},
    {"failure-lone-bound.yaml", "failures:\n  - name: a\n    scenario: x.yaml\n    source: s\n"
                                "    setup: u\n    interruptions: 10\n    effective_percent: 90\n",
     2, "effective_bound", "go together"},
    {"failure-bad-cause.yaml", "failures:\n  - name: a\n    scenario: x.yaml\n    source: s\n"
                               "    setup: u\n    interruptions: 10\n    causes: {gpu: -3}\n", 7,
     "causes", "expected a number above 0"},
    /* the scenario is there but does not load: its own error, after the suite's line */
    {"bad-scenario.yaml", "series:\n  - name: a\n    scenario: bad-scenario.yaml\n    source: s\n"
                          "    bound: 12\n    efficiency: {2: 90}\n", 3, "scenario",
     "series a: "},
};

static void test_bad_suites(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *path = write_suite(bad[i].name, bad[i].text);
    char *out = strdup(rh_test_path(tmpdir, "bad-out"));
    char *err = strdup(rh_test_path(tmpdir, "bad-err.txt"));
    char *argv[] = {RH_BINARY, "validate", path, "--out", out, NULL};
    assert_int_equal(rh_test_spawn(argv, "/dev/null", err), 2);
    char *text = rh_test_slurp(err);
    char want[512];
    snprintf(want, sizeof want, "%s:%d: %s%s", path, bad[i].line, bad[i].field ? bad[i].field : "",
             bad[i].field ? ": " : "");
    if (!strstr(text, want) || !strstr(text, bad[i].phrase))
      fail_msg("%s: got \"%s\", expected \"%s ... %s\"", bad[i].name, text, want, bad[i].phrase);
    struct stat st;
    assert_int_not_equal(stat(out, &st), 0); /* nothing written */
    free(text);
    free(path);
    free(out);
    free(err);
  }
}

/* A series of this repository's DLPerf ResNet-50 scenario: its published rows as the suite gives
 * them, then the errors against the sweep's own samples/s. */
static void test_small_suite(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text,
           "series:\n"
           "  - name: r50\n"
           "    scenario: %s/scenarios/papers/dlperf-resnet50-fp32.yaml\n"
           "    source: DLPerf\n"
           "    bound: 50\n"
           "    one_gpu: 367.29\n"
           "    samples_per_s: {8: 2887.65, 16: 5716.79}\n",
           RH_SOURCE_DIR);
  char *path = write_suite("small.yaml", text);
  char *out = strdup(rh_test_path(tmpdir, "small"));
  char *table = strdup(rh_test_path(tmpdir, "small.txt"));
  char *argv[] = {RH_BINARY, "validate", path, "--out", out, NULL};
  assert_int_equal(rh_test_spawn_expect(argv, table, 0), 0);
  json_error_t jerr;
  char f[400];
  snprintf(f, sizeof f, "%s/validate.json", out);
  json_t *root = json_load_file(f, 0, &jerr);
  assert_non_null(root);
  snprintf(f, sizeof f, "%s/r50/sweep.json", out);
  json_t *sweep = json_load_file(f, 0, &jerr);
  assert_non_null(sweep);
  double thr[3] = {NAN, NAN, NAN};
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(sweep, "points"), i, p) {
    int g = (int)json_integer_value(json_object_get(p, "gpus"));
    /* one GPU: its throughput without communication, as the sources' one GPU ran alone */
    double s = json_number_value(json_object_get(p, g == 1 ? "ideal_samples_per_s" : "samples_per_s"));
    thr[g == 1 ? 0 : g == 8 ? 1 : 2] = s;
  }
  const int gpus[2] = {8, 16};
  const double published[2] = {100 * 2887.65 / (8 * 367.29), 100 * 5716.79 / (16 * 367.29)};
  double sum = 0;
  json_array_foreach(json_object_get(root, "points"), i, p) {
    assert_true(i < 2);
    double pred = 100 * thr[i + 1] / (gpus[i] * thr[0]);
    assert_int_equal(json_integer_value(json_object_get(p, "gpus")), gpus[i]);
    assert_true(fabs(json_number_value(json_object_get(p, "published_efficiency")) - published[i]) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(p, "predicted_efficiency")) - pred) < 1e-9);
    assert_true(fabs(json_number_value(json_object_get(p, "error_points")) - (pred - published[i])) < 1e-9);
    sum += fabs(pred - published[i]);
  }
  json_t *s = json_object_get(root, "summary");
  assert_true(fabs(json_number_value(json_object_get(s, "mean_abs_error")) - sum / 2) < 1e-9);
  char *printed = rh_test_slurp(table);
  assert_non_null(strstr(printed, "mean absolute error"));
  free(printed);
  json_decref(root);
  json_decref(sweep);

  /* the same suite held to a bound no prediction meets: exit 1, the point named OUTSIDE */
  char *tight = strstr(text, "bound: 50");
  memcpy(tight, "bound: .1", 9);
  char *path2 = write_suite("tight.yaml", text);
  char *argv2[] = {RH_BINARY, "validate", path2, "--out", out, NULL};
  assert_int_equal(rh_test_spawn(argv2, table, "/dev/null"), 1);
  printed = rh_test_slurp(table);
  assert_non_null(strstr(printed, "OUTSIDE"));
  free(printed);
  /* --series names one of the suite's */
  char *argv3[] = {RH_BINARY, "validate", path, "--series", "nope", "--out", out, NULL};
  assert_int_equal(rh_test_spawn(argv3, "/dev/null", "/dev/null"), 2);
  free(path);
  free(path2);
  free(out);
  free(table);
}

/* A failure series (BLOOM's held-out replay, a fraction of a second): the published count within
 * its Poisson band passes, a count four times the replay's is OUTSIDE (exit 1), and a scenario
 * without a replay at scale is bad input. */
static void test_failure_suite(void **state) {
  (void)state;
  const char *counts[] = {"23", "100"};
  for (int k = 0; k < 2; k++) {
    char text[1024];
    snprintf(text, sizeof text,
             "failures:\n  - name: bloom\n"
             "    scenario: %s/scenarios/papers/failures/bloom-176b-heldout.yaml\n"
             "    source: s\n    setup: u\n    interruptions: %s\n", RH_SOURCE_DIR, counts[k]);
    char *path = write_suite("failures.yaml", text);
    char *out = strdup(rh_test_path(tmpdir, k ? "failures-out-1" : "failures-out-0"));
    char *table = strdup(rh_test_path(tmpdir, "failures.txt"));
    char *argv[] = {RH_BINARY, "validate", path, "--out", out, NULL};
    assert_int_equal(rh_test_spawn_expect(argv, table, k), k);
    char *t = rh_test_slurp(table);
    assert_non_null(strstr(t, "bloom"));
    assert_true((strstr(t, "OUTSIDE held out") != NULL) == (k == 1));
    free(t);
    free(path);
    free(out);
    free(table);
  }
  char text[1024];
  snprintf(text, sizeof text,
           "failures:\n  - name: r50\n"
           "    scenario: %s/scenarios/papers/dlperf-resnet50-fp32.yaml\n"
           "    source: s\n    setup: u\n    interruptions: 3\n", RH_SOURCE_DIR);
  char *path = write_suite("no-horizon.yaml", text);
  char *err = strdup(rh_test_path(tmpdir, "no-horizon.txt"));
  char *argv[] = {RH_BINARY, "validate", path, "--out", rh_test_path(tmpdir, "nh"), NULL};
  assert_int_equal(rh_test_spawn(argv, "/dev/null", err), 2);
  char *t = rh_test_slurp(err), want[512];
  snprintf(want, sizeof want, "%s:3: scenario: failure series r50:", path);
  assert_non_null(strstr(t, want));
  assert_non_null(strstr(t, "has no failures.horizon_days"));
  free(t);
  free(path);
  /* a published cause the replay leaves out (only_per drops Llama 3's planned stops) */
  snprintf(text, sizeof text,
           "failures:\n  - name: bloom\n"
           "    scenario: %s/scenarios/papers/failures/bloom-176b-heldout.yaml\n"
           "    source: s\n    setup: u\n    interruptions: 23\n    causes: {planned: 1}\n",
           RH_SOURCE_DIR);
  path = write_suite("dropped-cause.yaml", text);
  argv[2] = path;
  assert_int_equal(rh_test_spawn(argv, "/dev/null", err), 2);
  t = rh_test_slurp(err);
  snprintf(want, sizeof want, "%s:7: causes: failure series bloom: planned is not a cause", path);
  assert_non_null(strstr(t, want));
  free(t);
  free(path);
  free(err);
}

/* The shipped one-GPU suite (`rehearsal validate --one-gpu`): every point within its bound; at
 * least 30 points over three GPU generations and three frameworks, two batch sweeps of four sizes
 * or more, held-out points scored apart from calibration ones; its held-out error the one a run
 * quotes beside its throughput (trust.c); and each scaling series' published one-GPU throughput
 * one of its held-out points. */
static void test_shipped_one_gpu(void **state) {
  (void)state;
  char *out = strdup(rh_test_path(tmpdir, "one-gpu"));
  char *argv[] = {RH_BINARY, "validate", "--one-gpu", "--out", out, NULL};
  assert_int_equal(rh_test_spawn_expect(argv, "/dev/null", 0), 0);
  char f[400];
  snprintf(f, sizeof f, "%s/validate.json", out);
  json_error_t jerr;
  json_t *root = json_load_file(f, 0, &jerr);
  assert_non_null(root);
  json_t *one = json_object_get(root, "one_gpu"), *sum = json_object_get(one, "summary");
  size_t i;
  json_t *p;
  int n = 0, cal = 0, gens[3] = {0}, fws = 0;
  const char *fw_names[] = {"PyTorch", "TensorFlow", "MXNet", "OneFlow", "PaddlePaddle", "llm.c"};
  bool fw_seen[6] = {false};
  json_array_foreach(json_object_get(one, "points"), i, p) {
    const char *setup = json_string_value(json_object_get(p, "setup"));
    assert_non_null(setup);
    n++;
    cal += json_is_true(json_object_get(p, "calibration"));
    gens[0] += strstr(setup, "V100") != NULL;
    gens[1] += strstr(setup, "A100") != NULL;
    gens[2] += strstr(setup, "H100") != NULL;
    for (int k = 0; k < 6; k++) fw_seen[k] |= strstr(setup, fw_names[k]) != NULL;
  }
  for (int k = 0; k < 6; k++) fws += fw_seen[k];
  print_message("%d points (%d calibration), V100 %d, A100 %d, H100 %d, %d frameworks\n", n, cal,
                gens[0], gens[1], gens[2], fws);
  assert_true(n >= 30 && gens[0] > 0 && gens[1] > 0 && gens[2] > 0 && fws >= 3);
  assert_int_equal((int)json_integer_value(json_object_get(sum, "held_out")), n - cal);
  assert_int_equal((int)json_integer_value(json_object_get(sum, "calibration")), cal);
  double mean = json_number_value(json_object_get(sum, "mean_abs_error_percent"));
  double worst = json_number_value(json_object_get(sum, "max_abs_error_percent"));
  if (!(fabs(mean - rh_trust_kernels_mean) < 0.05 && fabs(worst - rh_trust_kernels_worst) < 0.5))
    fail_msg("held out: mean %.2f%%, worst %.2f%%: trust.c (and docs/validation.md) quote %.1f and %.0f",
             mean, worst, rh_trust_kernels_mean, rh_trust_kernels_worst);
  json_decref(root);
  free(out);
}

/* The one-GPU suite's sweeps: two or more of one setup at four batch sizes or more; and each
 * published one-GPU throughput of the scaling suite's series a held-out point of it. */
static void test_one_gpu_coverage(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/scenarios/onegpu/suite.yaml", RH_SOURCE_DIR);
  char *text = rh_test_slurp(path);
  assert_non_null(text);
  /* the sweeps: count "sweep: NAME" lines by name */
  char names[16][64];
  int counts[16] = {0}, nsweeps = 0;
  for (char *s = strstr(text, "sweep: "); s; s = strstr(s + 1, "sweep: ")) {
    char name[64];
    if (sscanf(s + 7, "%63s", name) != 1) continue;
    int k = 0;
    while (k < nsweeps && strcmp(names[k], name)) k++;
    if (k == nsweeps && nsweeps < 16) snprintf(names[nsweeps++], 64, "%s", name);
    if (k < 16) counts[k]++;
  }
  int big = 0;
  for (int k = 0; k < nsweeps; k++) big += counts[k] >= 4;
  assert_true(big >= 2);
  /* every one_gpu of the scaling suite is published: ... in the one-GPU suite */
  snprintf(path, sizeof path, "%s/scenarios/papers/suite.yaml", RH_SOURCE_DIR);
  char *papers = rh_test_slurp(path);
  assert_non_null(papers);
  int found = 0, wanted = 0;
  for (char *s = strstr(papers, "one_gpu: "); s; s = strstr(s + 1, "one_gpu: ")) {
    double v = strtod(s + 9, NULL);
    char want[64];
    snprintf(want, sizeof want, "published: %g\n", v);
    wanted++;
    found += strstr(text, want) != NULL;
    if (!strstr(text, want)) print_error("the scaling suite's one_gpu %g is not a one-GPU point\n", v);
  }
  assert_true(wanted >= 10);
  assert_int_equal(found, wanted);
  free(papers);
  free(text);
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "validate");
}

static int teardown(void **state) {
  (void)state;
  rh_test_rmdir(tmpdir);
  return 0;
}

/* Without --out nothing lands in the current folder: the sweeps and validate.json go to a new
 * directory under $TMPDIR, which the last line names. */
static void test_default_out_under_tmpdir(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text,
           "series:\n  - name: r50\n    scenario: %s/scenarios/papers/dlperf-resnet50-fp32.yaml\n"
           "    source: DLPerf\n    bound: 50\n    one_gpu: 367.29\n    samples_per_s: {8: 2887.65}\n",
           RH_SOURCE_DIR);
  char *path = write_suite("default-out.yaml", text);
  char *cwd = strdup(rh_test_path(tmpdir, "cwd")), *tmp = strdup(rh_test_path(tmpdir, "tmp"));
  char *table = strdup(rh_test_path(tmpdir, "default-out.txt"));
  assert_int_equal(mkdir(cwd, 0777), 0);
  assert_int_equal(mkdir(tmp, 0777), 0);
  char *here = getcwd(NULL, 0), *saved = getenv("TMPDIR") ? strdup(getenv("TMPDIR")) : NULL;
  setenv("TMPDIR", tmp, 1);
  assert_int_equal(chdir(cwd), 0);
  char *argv[] = {RH_BINARY, "validate", path, NULL};
  int rc = rh_test_spawn(argv, table, "/dev/null");
  assert_int_equal(chdir(here), 0);
  if (saved) setenv("TMPDIR", saved, 1);
  else unsetenv("TMPDIR");
  assert_int_equal(rc, 0);
  DIR *d = opendir(cwd);
  assert_non_null(d);
  int entries = 0;
  for (struct dirent *e; (e = readdir(d));) entries += e->d_name[0] != '.';
  closedir(d);
  assert_int_equal(entries, 0); /* no out/validate in the current folder */
  char *printed = rh_test_slurp(table), want[600];
  snprintf(want, sizeof want, "wrote %s/rehearsal-validate-", tmp);
  char *at = strstr(printed, want);
  assert_non_null(at);
  char file[700];
  assert_int_equal(sscanf(at, "wrote %600s", file), 1);
  struct stat st;
  assert_int_equal(stat(file, &st), 0); /* DIR/validate.json is there */
  free(printed), free(here), free(saved), free(table), free(tmp), free(cwd), free(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_suites),
      cmocka_unit_test(test_small_suite),
      cmocka_unit_test(test_failure_suite),
      cmocka_unit_test(test_default_out_under_tmpdir),
      cmocka_unit_test(test_shipped_one_gpu),
      cmocka_unit_test(test_one_gpu_coverage),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
