/*
 * pipeline.c: one incident's recovery, the redone work aside.  In order: detection (the delay
 * its kind of failure gets), diagnosis and eviction (for every unplanned failure: the job's
 * automation finds the bad part before relaunching), the wait for a node (only when a GPU or a
 * node was taken out and no spare is free), the relaunch (scheduler and process start), the
 * communicator's set-up at the job's ranks, and the checkpoint's read.  A planned stop skips
 * detection and diagnosis: the job is drained with a checkpoint (counted as checkpointing).
 */
#include "incidents.h"

void rh_incident_pipeline(const rh_incident_job *job, const rh_cause *c, double detect,
                          double wait, double cost[RH_COST_COUNT]) {
  const rh_recovery *r = &job->rec;
  bool planned = c->detect == RH_DETECT_PLANNED;
  cost[RH_COST_DETECT] = planned ? 0 : detect;
  cost[RH_COST_DIAGNOSIS] = planned ? 0 : rh_cause_diagnosis(r, c);
  cost[RH_COST_WAIT] = wait;
  cost[RH_COST_RELAUNCH] = r->relaunch;
  cost[RH_COST_INIT] = r->init_per_rank * (double)job->gpus;
  cost[RH_COST_READ] = r->read;
}
