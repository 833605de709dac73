/*
 * test_failure_report.c: the failures section of `rehearsal run` tells the whole job, whatever
 * its size or its end.  Each case writes a small timing-only scenario (a run of a second or less),
 * runs the program as a user does and reads its report and summary.json:
 * - more incidents than the report lists one by one are all counted in its totals and JSON;
 * - a job whose every node died says so, counts its time as lost, and its crashes as noticed: they
 *   ended it; its failure rate is the scenario's, even when no step was recorded;
 * - a degradation that is in fact a dead component is refused at load;
 * - an event given with --set is named by the override, not by a line of the file;
 * - a job that cannot allocate what it trains with says how many steps an epoch has, and what it
 *   could not allocate;
 * - a job that ended below min_np judges the commits it measured and prints no final parameters;
 * - goodput is of the GPU-time held, a failed node's GPUs included.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "failure-report");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* Two nodes of one GPU and a small model: 2000 steps of about 90 us. */
static const char tiny_job[] = "name: tiny\n"
                               "cluster:\n"
                               "  nodes: 2\n"
                               "  gpus_per_node: 1\n"
                               "  gpu: {tflops: 10}\n"
                               "  intra: {bandwidth_GBps: 20, latency_us: 1}\n"
                               "  network: {nic_Gbps: 100, latency_us: 5}\n"
                               "model:\n"
                               "  name: tiny\n"
                               "  parameters: 100000\n"
                               "  forward_gflops_per_sample: 0.01\n"
                               "data:\n"
                               "  train_samples: 40000\n"
                               "recipe:\n"
                               "  batch_per_worker: 10\n"
                               "  epochs: 1\n";

/* Runs `rehearsal run FILE --no-what-if --out DIR [more...]`; its exit status, its stdout in
 * *text, its summary.json in *root (NULL where there is none). */
static int run(const char *file, const char *out, char *const more[], char **text, json_t **root) {
  char std[320], summary[320];
  snprintf(std, sizeof std, "%s.txt", out);
  char *argv[16] = {RH_BINARY, "run", (char *)file, "--no-what-if", "--out", (char *)out};
  for (int i = 0; more && more[i] && i < 8; i++) argv[6 + i] = more[i];
  int rc = rh_test_spawn(argv, std, NULL);
  *text = rh_test_slurp(std);
  assert_non_null(*text);
  snprintf(summary, sizeof summary, "%s/summary.json", out);
  json_error_t err;
  *root = json_load_file(summary, 0, &err);
  return rc;
}

static char *write_scenario(const char *name, const char *text) {
  char *path = rh_test_path(tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
  return path;
}

/* 300 straggler windows, each over a step or two: every one is counted, 256 are listed. */
static void test_every_incident_counted(void **state) {
  (void)state;
  size_t cap = sizeof tiny_job + 300 * 100 + 64, len = 0;
  char *yaml = malloc(cap);
  assert_non_null(yaml);
  len += (size_t)snprintf(yaml + len, cap - len, "%sfailures:\n  events:\n", tiny_job);
  for (int i = 0; i < 300; i++)
    len += (size_t)snprintf(yaml + len, cap - len,
                            "    - {kind: straggler, node: 1, factor: 0.5, at_s: %g, "
                            "duration_s: 0.0002}\n", 0.001 + 0.0004 * i);
  char file[300], out[300], *text;
  snprintf(file, sizeof file, "%s", write_scenario("stragglers.yaml", yaml));
  free(yaml);
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "stragglers"));
  json_t *root;
  double t0 = rh_test_wall();
  assert_int_equal(run(file, out, NULL, &text, &root), 0);
  double wall = rh_test_wall() - t0;
  print_message("300 windows reported in %.2f s\n", wall);
  assert_non_null(root);
  if (!strstr(text, "  ... and 44 more (in the total, and each in summary.json)\n"))
    fail_msg("no line says 44 incidents were left unlisted:\n%s", text);
  assert_non_null(strstr(text, "  256. straggler of node 1 at"));
  assert_null(strstr(text, "  257. "));
  json_t *failures = json_object_get(root, "failures");
  json_t *events = json_object_get(failures, "events");
  assert_int_equal(json_array_size(events), 300);
  /* each window's slower steps are in the total, the last as much as the first */
  double sum = 0;
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    assert_string_equal(json_string_value(json_object_get(e, "outcome")), "delay");
    sum += json_real_value(json_object_get(e, "cost_s"));
  }
  double lost = json_real_value(json_object_get(failures, "lost_s"));
  print_message("lost %.9f s, the events' costs %.9f s\n", lost, sum);
  assert_true(lost > 0 && fabs(lost - sum) < 1e-9);
  assert_true(json_real_value(json_object_get(json_array_get(events, 299), "cost_s")) > 0);
  assert_true(wall < 30); /* the analysis grows with the incidents, not with their square's */
  json_decref(root);
  free(text);
}

