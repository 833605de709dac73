/*
 * workload.h: what a run's model costs its GPU: how its layers were timed (the roofline at the
 * precision's peak, or a sustained rate measured on another model, said so), the memory one GPU
 * holds, tokens/s and MFU, and the per-layer compute table of summary.json.
 */
#ifndef RH_REPORT_WORKLOAD_H
#define RH_REPORT_WORKLOAD_H

#include "memory.h"
#include "scenario.h"

#include <jansson.h>
#include <stdio.h>

/* The memory of one GPU of the scenario's job (timing models), its state sharded as
 * recipe.sharding says. */
void rh_workload_memory(const rh_scenario *sc, rh_memory_use *m);
/* The same with the state sharded as `stage` says, over every rank (a node's GPUs: hybrid). */
void rh_workload_memory_as(const rh_scenario *sc, rh_sharding stage, rh_memory_use *m);
/* The least sharding beyond the scenario's own whose memory fits `capacity` bytes (its memory in
 * *m), or -1 when none does (*m: full sharding's); failing that, with full activation
 * checkpointing where the model has blocks to wrap (*checkpointing set true). */
int rh_workload_sharding_that_fits(const rh_scenario *sc, double capacity, rh_memory_use *m,
                                   bool *checkpointing);

/* The peak FLOP/s MFU is taken against: the roofline's, else the precision's of the GPU; 0: none. */
double rh_workload_peak(const rh_scenario *sc);

/* Prints the compute, memory and per-GPU rate lines of a timing run's summary and adds them to
 * root ("compute", "memory", "layers"; and "rates": tokens_per_s, mfu, for the caller to merge
 * into its summary): samples_per_s is the
 * job's, over `size` GPUs. */
void rh_workload_report(FILE *f, json_t *root, const rh_scenario *sc, double samples_per_s,
                        int size);

#endif
