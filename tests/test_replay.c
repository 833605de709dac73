/*
 * test_replay.c: replaying symmetric collectives at their price (sim/replay.c) changes no
 * simulated time.  A data-parallel loop (steps of backward slices, each followed by a bucket's
 * allreduce) runs at the fine grain, where every message is simulated and nothing is replayed,
 * and at the default grain, where all but the first collective of each size are replayed; every
 * step's time must agree to 1e-9 relative.  At 64 and 256 GPUs, exact and realistic networks,
 * ring and hierarchical algorithms, buckets overlapping the backward pass or not.  Then faults
 * that break the symmetry: a straggler and a degraded uplink (windows within the run), with the
 * collectives they touch run, not replayed, and the steps still equal to the fine grain's; and a
 * rank that crashes, whose failure is the same at both grains.  With the negotiation (the
 * default) and without.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

enum { STEPS = 4, BUCKETS = 3, MAX_STEPS = 8 };

typedef struct loop {
  bool overlap;          /* each bucket's allreduce runs behind the next backward slice */
  double backward_flops; /* per slice */
  size_t count;          /* floats per bucket */
  double step_end[MAX_STEPS]; /* rank 0's clock at the end of each step */
  int failed_at;         /* the step a rank saw its collective fail (-1: none) */
  bool negotiate;        /* check_collectives (the ranks agree before each collective) */
} loop;

static int loop_rank(rh_ctx *ctx, void *arg) {
  loop *l = arg;
  for (int s = 0; s < STEPS; s++) {
    rh_request *req[BUCKETS];
    for (int b = 0; b < BUCKETS; b++) {
      if (rh_compute(ctx, l->backward_flops) != RH_OK) return 1;
      if (l->overlap) {
        if (rh_iallreduce(ctx, NULL, NULL, l->count, RH_FLOAT32, RH_SUM, NULL, &req[b]) != RH_OK)
          return 1;
      }
    }
    for (int b = 0; b < BUCKETS; b++) {
      rh_status st = l->overlap ? rh_wait(req[b])
                                : rh_allreduce(ctx, NULL, NULL, l->count, RH_FLOAT32, RH_SUM, NULL);
      if (st != RH_OK) {
        if (rh_rank(ctx) == 0) l->failed_at = s;
        return 1;
      }
    }
    if (rh_rank(ctx) == 0) l->step_end[s] = rh_time(ctx);
  }
  return 0;
}

static rh_cluster cluster(int gpus, bool exact) {
  rh_cluster cl = rh_test_cluster(gpus / 8, 8, NULL);
  cl.gpu_flops = 100e12;
  cl.intra_bw = 300e9;
  cl.nic_bw = 25e9;
  cl.nics_per_node = 8;
  cl.exact_network = exact;
  cl.net_model = exact ? RH_NET_EXACT : RH_NET_REALISTIC;
  return cl;
}

/* Runs the loop; returns the child's exit code, rank 0's step ends in l. */
static int run(const rh_cluster *cl, const char *grain, const char *algo, loop *l,
               const rh_fault_plan *faults, long *replayed) {
  rh_settings s = rh_test_settings(30);
  s.value[RH_SETTING_CHECK_COLLECTIVES] = l->negotiate;
  assert_int_equal(rh_settings_parse(RH_SETTING_GRAIN, grain, &s.value[RH_SETTING_GRAIN]), RH_OK);
  assert_int_equal(rh_settings_parse(RH_SETTING_ALGORITHM, algo, &s.value[RH_SETTING_ALGORITHM]), RH_OK);
  memset(l->step_end, 0, sizeof l->step_end);
  l->failed_at = -1;
  rh_test_job job = {.faults = faults, .replayed = replayed};
  return rh_test_simulate_job(cl, &s, &job, loop_rank, l, NULL, NULL, 0, NULL);
}

/* Every step's duration, and the first step's end, agree to 1e-9 relative. */
static void same_steps(const loop *fine, const loop *fast, const char *what) {
  for (int s = 0; s < STEPS; s++) {
    double a = fine->step_end[s] - (s ? fine->step_end[s - 1] : 0);
    double b = fast->step_end[s] - (s ? fast->step_end[s - 1] : 0);
    if (!(fabs(a - b) <= 1e-9 * a)) {
      fprintf(stderr, "%s: step %d took %.17g s at the fine grain, %.17g s replayed\n", what, s, a, b);
      fail();
    }
  }
}

