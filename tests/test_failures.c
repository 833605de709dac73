/*
 * test_failures.c: a failure is a status, never a hang or an abort.  A rank that never joins a
 * collective makes the others' waits end with RH_ERR_TIMEOUT after the collective timeout; a host
 * that dies in the middle of an allreduce makes its neighbours see RH_ERR_PEER_DEAD, and the job
 * ends, the other ranks seeing RH_ERR_ABORTED as their partners give up.  The host is turned off through SimGrid directly, as the failure injection will do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <simgrid/actor.h>
#include <simgrid/host.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { RANKS = 4 };
static int *statuses; /* shared with the child: one rh_status per rank, 1 = never returned */
static double *finished;
static char (*messages)[512]; /* rh_last_error of each rank */

static int absent_rank(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx);
  if (me == 2) { /* never reaches the collective */
    statuses[me] = RH_OK;
    return 0;
  }
  rh_status st = rh_allreduce(ctx, NULL, NULL, 1 << 20, RH_FLOAT32, RH_SUM, NULL);
  statuses[me] = st;
  finished[me] = rh_time(ctx);
  return 0;
}

static void test_absent_peer_times_out(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(2, 2, NULL);
  rh_settings s = rh_test_settings(0.5);
  s.value[RH_SETTING_GRAIN] = RH_GRAIN_FINE;
  for (int r = 0; r < RANKS; r++) statuses[r] = 1;
  double end = 0;
  rh_test_simulate(&cl, &s, absent_rank, NULL, &end);
  for (int r = 0; r < RANKS; r++) {
    if (r == 2) continue;
    print_message("rank %d: %s at %.6f s\n", r, rh_status_string((rh_status)statuses[r]), finished[r]);
    assert_int_equal(statuses[r], RH_ERR_TIMEOUT);
    assert_true(finished[r] >= 0.5 && finished[r] < 2.0); /* one timeout, not a hang */
  }
  free(cl.gpus_per_node);
}

static void chaos(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sg_actor_sleep_for(1e-4); /* in the middle of the 64 MiB allreduce (0.34 ms) */
  sg_host_turn_off(sg_host_by_name("gpu1"));
}

static int dying_host(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx);
  if (me == 0) sg_actor_create("chaos", sg_host_self(), chaos, 0, NULL);
  rh_status st = rh_allreduce(ctx, NULL, NULL, 16 << 20, RH_FLOAT32, RH_SUM, NULL);
  statuses[me] = st;
  finished[me] = rh_time(ctx);
  return st == RH_OK ? 0 : 1;
}

static void test_dead_host_is_a_status(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(1, RANKS, NULL);
  rh_settings s = rh_test_settings(0.5);
  s.value[RH_SETTING_GRAIN] = RH_GRAIN_FINE;
  s.value[RH_SETTING_ALGORITHM] = RH_ALGO_RING;
  for (int r = 0; r < RANKS; r++) statuses[r] = 1;
  int rc = rh_test_simulate(&cl, &s, dying_host, NULL, NULL);
  assert_int_equal(rc, 1); /* the job reports failure; the child did not crash */
  assert_int_equal(statuses[1], 1); /* rank 1 died with its host */
  int dead_seen = 0;
  for (int r = 0; r < RANKS; r++) {
    if (r == 1) continue;
    print_message("rank %d: %s at %.6f s\n", r, rh_status_string((rh_status)statuses[r]), finished[r]);
    /* the neighbours see the death; the others see their partners abandon the collective */
    assert_true(statuses[r] == RH_ERR_PEER_DEAD || statuses[r] == RH_ERR_ABORTED);
    dead_seen += statuses[r] == RH_ERR_PEER_DEAD;
  }
  assert_true(dead_seen >= 1); /* the neighbours of rank 1 see it die */
  free(cl.gpus_per_node);
}

/* Rank 2 issues a different collective: every rank learns it, no rank hangs, and afterwards the
 * job goes on. */
static int mismatched(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx);
  float w[640] = {0};
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = me == 2 ? "fc2.bias" : "fc2.weight";
  rh_status st = rh_allreduce(ctx, w, w, me == 2 ? 10 : 640, RH_FLOAT32, RH_AVERAGE, &o);
  statuses[me] = st;
  snprintf(messages[me], sizeof messages[me], "%s", rh_last_error(ctx));
  float one = 1;
  return rh_allreduce(ctx, &one, &one, 1, RH_FLOAT32, RH_SUM, NULL) == RH_OK && one == RANKS ? 0 : 1;
}

static void test_mismatch_is_named(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(2, 2, NULL);
  rh_settings s = rh_test_settings(600);
  assert_int_equal(rh_test_simulate(&cl, &s, mismatched, NULL, NULL), 0);
  for (int r = 0; r < RANKS; r++) {
    print_message("rank %d: %s\n", r, messages[r]);
    assert_int_equal(statuses[r], RH_ERR_MISMATCH);
    assert_non_null(strstr(messages[r], "ranks 0,1,3 issued allreduce 'fc2.weight' (640 x float, avg)"));
    assert_non_null(strstr(messages[r], "ranks 2 issued allreduce 'fc2.bias' (10 x float, avg)"));
  }
  free(cl.gpus_per_node);
}

