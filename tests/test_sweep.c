/*
 * test_sweep.c: `rehearsal sweep` on input it must refuse and in the situations around a sweep
 * that runs: a bad value of a GPU axis before the last point, a point count past 64 bits of int,
 * two sweeps into one directory, a sweep stopped by a signal, duplicate and conflicting axes, a
 * sweep run again, sharding and checkpointing as axes, and the tool on a backend that cannot run
 * the points.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <jansson.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  umask(022);
  return rh_test_mkdtemp(tmpdir, "sweep");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

#define RUN(out, err, ...)                                                                         \
  rh_test_spawn((char *const[]){RH_BINARY, __VA_ARGS__, NULL}, out, err)

/* Whether `path` exists. */
static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Starts a command line in the background, its stdout and stderr to files; its PID. */
static pid_t start(char *const argv[], const char *out_path, const char *err_path) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) _exit(127);
    dup2(fo, 1);
    dup2(fe, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  assert_true(pid > 0);
  return pid;
}

/* Sleeps `ms` milliseconds. */
static void nap(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&t, NULL);
}

/* Waits up to `seconds` for `path` to exist. */
static bool appears(const char *path, double seconds) {
  for (int i = 0; i < seconds * 100; i++) {
    if (exists(path)) return true;
    nap(10);
  }
  return false;
}

/* Asserts that the file at `path` holds `text`, printing the file when it does not. */
static void assert_file_has(const char *path, const char *text) {
  char *got = rh_test_slurp(path);
  assert_non_null(got);
  if (!strstr(got, text)) fprintf(stderr, "%s lacks \"%s\":\n%s\n", path, text, got);
  assert_non_null(strstr(got, text));
  free(got);
}

/* A GPU count that does not fit, at any point but the last: its message and exit 2, no crash,
 * nothing written. */
static void test_bad_gpu_count_before_the_last_point(void **state) {
  (void)state;
  static const char *const axes[][2] = {
      {"gpus=6,8", "--axis gpus=6: more GPUs than a node's 4"},
      {"gpus=x,8", "--axis gpus=x: a GPU count is a whole number"},
      {"gpus=0,8", "--axis gpus=0: a GPU count is a whole number"},
      {"gpus=8,6,4", "--axis gpus=6: more GPUs than a node's 4"}};
  char *out = strdup(rh_test_path(tmpdir, "badgpus"));
  char *err = strdup(rh_test_path(tmpdir, "badgpus.err"));
  for (size_t i = 0; i < sizeof axes / sizeof axes[0]; i++) {
    assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                         (char *)axes[i][0], "--out", out), 2);
    assert_file_has(err, axes[i][1]);
    assert_false(exists(out));
  }
  free(out);
  free(err);
}

/* --launcher slurm where no Slurm answers (SLURM_CONF names no file): said, exit 1, DIR untouched;
 * a bad launcher and --sbatch-arg without Slurm are bad input, exit 2. */
static void test_slurm_launcher_refusals(void **state) {
  (void)state;
  char *out = strdup(rh_test_path(tmpdir, "noslurm"));
  char *err = strdup(rh_test_path(tmpdir, "noslurm.err"));
  const char *conf = getenv("SLURM_CONF");
  char *saved = conf ? strdup(conf) : NULL;
  setenv("SLURM_CONF", rh_test_path(tmpdir, "no-such-slurm.conf"), 1);
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2", "--out", out, "--launcher", "slurm"), 1);
  if (saved) setenv("SLURM_CONF", saved, 1);
  else unsetenv("SLURM_CONF");
  free(saved);
  assert_file_has(err, "rehearsal sweep: Slurm does not answer here (sinfo: ");
  assert_false(exists(out));
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2", "--out", out, "--launcher", "pbs"), 2);
  assert_file_has(err, "cannot use --launcher pbs");
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2", "--out", out, "--sbatch-arg=--partition=cpu"), 2);
  assert_file_has(err, "--sbatch-arg goes with --launcher slurm");
  assert_false(exists(out));
  free(out);
  free(err);
}

