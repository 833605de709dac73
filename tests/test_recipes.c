/*
 * test_recipes.c: the seed recipes and their mistakes, run as a user runs them.  Each seed
 * scenario passes every check; each mistake scenario is caught by the check it names, with the
 * ranks involved, and fails the run unless the scenario expects it; IDX data loads and trains;
 * a run resumed from its checkpoint ends with the same bytes as one that never stopped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "data.h"
#include "harness.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];


static char *in_tmp(const char *name) { return rh_test_path(tmpdir, name); }

/* Runs `rehearsal run FILE [args]`; returns the exit code, the output in *text (caller frees). */
static int run(const char *scenario, char **text, char *a1, char *a2, char *a3) {
  char file[300];
  snprintf(file, sizeof file, "%s", scenario); /* in_tmp's buffers rotate below */
  char *argv[] = {RH_BINARY, "run", file, a1, a2, a3, NULL};
  int rc = rh_test_spawn(argv, in_tmp("out.txt"), in_tmp("err.txt"));
  *text = rh_test_slurp(in_tmp("out.txt"));
  if (rc != 0) {
    char *err = rh_test_slurp(in_tmp("err.txt"));
    print_message("%s: exit %d\n%s%s\n", file, rc, *text ? *text : "", err ? err : "");
    free(err);
  }
  return rc;
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "recipes");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* ---- seeds ----------------------------------------------------------------------------------- */

static void check_seed(const char *name, int checks) {
  char file[256], *text = NULL;
  snprintf(file, sizeof file, "scenarios/seeds/%s.yaml", name);
  assert_int_equal(run(file, &text, NULL, NULL, NULL), 0);
  assert_non_null(text);
  int passes = 0;
  for (const char *p = text; (p = strstr(p, "  PASS  ")); p++) passes++;
  if (strstr(text, "FAIL") || strstr(text, "----") || passes != checks)
    print_error("%s: %d checks passed, want %d\n%s\n", name, passes, checks, text);
  assert_null(strstr(text, "FAIL"));
  assert_null(strstr(text, "----"));
  assert_int_equal(passes, checks);
  free(text);
}

static void test_seed_cifar10_keras_workshop(void **s) { (void)s; check_seed("cifar10-keras-workshop", 7); }
/* elastic: min_np_respected holds; no failure, so the two reset checks do not apply */
static void test_seed_oci_pytorch_elastic_mnist(void **s) { (void)s; check_seed("oci-pytorch-elastic-mnist", 9); }
static void test_seed_fashion_mnist_keras_lab(void **s) { (void)s; check_seed("fashion-mnist-keras-lab", 8); }
static void test_seed_lenet5_tensorflow(void **s) {
  (void)s;
  check_seed("lenet5-mnist-tensorflow", 6); /* and metrics_averaged does not apply: */
  char *text = NULL;
  assert_int_equal(run("scenarios/seeds/lenet5-mnist-tensorflow.yaml", &text, NULL, NULL, NULL), 0);
  assert_non_null(strstr(text, "SKIP  metrics_averaged       no validation ran"));
  free(text);
}
static void test_seed_lenet5_keras(void **s) { (void)s; check_seed("lenet5-mnist-keras", 7); }
static void test_seed_lenet5_pytorch(void **s) { (void)s; check_seed("lenet5-mnist-pytorch", 8); }

/* ---- mistakes -------------------------------------------------------------------------------- */

typedef struct mistake_case {
  const char *file;
  const char *verdicts[3]; /* each must appear in the output */
} mistake_case;