/* Three nodes of two GPUs, an MLP of 32 steps an epoch. */
static const char small_mlp[] = "name: small\n"
                                "cluster:\n"
                                "  nodes: 3\n"
                                "  gpus_per_node: 2\n"
                                "  gpu: {tflops: 14}\n"
                                "  intra: {bandwidth_GBps: 50, latency_us: 1}\n"
                                "  network: {nic_Gbps: 25, latency_us: 5}\n"
                                "model: {kind: mlp, hidden: 50, name: m, "
                                "forward_gflops_per_sample: 0.00096}\n"
                                "data: {train_samples: 12000, validation_samples: 2000}\n"
                                "recipe:\n"
                                "  batch_per_worker: 64\n"
                                "  base_lr: 0.01\n"
                                "  epochs: 3\n"
                                "  validation_batch: 1000\n"
                                "failures:\n"
                                "  events:\n";

/* Every node dies at once: the job ended, said so; what it lost runs to that moment. */
static void every_node_dies(const char *name, const char *at, const char *recovery, double *lost,
                            double *goodput, double *end) {
  char yaml[2048], file[300], out[300], *text;
  int len = snprintf(yaml, sizeof yaml, "%s", small_mlp);
  for (int node = 0; node < 3; node++)
    len += snprintf(yaml + len, sizeof yaml - (size_t)len,
                    "    - {kind: host_crash, node: %d, %s}\n", node, at);
  snprintf(yaml + len, sizeof yaml - (size_t)len, "%s", recovery);
  char yaml_name[100];
  snprintf(yaml_name, sizeof yaml_name, "%s.yaml", name);
  snprintf(file, sizeof file, "%s", write_scenario(yaml_name, yaml));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, name));
  json_t *root;
  int rc = run(file, out, NULL, &text, &root);
  if (rc != 1 || !root)
    fail_msg("%s: exit %d, expected 1 (it did not finish):\n%s", name, rc, text);
  const char *says[] = {"no worker of the job was left to notice it\n     the job ended: ",
                        "\nthe job ended before its last step: no node was left, every worker "
                        "died\n",
                        "PASS  failures_noticed"};
  for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
    if (!strstr(text, says[i])) fail_msg("%s does not say \"%s\":\n%s", name, says[i], text);
  if (strstr(text, "nobody noticed it")) fail_msg("%s: \"nobody noticed it\":\n%s", name, text);
  json_t *failures = json_object_get(root, "failures");
  *lost = json_real_value(json_object_get(failures, "lost_s"));
  *goodput = json_real_value(json_object_get(failures, "goodput"));
  *end = json_real_value(json_object_get(root, "end_time_s"));
  print_message("%s: lost %.6f s of %.6f s, goodput %.4f\n", name, *lost, *end, *goodput);
  assert_string_equal(json_string_value(json_object_get(root, "ended")), "no node was left");
  json_decref(root);
  free(text);
}

static void test_every_node_dies(void **state) {
  (void)state;
  double lost, goodput, end;
  /* elastic: the commits die with the nodes; the checkpoint of epoch 1's end is kept */
  every_node_dies("all-crash-elastic", "epoch: 2, step: 5",
                  "elastic: {min_np: 2, commit_every_steps: 5}\n", &lost, &goodput, &end);
  assert_true(end > 0.005 && lost > 0 && lost < end && goodput < 1);
  /* a relaunch finds no node: everything since the start is lost, to the driver's giving up */
  every_node_dies("all-crash-relaunch", "epoch: 1, step: 5",
                  "restart: {policy: from_checkpoint, max_restarts: 3}\n", &lost, &goodput, &end);
  assert_true(end > 60 && lost == end && goodput == 0);
}

