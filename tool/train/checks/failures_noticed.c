/*
 * failures_noticed.c: every crash, hang and lasting link fault the scenario scripts took effect
 * and was noticed by the job: a rank's collective failed after it, or the job stopped or re-formed
 * its world.  A fault that never fired (the job ended before its trigger) or that nobody saw (its
 * node held no worker of the job) fails the check: the drill tested nothing.  A fault of a node
 * that had already left the job (after an earlier fault) has nothing to be noticed by, and is not
 * judged.  Judged after the launch, from the job log; degradations and windows that heal are
 * reported, not judged.
 */
#include "../internal.h"
#include "scenario.h"

#include <math.h>
#include <stdio.h>

static bool judged(const rh_fault *f) {
  return f->kind == RH_FAULT_HOST_CRASH || f->kind == RH_FAULT_GPU_CRASH ||
         f->kind == RH_FAULT_HANG || (f->kind == RH_FAULT_LINK_DOWN && isinf(f->duration));
}

void rh_train_verdict_noticed(rh_train_result *r, const rh_fault_plan *plan, const rh_joblog *log,
                              double end) {
  rh_check_result *c = &r->checks[RH_CHECK_NOTICED];
  int n = 0, gone = 0, ended = 0;
  double slowest = 0;
  for (int i = 0; plan && i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    if (!judged(f)) continue;
    const rh_event *fired = NULL, *seen = NULL;
    size_t at = 0;
    for (size_t k = 0; log && k < log->n && !seen; k++) {
      const rh_event *e = &log->events[k];
      if (e->kind == RH_EV_FAULT && e->fault == i) {
        fired = e;
        at = k;
      } else if (fired && (e->kind == RH_EV_NOTICED || e->kind == RH_EV_STOPPED ||
                           e->kind == RH_EV_LEFT)) {
        seen = e;
      }
    }
    if (fired && rh__joblog_left(log, at, f->node) < log->n) {
      gone++;
      continue;
    }
    n++;
    const char *what = rh_fault_names[f->kind];
    char origin[64];
    rh_scenario_event_origin(f->line, i, origin, sizeof origin);
    *c = (rh_check_result){.ran = true, .passed = false};
    if (!fired) {
      snprintf(c->detail, sizeof c->detail,
               "the %s of node %d (%s) never happened: the job ended before its trigger",
               what, f->node, origin);
      return;
    }
    if (!seen && !(end > 0)) { /* no worker returned: it took the last ones, the job ended */
      ended++;
      continue;
    }
    if (!seen) {
      snprintf(c->detail, sizeof c->detail,
               "the %s of node %d (%s) happened at %.6g s but no rank noticed it (did the "
               "node run a worker of the job?)", what, f->node, origin, fired->time);
      return;
    }
    if (seen->time - fired->time > slowest) slowest = seen->time - fired->time;
  }
  if (n == 0) {
    *c = (rh_check_result){.skipped = true};
    snprintf(c->detail, sizeof c->detail, "%s", gone ? "each scripted crash, hang or lasting link "
             "fault struck a node that had already left the job"
             : "the scenario scripts no crash, hang or lasting link fault");
    return;
  }
  *c = (rh_check_result){.ran = true, .passed = true};
  int k = snprintf(c->detail, sizeof c->detail,
                   "each of %d scripted crash, hang or lasting link fault%s was noticed, at most "
                   "%.6g s after it happened", n, n == 1 ? "" : "s", slowest);
  if (ended && k > 0 && (size_t)k < sizeof c->detail)
    k += snprintf(c->detail + k, sizeof c->detail - (size_t)k,
                  ", or ended the job (%d: no worker was left to notice %s)", ended,
                  ended == 1 ? "it" : "them");
  if (gone && k > 0 && (size_t)k < sizeof c->detail)
    snprintf(c->detail + k, sizeof c->detail - (size_t)k,
             " (%d more struck a node that had already left the job)", gone);
}

const train_check train__check_noticed = {.id = RH_CHECK_NOTICED};
