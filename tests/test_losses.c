/*
 * test_losses.c: the losses beside the network (tool/workload/losses.h), each removed in turn from
 * tests/scenarios/good/losses.yaml at 8, 64 and 512 GPUs through `rehearsal run`, and what each
 * adds to the step set beside an independent derivation written here:
 * - the framework's work: reducer_ms_per_GB x the gradients' GB;
 * - the bucket copies: the gradients read and written twice (in, out) at the copy rate;
 * - the slowest rank: step_spread x E[max of N standard normals] x the step's compute, E[max]
 *   integrated here from the CDF form, 1 - F(x)^N above 0 and F(x)^N below, with Simpson's rule,
 *   and checked against closed forms (N = 2: 1/sqrt(pi); N = 3: 3 / (2 sqrt(pi))) and Harter's
 *   table (1961; N = 10: 1.538753);
 * - NCCL's share of the GPU: no more than s / (1 - s) of the buckets' allreduce time, the most
 *   compute it can slow, and more than nothing.
 * One GPU pays none of them.  The table it prints is docs/validation.md's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "losses.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];
static const char scenario[] = "tests/scenarios/good/losses.yaml";
static const double reducer_per_gb = 20e-3, spread = 0.01, slowdown = 0.159, copy_bw = 2985e9;

/* E[max of n standard normals] = int_0^inf (1 - F^n) dx - int_-inf^0 F^n dx, Simpson's rule */
static double cdf(double x) { return 0.5 * erfc(-x / sqrt(2)); }
static double emax(int n) {
  const int k = 40000;
  const double h = 12.0 / k;
  double above = 0, below = 0;
  for (int i = 0; i <= k; i++) {
    double w = i == 0 || i == k ? 1 : i % 2 ? 4 : 2, x = i * h;
    above += w * (1 - pow(cdf(x), n));
    below += w * pow(cdf(-x), n);
  }
  return (above - below) * h / 3;
}

static void test_expected_maximum(void **state) {
  (void)state;
  assert_true(fabs(rh_expected_max_normal(1)) < 1e-12);
  assert_true(fabs(rh_expected_max_normal(2) - 1 / sqrt(M_PI)) < 1e-6);
  assert_true(fabs(rh_expected_max_normal(3) - 1.5 / sqrt(M_PI)) < 1e-6);
  assert_true(fabs(rh_expected_max_normal(10) - 1.538753) < 2e-6);
  assert_true(fabs(emax(10) - 1.538753) < 2e-6); /* the test's own integral agrees with Harter */
  for (int n = 8; n <= 4096; n *= 8) {
    print_message("E[max of %d] %.6f (quadrature here %.6f)\n", n, rh_expected_max_normal(n), emax(n));
    assert_true(fabs(rh_expected_max_normal(n) - emax(n)) < 1e-5);
  }
}

static json_t *run(int gpus, const char *off1, const char *off2, const char *tag) {
  char dir[320], nodes[64], per[64];
  snprintf(dir, sizeof dir, "%s/%d-%s", tmpdir, gpus, tag);
  snprintf(nodes, sizeof nodes, "cluster.nodes=%d", gpus > 8 ? gpus / 8 : 1);
  snprintf(per, sizeof per, "cluster.gpus_per_node=%d", gpus > 8 ? 8 : gpus);
  char *argv[16] = {RH_BINARY, "run", (char *)scenario, "--out", dir, "--no-what-if",
                    "--set", nodes, "--set", per};
  int argc = 10;
  if (off1) {
    argv[argc++] = "--set";
    argv[argc++] = (char *)off1;
  }
  if (off2) {
    argv[argc++] = "--set";
    argv[argc++] = (char *)off2;
  }
  argv[argc] = NULL;
  assert_int_equal(rh_test_spawn_expect(argv, "/dev/null", 0), 0);
  json_error_t err;
  char path[400];
  snprintf(path, sizeof path, "%s/summary.json", dir);
  json_t *root = json_load_file(path, 0, &err);
  assert_non_null(root);
  return root;
}