/* Every GPU fails within milliseconds: the interval study's rate is the scenario's. */
static void test_failure_rate_from_the_scenario(void **state) {
  (void)state;
  char file[300], out[300], *text;
  snprintf(file, sizeof file, "%s",
           write_scenario("mtbf.yaml", "name: mtbf\n"
                                       "cluster:\n"
                                       "  nodes: 2\n"
                                       "  gpus_per_node: 4\n"
                                       "  gpu: {tflops: 100}\n"
                                       "  intra: {bandwidth_GBps: 200, latency_us: 1}\n"
                                       "  network: {nic_Gbps: 100, latency_us: 5}\n"
                                       "model: {name: m, parameters: 1000000, "
                                       "forward_gflops_per_sample: 1}\n"
                                       "data: {train_samples: 6400000}\n"
                                       "recipe: {batch_per_worker: 100, epochs: 1}\n"
                                       "failures: {seed: 1, gpu_mtbf_hours: 0.000000278}\n"
                                       "elastic: {min_np: 8}\n"));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "mtbf"));
  json_t *root;
  assert_int_equal(run(file, out, NULL, &text, &root), 1);
  if (strstr(text, "gives no failure rate")) fail_msg("the rate is the scenario's:\n%s", text);
  assert_non_null(strstr(text, "goodput 0.00%"));
  json_decref(root);
  free(text);
}

/* A straggler at 1e-300 of its speed, or a link a million seconds slower, is dead: refused at load,
 * with the range a degradation may have; at the bounds, the job runs. */
static void test_dead_component_refused(void **state) {
  (void)state;
  char file[300], *text;
  snprintf(file, sizeof file, "%s", write_scenario("dead.yaml", tiny_job));
  static const struct {
    const char *set, *says;
    int rc;
  } cases[] = {
      {"failures.events=[{kind: straggler, node: 1, factor: 1e-300, at_s: 0.001}]",
       "failures.events[0].factor: 1e-300 is a dead component, not a degraded one: expected from "
       "1e-06 to 1", 2},
      {"failures.events=[{kind: link_degraded, node: 1, link: uplink, extra_latency_us: 1e12, "
       "at_s: 0.001}]",
       "failures.events[0].extra_latency_us: 1e+12 is a dead link, not a degraded one: expected "
       "from 0 to 1e+06", 2},
      {"failures.events=[{kind: link_degraded, node: 1, link: uplink, factor: 1e-6, "
       "extra_latency_us: 1e6, at_s: 0.001, duration_s: 0.001}]", "link_degraded of node 1", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[300], err[320], std[320];
    snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "dead"));
    snprintf(err, sizeof err, "%s.err", out);
    snprintf(std, sizeof std, "%s.txt", out);
    char *argv[] = {RH_BINARY, "run", file, "--no-what-if", "--set", (char *)cases[i].set, NULL};
    int rc = rh_test_spawn(argv, std, err);
    char *said = rh_test_slurp(cases[i].rc ? err : std);
    text = rh_test_slurp(std);
    assert_non_null(said);
    assert_non_null(text);
    if (rc != cases[i].rc || !strstr(said, cases[i].says))
      fail_msg("--set %s: exit %d (expected %d), does it say \"%s\"?\n%s%s", cases[i].set, rc,
               cases[i].rc, cases[i].says, said, text);
    /* what a job that ran lost is within its time, printed as a number of seconds */
    const char *total = strstr(text, "  total        ");
    double lost, of;
    if (cases[i].rc == 0) {
      assert_non_null(total);
      assert_int_equal(sscanf(total, "  total        %lf s lost of %lf s", &lost, &of), 2);
      assert_true(lost >= 0 && lost <= of);
    }
    free(said);
    free(text);
  }
}

