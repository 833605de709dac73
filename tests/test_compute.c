/*
 * test_compute.c: the compute model (tool/workload/compute_model.c) and the GPU shared with NCCL.
 * A kernel's time is re-derived here from the roofline's definition; a training step's compute
 * through `rehearsal run` equals the sum of its layers' kernels and the framework's overhead; and a
 * rank computing while its collective runs is slowed by exactly nccl_slowdown x the collective's
 * time (the sharing SimGrid does between the rank's work and NCCL's bounded share).  Horovod's
 * cycle: a collective starts on the next tick, and gradients ready within one cycle are fused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "compute_model.h"
#include "harness.h"
#include "run_summary.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static char tmpdir[64];

#define assert_near(a, b, rel)                                                                     \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (!(fabs(a_ - b_) <= (rel) * fabs(b_))) fail_msg("%s = %.17g, expected %.17g", #a, a_, b_);  \
  } while (0)


static void test_roofline(void **state) {
  (void)state;
  rh_gpu_model g = {.sustained = 10e12};
  /* no peak: every FLOP at the sustained rate, whatever the memory */
  assert_near(rh_compute_seconds(&g, 5e12, 1e12), 0.5, 1e-15);
  g.peak = 100e12;
  g.gemm_efficiency = 0.8;
  g.gemm_half = 10e9;
  g.memory_bw = 1e12;
  /* a GEMM of gemm_half FLOPs reaches half of the large-matrix efficiency */
  assert_near(rh_compute_seconds(&g, 10e9, 0), 10e9 / (100e12 * 0.4), 1e-15);
  /* large: close to 0.8 of the peak */
  assert_near(rh_compute_seconds(&g, 1e15, 0), 1e15 / (100e12 * 0.8 * 1e15 / (1e15 + 10e9)), 1e-15);
  /* memory-bound: bytes over bandwidth */
  assert_near(rh_compute_seconds(&g, 1e9, 8e9), 8e-3, 1e-15);
}

/* One GPU, two layers (one GEMM-bound, one memory-bound), 2 ms of framework per step. */
static void test_step_compute(void **state) {
  (void)state;
  char *file = rh_test_path(tmpdir, "roofline.yaml"), *out = rh_test_path(tmpdir, "roofline");
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fprintf(f, "name: roofline\n"
             "cluster:\n"
             "  nodes: 1\n"
             "  gpus_per_node: 1\n"
             "  gpu: {tflops: 10, peak_tflops: 100, gemm_efficiency: 0.8, gemm_half_gflop: 10,\n"
             "        memory_GBps: 1000}\n"
             "  intra: {bandwidth_GBps: 100}\n"
             "model:\n"
             "  framework_overhead_ms: 2\n"
             "  layers:\n"
             "    - {name: gemm, parameters: 1000, forward_gflops_per_sample: 1,\n"
             "       memory_MB_per_sample: 10}\n"
             "    - {name: norm, parameters: 1000, forward_gflops_per_sample: 0.01,\n"
             "       memory_MB_per_sample: 100}\n"
             "data: {train_samples: 320, validation_samples: 0}\n"
             "recipe: {batch_per_worker: 32, epochs: 1, checkpoint_every_epochs: 0}\n");
  fclose(f);
  json_t *root = rh_test_run_summary(file, out);
  double ms = json_real_value(json_object_get(json_object_get(root, "summary"), "compute_ms"));
  /* by hand: a kernel of W FLOPs and B bytes takes max(W / (100e12 x 0.8 W / (W + 10e9)), B / 1e12) */
  double t = 2e-3;
  double w[] = {32e9, 64e9, 0.32e9, 0.64e9}, b[] = {320e6, 640e6, 3.2e9, 6.4e9};
  for (int i = 0; i < 4; i++)
    t += fmax(w[i] / (100e12 * 0.8 * w[i] / (w[i] + 10e9)), b[i] / 1e12);
  print_message("step compute %.9f ms, by hand %.9f ms\n", ms, t * 1e3);
  assert_near(ms, t * 1e3, 1e-9);
  json_decref(root);
}

/* ---- priced work ---------------------------------------------------------------------------- */

static int priced_rank(rh_ctx *ctx, void *arg) {
  double *end = arg;
  /* 1e18 FLOPs that a model says take 4 ms, then 2 ms of overhead with none: the simulator spends
   * the model's seconds (at 10 TFLOP/s the FLOPs alone would take 28 hours) */
  if (rh_compute_priced(ctx, 1e18, 0.004) != RH_OK) return 1;
  if (rh_compute_priced(ctx, 0, 0.002) != RH_OK) return 1;
  if (rh_compute_priced(ctx, 1, -1) != RH_ERR_INVALID) return 1;
  if (rh_rank(ctx) == 0) *end = rh_time(ctx);
  return 0;
}

