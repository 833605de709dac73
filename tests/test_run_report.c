/*
 * test_run_report.c: what `rehearsal run` reports of a job, against figures worked out here: a
 * model's every gradient tensor in flight at once runs (no window of 255 requests); a run that
 * stopped on an error gives no performance figure; the baseline "without communication" is the
 * GPUs' own work whatever the collectives' settings; no collective runs for nothing and one GPU
 * waits for no one; a relaunched job's step, efficiency and failures are three figures; a model
 * of many buckets lists the few that cost most.
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

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "report");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* Writes a scenario file in tmpdir; its path (one of the harness's rotating buffers). */
static char *scenario(const char *name, const char *text) {
  char file[64];
  snprintf(file, sizeof file, "%s.yaml", name);
  char *path = rh_test_path(tmpdir, file);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

/* Runs `rehearsal run FILE --out tmpdir/TAG [--set S]...` (the sets NULL-terminated) expecting
 * exit `rc`; its stdout (caller frees) and summary.json (caller decrefs, NULL when none). */
#define RUN(file, tag, rc, js, ...) run(file, tag, rc, js, (const char *[]){__VA_ARGS__})
static char *run(const char *file, const char *tag, int rc, json_t **summary,
                 const char *const *sets) {
  char out[128], std[160], json[160];
  snprintf(out, sizeof out, "%s/%s", tmpdir, tag);
  snprintf(std, sizeof std, "%s.txt", out);
  char *argv[24] = {RH_BINARY, "run", (char *)file, "--out", out};
  int n = 5;
  for (int i = 0; sets[i] && n < 21; i++) argv[n++] = "--set", argv[n++] = (char *)sets[i];
  argv[n] = NULL;
  assert_int_equal(rh_test_spawn_expect(argv, std, rc), rc);
  snprintf(json, sizeof json, "%s/summary.json", out);
  json_error_t err;
  *summary = json_load_file(json, 0, &err);
  char *text = rh_test_slurp(std);
  assert_non_null(text);
  return text;
}

static double num(json_t *root, const char *object, const char *key) {
  json_t *v = json_object_get(json_object_get(root, object), key);
  assert_true(json_is_number(v));
  return json_number_value(v);
}

static int count_lines(const char *text, const char *prefix) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, prefix)); p++) n++;
  return n;
}

/* Llama-2-7B at batch 1 makes 163 buckets, each a negotiation and an allreduce in flight (326
 * requests); ResNet-50 unfused made 174, empty ones among them; ResNet-50 on an H100 server at a 0.1 ms cycle fuses
 * few: each ran into "255 requests are in flight" before.  All
 * end with exit 0, and a run of many buckets lists at most RH_REPORT_TOP + 1 lines of them. */
static void test_many_tensors_in_flight(void **state) {
  (void)state;
  const char *sc = "name: sc\ncluster: {nodes: 1, gpus_per_node: 2, gpu: h100-sxm, intra: "
                   "{bandwidth_GBps: 450}}\nmodel: {preset: gpt2}\ndata: {train_samples: 64}\n"
                   "recipe: {batch_per_worker: 8, epochs: 1}\n";
  char *file = scenario("sc", sc);
  json_t *js;
  char *text = RUN(file, "llama", 0, &js, "model.preset=llama2-7b", "recipe.batch_per_worker=1",
                   "checks.fits_memory=false", NULL);
  assert_null(strstr(text, "in flight"));
  int buckets = (int)num(js, "summary", "buckets_per_step");
  assert_true(2 * buckets > 255);
  assert_int_equal((int)json_array_size(json_object_get(js, "buckets")), buckets);
  /* the lines that list buckets: the few that cost most and one for the rest */
  assert_true(count_lines(text, "\n  bucket ") <= 5 + 1);
  assert_true(count_lines(text, "\n  exposed ") <= 5 + 1);
  free(text);
  json_decref(js);
  text = RUN(file, "rn50", 0, &js, "model.preset=resnet50", "collective.fusion_threshold=0", NULL);
  /* every tensor with parameters its own bucket (its 161 with none, batch norms' and such, none) */
  assert_true(num(js, "summary", "buckets_per_step") > 100);
  free(text);
  json_decref(js);
  char *h100 = scenario("h100", "name: h100\ncluster: {node: dgx-h100, nodes: 1}\nmodel: {preset: "
                                "resnet50}\ndata: {train_samples: 64000}\nrecipe: {batch_per_worker: "
                                "400, epochs: 1}\ncollective: {cycle_time: 0.1ms}\n");
  text = RUN(h100, "cycle", 0, &js, NULL);
  free(text);
  json_decref(js);
}

