/*
 * test_optim.c: the optimizers against updates worked out by hand (written below as double
 * arithmetic, step by step), plain gradient descent as SGD with momentum 0, Adam's first step
 * of about lr * sign(g), and the state: its size per kind, its layout and its zero start.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "optim.h"

#include <math.h>
#include <string.h>

/* Float results against double references: float keeps about 7 digits, and a few steps of
 * arithmetic lose a few ulp more, so 1e-6 relative (with an absolute floor of 1e-7 near zero). */
static void expect_near(const float *got, const double *want, int n, const char *what) {
  for (int i = 0; i < n; i++) {
    double tol = 1e-7 + 1e-6 * fabs(want[i]);
    if (fabs((double)got[i] - want[i]) > tol)
      fail_msg("%s[%d] = %.9g, expected %.9g", what, i, (double)got[i], want[i]);
  }
}

static void test_sgd_momentum(void **state) {
  (void)state;
  rh_optimizer o;
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_SGD, 3, 0.9, 0, 0, 0, 0), RH_OK);
  float p[3] = {1.0f, -2.0f, 0.5f};
  const float g1[3] = {0.5f, -1.0f, 2.0f}, g2[3] = {-0.25f, 0.5f, 1.0f}, g3[3] = {1.0f, 0.0f, -0.5f};
  const double lr = 0.1;

  /* Step 1: buf = g1; p -= lr * buf. */
  const double buf1[3] = {0.5, -1.0, 2.0};
  const double p1[3] = {1.0 - 0.1 * 0.5, -2.0 - 0.1 * -1.0, 0.5 - 0.1 * 2.0}; /* .95 -1.9 .3 */
  rh_optimizer_step(&o, p, g1, lr);
  expect_near(o.state, buf1, 3, "sgd buf after step 1");
  expect_near(p, p1, 3, "sgd p after step 1");

  /* Step 2: buf = 0.9 * buf + g2. */
  const double buf2[3] = {0.9 * 0.5 + -0.25, 0.9 * -1.0 + 0.5, 0.9 * 2.0 + 1.0}; /* .2 -.4 2.8 */
  const double p2[3] = {p1[0] - 0.1 * buf2[0], p1[1] - 0.1 * buf2[1], p1[2] - 0.1 * buf2[2]};
  rh_optimizer_step(&o, p, g2, lr);
  expect_near(o.state, buf2, 3, "sgd buf after step 2");
  expect_near(p, p2, 3, "sgd p after step 2"); /* .93 -1.86 .02 */

  /* Step 3. */
  const double buf3[3] = {0.9 * buf2[0] + 1.0, 0.9 * buf2[1] + 0.0, 0.9 * buf2[2] - 0.5};
  const double p3[3] = {p2[0] - 0.1 * buf3[0], p2[1] - 0.1 * buf3[1], p2[2] - 0.1 * buf3[2]};
  rh_optimizer_step(&o, p, g3, lr);
  expect_near(o.state, buf3, 3, "sgd buf after step 3");      /* 1.18 -.36 2.02 */
  expect_near(p, p3, 3, "sgd p after step 3");                /* .812 -1.824 -.182 */
  assert_true(o.steps == 3.0);
  rh_optimizer_free(&o);
  assert_null(o.state);
}

/* With momentum 0 the buffer is the gradient, and the update is p -= lr * g: the same float
 * operations as plain gradient descent, so the same bits. */
static void test_sgd_plain(void **state) {
  (void)state;
  enum { N = 5 };
  rh_optimizer o;
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_SGD, N, 0.0, 0, 0, 0, 0), RH_OK);
  float p[N] = {0.3f, -1.7f, 2.5f, 0.0f, 1e-3f}, q[N];
  memcpy(q, p, sizeof p);
  const double lr = 0.037;
  for (int step = 0; step < 4; step++) {
    float g[N];
    for (int i = 0; i < N; i++) g[i] = (float)((i + 1) * (step % 2 ? -0.61 : 0.43) + 0.1 * step);
    rh_optimizer_step(&o, p, g, lr);
    for (int i = 0; i < N; i++) q[i] -= (float)lr * g[i];
    assert_memory_equal(o.state, g, sizeof g);
    assert_memory_equal(p, q, sizeof p);
  }
  rh_optimizer_free(&o);
}

