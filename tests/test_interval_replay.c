/*
 * test_interval_replay.c: the replay of a job's failures for another commit interval.  Small
 * timelines worked out by hand; and, for failures that come at random at a known rate, the
 * replay's wall time against the expected time of Daly's model for exponential failures,
 * E[T] = M e^(R/M) (e^((t + C)/M) - 1) W / t (t the interval, C the commit, R the recovery, W
 * the work), and its best interval against the one that minimises it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "interval_replay.h"

#include <math.h>

static void test_no_failure(void **state) {
  (void)state;
  rh_replay_job job = {.steps = 1000, .step = 1, .cost = 0.5};
  /* ten segments of 100 steps and a commit */
  assert_true(fabs(rh_replay_time(&job, 100, INFINITY) - 10 * 100.5) < 1e-9);
  /* three of 300, then the last 100 and its commit */
  assert_true(fabs(rh_replay_time(&job, 300, INFINITY) - (3 * 300.5 + 100.5)) < 1e-9);
}

static void test_failures_by_hand(void **state) {
  (void)state;
  double one[] = {250}, two[] = {250, 255}, late[] = {2000};
  rh_replay_job job = {.steps = 1000, .step = 1, .cost = 0, .recovery = 10, .failures = one,
                       .nfailures = 1, .horizon = 1e9};
  /* 200 steps committed by 200 s; the failure at 250 loses 50, training again at 260; 800 left */
  assert_true(fabs(rh_replay_time(&job, 100, INFINITY) - 1060) < 1e-9);
  /* a second failure during the recovery starts it again: 255 + 10 */
  job.failures = two;
  job.nfailures = 2;
  assert_true(fabs(rh_replay_time(&job, 100, INFINITY) - 1065) < 1e-9);
  /* every 1000 steps: everything lost at 250 */
  assert_true(fabs(rh_replay_time(&job, 1000, INFINITY) - (265 + 1000)) < 1e-9);
  /* a failure after the end changes nothing */
  job.failures = late;
  job.nfailures = 1;
  assert_true(fabs(rh_replay_time(&job, 100, INFINITY) - 1000) < 1e-9);
}

static double daly_expected(double work, double t, double cost, double recovery, double mtbf) {
  return mtbf * exp(recovery / mtbf) * (exp((t + cost) / mtbf) - 1) * work / t;
}

static void test_random_failures_match_daly(void **state) {
  (void)state;
  double mtbf = 10000, cost = 10, recovery = 60, work = 2e8; /* some 20000 failures */
  rh_replay_job job = {.steps = work, .step = 1, .cost = cost, .recovery = recovery,
                       .rate = 1 / mtbf, .seed = 42};
  long intervals[] = {100, 447, 2000};
  for (int i = 0; i < 3; i++) {
    double got = rh_replay_time(&job, intervals[i], INFINITY);
    double want = daly_expected(work, (double)intervals[i], cost, recovery, mtbf);
    print_message("every %ld s: replay %.6g s, Daly's expectation %.6g s (%+.3f%%)\n",
                  intervals[i], got, want, 100 * (got - want) / want);
    assert_true(fabs(got - want) < 0.01 * want);
  }
  /* the best interval of the expectation, by a fine scan, against the study's (its trials: a
   * hundred jobs of 2e6 s, some 200 failures each) */
  job.steps = 2e6;
  double best = 1, least = INFINITY;
  for (double t = 10; t < 5000; t += 1) {
    double e = daly_expected(work, t, cost, recovery, mtbf);
    if (e < least) {
      least = e;
      best = t;
    }
  }
  rh_interval_study s;
  rh_interval_study_run(&job, 2000, &s);
  print_message("best interval: replay %ld s, Daly's expectation %.0f s, Daly's formula %.0f s, "
                "Young's %.0f s\n", s.best, best, s.daly, s.young);
  assert_true(fabs((double)s.best - best) < 0.2 * best);
  /* the expected goodput of the chosen interval: the work over Daly's expected time */
  double want = job.steps / daly_expected(job.steps, 2000, cost, recovery, mtbf);
  print_message("every 2000 s: expected goodput %.4f, Daly's %.4f\n", s.chosen_goodput, want);
  assert_true(fabs(s.chosen_goodput - want) < 0.01 * want);
  assert_true(fabs(s.young - sqrt(2 * cost * mtbf)) < 1e-9);
  assert_true(s.best_goodput >= s.chosen_goodput);
}

static void test_hopeless_interval_gives_up(void **state) {
  (void)state;
  /* segments of 1e6 s against failures every 1e3 s on average: e^1000 tries, given up on after
   * 100 times the work */
  rh_replay_job job = {.steps = 1e6, .step = 1, .cost = 1, .recovery = 1, .rate = 1e-3,
                       .seed = 1};
  assert_true(isinf(rh_replay_time(&job, 1000000, 1e9)));
  rh_interval_study s;
  rh_interval_study_run(&job, 1000000, &s);
  assert_true(s.chosen_goodput == 0);
  /* Young's sqrt(2 * 1 * 1000) = 44.7 s: the best is near it and well above 90% */
  assert_true(s.best >= 20 && s.best <= 90);
  assert_true(s.best_goodput > 0.9);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_failure),
      cmocka_unit_test(test_failures_by_hand),
      cmocka_unit_test(test_random_failures_match_daly),
      cmocka_unit_test(test_hopeless_interval_gives_up),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
