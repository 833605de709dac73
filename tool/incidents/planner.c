/*
 * planner.c: what a team booking the cluster asks of the replay.  One draw of the failures is one
 * possible job; the planner replays the job over many seeds (the same seeds for every variant,
 * so that a difference is the variant's, not the draw's) and answers:
 *   - the spread: interruptions and effective training time over the seeds, and how many of them
 *     leave the Poisson 2-sigma bands of the expected counts (all causes, and each cause);
 *   - the checkpoint interval: effective training time over intervals from 30 s to 16 h, with
 *     Young's and Daly's optimum for the job's MTBF (its unplanned failures) and a checkpoint's
 *     blocking cost beside it, and the interval given among the points;
 *   - the cluster's size: the same job on 1/16 to 8 times its nodes, at the interval given and at
 *     each size's Daly interval (the MTBF falls as the job grows; set-up per rank grows);
 *   - the what-ifs: hot spares (a node always free), async checkpoints, detection timeouts
 *     (heartbeat and collective) halved.
 */
#include "incidents.h"
#include "interval_replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The mean effective training time of `job` over `seeds` seeds from its own; NaN out of memory. */
static double mean_effective(const rh_incident_job *job, int seeds) {
  rh_incident_job j = *job;
  double sum = 0;
  for (int s = 0; s < seeds; s++) {
    j.seed = job->seed + (uint64_t)s;
    rh_incident_replay r;
    if (rh_incident_replay_run(&j, &r) != 0) return NAN;
    sum += r.effective;
    rh_incident_replay_free(&r);
  }
  return sum / seeds;
}

static bool outside(double count, double expected) {
  return fabs(count - expected) > 2 * sqrt(expected);
}

static int series_run(const rh_incident_job *job, int seeds, rh_incident_series *s) {
  size_t n = (size_t)(job->ncauses ? job->ncauses : 1);
  *s = (rh_incident_series){.seeds = seeds, .eff_min = INFINITY, .eff_max = -INFINITY,
                            .cause_mean = calloc(2 * n, sizeof(double))};
  if (!s->cause_mean) return -1;
  s->cause_lost = s->cause_mean + n;
  rh_incident_job j = *job;
  double sum2 = 0, expected = rh_incident_expected(job);
  for (int k = 0; k < seeds; k++) {
    j.seed = job->seed + (uint64_t)k;
    rh_incident_replay r;
    if (rh_incident_replay_run(&j, &r) != 0) return -1;
    s->n_mean += (double)r.n / seeds;
    sum2 += (double)r.n * (double)r.n;
    s->n_outside += outside((double)r.n, expected);
    s->eff_mean += r.effective; /* summed, then divided: as mean_effective does */
    s->eff_min = fmin(s->eff_min, r.effective);
    s->eff_max = fmax(s->eff_max, r.effective);
    s->lost_mean += r.lost / seeds;
    for (int c = 0; c < job->ncauses; c++) {
      s->cause_mean[c] += (double)r.by_cause[c].count / seeds;
      for (int part = 0; part < RH_COST_COUNT; part++)
        s->cause_lost[c] += r.by_cause[c].cost[part] / seeds;
      s->cause_outside += outside((double)r.by_cause[c].count, rh_cause_expected(job, &job->causes[c]));
    }
    rh_incident_replay_free(&r);
  }
  s->eff_mean /= seeds;
  s->n_sd = seeds > 1 ? sqrt(fmax(0, (sum2 - seeds * s->n_mean * s->n_mean) / (seeds - 1))) : 0;
  return 0;
}

/* The job's unplanned failures expected over its horizon (a planned stop drains the job with a
 * checkpoint and loses nothing: it is no failure to checkpoint against). */
static double unplanned_expected(const rh_incident_job *job) {
  double sum = 0;
  for (int i = 0; i < job->ncauses; i++)
    if (job->causes[i].detect != RH_DETECT_PLANNED) sum += rh_cause_expected(job, &job->causes[i]);
  return sum;
}

/* A checkpoint's cost to training (the write, or the snapshot when async) and the job's MTBF. */
static void young_daly(const rh_incident_job *job, double *cost, double *mtbf, double *young,
                       double *daly) {
  double expected = unplanned_expected(job);
  *cost = job->rec.async ? job->rec.snapshot : job->rec.write;
  *mtbf = expected > 0 ? job->horizon / expected : INFINITY;
  *young = *cost > 0 && isfinite(*mtbf) ? rh_young(*cost, *mtbf) : NAN;
  *daly = *cost > 0 && isfinite(*mtbf) ? rh_daly(*cost, *mtbf) : NAN;
}

static double at_interval(const rh_incident_job *job, double every, int seeds) {
  rh_incident_job j = *job;
  j.rec.every = every;
  return isfinite(every) && every > 0 ? mean_effective(&j, seeds) : NAN;
}

