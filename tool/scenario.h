/*
 * scenario.h: a scenario file (YAML) describes the cluster, the model and data, the recipe and the
 * collective settings of one rehearsal.  Parsing is driven by one schema table; any problem is
 * reported as "FILE:LINE: FIELD: what is wrong" and nothing is run.
 */
#ifndef REHEARSAL_SCENARIO_H
#define REHEARSAL_SCENARIO_H

#include "internal.h"

typedef struct rh_layer {
  char *name;
  double parameters;
} rh_layer;

typedef struct rh_scenario {
  char *path;
  char *name;
  char *description;
  rh_cluster cluster; /* cluster.gpus_per_node is owned */
  int network_model;  /* 0 exact (analytic CM02), 1 realistic (SimGrid's default LV08) */
  struct {
    char *name;
    double parameters;
    double forward_flops; /* per sample */
    rh_layer *layers;     /* owned; nlayers entries (one "all" layer when none are listed) */
    int nlayers;
  } model;
  struct {
    double train;
    double validation;
  } data;
  struct {
    double batch; /* per worker */
    double base_lr;
    double epochs;
  } recipe;
  rh_settings settings; /* defaults, then environment, then the `collective:` section */
} rh_scenario;

/* Reads and checks `path`.  On failure returns RH_ERR_INVALID (bad content) or RH_ERR_IO and
 * writes one message, naming the file, line and field, into err. */
rh_status rh_scenario_load(const char *path, rh_scenario *sc, char *err, size_t errlen);
void rh_scenario_free(rh_scenario *sc);

/* Ranks in the scenario's cluster. */
int rh_scenario_size(const rh_scenario *sc);
/* Training steps per epoch for each worker: train / (batch * size). */
long rh_scenario_steps_per_epoch(const rh_scenario *sc);

#endif