static void check_case(int gpus, bool exact, const char *algo, bool overlap, bool negotiate) {
  char what[128];
  snprintf(what, sizeof what, "%d GPUs, %s network, %s, %s, negotiation %s", gpus,
           exact ? "exact" : "realistic", algo, overlap ? "overlapped" : "after backward",
           negotiate ? "on" : "off");
  rh_cluster cl = cluster(gpus, exact);
  loop *fine = rh_test_shared(sizeof *fine), *fast = rh_test_shared(sizeof *fast);
  /* 4 MiB buckets, an even split over the ranks; 5 ms of backward per slice */
  *fine = (loop){.overlap = overlap, .backward_flops = 5e-3 * cl.gpu_flops, .count = 1u << 20,
                 .negotiate = negotiate};
  *fast = *fine;
  long replayed_fine = -1, replayed_fast = -1;
  assert_int_equal(run(&cl, "fine", algo, fine, NULL, &replayed_fine), 0);
  assert_int_equal(run(&cl, "auto", algo, fast, NULL, &replayed_fast), 0);
  if (replayed_fine != 0 || replayed_fast != STEPS * BUCKETS - 1) {
    fprintf(stderr, "%s: %ld collectives replayed at the fine grain, %ld at auto (want 0 and %d)\n",
            what, replayed_fine, replayed_fast, STEPS * BUCKETS - 1);
    fail();
  }
  same_steps(fine, fast, what);
  free(cl.gpus_per_node);
}

static void test_64_gpus(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++)
    for (int a = 0; a < 2; a++)
      for (int o = 0; o < 2; o++)
        for (int neg = 0; neg < 2; neg++) check_case(64, m == 0, a ? "hierarchical" : "ring", o, neg);
}

static void test_256_gpus(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++)
    for (int a = 0; a < 2; a++)
      for (int o = 0; o < 2; o++) check_case(256, m == 0, a ? "hierarchical" : "ring", o, true);
}

static void check_faults_with(const rh_fault *faults, int n, const char *what, bool crashes,
                              bool negotiate) {
  rh_cluster cl = cluster(64, true);
  rh_fault_plan plan = {.faults = faults, .nfaults = n};
  loop *fine = rh_test_shared(sizeof *fine), *fast = rh_test_shared(sizeof *fast);
  *fine = (loop){.overlap = true, .backward_flops = 5e-3 * cl.gpu_flops, .count = 1u << 20,
                 .negotiate = negotiate};
  *fast = *fine;
  long replayed_fine = -1, replayed_fast = -1, quiet = -1;
  loop *none = rh_test_shared(sizeof *none);
  *none = *fine;
  assert_int_equal(run(&cl, "auto", "ring", none, NULL, &quiet), 0);
  int rc_fine = run(&cl, "fine", "ring", fine, &plan, &replayed_fine);
  int rc_fast = run(&cl, "auto", "ring", fast, &plan, &replayed_fast);
  assert_int_equal(rc_fine != 0, crashes);
  assert_int_equal(rc_fast != 0, crashes);
  if (!(replayed_fast < quiet)) {
    fprintf(stderr, "%s: %ld collectives replayed with the fault, %ld without\n", what,
            replayed_fast, quiet);
    fail();
  }
  assert_int_equal(fine->failed_at, fast->failed_at);
  if (!crashes) same_steps(fine, fast, what);
  else
    for (int s = 0; s < fine->failed_at; s++)
      assert_true(fabs(fine->step_end[s] - fast->step_end[s]) <= 1e-9 * fine->step_end[s]);
  free(cl.gpus_per_node);
}

/* Faults inside the run: the collectives whose window they touch are run, not replayed; with
 * the negotiation and without. */
static void check_faults(const rh_fault *faults, int n, const char *what, bool crashes) {
  for (int neg = 0; neg < 2; neg++) check_faults_with(faults, n, what, crashes, neg);
}

static void test_straggler(void **state) {
  (void)state;
  /* GPU 3 of node 2 at half speed from 20 ms to 45 ms: steps 1 and 2 */
  rh_fault f = {.kind = RH_FAULT_STRAGGLER, .node = 2, .gpu = 3, .at = 0.020, .epoch = -1,
                .duration = 0.025, .factor = 0.5};
  check_faults(&f, 1, "straggler", false);
}

static void test_degraded_uplink(void **state) {
  (void)state;
  rh_fault f = {.kind = RH_FAULT_LINK_DEGRADED, .node = 5, .gpu = -1, .uplink = true, .at = 0.030,
                .epoch = -1, .duration = 0.020, .factor = 0.25};
  check_faults(&f, 1, "degraded uplink", false);
}

static void test_crash(void **state) {
  (void)state;
  rh_fault f = {.kind = RH_FAULT_HOST_CRASH, .node = 4, .gpu = -1, .at = 0.047, .epoch = -1,
                .duration = INFINITY};
  check_faults(&f, 1, "crash", true);
}

int main(void) {
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  if (getenv("RH_TEST_SKIP")) cmocka_set_skip_filter(getenv("RH_TEST_SKIP"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_64_gpus),
      cmocka_unit_test(test_256_gpus),
      cmocka_unit_test(test_straggler),
      cmocka_unit_test(test_degraded_uplink),
      cmocka_unit_test(test_crash),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
