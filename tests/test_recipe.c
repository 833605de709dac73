/*
 * test_recipe.c: each recipe formula against values worked out by hand for 1, 2, 3, 4, 8 and 16
 * workers (MNIST's 60000 training and 10000 test images, batch 64; the LeNet recipe's 12 epochs
 * and 20000 steps), Horovod's warmup at chosen points, step decay, and the sampler's shards.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "recipe.h"
#include "train/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int sizes[6] = {1, 2, 3, 4, 8, 16};

static void test_lr_scaling(void **s) {
  (void)s;
  /* 4 GPUs per host: local_size is min(size, 4) */
  const double linear[6] = {0.01, 0.02, 0.03, 0.04, 0.08, 0.16};
  const double local[6] = {0.01, 0.02, 0.03, 0.04, 0.04, 0.04};
  for (int i = 0; i < 6; i++) {
    int local_size = sizes[i] < 4 ? sizes[i] : 4;
    assert_true(fabs(0.01 * rh_recipe_lr_factor(RH_LR_SIZE, sizes[i], local_size) - linear[i]) < 1e-15);
    assert_true(fabs(0.01 * rh_recipe_lr_factor(RH_LR_LOCAL_SIZE, sizes[i], local_size) - local[i]) < 1e-15);
    assert_true(rh_recipe_lr_factor(RH_LR_NONE, sizes[i], local_size) == 1);
  }
}

static void test_steps_per_epoch(void **s) {
  (void)s;
  /* 60000 / (64 * size), floored */
  const long divided[6] = {937, 468, 312, 234, 117, 58};
  /* ceil(ceil(60000 / size) / 64): shards of 60000, 30000, 20000, 15000, 7500, 3750 */
  const long loader[6] = {938, 469, 313, 235, 118, 59};
  const long last[6] = {32, 48, 32, 24, 12, 38}; /* shard % 64 */
  for (int i = 0; i < 6; i++) {
    assert_int_equal(rh_recipe_steps_per_epoch(RH_STEPS_DIVIDED, 60000, 64, sizes[i]), divided[i]);
    assert_int_equal(rh_recipe_steps_per_epoch(RH_STEPS_FULL, 60000, 64, sizes[i]), 937);
    assert_int_equal(rh_recipe_steps_per_epoch(RH_STEPS_LOADER, 60000, 64, sizes[i]), loader[i]);
    assert_int_equal(rh_recipe_last_batch(RH_STEPS_LOADER, 60000, 64, sizes[i]), last[i]);
    assert_int_equal(rh_recipe_last_batch(RH_STEPS_DIVIDED, 60000, 64, sizes[i]), 64);
  }
  /* CIFAR-10 workshop: (40000 // 128) // size */
  const long cifar[6] = {312, 156, 104, 78, 39, 19};
  for (int i = 0; i < 6; i++)
    assert_int_equal(rh_recipe_steps_per_epoch(RH_STEPS_DIVIDED, 40000, 128, sizes[i]), cifar[i]);
}

static void test_validation_steps(void **s) {
  (void)s;
  const long oversampled[6] = {468, 234, 156, 117, 58, 29}; /* 30000 / (64 * size) */
  const long divided[6] = {156, 78, 52, 39, 19, 9};         /* (10000 // 64) // size */
  /* each rank its shard of ceil(10000 / size) = 10000, 5000, 3334, 2500, 1250, 625 in batches */
  const long full[6] = {157, 79, 53, 40, 20, 10};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(rh_recipe_validation_steps(RH_VAL_OVERSAMPLED, 10000, 64, sizes[i]), oversampled[i]);
    assert_int_equal(rh_recipe_validation_steps(RH_VAL_DIVIDED, 10000, 64, sizes[i]), divided[i]);
    assert_int_equal(rh_recipe_validation_steps(RH_VAL_FULL, 10000, 64, sizes[i]), full[i]);
    assert_int_equal(rh_recipe_validation_steps(RH_VAL_NONE, 10000, 64, sizes[i]), 0);
  }
}

static void test_epochs_and_stop_step(void **s) {
  (void)s;
  const int epochs[6] = {12, 6, 4, 3, 2, 1};            /* ceil(12 / size) */
  const long last[6] = {20000, 10000, 6666, 5000, 2500, 1250}; /* 20000 // size */
  for (int i = 0; i < 6; i++) {
    assert_int_equal(rh_recipe_epochs(12, true, sizes[i]), epochs[i]);
    assert_int_equal(rh_recipe_epochs(12, false, sizes[i]), 12);
    assert_int_equal(rh_recipe_last_step(20000, sizes[i]), last[i]);
  }
  assert_int_equal(rh_recipe_last_step(0, 4), 0);
}

