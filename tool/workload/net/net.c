/*
 * net.c: the seeds' networks (see net.h): their definitions, their shapes, and forward and
 * backward over a batch.  Convolutions are im2col then one GEMM per sample; linears one GEMM per
 * batch; the GEMMs are OpenBLAS's cblas_sgemm on one thread.  Activations are float; the softmax
 * and the loss are computed in double, as model.c's.
 */
#include "net.h"

#include "family.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the networks ------------------------------------------------------------------------- */

#define CONV(nm, o, kk, pl, ph) {.kind = RH_OP_CONV, .name = nm, .out = o, .k = kk, .stride = 1, \
                                 .pad_lo = pl, .pad_hi = ph}
#define POOL(kk) {.kind = RH_OP_MAXPOOL, .k = kk}
#define RELU {.kind = RH_OP_RELU}
#define DROP(pp) {.kind = RH_OP_DROPOUT, .p = pp}
#define DROP2D(pp) {.kind = RH_OP_DROPOUT2D, .p = pp}
#define FLAT {.kind = RH_OP_FLATTEN}
#define FC(nm, o) {.kind = RH_OP_LINEAR, .name = nm, .out = o}

/* Horovod's examples/pytorch/pytorch_mnist.py Net, the network of seed 001 and of seed 004's
 * PyTorch part: relu(max_pool2d(conv1(x), 2)), relu(max_pool2d(conv2_drop(conv2(x)), 2)),
 * view(-1, 320), relu(fc1), dropout, fc2, log_softmax. */
static const rh_net_spec mnist_net = {
    .name = "mnist_net",
    .about = "Horovod's examples/pytorch/pytorch_mnist.py Net (seeds 001 and 004, PyTorch)",
    .channels = 1, .rows = 28, .cols = 28, .init = RH_INIT_TORCH,
    .ops = {CONV("conv1", 10, 5, 0, 0), POOL(2), RELU, CONV("conv2", 20, 5, 0, 0), DROP2D(0.5),
            POOL(2), RELU, FLAT, FC("fc1", 50), RELU, DROP(0.5), FC("fc2", 0)}};

/* LeNet-5 (LeCun et al. 1998) as PyTorch's tutorials write it: ReLU for tanh, max-pool for the
 * trained subsampling, 28x28 inputs padded by 2 to the paper's 32x32. */
static const rh_net_spec lenet5 = {
    .name = "lenet5",
    .about = "LeNet-5 (LeCun et al. 1998) with ReLU and max-pool, 28x28 input padded by 2",
    .channels = 1, .rows = 28, .cols = 28, .init = RH_INIT_TORCH,
    .ops = {CONV("conv1", 6, 5, 2, 2), RELU, POOL(2), CONV("conv2", 16, 5, 0, 0), RELU, POOL(2),
            FLAT, FC("fc1", 120), RELU, FC("fc2", 84), RELU, FC("fc3", 0)}};

/* Horovod's examples/keras/keras_mnist.py (seed 004, Keras): Conv2D(32, 3), Conv2D(64, 3),
 * MaxPooling2D(2), Dropout(0.25), Flatten, Dense(128), Dropout(0.5), Dense(10). */
static const rh_net_spec keras_mnist_cnn = {
    .name = "keras_mnist_cnn",
    .about = "Horovod's examples/keras/keras_mnist.py model (seed 004, Keras)",
    .channels = 1, .rows = 28, .cols = 28, .init = RH_INIT_KERAS,
    .ops = {CONV("conv2d", 32, 3, 0, 0), RELU, CONV("conv2d_1", 64, 3, 0, 0), RELU, POOL(2),
            DROP(0.25), FLAT, FC("dense", 128), RELU, DROP(0.5), FC("dense_1", 0)}};

/* Horovod's examples/tensorflow/tensorflow_mnist.py conv_model (seed 004, TensorFlow): conv 32
 * 5x5 'SAME', max-pool 2, conv 64 5x5 'SAME', max-pool 2, dense 1024, dropout 0.5, dense 10. */