/* A run that stopped on an error (two ranks issue different collectives) says what it had done
 * and why it stopped: no throughput, step or efficiency on the console or in summary.json. */
static void test_failed_run_gives_no_figure(void **state) {
  (void)state;
  json_t *js;
  char *text = RUN("scenarios/mistakes/mismatched-collective.yaml", "stopped", 0, &js, NULL);
  assert_non_null(strstr(text, "the run stopped on rank"));
  const char *figures[] = {"throughput", "samples/s", "scaling efficiency", "bottleneck", "what if"};
  for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) assert_null(strstr(text, figures[i]));
  assert_non_null(json_object_get(js, "error"));
  assert_null(json_object_get(js, "summary"));
  assert_null(json_object_get(js, "epochs"));
  assert_true(num(js, "done", "steps") >= 1);
  free(text);
  json_decref(js);
}

/* One GPU at 10 TFLOP/s, 1 GFLOP a sample forward, batch 10: a step's work is 3 x 10 GFLOP =
 * 3 ms.  On 8 such GPUs with NCCL taking a third of the GPU while it runs, the baseline without
 * communication is still 8 x 10 / 3 ms = 26,666.7 samples/s, whatever the cycle time: NCCL's
 * share shows in the efficiency's gap, not in the baseline. */
static void test_baseline_without_communication(void **state) {
  (void)state;
  const char *text = "name: alone\ncluster: {nodes: 2, gpus_per_node: 4, gpu: {tflops: 10, "
                     "nccl_slowdown: 0.33}, intra: {bandwidth_GBps: 20}, network: {nics_per_node: 1, nic_Gbps: 10}}\n"
                     "model:\n  layers:\n"
                     "    - {name: a, parameters: 5000000, forward_gflops_per_sample: 0.25}\n"
                     "    - {name: b, parameters: 5000000, forward_gflops_per_sample: 0.25}\n"
                     "    - {name: c, parameters: 5000000, forward_gflops_per_sample: 0.25}\n"
                     "    - {name: d, parameters: 5000000, forward_gflops_per_sample: 0.25}\n"
                     "collective: {fusion_threshold: 1}\n"
                     "data: {train_samples: 8000}\nrecipe: {batch_per_worker: 10, epochs: 1}\n";
  char *file = scenario("alone", text);
  const double want = 8 * 10 / 3e-3;
  const char *cycles[] = {"collective.cycle_time=0", "collective.cycle_time=0.1ms",
                          "collective.cycle_time=5ms"};
  for (size_t i = 0; i < sizeof cycles / sizeof cycles[0]; i++) {
    json_t *js;
    char tag[16];
    snprintf(tag, sizeof tag, "alone%zu", i);
    char *out = RUN(file, tag, 0, &js, cycles[i], NULL);
    double ideal = num(js, "summary", "ideal_samples_per_s");
    print_message("%s: without communication %.3f samples/s (expected %.3f)\n", cycles[i], ideal, want);
    assert_true(fabs(ideal - want) <= 1e-9 * want);
    /* the compute the GPUs measured has NCCL's share in it where the allreduces overlap
     * backward (at once, with no cycle to wait): more than the work alone */
    if (i == 0) assert_true(num(js, "summary", "compute_ms") > 3.0 * (1 + 1e-6));
    free(out);
    json_decref(js);
  }
}