static void test_adam(void **state) {
  (void)state;
  rh_optimizer o;
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADAM, 2, 0, 0.9, 0.999, 1e-8, 0), RH_OK);
  float p[2] = {1.0f, -0.5f};
  const float g1[2] = {0.2f, -3.0f}, g2[2] = {0.1f, 1.0f};
  const double lr = 0.01;

  /* Step 1: m = 0.1 g, v = 0.001 g^2; the bias corrections 1 - 0.9 and 1 - 0.999 undo those
   * factors, so p -= lr * g / (|g| + eps). */
  const double m1[2] = {0.1 * 0.2, 0.1 * -3.0};
  const double v1[2] = {0.001 * 0.2 * 0.2, 0.001 * 3.0 * 3.0};
  const double p1[2] = {1.0 - 0.01 * (m1[0] / 0.1) / (sqrt(v1[0] / 0.001) + 1e-8),
                        -0.5 - 0.01 * (m1[1] / 0.1) / (sqrt(v1[1] / 0.001) + 1e-8)};
  rh_optimizer_step(&o, p, g1, lr);
  expect_near(o.state, m1, 2, "adam m after step 1");
  expect_near(o.state + 2, v1, 2, "adam v after step 1");
  expect_near(p, p1, 2, "adam p after step 1"); /* .99 -.49 */

  /* Step 2: bias corrections 1 - 0.9^2 = 0.19 and 1 - 0.999^2 = 0.001999. */
  const double m2[2] = {0.9 * m1[0] + 0.1 * 0.1, 0.9 * m1[1] + 0.1 * 1.0};
  const double v2[2] = {0.999 * v1[0] + 0.001 * 0.1 * 0.1, 0.999 * v1[1] + 0.001 * 1.0 * 1.0};
  const double p2[2] = {p1[0] - 0.01 * (m2[0] / 0.19) / (sqrt(v2[0] / 0.001999) + 1e-8),
                        p1[1] - 0.01 * (m2[1] / 0.19) / (sqrt(v2[1] / 0.001999) + 1e-8)};
  rh_optimizer_step(&o, p, g2, lr);
  expect_near(o.state, m2, 2, "adam m after step 2");
  expect_near(o.state + 2, v2, 2, "adam v after step 2");
  expect_near(p, p2, 2, "adam p after step 2");
  assert_true(o.steps == 2.0);
  rh_optimizer_free(&o);
}

/* Adam's first step is lr * g / (|g| + eps) in magnitude, whatever the scale of g. */
static void test_adam_first_step(void **state) {
  (void)state;
  enum { N = 5 };
  const double lr = 1e-3, eps = 1e-8;
  rh_optimizer o;
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADAM, N, 0, 0.9, 0.999, eps, 0), RH_OK);
  float p[N] = {0};
  const float g[N] = {1e-3f, -5.0f, 100.0f, -2e-6f, 0.0f};
  rh_optimizer_step(&o, p, g, lr);
  for (int i = 0; i < N; i++) {
    double want = lr * fabs((double)g[i]) / (fabs((double)g[i]) + eps);
    assert_true(fabs(fabs((double)p[i]) - want) <= 1e-6 * want + 1e-12);
    if (g[i] != 0.0f) assert_true((p[i] < 0) == (g[i] > 0)); /* against the gradient */
    /* For |g| >> eps that is lr itself: p -= lr * sign(g). */
    if (fabs((double)g[i]) >= 1.0) assert_true(fabs(fabs((double)p[i]) / lr - 1.0) < 1e-6);
  }
  rh_optimizer_free(&o);
}