static const rh_net_spec tf_mnist_cnn = {
    .name = "tf_mnist_cnn",
    .about = "Horovod's examples/tensorflow/tensorflow_mnist.py conv_model (seed 004, TensorFlow)",
    .channels = 1, .rows = 28, .cols = 28, .init = RH_INIT_KERAS,
    .ops = {CONV("conv1", 32, 5, 2, 2), RELU, POOL(2), CONV("conv2", 64, 5, 2, 2), RELU, POOL(2),
            FLAT, FC("dense", 1024), RELU, DROP(0.5), FC("dense_1", 0)}};

/* The tf.keras Fashion-MNIST CNN of TensorFlow's blog (Maynard-Reid, 2018), for seed 002's lab:
 * Conv2D(64, 2, 'same'), MaxPooling2D(2), Dropout(0.3), Conv2D(32, 2, 'same'), MaxPooling2D(2),
 * Dropout(0.3), Flatten, Dense(256), Dropout(0.5), Dense(10). */
static const rh_net_spec keras_fmnist_cnn = {
    .name = "keras_fmnist_cnn",
    .about = "the tf.keras Fashion-MNIST CNN of TensorFlow's blog (2018), for seed 002",
    .channels = 1, .rows = 28, .cols = 28, .init = RH_INIT_KERAS,
    .ops = {CONV("conv2d", 64, 2, 0, 1), RELU, POOL(2), DROP(0.3), CONV("conv2d_1", 32, 2, 0, 1),
            RELU, POOL(2), DROP(0.3), FLAT, FC("dense", 256), RELU, DROP(0.5), FC("dense_1", 0)}};

/* Keras's examples/cifar10_cnn.py, for seed 000's workshop (whose model file is not shown):
 * Conv2D(32, 3, 'same'), Conv2D(32, 3), MaxPooling2D(2), Dropout(0.25), the same with 64,
 * Flatten, Dense(512), Dropout(0.5), Dense(10). */
static const rh_net_spec keras_cifar10_cnn = {
    .name = "keras_cifar10_cnn",
    .about = "Keras's examples/cifar10_cnn.py model (for seed 000, whose model file is not shown)",
    .channels = 3, .rows = 32, .cols = 32, .init = RH_INIT_KERAS,
    .ops = {CONV("conv2d", 32, 3, 1, 1), RELU, CONV("conv2d_1", 32, 3, 0, 0), RELU, POOL(2),
            DROP(0.25), CONV("conv2d_2", 64, 3, 1, 1), RELU, CONV("conv2d_3", 64, 3, 0, 0), RELU,
            POOL(2), DROP(0.25), FLAT, FC("dense", 512), RELU, DROP(0.5), FC("dense_1", 0)}};

const rh_net_spec *const rh_nets[] = {&mnist_net,        &lenet5,           &keras_mnist_cnn,
                                      &tf_mnist_cnn,     &keras_fmnist_cnn, &keras_cifar10_cnn,
                                      NULL};

const char *const rh_net_names[] = {"mnist_net",        "lenet5",           "keras_mnist_cnn",
                                     "tf_mnist_cnn",     "keras_fmnist_cnn", "keras_cifar10_cnn",
                                     NULL};

const rh_net_spec *rh_net_find(const char *name) {
  for (int i = 0; name && rh_nets[i]; i++)
    if (strcmp(rh_nets[i]->name, name) == 0) return rh_nets[i];
  return NULL;
}

/* ---- shapes ------------------------------------------------------------------------------- */

static size_t volume(rh_net_shape s) { return (size_t)s.c * (size_t)s.h * (size_t)s.w; }