/* No path reaches a shell: --out names with a quote, `;`, `$( )`, a backquote and a newline run
 * as any other name.  Before, the point's folder went to `rm -rf '%s'` through system(): the
 * first name removed a folder beside it (`victim`), the others ran commands or broke the line. */
static void test_out_names_reach_no_shell(void **state) {
  (void)state;
  char *victim = strdup(rh_test_path(tmpdir, "victim"));
  assert_int_equal(mkdir(victim, 0777), 0);
  char *canary = strdup(rh_test_path(victim, "keep"));
  FILE *f = fopen(canary, "w");
  assert_non_null(f);
  fclose(f);
  const char *names[] = {"sw' %s '", "bob's sweep", "a; touch %s/pwned; b", "$(touch %s/pwned)",
                         "`touch %s/pwned`", "new\nline"};
  char *err = strdup(rh_test_path(tmpdir, "names.err"));
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char name[512], out[600];
    snprintf(name, sizeof name, names[i], i == 0 ? victim : tmpdir);
    snprintf(out, sizeof out, "%s/%s", tmpdir, name);
    assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "-j", "1", "--axis",
                         "cluster.nodes=1", "--set", "data.train_samples=640", "--out", out), 0);
    char csv[700];
    snprintf(csv, sizeof csv, "%s/sweep.csv", out);
    assert_true(exists(csv));
    /* a second run clears the point's folder, the call that went through the shell */
    assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "-j", "1", "--axis",
                         "cluster.nodes=1", "--set", "data.train_samples=640", "--out", out,
                         "--force"), 0);
    assert_true(exists(canary));
    assert_false(exists(rh_test_path(tmpdir, "pwned")));
  }
  free(victim);
  free(canary);
  free(err);
}

/* An axis of `n` values 1..n: "KEY=1,2,...,n" (caller frees). */
static char *axis_of(const char *key, int n) {
  size_t len = strlen(key) + 2 + 8 * (size_t)n;
  char *text = malloc(len);
  assert_non_null(text);
  int at = snprintf(text, len, "%s=", key);
  for (int i = 1; i <= n; i++) at += snprintf(text + at, len - (size_t)at, i > 1 ? ",%d" : "%d", i);
  return text;
}

/* 100 x 533 x 61 x 1321 = 2^32 + 4 points: refused as too many, not wrapped to 4 points in int;
 * and a product past 64 bits too. */
static void test_point_count_past_int(void **state) {
  (void)state;
  char *out = strdup(rh_test_path(tmpdir, "ovf"));
  char *err = strdup(rh_test_path(tmpdir, "ovf.err"));
  char *a = axis_of("data.seed", 100), *b = axis_of("recipe.seed", 533);
  char *c = axis_of("model.framework_overhead_ms", 61);
  char *d = axis_of("collective.pipeline_chunk", 1321);
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "-j", "1", "--axis", a,
                       "--axis", b, "--axis", c, "--axis", d, "--out", out), 2);
  assert_file_has(err, "rehearsal sweep: 4294967300 points: too many for one sweep");
  assert_false(exists(out));
  /* 256^4 = 2^32: 0 points in int */
  char *e = axis_of("data.seed", 256), *f = axis_of("recipe.seed", 256);
  char *e2 = axis_of("recipe.epochs", 256), *f2 = axis_of("recipe.base_lr", 256);
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis", e, "--axis",
                       f, "--axis", e2, "--axis", f2, "--out", out), 2);
  assert_file_has(err, "rehearsal sweep: 4294967296 points: too many for one sweep");
  assert_false(exists(out));
  /* 7 axes of 1,000 values: 10^21 points, more than 64 bits count */
  static const char *const keys[] = {"data.seed", "recipe.seed", "model.framework_overhead_ms",
                                     "collective.pipeline_chunk", "recipe.base_lr",
                                     "recipe.epochs", "data.train_samples"};
  char *g[7];
  for (int i = 0; i < 7; i++) g[i] = axis_of(keys[i], 1000);
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis", g[0],
                       "--axis", g[1], "--axis", g[2], "--axis", g[3], "--axis", g[4], "--axis",
                       g[5], "--axis", g[6], "--out", out), 2);
  assert_file_has(err, "rehearsal sweep: more than 18446744073709551615 points: too many");
  assert_false(exists(out));
  for (int i = 0; i < 7; i++) free(g[i]);
  free(a);
  free(b);
  free(c);
  free(d);
  free(e);
  free(f);
  free(e2);
  free(f2);
  free(out);
  free(err);
}

