/*
 * accuracy_parity.c: the distributed recipe still learns what one worker learns.  The run's final
 * validation accuracy against n one-worker baselines of the same recipe, each from its own seed
 * (the same scenario on one GPU, run beside the job or read from a summary.json,
 * commands/baseline.c).  Runs that differ only in seed spread by about a point, so the bound is
 * the one-sided 97.5% prediction bound of one more draw from the baselines' own spread,
 * t(0.975, n - 1) sd sqrt(1 + 1/n), or the scenario's points where those are wider: a run that
 * learns as one worker does falls below it 2.5% of the time at most.  Higher always passes.
 */
#include "../internal.h"

#include <math.h>
#include <stdio.h>

/* Student's t, one-sided 97.5% (two-sided 95%), for 1 to 30 degrees of freedom; 1.96 beyond. */
static double t975(int dof) {
  static const double t[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                             2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                             2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  return dof < 1 ? NAN : dof <= 30 ? t[dof - 1] : 1.96;
}

double rh_accuracy_bound(const double *baseline, int n, double within_points, double *mean,
                         double *sd) {
  double sum = 0, sq = 0;
  for (int i = 0; i < n; i++) sum += baseline[i];
  *mean = n > 0 ? sum / n : NAN;
  for (int i = 0; i < n; i++) sq += (baseline[i] - *mean) * (baseline[i] - *mean);
  *sd = n > 1 ? sqrt(sq / (n - 1)) : NAN;
  if (n < 2) return within_points;
  return fmax(within_points, 100 * t975(n - 1) * *sd * sqrt(1 + 1.0 / n));
}

void rh_train_verdict_accuracy(rh_train_result *r, double accuracy, const double *baseline, int n,
                               double within_points, const char *source) {
  rh_check_result *c = &r->checks[RH_CHECK_ACCURACY];
  if (isnan(accuracy) || n < 1) {
    *c = (rh_check_result){.skipped = true};
    snprintf(c->detail, sizeof c->detail, "%s",
             isnan(accuracy) ? "the run measured no validation accuracy (validation_steps)"
                             : source);
    return;
  }
  double mean, sd, bound = rh_accuracy_bound(baseline, n, within_points, &mean, &sd);
  double drop = 100 * (mean - accuracy);
  bool ok = drop <= bound;
  char spread[160];
  if (n > 1)
    snprintf(spread, sizeof spread, "the mean of %d seeds, sd %.2f points: bound max(%.3g, "
             "t(0.975, %d) sd sqrt(1 + 1/%d)) = %.2f", n, 100 * sd, within_points, n - 1, n, bound);
  else
    snprintf(spread, sizeof spread, "one seed, its spread unmeasured: bound %.3g", bound);
  *c = (rh_check_result){.ran = true, .passed = ok};
  snprintf(c->detail, sizeof c->detail,
           "final validation accuracy %.2f%% against %.2f%% for one worker of the same recipe "
           "(%s; %s): %.2f points %s%s",
           100 * accuracy, 100 * mean, spread, source, fabs(drop), drop > 0 ? "lower" : "higher",
           ok ? "" : ": the distributed recipe does not learn what one worker does");
}

const train_check train__check_accuracy = {.id = RH_CHECK_ACCURACY};
