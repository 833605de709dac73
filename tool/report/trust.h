/*
 * trust.h: how far to trust a figure of a run.  The validation suite (scenarios/papers/suite.yaml,
 * docs/validation.md) holds the predicted scaling of data-parallel jobs on some GPU generations,
 * with each GPU's rate set from a measured one: a run's throughput is as good as its compute rate
 * (given, or priced by a roofline the suite has not checked) and, for scaling, as the suite's
 * error on setups of its kind.  The note goes beside the figure and into summary.json.
 */
#ifndef RH_REPORT_TRUST_H
#define RH_REPORT_TRUST_H

#include "scenario.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum { RH_TRUST_THROUGHPUT, RH_TRUST_MFU } rh_trust_figure;

/* The kernel model's mean and worst error (percent) over the one-GPU suite's held-out points. */
extern const double rh_trust_kernels_mean, rh_trust_kernels_worst;

/* Whether the suite has validated scaling on the GPU generation of sc's cluster. */
bool rh_trust_validated(const rh_scenario *sc);

/* The note for `figure` of a run of sc, "(...)", into buf; returns buf.  Does not block. */
const char *rh_trust_note(const rh_scenario *sc, rh_trust_figure figure, char *buf, size_t len);

/* summary.json's "trust": {"compute", "scaling", "throughput", "mfu"} (a new reference). */
json_t *rh_trust_json(const rh_scenario *sc);

#endif