static double field(json_t *root, const char *section, const char *key) {
  json_t *v = json_object_get(json_object_get(root, section), key);
  assert_true(json_is_number(v));
  return json_number_value(v);
}

static double steady(json_t *root) { return field(root, "summary", "steady_step_ms") * 1e-3; }

static void test_each_loss_alone(void **state) {
  (void)state;
  const double grads = 25557032 * 4.0; /* ResNet-50's fp32 gradients (amp keeps fp32 gradients) */
  printf("| GPUs | step (ms) | framework (ms) | bucket copies (ms) | slowest rank (ms) | NCCL's share "
         "(ms) |\n|---|---|---|---|---|---|\n");
  const int sizes[] = {8, 64, 512};
  for (int k = 0; k < 3; k++) {
    int n = sizes[k];
    json_t *all = run(n, NULL, NULL, "all");
    json_t *no_reducer = run(n, "recipe.reducer_ms_per_GB=0", NULL, "no-reducer");
    json_t *no_copies = run(n, "cluster.gpu.memory_GBps=0", NULL, "no-copies");
    json_t *no_spread = run(n, "cluster.gpu.step_spread=0", NULL, "no-spread");
    json_t *no_nccl = run(n, "cluster.gpu.nccl_slowdown=0", NULL, "no-nccl");
    double step = steady(all);
    double reducer = step - steady(no_reducer), copies = step - steady(no_copies);
    double slowest = step - steady(no_spread), nccl = step - steady(no_nccl);
    /* the derivations */
    double want_reducer = reducer_per_gb * grads / 1e9;
    double want_copies = 2 * 2 * grads / copy_bw;
    double compute = field(all, "summary", "compute_ms") * 1e-3;
    double want_slowest = spread * emax(n) * compute;
    double allreduce = field(all, "summary", "predicted_allreduce_ms") * 1e-3;
    printf("| %d | %.3f | %.3f (%.3f) | %.3f (%.3f) | %.3f (%.3f) | %.3f (at most %.3f) |\n", n,
           1e3 * step, 1e3 * reducer, 1e3 * want_reducer, 1e3 * copies, 1e3 * want_copies,
           1e3 * slowest, 1e3 * want_slowest, 1e3 * nccl, 1e3 * slowdown / (1 - slowdown) * allreduce);
    assert_true(fabs(reducer - want_reducer) <= 0.02 * want_reducer);
    assert_true(fabs(copies - want_copies) <= 0.02 * want_copies);
    assert_true(fabs(slowest - want_slowest) <= 0.02 * want_slowest);
    assert_true(nccl > 0 && nccl <= slowdown / (1 - slowdown) * allreduce * 1.001);
    /* the report names them */
    assert_true(fabs(field(all, "summary", "slowest_rank_ms") * 1e-3 - want_slowest) <=
                0.02 * want_slowest);
    assert_true(fabs(field(all, "summary", "framework_ms") * 1e-3 - want_reducer - want_copies) <=
                0.02 * (want_reducer + want_copies));
    json_decref(all);
    json_decref(no_reducer);
    json_decref(no_copies);
    json_decref(no_spread);
    json_decref(no_nccl);
  }
}

/* One GPU pays none of the losses: the same step with all of them on and all off. */
static void test_one_gpu_unchanged(void **state) {
  (void)state;
  json_t *on = run(1, NULL, NULL, "one-on");
  json_t *off = run(1, "recipe.reducer_ms_per_GB=0", "cluster.gpu.step_spread=0", "one-off");
  assert_true(steady(on) == steady(off));
  json_decref(on);
  json_decref(off);
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "losses");
}

static int teardown(void **state) {
  (void)state;
  rh_test_rmdir(tmpdir);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_expected_maximum),
      cmocka_unit_test(test_one_gpu_unchanged),
      cmocka_unit_test(test_each_loss_alone),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