static void interval_curve(const rh_incident_job *job, rh_incident_plan *p) {
  /* from 30 s (or a quarter of Daly's interval, when it is shorter) to 16 h */
  const double lo = isfinite(p->daly) && p->daly < 120 ? p->daly / 4 : 30, hi = 16 * 3600;
  p->nintervals = RH_PLAN_INTERVALS;
  p->best_eff = -1;
  for (int i = 0; i < RH_PLAN_INTERVALS; i++) {
    p->interval[i] = lo * pow(hi / lo, (double)i / (RH_PLAN_INTERVALS - 1));
    p->interval_eff[i] = at_interval(job, p->interval[i], RH_PLAN_SEEDS);
    if (p->interval_eff[i] > p->best_eff) {
      p->best_eff = p->interval_eff[i];
      p->best = p->interval[i];
    }
  }
  p->daly_eff = at_interval(job, p->daly, RH_PLAN_SEEDS);
  if (p->daly_eff > p->best_eff) { /* Daly's interval is one of those replayed too */
    p->best_eff = p->daly_eff;
    p->best = p->daly;
  }
}

static void size_curve(const rh_incident_job *job, rh_incident_plan *p) {
  long per_node = job->nodes > 0 ? job->gpus / job->nodes : 1;
  p->nsizes = 0;
  for (int k = -4; k <= 3; k++) {
    double nodes = ldexp((double)job->nodes, k);
    if (nodes < 1 || nodes != floor(nodes)) continue;
    rh_incident_job j = *job;
    j.nodes = (long)nodes;
    j.gpus = j.nodes * per_node;
    int i = p->nsizes++;
    double cost, young;
    p->size_gpus[i] = j.gpus;
    young_daly(&j, &cost, &p->size_mtbf[i], &young, &p->size_daly[i]);
    p->size_eff_given[i] = mean_effective(&j, RH_PLAN_SEEDS);
    p->size_eff_daly[i] = at_interval(&j, p->size_daly[i], RH_PLAN_SEEDS);
  }
}

const char *const rh_what_if_names[RH_WHAT_IF_COUNT] = {"hot_spares", "async_checkpoints",
                                                        "detection_halved"};

/* Whether some cause of the job is noticed by a timeout (a heartbeat's or a collective's). */
static bool timeout_detected(const rh_incident_job *job) {
  for (int i = 0; i < job->ncauses; i++)
    if (job->causes[i].detect == RH_DETECT_HEARTBEAT || job->causes[i].detect == RH_DETECT_TIMEOUT)
      return true;
  return false;
}

/* Whether some cause takes out a GPU or a node (which needs a node to relaunch on). */
static bool takes_nodes(const rh_incident_job *job) {
  for (int i = 0; i < job->ncauses; i++)
    if (job->causes[i].detect != RH_DETECT_PLANNED &&
        (job->causes[i].out == RH_OUT_GPU || job->causes[i].out == RH_OUT_NODE))
      return true;
  return false;
}

/* The job as a what-if changes it (into j, its causes into `causes` when they change); false
 * when it changes nothing (the job already is so, or has nothing it acts on). */
static bool what_if(const rh_incident_job *job, int which, rh_incident_job *j, rh_cause *causes) {
  *j = *job;
  switch (which) {
  case 0:
    j->rec.spares = -1;
    return job->rec.spares >= 0 && takes_nodes(job);
  case 1:
    j->rec.async = true;
    return !job->rec.async && isfinite(job->rec.every) && job->rec.write > 0;
  default: /* a cause's own delay of a timeout's kind is halved too */
    j->rec.detect[RH_DETECT_HEARTBEAT] /= 2;
    j->rec.detect[RH_DETECT_TIMEOUT] /= 2;
    for (int i = 0; i < job->ncauses; i++) {
      causes[i] = job->causes[i];
      if (causes[i].own_detect &&
          (causes[i].detect == RH_DETECT_HEARTBEAT || causes[i].detect == RH_DETECT_TIMEOUT))
        causes[i].detect_s /= 2;
    }
    j->causes = causes;
    return timeout_detected(job);
  }
}

int rh_incident_plan_run(const rh_incident_job *job, rh_incident_plan *p) {
  memset(p, 0, sizeof *p);
  if (series_run(job, RH_PLAN_SEEDS, &p->series) != 0) return -1;
  young_daly(job, &p->cost, &p->mtbf, &p->young, &p->daly);
  interval_curve(job, p);
  size_curve(job, p);
  rh_cause *causes = calloc((size_t)(job->ncauses ? job->ncauses : 1), sizeof *causes);
  if (!causes) return -1;
  for (int w = 0; w < RH_WHAT_IF_COUNT; w++) {
    rh_incident_job j;
    p->what_if_applies[w] = what_if(job, w, &j, causes);
    p->what_if_eff[w] = p->what_if_applies[w] ? mean_effective(&j, RH_PLAN_SEEDS) : p->series.eff_mean;
  }
  free(causes);
  return 0;
}

void rh_incident_plan_free(rh_incident_plan *p) {
  free(p->series.cause_mean); /* and cause_lost after it */
  p->series.cause_mean = p->series.cause_lost = NULL;
}
