/*
 * bottleneck.h: where a step's time goes, and whether the network is the bottleneck.  From a
 * finished run: compute against waiting for gradients (by bucket), the bytes the busiest links
 * carry per step against their line rate, and what-if figures (an infinitely fast network, twice
 * the network, no overlap of backward and allreduce), ending in a one-line verdict.
 */
#ifndef REHEARSAL_BOTTLENECK_H
#define REHEARSAL_BOTTLENECK_H

#include "scenario.h"

#include <jansson.h>
#include <stdio.h>

typedef struct rh_step_split {
  double step, compute, wait; /* seconds per step */
  double framework, slowest;  /* the losses beside the network (losses.h), in step */
  double input;               /* the wait for the input pipeline (data.loader), in step */
  double buckets;             /* the buckets' allreduces back to back, by the cost model */
} rh_step_split;

/* Horovod's negotiation before each bucket's allreduce (workload/losses.h), by the cost model:
 * seconds, 0 where none runs (DDP, real models, one rank). */
double rh_negotiation_seconds(const rh_scenario *sc, rh_scenario_view *view);

/* Prints the `bottleneck` section of the summary and sets root.bottleneck.  `what_if`: also the
 * step on twice the network (the step's buckets replayed at the cost model's times; nothing is
 * simulated again). */
/* The report's lists of buckets show this many, the largest first, and a line for the rest
 * (summary.json has them all). */
#define RH_REPORT_TOP 5
/* The positions of the k largest of v[0..n) (ties: the lower position), in increasing position,
 * into top (k entries); how many that is (k, or n when n <= k + 1: a line for one more costs
 * what the line for it does). */
int rh_report_top(const double *v, int n, int k, int *top);

/* The same job with its state sharded otherwise: one ZeRO stage less or more, or hybrid (the
 * run's what-if; commands/sharding_what_if.c runs them). */
typedef struct rh_sharding_alt {
  int sharding;         /* rh_shard_stage */
  const char *relation; /* "one stage less", "one stage more", "hybrid" */
  double step;          /* seconds; 0: the run gave no step */
  double tokens_per_s, memory, capacity; /* memory per GPU and the GPU's, bytes */
  bool ran;             /* false: the run failed */
} rh_sharding_alt;
#define RH_SHARDING_ALTS 3
typedef struct rh_sharding_alts {
  rh_sharding_alt alt[RH_SHARDING_ALTS];
  int n;
} rh_sharding_alts;

/* alts: the sharding what-ifs (NULL: none). */
void rh_bottleneck_report(FILE *f, json_t *root, const rh_scenario *sc, const rh_train_result *res,
                          const rh_step_split *split, bool what_if, const rh_sharding_alts *alts);

#endif