static const mistake_case mistakes[] = {
    {"no-sharding",
     {"FAIL  samples_once", "ranks 0-3 used the same samples", "(2000 distinct of 8000)"}},
    {"no-initial-broadcast",
     {"FAIL  identical_parameters   after epoch 1 step 1 the parameters of ranks 1-3 differ",
      "FAIL  serial_equivalence", NULL}},
    {"no-lr-scaling",
     {"FAIL  lr_schedule            epoch 1 step 1: ranks 0-3 used lr 0.01 where Horovod's callbacks give 0.04",
      NULL, NULL}},
    {"metric-average-rank0-only",
     {"FAIL  metrics_averaged       rank 0: stall:",
      "allreduce 'avg_loss' (1 x double, avg): ranks 0 waited 30 s; ranks 1-3 never issued it",
      NULL}},
    {"no-metric-average",
     {"FAIL  metrics_averaged       avg_loss: ranks 0-3 logged a value that is not the mean", NULL,
      NULL}},
    {"checkpoint-every-rank",
     {"FAIL  one_checkpoint_writer  checkpoint-1.bin was written by 4 ranks (0-3)", NULL, NULL}},
    {"mismatched-collective",
     {"FAIL  collectives_match", "ranks 0-2 issued allreduce 'fc1.weight' (25088 x float, avg), missing on ranks 3",
      "ranks 3 issued allreduce 'fc2.bias' (10 x float, avg), missing on ranks 0-2"}},
    {"missing-collective",
     {"FAIL  collectives_match", "ranks 0-2 issued allreduce 'fc1.bias' (32 x float, avg), missing on ranks 3",
      "ranks 3 issued allreduce 'fc1.weight'"}},
    /* elastic: node 2 dies after 51 steps (epoch 2 step 20); the recipe committed at step 50 */
    {"no-commit",
     {"FAIL  no_committed_work_lost the failure after 51 steps rolled back to step 0, where the "
      "recipe's last commit was at step 50", "(nothing was ever committed)", NULL}},
    {"lr-not-rescaled-on-reset",
     {"FAIL  lr_schedule            epoch 2 step 19: ranks 0,1 used lr 0.03 where Horovod's callbacks give 0.02",
      NULL, NULL}},
    {"sampler-not-reset",
     {"FAIL  samples_once           epoch 2: 848 of 6000 samples were never drawn", NULL, NULL}},
    {"commit-too-rare",
     {"FAIL  commit_interval        a commit every 500000 steps", "Young's interval sqrt(2 C M) = 66.91 s",
      "best of 285 intervals: every"}},
};

static void test_mistakes_are_caught(void **s) {
  (void)s;
  for (size_t i = 0; i < sizeof mistakes / sizeof mistakes[0]; i++) {
    char file[256], *text = NULL;
    snprintf(file, sizeof file, "scenarios/mistakes/%s.yaml", mistakes[i].file);
    int rc = run(file, &text, NULL, NULL, NULL);
    assert_non_null(text);
    for (int k = 0; k < 3; k++) {
      if (!mistakes[i].verdicts[k]) continue;
      if (!strstr(text, mistakes[i].verdicts[k]))
        print_error("%s: missing \"%s\" in\n%s\n", file, mistakes[i].verdicts[k], text);
      assert_non_null(strstr(text, mistakes[i].verdicts[k]));
    }
    assert_null(strstr(text, "UNEXPECTED"));
    assert_int_equal(rc, 0); /* caught, as the scenario expects */
    free(text);
  }
}

/* Copies a scenario with its expect_fail line removed or replaced. */
static void rewrite(const char *from, const char *to, const char *expect) {
  char *text = rh_test_slurp(from);
  assert_non_null(text);
  char *line = strstr(text, "  expect_fail:");
  FILE *f = fopen(to, "w");
  assert_non_null(f);
  if (line) {
    fwrite(text, 1, (size_t)(line - text), f);
    if (expect) fprintf(f, "  expect_fail: [%s]\n", expect);
    char *end = strchr(line, '\n');
    if (end) fputs(end + 1, f);
  } else {
    fputs(text, f);
    if (expect) fprintf(f, "checks:\n  expect_fail: [%s]\n", expect);
  }
  fclose(f);
  free(text);
}

static void test_unexpected_outcomes_fail_the_run(void **s) {
  (void)s;
  char *text = NULL;
  /* the same mistake, not expected: the run fails */
  rewrite("scenarios/mistakes/no-lr-scaling.yaml", in_tmp("unexpected.yaml"), NULL);
  assert_int_equal(run(in_tmp("unexpected.yaml"), &text, NULL, NULL, NULL), 1);
  assert_non_null(strstr(text, "FAIL  lr_schedule"));
  free(text);
  /* a failure expected of a correct recipe that does not happen: the run fails too */
  rewrite("scenarios/mistakes/no-lr-scaling.yaml", in_tmp("wrongly.yaml"), "samples_once");
  assert_int_equal(run(in_tmp("wrongly.yaml"), &text, NULL, NULL, NULL), 1);
  assert_non_null(strstr(text, "[expected to fail: UNEXPECTED]"));
  free(text);
}