const char *rh_net_build(rh_net *n, const rh_net_spec *spec, int channels, int rows, int cols,
                         int classes) {
  static char why[160];
  memset(n, 0, sizeof *n);
  if (!spec || channels < 1 || rows < 1 || cols < 1 || classes < 1) return "no network or no input";
  n->spec = spec;
  n->classes = classes;
  while (n->nops < RH_NET_MAX_OPS && spec->ops[n->nops].kind != RH_OP_END) n->nops++;
  if (n->nops == 0) return "no operations";
  rh_net_shape x = {channels, rows, cols};
  n->inputs = volume(x);
  n->largest = n->inputs;
  size_t off = 0;
  for (int i = 0; i < n->nops; i++) {
    const rh_net_op *op = &spec->ops[i];
    n->in[i] = x;
    n->weight[i] = -1;
    size_t wcount = 0, bcount = 0;
    int fan_in = 0, fan_out = 0;
    switch (op->kind) {
    case RH_OP_CONV: {
      int h = (x.h + op->pad_lo + op->pad_hi - op->k) / op->stride + 1;
      int w = (x.w + op->pad_lo + op->pad_hi - op->k) / op->stride + 1;
      if (x.h + op->pad_lo + op->pad_hi < op->k || x.w + op->pad_lo + op->pad_hi < op->k) {
        snprintf(why, sizeof why, "%s: a %dx%d image is too small for its %dx%d convolution",
                 op->name, x.h, x.w, op->k, op->k);
        return why;
      }
      wcount = (size_t)op->out * (size_t)x.c * (size_t)op->k * (size_t)op->k;
      bcount = (size_t)op->out;
      fan_in = x.c * op->k * op->k;
      fan_out = op->out * op->k * op->k;
      x = (rh_net_shape){op->out, h, w};
      break;
    }
    case RH_OP_MAXPOOL:
      if (x.h < op->k || x.w < op->k) {
        snprintf(why, sizeof why, "op %d: a %dx%d image is too small for its %dx%d max-pool",
                 i + 1, x.h, x.w, op->k, op->k);
        return why;
      }
      x = (rh_net_shape){x.c, x.h / op->k, x.w / op->k};
      break;
    case RH_OP_FLATTEN: x = (rh_net_shape){(int)volume(x), 1, 1}; break;
    case RH_OP_LINEAR: {
      int out = op->out ? op->out : classes;
      int in = (int)volume(x);
      wcount = (size_t)out * (size_t)in;
      bcount = (size_t)out;
      fan_in = in;
      fan_out = out;
      x = (rh_net_shape){out, 1, 1};
      break;
    }
    default: break;
    }
    if (wcount) {
      if (n->ntensors + 2 > RH_NET_MAX_TENSORS) return "too many tensors";
      n->weight[i] = n->ntensors;
      for (int b = 0; b < 2; b++) {
        int t = n->ntensors++;
        snprintf(n->tensors[t].name, sizeof n->tensors[t].name, "%s.%s", op->name,
                 b ? "bias" : "weight");
        n->tensors[t].offset = off;
        n->tensors[t].count = b ? bcount : wcount;
        n->tensors[t].fan_in = fan_in;
        n->tensors[t].fan_out = fan_out;
        if (b) {
          n->tensors[t].ndim = 1;
          n->tensors[t].dims[0] = (int)bcount;
        } else if (op->kind == RH_OP_CONV) {
          n->tensors[t].ndim = 4;
          int dims[4] = {op->out, n->in[i].c, op->k, op->k};
          memcpy(n->tensors[t].dims, dims, sizeof dims);
        } else {
          n->tensors[t].ndim = 2;
          n->tensors[t].dims[0] = (int)bcount;
          n->tensors[t].dims[1] = fan_in;
        }
        off += n->tensors[t].count;
      }
    }
    n->out[i] = x;
    if (volume(x) > n->largest) n->largest = volume(x);
  }
  const rh_net_op *last = &spec->ops[n->nops - 1];
  if (last->kind != RH_OP_LINEAR || volume(x) != (size_t)classes) return "the last op is not the classifier";
  n->nparams = off;
  return NULL;
}