static void test_priced_compute(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(1, 2, NULL);
  rh_settings s = rh_test_settings(600);
  double *end = rh_test_shared(sizeof(double));
  assert_int_equal(rh_test_simulate(&cl, &s, priced_rank, end, NULL), 0);
  free(cl.gpus_per_node);
  assert_near(*end, 0.006, 1e-12);
}

/* ---- NCCL's share of the GPU ------------------------------------------------------------------ */

typedef struct overlap {
  double flops;
  double *compute_end, *collective_end; /* rank 0's, in shared memory */
} overlap;

static int overlap_rank(rh_ctx *ctx, void *arg) {
  overlap *o = arg;
  rh_request *req = NULL;
  if (rh_iallreduce(ctx, NULL, NULL, 64 << 20, RH_FLOAT32, RH_SUM, NULL, &req) != RH_OK) return 1;
  if (rh_compute(ctx, o->flops) != RH_OK) return 1;
  double c = rh_time(ctx);
  if (rh_wait(req) != RH_OK) return 1;
  if (rh_rank(ctx) == 0) {
    *o->compute_end = c;
    *o->collective_end = rh_time(ctx);
  }
  return 0;
}

static void run_overlap(double slowdown, double flops, double *compute_end, double *coll_end) {
  rh_cluster cl = rh_test_cluster(1, 2, NULL);
  cl.nccl_slowdown = slowdown;
  rh_settings s = rh_test_settings(600);
  double *shared = rh_test_shared(2 * sizeof(double));
  overlap o = {flops, shared, shared + 1};
  assert_int_equal(rh_test_simulate(&cl, &s, overlap_rank, &o, NULL), 0);
  *compute_end = shared[0];
  *coll_end = shared[1];
  free(cl.gpus_per_node);
}

static void test_nccl_share(void **state) {
  (void)state;
  double c, T, c0, t0, c1, t1;
  /* the collective alone (a 256 MiB ring): T */
  run_overlap(0.25, 0, &c, &T);
  /* compute longer than the collective: alone it takes W / speed; beside the collective it runs
   * at 1 - s of the speed for T, so it ends s x T later */
  double flops = 1e13 * 0.05; /* 50 ms at the test cluster's 10 TFLOP/s */
  run_overlap(0, flops, &c0, &t0);
  run_overlap(0.25, flops, &c1, &t1);
  print_message("collective %.9f s; compute alone %.9f s, beside it %.9f s\n", T, c0, c1);
  assert_true(T > 1e-3 && T < 0.75 * 0.05);
  assert_near(c0, 0.05, 1e-12);
  assert_near(c1 - c0, 0.25 * T, 1e-9);
}

/* ---- Horovod's cycle ------------------------------------------------------------------------ */

typedef struct ticked {
  double *end; /* rank 0's end of the collective */
} ticked;

static int ticked_rank(rh_ctx *ctx, void *arg) {
  ticked *k = arg;
  if (rh_compute(ctx, 1e13 * 0.003) != RH_OK) return 1; /* 3 ms */
  if (rh_allreduce(ctx, NULL, NULL, 1 << 20, RH_FLOAT32, RH_SUM, NULL) != RH_OK) return 1;
  if (rh_rank(ctx) == 0) *k->end = rh_time(ctx);
  return 0;
}

static double run_ticked(double cycle) {
  rh_cluster cl = rh_test_cluster(1, 2, NULL);
  rh_settings s = rh_test_settings(600);
  s.value[RH_SETTING_CYCLE_TIME] = cycle;
  double *end = rh_test_shared(sizeof(double));
  ticked k = {end};
  assert_int_equal(rh_test_simulate(&cl, &s, ticked_rank, &k, NULL), 0);
  free(cl.gpus_per_node);
  return *end;
}

static void test_cycle_tick(void **state) {
  (void)state;
  /* submitted at 3 ms: at once without a cycle, on the 5 ms tick with one */
  double at_once = run_ticked(0), on_tick = run_ticked(0.005);
  print_message("allreduce ends at %.9f s at once, %.9f s on the 5 ms tick\n", at_once, on_tick);
  assert_near(on_tick - at_once, 0.002, 1e-9);
}