/* ---- verdicts that must not lie ---------------------------------------------------------- */

static const char *verdict_base =
    "name: verdicts\n"
    "cluster: {nodes: 2, gpus_per_node: 2, gpu: {tflops: 14}, intra: {bandwidth_GBps: 50},\n"
    "          network: {nic_Gbps: 100}}\n"
    "model: {kind: mlp, hidden: 16, forward_gflops_per_sample: 0.0008}\n"
    "data: {train_samples: 4000, validation_samples: 1000, inputs: 64, classes: 10}\n";

typedef struct verdict_case {
  const char *what;
  const char *rest; /* recipe, collective, checks, mistakes */
  int rc;
  const char *says;
} verdict_case;

static const verdict_case verdict_cases[] = {
    {"a rank that does not shard, with the undivided step count, is still caught",
     "recipe: {batch_per_worker: 32, epochs: 1, steps_per_epoch: full}\nmistakes: [no_sharding]\n", 1,
     "used the same samples"},
    {"the undivided step count alone wraps each shard: caught too, and said as it happened (it "
     "said that the ranks used the same samples)",
     "recipe: {batch_per_worker: 32, epochs: 1, steps_per_epoch: full}\n", 1,
     "each by the rank that had drawn it: the ranks' shards are disjoint, but each rank went round "
     "its own shard 4 times (steps_per_epoch: full runs the whole set's steps on every rank"},
    {"a failure expected of a check that is off does not count as met",
     "recipe: {batch_per_worker: 32, epochs: 1}\nchecks: {samples_once: false, expect_fail: [samples_once]}\n",
     1, "OFF   samples_once           switched off in the scenario  [expected to fail: UNEXPECTED]"},
    {"without validation there is no metric to check",
     "recipe: {batch_per_worker: 32, epochs: 1, validation_steps: none}\nmistakes: [no_metric_average]\n",
     0, "SKIP  metrics_averaged       no validation ran"},
    {"a recipe that writes no checkpoint passes the writer check by not applying",
     "recipe: {batch_per_worker: 32, epochs: 2, checkpoint_every_epochs: 0}\n", 0,
     "SKIP  one_checkpoint_writer"},
    {"a resume point without a checkpoint is bad input",
     "recipe: {batch_per_worker: 32, epochs: 4, checkpoint_every_epochs: 2}\nchecks: {resume_from_epoch: 3}\n",
     2, NULL},
    {"StopAtStepHook(20 // 4 ranks = 5): five steps",
     "recipe: {batch_per_worker: 32, epochs: 3, stop_at_step: 20}\n", 0, "\n     1      5 "},
    {"StopAtStepHook(3 // 4 = 0) still runs one step, as TensorFlow does",
     "recipe: {batch_per_worker: 32, epochs: 3, stop_at_step: 3}\n", 0, "\n     1      1 "},
    {"a warmup that ends inside an epoch: the summary says that Horovod's callback adjusts the "
     "whole epoch past the scaled lr, and what sets it back (it said nothing)",
     "recipe: {batch_per_worker: 32, epochs: 4, warmup_epochs: 2.5}\n", 0,
     "Horovod's LearningRateWarmupCallback adjusts through all of epoch 3, to 1.15 x the scaled lr "
     "at its last step, and epoch 4 on has the scaled lr again, as "
     "LearningRateScheduleCallback(start_epoch=2.5) sets it"},
    {"fp16 gradients: the serial check allows their rounding; metrics are averaged uncompressed",
     "recipe: {batch_per_worker: 32, epochs: 1}\ncollective: {compression: fp16}\n", 0,
     "PASS  metrics_averaged"},
};

