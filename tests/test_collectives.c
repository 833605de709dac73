/*
 * test_collectives.c: every collective gives exact results on the simulator, for every op and
 * type, on 1, 2, 3, 5 (uneven hosts), 8 and 64 ranks, with counts that the rank count does not
 * divide, under each algorithm, and priced by NCCL's model.  Each case runs in a forked child (one simulation per process);
 * every rank checks its own results against values folded in double on the rank itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "collective_checks.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs the whole set on a layout under one allreduce and one broadcast algorithm, or priced by
 * NCCL's model (nccl: the numbers exchanged through the audit, coll_priced.c). */
static void run_layout_on(int nodes, int per_node, const int *slots, const char *allreduce,
                          const char *bcast, bool nccl) {
  rh_cluster cl = rh_test_cluster(nodes, per_node, slots);
  if (nccl) cl.net_model = RH_NET_NCCL;
  rh_settings s;
  char err[128];
  assert_int_equal(rh_settings_init(&s, err, sizeof err), RH_OK);
  assert_int_equal(rh_settings_parse(RH_SETTING_ALGORITHM, allreduce, &s.value[RH_SETTING_ALGORITHM]), RH_OK);
  assert_int_equal(rh_settings_parse(RH_SETTING_BCAST_ALGORITHM, bcast, &s.value[RH_SETTING_BCAST_ALGORITHM]), RH_OK);
  s.value[RH_SETTING_PIPELINE_CHUNK] = 64; /* many chunks in the pipelined broadcast */
  int rc = rh_test_simulate(&cl, &s, rh_test_all_collectives, NULL, NULL);
  if (rc != 0)
    print_error("layout %d nodes x %d (%s, %s): child exit %d\n", nodes, per_node, allreduce,
                bcast, rc);
  assert_int_equal(rc, 0);
  free(cl.gpus_per_node);
}

static void run_layout(int nodes, int per_node, const int *slots, const char *allreduce,
                       const char *bcast) {
  run_layout_on(nodes, per_node, slots, allreduce, bcast, false);
}

static void test_np1(void **s) { (void)s; run_layout(1, 1, NULL, "auto", "auto"); }
static void test_np2(void **s) { (void)s; run_layout(1, 2, NULL, "ring", "ring"); run_layout(2, 1, NULL, "hierarchical", "tree"); }
static void test_np3(void **s) { (void)s; run_layout(1, 3, NULL, "ring", "tree"); run_layout(3, 1, NULL, "ring", "ring"); }
static void test_np5_uneven(void **s) {
  (void)s;
  const int slots[] = {3, 2};
  run_layout(2, 0, slots, "hierarchical", "ring"); /* falls back to the ring */
  run_layout(2, 0, slots, "ring", "tree");
}
static void test_np8_one_node(void **s) { (void)s; run_layout(1, 8, NULL, "ring", "tree"); }
static void test_np8_two_nodes(void **s) {
  (void)s;
  run_layout(2, 4, NULL, "hierarchical", "ring");
  run_layout(2, 4, NULL, "ring", "tree");
  run_layout(4, 2, NULL, "auto", "auto");
}
static void test_np4_priced(void **s) { (void)s; run_layout_on(2, 2, NULL, "auto", "auto", true); }
static void test_np64(void **s) {
  (void)s;
  run_layout(8, 8, NULL, "hierarchical", "tree");
  run_layout(1, 64, NULL, "ring", "ring");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_np1),          cmocka_unit_test(test_np2),
      cmocka_unit_test(test_np3),          cmocka_unit_test(test_np5_uneven),
      cmocka_unit_test(test_np8_one_node), cmocka_unit_test(test_np8_two_nodes),
      cmocka_unit_test(test_np4_priced),
      cmocka_unit_test(test_np64),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