/* Events an override gives are named by it, not by the line number it carries inside. */
static void test_events_of_an_override(void **state) {
  (void)state;
  char file[300], out[300], *text;
  snprintf(file, sizeof file, "%s", write_scenario("set.yaml", tiny_job));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "set"));
  json_t *root;
  char *more[] = {"--set",
                  "failures.events=[{kind: straggler, node: 1, factor: 0.5, at_s: 0.001, "
                  "duration_s: 0.001}, {kind: host_crash, node: 1, at_s: 1e9}]",
                  NULL};
  assert_int_equal(run(file, out, more, &text, &root), 1); /* the crash never happened */
  assert_non_null(root);
  const char *says[] = {"1. straggler of node 1 at 0.001000 s (epoch 1, step ",
                        "; --set failures.events, event 1)\n",
                        "2. host_crash of node 1 (--set failures.events, event 2)\n"
                        "     never happened",
                        "the host_crash of node 1 (--set failures.events, event 2) never happened"};
  for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
    if (!strstr(text, says[i])) fail_msg("does not say \"%s\":\n%s", says[i], text);
  if (strstr(text, "line 1073741")) fail_msg("an override's line number:\n%s", text);
  json_t *events = json_object_get(json_object_get(root, "failures"), "events");
  assert_int_equal(json_array_size(events), 2);
  for (int i = 0; i < 2; i++) {
    json_t *e = json_array_get(events, (size_t)i);
    char path[40];
    snprintf(path, sizeof path, "failures.events[%d]", i);
    assert_null(json_object_get(e, "line"));
    assert_string_equal(json_string_value(json_object_get(e, "set")), path);
  }
  json_decref(root);
  free(text);
}

/* One node of two GPUs, an MLP, 1200 samples in batches of 128: 9 steps an epoch. */
static const char mlp_job[] = "name: mlp\n"
                              "cluster:\n"
                              "  nodes: 1\n"
                              "  gpus_per_node: 2\n"
                              "  gpu: {tflops: 14}\n"
                              "  intra: {bandwidth_GBps: 50, latency_us: 1}\n"
                              "  network: {nic_Gbps: 25, latency_us: 5}\n"
                              "model: {kind: mlp, hidden: 50, forward_gflops_per_sample: 0.00096}\n"
                              "data: {train_samples: 1200, validation_samples: 200}\n"
                              "recipe:\n"
                              "  batch_per_worker: 64\n"
                              "  base_lr: 0.01\n"
                              "  momentum: 0.5\n"
                              "  epochs: 1\n"
                              "  validation_batch: 100\n";

/* `rehearsal run FILE --no-what-if --set SET` with its address space limited to `limit` bytes (0:
 * as it is); its exit status, its stdout in *text. */
static int run_limited(const char *file, const char *set, rlim_t limit, char **text) {
  char std[320];
  snprintf(std, sizeof std, "%s", rh_test_path(tmpdir, "nomem.txt"));
  char *argv[] = {RH_BINARY, "run", (char *)file, "--no-what-if", "--set", (char *)set, NULL};
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct rlimit as = {limit, limit};
    if (limit && setrlimit(RLIMIT_AS, &as) != 0) _exit(126);
    _exit(rh_test_spawn(argv, std, NULL));
  }
  int status = 0;
  assert_true(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status));
  *text = rh_test_slurp(std);
  assert_non_null(*text);
  return WEXITSTATUS(status);
}

/* A job stopped by a lack of memory before its first step: the header has the epoch's steps, and
 * the stop says what could not be allocated (no empty line). */
static void test_out_of_memory_said(void **state) {
  (void)state;
  /* a huge allocation fails, and is not an AddressSanitizer finding */
  setenv("ASAN_OPTIONS", "allocator_may_return_null=1", 0);
  char file[300];
  snprintf(file, sizeof file, "%s", write_scenario("mlp.yaml", mlp_job));
  static const struct {
    const char *set, *header;
    rlim_t limit;
  } cases[] = {
      {"data.train_samples=1e15", "global; 7812500000000 steps per epoch\n", 0},
#ifndef RH_SANITIZE_ADDRESS /* its shadow memory does not fit a limited address space */
      {"model.hidden=1048576", "global; 9 steps per epoch\n", (rlim_t)4000000 * 1024},
#endif
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *text;
    int rc = run_limited(file, cases[i].set, cases[i].limit, &text);
    const char *stop = strstr(text, "\nthe run stopped on rank 0: out of memory\n  ");
    if (rc != 1 || !strstr(text, cases[i].header) || !stop)
      fail_msg("--set %s: exit %d (expected 1), does it say \"%s\"?\n%s", cases[i].set, rc,
               cases[i].header, text);
    const char *detail = stop + strlen("\nthe run stopped on rank 0: out of memory\n  ");
    if (!strstr(detail, "could not allocate"))
      fail_msg("--set %s: the stop does not say what could not be allocated:\n%s", cases[i].set,
               text);
    free(text);
  }
}

