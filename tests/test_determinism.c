/*
 * test_determinism.c: the same scenario gives the same simulated numbers, bit for bit.  Every
 * scenario shipped under scenarios/ runs twice, and its summary.json, epochs.txt and steps.csv
 * must be the same bytes both times (the long ones in a shortened form: their first epoch, or a
 * smaller job, set on the command line as a user would).  `collective` tables are the same run
 * to run too.  The second run loads the platform through SimGrid's XML (RH_SIM_PLATFORM=xml, a
 * zone per node) where `rehearsal platform` can write it: the platform built in code must give
 * the same bytes (test_platform.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "determinism");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* The shortened forms: a scenario whose run takes minutes, and the overrides that keep its kind
 * of run (its failures, its checks) in a few seconds. */
static const struct { const char *file; const char *sets[4]; } shortened[] = {
    {"scenarios/seeds/lenet5-mnist-pytorch.yaml", {"data.train_samples=6000", "recipe.epochs=2"}},
    {"scenarios/seeds/lenet5-mnist-keras.yaml", {"data.train_samples=6000", "recipe.epochs=2"}},
    {"scenarios/seeds/lenet5-mnist-tensorflow.yaml",
     {"data.train_samples=6000", "recipe.stop_at_step=400"}},
    {"scenarios/seeds/cifar10-keras-workshop.yaml", {"data.train_samples=8000"}},
    {"scenarios/seeds/fashion-mnist-keras-lab.yaml", {"data.train_samples=6000", "recipe.epochs=2"}},
    {"scenarios/seeds/oci-pytorch-elastic-mnist.yaml", {"data.train_samples=6000", "recipe.epochs=2"}},
    {"scenarios/failures/big-job.yaml", {"data.train_samples=860000000"}}, /* a day, not weeks */
    {"scenarios/failures/oci-elastic-host-crash.yaml",
     {"data.train_samples=12000", "recipe.epochs=2",
      "failures.events=[{kind: host_crash, node: 1, epoch: 2, step: 20, during: allreduce, "
      "after_ms: 0.05}]"}},
    {"scenarios/failures/hang.yaml", {"recipe.epochs=2"}},
    /* the accuracy cases: minutes each, and their one-GPU baseline beside them */
    {"scenarios/accuracy/lenet5-fmnist-1gpu.yaml", {"data.train_samples=3000", "recipe.epochs=1"}},
    {"scenarios/accuracy/lenet5-fmnist-16gpu-scaled-warmup.yaml",
     {"data.train_samples=3000", "recipe.epochs=1", "checks.accuracy_parity=false",
      "checks.expect_fail=[]"}},
    {"scenarios/accuracy/lenet5-fmnist-64gpu-scaled-warmup.yaml",
     {"data.train_samples=3000", "recipe.epochs=1", "checks.accuracy_parity=false",
      "checks.expect_fail=[]"}},
    {"scenarios/accuracy/lenet5-fmnist-64gpu-scaled-no-warmup.yaml",
     {"data.train_samples=3000", "recipe.epochs=1", "checks.accuracy_parity=false",
      "checks.expect_fail=[]"}},
    {"scenarios/accuracy/lenet5-fmnist-64gpu-unscaled.yaml",
     {"data.train_samples=3000", "recipe.epochs=1", "checks.accuracy_parity=false",
      "checks.expect_fail=[]"}},
    {"scenarios/failures/host-crash.yaml", {"recipe.epochs=2"}},
    {"scenarios/failures/link-degraded.yaml", {"recipe.epochs=1"}},
};

static const char *const *sets_of(const char *file) {
  for (size_t i = 0; i < sizeof shortened / sizeof shortened[0]; i++)
    if (strcmp(shortened[i].file, file) == 0) return shortened[i].sets;
  return NULL;
}

/* Runs `rehearsal COMMAND FILE [--out DIR --no-what-if] [--set ...]`; its exit code. */
static int run_once(const char *command, const char *file, const char *dir) {
  char *argv[20] = {RH_BINARY, (char *)command, (char *)file};
  int argc = 3;
  if (dir) {
    argv[argc++] = "--out";
    argv[argc++] = (char *)dir;
    argv[argc++] = "--no-what-if";
  }
  const char *const *sets = sets_of(file);
  for (int i = 0; sets && i < 4 && sets[i]; i++) {
    argv[argc++] = "--set";
    argv[argc++] = (char *)sets[i];
  }
  argv[argc] = NULL;
  return dir ? rh_test_spawn_expect(argv, "/dev/null", 0) : rh_test_spawn(argv, "/dev/null", "/dev/null");
}

/* The run on the platform built in code, then on the XML one where it exists. */
static void run_twice(const char *file, const char *a, const char *b, int *ra, int *rb) {
  *ra = run_once("run", file, a);
  bool xml = run_once("platform", file, NULL) == 0;
  if (xml) setenv("RH_SIM_PLATFORM", "xml", 1);
  *rb = run_once("run", file, b);
  unsetenv("RH_SIM_PLATFORM");
}

static int compare_dir(const char *dir, int *n) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int failures = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0) continue;
    if (strcmp(e->d_name, "suite.yaml") == 0) continue; /* the papers' suite, not a scenario */
    char file[512];
    snprintf(file, sizeof file, "%s/%s", dir, e->d_name);
    char *a = strdup(rh_test_path(tmpdir, "a")), *b = strdup(rh_test_path(tmpdir, "b"));
    int ra, rb;
    run_twice(file, a, b, &ra, &rb);
    bool ok = ra == rb && ra != 2;
    if (!ok) print_error("%s: exit %d, then %d\n", file, ra, rb);
    struct stat st;
    if (ok && stat(rh_test_path(a, "summary.json"), &st) == 0)
      ok = rh_test_same_file(a, b, "summary.json") && rh_test_same_file(a, b, "epochs.txt") &&
           rh_test_same_file(a, b, "steps.csv");
    else if (ok) {
      print_error("%s: no summary.json\n", file);
      ok = false;
    }
    failures += !ok;
    ++*n;
    rh_test_rmdir(a);
    rh_test_rmdir(b);
    free(a);
    free(b);
  }
  closedir(d);
  return failures;
}

static void test_every_shipped_scenario_twice(void **state) {
  (void)state;
  static const char *const dirs[] = {"scenarios", "scenarios/seeds", "scenarios/mistakes",
                                     "scenarios/failures", "scenarios/papers",
                                     "scenarios/papers/failures",
                                     "scenarios/validation", "scenarios/scale", "scenarios/models",
                                     "scenarios/accuracy"};
  int failures = 0, n = 0;
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) failures += compare_dir(dirs[i], &n);
  print_message("%d scenarios run twice, %d differed\n", n, failures);
  assert_true(n >= 40);
  assert_int_equal(failures, 0);
}

static void test_collective_tables_twice(void **state) {
  (void)state;
  char *a = strdup(rh_test_path(tmpdir, "ca")), *b = strdup(rh_test_path(tmpdir, "cb"));
  for (int k = 0; k < 2; k++) {
    char *argv[] = {RH_BINARY, "collective", "scenarios/validation/dgx-h100.yaml", "--max", "64MiB",
                    "--out", k ? b : a, NULL};
    assert_int_equal(rh_test_spawn_expect(argv, "/dev/null", 0), 0);
  }
  assert_true(rh_test_same_file(a, b, "collective.txt"));
  assert_true(rh_test_same_file(a, b, "collective.json"));
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_shipped_scenario_twice),
      cmocka_unit_test(test_collective_tables_twice),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
