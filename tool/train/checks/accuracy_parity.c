/*
 * accuracy_parity.c: the distributed recipe still learns what one worker learns.  The run's final
 * validation accuracy against a one-worker baseline of the same recipe (the same scenario on one
 * GPU, run beside the job or read from a summary.json, commands/baseline.c), within a bound the
 * scenario sets in points.  Higher than the baseline always passes.
 */
#include "../internal.h"

#include <math.h>
#include <stdio.h>

void rh_train_verdict_accuracy(rh_train_result *r, double accuracy, double baseline,
                               double within_points, const char *source) {
  rh_check_result *c = &r->checks[RH_CHECK_ACCURACY];
  if (isnan(accuracy) || isnan(baseline)) {
    *c = (rh_check_result){.skipped = true};
    snprintf(c->detail, sizeof c->detail, "%s",
             isnan(accuracy) ? "the run measured no validation accuracy (validation_steps)"
                             : source);
    return;
  }
  double drop = 100 * (baseline - accuracy);
  bool ok = drop <= within_points;
  *c = (rh_check_result){.ran = true, .passed = ok};
  snprintf(c->detail, sizeof c->detail,
           "final validation accuracy %.2f%% against %.2f%% for one worker of the same recipe "
           "(%s): %.2f points %s, within %.3g%s",
           100 * accuracy, 100 * baseline, source, fabs(drop), drop > 0 ? "lower" : "higher",
           within_points, ok ? "" : ": the distributed recipe does not learn what one worker does");
}

const train_check train__check_accuracy = {.id = RH_CHECK_ACCURACY};
