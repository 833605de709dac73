/*
 * test_platform.c: the simulated cluster built in code, in one zone (sim/zone.cpp), is the network
 * SimGrid's XML loader built from a zone per node (RH_SIM_PLATFORM=xml loads the XML that
 * `rehearsal platform` prints): the same run gives the same summary.json, epochs.txt and steps.csv,
 * byte for byte, at 64 and 1,024 GPUs, with a node's backbone, under the realistic network, and
 * with the faults that name links and slow hosts (link down, link degraded, straggler).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "platform");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* `rehearsal run FILE --out DIR --no-what-if [--set S]...` (which must succeed) with the platform built in code or,
 * xml, loaded from XML; its exit code. */
static int run_on(const char *file, const char *dir, bool xml, const char *const *sets) {
  char *argv[24] = {RH_BINARY, "run", (char *)file, "--out", (char *)dir, "--no-what-if"};
  int argc = 6;
  for (int i = 0; sets && sets[i] && argc < 21; i++) {
    argv[argc++] = "--set";
    argv[argc++] = (char *)sets[i];
  }
  argv[argc] = NULL;
  if (xml) setenv("RH_SIM_PLATFORM", "xml", 1);
  int rc = rh_test_spawn_expect(argv, "/dev/null", 0);
  unsetenv("RH_SIM_PLATFORM");
  return rc;
}

/* The run on both platforms: same exit, same three files. */
static void assert_same_on_both(const char *file, const char *const *sets) {
  char *a = strdup(rh_test_path(tmpdir, "zone")), *b = strdup(rh_test_path(tmpdir, "xml"));
  int ra = run_on(file, a, false, sets), rb = run_on(file, b, true, sets);
  assert_int_equal(ra, rb);
  assert_int_equal(ra, 0);
  assert_true(rh_test_same_file(a, b, "summary.json"));
  assert_true(rh_test_same_file(a, b, "epochs.txt"));
  assert_true(rh_test_same_file(a, b, "steps.csv"));
  rh_test_rmdir(a);
  rh_test_rmdir(b);
  free(a);
  free(b);
}

static void test_64_gpus(void **state) {
  (void)state;
  const char *sets[] = {"cluster.nodes=8", NULL};
  assert_same_on_both("scenarios/scale/dp-loop.yaml", sets);
}

static void test_1024_gpus(void **state) {
  (void)state;
  const char *sets[] = {"cluster.nodes=128", NULL};
  assert_same_on_both("scenarios/scale/dp-loop.yaml", sets);
}

/* A node's shared fabric (PCIe backbone), the realistic network (LV08: latency in the TCP window
 * bound, cross traffic on the way back), the fine grain: every message on every link. */
static void test_backbone_realistic_fine(void **state) {
  (void)state;
  const char *sets[] = {"cluster.nodes=4", "cluster.intra.backbone_GBps=24",
                        "cluster.network_model=realistic", "collective.grain=fine", NULL};
  assert_same_on_both("scenarios/scale/dp-loop.yaml", sets);
}

/* Faults that find links by name and hosts by pstate. */
static void test_faults(void **state) {
  (void)state;
  assert_same_on_both("scenarios/failures/link-degraded.yaml", (const char *[]){"recipe.epochs=1", NULL});
  assert_same_on_both("scenarios/failures/link-down.yaml", NULL);
  assert_same_on_both("scenarios/failures/straggler.yaml", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_64_gpus),
      cmocka_unit_test(test_1024_gpus),
      cmocka_unit_test(test_backbone_realistic_fine),
      cmocka_unit_test(test_faults),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
