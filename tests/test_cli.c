/*
 * test_cli.c: the `rehearsal` command as a user runs it.  The default scenario runs and writes a
 * JSON summary whose gradient wait equals the cost model's allreduce time; two runs give the same
 * bytes; every malformed scenario exits 2 with its message and writes nothing; the collective
 * sweep checks every result for every op and type and prints a table gnuplot can read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];


static char *path_in(const char *name) { return rh_test_path(tmpdir, name); }

static int run(const char *out, const char *err, char *a1, char *a2, char *a3, char *a4, char *a5,
               char *a6, char *a7, char *a8) {
  char *argv[] = {RH_BINARY, a1, a2, a3, a4, a5, a6, a7, a8, NULL};
  return rh_test_spawn(argv, out, err);
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "cli");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* Runs a scenario with --out and returns its summary object (caller decrefs the root). */
static json_t *summary_of(const char *file, const char *tag, json_t **root) {
  char *out = path_in(tag), std[300], summary[300];
  snprintf(std, sizeof std, "%s.txt", out);
  assert_int_equal(run(std, NULL, "run", (char *)file, "--out", out, NULL, NULL, NULL, NULL), 0);
  char *text = rh_test_slurp(std);
  assert_non_null(text);
  assert_non_null(strstr(text, "#epoch"));
  assert_non_null(strstr(text, "scaling efficiency"));
  free(text);
  json_error_t jerr;
  snprintf(summary, sizeof summary, "%s/summary.json", out);
  *root = json_load_file(summary, 0, &jerr);
  assert_non_null(*root);
  json_t *s = json_object_get(*root, "summary");
  assert_non_null(s);
  return s;
}

static void test_default_scenario(void **state) {
  (void)state;
  /* the gradient as one tensor: each step waits exactly one whole-gradient allreduce */
  json_t *root;
  json_t *s = summary_of("tests/scenarios/good/one_tensor.yaml", "one", &root);
  double wait = json_real_value(json_object_get(s, "comm_wait_ms"));
  double model = json_real_value(json_object_get(s, "predicted_allreduce_ms"));
  print_message("one tensor: waits %.12f ms, the cost model says %.12f ms\n", wait, model);
  assert_int_equal(json_integer_value(json_object_get(s, "buckets_per_step")), 1);
  assert_true(fabs(wait - model) <= 1e-9 * model);
  json_decref(root);
  /* the default, by stages: buckets go out while backward runs, so less is left to wait for */
  s = summary_of("scenarios/default.yaml", "default", &root);
  double wait2 = json_real_value(json_object_get(s, "comm_wait_ms"));
  int buckets = (int)json_integer_value(json_object_get(s, "buckets_per_step"));
  print_message("default: %d buckets, waits %.6f ms of the %.6f ms allreduce\n", buckets, wait2,
                model);
  assert_true(buckets >= 2);
  assert_true(wait2 < 0.5 * model);
  assert_true(json_real_value(json_object_get(s, "scaling_efficiency")) >
              json_real_value(json_object_get(s, "compute_ms")) /
                  (json_real_value(json_object_get(s, "compute_ms")) + model));
  assert_int_equal(json_array_size(json_object_get(root, "epochs")), 2);
  assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "cluster"), "ranks")), 8);
  json_decref(root);
}

static void test_deterministic(void **state) {
  (void)state;
  const char *files[] = {"scenarios/default.yaml", "tests/scenarios/good/uneven_hosts.yaml",
                         "tests/scenarios/good/layers_realistic.yaml"};
  for (int i = 0; i < 3; i++) {
    char *a = path_in("det-a"), *b = path_in("det-b");
    assert_int_equal(run(path_in("det-a.txt"), NULL, "run", (char *)files[i], "--out", a, NULL,
                         NULL, NULL, NULL),
                     0);
    assert_int_equal(run(path_in("det-b.txt"), NULL, "run", (char *)files[i], "--out", b, NULL,
                         NULL, NULL, NULL),
                     0);
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/summary.json", a);
    snprintf(pb, sizeof pb, "%s/summary.json", b);
    char *ja = rh_test_slurp(pa), *jb = rh_test_slurp(pb), *ta = rh_test_slurp(path_in("det-a.txt")),
         *tb = rh_test_slurp(path_in("det-b.txt"));
    assert_non_null(ja);
    assert_non_null(jb);
    assert_string_equal(ja, jb); /* bit for bit, 17 significant digits */
    /* stdout differs only in the output directory it names */
    assert_int_equal(strlen(ta), strlen(tb));
    free(ja);
    free(jb);
    free(ta);
    free(tb);
  }
}

