/*
 * validate.c: `rehearsal validate`: the shipped suite of published data-parallel results
 * (scenarios/papers/suite.yaml, validate/suite.h), each series swept over its GPU counts by
 * `rehearsal sweep` as a user would run it, set beside what its source published: per point the
 * published and the predicted scaling efficiency (throughput at N over N times the one-GPU
 * throughput, each side against its own one GPU: the simulated one without communication or
 * framework, as the sources measured one GPU without their distributed framework) and the error in
 * points, then the mean and the largest absolute error.  Exit 1 when a point leaves its series'
 * bound.
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "suite.h"
#include "onegpu.h"
#include "failure_series.h"

#include <errno.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef REHEARSAL_SUITE
#define REHEARSAL_SUITE "scenarios/papers/suite.yaml"
#endif
#ifndef REHEARSAL_ONEGPU_SUITE
#define REHEARSAL_ONEGPU_SUITE "scenarios/onegpu/suite.yaml"
#endif
#ifndef REHEARSAL_FAILURES_SUITE
#define REHEARSAL_FAILURES_SUITE "scenarios/papers/failures/suite.yaml"
#endif

static const char usage_text[] =
    "usage: rehearsal validate [SUITE | --one-gpu | --failures] [--out DIR] [--series NAME]...\n"
    "                          [--set KEY=VALUE]...\n"
    "Runs a suite of published data-parallel results (default: the shipped one,\n"
    "scenarios/papers/suite.yaml): each series' scenario swept over its GPU counts, and per point\n"
    "the published and the predicted scaling efficiency (against one GPU without communication),\n"
    "the error in points and its bound; then the mean and the largest absolute error.  A suite's\n"
    "one-GPU points (--one-gpu: the shipped scenarios/onegpu/suite.yaml) are priced by the kernel\n"
    "model against the samples/s their sources measured on one GPU, held-out and calibration\n"
    "points scored apart.  A suite's failure series (--failures: the shipped\n"
    "scenarios/papers/failures/suite.yaml) replay published incident logs at scale: interruptions\n"
    "and causes within the Poisson 2-sigma band of the published counts, the effective training\n"
    "time within its bound; calibration and held-out figures scored apart.\n"
    "  --one-gpu      the shipped one-GPU suite\n"
    "  --failures     the shipped failure suite\n"
    "  --out DIR      where each series' sweep (each failure series' run) and validate.json go\n"
    "                 (default: a new directory $TMPDIR/rehearsal-validate-XXXXXX, kept and\n"
    "                 named at the end)\n"
    "  --series NAME  only this series, point or failure series (repeatable)\n"
    "  --set K=V      an override for every series (recipe.reducer_ms_per_GB=0: one loss off)\n"
    "      --help, --version\n"
    "Exit status: 0 every figure within its bound, 1 one outside it (or a sweep or a run\n"
    "failed), 2 bad input.\n";

enum { MAX_PICKS = 64 };

typedef struct validate_flags {
  const char *out;
  bool one_gpu, failures;
  const char *picks[MAX_PICKS];
  int npicks;
} validate_flags;

static int validate_option(int c, const char *value, void *arg) {
  validate_flags *f = arg;
  if (c == 'o') f->out = value;
  if (c == '1') f->one_gpu = true;
  if (c == 'F') f->failures = true;
  if (c == 's') {
    if (f->npicks == MAX_PICKS) {
      rh_cli_why("at most %d series", MAX_PICKS);
      return 2;
    }
    f->picks[f->npicks++] = value;
  }
  return 0;
}

static bool picked(const validate_flags *f, const char *name);
static bool picked_point(const void *arg, const char *name) { return picked(arg, name); }

static bool picked(const validate_flags *f, const char *name) {
  if (!f->npicks) return true;
  for (int i = 0; i < f->npicks; i++)
    if (!strcmp(f->picks[i], name)) return true;
  return false;
}

/* `rehearsal sweep SCENARIO --axis gpus=1,... --out DIR [--set ...]` in a child, its output in
 * DIR.log; its exit status, or -1. */
