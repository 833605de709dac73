/*
 * kernels.h: the kernel model's step as a report: every kernel of one step (`rehearsal model
 * --kernels`), and each layer's kernels, times and bounds for summary.json.
 */
#ifndef RH_REPORT_KERNELS_H
#define RH_REPORT_KERNELS_H

#include "scenario.h"

#include <jansson.h>
#include <stdio.h>

/* Prints one step of `batch` samples, a row a kernel in issue order, then the step's totals;
 * 0, or 1 when out of memory. */
int rh_report_kernels(FILE *f, const rh_scenario *sc, double batch);

/* The step of `batch` samples as JSON: its totals and each layer's kernels (NULL when the
 * scenario has no kernel model, or out of memory; the caller's reference). */
json_t *rh_report_kernels_json(const rh_scenario *sc, double batch);
/* The same of a step already priced (rh_step_price's times and kernels). */
json_t *rh_report_kernels_json_of(const rh_scenario *sc, const rh_step_times *st,
                                  const rh_kernel_list *l);

#endif
