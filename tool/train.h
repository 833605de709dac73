/*
 * train.h: the timing replay of a scenario's training, written against the public runtime header
 * alone so that it runs unchanged on every target.  Each step spends the model's forward FLOPs,
 * then the backward pass layer by layer (last layer first), fusing gradients into buckets of up to
 * the fusion threshold that are allreduced in the background while backward goes on.
 */
#ifndef REHEARSAL_TRAIN_H
#define REHEARSAL_TRAIN_H

#include "scenario.h"

typedef struct rh_epoch_stats {
  long steps;
  double start, end;   /* seconds */
  double compute;      /* seconds of forward + backward */
  double exposed_comm; /* seconds a step waited for its allreduces after backward ended */
} rh_epoch_stats;

typedef struct rh_run {
  const rh_scenario *sc;
  /* filled by the ranks (rank 0 records; every rank checks) */
  rh_epoch_stats *epochs; /* sc->recipe.epochs entries */
  int buckets_per_step;
  double bucket_bytes_max;
  double gradient_bytes;
  int algorithm;          /* rh_algo of the largest bucket */
  double predicted_allreduce; /* cost model, seconds, for the whole gradient at once */
  rh_status error;        /* first failure seen on any rank */
  int error_rank;
} rh_run;

rh_status rh_run_init(rh_run *run, const rh_scenario *sc);
void rh_run_free(rh_run *run);
/* The rank function of `rehearsal run`; arg is an rh_run. */
int rh_train_rank(rh_ctx *ctx, void *arg);

#endif
