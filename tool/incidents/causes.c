/*
 * causes.c: the names of a cause's scope, detection and reach, and its rate from a log.
 */
#include "incidents.h"

const char *const rh_cause_scope_names[RH_PER_COUNT + 1] = {"gpu", "node", "job", NULL};
const char *const rh_detection_names[RH_DETECT_COUNT + 1] = {"exit", "heartbeat", "timeout",
                                                             "checksum", "planned", NULL};
const char *const rh_takes_out_names[RH_OUT_COUNT + 1] = {"gpu", "node", "link", "job", NULL};
const char *const rh_cost_part_names[RH_COST_COUNT] = {"redo", "detect", "diagnosis", "wait",
                                                       "relaunch", "init", "read"};

double rh_cause_rate(double count, double units, double hours) {
  return units > 0 && hours > 0 ? count / (units * hours * 3600) : 0;
}

static double units_of(const rh_incident_job *job, const rh_cause *c) {
  return c->per == RH_PER_GPU ? (double)job->gpus : c->per == RH_PER_NODE ? (double)job->nodes : 1;
}

double rh_cause_expected(const rh_incident_job *job, const rh_cause *c) {
  int scripted = 0;
  while (scripted < c->nat && c->at[scripted] < job->horizon) scripted++;
  return c->rate * units_of(job, c) * job->horizon + scripted;
}

double rh_incident_expected(const rh_incident_job *job) {
  double sum = 0;
  for (int i = 0; i < job->ncauses; i++) sum += rh_cause_expected(job, &job->causes[i]);
  return sum;
}

/* The job's failures per second, all random causes together. */
double rh__incident_rate(const rh_incident_job *job) {
  double sum = 0;
  for (int i = 0; i < job->ncauses; i++) sum += job->causes[i].rate * units_of(job, &job->causes[i]);
  return sum;
}

/* The cause a draw u in [0, 1) falls on, in proportion to each one's rate. */
int rh__incident_pick(const rh_incident_job *job, double u) {
  double total = rh__incident_rate(job), acc = 0;
  int last = -1;
  for (int i = 0; i < job->ncauses; i++) {
    double r = job->causes[i].rate * units_of(job, &job->causes[i]);
    if (!(r > 0)) continue;
    last = i;
    acc += r;
    if (u * total < acc) return i;
  }
  return last;
}

double rh_cause_detect(const rh_recovery *r, const rh_cause *c) {
  return c->own_detect ? c->detect_s : r->detect[c->detect];
}

double rh_cause_diagnosis(const rh_recovery *r, const rh_cause *c) {
  return c->own_diagnosis ? c->diagnosis_s : r->diagnosis;
}