static void test_bad_scenarios_exit_2_and_write_nothing(void **state) {
  (void)state;
  DIR *d = opendir("tests/scenarios/bad");
  assert_non_null(d);
  struct dirent *e;
  int seen = 0;
  while ((e = readdir(d))) {
    if (!strstr(e->d_name, ".yaml")) continue;
    char file[300], want[320], *out = path_in("never");
    snprintf(file, sizeof file, "tests/scenarios/bad/%s", e->d_name);
    int rc = run(NULL, path_in("bad.err"), "run", file, "--out", out, NULL, NULL, NULL, NULL);
    char *err = rh_test_slurp(path_in("bad.err"));
    snprintf(want, sizeof want, "rehearsal: %s:", file);
    if (rc != 2 || strncmp(err, want, strlen(want)) != 0)
      print_error("%s: exit %d, stderr: %s\n", file, rc, err);
    assert_int_equal(rc, 2);
    assert_int_equal(strncmp(err, want, strlen(want)), 0);
    assert_int_equal(access(out, F_OK), -1); /* nothing written */
    free(err);
    seen++;
  }
  closedir(d);
  assert_true(seen >= 15);
}

static void test_usage_errors(void **state) {
  (void)state;
  assert_int_equal(run(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL), 2);
  assert_int_equal(run(NULL, NULL, "fly", NULL, NULL, NULL, NULL, NULL, NULL, NULL), 2);
  assert_int_equal(run(NULL, NULL, "run", NULL, NULL, NULL, NULL, NULL, NULL, NULL), 2);
  assert_int_equal(run(NULL, NULL, "run", "no/such/file.yaml", NULL, NULL, NULL, NULL, NULL, NULL), 2);
  assert_int_equal(run(NULL, NULL, "collective", "scenarios/default.yaml", "--root", "8", NULL,
                       NULL, NULL, NULL),
                   2);
  assert_int_equal(run(NULL, NULL, "collective", "scenarios/default.yaml", "--op", "prod", NULL,
                       NULL, NULL, NULL),
                   2);
  /* the elastic driver: a bad process count, fewer than min_np, a scenario without elastic: */
  assert_int_equal(run(NULL, NULL, "elastic", "scenarios/failures/host-crash.yaml", "-np", "x", "--",
                       "/bin/true", NULL, NULL),
                   2);
  assert_int_equal(run(NULL, NULL, "elastic", "scenarios/failures/host-crash.yaml", "-np", "1", "--",
                       "/bin/true", NULL, NULL),
                   2);
  assert_int_equal(run(NULL, NULL, "elastic", "scenarios/default.yaml", "--", "/bin/true", NULL,
                       NULL, NULL, NULL),
                   2);
  assert_int_equal(run(path_in("help"), NULL, "--help", NULL, NULL, NULL, NULL, NULL, NULL, NULL), 0);
}

/* With the negotiation off nothing is compared: collectives_match says SKIP, not PASS. */
static void test_collectives_match_skips_without_negotiation(void **state) {
  (void)state;
  char *out = path_in("noneg.txt");
  assert_int_equal(run(out, NULL, "run", "scenarios/default.yaml", "--set",
                       "collective.check_collectives=off", "--no-what-if", NULL, NULL, NULL), 0);
  char *text = rh_test_slurp(out);
  assert_non_null(strstr(text, "SKIP  collectives_match"));
  assert_null(strstr(text, "PASS  collectives_match"));
  free(text);
  assert_int_equal(run(out, NULL, "run", "scenarios/default.yaml", "--no-what-if", NULL, NULL, NULL,
                       NULL, NULL), 0);
  text = rh_test_slurp(out);
  assert_non_null(strstr(text, "PASS  collectives_match"));
  free(text);
}

