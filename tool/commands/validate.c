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

#include <errno.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#ifndef REHEARSAL_SUITE
#define REHEARSAL_SUITE "scenarios/papers/suite.yaml"
#endif

static const char usage_text[] =
    "usage: rehearsal validate [SUITE] [--out DIR] [--series NAME]... [--set KEY=VALUE]...\n"
    "Runs a suite of published data-parallel results (default: the shipped one,\n"
    "scenarios/papers/suite.yaml): each series' scenario swept over its GPU counts, and per point\n"
    "the published and the predicted scaling efficiency (against one GPU without communication),\n"
    "the error in points and its bound; then the mean and the largest absolute error.\n"
    "  --out DIR      where each series' sweep and validate.json go (default: a new directory\n"
    "                 $TMPDIR/rehearsal-validate-XXXXXX, kept and named at the end)\n"
    "  --series NAME  only this series (repeatable)\n"
    "  --set K=V      an override for every series (recipe.reducer_ms_per_GB=0: one loss off)\n"
    "      --help, --version\n"
    "Exit status: 0 every point within its bound, 1 a point outside it (or a sweep failed),\n"
    "2 bad input.\n";

enum { MAX_PICKS = 64 };

typedef struct validate_flags {
  const char *out;
  const char *picks[MAX_PICKS];
  int npicks;
} validate_flags;

static int validate_option(int c, const char *value, void *arg) {
  validate_flags *f = arg;
  if (c == 'o') f->out = value;
  if (c == 's') {
    if (f->npicks == MAX_PICKS) {
      rh_cli_why("at most %d series", MAX_PICKS);
      return 2;
    }
    f->picks[f->npicks++] = value;
  }
  return 0;
}

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
  int argc = 0;
  char **argv = calloc((size_t)(8 + 2 * opts->nsets), sizeof *argv);
  if (!argv) return -1;
  argv[argc++] = "rehearsal";
  argv[argc++] = "sweep";
  argv[argc++] = s->scenario;
  argv[argc++] = "--axis";
  argv[argc++] = axis;
  argv[argc++] = "--out";
  argv[argc++] = (char *)dir;
  for (int i = 0; i < opts->nsets; i++) {
    argv[argc++] = "--set";
    argv[argc++] = (char *)opts->sets[i];
  }
  char log[4400];
  snprintf(log, sizeof log, "%s.log", dir);
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(1);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("RH_PROGRESS", "0", 1);
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  free(argv);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
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

