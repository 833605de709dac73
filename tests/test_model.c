/*
 * test_model.c: the small real models.  Tensor layout and sizes, deterministic initialisation,
 * the backward pass against central finite differences of a double-precision reference forward,
 * batch means of the loss and gradient, evaluate against loss_grad, and a short training run that
 * must lower the loss and raise the accuracy.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------------------------- */

/* splitmix64, for test inputs; the state lives in the caller. */
static uint64_t next64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A uniform value in [lo, hi). */
static double uniform(uint64_t *state, double lo, double hi) {
  return lo + (hi - lo) * ((double)(next64(state) >> 11) * 0x1p-53);
}

/* A random batch: x uniform in [-1, 1), labels uniform over the classes. */
static void random_batch(uint64_t *state, int batch, int inputs, int classes, float *x, int32_t *y) {
  for (int i = 0; i < batch * inputs; i++) x[i] = (float)uniform(state, -1.0, 1.0);
  for (int b = 0; b < batch; b++) y[b] = (int32_t)(next64(state) % (uint64_t)classes);
}

/* Initial parameters from init_params, with biases made non-zero so that their gradients are
 * checked too.  The returned array is owned by the caller (free). */
static float *test_params(const rh_model *m, uint64_t seed) {
  float *p = malloc(m->nparams * sizeof *p);
  assert_non_null(p);
  rh_model_init_params(m, p, seed);
  uint64_t state = seed ^ 0x5555u;
  for (int t = 1; t < m->ntensors; t += 2)
    for (size_t i = 0; i < m->tensors[t].count; i++)
      p[m->tensors[t].offset + i] = (float)uniform(&state, -0.5, 0.5);
  return p;
}

/* The mean cross-entropy computed entirely in double, independently of model.c; the layout is
 * taken from the tensor table.  *min_pre receives the smallest |pre-activation| of the hidden
 * layer (infinity for softmax regression), so that callers can tell whether a finite difference
 * of step h may cross a ReLU kink. */
static double ref_loss(const rh_model *m, const double *p, const float *x, const int32_t *y,
                       int batch, double *min_pre) {
  int nin = m->inputs, hid = m->hidden, nout = m->classes;
  double *h = malloc((size_t)(hid > 0 ? hid : 1) * sizeof *h);
  double *z = malloc((size_t)nout * sizeof *z);
  assert_non_null(h);
  assert_non_null(z);
  *min_pre = INFINITY;
  double total = 0.0;
  for (int b = 0; b < batch; b++) {
    const float *xb = x + (size_t)b * (size_t)nin;
    if (m->kind == RH_MODEL_SOFTMAX) {
      const double *w = p + m->tensors[0].offset, *bias = p + m->tensors[1].offset;
      for (int k = 0; k < nout; k++) {
        double s = bias[k];
        for (int i = 0; i < nin; i++) s += w[k * nin + i] * xb[i];
        z[k] = s;
      }
    } else {
      const double *w1 = p + m->tensors[0].offset, *b1 = p + m->tensors[1].offset;
      const double *w2 = p + m->tensors[2].offset, *b2 = p + m->tensors[3].offset;
      for (int j = 0; j < hid; j++) {
        double s = b1[j];
        for (int i = 0; i < nin; i++) s += w1[j * nin + i] * xb[i];
        if (fabs(s) < *min_pre) *min_pre = fabs(s);
        h[j] = s > 0 ? s : 0;
      }
      for (int k = 0; k < nout; k++) {
        double s = b2[k];
        for (int j = 0; j < hid; j++) s += w2[k * hid + j] * h[j];
        z[k] = s;
      }
    }
    double top = z[0];
    for (int k = 1; k < nout; k++) top = z[k] > top ? z[k] : top;
    double sum = 0.0;
    for (int k = 0; k < nout; k++) sum += exp(z[k] - top);
    total += top + log(sum) - z[y[b]];
  }
  free(h);
  free(z);
  return total / batch;
}

/* ---- layout ----------------------------------------------------------------------------------- */