/* ---- initial parameters and FLOPs --------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void rh_net_init_params(const rh_net *n, float *params, uint64_t seed) {
  uint64_t state = seed;
  for (int t = 0; t < n->ntensors; t++) {
    bool bias = t % 2 == 1;
    double bound = n->spec->init == RH_INIT_KERAS
                       ? (bias ? 0 : sqrt(6.0 / (n->tensors[t].fan_in + n->tensors[t].fan_out)))
                       : 1.0 / sqrt((double)n->tensors[t].fan_in);
    float *p = params + n->tensors[t].offset;
    for (size_t i = 0; i < n->tensors[t].count; i++) {
      state += 0x9e3779b97f4a7c15ULL;
      double u = (double)(mix64(state) >> 11) * 0x1p-53;
      p[i] = (float)((2.0 * u - 1.0) * bound);
    }
  }
}

/* Forward FLOPs of op i for one sample. */
static double op_flops(const rh_net *n, int i) {
  const rh_net_op *op = &n->spec->ops[i];
  if (op->kind == RH_OP_CONV)
    return 2.0 * (double)volume(n->out[i]) * n->in[i].c * op->k * op->k;
  if (op->kind == RH_OP_LINEAR) return 2.0 * (double)volume(n->in[i]) * (double)volume(n->out[i]);
  return 0;
}

double rh_net_forward_flops(const rh_net *n) {
  double f = 0;
  for (int i = 0; i < n->nops; i++) f += op_flops(n, i);
  return f;
}

double rh_net_tensor_flops(const rh_net *n, int t) {
  for (int i = 0; i < n->nops; i++)
    if (n->weight[i] == t) return op_flops(n, i);
  return 0;
}

bool rh_net_layers(const rh_net *n, rh_layers *out) {
  static const char *const kinds[] = {"end", "conv", "maxpool", "relu", "dropout", "dropout2d",
                                      "flatten", "linear"};
  for (int i = 0; i < n->nops; i++) {
    const rh_net_op *op = &n->spec->ops[i];
    int w = n->weight[i];
    double params = w >= 0 ? (double)(n->tensors[w].count + n->tensors[w + 1].count) : 0;
    double in = (double)volume(n->in[i]), o = (double)volume(n->out[i]);
    bool ok = op->name ? rh_layers_add(out, params, op_flops(n, i), in + o + params, in, "%s", op->name)
                       : rh_layers_add(out, 0, 0, in + o, op->kind == RH_OP_FLATTEN ? 0 : o,
                                       "%s%d", kinds[op->kind], i + 1);
    if (!ok) return false;
  }
  return true;
}

/* ---- dropout ------------------------------------------------------------------------------ */

uint64_t rh_net_dropout_key(uint64_t seed, long step) {
  return mix64(seed + 0x9e3779b97f4a7c15ULL * ((uint64_t)step + 1));
}

float rh_net_keep(uint64_t key, int op, uint64_t i, double p) {
  uint64_t z = mix64(key + 0xD1B54A32D192ED03ULL * (uint64_t)(op + 1) +
                     0x9E3779B97F4A7C15ULL * (i + 1));
  double u = (double)(z >> 40) * 0x1p-24;
  return u >= p ? (float)(1.0 / (1.0 - p)) : 0.0f;
}

/* ---- forward and backward ----------------------------------------------------------------- */

double rh_softmax_cross_entropy(const float *logits, int classes, int label, double scale,
                                float *dz, int *argmax) {
  int best = 0;
  for (int k = 1; k < classes; k++)
    if (logits[k] > logits[best]) best = k;
  double top = logits[best];
  double sum = 0.0;
  for (int k = 0; k < classes; k++) sum += exp((double)logits[k] - top);
  double lse = top + log(sum);
  if (dz) {
    for (int k = 0; k < classes; k++) {
      double p = exp((double)logits[k] - lse);
      dz[k] = (float)(scale * (p - (k == label ? 1.0 : 0.0)));
    }
  }
  *argmax = best;
  return lse - (double)logits[label];
}

