/*
 * onegpu.h: the one-GPU suite: published single-GPU training throughputs, each a scenario with
 * overrides priced by the kernel model (workload/kernels/), set beside what its source measured.
 */
#ifndef RH_VALIDATE_ONEGPU_H
#define RH_VALIDATE_ONEGPU_H

#include "scenario.h"
#include "suite.h"

#include <jansson.h>

/* The outcome of the one-GPU points. */
typedef struct rh_onegpu_score {
  int held_out, calibration, outside, failed, above, below, sweeps_outside;
  double mean, max;         /* over the held-out points: |error| in percent */
  double cal_mean, cal_max; /* over the calibration points */
} rh_onegpu_score;

/* Loads suite point `p`'s scenario with its overrides, then `opts`' --set ones: 0, or 2 with the
 * scenario's error in err.  *sc is the caller's to free on success. */
int rh_onegpu_load(const rh_suite_point *p, const rh_scenario_opts *opts, rh_scenario *sc,
                   char *err, size_t errlen);

/* Prices suite point `p` (its overrides, then `opts`' --set ones): *predicted samples/s.  0, 2 for
 * a scenario that does not load (err says why), 1 when it has no kernel model or memory ran out. */
int rh_onegpu_predict(const rh_suite_point *p, const rh_scenario_opts *opts, double *predicted,
                      char *err, size_t errlen);

/* Prices every point picked (picks NULL: all), prints the table and the scores on stdout and
 * appends each point to `points` (JSON); fills *score. */
void rh_onegpu_run(const rh_suite *suite, const rh_scenario_opts *opts,
                   bool (*picked)(const void *arg, const char *name), const void *arg,
                   json_t *points, rh_onegpu_score *score);

#endif