/* A second sweep into the directory of one that runs is turned away, naming the first's PID; a
 * lock left by a sweep that died is taken; the lock goes when the sweep ends. */
static void test_two_sweeps_one_out(void **state) {
  (void)state;
  char *out = strdup(rh_test_path(tmpdir, "shared"));
  char *lock = strdup(rh_test_path(out, "sweep.lock"));
  char *a_err = strdup(rh_test_path(tmpdir, "a.err"));
  char *b_err = strdup(rh_test_path(tmpdir, "b.err"));
  /* two points of some seconds each, one at a time */
  pid_t a = start((char *const[]){RH_BINARY, "sweep", "scenarios/default.yaml", "-j", "1", "--set",
                                  "recipe.epochs=2500", "--axis", "cluster.nodes=1,2", "--out", out,
                                  NULL},
                  "/dev/null", a_err);
  assert_true(appears(rh_test_path(out, "points/000"), 30));
  assert_int_equal(RUN("/dev/null", b_err, "sweep", "scenarios/default.yaml", "-j", "1", "--set",
                       "recipe.batch_per_worker=32", "--axis", "cluster.nodes=1,2", "--out", out),
                   2);
  char want[128];
  snprintf(want, sizeof want, "rehearsal sweep: %s is in use by sweep PID %ld", out, (long)a);
  assert_file_has(b_err, want);
  int status;
  assert_int_equal(waitpid(a, &status, 0), a);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_false(exists(lock));

  /* the lock of a sweep that died: its PID is no process's, and no process holds the file */
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  assert_int_equal(waitpid(dead, NULL, 0), dead);
  FILE *f = fopen(lock, "w");
  assert_non_null(f);
  fprintf(f, "%ld\n", (long)dead);
  fclose(f);
  assert_int_equal(RUN("/dev/null", b_err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2", "--out", out), 0);
  assert_false(exists(lock));

  /* a holder that is alive: this process */
  int fd = open(lock, O_RDWR | O_CREAT, 0644);
  assert_true(fd >= 0);
  assert_int_equal(flock(fd, LOCK_EX), 0);
  dprintf(fd, "%ld\n", (long)getpid());
  assert_int_equal(RUN("/dev/null", b_err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2", "--out", out), 2);
  snprintf(want, sizeof want, "is in use by sweep PID %ld", (long)getpid());
  assert_file_has(b_err, want);
  close(fd);
  unlink(lock);
  free(out);
  free(lock);
  free(a_err);
  free(b_err);
}

/* A sweep of two points that run for some 25 s each, both at once, into `out`: started in the
 * background once both points run; its PID. */
static pid_t start_long_sweep(const char *out, const char *err) {
  pid_t pid = start((char *const[]){RH_BINARY, "sweep", "scenarios/default.yaml", "-j", "2",
                                    "--set", "recipe.epochs=20000", "--axis", "cluster.nodes=1,2",
                                    "--out", (char *)out, NULL},
                    "/dev/null", err);
  /* a point's stderr.txt is made by its process, before it runs */
  assert_true(appears(rh_test_path(out, "points/000/stderr.txt"), 30));
  assert_true(appears(rh_test_path(out, "points/001/stderr.txt"), 30));
  nap(200);
  return pid;
}

/* Reaps the points a dead sweep left to this process (a subreaper): true when none is left
 * within `seconds`, each of them killed rather than run to its end. */
static bool orphans_gone(double seconds) {
  for (int i = 0; i < seconds * 100; i++) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == ECHILD) return true;
    if (pid > 0 && !WIFSIGNALED(status)) {
      fprintf(stderr, "a point of the dead sweep ran to its end (PID %ld)\n", (long)pid);
      return false;
    }
    if (pid == 0) nap(10);
  }
  fprintf(stderr, "points of the dead sweep still run after %g s\n", seconds);
  return false;
}

/* SIGTERM: the sweep stops its running points, says so and exits 143; nothing runs on. */
static void test_sweep_stopped_by_sigterm(void **state) {
  (void)state;
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  char *out = strdup(rh_test_path(tmpdir, "term"));
  char *err = strdup(rh_test_path(tmpdir, "term.err"));
  pid_t sweep = start_long_sweep(out, err);
  assert_int_equal(kill(sweep, SIGTERM), 0);
  int status;
  assert_int_equal(waitpid(sweep, &status, 0), sweep);
  bool gone = orphans_gone(5);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 143);
  assert_file_has(err, "rehearsal sweep: stopped by SIGTERM: 2 running points stopped");
  assert_true(gone);
  assert_false(exists(rh_test_path(out, "sweep.lock")));
  assert_false(exists(rh_test_path(out, "sweep.csv")));
  free(out);
  free(err);
}

/* SIGKILL: the sweep cannot stop its points, so they end with it (their parent-death signal). */
static void test_sweep_killed_leaves_nothing_running(void **state) {
  (void)state;
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  char *out = strdup(rh_test_path(tmpdir, "kill"));
  char *err = strdup(rh_test_path(tmpdir, "kill.err"));
  pid_t sweep = start_long_sweep(out, err);
  assert_int_equal(kill(sweep, SIGKILL), 0);
  assert_int_equal(waitpid(sweep, NULL, 0), sweep);
  assert_true(orphans_gone(5));
  free(out);
  free(err);
}

/* default.yaml with `section` after it, as FILE in the temporary directory (caller frees). */
static char *scenario_with(const char *name, const char *section) {
  char *text = rh_test_slurp("scenarios/default.yaml");
  assert_non_null(text);
  char *file = strdup(rh_test_path(tmpdir, name));
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fprintf(f, "%s%s", text, section);
  fclose(f);
  free(text);
  return file;
}

/* The line of `text` in FILE, 1-based. */
static int line_in(const char *file, const char *text) {
  char *all = rh_test_slurp(file);
  assert_non_null(all);
  char *at = strstr(all, text);
  assert_non_null(at);
  int line = 1;
  for (char *p = all; p < at; p++) line += *p == '\n';
  free(all);
  return line;
}

/* A key twice in sweep:, and axes that set the same key, are refused with their names; the
 * command line's axis replaces those of the section that set its keys. */
static void test_duplicate_and_conflicting_axes(void **state) {
  (void)state;
  char *out = strdup(rh_test_path(tmpdir, "dup"));
  char *err = strdup(rh_test_path(tmpdir, "dup.err"));
  char want[512];
  char *dup = scenario_with("dup.yaml", "sweep:\n  cluster.nodes: [1]\n  cluster.nodes: [2, 3]\n"
                                        "  gpus: [4]\n");
  assert_int_equal(RUN("/dev/null", err, "sweep", dup, "--out", out), 2);
  snprintf(want, sizeof want, "%s:%d: sweep.cluster.nodes: appears twice", dup,
           line_in(dup, "  cluster.nodes: [2, 3]"));
  assert_file_has(err, want);
  assert_false(exists(out));

  char *clash = scenario_with("clash.yaml", "sweep:\n  gpus: [4, 8]\n  cluster.nodes: [1, 2]\n");
  assert_int_equal(RUN("/dev/null", err, "sweep", clash, "--out", out), 2);
  snprintf(want, sizeof want, "%s:%d: sweep.cluster.nodes: sets cluster.nodes, as the axis gpus "
           "(line %d) does", clash, line_in(clash, "  cluster.nodes: [1, 2]"),
           line_in(clash, "  gpus: [4, 8]"));
  assert_file_has(err, want);
  assert_false(exists(out));

  /* the same on the command line */
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis", "gpus=4,8",
                       "--axis", "cluster.nodes=1,2", "--out", out), 2);
  assert_file_has(err, "rehearsal sweep: --axis cluster.nodes=...: sets cluster.nodes, as --axis "
                       "gpus=... does");
  assert_false(exists(out));
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1", "--axis", "cluster.nodes=2,3", "--out", out), 2);
  assert_file_has(err, "rehearsal sweep: --axis cluster.nodes=...: appears twice");
  assert_false(exists(out));

  /* an axis of the command line replaces the section's that set its keys: 2 points, not 4 */
  char *nodes = scenario_with("nodes.yaml", "sweep:\n  cluster.nodes: [1, 2]\n");
  assert_int_equal(RUN("/dev/null", err, "sweep", nodes, "--axis", "gpus=4,8", "--out", out), 0);
  char *csv = rh_test_slurp(rh_test_path(out, "sweep.csv"));
  assert_non_null(csv);
  int rows = 0;
  for (char *p = csv; *p; p++) rows += *p == '\n';
  assert_int_equal(rows, 3); /* the header and two points */
  assert_null(strstr(csv, "cluster.nodes"));
  free(csv);
  free(nodes);
  free(clash);
  free(dup);
  free(out);
  free(err);
}

