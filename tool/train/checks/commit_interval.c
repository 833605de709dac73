/*
 * commit_interval.c: the interval between commits (elastic) or checkpoints (relaunches) suits
 * the failure rate.  A failure loses the work since the last commit; each commit costs its time.
 * To first order the fraction of the time lost at an interval T, with commit cost C and a job
 * MTBF M, is C / T + T / 2M, least at Young's T* = sqrt(2 C M) (Young 1974; Daly 2006 refines it
 * to sqrt(2 C M) - C for C << M).  The check fails when the recipe's interval loses more than the
 * tolerance beyond what T* loses.  Judged after the launch, from the costs the run measured.
 */
#include "../internal.h"
#include "interval_replay.h"

#include <math.h>
#include <stdio.h>

double rh_interval_waste(double interval, double cost, double mtbf) {
  return interval > 0 && mtbf > 0 ? cost / interval + interval / (2 * mtbf) : INFINITY;
}

void rh_train_verdict_interval(rh_train_result *r, const rh_interval_figures *f, double tolerance) {
  rh_check_result *c = &r->checks[RH_CHECK_INTERVAL];
  const char *what = f->elastic ? "commit" : "checkpoint";
  if (!(f->mtbf > 0) || !(f->cost > 0) || !(f->interval > 0)) {
    *c = (rh_check_result){.skipped = true};
    snprintf(c->detail, sizeof c->detail,
             !(f->mtbf > 0)   ? "the scenario gives no failure rate (gpu_mtbf_hours, node_mtbf_hours)"
             : !(f->cost > 0) ? "no %s was measured"
                              : "no failure-free step was measured to set the %s interval in seconds",
             what);
    return;
  }
  double best = rh_young(f->cost, f->mtbf);
  double lose = rh_interval_waste(f->interval, f->cost, f->mtbf);
  double least = rh_interval_waste(best, f->cost, f->mtbf);
  bool ok = lose - least <= tolerance;
  *c = (rh_check_result){.ran = true, .passed = ok};
  char every[48];
  snprintf(c->detail, sizeof c->detail,
           "a %s %s (%.4g s, each %.4g s) against a job MTBF of %.4g h: it loses "
           "%.3g%% of the time to %ss and redone work, Young's interval sqrt(2 C M) = %.4g s "
           "loses %.3g%%%s",
           what, train__every(f->steps, every, sizeof every), f->interval, f->cost, f->mtbf / 3600, 100 * lose, what, best,
           100 * least, ok ? "" : ": the interval is too far from it for this failure rate");
}

const train_check train__check_interval = {.id = RH_CHECK_INTERVAL};