/* The output columns [*lo, *hi) whose input column ow * s - pad + kj lies inside 0 .. w - 1. */
static void valid_cols(int w, int ow_n, int s, int pad, int kj, int *lo, int *hi) {
  int a = pad - kj, b = w - 1 + pad - kj; /* ow * s in [a, b] */
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  *hi = b < 0 ? 0 : b / s + 1;
  if (*hi > ow_n) *hi = ow_n;
  if (*lo > *hi) *lo = *hi;
}

/* col (c*k*k x oh*ow) from one image x (c x h x w): row (c, ki, kj) holds, for each output
 * position, the input under kernel tap (ki, kj), 0 in the padding. */
static void im2col(const float *x, rh_net_shape in, rh_net_shape out, const rh_net_op *op,
                   float *col) {
  int k = op->k, s = op->stride, lo = op->pad_lo;
  size_t ohw = (size_t)out.h * (size_t)out.w;
  for (int c = 0; c < in.c; c++)
    for (int ki = 0; ki < k; ki++)
      for (int kj = 0; kj < k; kj++) {
        float *row = col + ((size_t)(c * k + ki) * (size_t)k + (size_t)kj) * ohw;
        int a, b;
        valid_cols(in.w, out.w, s, lo, kj, &a, &b);
        for (int oh = 0; oh < out.h; oh++) {
          float *dst = row + (size_t)oh * (size_t)out.w;
          int ih = oh * s - lo + ki;
          if (ih < 0 || ih >= in.h) {
            memset(dst, 0, (size_t)out.w * sizeof *dst);
            continue;
          }
          const float *src = x + ((size_t)c * (size_t)in.h + (size_t)ih) * (size_t)in.w;
          for (int ow = 0; ow < a; ow++) dst[ow] = 0.0f;
          if (s == 1) memcpy(dst + a, src + a - lo + kj, (size_t)(b - a) * sizeof *dst);
          else
            for (int ow = a; ow < b; ow++) dst[ow] = src[ow * s - lo + kj];
          for (int ow = b; ow < out.w; ow++) dst[ow] = 0.0f;
        }
      }
}

/* dx (c x h x w) += the columns of dcol folded back onto the image. */
static void col2im(const float *dcol, rh_net_shape in, rh_net_shape out, const rh_net_op *op,
                   float *dx) {
  int k = op->k, s = op->stride, lo = op->pad_lo;
  size_t ohw = (size_t)out.h * (size_t)out.w;
  for (int c = 0; c < in.c; c++)
    for (int ki = 0; ki < k; ki++)
      for (int kj = 0; kj < k; kj++) {
        const float *row = dcol + ((size_t)(c * k + ki) * (size_t)k + (size_t)kj) * ohw;
        int a, b;
        valid_cols(in.w, out.w, s, lo, kj, &a, &b);
        for (int oh = 0; oh < out.h; oh++) {
          int ih = oh * s - lo + ki;
          if (ih < 0 || ih >= in.h) continue;
          const float *src = row + (size_t)oh * (size_t)out.w;
          float *dst = dx + ((size_t)c * (size_t)in.h + (size_t)ih) * (size_t)in.w;
          for (int ow = a; ow < b; ow++) dst[ow * s - lo + kj] += src[ow];
        }
      }
}

typedef struct work {
  float *act[RH_NET_MAX_OPS], *dact[RH_NET_MAX_OPS];
  float *keep[RH_NET_MAX_OPS]; /* dropout: each unit's factor, drawn forward, reused backward */
  int32_t *idx[RH_NET_MAX_OPS]; /* max-pool: the input element each output came from */
  float *col, *dcol;
  void *mem;
} work;

/* The buffers of a batch, carved from one block that each thread keeps and grows: a step's few
 * megabytes taken and given back every call cost more in page faults than the GEMMs of a small
 * network (a third of LeNet-5's time on Fashion-MNIST). */