/* Every command and the program itself: --help on stdout with exit 0 and nothing on stderr,
 * --version, an unknown flag named on stderr with exit 2 and nothing on stdout. */
static void test_conventions_of_every_command(void **state) {
  (void)state;
  static const char *const commands[] = {"run", "sweep", "collective", "plot", "platform",
                                         "calibrate", "elastic"};
  char *out = path_in("conv.out"), *err = path_in("conv.err");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    char *cmd = (char *)commands[i];
    assert_int_equal(run(out, err, cmd, "--help", NULL, NULL, NULL, NULL, NULL, NULL), 0);
    char *text = rh_test_slurp(out), *etext = rh_test_slurp(err), want[64];
    snprintf(want, sizeof want, "usage: rehearsal %s", cmd);
    if (strncmp(text, want, strlen(want)) != 0) fail_msg("%s --help: %s", cmd, text);
    assert_string_equal(etext, "");
    free(text);
    free(etext);
    assert_int_equal(run(out, err, cmd, "--version", NULL, NULL, NULL, NULL, NULL, NULL), 0);
    text = rh_test_slurp(out);
    assert_int_equal(strncmp(text, "rehearsal ", 10), 0);
    free(text);
    assert_int_equal(run(out, err, cmd, "scenarios/default.yaml", "--no-such-flag", NULL, NULL,
                         NULL, NULL, NULL), 2);
    text = rh_test_slurp(out);
    etext = rh_test_slurp(err);
    if (!strstr(etext, "--no-such-flag")) fail_msg("%s: %s", cmd, etext);
    assert_string_equal(text, "");
    free(text);
    free(etext);
  }
  /* a bad value is named with its flag */
  assert_int_equal(run(out, err, "sweep", "scenarios/default.yaml", "--jobs", "zero", "--out",
                       path_in("conv"), "--axis", "cluster.nodes=1"), 2);
  char *etext = rh_test_slurp(err);
  assert_non_null(strstr(etext, "--jobs zero"));
  free(etext);
  assert_int_equal(run(out, err, "--version", NULL, NULL, NULL, NULL, NULL, NULL, NULL), 0);
  assert_int_equal(run(out, err, "help", NULL, NULL, NULL, NULL, NULL, NULL, NULL), 0);
}

/* Parses the sweep's table: every data row has 9 columns, #wrong is 0, busbw = algbw x factor. */
static int check_table(const char *path, double factor, int want_rows) {
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[512];
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    double size, count, time, algbw, busbw;
    char type[16], op[16], wrong[16];
    int root;
    int got = sscanf(line, "%lf %lf %15s %15s %d %lf %lf %lf %15s", &size, &count, type, op,
                     &root, &time, &algbw, &busbw, wrong);
    assert_int_equal(got, 9);
    assert_string_equal(wrong, "0");
    assert_true(time > 0);
    assert_true(fabs(algbw - size / time / 1e3) <= 1e-3 * algbw + 2e-3);
    assert_true(fabs(busbw - algbw * factor) <= 1e-3 * busbw + 2e-3);
    rows++;
  }
  fclose(f);
  assert_int_equal(rows, want_rows);
  return rows;
}

static void test_collective_sweep(void **state) {
  (void)state;
  static char *ops[] = {"sum", "avg", "min", "max"};
  static char *types[] = {"float", "double", "half", "int32"};
  for (int o = 0; o < 4; o++)
    for (int t = 0; t < 4; t++) {
      char *out = path_in("coll");
      int rc = run(path_in("coll.txt"), path_in("coll.err"), "collective",
                   "tests/scenarios/good/uneven_hosts.yaml", "--op", ops[o], "--dtype", types[t],
                   "--max", "64KiB");
      if (rc != 0) print_error("collective %s %s: exit %d\n", ops[o], types[t], rc);
      assert_int_equal(rc, 0);
      char *text = rh_test_slurp(path_in("coll.txt"));
      assert_non_null(strstr(text, "# Out of bounds values : 0 OK"));
      free(text);
      (void)out;
      check_table(path_in("coll.txt"), 2.0 * 4 / 5, 14); /* 8 B .. 64 KiB */
    }
  /* broadcast and allgather, and the files under --out */
  char *out = path_in("collout");
  assert_int_equal(run(NULL, NULL, "collective", "scenarios/default.yaml", "--coll", "allgather",
                       "--max", "1MiB", "--out", out),
                   0);
  char table[300];
  snprintf(table, sizeof table, "%s/collective.txt", out);
  check_table(table, 7.0 / 8, 18);
  assert_int_equal(run(path_in("bc.txt"), NULL, "collective", "scenarios/default.yaml", "--coll",
                       "broadcast", "--root", "5", "--max", "1MiB"),
                   0);
  check_table(path_in("bc.txt"), 1.0, 18);
}