static void test_verdicts_do_not_lie(void **s) {
  (void)s;
  for (size_t i = 0; i < sizeof verdict_cases / sizeof verdict_cases[0]; i++) {
    const verdict_case *v = &verdict_cases[i];
    FILE *f = fopen(in_tmp("verdict.yaml"), "w");
    fprintf(f, "%s%s", verdict_base, v->rest);
    fclose(f);
    char *text = NULL;
    int rc = run(in_tmp("verdict.yaml"), &text, NULL, NULL, NULL);
    bool says = !v->says || (text && strstr(text, v->says));
    if (rc != v->rc || !says)
      print_error("%s: exit %d (want %d), output lacks \"%s\":\n%s\n", v->what, rc, v->rc,
                  v->says ? v->says : "", text ? text : "");
    assert_int_equal(rc, v->rc);
    assert_true(says);
    free(text);
  }
}

static double wall_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A disk that fills while rank 0 writes a checkpoint (a file size limit stands in for it): the
 * job stops at once with that error, naming the rank, the file and the reason, on stdout and in
 * summary.json; no check is blamed (it was "FAIL collectives_match ... stall" once the others had
 * waited out the timeout). */
static void test_damaged_disk_full_is_the_jobs_error(void **s) {
  (void)s;
  FILE *f = fopen(in_tmp("full.yaml"), "w");
  fprintf(f, "%srecipe: {batch_per_worker: 32, epochs: 3, checkpoint_every_epochs: 1}\n"
             "collective: {timeout: 60s}\n", verdict_base);
  fclose(f);
  char out[300], summary[400];
  snprintf(out, sizeof out, "%s", in_tmp("full"));
  struct rlimit old, lim = {20 * 1024, 20 * 1024}; /* the summary fits; a checkpoint does not */
  getrlimit(RLIMIT_FSIZE, &old);
  lim.rlim_max = old.rlim_max;
  void (*was)(int) = signal(SIGXFSZ, SIG_IGN); /* a write past it then fails with EFBIG */
  setrlimit(RLIMIT_FSIZE, &lim);
  char *text = NULL;
  double t0 = wall_now();
  int rc = run(in_tmp("full.yaml"), &text, "--out", out, NULL);
  double took = wall_now() - t0;
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, was);
  assert_int_equal(rc, 1);
  assert_non_null(text);
  if (!strstr(text, "cannot write the checkpoint") || strstr(text, "FAIL  collectives_match"))
    print_error("%s\n", text);
  assert_non_null(strstr(text, "the run stopped on rank 0: input/output error"));
  assert_non_null(strstr(text, "rank 0 cannot write the checkpoint "));
  assert_non_null(strstr(text, "/checkpoints/checkpoint-1.bin: File too large"));
  assert_null(strstr(text, "FAIL  collectives_match"));
  assert_true(took < 30); /* nobody waited out the 60 s timeout */
  snprintf(summary, sizeof summary, "%s/summary.json", out);
  char *json = rh_test_slurp(summary);
  assert_non_null(json);
  assert_non_null(strstr(json, "cannot write the checkpoint"));
  free(json);
  free(text);
}

static void test_damaged_checkpoint_stops_resume(void **s) {
  (void)s;
  FILE *f = fopen(in_tmp("damaged.yaml"), "w");
  fprintf(f, "%srecipe: {batch_per_worker: 32, epochs: 3}\n", verdict_base);
  fclose(f);
  char *text = NULL, out[300], ck[400];
  snprintf(out, sizeof out, "%s", in_tmp("damaged"));
  assert_int_equal(run(in_tmp("damaged.yaml"), &text, "--out", out, NULL), 0);
  free(text);
  snprintf(ck, sizeof ck, "%s/checkpoints/checkpoint-3.bin", out);
  assert_int_equal(truncate(ck, 100), 0); /* the newest checkpoint, cut short */
  int rc = run(in_tmp("damaged.yaml"), &text, "--out", out, "--resume");
  assert_int_equal(rc, 1); /* not a silent fresh start */
  assert_non_null(strstr(text, "damaged"));
  free(text);
}

/* ---- IDX data and resume ----------------------------------------------------------------------- */