static void test_layout(void **state) {
  (void)state;
  rh_model m;
  assert_int_equal(rh_model_init(&m, RH_MODEL_SOFTMAX, 5, 99, 3), RH_OK);
  assert_int_equal(m.hidden, 0);
  assert_int_equal(m.ntensors, 2);
  assert_int_equal(m.nparams, 5 * 3 + 3);
  assert_string_equal(m.tensors[0].name, "fc.weight");
  assert_int_equal(m.tensors[0].offset, 0);
  assert_int_equal(m.tensors[0].count, 15);
  assert_string_equal(m.tensors[1].name, "fc.bias");
  assert_int_equal(m.tensors[1].offset, 15);
  assert_int_equal(m.tensors[1].count, 3);
  assert_true(rh_model_forward_flops(&m) == 2.0 * 5 * 3);

  assert_int_equal(rh_model_init(&m, RH_MODEL_MLP, 5, 4, 3), RH_OK);
  assert_int_equal(m.hidden, 4);
  assert_int_equal(m.ntensors, 4);
  assert_int_equal(m.nparams, 5 * 4 + 4 + 4 * 3 + 3);
  const char *names[4] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  const size_t offsets[4] = {0, 20, 24, 36}, counts[4] = {20, 4, 12, 3};
  for (int t = 0; t < 4; t++) {
    assert_string_equal(m.tensors[t].name, names[t]);
    assert_int_equal(m.tensors[t].offset, offsets[t]);
    assert_int_equal(m.tensors[t].count, counts[t]);
  }
  assert_true(rh_model_forward_flops(&m) == 2.0 * (5 * 4 + 4 * 3));

  /* MNIST-sized MLP: 784-128-10 has 101770 parameters, as in PyTorch. */
  assert_int_equal(rh_model_init(&m, RH_MODEL_MLP, 784, 128, 10), RH_OK);
  assert_int_equal(m.nparams, 101770);

  assert_int_equal(rh_model_init(&m, RH_MODEL_SOFTMAX, 0, 0, 3), RH_ERR_INVALID);
  assert_int_equal(rh_model_init(&m, RH_MODEL_SOFTMAX, 5, 0, 0), RH_ERR_INVALID);
  assert_int_equal(rh_model_init(&m, RH_MODEL_MLP, 5, 0, 3), RH_ERR_INVALID);
  assert_int_equal(rh_model_init(&m, RH_MODEL_MLP, 5, -2, 3), RH_ERR_INVALID);
  assert_int_equal(rh_model_init(&m, RH_MODEL_MLP, -1, 4, 3), RH_ERR_INVALID);
}

/* ---- initialisation --------------------------------------------------------------------------- */

static void test_init_params(void **state) {
  (void)state;
  rh_model m;
  assert_int_equal(rh_model_init(&m, RH_MODEL_MLP, 50, 20, 10), RH_OK);
  float *a = malloc(m.nparams * sizeof *a), *b = malloc(m.nparams * sizeof *b);
  float *c = malloc(m.nparams * sizeof *c);
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(c);
  rh_model_init_params(&m, a, 42);
  rh_model_init_params(&m, b, 42);
  rh_model_init_params(&m, c, 43);
  assert_memory_equal(a, b, m.nparams * sizeof *a);
  /* Another seed changes (almost) every weight; the biases are 0 under both. */
  size_t differ = 0, weights = m.tensors[0].count + m.tensors[2].count;
  for (size_t i = 0; i < m.nparams; i++) differ += a[i] != c[i];
  assert_true(differ > weights * 99 / 100 && differ <= weights);

  for (int t = 0; t < m.ntensors; t++) {
    const rh_tensor_desc *td = &m.tensors[t];
    if (t % 2 == 1) {
      for (size_t i = 0; i < td->count; i++) assert_true(a[td->offset + i] == 0.0f);
      continue;
    }
    double bound = 1.0 / sqrt(t == 0 ? 50.0 : 20.0);
    double lo = INFINITY, hi = -INFINITY, mean = 0.0;
    for (size_t i = 0; i < td->count; i++) {
      double w = a[td->offset + i];
      assert_true(fabs(w) <= (double)(float)bound);
      lo = w < lo ? w : lo;
      hi = w > hi ? w : hi;
      mean += w / (double)td->count;
    }
    /* The values fill the interval: the extremes come close to the bounds, the mean near 0. */
    assert_true(lo < -0.9 * bound && hi > 0.9 * bound);
    assert_true(fabs(mean) < 0.1 * bound);
  }
  free(a);
  free(b);
  free(c);
}

/* ---- gradient check --------------------------------------------------------------------------- */

/* Compares every component of loss_grad's float gradient with a central difference of ref_loss in
 * double at the same (float) parameters.  With h = 1e-6 the difference quotient is accurate to
 * about 1e-9 (rounding 1e-16 / h plus truncation h^2), so what remains is the float rounding of
 * the analytic gradient: a few ulp of the accumulated terms.  The largest error measured is
 * about 6e-8 with gradients up to 0.4 (printed below); the tolerance 5e-7 + 1e-5 * |g| leaves a
 * margin of about 10x, yet a wrong term (a missing factor, a transposed index) gives errors of
 * the order of the gradient itself, 1e-2 and more. */