static _Thread_local void *kept;
static _Thread_local size_t kept_bytes;

static bool work_alloc(const rh_net *n, int batch, bool grad, work *w) {
  memset(w, 0, sizeof *w);
  size_t B = (size_t)batch, floats = 0, ints = 0, colmax = 0;
  for (int i = 0; i < n->nops; i++) {
    floats += B * volume(n->out[i]) * (grad ? 2 : 1);
    if (n->spec->ops[i].kind == RH_OP_MAXPOOL) ints += B * volume(n->out[i]);
    if (n->spec->ops[i].kind == RH_OP_DROPOUT || n->spec->ops[i].kind == RH_OP_DROPOUT2D)
      floats += B * volume(n->out[i]);
    if (n->spec->ops[i].kind == RH_OP_CONV) {
      size_t c = (size_t)n->in[i].c * (size_t)(n->spec->ops[i].k * n->spec->ops[i].k) *
                 (size_t)n->out[i].h * (size_t)n->out[i].w;
      if (c > colmax) colmax = c;
    }
  }
  floats += 2 * colmax;
  size_t bytes = floats * sizeof(float) + ints * sizeof(int32_t);
  if (bytes > kept_bytes) {
    free(kept);
    kept = malloc(bytes);
    kept_bytes = kept ? bytes : 0;
    if (!kept) return false;
  }
  w->mem = kept;
  float *f = w->mem;
  for (int i = 0; i < n->nops; i++) {
    w->act[i] = f;
    f += B * volume(n->out[i]);
    if (grad) {
      w->dact[i] = f;
      f += B * volume(n->out[i]);
    }
  }
  for (int i = 0; i < n->nops; i++)
    if (n->spec->ops[i].kind == RH_OP_DROPOUT || n->spec->ops[i].kind == RH_OP_DROPOUT2D) {
      w->keep[i] = f;
      f += B * volume(n->out[i]);
    }
  w->col = f;
  f += colmax;
  w->dcol = f;
  f += colmax;
  int32_t *p = (int32_t *)f;
  for (int i = 0; i < n->nops; i++)
    if (n->spec->ops[i].kind == RH_OP_MAXPOOL) {
      w->idx[i] = p;
      p += B * volume(n->out[i]);
    }
  return true;
}

void rh_net_release(void) {
  free(kept);
  kept = NULL;
  kept_bytes = 0;
}

