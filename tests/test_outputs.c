/*
 * test_outputs.c: the files a command writes.  The outputs of one command land together or not at
 * all, even when the disk fills between two of them, and a directory made for them alone goes
 * again; a temporary left by a writer killed before its rename is removed by the next writer,
 * and a live writer's is not; a path that is not UTF-8 still reaches summary.json, its stray
 * bytes as \xNN; an --out that cannot be written (a file in the way, a file system that takes no
 * entry) is found before the work; a run of 10^8 steps records them in the memory of a few runs
 * and says how much of them steps.csv holds.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "commands.h"
#include "output.h"
#include "harness.h"
#include "run_summary.h"

#include <jansson.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "outputs");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

static bool exists(const char *dir, const char *name) {
  struct stat st;
  return stat(name ? rh_test_path(dir, name) : dir, &st) == 0;
}

static int entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (d) closedir(d);
  return n;
}

/* With room for the first file and not the second (a file size limit stands in for a full
 * disk), neither file appears, nor a temporary, and the directory made for them is gone. */
static void test_together_or_not_at_all(void **state) {
  (void)state;
  char *dir = strdup(rh_test_path(tmpdir, "full"));
  static char big[4096];
  memset(big, 'x', sizeof big - 1);
  const char *names[] = {"table.txt", "table.json"}, *texts[] = {"small\n", big};
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit then fails with EFBIG */
    struct rlimit lim = {1024, 1024};
    setrlimit(RLIMIT_FSIZE, &lim);
    _exit(rh_write_outputs(dir, 2, names, texts) == 1 ? 0 : 3);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_false(exists(dir, NULL));
  /* into a directory that was there before: it stays, and holds nothing new */
  assert_int_equal(mkdir(dir, 0777), 0);
  pid = fork();
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {1024, 1024};
    setrlimit(RLIMIT_FSIZE, &lim);
    _exit(rh_write_outputs(dir, 2, names, texts) == 1 ? 0 : 3);
  }
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_true(exists(dir, NULL));
  assert_int_equal(entries(dir), 0);
  /* with room, both */
  assert_int_equal(rh_write_outputs(dir, 2, names, texts), 0);
  assert_true(exists(dir, "table.txt") && exists(dir, "table.json"));
  assert_int_equal(entries(dir), 2);
  free(dir);
}

/* A temporary of a process that is gone is removed by the next write of that name; one of a
 * process still running is left to it. */
static void test_stale_temporaries_removed(void **state) {
  (void)state;
  char *dir = strdup(rh_test_path(tmpdir, "stale"));
  assert_int_equal(mkdir(dir, 0777), 0);
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, NULL, 0);
  char dead[128], live[128];
  snprintf(dead, sizeof dead, ".summary.json.%ld.Ab12Cd", (long)gone);
  snprintf(live, sizeof live, ".summary.json.%ld.Ef34Gh", (long)getppid());
  fclose(fopen(rh_test_path(dir, dead), "w"));
  fclose(fopen(rh_test_path(dir, live), "w"));
  assert_int_equal(rh_write_output(dir, "summary.json", "{}\n"), 0);
  assert_false(exists(dir, dead));
  assert_true(exists(dir, live));
  assert_true(exists(dir, "summary.json"));
  free(dir);
}

/* Bytes that are not UTF-8 become \xNN; UTF-8, and only it, passes as it is. */
/* rh_remove_tree is rm -rf without a shell: names with quotes, `;`, `$( )` and a newline go, a
 * link inside is removed and its target (outside) kept, a missing path is no error. */
static void test_remove_tree(void **state) {
  (void)state;
  char top[64];
  assert_int_equal(rh_test_mkdtemp(top, "rmtree"), 0);
  char outside[64];
  assert_int_equal(rh_test_mkdtemp(outside, "rmtree-keep"), 0);
  char *keep = strdup(rh_test_path(outside, "keep"));
  FILE *f = fopen(keep, "w");
  assert_non_null(f);
  fclose(f);
  const char *names[] = {"it's", "a; rm -rf x", "$(true)", "new\nline", "deep"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char *d = rh_test_path(top, names[i]);
    assert_int_equal(mkdir(d, 0777), 0);
    assert_int_equal(rh_write_output(d, "file.txt", "x\n"), 0);
  }
  assert_int_equal(rh_make_dirs(rh_test_path(top, "deep/a/b/c")), 0);
  assert_int_equal(symlink(outside, rh_test_path(top, "deep/a/link")), 0);
  assert_int_equal(rh_remove_tree(top), 0);
  struct stat st;
  assert_int_equal(lstat(top, &st), -1);
  assert_int_equal(stat(keep, &st), 0); /* the link's target is untouched */
  assert_int_equal(rh_remove_tree(top), 0); /* gone already: not an error */
  assert_int_equal(rh_remove_tree(outside), 0);
  free(keep);
}