/* Layers without parameters make no bucket (every bucket of an unfused run has bytes), and one
 * GPU runs no allreduce: it waits 0 ms for gradients and scales at 100%. */
static void test_no_collective_for_nothing(void **state) {
  (void)state;
  const char *text = "name: empty\ncluster: {nodes: 1, gpus_per_node: 2, gpu: {tflops: 10}, "
                     "intra: {bandwidth_GBps: 20}}\nmodel:\n  layers:\n"
                     "    - {name: fc1, parameters: 1000000, forward_gflops_per_sample: 0.1}\n"
                     "    - {name: relu, parameters: 0, forward_gflops_per_sample: 0.01}\n"
                     "    - {name: fc2, parameters: 1000000, forward_gflops_per_sample: 0.1}\n"
                     "data: {train_samples: 400}\nrecipe: {batch_per_worker: 10, epochs: 1}\n"
                     "collective: {fusion_threshold: 0, cycle_time: 0.1ms}\n";
  char *file = scenario("empty", text);
  json_t *js;
  char *out = RUN(file, "empty", 0, &js, NULL);
  json_t *buckets = json_object_get(js, "buckets");
  assert_int_equal((int)json_array_size(buckets), 2);
  for (size_t i = 0; i < json_array_size(buckets); i++)
    assert_true(json_number_value(json_object_get(json_array_get(buckets, i), "bytes")) > 0);
  free(out);
  json_decref(js);
  out = RUN(file, "one", 0, &js, "cluster.gpus_per_node=1", NULL);
  assert_true(num(js, "summary", "comm_wait_ms") == 0);
  assert_true(fabs(num(js, "summary", "scaling_efficiency") - 1) < 1e-12);
  free(out);
  json_decref(js);
}

/* A job relaunched from its checkpoints: its step is its compute and waits (the formula here)
 * over every step it ran, the time between steps is a figure of its own, and together they make
 * the job's time. */
static void test_relaunch_figures_apart(void **state) {
  (void)state;
  json_t *js;
  char *out = RUN("scenarios/failures/relaunch-from-checkpoint.yaml", "relaunch", 0, &js, NULL);
  double step = num(js, "summary", "step_ms"), compute = num(js, "summary", "compute_ms");
  double wait = num(js, "summary", "comm_wait_ms"), steps = num(js, "summary", "steps");
  double between = num(js, "summary", "between_steps_s"), total = num(js, "summary", "time_s");
  json_t *fw = json_object_get(json_object_get(js, "summary"), "framework_ms");
  json_t *slow = json_object_get(json_object_get(js, "summary"), "slowest_rank_ms");
  double parts = compute + wait + (fw ? json_number_value(fw) : 0) + (slow ? json_number_value(slow) : 0);
  print_message("step %.6f ms = %.6f ms of parts; %.3f s between steps of %.3f s\n", step, parts,
                between, total);
  assert_true(fabs(step - parts) <= 1e-6 * step);
  assert_true(between > 0);
  assert_true(fabs(steps * step / 1e3 + between - total) <= 1e-6 * total);
  /* every step the job ran counts, those run again after the relaunch too: the step is the
   * steady step of steps.csv (each step of this model the same, warm-up or not) */
  double steady = num(js, "summary", "steady_step_ms");
  assert_true(fabs(step - steady) <= 0.02 * steady);
  assert_non_null(strstr(out, "\n  between "));
  free(out);
  json_decref(js);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_many_tensors_in_flight),
      cmocka_unit_test(test_failed_run_gives_no_figure),
      cmocka_unit_test(test_baseline_without_communication),
      cmocka_unit_test(test_no_collective_for_nothing),
      cmocka_unit_test(test_relaunch_figures_apart),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