static void test_adadelta(void **state) {
  (void)state;
  rh_optimizer o;
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADADELTA, 2, 0, 0, 0, 1e-6, 0.9), RH_OK);
  float p[2] = {1.0f, -2.0f};
  const float g1[2] = {0.5f, -1.0f}, g2[2] = {0.25f, 2.0f};
  const double lr = 1.0;

  /* Step 1 from s = u = 0. */
  const double s1[2] = {0.1 * 0.5 * 0.5, 0.1 * 1.0 * 1.0};
  const double d1[2] = {sqrt(0.0 + 1e-6) / sqrt(s1[0] + 1e-6) * 0.5,
                        sqrt(0.0 + 1e-6) / sqrt(s1[1] + 1e-6) * -1.0};
  const double u1[2] = {0.1 * d1[0] * d1[0], 0.1 * d1[1] * d1[1]};
  const double p1[2] = {1.0 - 1.0 * d1[0], -2.0 - 1.0 * d1[1]};
  rh_optimizer_step(&o, p, g1, lr);
  expect_near(o.state, s1, 2, "adadelta s after step 1");
  expect_near(o.state + 2, u1, 2, "adadelta u after step 1");
  expect_near(p, p1, 2, "adadelta p after step 1");

  /* Step 2. */
  const double s2[2] = {0.9 * s1[0] + 0.1 * 0.25 * 0.25, 0.9 * s1[1] + 0.1 * 2.0 * 2.0};
  const double d2[2] = {sqrt(u1[0] + 1e-6) / sqrt(s2[0] + 1e-6) * 0.25,
                        sqrt(u1[1] + 1e-6) / sqrt(s2[1] + 1e-6) * 2.0};
  const double u2[2] = {0.9 * u1[0] + 0.1 * d2[0] * d2[0], 0.9 * u1[1] + 0.1 * d2[1] * d2[1]};
  const double p2[2] = {p1[0] - 1.0 * d2[0], p1[1] - 1.0 * d2[1]};
  rh_optimizer_step(&o, p, g2, lr);
  expect_near(o.state, s2, 2, "adadelta s after step 2");
  expect_near(o.state + 2, u2, 2, "adadelta u after step 2");
  expect_near(p, p2, 2, "adadelta p after step 2");
  /* The steps are a few thousandths, so check the moves themselves to 1e-4 relative too. */
  assert_true(fabs(((double)p[0] - p1[0]) / -d2[0] - 1.0) < 1e-4);
  assert_true(fabs(((double)p[1] - p1[1]) / -d2[1] - 1.0) < 1e-4);
  rh_optimizer_free(&o);
}

static void test_state(void **state) {
  (void)state;
  enum { N = 7 };
  const rh_optimizer_kind kinds[3] = {RH_OPT_SGD, RH_OPT_ADAM, RH_OPT_ADADELTA};
  const size_t counts[3] = {N, 2 * N, 2 * N};
  for (int k = 0; k < 3; k++) {
    rh_optimizer o;
    assert_int_equal(rh_optimizer_init(&o, kinds[k], N, 0.5, 0.9, 0.999, 1e-6, 0.9), RH_OK);
    assert_int_equal(rh_optimizer_state_count(&o), counts[k]);
    assert_non_null(o.state);
    assert_true(o.steps == 0.0);
    for (size_t i = 0; i < counts[k]; i++) assert_true(o.state[i] == 0.0f);
    float p[N] = {0}, g[N] = {1, 2, 3, 4, 5, 6, 7};
    rh_optimizer_step(&o, p, g, 0.1);
    assert_true(o.steps == 1.0);
    rh_optimizer_step(&o, p, g, 0.1);
    assert_true(o.steps == 2.0);
    rh_optimizer_free(&o);
    assert_null(o.state);
  }
  /* SGD keeps its n-float buffer even with momentum 0. */
  rh_optimizer o;
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_SGD, N, 0.0, 0, 0, 0, 0), RH_OK);
  assert_int_equal(rh_optimizer_state_count(&o), N);
  rh_optimizer_free(&o);
}

static void test_invalid(void **state) {
  (void)state;
  rh_optimizer o;
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_SGD, 0, 0.9, 0, 0, 0, 0), RH_ERR_INVALID);
  assert_null(o.state);
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_SGD, 4, -0.1, 0, 0, 0, 0), RH_ERR_INVALID);
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADAM, 4, 0, 1.0, 0.999, 1e-8, 0), RH_ERR_INVALID);
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADAM, 4, 0, 0.9, -0.1, 1e-8, 0), RH_ERR_INVALID);
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADAM, 4, 0, 0.9, 0.999, -1, 0), RH_ERR_INVALID);
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADADELTA, 4, 0, 0, 0, 1e-6, 1.5), RH_ERR_INVALID);
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_ADADELTA, 4, 0, 0, 0, NAN, 0.9), RH_ERR_INVALID);
  assert_int_equal(rh_optimizer_init(&o, (rh_optimizer_kind)7, 4, 0, 0, 0, 0, 0), RH_ERR_INVALID);
  /* Hyperparameters of other kinds are ignored. */
  assert_int_equal(rh_optimizer_init(&o, RH_OPT_SGD, 4, 0.9, 7.0, -3.0, -1, 9), RH_OK);
  rh_optimizer_free(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgd_momentum), cmocka_unit_test(test_sgd_plain),
      cmocka_unit_test(test_adam),         cmocka_unit_test(test_adam_first_step),
      cmocka_unit_test(test_adadelta),     cmocka_unit_test(test_state),
      cmocka_unit_test(test_invalid),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