static void test_timing_only_above_memory_limit(void **state) {
  (void)state;
  assert_int_equal(run(path_in("big.txt"), NULL, "collective", "scenarios/default.yaml", "--min",
                       "256MiB", "--max", "1GiB", "--mem-limit", "1MiB"),
                   0);
  char *text = rh_test_slurp(path_in("big.txt"));
  assert_non_null(strstr(text, "N/A"));
  free(text);
}

/* A YAML alias bomb of `levels` levels: nine lists of nine references to the level below. */
static char *alias_bomb(int levels) {
  static char text[1024];
  int n = snprintf(text, sizeof text, "[&a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\","
                                      "\"lol\",\"lol\",\"lol\"]");
  for (int l = 1; l < levels; l++) {
    n += snprintf(text + n, sizeof text - (size_t)n, ", &%c [", 'a' + l);
    for (int i = 0; i < 9; i++)
      n += snprintf(text + n, sizeof text - (size_t)n, "%s*%c", i ? "," : "", 'a' + l - 1);
    n += snprintf(text + n, sizeof text - (size_t)n, "]");
  }
  snprintf(text + n, sizeof text - (size_t)n, "]");
  return text;
}

/* --set refuses YAML anchors and aliases, whose copies multiply: nine levels of nine (400 bytes)
 * held 2.4 GB before "out of memory".  The refusal names them, at any key, in bounded memory. */
static void test_set_refuses_aliases(void **state) {
  (void)state;
  static const char *const keys[] = {"description", "x.y", "cluster.nodes"};
  char set[1100], *err = path_in("alias.err");
  for (int levels = 5; levels <= 9; levels += 4) /* the small one first: cheap when it fails */
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
      snprintf(set, sizeof set, "%s=%s", keys[k], alias_bomb(levels));
      long rss = 0;
      char *argv[] = {RH_BINARY, "run", "scenarios/default.yaml", "--set", set, NULL};
      assert_int_equal(rh_test_spawn_rss(argv, "/dev/null", err, &rss), 2);
      char *said = rh_test_slurp(err);
      if (!strstr(said, "the value uses YAML anchors or aliases")) fail_msg("%s", said);
      free(said);
      if (rss > 200 * 1024) fail_msg("%d levels at %s: %ld KiB", levels, keys[k], rss);
    }
  assert_int_equal(run("/dev/null", err, "run", "scenarios/default.yaml", "--set", "x.y=&a 5",
                       NULL, NULL, NULL, NULL),
                   2);
  char *said = rh_test_slurp(err);
  assert_non_null(strstr(said, "--set x.y=&a 5: the value uses YAML anchors or aliases"));
  free(said);
}

/* Runs argv with its stderr in err_path under an alarm of `seconds` (it survives the exec, so a
 * command that blocks is killed instead of holding the suite); its exit code, or -SIGNAL. */
static int spawn_with_alarm(char *const argv[], const char *err_path, unsigned seconds) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_WRONLY);
    if (fd < 0 || null < 0 || dup2(fd, 2) < 0 || dup2(null, 1) < 0) _exit(127);
    alarm(seconds);
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

/* A FIFO given where a file is read (the scenario, --compare, a table, a node preset) is refused
 * as not a regular file: the open waited for a writer that never came. */
