/*
 * report.c: the replay's section of the run's report: the table by cause (count beside the
 * expected count, hours lost and where they went), the effective training time, the first
 * incidents one line each; and `failures.at_scale` in summary.json (every incident).
 */
#include "incidents.h"

#include <math.h>

/* Incidents the report lists one line each (the JSON has them all). */
#define LISTED 12

static double hours(double s) { return s / 3600; }

static void print_cause(FILE *out, const char *name, long count, double expected,
                        const double cost[RH_COST_COUNT]) {
  double lost = 0;
  for (int k = 0; k < RH_COST_COUNT; k++) lost += cost[k];
  fprintf(out, "  %-24s %6ld %9.1f %9.2f", name, count, expected, hours(lost));
  for (int k = 0; k < RH_COST_COUNT; k++) fprintf(out, " %9.2f", hours(cost[k]));
  fputc('\n', out);
}

static void print_table(FILE *out, const rh_incident_job *job, const rh_incident_replay *r) {
  fprintf(out, "  %-24s %6s %9s %9s", "cause", "count", "expected", "lost h");
  for (int k = 0; k < RH_COST_COUNT; k++) fprintf(out, " %9s", rh_cost_part_names[k]);
  fputc('\n', out);
  double total[RH_COST_COUNT] = {0};
  for (int i = 0; i < job->ncauses; i++) {
    const rh_cause_total *t = &r->by_cause[i];
    for (int k = 0; k < RH_COST_COUNT; k++) total[k] += t->cost[k];
    print_cause(out, job->causes[i].name, t->count, rh_cause_expected(job, &job->causes[i]),
                t->cost);
  }
  print_cause(out, "all", r->n, rh_incident_expected(job), total);
}

static void print_incidents(FILE *out, const rh_incident_job *job, const rh_incident_replay *r) {
  for (long i = 0; i < r->n && i < LISTED; i++) {
    const rh_incident *inc = &r->incidents[i];
    double lost = 0;
    for (int k = 0; k < RH_COST_COUNT; k++) lost += inc->cost[k];
    fprintf(out, "  %ld. %s at %.2f h%s: %.1f min =", i + 1, job->causes[inc->cause].name,
            hours(inc->at), inc->in_recovery ? " (during a recovery)" : "", lost / 60);
    bool first = true;
    for (int k = 0; k < RH_COST_COUNT; k++) {
      if (inc->cost[k] <= 0) continue;
      fprintf(out, "%s %s %.1f s", first ? "" : " +", rh_cost_part_names[k], inc->cost[k]);
      first = false;
    }
    fputs(first ? " nothing\n" : "\n", out);
  }
  if (r->n > LISTED) fprintf(out, "  ... and %ld more (summary.json lists them all)\n", r->n - LISTED);
}

static void print_report(FILE *out, const rh_incident_job *job, const rh_incident_replay *r) {
  double expected = rh_incident_expected(job);
  fprintf(out, "\nfailures at scale: %.4g days of wall time on %ld GPUs (%ld nodes), timing only, "
          "seed %llu\n", hours(job->horizon) / 24, job->gpus, job->nodes,
          (unsigned long long)job->seed);
  int own = 0;
  for (int i = 0; i < job->ncauses; i++) own += job->causes[i].own_detect || job->causes[i].own_diagnosis;
  if (isfinite(job->rec.every))
    fprintf(out, "  a checkpoint every %.4g min (%s: training waits %.4g s each)", job->rec.every / 60,
            job->rec.async ? "async" : "sync", job->rec.async ? job->rec.snapshot : job->rec.write);
  else fprintf(out, "  no checkpoints (a failure loses all since the start or the last relaunch)");
  fprintf(out, "; the recovery pipeline %.4g s after detection, before the redone work and any wait "
          "for a node%s\n", job->rec.diagnosis + job->rec.relaunch +
          job->rec.init_per_rank * (double)job->gpus + job->rec.read,
          own ? " (by default: some causes have their own detection or diagnosis)" : "");
  print_table(out, job, r);
  fprintf(out, "  interruptions %ld, expected %.1f (2 sigma: %.0f to %.0f)\n", r->n, expected,
          expected - 2 * sqrt(expected), expected + 2 * sqrt(expected));
  fprintf(out, "  effective training time %.2f%%: trained %.1f h of %.1f h; checkpoints %.1f h "
          "(%ld); incidents %.1f h", 100 * r->effective, hours(r->trained), hours(job->horizon),
          hours(r->checkpointing), r->checkpoints, hours(r->lost));
  if (job->rec.spares >= 0) fprintf(out, "; the longest wait for a node %.2f h", hours(r->spare_wait_max));
  fputc('\n', out);
  print_incidents(out, job, r);
}

static json_t *costs_json(const double cost[RH_COST_COUNT]) {
  json_t *o = json_object();
  for (int k = 0; k < RH_COST_COUNT; k++) json_object_set_new(o, rh_cost_part_names[k], json_real(cost[k]));
  return o;
}

static json_t *report_json(const rh_incident_job *job, const rh_incident_replay *r) {
  json_t *causes = json_object(), *list = json_array();
  for (int i = 0; i < job->ncauses; i++) {
    const rh_cause *c = &job->causes[i];
    json_object_set_new(
        causes, c->name,
        json_pack("{s:I, s:f, s:s, s:s, s:s, s:f, s:o}", "count", (json_int_t)r->by_cause[i].count,
                  "expected", rh_cause_expected(job, c), "per", rh_cause_scope_names[c->per],
                  "detection", rh_detection_names[c->detect], "takes_out",
                  rh_takes_out_names[c->out], "rate_per_unit_hour", c->rate * 3600, "lost_s",
                  costs_json(r->by_cause[i].cost)));
  }
  for (long i = 0; i < r->n; i++) {
    const rh_incident *inc = &r->incidents[i];
    json_array_append_new(list, json_pack("{s:f, s:s, s:b, s:o}", "at_s", inc->at, "cause",
                                          job->causes[inc->cause].name, "during_recovery",
                                          inc->in_recovery, "cost_s", costs_json(inc->cost)));
  }
  return json_pack("{s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:I, s:o, s:o}", "horizon_s",
                   job->horizon, "gpus", (json_int_t)job->gpus, "nodes", (json_int_t)job->nodes,
                   "seed", (json_int_t)job->seed, "interruptions", (json_int_t)r->n, "expected",
                   rh_incident_expected(job), "effective_training_time", r->effective, "trained_s",
                   r->trained, "checkpointing_s", r->checkpointing, "lost_s", r->lost,
                   "checkpoints", (json_int_t)r->checkpoints, "causes", causes, "incidents", list);
}

void rh_incident_report(FILE *out, json_t *root, const rh_incident_job *job,
                        const rh_incident_replay *r) {
  if (out) print_report(out, job, r);
  if (!root) return;
  json_t *failures = json_object_get(root, "failures");
  if (!failures) {
    failures = json_object();
    json_object_set_new(root, "failures", failures);
  }
  json_object_set_new(failures, "at_scale", report_json(job, r));
}
