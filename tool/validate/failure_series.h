/*
 * failure_series.h: a suite's failure series (suite.h's rh_suite_failure): replays at scale against
 * published incident logs (validate/failure_series.c).
 */
#ifndef RH_VALIDATE_FAILURE_SERIES_H
#define RH_VALIDATE_FAILURE_SERIES_H

#include "scenario.h"
#include "suite.h"

#include <jansson.h>
#include <stdbool.h>

typedef struct rh_failures_score {
  int outside, failed;
  double held_out_count_error;     /* largest |error| of a held-out interruption count, %; NaN: none */
  double held_out_effective_error; /* largest |error| of a held-out effective time, points; NaN: none */
} rh_failures_score;

/* Runs every picked failure series (picks NULL: all) into OUT/NAME, prints the table and appends
 * each figure to `list`. */
void rh_failures_run(const rh_suite *suite, const rh_scenario_opts *opts, const char *out,
                     bool (*picked)(const void *arg, const char *name), const void *arg,
                     json_t *list, rh_failures_score *score);

#endif