static void check_gradient(rh_model_kind kind, int inputs, int hidden, int classes, uint64_t seed) {
  rh_model m;
  assert_int_equal(rh_model_init(&m, kind, inputs, hidden, classes), RH_OK);
  enum { BATCH = 5 };
  float x[BATCH * 16];
  int32_t y[BATCH];
  assert_true(inputs <= 16);
  uint64_t st = seed;
  random_batch(&st, BATCH, inputs, classes, x, y);
  float *p = test_params(&m, seed);
  float *g = malloc(m.nparams * sizeof *g);
  double *pd = malloc(m.nparams * sizeof *pd);
  assert_non_null(g);
  assert_non_null(pd);
  for (size_t i = 0; i < m.nparams; i++) pd[i] = p[i];

  int correct;
  double loss = rh_model_loss_grad(&m, p, x, y, BATCH, g, &correct);
  double min_pre;
  double ref = ref_loss(&m, pd, x, y, BATCH, &min_pre);
  assert_true(fabs(loss - ref) < 1e-5 * (1.0 + ref));

  const double h = 1e-6;
  /* A central difference is only valid if no ReLU pre-activation lies within the step's reach;
   * the change of a pre-activation is at most h * (1 + sum |x|) <= h * (1 + inputs). */
  assert_true(min_pre > h * (1.0 + inputs) * 10.0);
  double max_err = 0.0, max_g = 0.0;
  for (size_t i = 0; i < m.nparams; i++) {
    double keep = pd[i], dummy;
    pd[i] = keep + h;
    double up = ref_loss(&m, pd, x, y, BATCH, &dummy);
    pd[i] = keep - h;
    double down = ref_loss(&m, pd, x, y, BATCH, &dummy);
    pd[i] = keep;
    double fd = (up - down) / (2.0 * h);
    double err = fabs(g[i] - fd);
    if (err > max_err) max_err = err;
    if (fabs(fd) > max_g) max_g = fabs(fd);
    if (err > 5e-7 + 1e-5 * fabs(fd))
      fail_msg("%s param %zu: analytic %.9g, finite difference %.9g",
               kind == RH_MODEL_MLP ? "mlp" : "softmax", i, (double)g[i], fd);
  }
  print_message("%s: %zu parameters, max |grad - finite difference| = %.3g (max |grad| %.3g, "
                "min |pre-activation| %.3g)\n",
                kind == RH_MODEL_MLP ? "mlp" : "softmax", m.nparams, max_err, max_g, min_pre);
  free(p);
  free(g);
  free(pd);
}

static void test_gradient_softmax(void **state) {
  (void)state;
  check_gradient(RH_MODEL_SOFTMAX, 6, 0, 4, 11);
  check_gradient(RH_MODEL_SOFTMAX, 16, 0, 10, 12);
}

static void test_gradient_mlp(void **state) {
  (void)state;
  check_gradient(RH_MODEL_MLP, 6, 8, 4, 21);
  check_gradient(RH_MODEL_MLP, 16, 12, 10, 22);
}

/* ---- batch means ------------------------------------------------------------------------------ */

static void check_batch_means(rh_model_kind kind) {
  rh_model m;
  assert_int_equal(rh_model_init(&m, kind, 7, 9, 5), RH_OK);
  enum { HALF = 4, BATCH = 2 * HALF };
  float x[BATCH * 7];
  int32_t y[BATCH];
  uint64_t st = 99;
  random_batch(&st, BATCH, 7, 5, x, y);
  float *p = test_params(&m, 5);
  float *g = malloc(m.nparams * sizeof *g), *g1 = malloc(m.nparams * sizeof *g1);
  float *g2 = malloc(m.nparams * sizeof *g2), *g3 = malloc(m.nparams * sizeof *g3);
  assert_non_null(g);
  assert_non_null(g1);
  assert_non_null(g2);
  assert_non_null(g3);

  int correct, c1, c2;
  double loss = rh_model_loss_grad(&m, p, x, y, BATCH, g, &correct);

  /* The loss of the batch is the mean of the single-sample losses, and so is the count. */
  double sum = 0.0;
  int singles_correct = 0;
  for (int b = 0; b < BATCH; b++) {
    int c;
    sum += rh_model_loss_grad(&m, p, x + b * 7, y + b, 1, g1, &c);
    singles_correct += c;
  }
  assert_true(fabs(loss - sum / BATCH) <= 1e-12 * fabs(loss));
  assert_int_equal(correct, singles_correct);

  /* The gradient of 2B samples is the mean of the gradients of the two halves.  Each sample's
   * contribution is scaled by 1/batch and rounded to float, and the sums are rounded in a
   * different grouping, so they agree to a few float ulp of the terms (measured: at most 4e-8,
   * printed below), not bit for bit. */
  double l1 = rh_model_loss_grad(&m, p, x, y, HALF, g1, &c1);
  double l2 = rh_model_loss_grad(&m, p, x + HALF * 7, y + HALF, HALF, g2, &c2);
  assert_true(fabs(loss - (l1 + l2) / 2) <= 1e-12 * fabs(loss));
  assert_int_equal(correct, c1 + c2);
  double max_err = 0.0;
  for (size_t i = 0; i < m.nparams; i++) {
    double avg = ((double)g1[i] + (double)g2[i]) / 2.0;
    double err = fabs(g[i] - avg);
    if (err > max_err) max_err = err;
    assert_true(err <= 2e-7 + 1e-6 * fabs(avg));
  }
  print_message("%s: max |grad(2B) - mean(grad(B), grad(B))| = %.3g\n",
                kind == RH_MODEL_MLP ? "mlp" : "softmax", max_err);

  /* The same call gives the same bits. */
  rh_model_loss_grad(&m, p, x, y, BATCH, g3, &c1);
  assert_memory_equal(g, g3, m.nparams * sizeof *g);

  /* A label outside [0, classes) gives NaN rather than reading out of bounds. */
  int32_t bad = 5;
  assert_true(isnan(rh_model_loss_grad(&m, p, x, &bad, 1, g3, &c1)));
  free(p);
  free(g);
  free(g1);
  free(g2);
  free(g3);
}