/* One of three nodes crashes in the only epoch and min_np 5 cannot be met: the job ended, all of
 * its work lost, yet the steps before the crash ran at their pace.  Its commits were measured
 * (the report prints their seconds), so commit_interval judges them instead of saying that none
 * was; and no final parameters exist to print a hash of. */
static void test_below_min_np_reported(void **state) {
  (void)state;
  char yaml[2048], file[300], out[300], *text;
  snprintf(yaml, sizeof yaml, "%s"
           "    - {kind: host_crash, node: 1, epoch: 1, step: 20}\n"
           "  gpu_mtbf_hours: 100000\n"
           "elastic: {min_np: 5, commit_every_steps: 5, timeout_s: 10}\n", small_mlp);
  snprintf(file, sizeof file, "%s", write_scenario("below-min-np.yaml", yaml));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "below-min-np"));
  json_t *root;
  char *one_epoch[] = {"--set", "recipe.epochs=1", NULL}; /* no checkpoint: everything is lost */
  run(file, out, one_epoch, &text, &root);
  assert_non_null(root);
  assert_string_equal(json_string_value(json_object_get(root, "ended")),
                      "fewer workers than min_np remain");
  double commit = json_real_value(json_object_get(json_object_get(root, "failures"), "commit_s"));
  if (!(commit > 0)) fail_msg("no commit time in summary.json:\n%s", text);
  if (strstr(text, "no commit was measured"))
    fail_msg("commits of %g s, yet \"no commit was measured\":\n%s", commit, text);
  if (!strstr(text, "PASS  commit_interval") && !strstr(text, "FAIL  commit_interval"))
    fail_msg("commit_interval did not judge the commits measured:\n%s", text);
  if (strstr(text, "FNV-1a 0000000000000000") || !strstr(text, "final parameters: none"))
    fail_msg("a job that ended below min_np has no final parameters:\n%s", text);
  assert_null(json_object_get(root, "final_parameters_fnv1a"));
  json_decref(root);
  free(text);
}

/* One node of three crashes: the world goes on with 4 GPUs of 6, and the job still holds the
 * failed node's 2 (blacklisted, not given back).  Goodput is of the GPU-time held: the share of
 * the time that counted, times 6 GPUs until the new world and 4 of 6 after it. */
static void test_goodput_counts_held_gpus(void **state) {
  (void)state;
  char yaml[2048], file[300], out[300], *text;
  snprintf(yaml, sizeof yaml, "%s    - {kind: host_crash, node: 1, epoch: 1, step: 10}\n"
           "elastic: {min_np: 2, commit_every_steps: 5}\n", small_mlp);
  snprintf(file, sizeof file, "%s", write_scenario("one-node-fails.yaml", yaml));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "one-node-fails"));
  json_t *root;
  assert_int_equal(run(file, out, NULL, &text, &root), 0);
  assert_non_null(root);
  json_t *f = json_object_get(root, "failures");
  json_t *e = json_array_get(json_object_get(f, "events"), 0);
  assert_int_equal(json_integer_value(json_object_get(e, "ranks_after")), 4);
  double end = json_real_value(json_object_get(root, "end_time_s"));
  double world = json_real_value(json_object_get(e, "time_s")) +
                 json_real_value(json_object_get(e, "detection_s")) +
                 json_real_value(json_object_get(e, "rendezvous_s"));
  double counted = (end - json_real_value(json_object_get(f, "lost_s")) -
                    json_real_value(json_object_get(f, "commit_s")) -
                    json_real_value(json_object_get(f, "checkpoint_s"))) / end;
  double want = counted * (6 * world + 4 * (end - world)) / (6 * end);
  double goodput = json_real_value(json_object_get(f, "goodput"));
  print_message("goodput %.6f, expected %.6f (time that counted %.6f)\n", goodput, want, counted);
  assert_true(fabs(goodput - want) <= 1e-9 * want);
  json_decref(root);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_incident_counted),
      cmocka_unit_test(test_every_node_dies),
      cmocka_unit_test(test_failure_rate_from_the_scenario),
      cmocka_unit_test(test_dead_component_refused),
      cmocka_unit_test(test_events_of_an_override),
      cmocka_unit_test(test_out_of_memory_said),
      cmocka_unit_test(test_below_min_np_reported),
      cmocka_unit_test(test_goodput_counts_held_gpus),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  if (getenv("RH_TEST_SKIP")) cmocka_set_skip_filter(getenv("RH_TEST_SKIP"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