/* Rounds: A and B submitted at 3 ms go in the 5 ms round, one after the other; C, submitted
 * while they run, starts as soon as they are done (the cycle has long passed): only the first
 * tick delays anything. */
static int rounds_rank(rh_ctx *ctx, void *arg) {
  ticked *k = arg;
  rh_request *a = NULL, *b = NULL, *c = NULL;
  if (rh_compute(ctx, 1e13 * 0.003) != RH_OK) return 1;
  if (rh_iallreduce(ctx, NULL, NULL, 256 << 20, RH_FLOAT32, RH_SUM, NULL, &a) != RH_OK) return 1;
  if (rh_iallreduce(ctx, NULL, NULL, 1 << 20, RH_FLOAT32, RH_SUM, NULL, &b) != RH_OK) return 1;
  if (rh_compute(ctx, 1e13 * 0.004) != RH_OK) return 1;
  if (rh_iallreduce(ctx, NULL, NULL, 1 << 20, RH_FLOAT32, RH_SUM, NULL, &c) != RH_OK) return 1;
  if (rh_wait(a) != RH_OK || rh_wait(b) != RH_OK || rh_wait(c) != RH_OK) return 1;
  if (rh_rank(ctx) == 0) *k->end = rh_time(ctx);
  return 0;
}

static void test_cycle_rounds(void **state) {
  (void)state;
  double end[2];
  for (int i = 0; i < 2; i++) {
    rh_cluster cl = rh_test_cluster(1, 2, NULL);
    rh_settings s = rh_test_settings(600);
    s.value[RH_SETTING_CYCLE_TIME] = i ? 0.005 : 0;
    double *shared = rh_test_shared(sizeof(double));
    ticked k = {shared};
    assert_int_equal(rh_test_simulate(&cl, &s, rounds_rank, &k, NULL), 0);
    end[i] = *shared;
    free(cl.gpus_per_node);
  }
  print_message("three allreduces end at %.9f s at once, %.9f s in rounds of 5 ms\n", end[0], end[1]);
  assert_true(end[0] > 0.0075); /* A outlasts the 7 ms of compute: C waits behind it */
  assert_near(end[1] - end[0], 0.002, 1e-9);
}

/* Four layers of 3 ms of backward each, a 5 ms cycle and no threshold to speak of: ready at 3, 6,
 * 9 and 12 ms, the cycles 0, 1, 1 and 2 make three buckets: the last layer, the middle two, the
 * first. */
static void test_cycle_buckets(void **state) {
  (void)state;
  char *file = rh_test_path(tmpdir, "cycle.yaml"), *out = rh_test_path(tmpdir, "cycle");
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  /* backward of one layer: 2 x 0.0375 GFLOP x batch 400 = 30 GFLOP = 3 ms at 10 TFLOP/s */
  fprintf(f, "name: cycle\n"
             "cluster: {nodes: 1, gpus_per_node: 2, gpu: {tflops: 10}, intra: {bandwidth_GBps: 100}}\n"
             "model:\n"
             "  layers:\n"
             "    - {name: l0, parameters: 1000, forward_gflops_per_sample: 0.0375}\n"
             "    - {name: l1, parameters: 2000, forward_gflops_per_sample: 0.0375}\n"
             "    - {name: l2, parameters: 3000, forward_gflops_per_sample: 0.0375}\n"
             "    - {name: l3, parameters: 4000, forward_gflops_per_sample: 0.0375}\n"
             "data: {train_samples: 8000, validation_samples: 0}\n"
             "recipe: {batch_per_worker: 400, epochs: 1, checkpoint_every_epochs: 0}\n"
             "collective: {fusion_threshold: 1GiB, cycle_time: 5ms}\n");
  fclose(f);
  json_t *root = rh_test_run_summary(file, out);
  json_t *b = json_object_get(root, "buckets");
  assert_int_equal(json_array_size(b), 3);
  double want[] = {4000 * 4, (3000 + 2000) * 4, 1000 * 4};
  for (int i = 0; i < 3; i++)
    assert_near(json_real_value(json_object_get(json_array_get(b, (size_t)i), "bytes")), want[i], 0);
  json_decref(root);
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "compute");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roofline),
      cmocka_unit_test(test_step_compute),
      cmocka_unit_test(test_priced_compute), cmocka_unit_test(test_nccl_share),
      cmocka_unit_test(test_cycle_tick),
      cmocka_unit_test(test_cycle_rounds),
      cmocka_unit_test(test_cycle_buckets),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