/* A sweep run again says which of its points it took from the earlier run. */
static void test_rerun_says_what_it_reused(void **state) {
  (void)state;
  char *out = strdup(rh_test_path(tmpdir, "again"));
  char *err = strdup(rh_test_path(tmpdir, "again.err"));
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2,3", "--out", out), 0);
  char *text = rh_test_slurp(err);
  assert_null(strstr(text, "reused"));
  free(text);
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2,3,4", "--out", out), 0);
  char want[256];
  snprintf(want, sizeof want, "rehearsal sweep: reused 3 of 4 points from an earlier run "
           "(%s/points/NNN/point.json; --force runs them again)", out);
  assert_file_has(err, want);
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2,3,4", "--out", out, "--force"), 0);
  text = rh_test_slurp(err);
  assert_null(strstr(text, "reused"));
  free(text);
  /* a point another build of the program ran is not reused: its point.json names that program */
  char point[400];
  snprintf(point, sizeof point, "%s/points/000/point.json", out);
  json_error_t jerr;
  json_t *root = json_load_file(point, 0, &jerr);
  assert_non_null(root);
  json_t *id = json_object_get(root, "identity");
  assert_true(json_is_string(json_object_get(id, "program_fnv1a")));
  json_object_set_new(id, "program_fnv1a", json_string("0000000000000001"));
  assert_int_equal(json_dump_file(root, point, JSON_INDENT(2)), 0);
  json_decref(root);
  assert_int_equal(RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
                       "cluster.nodes=1,2,3,4", "--out", out), 0);
  snprintf(want, sizeof want, "rehearsal sweep: reused 3 of 4 points from an earlier run "
           "(%s/points/NNN/point.json; --force runs them again)", out);
  assert_file_has(err, want);
  /* a variable that may change the points (Horovod's fusion threshold) runs them all again */
  setenv("HOROVOD_FUSION_THRESHOLD", "16777216", 1);
  int rc = RUN("/dev/null", err, "sweep", "scenarios/default.yaml", "--axis",
               "cluster.nodes=1,2,3,4", "--out", out);
  unsetenv("HOROVOD_FUSION_THRESHOLD");
  assert_int_equal(rc, 0);
  text = rh_test_slurp(err);
  assert_null(strstr(text, "reused"));
  free(text);
  free(out);
  free(err);
}

