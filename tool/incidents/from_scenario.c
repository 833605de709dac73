/*
 * from_scenario.c: the replay's job from a scenario (failures: causes, exposure, horizon;
 * restart: the recovery pipeline; storage: the checkpoint's write and read) and from the run that
 * sampled its pace (the steady step, the checkpoint's bytes).
 */
#include "incidents.h"
#include "internal.h"
#include "scenario.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double cause_rate(const rh_scenario *sc, const rh_scenario_cause *c) {
  const double units[] = {sc->failures.exposure_gpus, sc->failures.exposure_nodes, 1};
  if (c->count >= 0) return rh_cause_rate(c->count, units[c->per], sc->failures.exposure_hours);
  return c->mtbf_hours > 0 ? 1 / (c->mtbf_hours * 3600) : 0;
}

static rh_recovery recovery_of(const rh_scenario *sc, double step, double state_bytes, long gpus) {
  rh_recovery r = {.diagnosis = sc->restart.diagnosis_s, .spares = sc->restart.spare_nodes,
                   .repair = sc->restart.repair_s, .relaunch = sc->restart.relaunch_s,
                   .init_per_rank = sc->restart.init_per_rank_s,
                   .read = rh__storage_seconds(&sc->cluster, state_bytes, false),
                   .write = rh__storage_seconds(&sc->cluster, state_bytes, true),
                   .async = sc->restart.checkpoint_async};
  r.detect[RH_DETECT_EXIT] = sc->restart.exit_poll_s;
  r.detect[RH_DETECT_HEARTBEAT] = sc->restart.heartbeat_timeout_s;
  r.detect[RH_DETECT_TIMEOUT] = sc->restart.collective_timeout_s;
  r.snapshot = gpus > 0 && sc->restart.snapshot_bw > 0 ? state_bytes / (double)gpus / sc->restart.snapshot_bw : 0;
  if (sc->restart.checkpoint_every_s > 0) r.every = sc->restart.checkpoint_every_s;
  else if (sc->recipe.checkpoint_every_steps > 0 && step > 0)
    r.every = sc->recipe.checkpoint_every_steps * step;
  else r.every = INFINITY; /* none: a failure loses everything since the start or the last relaunch */
  return r;
}

int rh_incident_job_from(const rh_scenario *sc, double step, double state_bytes,
                         rh_incident_job *job) {
  int n = sc->failures.ncauses;
  /* one block: the causes, then their scripted times */
  size_t m = (size_t)(n ? n : 1);
  rh_cause *causes = calloc(1, m * sizeof *causes + m * sizeof(double));
  if (!causes) return -1;
  double *at = (double *)(causes + m);
  int kept = 0;
  for (int i = 0; i < n; i++) {
    const rh_scenario_cause *c = &sc->failures.causes[i];
    if (!rh_scenario_cause_kept(sc, i)) continue;
    rh_cause *k = &causes[kept];
    *k = (rh_cause){.per = (rh_cause_scope)c->per, .rate = cause_rate(sc, c),
                    .detect = (rh_detection)c->detection, .out = (rh_takes_out)c->takes_out,
                    .own_detect = c->detect_s >= 0, .detect_s = c->detect_s,
                    .own_diagnosis = c->diagnosis_s >= 0, .diagnosis_s = c->diagnosis_s};
    snprintf(k->name, sizeof k->name, "%s", c->name);
    if (c->at_hours >= 0) {
      at[kept] = c->at_hours * 3600;
      k->at = &at[kept];
      k->nat = 1;
    }
    kept++;
  }
  long gpus = rh_scenario_size(sc);
  *job = (rh_incident_job){.causes = causes, .ncauses = kept, .gpus = gpus,
                           .nodes = sc->cluster.nodes, .horizon = sc->failures.horizon_s,
                           .seed = (uint64_t)sc->failures.seed,
                           .rec = recovery_of(sc, step, state_bytes, gpus)};
  return 0;
}

void rh_incident_job_free(rh_incident_job *job) {
  free((void *)job->causes); /* and the scripted times after them */
  *job = (rh_incident_job){0};
}