static int sweep(const rh_suite_series *s, const rh_scenario_opts *opts, const char *dir) {
  char axis[512];
  int n = snprintf(axis, sizeof axis, "gpus=1");
  for (int k = 0; k < s->ncounts && n > 0 && (size_t)n < sizeof axis; k++)
    n += snprintf(axis + n, sizeof axis - (size_t)n, ",%d", s->gpus[k]);
  const char *head[] = {"sweep", s->scenario, "--axis", axis};
  return rh_validate_child(head, 4, opts, dir);
}

/* samples/s (`key`) of the sweep's point at `gpus` (status ok), or NAN */
static double throughput_at(json_t *root, int gpus, const char *key) {
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(root, "points"), i, p) {
    const char *status = json_string_value(json_object_get(p, "status"));
    if (json_integer_value(json_object_get(p, "gpus")) == gpus && status && !strcmp(status, "ok"))
      return json_number_value(json_object_get(p, key));
  }
  return NAN;
}

/* The first of a failure series' published causes that its scenario does not replay (not among
 * its causes, or left out by failures.only_per); NULL when there is none. */
static const char *cause_missing(const rh_suite_failure *fs, const rh_scenario *sc) {
  for (int c = 0; c < fs->ncauses; c++) {
    bool found = false;
    for (int i = 0; i < sc->failures.ncauses && !found; i++)
      found = !strcmp(sc->failures.causes[i].name, fs->cause[c]) && rh_scenario_cause_kept(sc, i);
    if (!found) return fs->cause[c];
  }
  return NULL;
}

/* Loads each picked series' and point's scenario with the overrides, before anything runs or is
 * written: a bad one is bad input (exit 2), named by the suite's line and the scenario's error. */
static int check_scenarios(const char *file, const rh_suite *suite, const validate_flags *f,
                           const rh_scenario_opts *opts) {
  for (int s = 0; s < suite->nseries; s++) {
    const rh_suite_series *se = &suite->series[s];
    if (!picked(f, se->name)) continue;
    rh_scenario sc;
    char err[1024];
    if (rh_scenario_load_opts(se->scenario, opts, &sc, err, sizeof err) != RH_OK) {
      fprintf(stderr, "rehearsal validate: %s:%d: scenario: series %s: %s\n", file,
              se->scenario_line, se->name, err);
      return 2;
    }
    rh_scenario_free(&sc);
  }
  for (int i = 0; i < suite->nfailures; i++) {
    const rh_suite_failure *fs = &suite->failures[i];
    if (!picked(f, fs->name)) continue;
    rh_scenario sc;
    char err[1024];
    if (rh_scenario_load_opts(fs->scenario, opts, &sc, err, sizeof err) != RH_OK) {
      fprintf(stderr, "rehearsal validate: %s:%d: scenario: failure series %s: %s\n", file,
              fs->scenario_line, fs->name, err);
      return 2;
    }
    bool at_scale = sc.failures.horizon_s > 0;
    const char *missing = at_scale ? cause_missing(fs, &sc) : NULL;
    if (!at_scale)
      fprintf(stderr, "rehearsal validate: %s:%d: scenario: failure series %s: %s has no "
              "failures.horizon_days to replay\n", file, fs->scenario_line, fs->name, fs->scenario);
    else if (missing)
      fprintf(stderr, "rehearsal validate: %s:%d: causes: failure series %s: %s is not a cause "
              "its scenario replays (%s)\n", file, fs->causes_line, fs->name, missing, fs->scenario);
    rh_scenario_free(&sc);
    if (!at_scale || missing) return 2;
  }
  for (int i = 0; i < suite->npoints; i++) {
    const rh_suite_point *pt = &suite->points[i];
    rh_scenario sc;
    char err[1024];
    if (!picked(f, pt->name)) continue;
    if (rh_onegpu_load(pt, opts, &sc, err, sizeof err) != 0) {
      fprintf(stderr, "rehearsal validate: %s:%d: scenario: point %s: %s\n", file,
              pt->scenario_line, pt->name, err);
      return 2;
    }
    rh_scenario_free(&sc);
  }
  return 0;
}

/* Without --out: a new directory under $TMPDIR (or /tmp), never one in the current folder; it is
 * kept, for the sweeps' logs, and its name printed with validate.json's.  NULL if none could be made. */
