/*
 * baseline.c: accuracy_parity's one-worker baseline.  The same scenario, with the same
 * overrides, on one node of one GPU, run by the simulator program (`rehearsal` beside the running
 * one) into --out DIR/baseline, or into a temporary folder without --out (stdout.txt and
 * stderr.txt there hold its output).  Its identity (the
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

/* Runs the one-worker job into dir (its output into dir/stdout.txt and stderr.txt); its exit
 * status, or -1. */
static int run_baseline(const char *program, const char *file, const rh_scenario_opts *opts,
                        const char *dir) {
  static char *const one[] = {
      "cluster.nodes=1", "cluster.gpus_per_node=1", "checks.accuracy_parity=false",
      "checks.serial_equivalence=false", "checks.resume_equivalence=false",
      "checks.expect_fail=[]"};
  fflush(stdout);
  pid_t pid = rh_cli_spawn_run(program, file, opts, one, (int)(sizeof one / sizeof one[0]), dir);
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double rh_accuracy_baseline(const char *file, const rh_scenario_opts *opts, const char *given,
                            const char *out, char *source, size_t len) {
  const char *why = NULL;
  if (given) {
    double v = final_accuracy(given, &why);
    if (isnan(v)) snprintf(source, len, "checks.accuracy_baseline: %s %s", given, why);
    else snprintf(source, len, "from %s", given);
    return v;
  }
  char dir[PATH_MAX];
  bool temporary = !out;
  if (out) {
    snprintf(dir, sizeof dir, "%s/baseline", out);
    if (rh_make_dirs(dir) != 0) {
      snprintf(source, len, "no baseline: %s cannot be made", dir);
      return NAN;
    }
  } else {
    snprintf(dir, sizeof dir, "/tmp/rehearsal-baseline-XXXXXX");
    if (!mkdtemp(dir)) {
      snprintf(source, len, "no baseline: no temporary folder: %s", strerror(errno));
      return NAN;
    }
  }
  char program[PATH_MAX];
  simulator_program(program, sizeof program);
  uint64_t id = 1469598103934665603ull;
  rh_cli_fnv_file(file, &id);
  for (int i = 0; i < opts->nsets; i++) id = fnv_text(opts->sets[i], id);
  rh_cli_fnv_file(program, &id);
  char hex[17], ident[PATH_MAX + 32], summary[PATH_MAX + 32];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)id);
  snprintf(ident, sizeof ident, "%s/baseline.json", dir);
  snprintf(summary, sizeof summary, "%s/summary.json", dir);
  json_t *old = json_load_file(ident, 0, NULL);
  const char *had = json_string_value(json_object_get(old, "identity_fnv1a"));
  bool cached = had && !strcmp(had, hex) && access(summary, R_OK) == 0;
  json_decref(old);
  double v = NAN;
  if (!cached) {
    printf("  (accuracy_parity: running the recipe on one GPU for its baseline, into %s)\n", dir);
    unlink(ident);
    unlink(summary); /* another identity's: never read as this one's */
    /* a check of its own that fails (1) still leaves its accuracy; no summary does not */
    int rc = run_baseline(program, file, opts, dir);
    if (rc != 0 && !(rc == 1 && access(summary, R_OK) == 0)) {
      snprintf(source, len, "no baseline: its one-GPU run exited %d (%s/stdout.txt)", rc, dir);
      temporary = false; /* kept, for the message's file */
      goto done;
    }
    char text[128];
    snprintf(text, sizeof text, "{\"identity_fnv1a\": \"%s\"}\n", hex);
    rh_write_output(dir, "baseline.json", text);
  }
  v = final_accuracy(summary, &why);
  if (isnan(v)) snprintf(source, len, "no baseline: %s %s", summary, why);
  else if (temporary) snprintf(source, len, "run on one GPU beside the job");
  else snprintf(source, len, "%s %s", cached ? "kept in" : "run into", dir);
done:
  if (temporary) rh_remove_tree(dir);
  return v;
}
