/*
 * onegpu.c: see onegpu.h.  A point's error is its predicted samples/s over the published, less
 * one, in percent.  A point of one GPU is priced by the kernel model; a point of more (a sharded
 * job, scenarios/sharded/) is run as `rehearsal run` runs it, its samples/s a GPU from its summary.  Points whose figures set a preset's (calibration) are scored apart from the
 * held-out ones; a batch sweep's points are also held to 10% each.
 */
#include "onegpu.h"

#include "cli.h"
#include "output.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SWEEP_BOUND = 10 }; /* percent: every batch of a sweep */

enum { MAX_SETS = RH_SUITE_MAX_SETS + 64 };

/* opts with the point's overrides first, then the command line's, in sets (MAX_SETS entries). */
static rh_scenario_opts with_point(const rh_suite_point *p, const rh_scenario_opts *opts,
                                   const char **sets) {
  int n = 0;
  for (int i = 0; i < p->nsets; i++) sets[n++] = p->sets[i];
  for (int i = 0; i < opts->nsets && n < MAX_SETS; i++) sets[n++] = opts->sets[i];
  rh_scenario_opts o = *opts;
  o.sets = sets;
  o.nsets = n;
  return o;
}

int rh_onegpu_load(const rh_suite_point *p, const rh_scenario_opts *opts, rh_scenario *sc,
                   char *err, size_t errlen) {
  const char *sets[MAX_SETS];
  rh_scenario_opts o = with_point(p, opts, sets);
  return rh_scenario_load_opts(p->scenario, &o, sc, err, errlen) == RH_OK ? 0 : 2;
}

/* A point of more than one GPU (a sharded job): `rehearsal run` in a child process with the
 * point's overrides, its samples/s a GPU from summary.json. */
static int cluster_predict(const rh_suite_point *p, const rh_scenario_opts *opts, int gpus,
                           double *predicted, char *err, size_t errlen) {
  char dir[] = "/tmp/rehearsal-point-XXXXXX";
  if (!mkdtemp(dir)) {
    snprintf(err, errlen, "cannot make a folder in /tmp: %s", strerror(errno));
    return 1;
  }
  const char *sets[MAX_SETS];
  rh_scenario_opts o = with_point(p, opts, sets);
  pid_t pid = rh_cli_spawn_run(NULL, p->scenario, &o, NULL, 0, dir);
  int status = 0, rc = 1;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
    /* what the run said last on stderr, before its folder goes */
    char path[sizeof dir + 32], last[512] = "";
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    FILE *f = fopen(path, "r");
    for (char line[512]; f && fgets(line, sizeof line, f);)
      if (line[0] != '\n') snprintf(last, sizeof last, "%s", line);
    if (f) fclose(f);
    last[strcspn(last, "\n")] = 0;
    snprintf(err, errlen, "the run of %s failed (exit %d)%s%s", p->scenario,
             pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1, last[0] ? ": " : "", last);
  } else {
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/summary.json", dir);
    json_t *root = json_load_file(path, 0, NULL);
    double sps = json_number_value(json_object_get(json_object_get(root, "summary"), "samples_per_s"));
    if (sps > 0) {
      *predicted = sps / gpus;
      rc = 0;
    } else {
      snprintf(err, errlen, "no samples_per_s in %s", path);
    }
    json_decref(root);
  }
  rh_remove_tree(dir);
  return rc;
}

int rh_onegpu_predict(const rh_suite_point *p, const rh_scenario_opts *opts, double *predicted,
                      char *err, size_t errlen) {
  rh_scenario sc;
  if (rh_onegpu_load(p, opts, &sc, err, errlen) != 0) return 2;
  int gpus = rh_scenario_size(&sc);
  if (gpus > 1) {
    rh_scenario_free(&sc);
    return cluster_predict(p, opts, gpus, predicted, err, errlen);
  }
  int rc = 1;
  rh_step_times st;
  if (!sc.compute.kernels) {
    snprintf(err, errlen, "%s: the model is not timed by its kernels", p->scenario);
  } else if (!rh_step_price(&sc.compute.km, sc.recipe.micro_batch, &st, NULL)) {
    snprintf(err, errlen, "out of memory");
  } else {
    *predicted = sc.recipe.micro_batch / st.total;
    rh_step_times_free(&st);
    rc = 0;
  }
  rh_scenario_free(&sc);
  return rc;
}

