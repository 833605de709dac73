/*
 * plan_report.c: the planner's lines in the run's report (after the failure table) and its
 * figures in summary.json's failures.at_scale: `series` (over the seeds), `plan` (the interval
 * and size curves with Young's and Daly's optimum, the what-ifs).  `rehearsal plot` draws the two
 * curves from there (report/plots.c).
 */
#include "incidents.h"

#include <math.h>

static double pct(double x) { return 100 * x; }

static void print_series(FILE *out, const rh_incident_job *job, const rh_incident_plan *p) {
  const rh_incident_series *s = &p->series;
  fprintf(out, "  over %d seeds: interruptions %.1f (sd %.1f; %d of %d outside the 2 sigma band), "
          "causes outside their own band %d of %d; effective training time %.2f%% (%.2f to "
          "%.2f%%), %.1f h lost a job\n", s->seeds, s->n_mean, s->n_sd, s->n_outside, s->seeds,
          s->cause_outside, s->seeds * job->ncauses, pct(s->eff_mean), pct(s->eff_min),
          pct(s->eff_max), s->lost_mean / 3600);
}

static void print_interval(FILE *out, const rh_incident_job *job, const rh_incident_plan *p) {
  if (!isfinite(p->mtbf)) {
    fprintf(out, "  interval: no unplanned failure is expected: no interval to choose\n");
    return;
  }
  fprintf(out, "  interval: the job's MTBF %.3g h (unplanned failures), a checkpoint costs training "
          "%.3g s", p->mtbf / 3600, p->cost);
  if (isfinite(p->daly))
    fprintf(out, "; Young's optimum %.3g min, Daly's %.3g min (%.2f%%)", p->young / 60,
            p->daly / 60, pct(p->daly_eff));
  fprintf(out, "; the best replayed %.3g min (%.2f%%); given ", p->best / 60, pct(p->best_eff));
  if (isfinite(job->rec.every)) fprintf(out, "%.3g min (%.2f%%)\n", job->rec.every / 60, pct(p->series.eff_mean));
  else fprintf(out, "no checkpoints (%.2f%%)\n", pct(p->series.eff_mean));
}

static void print_sizes(FILE *out, const rh_incident_job *job, const rh_incident_plan *p) {
  fprintf(out, "  size: the job on 1/16 to 8 times its nodes (whole nodes)\n");
  fprintf(out, "        %8s %9s %12s %10s %12s\n", "GPUs", "MTBF h", "at given", "Daly min",
          "at Daly's");
  for (int i = 0; i < p->nsizes; i++) {
    fprintf(out, "        %8ld %9.3g %11.2f%%", p->size_gpus[i], p->size_mtbf[i] / 3600,
            pct(p->size_eff_given[i]));
    if (isfinite(p->size_daly[i]))
      fprintf(out, " %10.3g %11.2f%%", p->size_daly[i] / 60, pct(p->size_eff_daly[i]));
    else fprintf(out, " %10s %12s", "-", "-");
    fputs(p->size_gpus[i] == job->gpus ? "  (this job)\n" : "\n", out);
  }
}

static void print_what_ifs(FILE *out, const rh_incident_plan *p) {
  static const char *const said[RH_WHAT_IF_COUNT] = {"hot spares", "async checkpoints",
                                                     "detection timeouts halved"};
  fprintf(out, "  what if (%.2f%% as given; no change: already so, or nothing it acts on):",
          pct(p->series.eff_mean));
  for (int w = 0; w < RH_WHAT_IF_COUNT; w++) {
    if (p->what_if_applies[w])
      fprintf(out, "%s %s %+.2f points", w ? ";" : "", said[w],
              pct(p->what_if_eff[w] - p->series.eff_mean));
    else fprintf(out, "%s %s no change", w ? ";" : "", said[w]);
  }
  fputc('\n', out);
}

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *series_json(const rh_incident_job *job, const rh_incident_series *s) {
  json_t *causes = json_object(), *lost = json_object();
  for (int c = 0; c < job->ncauses; c++) {
    json_object_set_new(causes, job->causes[c].name, json_real(s->cause_mean[c]));
    json_object_set_new(lost, job->causes[c].name, json_real(s->cause_lost[c]));
  }
  return json_pack("{s:i, s:f, s:f, s:i, s:i, s:f, s:f, s:f, s:f, s:o, s:o}", "seeds", s->seeds,
                   "interruptions_mean", s->n_mean, "interruptions_sd", s->n_sd,
                   "seeds_outside_band", s->n_outside, "cause_counts_outside_band",
                   s->cause_outside, "effective_mean", s->eff_mean, "effective_min", s->eff_min,
                   "effective_max", s->eff_max, "lost_mean_s", s->lost_mean, "cause_means", causes,
                   "cause_lost_mean_s", lost);
}

static json_t *plan_json(const rh_incident_job *job, const rh_incident_plan *p) {
  json_t *intervals = json_array(), *sizes = json_array(), *what = json_object();
  for (int i = 0; i < p->nintervals; i++)
    json_array_append_new(intervals, json_pack("{s:f, s:o}", "every_s", p->interval[i],
                                               "effective", num(p->interval_eff[i])));
  for (int i = 0; i < p->nsizes; i++)
    json_array_append_new(sizes, json_pack("{s:I, s:o, s:o, s:o, s:o}", "gpus",
                                           (json_int_t)p->size_gpus[i], "mtbf_s",
                                           num(p->size_mtbf[i]), "effective_given",
                                           num(p->size_eff_given[i]), "daly_s",
                                           num(p->size_daly[i]), "effective_daly",
                                           num(p->size_eff_daly[i])));
  for (int w = 0; w < RH_WHAT_IF_COUNT; w++)
    json_object_set_new(what, rh_what_if_names[w],
                        json_pack("{s:b, s:f}", "applies", p->what_if_applies[w], "effective",
                                  p->what_if_eff[w]));
  return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i}", "mtbf_s",
                   num(p->mtbf), "checkpoint_cost_s", num(p->cost), "young_s", num(p->young),
                   "daly_s", num(p->daly), "given_s", num(job->rec.every), "effective_daly",
                   num(p->daly_eff), "best_s", num(p->best), "effective_best", num(p->best_eff),
                   "intervals", intervals, "sizes", sizes, "what_if", what, "seeds",
                   RH_PLAN_SEEDS);
}

void rh_incident_plan_report(FILE *out, json_t *at_scale, const rh_incident_job *job,
                             const rh_incident_plan *p) {
  if (out) {
    print_series(out, job, p);
    print_interval(out, job, p);
    print_sizes(out, job, p);
    print_what_ifs(out, p);
  }
  if (!at_scale) return;
  json_object_set_new(at_scale, "series", series_json(job, &p->series));
  json_object_set_new(at_scale, "plan", plan_json(job, p));
}