static void forward_op(const rh_net *n, int i, const float *params, const float *x, int batch,
                       work *w, bool train, uint64_t key, long first) {
  const rh_net_op *op = &n->spec->ops[i];
  rh_net_shape in = n->in[i], out = n->out[i];
  size_t isz = volume(in), osz = volume(out), B = (size_t)batch;
  float *y = w->act[i];
  switch (op->kind) {
  case RH_OP_CONV: {
    const float *W = params + n->tensors[n->weight[i]].offset;
    const float *bias = params + n->tensors[n->weight[i] + 1].offset;
    int ckk = in.c * op->k * op->k, ohw = out.h * out.w;
    for (size_t b = 0; b < B; b++) {
      im2col(x + b * isz, in, out, op, w->col);
      float *yb = y + b * osz;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, out.c, ohw, ckk, 1.0f, W, ckk,
                  w->col, ohw, 0.0f, yb, ohw);
      for (int c = 0; c < out.c; c++)
        for (int j = 0; j < ohw; j++) yb[(size_t)c * (size_t)ohw + (size_t)j] += bias[c];
    }
    break;
  }
  case RH_OP_LINEAR: {
    const float *W = params + n->tensors[n->weight[i]].offset;
    const float *bias = params + n->tensors[n->weight[i] + 1].offset;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, (int)osz, (int)isz, 1.0f, x,
                (int)isz, W, (int)isz, 0.0f, y, (int)osz);
    for (size_t b = 0; b < B; b++)
      for (size_t o = 0; o < osz; o++) y[b * osz + o] += bias[o];
    break;
  }
  case RH_OP_MAXPOOL: {
    int k = op->k;
    int32_t *idx = w->idx[i];
    for (size_t b = 0; b < B; b++)
      for (int c = 0; c < out.c; c++)
        for (int oh = 0; oh < out.h; oh++)
          for (int ow = 0; ow < out.w; ow++) {
            size_t base = b * isz + (size_t)c * (size_t)in.h * (size_t)in.w;
            int32_t best = -1;
            float v = 0;
            for (int ki = 0; ki < k; ki++)
              for (int kj = 0; kj < k; kj++) {
                int32_t at = (int32_t)((oh * k + ki) * in.w + ow * k + kj);
                float u = x[base + (size_t)at];
                if (best < 0 || u > v || isnan(u)) {
                  best = at;
                  v = u;
                }
              }
            size_t o = b * osz + ((size_t)c * (size_t)out.h + (size_t)oh) * (size_t)out.w + (size_t)ow;
            y[o] = v;
            idx[o] = (int32_t)((size_t)c * (size_t)in.h * (size_t)in.w) + best; /* in the sample */
          }
    break;
  }
  case RH_OP_RELU:
    for (size_t j = 0; j < B * osz; j++) y[j] = x[j] > 0.0f ? x[j] : 0.0f;
    break;
  case RH_OP_DROPOUT:
  case RH_OP_DROPOUT2D: {
    if (!train || op->p <= 0) {
      memcpy(y, x, B * osz * sizeof *y);
      break;
    }
    size_t per = op->kind == RH_OP_DROPOUT ? 1 : (size_t)out.h * (size_t)out.w;
    size_t units = osz / per;
    float *keep = w->keep[i];
    for (size_t b = 0; b < B; b++)
      for (size_t u = 0; u < units; u++) {
        float f = rh_net_keep(key, i, ((uint64_t)first + b) * units + u, op->p);
        keep[b * units + u] = f;
        for (size_t j = 0; j < per; j++) y[b * osz + u * per + j] = x[b * osz + u * per + j] * f;
      }
    break;
  }
  case RH_OP_FLATTEN: memcpy(y, x, B * osz * sizeof *y); break;
  case RH_OP_END: break;
  }
}

/* dx from dy (w->dact[i]) for op i; its weight's gradient into grad.  dx NULL: the input's
 * gradient is not wanted (op 0). */
