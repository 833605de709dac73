/*
 * test_net.c: the seeds' convolutional networks (tool/workload/net).  Parameter counts against
 * the published ones; every tensor's gradient against central finite differences of the loss;
 * dropout's masks (their rate, their independence from how the batch is split, bit-identical
 * reruns); shapes that cannot be built; and the timing layers from the same definitions.
 * PyTorch judges the networks step by step in tests/torch/.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "family.h"
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double uniform(uint64_t *state, double lo, double hi) {
  return lo + (hi - lo) * ((double)(next64(state) >> 11) * 0x1p-53);
}

static rh_model build(const char *name) {
  const rh_net_spec *spec = rh_net_find(name);
  assert_non_null(spec);
  rh_model m;
  const char *why = rh_model_init_net(&m, spec, spec->channels, spec->rows, spec->cols, 10);
  if (why) fail_msg("%s: %s", name, why);
  return m;
}

/* The counts the networks' own sources print (Keras's model.summary(), or the sum of PyTorch's
 * p.numel()), and each written out layer by layer. */
static void test_published_parameters(void **state) {
  (void)state;
  static const struct {
    const char *name;
    size_t published, derived;
  } nets[] = {
      /* conv1 1x10x5x5 + 10, conv2 10x20x5x5 + 20, fc1 320x50 + 50, fc2 50x10 + 10 */
      {"mnist_net", 21840, 260 + 5020 + 16050 + 510},
      /* conv 6x1x5x5 + 6, 16x6x5x5 + 16, 400x120 + 120, 120x84 + 84, 84x10 + 10 */
      {"lenet5", 61706, 156 + 2416 + 48120 + 10164 + 850},
      /* 32x1x3x3 + 32, 64x32x3x3 + 64, 9216x128 + 128, 128x10 + 10 (keras_mnist.py's summary) */
      {"keras_mnist_cnn", 1199882, 320 + 18496 + 1179776 + 1290},
      /* 32x1x5x5 + 32, 64x32x5x5 + 64, 3136x1024 + 1024, 1024x10 + 10 */
      {"tf_mnist_cnn", 3274634, 832 + 51264 + 3212288 + 10250},
      /* 64x1x2x2 + 64, 32x64x2x2 + 32, 1568x256 + 256, 256x10 + 10 (the blog's summary) */
      {"keras_fmnist_cnn", 412778, 320 + 8224 + 401664 + 2570},
      /* 896 + 9248 + 18496 + 36928 + 2304x512 + 512 + 5130 (cifar10_cnn.py's summary) */
      {"keras_cifar10_cnn", 1250858, 896 + 9248 + 18496 + 36928 + 1180160 + 5130},
  };
  for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++) {
    rh_model m = build(nets[i].name);
    assert_int_equal(nets[i].published, nets[i].derived);
    if (m.nparams != nets[i].published)
      fail_msg("%s: %zu parameters, published %zu", nets[i].name, m.nparams, nets[i].published);
  }
  /* every shipped name is found, and its list ends */
  for (int i = 0; rh_net_names[i]; i++) assert_ptr_equal(rh_net_find(rh_net_names[i]), rh_nets[i]);
}

/* The loss in double from the float network is smooth enough for a central difference of
 * 1e-3 away from ReLU and max-pool kinks; a gradient off by a factor, a transposed GEMM or a
 * missed term is off by far more than the 3% allowed. */
static void check_gradient(const char *name, bool dropout) {
  rh_model m = build(name);
  enum { BATCH = 3 };
  uint64_t st = 99;
  float *x = malloc((size_t)BATCH * (size_t)m.inputs * sizeof *x);
  float *p = malloc(m.nparams * sizeof *p), *g = malloc(m.nparams * sizeof *g);
  assert_non_null(x);
  assert_non_null(p);
  assert_non_null(g);
  int32_t y[BATCH] = {3, 7, 1};
  for (int i = 0; i < BATCH * m.inputs; i++) x[i] = (float)uniform(&st, -1, 1);
  rh_model_init_params(&m, p, 5);
  for (int t = 1; t < m.ntensors; t += 2) /* biases away from 0, so theirs are checked too */
    for (size_t i = 0; i < m.tensors[t].count; i++)
      p[m.tensors[t].offset + i] = (float)uniform(&st, -0.1, 0.1);
  uint64_t key = dropout ? rh_net_dropout_key(3, 11) : 0;
  int c;
  double loss = rh_model_loss_grad_at(&m, p, x, y, BATCH, g, &c, key, 5);
  assert_true(isfinite(loss));
  const double h = 1e-3;
  int checked = 0, off = 0;
  double worst = 0;
  for (int t = 0; t < m.ntensors; t++) {
    size_t n = m.tensors[t].count, stride = n > 40 ? n / 40 : 1;
    for (size_t i = 0; i < n; i += stride) {
      size_t k = m.tensors[t].offset + i;
      float keep = p[k];
      p[k] = keep + (float)h;
      double up = rh_model_loss_grad_at(&m, p, x, y, BATCH, NULL, &c, key, 5);
      p[k] = keep - (float)h;
      double down = rh_model_loss_grad_at(&m, p, x, y, BATCH, NULL, &c, key, 5);
      p[k] = keep;
      double fd = (up - down) / ((double)(keep + (float)h) - (double)(keep - (float)h));
      double err = fabs(g[k] - fd), scale = fmax(fabs(fd), 1e-3);
      checked++;
      if (err > 0.03 * scale + 2e-4) {
        off++;
        if (off <= 3)
          print_message("%s %s[%zu]: analytic %.6g, finite difference %.6g\n", name,
                        m.tensors[t].name, i, (double)g[k], fd);
      }
      if (err / scale > worst && fabs(fd) > 1e-3) worst = err / scale;
    }
  }
  print_message("%s%s: %d gradients against finite differences, %d off (a kink crossed), "
                "largest relative error %.3g\n", name, dropout ? " with dropout" : "", checked,
                off, worst);
  /* a few may cross a ReLU or max-pool kink within h (7 of 254 for the Net, whose max-pools see
   * the convolutions' raw outputs); a wrong backward misses a third or more */
  assert_true(off <= checked / 25);
  free(x);
  free(p);
  free(g);
}

static void test_gradients(void **state) {
  (void)state;
  /* (the Keras Fashion-MNIST CNN pools after ReLU: with random weights a thousand values of a
   * batch lie within h of a kink, and PyTorch judges it instead, tests/torch/judge_steps.py) */
  check_gradient("lenet5", false);
  check_gradient("mnist_net", true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_published_parameters),
      cmocka_unit_test(test_gradients),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
