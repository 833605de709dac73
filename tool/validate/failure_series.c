/*
 * failure_series.c: the failure series of a validation suite (suite.h): each scenario run by
 * `rehearsal run` in a child, its replay at scale over RH_PLAN_SEEDS seeds (summary.json's
 * failures.at_scale.series) set beside the published log: the mean interruptions within the
 * Poisson 2-sigma band of the published count, each published cause's mean within its own band,
 * the mean effective training time within the series' bound.  Calibration (the log's own rates,
 * a setting chosen to give the published time) is scored apart from held-out figures.
 */
#include "failure_series.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `rehearsal run SCENARIO --out DIR [--set ...]`, its log DIR.log; its summary.json, or NULL. */
static json_t *run_series(const rh_suite_failure *f, const rh_scenario_opts *opts, const char *dir) {
  const char *head[] = {"run", f->scenario};
  char summary[4400];
  snprintf(summary, sizeof summary, "%s/summary.json", dir);
  return rh_validate_child(head, 2, opts, dir) == 0 ? json_load_file(summary, 0, NULL) : NULL;
}

static double jnum(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *kind(const char *calibration) { return calibration ? "calibration" : "held out"; }

/* One figure's line and its JSON; whether it is within. */
static bool figure(const char *series, const char *what, double published, double replayed,
                   double lo, double hi, const char *calibration, json_t *list) {
  bool within = replayed >= lo && replayed <= hi;
  printf("%-26s %-26s %10.4g %10.4g %10.4g %10.4g  %s%s\n", series, what, published, replayed, lo,
         hi, within ? "" : "OUTSIDE ", kind(calibration));
  json_array_append_new(list, json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:b, s:s}", "series",
                                        series, "figure", what, "published", published,
                                        "replayed", replayed, "low", lo, "high", hi, "within",
                                        within, "kind", kind(calibration)));
  return within;
}

/* The Poisson 2-sigma band of a published count n, its low end no less than 0. */
static double band_low(double n) { return fmax(0, n - 2 * sqrt(n)); }
static double band_high(double n) { return n + 2 * sqrt(n); }

/* The larger of a running largest |error| (NaN: none yet) and x. */
static double largest(double so_far, double x) { return isnan(so_far) ? fabs(x) : fmax(so_far, fabs(x)); }

/* The figures of one series from its summary's at_scale.series. */
static void score_series(const rh_suite_failure *f, json_t *series, json_t *list,
                         rh_failures_score *sc) {
  double n = jnum(series, "interruptions_mean");
  bool ok = figure(f->name, "interruptions", f->interruptions, n, band_low(f->interruptions),
                   band_high(f->interruptions), f->counts_calibration, list);
  sc->outside += !ok;
  double err = 100 * (n / f->interruptions - 1);
  if (!f->counts_calibration) sc->held_out_count_error = largest(sc->held_out_count_error, err);
  json_t *means = json_object_get(series, "cause_means");
  for (int c = 0; c < f->ncauses; c++) {
    double m = jnum(means, f->cause[c]), pub = f->cause_count[c];
    char what[96];
    snprintf(what, sizeof what, "  %s", f->cause[c]);
    sc->outside += !figure(f->name, what, pub, isfinite(m) ? m : 0, band_low(pub), band_high(pub),
                           f->counts_calibration, list);
  }
  if (f->effective > 0) {
    double e = 100 * jnum(series, "effective_mean");
    sc->outside += !figure(f->name, "effective training %", f->effective, e,
                           f->effective - f->effective_bound, f->effective + f->effective_bound,
                           f->effective_calibration, list);
    if (!f->effective_calibration)
      sc->held_out_effective_error = largest(sc->held_out_effective_error, e - f->effective);
  }
}

void rh_failures_run(const rh_suite *suite, const rh_scenario_opts *opts, const char *out,
                     bool (*picked)(const void *arg, const char *name), const void *arg,
                     json_t *list, rh_failures_score *sc) {
  *sc = (rh_failures_score){.held_out_count_error = NAN, .held_out_effective_error = NAN};
  printf("%-26s %-26s %10s %10s %10s %10s\n", "# failure series", "figure", "published",
         "replayed", "low", "high");
  printf("%-26s %-26s %10s %10s\n", "#", "", "", "(mean over seeds)");
  for (int i = 0; i < suite->nfailures; i++) {
    const rh_suite_failure *f = &suite->failures[i];
    if (picked && !picked(arg, f->name)) continue;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", out, f->name);
    json_t *root = run_series(f, opts, dir);
    json_t *series = json_object_get(json_object_get(json_object_get(root, "failures"), "at_scale"),
                                     "series");
    if (!json_is_object(series)) {
      sc->failed++;
      printf("%-26s the run failed or replayed nothing at scale: see %s.log\n", f->name, dir);
    } else {
      score_series(f, series, list, sc);
    }
    json_decref(root);
  }
  printf("\nheld out: ");
  if (isnan(sc->held_out_count_error)) printf("no interruption count");
  else printf("interruptions off by %.1f%% at most", sc->held_out_count_error);
  if (isnan(sc->held_out_effective_error)) printf(", no effective training time");
  else printf(", effective training time by %.2f points at most", sc->held_out_effective_error);
  printf("; %d figure%s outside %s band%s\n", sc->outside, sc->outside == 1 ? "" : "s",
         sc->outside == 1 ? "its" : "their", sc->failed ? ", some runs failed" : "");
}