/* Sharding and activation checkpointing as axes, Llama-2-7B on 128 H100: each point's memory a
 * GPU falls as the state is sharded over more ranks (DDP, hybrid over a node's 8, full over all
 * 128) and as the blocks are checkpointed; DDP does not fit 80 GB and fails its point, so the
 * sweep exits 1; every point gives its tokens/s. */
static void test_sharding_axes(void **state) {
  (void)state;
  char *file = strdup(rh_test_path(tmpdir, "llama.yaml"));
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fputs("name: llama7b-128\n"
        "cluster: {node: dgx-h100, nodes: 16}\n"
        "model: {preset: llama2-7b, precision: bf16}\n"
        "data: {train_samples: 4096, validation_samples: 0}\n"
        "recipe: {batch_per_worker: 1, optimizer: adam, steps: 2}\n", f);
  fclose(f);
  char *out = strdup(rh_test_path(tmpdir, "sharding"));
  assert_int_equal(RUN("/dev/null", "/dev/null", "sweep", file, "--axis",
                       "recipe.sharding=none,hybrid,full", "--axis",
                       "recipe.activation_checkpointing=none,full", "--out", out, "--jobs", "2"), 1);
  char path[400];
  snprintf(path, sizeof path, "%s/sweep.json", out);
  json_t *root = json_load_file(path, 0, NULL);
  json_t *pts = json_object_get(root, "points");
  assert_int_equal(json_array_size(pts), 6);
  double gb[3][2];
  for (int k = 0; k < 6; k++) {
    json_t *p = json_array_get(pts, (size_t)k);
    gb[k / 2][k % 2] = json_number_value(json_object_get(p, "memory_GB"));
    assert_true(json_number_value(json_object_get(p, "tokens_per_s")) > 0);
    const char *status = json_string_value(json_object_get(p, "status"));
    assert_string_equal(status, k < 2 ? "failed" : "ok");
  }
  for (int ac = 0; ac < 2; ac++) {
    assert_true(gb[0][ac] > 80 && gb[1][ac] < gb[0][ac] && gb[2][ac] < gb[1][ac]);
    for (int s = 0; s < 3; s++) assert_true(gb[s][1] < gb[s][0]);
  }
  json_decref(root);
  free(file);
  free(out);
}