/* Whether every point of the sweep of point k is within SWEEP_BOUND (errors[] of the points). */
static bool sweep_within(const rh_suite *s, const double *errors, int k) {
  for (int i = 0; i < s->npoints; i++)
    if (s->points[i].sweep && !strcmp(s->points[i].sweep, s->points[k].sweep) &&
        isfinite(errors[i]) && fabs(errors[i]) > SWEEP_BOUND)
      return false;
  return true;
}

static void add_error(rh_onegpu_score *sc, const rh_suite_point *p, double e) {
  if (p->calibration) {
    sc->cal_mean += fabs(e);
    sc->cal_max = fmax(sc->cal_max, fabs(e));
    sc->calibration++;
    return;
  }
  sc->mean += fabs(e);
  sc->max = fmax(sc->max, fabs(e));
  sc->held_out++;
  sc->above += e > 0;
  sc->below += e < 0;
}

static void print_score(const rh_onegpu_score *sc) {
  printf("\nheld out: mean absolute error %.1f%% over %d points (%d above, %d below); largest %.1f%%\n",
         sc->mean, sc->held_out, sc->above, sc->below, sc->max);
  if (sc->calibration)
    printf("calibration (a preset's figure set from the point): mean %.1f%% over %d points; "
           "largest %.1f%%\n", sc->cal_mean, sc->calibration, sc->cal_max);
  if (sc->sweeps_outside) printf("%d sweep point%s beyond %d%%\n", sc->sweeps_outside,
                                 sc->sweeps_outside == 1 ? "" : "s", SWEEP_BOUND);
  if (sc->outside || sc->failed)
    printf("%d point%s outside %s bound%s%s\n", sc->outside, sc->outside == 1 ? "" : "s",
           sc->outside == 1 ? "its" : "their", sc->failed ? ", " : "",
           sc->failed ? "some points failed" : "");
}

void rh_onegpu_run(const rh_suite *suite, const rh_scenario_opts *opts,
                   bool (*picked)(const void *arg, const char *name), const void *arg,
                   json_t *points, rh_onegpu_score *score) {
  *score = (rh_onegpu_score){0};
  double *errors = calloc((size_t)suite->npoints + 1, sizeof *errors);
  printf("%-36s %10s %10s %8s %6s  %s\n", "# point", "published", "predicted", "error",
         "bound", "");
  printf("%-36s %10s %10s %8s %6s\n", "#", "(samples/s", "a GPU)", "(%)", "(%)");
  for (int i = 0; i < suite->npoints; i++) {
    const rh_suite_point *p = &suite->points[i];
    if (errors) errors[i] = NAN;
    if (picked && !picked(arg, p->name)) continue;
    double pred = NAN;
    char err[1024];
    json_t *jp = json_pack("{s:s, s:s, s:s, s:f, s:f, s:b}", "point", p->name, "source", p->source,
                           "setup", p->setup, "published_samples_per_s", p->published, "bound",
                           p->bound, "calibration", p->calibration != NULL);
    if (p->sweep) json_object_set_new(jp, "sweep", json_string(p->sweep));
    if (rh_onegpu_predict(p, opts, &pred, err, sizeof err) != 0) {
      score->failed++;
      printf("%-36s %10.4g %10s %8s %6.0f  failed: %s\n", p->name, p->published, "-", "-", p->bound, err);
      json_object_set_new(jp, "status", json_string("failed"));
      json_array_append_new(points, jp);
      continue;
    }
    double e = 100 * (pred / p->published - 1);
    if (errors) errors[i] = e;
    bool out = fabs(e) > p->bound;
    score->outside += out;
    add_error(score, p, e);
    printf("%-36s %10.4g %10.4g %+8.1f %6.0f  %s%s\n", p->name, p->published, pred, e, p->bound,
           out ? "OUTSIDE " : "", p->calibration ? "(calibration)" : "");
    json_object_set_new(jp, "predicted_samples_per_s", json_real(pred));
    json_object_set_new(jp, "error_percent", json_real(e));
    json_object_set_new(jp, "status", json_string(out ? "outside" : "within"));
    json_array_append_new(points, jp);
  }
  for (int i = 0; errors && i < suite->npoints; i++)
    if (suite->points[i].sweep && isfinite(errors[i]) && fabs(errors[i]) > SWEEP_BOUND)
      score->sweeps_outside += !sweep_within(suite, errors, i) ? 1 : 0;
  free(errors);
  if (score->held_out) score->mean /= score->held_out;
  if (score->calibration) score->cal_mean /= score->calibration;
  print_score(score);
}