static void test_batch_means(void **state) {
  (void)state;
  check_batch_means(RH_MODEL_SOFTMAX);
  check_batch_means(RH_MODEL_MLP);
}

/* ---- evaluate --------------------------------------------------------------------------------- */

static void test_evaluate(void **state) {
  (void)state;
  for (int kind = RH_MODEL_SOFTMAX; kind <= RH_MODEL_MLP; kind++) {
    rh_model m;
    assert_int_equal(rh_model_init(&m, (rh_model_kind)kind, 8, 6, 3), RH_OK);
    enum { BATCH = 30 };
    float x[BATCH * 8];
    int32_t y[BATCH];
    uint64_t st = 7;
    random_batch(&st, BATCH, 8, 3, x, y);
    float *p = test_params(&m, 8);
    float *g = malloc(m.nparams * sizeof *g);
    assert_non_null(g);
    int c1 = -1, c2 = -2;
    double l1 = rh_model_loss_grad(&m, p, x, y, BATCH, g, &c1);
    double l2 = rh_model_evaluate(&m, p, x, y, BATCH, &c2);
    assert_true(l1 == l2);
    assert_int_equal(c1, c2);
    assert_true(c1 >= 0 && c1 <= BATCH);
    free(p);
    free(g);
  }
}

/* ---- training --------------------------------------------------------------------------------- */

/* Full-batch gradient descent on three well-separated blobs in 4 dimensions.  At initialisation
 * the classes are guessed about a third of the time; after 300 steps the loss must have fallen
 * by more than half and at least 90% of the samples must be right. */
static void check_training(rh_model_kind kind) {
  enum { N = 90, IN = 4, K = 3 };
  static const float centres[K][IN] = {{1.5f, 0, 0, -1}, {-1.5f, 1, 0, 0}, {0, -1.5f, 1.5f, 1}};
  float x[N * IN];
  int32_t y[N];
  uint64_t st = 2024;
  for (int i = 0; i < N; i++) {
    y[i] = i % K;
    for (int j = 0; j < IN; j++) x[i * IN + j] = centres[y[i]][j] + (float)uniform(&st, -0.7, 0.7);
  }
  rh_model m;
  assert_int_equal(rh_model_init(&m, kind, IN, 16, K), RH_OK);
  float *p = malloc(m.nparams * sizeof *p), *g = malloc(m.nparams * sizeof *g);
  assert_non_null(p);
  assert_non_null(g);
  rh_model_init_params(&m, p, 1);

  int correct0, correct;
  double loss0 = rh_model_evaluate(&m, p, x, y, N, &correct0);
  double loss = loss0;
  for (int step = 0; step < 300; step++) {
    loss = rh_model_loss_grad(&m, p, x, y, N, g, &correct);
    for (size_t i = 0; i < m.nparams; i++) p[i] -= 0.1f * g[i];
  }
  loss = rh_model_evaluate(&m, p, x, y, N, &correct);
  print_message("%s training: loss %.4f -> %.4f, correct %d/%d -> %d/%d\n",
                kind == RH_MODEL_MLP ? "mlp" : "softmax", loss0, loss, correct0, N, correct, N);
  assert_true(loss < 0.5 * loss0);
  assert_true(correct > correct0);
  assert_true(correct >= N * 9 / 10);
  free(p);
  free(g);
}

static void test_training(void **state) {
  (void)state;
  check_training(RH_MODEL_SOFTMAX);
  check_training(RH_MODEL_MLP);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),           cmocka_unit_test(test_init_params),
      cmocka_unit_test(test_gradient_softmax), cmocka_unit_test(test_gradient_mlp),
      cmocka_unit_test(test_batch_means),      cmocka_unit_test(test_evaluate),
      cmocka_unit_test(test_training),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
