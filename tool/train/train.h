/*
 * train.h: the training loop of `rehearsal run`, written against the public runtime header alone
 * so that it runs unchanged on every target.  It replays a recipe either timing-only (the model is
 * FLOPs and bytes) or with real numbers (a small C model on real or synthetic data), and with real
 * numbers it checks the recipe: each check is a verdict with the ranks involved.  Mistake switches
 * make the loop commit the errors people make, so that the checks can be seen to catch them.
 */
#ifndef REHEARSAL_TRAIN_H
#define REHEARSAL_TRAIN_H

#include "data.h"
#include "model.h"
#include "optim.h"
#include "recipe.h"
#include "rehearsal.h"

#include <stdbool.h>

typedef enum rh_check_id {
  RH_CHECK_SERIAL = 0,  /* same parameters as serial SGD with batch size x B on the same samples */
  RH_CHECK_IDENTICAL,   /* parameters identical, bit for bit, on every rank after every step */
  RH_CHECK_SAMPLES,     /* no training sample used twice in an epoch; the shards cover the epoch */
  RH_CHECK_LR,          /* the learning rate of every step equals the recipe's formula */
  RH_CHECK_METRICS,     /* the logged metrics are the mean over all ranks */
  RH_CHECK_CHECKPOINT,  /* exactly one writer (rank 0) per checkpoint */
  RH_CHECK_RESUME,      /* resuming from a checkpoint ends with the parameters of the whole run */
  RH_CHECK_COLLECTIVES, /* every rank issued the same collectives; none stalled */
  RH_CHECK_COUNT
} rh_check_id;

extern const char *const rh_check_names[RH_CHECK_COUNT + 1];      /* NULL-terminated */

typedef enum rh_mistake {
  RH_MISTAKE_NO_SHARDING = 1 << 0,          /* every rank reads the whole data set */
  RH_MISTAKE_NO_INITIAL_BROADCAST = 1 << 1, /* each rank keeps its own random initialisation */
  RH_MISTAKE_NO_LR_SCALING = 1 << 2,        /* the base lr, not scaled by the number of workers */
  RH_MISTAKE_METRIC_RANK0_ONLY = 1 << 3,    /* only rank 0 calls the metric average */
  RH_MISTAKE_NO_METRIC_AVERAGE = 1 << 4,    /* every rank logs its own, unaveraged metric */
  RH_MISTAKE_CHECKPOINT_EVERY_RANK = 1 << 5, /* every rank writes the checkpoint */
  RH_MISTAKE_MISMATCHED_COLLECTIVE = 1 << 6, /* the last rank reduces its tensors in another order */
  RH_MISTAKE_MISSING_COLLECTIVE = 1 << 7,   /* the last rank skips one gradient allreduce */
} rh_mistake;

extern const char *const rh_mistake_names[]; /* bit i <-> name i; NULL-terminated */

typedef struct rh_train_layer {
  const char *name;
  double parameters;
  double forward_flops; /* per sample; 0: a share of the model's by parameters */
} rh_train_layer;

/* Everything the loop needs, in plain terms (filled by the command from the scenario). */
typedef struct rh_train_config {
  /* model: real (a C model and data) or timing-only (named layers of given sizes) */
  bool real;
  rh_model model;             /* real */
  const rh_dataset *train;    /* real */
  const rh_dataset *validation; /* real; may have n == 0 */
  long validation_offset;     /* validation sample k is validation->(offset + k) */
  const rh_train_layer *layers; /* timing-only, forward order */
  int nlayers;
  double parameters;
  double forward_flops;       /* per sample, charged to the simulated GPU */
  long train_samples, validation_samples;
  /* recipe */
  long batch;
  double base_lr;
  rh_lr_scaling lr_scaling;
  double warmup_epochs;
  const double *decay_epochs;
  int ndecay;
  double decay_factor;
  rh_optimizer_kind optimizer;
  double momentum, beta1, beta2, eps, rho;
  int epochs;
  bool epochs_divided;
  rh_steps_rule steps_rule;
  rh_val_rule val_rule;
  long stop_at_step;
  uint64_t seed;
  bool shuffle;
  bool replicated;            /* every rank reads the whole set in its own order (Keras fit) */
  long val_batch;
  int checkpoint_every;       /* epochs; 0: none */
  const char *checkpoint_dir; /* NULL: no checkpoints written */
  bool resume;                /* start from the latest checkpoint in checkpoint_dir */
  /* checks and mistakes */
  bool check[RH_CHECK_COUNT];
  long serial_check_steps;    /* 0: every step */
  int resume_from_epoch;      /* RH_CHECK_RESUME: restart after this epoch's checkpoint */
  unsigned mistakes;
} rh_train_config;

typedef struct rh_epoch_stats {
  long steps;
  double start, end;   /* seconds */
  double compute;      /* seconds of forward + backward */
  double exposed_comm; /* seconds a step waited for its allreduces after backward ended */
  double lr_first, lr_last;
  double train_loss, train_accuracy; /* averaged over ranks (real models) */
  double val_loss, val_accuracy;     /* NAN without validation */
  long val_steps;
} rh_epoch_stats;

typedef struct rh_check_result {
  bool ran, passed;
  bool skipped; /* not applicable to this recipe or run (detail says why) */
  char detail[512];
} rh_check_result;

/* What a run produced; rank 0 fills it (every rank agrees on the verdicts). */
typedef struct rh_train_result {
  int epochs;                 /* epochs run (after the epochs rule and the stop step) */
  long steps_per_epoch;
  rh_epoch_stats *epochs_stats; /* allocated by rh_train_result_init for `capacity` epochs */
  int capacity;
  int buckets_per_step;
  double bucket_bytes_max;
  double gradient_bytes;
  int start_epoch;            /* > 0 when resumed from a checkpoint */
  uint64_t params_hash;       /* FNV-1a of the final parameters' bytes (real models) */
  rh_check_result checks[RH_CHECK_COUNT];
  rh_status error;            /* first failure seen on any rank */
  int error_rank;
  char error_detail[1024];
} rh_train_result;

typedef struct rh_train_job {
  const rh_train_config *cfg;
  rh_train_result *result;
} rh_train_job;

rh_status rh_train_result_init(rh_train_result *r, int capacity);
void rh_train_result_free(rh_train_result *r);

/* The rank function of `rehearsal run`; arg is an rh_train_job. */
int rh_train_rank(rh_ctx *ctx, void *arg);

#endif