static const char *temporary_out(char *buf, size_t len) {
  const char *t = getenv("TMPDIR");
  snprintf(buf, len, "%s/rehearsal-validate-XXXXXX", t && *t ? t : "/tmp");
  if (mkdtemp(buf)) return buf;
  fprintf(stderr, "rehearsal validate: cannot create %s: %s\n", buf, strerror(errno));
  return NULL;
}

/* What a run of the suite came to, over its series and its points. */
typedef struct tally {
  int outside, failed;
} tally;

/* The series' errors so far. */
typedef struct series_stats {
  double sum, worst, thr_sum;
  int npoints, above, below, nthr, worst_gpus;
  const char *worst_at;
} series_stats;

/* Point k of series se, from its sweep's figures (root NULL: the sweep failed; one: its one GPU
 * without communication): printed, counted and appended to jpoints. */
static void series_point(const rh_suite_series *se, int k, json_t *root, double one,
                         const char *dir, series_stats *ss, json_t *jpoints, tally *t) {
  double pub = rh_suite_published_efficiency(se, k);
  double at = root ? throughput_at(root, se->gpus[k], "samples_per_s") : NAN;
  double pred = 100 * at / (se->gpus[k] * one), e = pred - pub;
  json_t *jp = json_pack("{s:s, s:s, s:i, s:f, s:f}", "series", se->name, "source", se->source,
                         "gpus", se->gpus[k], "published_efficiency", pub, "bound", se->bound);
  if (isfinite(one)) json_object_set_new(jp, "one_gpu_samples_per_s", json_real(one));
  if (se->one_gpu > 0)
    json_object_set_new(jp, "published_one_gpu_samples_per_s", json_real(se->one_gpu));
  if (!isfinite(pred)) {
    t->failed++;
    printf("%-30s %6d %10.1f %10s %8s %6.0f %10s  the sweep failed: see %s.log\n", se->name,
           se->gpus[k], pub, "-", "-", se->bound, "-", dir);
    json_object_set_new(jp, "status", json_string("failed"));
    json_array_append_new(jpoints, jp);
    return;
  }
  bool out = fabs(e) > se->bound;
  t->outside += out;
  ss->above += e > 0;
  ss->below += e < 0;
  ss->sum += fabs(e);
  ss->npoints++;
  if (fabs(e) > ss->worst) {
    ss->worst = fabs(e);
    ss->worst_at = se->name;
    ss->worst_gpus = se->gpus[k];
  }
  /* the absolute samples/s a GPU, where the source published throughputs */
  double thr_err = se->one_gpu > 0 ? 100 * (at / se->published[k] - 1) : NAN;
  char thr[16] = "-";
  if (isfinite(thr_err)) {
    ss->thr_sum += fabs(thr_err);
    ss->nthr++;
    json_object_set_new(jp, "throughput_error_percent", json_real(thr_err));
    snprintf(thr, sizeof thr, "%+.1f", thr_err);
  }
  printf("%-30s %6d %10.1f %10.1f %+8.1f %6.0f %10s  %s\n", se->name, se->gpus[k], pub, pred, e,
         se->bound, thr, out ? "OUTSIDE" : "");
  json_object_set_new(jp, "predicted_efficiency", json_real(pred));
  json_object_set_new(jp, "error_points", json_real(e));
  json_object_set_new(jp, "status", json_string(out ? "outside" : "within"));
  json_array_append_new(jpoints, jp);
}