/* Loads each picked series' scenario with the --set overrides, before anything runs or is
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

int rh_cmd_validate(int argc, char **argv) {
  static const struct option longopts[] = {{"out", required_argument, NULL, 'o'},
                                           {"series", required_argument, NULL, 's'},
                                           RH_CLI_COMMON_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  validate_flags flags = {0};
  rh_scenario_opts opts = {0};
  int first;
  int rc = rh_cli_parse("validate", usage_text, argc, argv, "o:s:", longopts, validate_option,
                        &flags, &opts, &first);
  if (rc >= 0) return rc;
  if (argc - first > 1) {
    rh_cli_opts_free(&opts);
    return rh_cli_error("validate", "one suite file at most");
  }
  const char *file = first < argc ? argv[first] : REHEARSAL_SUITE;
  rh_suite suite;
  char err[1024];
  if (rh_suite_load(file, &suite, err, sizeof err)) {
    fprintf(stderr, "rehearsal validate: %s\n", err);
    rh_cli_opts_free(&opts);
    return 2;
  }
  for (int i = 0; i < flags.npicks; i++) {
    bool found = false;
    for (int s = 0; s < suite.nseries; s++) found = found || !strcmp(suite.series[s].name, flags.picks[i]);
    if (!found) {
      rh_suite_free(&suite);
      rh_cli_opts_free(&opts);
      return rh_cli_error("validate", "--series %s: no such series in %s", flags.picks[i], file);
    }
  }
  rc = check_scenarios(file, &suite, &flags, &opts);
  char tmp[4096];
  if (rc == 0 && !flags.out && !(flags.out = temporary_out(tmp, sizeof tmp))) rc = 1;
  if (rc == 0 && rh_make_dirs(flags.out) != 0) rc = 1;
  if (rc != 0) {
    rh_suite_free(&suite);
    rh_cli_opts_free(&opts);
    return rc;
  }
  json_t *jroot = json_object(), *jpoints = json_array();
  json_object_set_new(jroot, "suite", json_string(file));
  printf("%-30s %6s %10s %10s %8s %6s  %s\n", "# series", "gpus", "published", "predicted",
         "error", "bound", "");
  printf("%-30s %6s %10s %10s %8s %6s\n", "#", "", "(%)", "(%)", "(points)", "");
  double sum = 0, worst = 0;
  int npoints = 0, outside = 0, above = 0, below = 0, failed = 0;
  const char *worst_at = "";
  int worst_gpus = 0;
  for (int s = 0; s < suite.nseries; s++) {
    const rh_suite_series *se = &suite.series[s];
    if (!picked(&flags, se->name)) continue;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", flags.out, se->name);
    int st = sweep(se, &opts, dir);
    char json[4300];
    snprintf(json, sizeof json, "%s/sweep.json", dir);
    json_t *root = st == 0 ? json_load_file(json, 0, NULL) : NULL;
    /* one GPU without communication (a Horovod cycle's wait on one rank is not in it) */
    double one = root ? throughput_at(root, 1, "ideal_samples_per_s") : NAN;
    for (int k = 0; k < se->ncounts; k++) {
      double pub = rh_suite_published_efficiency(se, k);
      double at = root ? throughput_at(root, se->gpus[k], "samples_per_s") : NAN;
      double pred = 100 * at / (se->gpus[k] * one);
      double e = pred - pub;
      json_t *jp = json_pack("{s:s, s:s, s:i, s:f, s:f}", "series", se->name, "source", se->source,
                             "gpus", se->gpus[k], "published_efficiency", pub, "bound", se->bound);
      /* the one GPU each side stands on: a series whose GPU rate comes from its published one-GPU
       * throughput simulates that throughput again */
      if (isfinite(one)) json_object_set_new(jp, "one_gpu_samples_per_s", json_real(one));
      if (se->one_gpu > 0)
        json_object_set_new(jp, "published_one_gpu_samples_per_s", json_real(se->one_gpu));
      if (!isfinite(pred)) {
        failed++;
        printf("%-30s %6d %10.1f %10s %8s %6.0f  the sweep failed: see %s.log\n", se->name,
               se->gpus[k], pub, "-", "-", se->bound, dir);
        json_object_set_new(jp, "status", json_string("failed"));
        json_array_append_new(jpoints, jp);
        continue;
      }
      bool out = fabs(e) > se->bound;
      outside += out;
      above += e > 0;
      below += e < 0;
      sum += fabs(e);
      npoints++;
      if (fabs(e) > worst) {
        worst = fabs(e);
        worst_at = se->name;
        worst_gpus = se->gpus[k];
      }
      printf("%-30s %6d %10.1f %10.1f %+8.1f %6.0f  %s\n", se->name, se->gpus[k], pub, pred, e,
             se->bound, out ? "OUTSIDE" : "");
      json_object_set_new(jp, "predicted_efficiency", json_real(pred));
      json_object_set_new(jp, "error_points", json_real(e));
      json_object_set_new(jp, "status", json_string(out ? "outside" : "within"));
      json_array_append_new(jpoints, jp);
    }
    json_decref(root);
  }
  double mean = npoints ? sum / npoints : NAN;
  if (npoints)
    printf("\nmean absolute error %.2f points over %d points (%d above, %d below); largest %.1f "
           "(%s at %d GPUs)\n", mean, npoints, above, below, worst, worst_at, worst_gpus);
  else
    printf("\nno point was predicted: every sweep failed (their logs are named above)\n");
  if (outside || failed)
    printf("%d point%s outside %s bound%s%s\n", outside, outside == 1 ? "" : "s",
           outside == 1 ? "its" : "their", failed ? ", " : "", failed ? "some sweeps failed" : "");
  json_object_set_new(jroot, "points", jpoints);
  json_object_set_new(jroot, "summary",
                      json_pack("{s:i, s:f, s:f, s:i, s:i, s:i, s:i}", "points", npoints,
                                "mean_abs_error", npoints ? mean : 0.0, "max_abs_error", worst,
                                "above", above, "below", below, "outside", outside, "failed", failed));
  char path[4200];
  snprintf(path, sizeof path, "%s/validate.json", flags.out);
  if (json_dump_file(jroot, path, JSON_INDENT(2)) != 0) {
    fprintf(stderr, "rehearsal validate: cannot write %s\n", path);
    failed++;
  } else {
    printf("wrote %s\n", path);
  }
  json_decref(jroot);
  rh_suite_free(&suite);
  rh_cli_opts_free(&opts);
  return outside || failed ? 1 : 0;
}