static void test_warmup(void **s) {
  (void)s;
  /* size 4, base 0.1 so initial_lr 0.4, 5 warmup epochs, 100 steps per epoch */
  rh_lr_schedule sch = {.initial_lr = 0.4, .size = 4, .warmup_epochs = 5};
  /* e = 0.01: 0.1 * (0.01 * 3 / 5 + 1) = 0.1006 */
  assert_true(fabs(rh_recipe_lr(&sch, 0, 0, 100) - 0.1006) < 1e-15);
  /* e = 2.5: 0.1 * (2.5 * 0.6 + 1) = 0.25 */
  assert_true(fabs(rh_recipe_lr(&sch, 2, 49, 100) - 0.25) < 1e-15);
  /* e = 5 at the last batch of warmup: back to initial_lr */
  assert_true(fabs(rh_recipe_lr(&sch, 4, 99, 100) - 0.4) < 1e-15);
  assert_true(rh_recipe_lr(&sch, 5, 0, 100) == 0.4);
  /* size 1: warmup leaves the lr alone */
  rh_lr_schedule one = {.initial_lr = 0.1, .size = 1, .warmup_epochs = 5};
  assert_true(fabs(rh_recipe_lr(&one, 1, 10, 100) - 0.1) < 1e-15);
  /* every size: the lr rises monotonically and reaches initial_lr */
  for (int i = 1; i < 6; i++) {
    rh_lr_schedule w = {.initial_lr = 0.1 * sizes[i], .size = sizes[i], .warmup_epochs = 3};
    double prev = 0;
    for (int e = 0; e < 3; e++)
      for (long b = 0; b < 10; b++) {
        double lr = rh_recipe_lr(&w, e, b, 10);
        assert_true(lr > prev);
        prev = lr;
      }
    assert_true(fabs(prev - 0.1 * sizes[i]) < 1e-12);
  }
}

static void test_step_decay(void **s) {
  (void)s;
  const double at[2] = {30, 60};
  rh_lr_schedule sch = {.initial_lr = 0.8, .size = 8, .warmup_epochs = 5, .decay_epochs = at,
                        .ndecay = 2, .decay_factor = 0.1};
  assert_true(rh_recipe_lr(&sch, 29, 99, 100) == 0.8);
  assert_true(fabs(rh_recipe_lr(&sch, 30, 0, 100) - 0.08) < 1e-15);
  assert_true(fabs(rh_recipe_lr(&sch, 60, 0, 100) - 0.008) < 1e-15);
}

static void test_sampler_shards(void **s) {
  (void)s;
  for (int i = 0; i < 6; i++) {
    int size = sizes[i];
    long n = 103; /* not divisible: padding repeats the start of the permutation */
    long shard = rh_sampler_shard_size(n, size);
    assert_int_equal(shard, (n + size - 1) / size);
    int *seen = calloc((size_t)n, sizeof *seen);
    long *idx = malloc((size_t)shard * sizeof *idx);
    for (int r = 0; r < size; r++) {
      assert_int_equal(rh_sampler_indices(n, size, r, 42, 3, true, idx), 0);
      for (long k = 0; k < shard; k++) {
        assert_true(idx[k] >= 0 && idx[k] < n);
        seen[idx[k]]++;
      }
    }
    long twice = 0;
    for (long k = 0; k < n; k++) {
      assert_true(seen[k] == 1 || seen[k] == 2);
      twice += seen[k] == 2;
    }
    assert_int_equal(twice, shard * size - n); /* exactly the padding */
    free(seen);
    free(idx);
  }
  /* unshuffled: rank r takes r, r + size, ... */
  long idx[4];
  rh_sampler_indices(10, 3, 1, 0, 0, false, idx);
  assert_int_equal(idx[0], 1);
  assert_int_equal(idx[1], 4);
  assert_int_equal(idx[2], 7);
  assert_int_equal(idx[3], 0); /* position 10 wraps to 0 */
  /* the order depends on the epoch and is the same on every call */
  long a[50], b[50], c[50];
  rh_sampler_indices(100, 2, 0, 7, 0, true, a);
  rh_sampler_indices(100, 2, 0, 7, 0, true, b);
  rh_sampler_indices(100, 2, 0, 7, 1, true, c);
  assert_memory_equal(a, b, sizeof a);
  assert_memory_not_equal(a, c, sizeof a);
}

/* torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist(), as PyTorch 1.13
 * prints them, and DistributedSampler's shards of the last. */
static void test_torch_order(void **s) {
  (void)s;
  static const long p10[] = {4, 1, 7, 5, 3, 9, 0, 8, 6, 2}, p7[] = {1, 0, 4, 2, 6, 5, 3};
  static const long p20[] = {8, 16, 13, 19, 9, 10, 0, 17, 4, 14, 11, 12, 18, 6, 15, 7, 3, 1, 5, 2};
  long out[20];
  assert_int_equal(rh_torch_randperm(10, 0, out), 0);
  assert_memory_equal(out, p10, sizeof p10);
  assert_int_equal(rh_torch_randperm(7, 5, out), 0);
  assert_memory_equal(out, p7, sizeof p7);
  assert_int_equal(rh_torch_randperm(20, 43, out), 0);
  assert_memory_equal(out, p20, sizeof p20);
  /* DistributedSampler(20 samples, 3 replicas, seed 40) at set_epoch(3): randperm from 43 padded
   * to 21 by its first index, rank r taking positions r, r + 3, ...:
   * list(DistributedSampler(range(20), 3, 1, seed=40)) after set_epoch(3) */
  static const long rank1[] = {16, 9, 17, 11, 6, 3, 2};
  long shard[7];
  assert_int_equal(rh_sampler_indices(20, 3, 1, 40, 3, RH_SHUFFLE_TORCH, shard), 0);
  assert_memory_equal(shard, rank1, sizeof rank1);
  static const long rank2[] = {13, 10, 4, 12, 15, 1, 8}; /* the last is the padding */
  assert_int_equal(rh_sampler_indices(20, 3, 2, 40, 3, RH_SHUFFLE_TORCH, shard), 0);
  assert_memory_equal(shard, rank2, sizeof rank2);
}

/* The lr_schedule check's expectation, Horovod's callbacks written out on their own, against
 * values worked by hand from horovod/_keras/callbacks.py: 3 workers, base lr 0.01 (0.03 scaled),
 * 10 steps an epoch, warmup 2.5 epochs, x 0.1 from epoch 5 (0-based) on.  Warmup's multiplier at
 * batch b of epoch e is 1/3 ((e + (b + 1)/10) 2/2.5 + 1); the warmup callback runs while the
 * integer epoch is below 2.5, so through all of epoch 2, where it passes the scaled lr (0.034 at
 * its last step, 1.1333 x); LearningRateScheduleCallback(start_epoch=2.5) sets 0.03 from epoch 3. */
static void test_horovod_callbacks_by_hand(void **state) {
  (void)state;
  const double decay[] = {5};
  train_horovod_lr h = {.initial_lr = 0.03, .size = 3, .warmup_epochs = 2.5, .decay_epochs = decay,
                        .ndecay = 1, .decay_factor = 0.1, .steps_per_epoch = 10};
  static const struct { int epoch; long batch; double lr; } rows[] = {
      {0, 0, 0.0108},  /* 0.01 (0.1 x 0.8 + 1) */
      {0, 9, 0.018},   /* 0.01 (1.0 x 0.8 + 1) */
      {1, 4, 0.022},   /* 0.01 (1.5 x 0.8 + 1) */
      {2, 0, 0.0268},  /* 0.01 (2.1 x 0.8 + 1) */
      {2, 9, 0.034},   /* 0.01 (3.0 x 0.8 + 1): past the scaled lr */
      {3, 0, 0.03},    /* the schedule from 2.5 on, at the start of epoch 3 */
      {4, 9, 0.03},
      {5, 0, 0.003},   /* x 0.1 from epoch 5 */
      {7, 3, 0.003},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    double got = train__horovod_lr(&h, rows[i].epoch, rows[i].batch);
    if (fabs(got - rows[i].lr) > 1e-12) {
      print_error("epoch %d batch %ld: %.17g, by hand %.17g\n", rows[i].epoch, rows[i].batch, got,
                  rows[i].lr);
      fail();
    }
  }
  /* without warmup the schedule starts at epoch 0: the scaled lr, then the decay */
  h.warmup_epochs = 0;
  assert_true(fabs(train__horovod_lr(&h, 0, 0) - 0.03) < 1e-15);
  assert_true(fabs(train__horovod_lr(&h, 6, 2) - 0.003) < 1e-15);
}