static void backward_op(const rh_net *n, int i, const float *params, const float *x, int batch,
                        work *w, float *grad, float *dx, bool train) {
  const rh_net_op *op = &n->spec->ops[i];
  rh_net_shape in = n->in[i], out = n->out[i];
  size_t isz = volume(in), osz = volume(out), B = (size_t)batch;
  const float *dy = w->dact[i], *y = w->act[i];
  switch (op->kind) {
  case RH_OP_CONV: {
    const float *W = params + n->tensors[n->weight[i]].offset;
    float *gW = grad + n->tensors[n->weight[i]].offset;
    float *gb = grad + n->tensors[n->weight[i] + 1].offset;
    int ckk = in.c * op->k * op->k, ohw = out.h * out.w;
    for (size_t b = 0; b < B; b++) {
      const float *dyb = dy + b * osz;
      im2col(x + b * isz, in, out, op, w->col);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, out.c, ckk, ohw, 1.0f, dyb, ohw,
                  w->col, ohw, 1.0f, gW, ckk);
      for (int c = 0; c < out.c; c++) {
        float s = 0.0f;
        for (int j = 0; j < ohw; j++) s += dyb[(size_t)c * (size_t)ohw + (size_t)j];
        gb[c] += s;
      }
      if (dx) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ckk, ohw, out.c, 1.0f, W, ckk, dyb,
                    ohw, 0.0f, w->dcol, ohw);
        memset(dx + b * isz, 0, isz * sizeof *dx);
        col2im(w->dcol, in, out, op, dx + b * isz);
      }
    }
    break;
  }
  case RH_OP_LINEAR: {
    const float *W = params + n->tensors[n->weight[i]].offset;
    float *gW = grad + n->tensors[n->weight[i]].offset;
    float *gb = grad + n->tensors[n->weight[i] + 1].offset;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)osz, (int)isz, batch, 1.0f, dy,
                (int)osz, x, (int)isz, 1.0f, gW, (int)isz);
    for (size_t b = 0; b < B; b++)
      for (size_t o = 0; o < osz; o++) gb[o] += dy[b * osz + o];
    if (dx)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, (int)isz, (int)osz, 1.0f, dy,
                  (int)osz, W, (int)isz, 0.0f, dx, (int)isz);
    break;
  }
  case RH_OP_MAXPOOL:
    if (!dx) break;
    memset(dx, 0, B * isz * sizeof *dx);
    for (size_t b = 0; b < B; b++)
      for (size_t o = 0; o < osz; o++) dx[b * isz + (size_t)w->idx[i][b * osz + o]] += dy[b * osz + o];
    break;
  case RH_OP_RELU:
    if (dx)
      for (size_t j = 0; j < B * osz; j++) dx[j] = y[j] > 0.0f ? dy[j] : 0.0f;
    break;
  case RH_OP_DROPOUT:
  case RH_OP_DROPOUT2D: {
    if (!dx) break;
    if (!train || op->p <= 0) { /* the identity forward, so backward */
      memcpy(dx, dy, B * osz * sizeof *dx);
      break;
    }
    size_t per = op->kind == RH_OP_DROPOUT ? 1 : (size_t)out.h * (size_t)out.w;
    size_t units = osz / per;
    const float *keep = w->keep[i];
    for (size_t b = 0; b < B; b++)
      for (size_t u = 0; u < units; u++) {
        float f = keep[b * units + u];
        for (size_t j = 0; j < per; j++) dx[b * osz + u * per + j] = dy[b * osz + u * per + j] * f;
      }
    break;
  }
  case RH_OP_FLATTEN:
    if (dx) memcpy(dx, dy, B * osz * sizeof *dx);
    break;
  case RH_OP_END: break;
  }
}

double rh_net_loss_grad(const rh_net *n, const float *params, const float *x, const int32_t *y,
                        int batch, float *grad, int *correct, bool train, uint64_t key,
                        long first) {
  if (grad) memset(grad, 0, n->nparams * sizeof *grad);
  if (correct) *correct = 0;
  if (batch <= 0) return 0.0;
  for (int b = 0; b < batch; b++)
    if (y[b] < 0 || y[b] >= n->classes) return NAN;
  static int threads_set;
  if (!threads_set) { /* one thread: the same bits whatever the machine's cores */
    openblas_set_num_threads(1);
    threads_set = 1;
  }
  work w;
  if (!work_alloc(n, batch, grad != NULL, &w)) return NAN;
  int last = n->nops - 1;
  for (int i = 0; i <= last; i++)
    forward_op(n, i, params, i ? w.act[i - 1] : x, batch, &w, train, key, first);

  double scale = 1.0 / (double)batch, total = 0.0;
  int right = 0;
  for (int b = 0; b < batch; b++) {
    int argmax;
    total += rh_softmax_cross_entropy(w.act[last] + (size_t)b * (size_t)n->classes, n->classes,
                                      y[b], scale,
                                      grad ? w.dact[last] + (size_t)b * (size_t)n->classes : NULL,
                                      &argmax);
    if (argmax == y[b]) right++;
  }
  if (grad)
    for (int i = last; i >= 0; i--)
      backward_op(n, i, params, i ? w.act[i - 1] : x, batch, &w, grad, i ? w.dact[i - 1] : NULL,
                  train);
  if (correct) *correct = right;
  return total / (double)batch;
}