/* A replay at scale's columns: the same failures at both intervals (the same seeds), more work
 * redone at the longer one; sweep.csv names the columns. */
static void test_failure_columns(void **state) {
  (void)state;
  char file[400], *out = strdup(rh_test_path(tmpdir, "at-scale"));
  snprintf(file, sizeof file, "%s/scenarios/papers/failures/bloom-176b-heldout.yaml", RH_SOURCE_DIR);
  assert_int_equal(RUN("/dev/null", "/dev/null", "sweep", file, "--axis",
                       "restart.checkpoint_every_minutes=60,175", "--out", out, "--jobs", "2"), 0);
  char path[400];
  snprintf(path, sizeof path, "%s/sweep.json", out);
  json_t *root = json_load_file(path, 0, NULL);
  json_t *a = json_array_get(json_object_get(root, "points"), 0);
  json_t *b = json_array_get(json_object_get(root, "points"), 1);
  double na = json_number_value(json_object_get(a, "interruptions"));
  assert_true(na > 0);
  assert_true(na == json_number_value(json_object_get(b, "interruptions")));
  assert_true(json_number_value(json_object_get(a, "failures_lost_h")) <
              json_number_value(json_object_get(b, "failures_lost_h")));
  double e = json_number_value(json_object_get(a, "effective_training"));
  assert_true(e > 0.9 && e < 1);
  /* the table by cause adds up to the totals */
  json_t *by = json_object_get(a, "failures_by_cause"), *c;
  const char *name;
  double n = 0, lost = 0;
  json_object_foreach(by, name, c) {
    n += json_number_value(json_object_get(c, "count"));
    lost += json_number_value(json_object_get(c, "lost_h"));
  }
  assert_true(fabs(n - na) < 1e-9 * na);
  assert_true(fabs(lost - json_number_value(json_object_get(a, "failures_lost_h"))) < 1e-6);
  json_decref(root);
  snprintf(path, sizeof path, "%s/sweep.csv", out);
  char *csv = rh_test_slurp(path);
  assert_non_null(strstr(csv, ",interruptions,effective_training,failures_lost_h,faulty_gpu_count,"
                              "faulty_gpu_lost_h,gpu_hbm3_count,"));
  assert_non_null(strstr(csv, ",system_memory_count,system_memory_lost_h,status\n"));
  assert_null(strstr(csv, "software_bug")); /* only_per left it out */
  free(csv);
  free(out);
}