static void test_json_text(void **state) {
  (void)state;
  static const struct { const char *in, *out; } cases[] = {
      {"plain/path.yaml", "plain/path.yaml"},
      {"caf\xc3\xa9", "caf\xc3\xa9"},                 /* é */
      {"bad\xff.yaml", "bad\\xff.yaml"},             /* never a UTF-8 byte */
      {"\xc3", "\\xc3"},                             /* a truncated sequence */
      {"\xc0\xaf", "\\xc0\\xaf"},                    /* an overlong '/' */
      {"\xed\xa0\x80", "\\xed\\xa0\\x80"},           /* a surrogate */
      {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},      /* U+1F600 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *j = rh_json_text(cases[i].in);
    assert_non_null(j);
    assert_string_equal(json_string_value(j), cases[i].out);
    json_decref(j);
  }
}

/* A scenario under a directory whose name is not UTF-8: summary.json still says which file ran
 * (it had no "file" key). */
static void test_summary_names_any_path(void **state) {
  (void)state;
  char *sub = strdup(rh_test_path(tmpdir, "caf\xe9"));
  assert_int_equal(mkdir(sub, 0777), 0);
  char *src = rh_test_slurp("scenarios/default.yaml");
  FILE *f = fopen(rh_test_path(sub, "s.yaml"), "w");
  fputs(src, f);
  fclose(f);
  free(src);
  char *scenario = strdup(rh_test_path(sub, "s.yaml")), *out = strdup(rh_test_path(tmpdir, "d5"));
  assert_int_equal(rh_test_spawn_expect((char *const[]){RH_BINARY, "run", scenario, "--out", out,
                                                        "--no-what-if", NULL},
                                        "/dev/null", 0),
                   0);
  json_t *root = json_load_file(rh_test_path(out, "summary.json"), 0, NULL);
  assert_non_null(root);
  const char *file = json_string_value(json_object_get(root, "file"));
  assert_non_null(file);
  assert_non_null(strstr(file, "/caf\\xe9/s.yaml"));
  json_decref(root);
  free(scenario);
  free(out);
  free(sub);
}

/* An --out that cannot be written is found before the work, not after it: exit 2, nothing run
 * (stdout empty), for run, collective and sweep alike. */
static void test_unwritable_out_checked_first(void **state) {
  (void)state;
  char *file = strdup(rh_test_path(tmpdir, "a-file"));
  fclose(fopen(file, "w"));
  char *out = strdup(rh_test_path(file, "out")), *std = strdup(rh_test_path(tmpdir, "std.txt")),
       *err = strdup(rh_test_path(tmpdir, "err.txt"));
  static const char *const cmds[] = {"run", "collective", "sweep"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rh_test_spawn((char *const[]){RH_BINARY, (char *)cmds[i],
                                                   "scenarios/default.yaml", "--out", out, NULL},
                                   std, err),
                     2);
    char *o = rh_test_slurp(std), *e = rh_test_slurp(err);
    assert_string_equal(o, "");
    assert_non_null(strstr(e, "is not a directory"));
    free(o);
    free(e);
  }
  free(file);
  free(out);
  free(std);
  free(err);
}

/* An --out under a file system that takes no new entry (/proc), which the permission bits do not
 * tell (root passes them everywhere): found before the work too, exit 2, nothing run. */
static void test_out_where_nothing_can_be_made(void **state) {
  (void)state;
  char *std = strdup(rh_test_path(tmpdir, "std.txt"));
  char *err = strdup(rh_test_path(tmpdir, "err.txt"));
  static const char *const cmds[] = {"run", "collective", "sweep"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(rh_test_spawn((char *const[]){RH_BINARY, (char *)cmds[i],
                                                   "scenarios/default.yaml", "--out",
                                                   "/proc/nope/x", NULL},
                                   std, err),
                     2);
    char *o = rh_test_slurp(std), *e = rh_test_slurp(err);
    assert_string_equal(o, "");
    assert_non_null(strstr(e, "cannot write into /proc/nope/x: cannot create anything in /proc"));
    free(o);
    free(e);
  }
  free(std);
  free(err);
}

/* An empty --out and one that is a symbolic link to nothing are bad input too: exit 2 before the
 * work, for run, collective and sweep, and nothing made where the link points. */
static void test_empty_and_dangling_out(void **state) {
  (void)state;
  char *link = strdup(rh_test_path(tmpdir, "dangling")), *target = strdup(rh_test_path(tmpdir, "nowhere"));
  assert_int_equal(symlink(target, link), 0);
  char *std = strdup(rh_test_path(tmpdir, "std.txt")), *err = strdup(rh_test_path(tmpdir, "err.txt"));
  static const char *const cmds[] = {"run", "collective", "sweep"};
  for (int i = 0; i < 6; i++) {
    const char *out = i < 3 ? "" : link;
    assert_int_equal(rh_test_spawn((char *const[]){RH_BINARY, (char *)cmds[i % 3],
                                                   "scenarios/default.yaml", "--out", (char *)out,
                                                   NULL},
                                   std, err),
                     2);
    char *o = rh_test_slurp(std), *e = rh_test_slurp(err);
    assert_string_equal(o, "");
    assert_non_null(strstr(e, i < 3 ? "the output directory is an empty name"
                                    : "is a symbolic link to"));
    free(o);
    free(e);
  }
  assert_false(exists(target, NULL));
  unlink(link);
  free(link);
  free(target);
  free(std);
  free(err);
}

/* A run into a folder an earlier run used removes that run's samples-rank<R>.csv (this one records
 * none), as it does its params.bin; a file of any other name stays. */
static void test_earlier_samples_removed(void **state) {
  (void)state;
  char *out = strdup(rh_test_path(tmpdir, "again"));
  assert_int_equal(mkdir(out, 0777), 0);
  static const char *const old[] = {"samples-rank0.csv", "samples-rank12.csv"};
  static const char *const kept[] = {"samples-rank0.csv.bak", "samples-rankX.csv", "notes.txt"};
  for (int i = 0; i < 2; i++) fclose(fopen(rh_test_path(out, old[i]), "w"));
  for (int i = 0; i < 3; i++) fclose(fopen(rh_test_path(out, kept[i]), "w"));
  assert_int_equal(rh_test_spawn((char *const[]){RH_BINARY, "run", "scenarios/default.yaml",
                                                 "--no-what-if", "--out", out, NULL},
                                 "/dev/null", "/dev/null"),
                   0);
  assert_true(exists(out, "summary.json"));
  for (int i = 0; i < 2; i++) assert_false(exists(out, old[i]));
  for (int i = 0; i < 3; i++) assert_true(exists(out, kept[i]));
  free(out);
}

/* summary.json names the network model that timed the run, as the console does: it said "exact"
 * for the nccl model, and `rehearsal plot` titles its figures from it. */
static void test_summary_names_network_model(void **state) {
  (void)state;
  static const char *const models[] = {"exact", "realistic", "nccl"};
  for (int i = 0; i < 3; i++) {
    char set[64];
    snprintf(set, sizeof set, "cluster.network_model=%s", models[i]);
    char *out = strdup(rh_test_path(tmpdir, models[i]));
    assert_int_equal(rh_test_spawn((char *const[]){RH_BINARY, "run", "scenarios/default.yaml",
                                                   "--set", set, "--set", "data.train_samples=2048",
                                                   "--no-what-if", "--out", out, NULL},
                                   "/dev/null", NULL),
                     0);
    json_t *root = json_load_file(rh_test_path(out, "summary.json"), 0, NULL);
    assert_non_null(root);
    json_t *model = json_object_get(json_object_get(root, "cluster"), "network_model");
    assert_string_equal(json_string_value(model), models[i]);
    /* the buckets' prices say which model gave them: the realistic network (SimGrid's LV08) has
     * no cost formula, and its buckets are the exact model's, which they said they were not */
    json_t *bucket = json_array_get(json_object_get(root, "buckets"), 0);
    assert_non_null(bucket);
    assert_string_equal(json_string_value(json_object_get(bucket, "priced_by")),
                        i == 2 ? "nccl" : "exact");
    json_decref(root);
    free(out);
  }
}

/* 10^8 timing-only steps: their records take the memory of the runs they came in, not of the
 * steps; steps.csv holds its first 1,000,000 rows, each step's, and the run says so in its last
 * line and in summary.json; the steady step is the mean of every step after the warm-up. */
static void test_steps_csv_of_a_long_run(void **state) {
  (void)state;
  char *scenario = strdup(rh_test_path(tmpdir, "long.yaml"));
  char *out = strdup(rh_test_path(tmpdir, "long"));
  char *std = strdup(rh_test_path(tmpdir, "long.txt"));
  FILE *f = fopen(scenario, "w");
  assert_non_null(f);
  fputs("name: long\n"
        "cluster: {nodes: 2, gpus_per_node: 4, gpu: {tflops: 2.93}, intra: {bandwidth_GBps: 20, "
        "latency_us: 0.7}, network: {nic_Gbps: 25, latency_us: 5}}\n"
        "model: {name: m, parameters: 25557032, forward_gflops_per_sample: 4.1}\n"
        "data: {train_samples: 8e8}\n"
        "recipe: {batch_per_worker: 1, epochs: 1}\n", f);
  assert_int_equal(fclose(f), 0);
  long rss = 0;
  assert_int_equal(rh_test_spawn_rss((char *const[]){RH_BINARY, "run", scenario, "--no-what-if",
                                                     "--out", out, NULL},
                                     std, NULL, &rss), 0);
  char *text = rh_test_slurp(std);
  assert_non_null(text);
  print_message("10^8 steps: %ld MiB at most\n", rss / 1024);
  const char *says[] = {"the mean of steps 11 to 100000000 (warm-up left out)",
                        "and steps.csv (its first 1000000 steps of 100000000: a row each up to "
                        "1000000)\n"};
  for (size_t i = 0; i < 2; i++)
    if (!strstr(text, says[i])) fail_msg("does not say \"%s\":\n%s", says[i], text);
  /* every row is a step's, in order, to the millionth */
  char *csv = rh_test_slurp(rh_test_path(out, "steps.csv"));
  assert_non_null(csv);
  long rows = 0, last = 0;
  for (const char *p = strchr(csv, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
    long step = strtol(p + 1, NULL, 10);
    if (step != last + 1) fail_msg("row %ld is step %ld", rows + 1, step);
    last = step;
    rows++;
  }
  assert_int_equal(rows, 1000000);
  json_error_t err;
  json_t *root = json_load_file(rh_test_path(out, "summary.json"), 0, &err);
  assert_non_null(root);
  json_t *cap = json_object_get(root, "steps_csv");
  assert_int_equal(json_integer_value(json_object_get(cap, "rows")), 1000000);
  assert_int_equal(json_integer_value(json_object_get(cap, "steps")), 100000000);
  json_t *summary = json_object_get(root, "summary");
  double steady = json_real_value(json_object_get(summary, "steady_step_ms"));
  double step = json_real_value(json_object_get(summary, "step_ms"));
  assert_true(fabs(steady - step) < 1e-6 * step); /* every step is the same */
  assert_true(rss < 512 * 1024);
  json_decref(root);
  free(csv);
  free(text);
  free(scenario);
  free(out);
  free(std);
}

/* summary.json names the model's total parameter count, as the console does: ResNet-50's
 * 25,557,032 (torchvision's published count) for the default scenario. */
static void test_summary_names_the_parameters(void **state) {
  (void)state;
  json_t *root = rh_test_run_summary("scenarios/default.yaml", rh_test_path(tmpdir, "params"));
  json_t *model = json_object_get(root, "model");
  assert_true(json_is_integer(json_object_get(model, "parameters")));
  assert_int_equal(json_integer_value(json_object_get(model, "parameters")), 25557032);
  json_decref(root);
}

/* One of a thing is said in the singular: a one-epoch run on one GPU writes 1 checkpoint. */
static void test_one_is_singular(void **state) {
  (void)state;
  char *scenario = strdup(rh_test_path(tmpdir, "one.yaml")), *std = strdup(rh_test_path(tmpdir, "one.txt"));
  FILE *f = fopen(scenario, "w");
  assert_non_null(f);
  fputs("name: one\n"
        "cluster: {nodes: 1, gpus_per_node: 1, gpu: {tflops: 14}, intra: {bandwidth_GBps: 50}}\n"
        "model: {kind: softmax, forward_gflops_per_sample: 0.0008}\n"
        "data: {train_samples: 512, validation_samples: 128, inputs: 16, classes: 4}\n"
        "recipe: {batch_per_worker: 64, epochs: 1}\n", f);
  assert_int_equal(fclose(f), 0);
  char *argv[] = {RH_BINARY, "run", scenario, NULL};
  assert_int_equal(rh_test_spawn(argv, std, "/dev/null"), 0);
  char *text = rh_test_slurp(std);
  assert_non_null(text);
  const char *says[] = {"1 checkpoint, written by rank 0 alone", "# 1 GPU on 1 node,",
                        "the mean over 1 rank\n", "on all 1 rank after"};
  for (size_t i = 0; i < sizeof says / sizeof *says; i++)
    if (!strstr(text, says[i])) fail_msg("does not say \"%s\":\n%s", says[i], text);
  assert_null(strstr(text, "1 checkpoints"));
  free(text), free(scenario), free(std);
}

/* The order under shuffle: torch is DistributedSampler(dataset, num_replicas, rank)'s, as Horovod's
 * scripts build it: from the sampler's default seed 0, not recipe.seed (42, torch.manual_seed's).
 * The expected shards are PyTorch 1.13's:
 *   s = DistributedSampler(list(range(20)), num_replicas=2, rank=r); s.set_epoch(1); list(s) */
static void test_torch_order_from_sampler_seed_0(void **state) {
  (void)state;
  static const long want[2][10] = {{5, 2, 19, 1, 4, 0, 16, 15, 6, 12},
                                   {13, 11, 18, 9, 7, 14, 10, 3, 17, 8}};
  char *scenario = strdup(rh_test_path(tmpdir, "order.yaml"));
  char *out = strdup(rh_test_path(tmpdir, "order"));
  FILE *f = fopen(scenario, "w");
  assert_non_null(f);
  fputs("name: order\n"
        "cluster: {nodes: 1, gpus_per_node: 2, gpu: {tflops: 14}, intra: {bandwidth_GBps: 50}}\n"
        "model: {kind: softmax, forward_gflops_per_sample: 0.0008}\n"
        "data: {train_samples: 20, validation_samples: 4, inputs: 4, classes: 2}\n"
        "recipe: {batch_per_worker: 10, epochs: 1, seed: 42, shuffle: torch, first_epoch: 1}\n", f);
  assert_int_equal(fclose(f), 0);
  char *argv[] = {RH_BINARY, "run", scenario, "--record-samples", "--out", out, NULL};
  assert_int_equal(rh_test_spawn(argv, "/dev/null", "/dev/null"), 0);
  for (int r = 0; r < 2; r++) {
    char name[32];
    snprintf(name, sizeof name, "samples-rank%d.csv", r);
    FILE *csv = fopen(rh_test_path(out, name), "r");
    assert_non_null(csv);
    char line[128];
    assert_non_null(fgets(line, sizeof line, csv)); /* the header */
    for (int i = 0; i < 10; i++) {
      long epoch, step, rank, sample;
      assert_non_null(fgets(line, sizeof line, csv));
      assert_int_equal(sscanf(line, "%ld,%ld,%ld,%ld", &epoch, &step, &rank, &sample), 4);
      if (sample != want[r][i]) fail_msg("rank %d, draw %d: sample %ld, PyTorch's %ld", r, i, sample, want[r][i]);
    }
    fclose(csv);
  }
  free(scenario), free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_together_or_not_at_all),
      cmocka_unit_test(test_stale_temporaries_removed),
      cmocka_unit_test(test_json_text),
      cmocka_unit_test(test_remove_tree),
      cmocka_unit_test(test_summary_names_the_parameters),
      cmocka_unit_test(test_one_is_singular),
      cmocka_unit_test(test_torch_order_from_sampler_seed_0),
      cmocka_unit_test(test_summary_names_any_path),
      cmocka_unit_test(test_unwritable_out_checked_first),
      cmocka_unit_test(test_out_where_nothing_can_be_made),
      cmocka_unit_test(test_empty_and_dangling_out),
      cmocka_unit_test(test_earlier_samples_removed),
      cmocka_unit_test(test_summary_names_network_model),
      cmocka_unit_test(test_steps_csv_of_a_long_run),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