/* Rank 3 never issues the allreduce of the loss: a stall naming it, after the timeout. */
static int stalled(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx);
  double loss = me;
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = "loss";
  rh_status st = me == 3 ? RH_OK : rh_allreduce(ctx, &loss, &loss, 1, RH_FLOAT64, RH_AVERAGE, &o);
  statuses[me] = st;
  finished[me] = rh_time(ctx);
  snprintf(messages[me], sizeof messages[me], "%s", rh_last_error(ctx));
  return 0;
}

static void test_stall_is_named(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(1, RANKS, NULL);
  rh_settings s = rh_test_settings(60);
  assert_int_equal(rh_test_simulate(&cl, &s, stalled, NULL, NULL), 0);
  for (int r = 0; r < 3; r++) {
    print_message("rank %d at %.3f s: %s\n", r, finished[r], messages[r]);
    assert_int_equal(statuses[r], RH_ERR_TIMEOUT);
    assert_true(finished[r] == 60.0);
    assert_non_null(strstr(messages[r], "stall: collective #0 allreduce 'loss' (1 x double, avg): "
                                        "ranks 0-2 waited 60 s; ranks 3 never issued it"));
  }
  free(cl.gpus_per_node);
}

/* The dying host again, at the default (coarse) grain: a status, not a deadlock. */
static void test_dead_host_at_coarse_grain(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(1, RANKS, NULL);
  rh_settings s = rh_test_settings(0.5);
  s.value[RH_SETTING_ALGORITHM] = RH_ALGO_RING;
  for (int r = 0; r < RANKS; r++) statuses[r] = 1;
  assert_int_equal(rh_test_simulate(&cl, &s, dying_host, NULL, NULL), 1);
  int dead_seen = 0;
  for (int r = 0; r < RANKS; r++) {
    if (r == 1) continue;
    print_message("rank %d: %s at %.6f s\n", r, rh_status_string((rh_status)statuses[r]), finished[r]);
    assert_true(statuses[r] == RH_ERR_PEER_DEAD || statuses[r] == RH_ERR_ABORTED);
    dead_seen += statuses[r] == RH_ERR_PEER_DEAD;
  }
  assert_true(dead_seen >= 1);
  free(cl.gpus_per_node);
}

/* With the negotiation off, ranks that disagree on a length still fail cleanly: each message
 * says how long it is. */
static int lengths_differ(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx);
  float buf[4096] = {0};
  rh_status st = rh_broadcast(ctx, buf, me == 0 ? 4 : 4096, RH_FLOAT32, 0);
  statuses[me] = st;
  return 0;
}

static void test_length_mismatch_without_negotiation(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(1, 2, NULL);
  rh_settings s = rh_test_settings(600);
  s.value[RH_SETTING_CHECK_COLLECTIVES] = 0;
  s.value[RH_SETTING_BCAST_ALGORITHM] = RH_BCAST_TREE;
  s.value[RH_SETTING_TIMEOUT] = 1;
  assert_int_equal(rh_test_simulate(&cl, &s, lengths_differ, NULL, NULL), 0);
  assert_int_equal(statuses[1], RH_ERR_MISMATCH);
  free(cl.gpus_per_node);
}

/* One rank's bad argument fails the collective on every rank, at once. */
static int bad_root_on_one(rh_ctx *ctx, void *arg) {
  (void)arg;
  int me = rh_rank(ctx);
  float x = 1;
  rh_status st = rh_broadcast(ctx, &x, 1, RH_FLOAT32, me == 3 ? 99 : 0);
  statuses[me] = st;
  finished[me] = rh_time(ctx);
  snprintf(messages[me], sizeof messages[me], "%s", rh_last_error(ctx));
  return 0;
}

static void test_invalid_argument_fails_every_rank(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(2, 2, NULL);
  rh_settings s = rh_test_settings(600);
  assert_int_equal(rh_test_simulate(&cl, &s, bad_root_on_one, NULL, NULL), 0);
  for (int r = 0; r < RANKS; r++) {
    assert_int_equal(statuses[r], RH_ERR_INVALID);
    assert_true(finished[r] == 0.0); /* no waiting */
    assert_non_null(strstr(messages[r], "ranks 3 passed invalid arguments"));
  }
  free(cl.gpus_per_node);
}

int main(void) {
  statuses = mmap(NULL, 16384, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  finished = (double *)(statuses + 64);
  messages = (char (*)[512])(statuses + 1024);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_absent_peer_times_out),
      cmocka_unit_test(test_dead_host_is_a_status),
      cmocka_unit_test(test_mismatch_is_named),
      cmocka_unit_test(test_stall_is_named),
      cmocka_unit_test(test_dead_host_at_coarse_grain),
      cmocka_unit_test(test_length_mismatch_without_negotiation),
      cmocka_unit_test(test_invalid_argument_fails_every_rank),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
