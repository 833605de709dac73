/*
 * scenario.h: a scenario file (YAML) describes the cluster, the model and data, the recipe and the
 * collective settings of one rehearsal.  Parsing is driven by one schema table; any problem is
 * reported as "FILE:LINE: FIELD: what is wrong" and nothing is run.
 */
#ifndef REHEARSAL_SCENARIO_H
#define REHEARSAL_SCENARIO_H

#include "internal.h"
#include "train/train.h"

typedef struct rh_layer {
  char *name;
  double parameters;
  double forward_flops; /* per sample; 0: a share of the model's by parameters */
} rh_layer;

typedef struct rh_scenario {
  char *path;
  char *name;
  char *description;
  rh_cluster cluster; /* cluster.gpus_per_node is owned */
  int network_model;  /* 0 exact (analytic CM02), 1 realistic (SimGrid's default LV08) */
  struct {
    int kind;             /* 0 timing-only, 1 softmax regression, 2 MLP */
    int hidden;           /* MLP hidden units */
    char *name;
    double parameters;
    double forward_flops; /* per sample; 0: from the real model */
    rh_layer *layers;     /* owned; nlayers entries (one "all" layer when none are listed) */
    int nlayers;
  } model;
  struct {
    double train;         /* 0 with IDX files: all their images */
    double validation;
    int source;           /* 0 synthetic, 1 IDX files */
    int inputs, classes;  /* synthetic */
    double noise, seed;   /* synthetic; noise < 0: 0.28 sqrt(inputs) */
    char *train_images, *train_labels, *validation_images, *validation_labels; /* IDX */
  } data;
  struct {
    double batch; /* per worker */
    double base_lr;
    double epochs;
    int lr_scaling;       /* rh_lr_scaling */
    double warmup_epochs;
    double *decay_epochs; /* owned */
    int ndecay;
    double decay_factor;
    int optimizer;        /* rh_optimizer_kind */
    double momentum, beta1, beta2, eps, rho;
    int epochs_rule;      /* 0 fixed, 1 divided by size (rounded up) */
    int steps_rule;       /* rh_steps_rule */
    int val_rule;         /* rh_val_rule */
    double stop_at_step;
    double seed;
    int shuffle;
    int checkpoint_every;
    int sharding;         /* 0 distributed (DistributedSampler), 1 replicated (whole set per rank) */
    double val_batch;     /* 0: batch_per_worker */
  } recipe;
  struct {
    int enabled[RH_CHECK_COUNT]; /* -1: the default (on for real models; resume when asked) */
    double serial_steps;
    int resume_from_epoch;
    unsigned expect_fail;        /* bit per rh_check_id */
  } checks;
  unsigned mistakes;             /* rh_mistake bits */
  rh_settings settings; /* defaults, then environment, then the `collective:` section */
} rh_scenario;

/* Reads and checks `path`.  On failure returns RH_ERR_INVALID (bad content) or RH_ERR_IO and
 * writes one message, naming the file, line and field, into err. */
rh_status rh_scenario_load(const char *path, rh_scenario *sc, char *err, size_t errlen);
void rh_scenario_free(rh_scenario *sc);

/* Ranks in the scenario's cluster. */
int rh_scenario_size(const rh_scenario *sc);
/* Training steps per epoch for each worker, by the recipe's rule. */
long rh_scenario_steps_per_epoch(const rh_scenario *sc);

#endif