/* ---- accuracy_parity's bound ---------------------------------------------------------------- */

static uint64_t mix_state = 12345;
static double uniform01(void) { /* splitmix64: a fixed stream, so the rates below are exact */
  uint64_t z = (mix_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return ((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}
static double normal(double sd) { /* Box-Muller */
  double u = uniform01(), v = uniform01();
  return sd * sqrt(-2 * log(u > 0 ? u : 1e-300)) * cos(2 * M_PI * v);
}

/* Five baselines 90..94%: mean 92%, sd sqrt(sum of squares 10 / 4) = 1.5811 points, and
 * t(0.975, 4) = 2.776 (the t table), so the bound is 2.776 x 1.5811 x sqrt(1 + 1/5) = 4.808. */
static void test_accuracy_bound_by_hand(void **s) {
  (void)s;
  double b[5] = {0.90, 0.91, 0.92, 0.93, 0.94}, mean, sd;
  double bound = rh_accuracy_bound(b, 5, 1, &mean, &sd);
  assert_true(fabs(mean - 0.92) < 1e-12);
  assert_true(fabs(100 * sd - sqrt(10.0 / 4)) < 1e-9);
  assert_true(fabs(bound - 2.776 * sqrt(10.0 / 4) * sqrt(1.2)) < 1e-9);
  assert_true(rh_accuracy_bound(b, 5, 6, &mean, &sd) == 6); /* the configured points, wider */
  assert_true(rh_accuracy_bound(b, 1, 1, &mean, &sd) == 1); /* one seed: no spread to measure */
}

/* The check's false alarms on runs that differ only in seed.  Model: each run's final accuracy is
 * the recipe's mean plus normal noise of sd sigma, measured 0.8 to 1.4 points for the seed-001
 * recipe at 2 epochs.  A trial draws 5 baselines (the default) and one run from the same
 * distribution and raises an alarm when the run is more than the bound below the baselines' mean.
 * (mean - run) / (sd sqrt(1 + 1/n)) follows Student's t with n - 1 degrees of freedom, so the
 * prediction bound alone alarms 2.5% of the time, and max(1 point, it) less; the old check (one
 * baseline, 1 point) alarms when a normal of sd sigma sqrt(2) exceeds 1 point: 31% at 1.4, 21% at
 * 0.8.  200,000 trials: a rate's standard error is about 0.035 points of percent. */
static void test_accuracy_false_alarms(void **s) {
  (void)s;
  const double sigmas[] = {0.008, 0.014};
  for (int k = 0; k < 2; k++) {
    double sigma = sigmas[k];
    long trials = 200000, alarms = 0, old = 0;
    for (long t = 0; t < trials; t++) {
      double b[5], mean, sd;
      for (int i = 0; i < 5; i++) b[i] = 0.85 + normal(sigma);
      double run = 0.85 + normal(sigma);
      double bound = rh_accuracy_bound(b, 5, 1, &mean, &sd);
      alarms += 100 * (mean - run) > bound;
      old += 100 * (b[0] - run) > 1;
    }
    double rate = (double)alarms / trials, old_rate = (double)old / trials;
    double expect_old = 0.5 * erfc(1 / (100 * sigma * sqrt(2)) / sqrt(2));
    print_message("sd %.1f points: false alarms %.2f%% (one baseline at 1 point: %.1f%%)\n",
                  100 * sigma, 100 * rate, 100 * old_rate);
    assert_true(rate < 0.05);
    assert_true(rate <= 0.025 + 0.002); /* at most the prediction bound's own 2.5% */
    assert_true(fabs(old_rate - expect_old) < 0.005); /* the model is the one derived above */
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_lr_scaling),      cmocka_unit_test(test_steps_per_epoch),
      cmocka_unit_test(test_validation_steps), cmocka_unit_test(test_epochs_and_stop_step),
      cmocka_unit_test(test_warmup),          cmocka_unit_test(test_step_decay),
      cmocka_unit_test(test_sampler_shards),  cmocka_unit_test(test_horovod_callbacks_by_hand),
      cmocka_unit_test(test_torch_order),
      cmocka_unit_test(test_accuracy_bound_by_hand), cmocka_unit_test(test_accuracy_false_alarms),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
