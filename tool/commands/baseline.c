/*
 * baseline.c: accuracy_parity's one-worker baselines.  The same scenario, with the same
 * overrides, on one node of one GPU from checks.accuracy_baseline_seeds seeds (the first the
 * scenario's own), run by the simulator program (`rehearsal` beside the running one) into --out
 * DIR/baseline/seed-K, or into a temporary folder without --out (stdout.txt and stderr.txt there
 * hold its output).  Its identity (the
 * scenario's bytes, the overrides, the program) is kept beside it in baseline.json, and a baseline
 * with the same identity is read again instead of run again.  A summary.json named by
 * checks.accuracy_baseline is read as it is.
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "scenario.h"

#include <jansson.h>

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t fnv_text(const char *s, uint64_t h) {
  for (; *s; s++) h = (h ^ (uint64_t)(unsigned char)*s) * 1099511628211ull;
  return (h ^ 0xffu) * 1099511628211ull; /* a separator: "ab","c" is not "a","bc" */
}

/* The last epoch's val_accuracy in a summary.json, or NAN (why in *why). */
static double final_accuracy(const char *path, const char **why) {
  json_error_t jerr;
  json_t *root = json_load_file(path, 0, &jerr);
  if (!root) {
    *why = "cannot be read";
    return NAN;
  }
  json_t *epochs = json_object_get(root, "epochs");
  size_t n = json_array_size(epochs);
  json_t *acc = n ? json_object_get(json_array_get(epochs, n - 1), "val_accuracy") : NULL;
  double v = json_is_number(acc) ? json_number_value(acc) : NAN;
  if (isnan(v)) *why = "holds no validation accuracy for its last epoch";
  json_decref(root);
  return v;
}

/* The simulator program: `rehearsal` beside this one (rehearsal-mpi and rehearsal-gpu are built
 * and installed beside it), else this program. */
static void simulator_program(char *buf, size_t len) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  snprintf(buf, len, "/proc/self/exe");
  if (n <= 0) return;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (!slash) return;
  snprintf(buf, len, "%.*s/rehearsal", (int)(slash - self), self);
  if (access(buf, X_OK) != 0) snprintf(buf, len, "/proc/self/exe");
}

/* Runs the one-worker job from seed k into dir (its output into dir/stdout.txt and stderr.txt);
 * its exit status, or -1.  Seed 0 is the scenario's own; seed k > 0 sets recipe.seed and
 * recipe.sampler_seed to 1000000 + k, a run that differs from the others in its seeds alone. */
static int run_baseline(const char *program, const char *file, const rh_scenario_opts *opts,
                        const char *dir, int k) {
  char seed[48], sampler[56];
  snprintf(seed, sizeof seed, "recipe.seed=%d", 1000000 + k);
  snprintf(sampler, sizeof sampler, "recipe.sampler_seed=%d", 1000000 + k);
  char *const one[] = {
      "cluster.nodes=1", "cluster.gpus_per_node=1", "checks.accuracy_parity=false",
      "checks.serial_equivalence=false", "checks.resume_equivalence=false",
      "checks.expect_fail=[]", seed, sampler};
  fflush(stdout);
  int n = (int)(sizeof one / sizeof one[0]) - (k == 0 ? 2 : 0);
  pid_t pid = rh_cli_spawn_run(program, file, opts, one, n, dir);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The final accuracy of baseline k in dir, run unless dir holds one of identity `id` (and k);
 * NAN with the reason in source. */
static double one_baseline(const char *program, const char *file, const rh_scenario_opts *opts,
                           const char *dir, int k, uint64_t id, bool *ran, char *source, size_t len) {
  char hex[17], ident[PATH_MAX + 32], summary[PATH_MAX + 32];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)(id ^ (uint64_t)k));
  snprintf(ident, sizeof ident, "%s/baseline.json", dir);
  snprintf(summary, sizeof summary, "%s/summary.json", dir);
  json_t *old = json_load_file(ident, 0, NULL);
  const char *had = json_string_value(json_object_get(old, "identity_fnv1a"));
  bool cached = had && !strcmp(had, hex) && access(summary, R_OK) == 0;
  json_decref(old);
  const char *why = NULL;
  if (!cached) {
    *ran = true;
    unlink(ident);
    unlink(summary); /* another identity's: never read as this one's */
    /* a check of its own that fails (1) still leaves its accuracy; no summary does not */
    int rc = rh_make_dirs(dir) == 0 ? run_baseline(program, file, opts, dir, k) : -1;
    if (rc != 0 && !(rc == 1 && access(summary, R_OK) == 0)) {
      snprintf(source, len, "no baseline: its one-GPU run exited %d (%s/stdout.txt)", rc, dir);
      return NAN;
    }
    char text[128];
    snprintf(text, sizeof text, "{\"identity_fnv1a\": \"%s\"}\n", hex);
    rh_write_output(dir, "baseline.json", text);
  }
  double v = final_accuracy(summary, &why);
  if (isnan(v)) snprintf(source, len, "no baseline: %s %s", summary, why);
  return v;
}