static void write_idx(const char *stem, long n, uint64_t seed) {
  /* digit-like images: a bright square whose place depends on the label, plus noise */
  uint8_t *px = malloc((size_t)n * 28 * 28), *lb = malloc((size_t)n);
  uint64_t r = seed;
  for (long i = 0; i < n; i++) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    lb[i] = (uint8_t)((r >> 33) % 10);
    for (int p = 0; p < 28 * 28; p++) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      int row = p / 28, col = p % 28, br = (lb[i] / 5) * 14, bc = (lb[i] % 5) * 5;
      bool on = row >= br && row < br + 12 && col >= bc && col < bc + 5;
      px[(size_t)i * 784 + (size_t)p] = (uint8_t)((on ? 160 : 0) + (r >> 58));
    }
  }
  char im[300], lbp[300];
  snprintf(im, sizeof im, "%s-images-idx3-ubyte", stem);
  snprintf(lbp, sizeof lbp, "%s-labels-idx1-ubyte", stem);
  assert_int_equal(rh_idx_write_images(im, px, n, 28, 28), RH_OK);
  assert_int_equal(rh_idx_write_labels(lbp, lb, n), RH_OK);
  free(px);
  free(lb);
}

static const char *idx_scenario =
    "name: idx-mnist-like\n"
    "cluster: {nodes: 1, gpus_per_node: 4, gpu: {tflops: 10}, intra: {bandwidth_GBps: 100}}\n"
    "model: {kind: softmax}\n"
    "data:\n"
    "  source: idx\n"
    "  train_images: train-images-idx3-ubyte\n"
    "  train_labels: train-labels-idx1-ubyte\n"
    "  validation_images: t10k-images-idx3-ubyte\n"
    "  validation_labels: t10k-labels-idx1-ubyte\n"
    "recipe: {batch_per_worker: 25, base_lr: 0.05, momentum: 0.5, epochs: %d, steps_per_epoch: loader}\n";

static void test_idx_data_trains(void **s) {
  (void)s;
  write_idx(in_tmp("train"), 1000, 1);
  write_idx(in_tmp("t10k"), 200, 2);
  FILE *f = fopen(in_tmp("idx.yaml"), "w");
  fprintf(f, idx_scenario, 3);
  fclose(f);
  char *text = NULL;
  assert_int_equal(run(in_tmp("idx.yaml"), &text, NULL, NULL, NULL), 0);
  assert_null(strstr(text, "FAIL"));
  assert_non_null(strstr(text, "1000 distinct samples of 1000"));
  /* the squares are easy to tell apart: the last epoch's validation accuracy is high */
  char *last = strstr(text, "\n     3 ");
  assert_non_null(last);
  /* epoch steps time compute comm_wait step throughput lr loss accuracy val_loss val_acc */
  double v[12];
  assert_int_equal(sscanf(last, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &v[0], &v[1],
                          &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11]),
                   12);
  print_message("IDX: validation accuracy after 3 epochs %.4f\n", v[11]);
  assert_true(v[11] > 0.9);
  free(text);
}

/* A data file that is missing or cut short stops the run before it starts: exit 2, naming the
 * scenario, the field and the file, and nothing written to --out. */
static void test_idx_data_files_named(void **s) {
  (void)s;
  static const char *const scenario =
      "name: data\ncluster: {nodes: 1, gpus_per_node: 2, gpu: {tflops: 14}, intra: "
      "{bandwidth_GBps: 50}}\nmodel: {kind: net, network: %s}\ndata: %s\nrecipe: "
      "{batch_per_worker: 8, epochs: 1, checkpoint_every_epochs: 0}\n";
  char cut[300], dir[300], data[700], out[300];
  snprintf(cut, sizeof cut, "%s", in_tmp("cut.bin"));
  FILE *f = fopen(cut, "wb");
  assert_non_null(f);
  for (int i = 0; i < 3073 + 5; i++) fputc(1, f); /* one record and five bytes of the next */
  fclose(f);
  snprintf(dir, sizeof dir, "%s", in_tmp("no-datasets"));
  struct {
    const char *net, *data, *field, *file;
  } cases[] = {
      {"keras_cifar10_cnn", "{source: cifar10, train_images: %s}", "data.train_images", "cut.bin"},
      {"keras_cifar10_cnn", "{source: cifar10, train_images: %s/data_batch_*.bin}",
       "data.train_images", "data_batch_*.bin"},
      {"lenet5", "{source: fashion-mnist}", "data.train_images", "train-images-idx3-ubyte.gz"},
  };
  setenv("RH_DATASETS", dir, 1);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char d[400];
    snprintf(d, sizeof d, cases[i].data, i == 0 ? cut : dir);
    snprintf(data, sizeof data, scenario, cases[i].net, d);
    f = fopen(in_tmp("data.yaml"), "w");
    fputs(data, f);
    fclose(f);
    snprintf(out, sizeof out, "%s", in_tmp("data-out"));
    char *argv[] = {RH_BINARY, "run", in_tmp("data.yaml"), "--out", out, NULL};
    assert_int_equal(rh_test_spawn(argv, NULL, in_tmp("data.err")), 2);
    char *err = rh_test_slurp(in_tmp("data.err"));
    print_message("%s", err);
    assert_non_null(strstr(err, "data.yaml: "));
    assert_non_null(strstr(err, cases[i].field));
    assert_non_null(strstr(err, cases[i].file));
    free(err);
    char summary[340];
    snprintf(summary, sizeof summary, "%s/summary.json", out);
    assert_int_not_equal(access(summary, F_OK), 0);
  }
  unsetenv("RH_DATASETS");
}

