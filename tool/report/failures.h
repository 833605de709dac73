/*
 * failures.h: what the failures of a job cost, from its job log and the pace of its steps.
 * Each fault that took effect is an incident: when it hit, who noticed it and how (the first
 * failed collective of each rank), and what recovering took (detection, the elastic rendezvous or
 * the relaunch, the state's sync or restore, the work done again since the last commit or
 * checkpoint); a degradation's cost is its slower steps against the job's own pace.  The report
 * prints a section, adds it to the JSON summary, and gives the totals and the goodput.
 */
#ifndef REHEARSAL_FAILURES_H
#define REHEARSAL_FAILURES_H

#include "scenario.h"

#include <jansson.h>
#include <stdio.h>

/* Incidents the report describes one line each, at most; the others are counted in its totals
 * and listed in the JSON all the same. */
#define RH_FAILURE_LISTED 256

typedef struct rh_failure_totals {
  int incidents;      /* faults that took effect, and host changes that re-formed the world */
  double lost;        /* seconds: detection, recovery, work done again, slower steps */
  double slow;        /* of which slower steps during degradations */
  double commit, checkpoint; /* seconds spent committing and writing checkpoints */
  double goodput;     /* the fraction of the GPU-time held spent on work that counted */
  double time_goodput; /* the fraction of the job's time spent on it (what the interval replay models) */
  double gpu_held, gpu_in_world; /* GPU-seconds the job held (failed nodes' included), and in its world */
  double step;        /* the pace of a failure-free step of the first world, seconds */
  double recovery;    /* mean seconds from a failure to training again, redone work aside */
  int resets, relaunches;
  double end;         /* the job's end: the last worker's, or when it lost the last one */
  bool none_left;     /* every worker of the job died: no node was left to go on */
  /* when the failures that cost a recovery (an elastic reset, a relaunch, the job's end, or a
   * second failure during a recovery) struck, ascending (owned: rh_failure_totals_free) */
  double *struck;
  int nstruck;
} rh_failure_totals;

/* Analyses the job (end: its end time) and prints the failures section to out (NULL: nothing
 * printed); adds "failures" to root (may be NULL); fills totals.  elastic (may be NULL) gives the
 * discovery's changes: those the job ended before the driver saw are said never to happen. */
void rh_failure_report(FILE *out, json_t *root, const rh_fault_plan *plan,
                       const rh_elastic_config *elastic, const rh_joblog *log,
                       const rh_train_result *res, double end, rh_failure_totals *totals);

void rh_failure_totals_free(rh_failure_totals *totals);

/* Seconds of [t0, t1) lost to failures (for the per-epoch table). */
double rh_failure_lost_within(const rh_fault_plan *plan, const rh_joblog *log,
                              const rh_train_result *res, double end, double t0, double t1);

#endif