/* Where the baselines go: out/baseline, or a new temporary folder (*temporary); false, said in
 * source, when neither can be made. */
static bool baseline_dir(const char *out, char *dir, size_t dlen, bool *temporary, char *source,
                         size_t len) {
  *temporary = !out;
  if (out) {
    snprintf(dir, dlen, "%s/baseline", out);
    if (rh_make_dirs(dir) == 0) return true;
    snprintf(source, len, "no baseline: %s cannot be made", dir);
    return false;
  }
  snprintf(dir, dlen, "/tmp/rehearsal-baseline-XXXXXX");
  if (mkdtemp(dir)) return true;
  snprintf(source, len, "no baseline: no temporary folder: %s", strerror(errno));
  return false;
}

/* The accuracies of the summaries `given` names: one file, or a pattern (glob(3), no shell:
 * base/seed-*\/summary.json) for the runs of several seeds, up to 100, in sorted order.  Their
 * count, or 0 with the reason in source. */
static int given_baselines(const char *given, double *acc, char *source, size_t len) {
  /* a file of that name is itself, whatever its name holds; else the files the pattern matches */
  char *itself[] = {(char *)given};
  glob_t g = {0};
  bool file = access(given, F_OK) == 0;
  int rc = file ? 0 : glob(given, 0, NULL, &g);
  if (rc != 0) {
    snprintf(source, len, "checks.accuracy_baseline: %s: %s", given,
             rc == GLOB_NOMATCH ? "no such file" : "cannot be read");
    return 0;
  }
  char **paths = file ? itself : g.gl_pathv;
  size_t count = file ? 1 : g.gl_pathc;
  int n = 0;
  for (size_t i = 0; i < count && n < 100; i++, n++) {
    const char *why = NULL;
    acc[n] = final_accuracy(paths[i], &why);
    if (isnan(acc[n])) {
      snprintf(source, len, "checks.accuracy_baseline: %s %s", paths[i], why);
      n = 0;
      break;
    }
  }
  if (n)
    snprintf(source, len, "from %s%s%s", given, n > 1 ? " (each file a seed)" : "",
             count > 100 ? "; the first 100 of its files" : "");
  if (!file) globfree(&g);
  return n;
}

int rh_accuracy_baseline(const char *file, const rh_scenario_opts *opts, const char *given,
                         const char *out, int seeds, double *acc, char *source, size_t len) {
  if (given) return given_baselines(given, acc, source, len);
  char dir[PATH_MAX], sub[PATH_MAX + 16], program[PATH_MAX];
  bool temporary, ran = false;
  if (!baseline_dir(out, dir, sizeof dir, &temporary, source, len)) return 0;
  simulator_program(program, sizeof program);
  uint64_t id = 1469598103934665603ull;
  rh_cli_fnv_file(file, &id);
  for (int i = 0; i < opts->nsets; i++) id = fnv_text(opts->sets[i], id);
  rh_cli_fnv_file(program, &id);
  printf("  (accuracy_parity: the recipe on one GPU from %d seed%s for its baseline, in %s)\n",
         seeds, seeds == 1 ? "" : "s", dir);
  int n = 0;
  for (int k = 0; k < seeds && k < 100; k++, n++) {
    snprintf(sub, sizeof sub, "%s/seed-%d", dir, k);
    acc[k] = one_baseline(program, file, opts, sub, k, id, &ran, source, len);
    if (isnan(acc[k])) {
      temporary = false; /* kept, for the message's file */
      n = 0;
      break;
    }
  }
  if (n && temporary) snprintf(source, len, "run on one GPU beside the job");
  else if (n) snprintf(source, len, "%s %s", ran ? "run into" : "kept in", dir);
  if (temporary) rh_remove_tree(dir);
  return n;
}