static void test_fifo_refused(void **state) {
  (void)state;
  char *fifo = strdup(path_in("fifo.yaml")), *err = strdup(path_in("fifo.err"));
  assert_int_equal(mkfifo(fifo, 0600), 0);
  char node[400];
  snprintf(node, sizeof node, "cluster.node=%s", fifo);
  char *const cmds[][7] = {
      {RH_BINARY, "run", fifo, NULL},
      {RH_BINARY, "run", "scenarios/default.yaml", "--compare", fifo, NULL},
      {RH_BINARY, "calibrate", "scenarios/default.yaml", "--nccl-tests", fifo, NULL},
      {RH_BINARY, "run", "scenarios/default.yaml", "--set", node, NULL},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    int rc = spawn_with_alarm(cmds[i], err, 10);
    if (rc != 2) fail_msg("%s %s %s: %d (-%d: SIGALRM, it blocked)", cmds[i][1], cmds[i][2],
                          cmds[i][3] ? cmds[i][3] : "", rc, SIGALRM);
    char *said = rh_test_slurp(err);
    if (!strstr(said, "a FIFO, not a regular file")) fail_msg("%s", said);
    free(said);
  }
  free(fifo);
  free(err);
}

/* From 16,384 simulated GPUs a line on stderr says, before the platform is built, what to expect
 * (the command is stopped after 3 s: the line comes first or not at all). */
static void test_big_platform_announced(void **state) {
  (void)state;
  char *err = path_in("big.err");
  char *const argv[] = {RH_BINARY, "collective", "scenarios/default.yaml", "--set",
                        "cluster.nodes=2048", "--set", "cluster.gpus_per_node=8", "-b", "8",
                        "-e", "8", NULL};
  spawn_with_alarm(argv, err, 3);
  char *said = rh_test_slurp(err);
  /* at a size bench_run measured, the measurement itself (docs/simulation-cost.md) */
  if (!strstr(said, "building the platform of 16384 GPUs: expect about 14 s and 782 MiB"))
    fail_msg("%s", said);
  free(said);
}

/* --resume on a timing-only run, which keeps no checkpoints, says that it starts over instead of
 * doing so in silence. */
static void test_resume_timing_only_said(void **state) {
  (void)state;
  char *err = path_in("resume.err"), *out = path_in("resume");
  assert_int_equal(run("/dev/null", err, "run", "scenarios/default.yaml", "--no-what-if", "--out",
                       out, "--resume", NULL, NULL),
                   0);
  char *said = rh_test_slurp(err);
  if (!strstr(said, "--resume: scenarios/default.yaml is timing-only") ||
      !strstr(said, "the run starts from its first step"))
    fail_msg("%s", said);
  free(said);
}

/* A child that exits with a code the test did not expect has its stderr shown, however the test
 * discards it: the harness's report (on this process's stderr, caught here) holds the code and
 * what the child said; a child that exits as expected shows nothing. */
static void test_unexpected_exit_shows_stderr(void **state) {
  (void)state;
  char *argv[] = {"/bin/sh", "-c", "echo 'write summary.json: No space left on device' >&2; exit 1",
                  NULL};
  fflush(stderr);
  int saved = dup(2), fd = open(path_in("shown.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  int unexpected = rh_test_spawn_expect(argv, NULL, 0);
  int expected = rh_test_spawn_expect(argv, NULL, 1);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  assert_int_equal(unexpected, 1);
  assert_int_equal(expected, 1);
  char *shown = rh_test_slurp(path_in("shown.txt"));
  assert_non_null(shown);
  print_message("the harness showed:\n%s", shown);
  const char *report = strstr(shown, "exited 1, expected 0; its stderr:\n");
  assert_non_null(report);
  assert_non_null(strstr(report, ":\nwrite summary.json: No space left on device\n"));
  assert_null(strstr(report + 1, "exited")); /* once: the expected exit is quiet */
  free(shown);
}

int main(void) {
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unexpected_exit_shows_stderr),
      cmocka_unit_test(test_default_scenario),
      cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_bad_scenarios_exit_2_and_write_nothing),
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_conventions_of_every_command),
      cmocka_unit_test(test_collectives_match_skips_without_negotiation),
      cmocka_unit_test(test_collective_sweep),
      cmocka_unit_test(test_timing_only_above_memory_limit),
      cmocka_unit_test(test_set_refuses_aliases),
      cmocka_unit_test(test_fifo_refused),
      cmocka_unit_test(test_big_platform_announced),
      cmocka_unit_test(test_resume_timing_only_said),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