static void series_summary(const series_stats *ss, const tally *t, json_t *jroot, json_t *jpoints) {
  if (ss->npoints)
    printf("\nmean absolute error %.2f points over %d points (%d above, %d below); largest %.1f "
           "(%s at %d GPUs)\n", ss->sum / ss->npoints, ss->npoints, ss->above, ss->below, ss->worst,
           ss->worst_at, ss->worst_gpus);
  else
    printf("\nno point was predicted: every sweep failed (their logs are named above)\n");
  if (ss->nthr)
    printf("per-GPU throughput of the points that published it: mean absolute error %.1f%% over %d "
           "points\n", ss->thr_sum / ss->nthr, ss->nthr);
  if (t->outside || t->failed)
    printf("%d point%s outside %s bound%s%s\n", t->outside, t->outside == 1 ? "" : "s",
           t->outside == 1 ? "its" : "their", t->failed ? ", " : "", t->failed ? "some sweeps failed" : "");
  json_object_set_new(jroot, "points", jpoints);
  json_object_set_new(jroot, "summary",
                      json_pack("{s:i, s:f, s:f, s:i, s:i, s:i, s:i, s:f}", "points", ss->npoints,
                                "mean_abs_error", ss->npoints ? ss->sum / ss->npoints : 0.0,
                                "max_abs_error", ss->worst, "above", ss->above, "below", ss->below,
                                "outside", t->outside, "failed", t->failed,
                                "throughput_mean_abs_error_percent",
                                ss->nthr ? ss->thr_sum / ss->nthr : 0.0));
}

/* The series: each swept, each point printed; validate.json's points and summary into jroot. */
static void run_series(const rh_suite *suite, const validate_flags *flags,
                       const rh_scenario_opts *opts, json_t *jroot, tally *t) {
  json_t *jpoints = json_array();
  printf("%-30s %6s %10s %10s %8s %6s %10s  %s\n", "# series", "gpus", "published", "predicted",
         "error", "bound", "per GPU", "");
  printf("%-30s %6s %10s %10s %8s %6s %10s\n", "#", "", "(%)", "(%)", "(points)", "", "(% off)");
  series_stats ss = {.worst_at = ""};
  for (int s = 0; s < suite->nseries; s++) {
    const rh_suite_series *se = &suite->series[s];
    if (!picked(flags, se->name)) continue;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", flags->out, se->name);
    int st = sweep(se, opts, dir);
    char json[4300];
    snprintf(json, sizeof json, "%s/sweep.json", dir);
    json_t *root = st == 0 ? json_load_file(json, 0, NULL) : NULL;
    /* one GPU without communication (a Horovod cycle's wait on one rank is not in it) */
    double one = root ? throughput_at(root, 1, "ideal_samples_per_s") : NAN;
    for (int k = 0; k < se->ncounts; k++) series_point(se, k, root, one, dir, &ss, jpoints, t);
    json_decref(root);
  }
  series_summary(&ss, t, jroot, jpoints);
}

/* The suite's one-GPU points, into jroot's "one_gpu". */
static void run_points(const rh_suite *suite, const validate_flags *flags,
                       const rh_scenario_opts *opts, json_t *jroot, tally *t) {
  json_t *points = json_array();
  rh_onegpu_score sc;
  rh_onegpu_run(suite, opts, picked_point, flags, points, &sc);
  t->outside += sc.outside;
  t->failed += sc.failed;
  json_object_set_new(jroot, "one_gpu", json_pack("{s:o, s:{s:i, s:f, s:f, s:i, s:i, s:i, s:f, s:f, s:i, s:i}}",
      "points", points, "summary", "held_out", sc.held_out, "mean_abs_error_percent", sc.mean,
      "max_abs_error_percent", sc.max, "above", sc.above, "below", sc.below, "calibration",
      sc.calibration, "calibration_mean_percent", sc.cal_mean, "calibration_max_percent", sc.cal_max,
      "outside", sc.outside, "sweep_points_beyond_10_percent", sc.sweeps_outside));
}

/* The suite's failure series, into jroot's "failures". */
static void run_failures(const rh_suite *suite, const validate_flags *flags,
                         const rh_scenario_opts *opts, json_t *jroot, tally *t) {
  json_t *figures = json_array();
  rh_failures_score sc;
  rh_failures_run(suite, opts, flags->out, picked_point, flags, figures, &sc);
  t->outside += sc.outside;
  t->failed += sc.failed;
  json_t *count = isnan(sc.held_out_count_error) ? json_null() : json_real(sc.held_out_count_error);
  json_t *eff = isnan(sc.held_out_effective_error) ? json_null() : json_real(sc.held_out_effective_error);
  json_object_set_new(jroot, "failures", json_pack("{s:o, s:{s:i, s:i, s:o, s:o}}", "figures",
      figures, "summary", "outside", sc.outside, "failed", sc.failed,
      "held_out_interruptions_max_error_percent", count, "held_out_effective_max_error_points", eff));
}