/* ---- accuracy: the cases of scenarios/accuracy/ -------------------------------------------- */

/* The one-GPU recipe runs once; each case is held to its final accuracy (accuracy_parity) and
 * exits 0 exactly when the checks its file expects to fail fail.  What each case shows is in its
 * file: 16 GPUs with the lr x 16 and warmup keep it; 64 GPUs lose it with warmup or without (the
 * lr x 64 diverges), and without lr scaling. */
static void test_accuracy_cases(void **s) {
  (void)s;
  char *text = NULL, base[300], given[340];
  /* the one-GPU recipe from five seeds, as the check runs its own baseline (seed 0 the
   * scenario's, seed k 1000000 + k): their spread sets the bound */
  for (int k = 0; k < 5; k++) {
    char seed[48], sampler[56];
    snprintf(base, sizeof base, "%s/seed-%d", in_tmp("accuracy-base"), k);
    snprintf(seed, sizeof seed, "recipe.seed=%d", 1000000 + k);
    snprintf(sampler, sizeof sampler, "recipe.sampler_seed=%d", 1000000 + k);
    char *argv[] = {RH_BINARY, "run", "scenarios/accuracy/lenet5-fmnist-1gpu.yaml", "--out", base,
                    "--set", seed, "--set", sampler, NULL};
    if (k == 0) argv[5] = NULL; /* the scenario's own seeds */
    assert_int_equal(rh_test_spawn_expect(argv, in_tmp("base.txt"), 0), 0);
  }
  snprintf(given, sizeof given, "checks.accuracy_baseline=%s/seed-*/summary.json",
           in_tmp("accuracy-base"));
  static const struct { const char *name; bool keeps; } cases[] = {
      {"lenet5-fmnist-16gpu-scaled-warmup", false}, /* about 2 points short at 5 epochs */
      {"lenet5-fmnist-64gpu-scaled-warmup", false},
      {"lenet5-fmnist-64gpu-scaled-no-warmup", false},
      {"lenet5-fmnist-64gpu-unscaled", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char file[200];
    snprintf(file, sizeof file, "scenarios/accuracy/%s.yaml", cases[i].name);
    assert_int_equal(run(file, &text, "--set", given, NULL), 0);
    const char *line = strstr(text, "accuracy_parity ");
    assert_non_null(line);
    print_message("%s: %.*s\n", cases[i].name, (int)strcspn(line, "\n"), line);
    /* the verdict line begins with PASS or FAIL six columns before the name */
    assert_memory_equal(line - 6, cases[i].keeps ? "PASS" : "FAIL", 4);
    free(text);
  }
}

/* Without checks.accuracy_baseline the one-GPU run happens beside the job, into --out DIR/baseline,
 * and a second run of the same scenario reads it again instead of running it. */
static void test_accuracy_baseline_kept(void **s) {
  (void)s;
  char out[300], *text = NULL;
  snprintf(out, sizeof out, "%s", in_tmp("accuracy-kept"));
  char *sets[] = {"--set", "data.train_samples=2000", "--set", "recipe.epochs=1", "--set",
                  "checks.accuracy_baseline_seeds=2"};
  for (int round = 0; round < 2; round++) {
    char *argv[] = {RH_BINARY, "run", "scenarios/accuracy/lenet5-fmnist-16gpu-scaled-warmup.yaml",
                    "--out", out, sets[0], sets[1], sets[2], sets[3], sets[4], sets[5], NULL};
    int rc = rh_test_spawn(argv, in_tmp("kept.txt"), NULL);
    text = rh_test_slurp(in_tmp("kept.txt"));
    const char *line = strstr(text, "accuracy_parity ");
    assert_non_null(line);
    print_message("round %d (exit %d): %.*s\n", round + 1, rc, (int)strcspn(line, "\n"), line);
    assert_true(rc == 0 || rc == 1); /* two thousand images may not keep the accuracy */
    assert_non_null(strstr(text, "the recipe on one GPU from 2 seeds"));
    assert_non_null(strstr(line, "the mean of 2 seeds"));
    assert_non_null(strstr(line, round == 0 ? "; run into " : "; kept in "));
    free(text);
  }
  char summary[340];
  for (int k = 0; k < 2; k++) {
    snprintf(summary, sizeof summary, "%s/baseline/seed-%d/summary.json", out, k);
    assert_int_equal(access(summary, R_OK), 0);
  }
}

static void test_resume_from_checkpoint_cli(void **s) {
  (void)s;
  /* 2 epochs, then resume to 3; against 3 epochs straight: the last checkpoint, byte for byte */
  char *text = NULL;
  write_idx(in_tmp("train"), 1000, 1);
  write_idx(in_tmp("t10k"), 200, 2);
  FILE *f = fopen(in_tmp("r2.yaml"), "w");
  fprintf(f, idx_scenario, 2);
  fclose(f);
  f = fopen(in_tmp("r3.yaml"), "w");
  fprintf(f, idx_scenario, 3);
  fclose(f);
  char straight[300], resumed[300];
  snprintf(straight, sizeof straight, "%s", in_tmp("straight"));
  snprintf(resumed, sizeof resumed, "%s", in_tmp("resumed"));
  assert_int_equal(run(in_tmp("r3.yaml"), &text, "--out", straight, NULL), 0);
  free(text);
  assert_int_equal(run(in_tmp("r2.yaml"), &text, "--out", resumed, NULL), 0);
  free(text);
  assert_int_equal(run(in_tmp("r3.yaml"), &text, "--out", resumed, "--resume"), 0);
  assert_non_null(strstr(text, "# resumed after epoch 2"));
  free(text);
  char a[400], b[400];
  snprintf(a, sizeof a, "%s/checkpoints/checkpoint-3.bin", straight);
  snprintf(b, sizeof b, "%s/checkpoints/checkpoint-3.bin", resumed);
  FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
  assert_non_null(fa);
  assert_non_null(fb);
  int ca, cb;
  long at = 0;
  do {
    ca = fgetc(fa);
    cb = fgetc(fb);
    at++;
  } while (ca == cb && ca != EOF);
  if (ca != cb) print_error("checkpoint-3.bin differs at byte %ld\n", at);
  assert_int_equal(ca, cb);
  fclose(fa);
  fclose(fb);
  /* --resume needs --out */
  assert_int_equal(run(in_tmp("r3.yaml"), &text, "--resume", NULL, NULL), 2);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_cifar10_keras_workshop),
      cmocka_unit_test(test_seed_oci_pytorch_elastic_mnist),
      cmocka_unit_test(test_seed_fashion_mnist_keras_lab),
      cmocka_unit_test(test_seed_lenet5_tensorflow),
      cmocka_unit_test(test_seed_lenet5_keras),
      cmocka_unit_test(test_seed_lenet5_pytorch),
      cmocka_unit_test(test_mistakes_are_caught),
      cmocka_unit_test(test_unexpected_outcomes_fail_the_run),
      cmocka_unit_test(test_verdicts_do_not_lie),
      cmocka_unit_test(test_damaged_checkpoint_stops_resume),
      cmocka_unit_test(test_damaged_disk_full_is_the_jobs_error),
      cmocka_unit_test(test_idx_data_trains),
      cmocka_unit_test(test_idx_data_files_named),
      cmocka_unit_test(test_resume_from_checkpoint_cli),
      cmocka_unit_test(test_accuracy_cases),
      cmocka_unit_test(test_accuracy_baseline_kept),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