/* The tool on real processes (rehearsal-mpi) cannot run a sweep's points, which run on the
 * simulator: it says so at once, exit 2, nothing written. */
static void test_mpi_tool_refuses_a_sweep(void **state) {
  (void)state;
#ifdef RH_MPI_BINARY
  char *out = strdup(rh_test_path(tmpdir, "mpi"));
  char *err = strdup(rh_test_path(tmpdir, "mpi.err"));
  assert_int_equal(rh_test_spawn((char *const[]){RH_MPI_BINARY, "sweep", "scenarios/default.yaml",
                                                 "--axis", "cluster.nodes=1,2", "--out", out, NULL},
                                 "/dev/null", err),
                   2);
  assert_file_has(err, "rehearsal sweep: a sweep runs its points on the simulator: use `rehearsal "
                       "sweep`");
  assert_false(exists(out));
  free(out);
  free(err);
#else
  skip(); /* built without MPI */
#endif
}

/* The tool on real processes lists in its help what runs there (run, collective), not every
 * command of the simulator's: it listed sweep, plot and calibrate, which it cannot run. */
static void test_mpi_tool_help_lists_its_commands(void **state) {
  (void)state;
#ifdef RH_MPI_BINARY
  char *out = strdup(rh_test_path(tmpdir, "mpi-help.txt"));
  assert_int_equal(rh_test_spawn((char *const[]){RH_MPI_BINARY, "--help", NULL}, out, NULL), 0);
  char *text = rh_test_slurp(out);
  assert_non_null(text);
  assert_non_null(strstr(text, "\n  run FILE"));
  assert_non_null(strstr(text, "\n  collective FILE"));
  assert_null(strstr(text, "\n  sweep "));
  assert_null(strstr(text, "\n  plot "));
  assert_null(strstr(text, "\n  calibrate "));
  free(text);
  free(out);
#else
  skip(); /* built without MPI */
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_gpu_count_before_the_last_point),
      cmocka_unit_test(test_slurm_launcher_refusals),
      cmocka_unit_test(test_out_names_reach_no_shell),
      cmocka_unit_test(test_point_count_past_int),
      cmocka_unit_test(test_two_sweeps_one_out),
      cmocka_unit_test(test_sweep_stopped_by_sigterm),
      cmocka_unit_test(test_sweep_killed_leaves_nothing_running),
      cmocka_unit_test(test_duplicate_and_conflicting_axes),
      cmocka_unit_test(test_rerun_says_what_it_reused),
      cmocka_unit_test(test_sharding_axes),
      cmocka_unit_test(test_failure_columns),
      cmocka_unit_test(test_mpi_tool_help_lists_its_commands),
      cmocka_unit_test(test_mpi_tool_refuses_a_sweep),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