/* The picked names are the suite's series or points. */
static int check_picks(const char *file, const rh_suite *suite, const validate_flags *flags) {
  for (int i = 0; i < flags->npicks; i++) {
    bool found = false;
    for (int s = 0; s < suite->nseries; s++) found = found || !strcmp(suite->series[s].name, flags->picks[i]);
    for (int s = 0; s < suite->npoints; s++) found = found || !strcmp(suite->points[s].name, flags->picks[i]);
    for (int s = 0; s < suite->nfailures; s++) found = found || !strcmp(suite->failures[s].name, flags->picks[i]);
    if (!found) return rh_cli_error("validate", "--series %s: no such series or point in %s", flags->picks[i], file);
  }
  return 0;
}

/* Runs what the suite holds and writes validate.json; the exit status. */
static int run_suite(const char *file, const rh_suite *suite, const validate_flags *flags,
                     const rh_scenario_opts *opts) {
  json_t *jroot = json_object();
  json_object_set_new(jroot, "suite", json_string(file));
  tally t = {0};
  if (suite->nseries) run_series(suite, flags, opts, jroot, &t);
  if (suite->nseries && suite->npoints) printf("\n");
  if (suite->npoints) run_points(suite, flags, opts, jroot, &t);
  if ((suite->nseries || suite->npoints) && suite->nfailures) printf("\n");
  if (suite->nfailures) run_failures(suite, flags, opts, jroot, &t);
  char path[4200];
  snprintf(path, sizeof path, "%s/validate.json", flags->out);
  if (json_dump_file(jroot, path, JSON_INDENT(2)) != 0) {
    fprintf(stderr, "rehearsal validate: cannot write %s\n", path);
    t.failed++;
  } else {
    printf("wrote %s\n", path);
  }
  json_decref(jroot);
  return t.outside || t.failed ? 1 : 0;
}

int rh_cmd_validate(int argc, char **argv) {
  static const struct option longopts[] = {{"out", required_argument, NULL, 'o'},
                                           {"series", required_argument, NULL, 's'},
                                           {"one-gpu", no_argument, NULL, '1'},
                                           {"failures", no_argument, NULL, 'F'},
                                           RH_CLI_COMMON_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  validate_flags flags = {0};
  rh_scenario_opts opts = {0};
  int first;
  int rc = rh_cli_parse("validate", usage_text, argc, argv, "o:s:", longopts, validate_option,
                        &flags, &opts, &first);
  if (rc >= 0) return rc;
  if (flags.one_gpu && flags.failures) {
    rh_cli_opts_free(&opts);
    return rh_cli_error("validate", "--one-gpu and --failures name two suites: give one");
  }
  if (argc - first > 1 || ((flags.one_gpu || flags.failures) && argc - first > 0)) {
    rh_cli_opts_free(&opts);
    return rh_cli_error("validate", "one suite file at most (--one-gpu and --failures name "
                        "shipped ones)");
  }
  const char *file = first < argc       ? argv[first]
                     : flags.one_gpu    ? REHEARSAL_ONEGPU_SUITE
                     : flags.failures   ? REHEARSAL_FAILURES_SUITE
                                        : REHEARSAL_SUITE;
  rh_suite suite;
  char err[1024];
  if (rh_suite_load(file, &suite, err, sizeof err)) {
    fprintf(stderr, "rehearsal validate: %s\n", err);
    rh_cli_opts_free(&opts);
    return 2;
  }
  rc = check_picks(file, &suite, &flags);
  if (rc == 0) rc = check_scenarios(file, &suite, &flags, &opts);
  char tmp[4096];
  if (rc == 0 && !flags.out && !(flags.out = temporary_out(tmp, sizeof tmp))) rc = 1;
  if (rc == 0 && rh_make_dirs(flags.out) != 0) rc = 1;
  if (rc == 0) rc = run_suite(file, &suite, &flags, &opts);
  rh_suite_free(&suite);
  rh_cli_opts_free(&opts);
  return rc;
}
