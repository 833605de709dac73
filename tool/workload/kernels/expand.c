/*
 * expand.c: layers into the kernels a framework runs for them (see kernels.h).  Forward walks the
 * layers in order, backward in reverse; a layer the framework fuses into the one before it (a
 * ReLU into batch norm's kernel, an activation into its GEMM's epilogue) runs no kernel of its
 * own.  Bytes are counted after fusion: an elementwise kernel reads and writes each value once,
 * batch norm reads its input twice (statistics, then the normalisation), its backward five
 * passes.  Mixed precision keeps fp32 weights: autocast casts each weight once a step and each
 * weight gradient back, and runs softmax and the loss in fp32.  The optimizer's kernels are in
 * optimizer.c.
 */
#include "kernels.h"
#include "expand.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool rh__kernel_emit(expansion *x, rh_kernel k) {
  rh_kernel_list *l = x->out;
  if (l->failed) return false;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 256;
    rh_kernel *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) {
      l->failed = true;
      return false;
    }
    l->v = v;
    l->cap = cap;
  }
  k.layer = x->layer;
  k.phase = x->phase;
  if (k.launches < 1) k.launches = 1;
  l->v[l->n++] = k;
  return true;
}

void rh__kernel_memory(expansion *x, const char *what, double bytes, int launches) {
  rh__kernel_emit(x, (rh_kernel){.what = what, .kind = RH_KERNEL_MEMORY, .bytes = bytes,
                                 .launches = launches});
}

/* `count` GEMMs of m x n x k moving `bytes` */
static void gemm(expansion *x, const char *what, double m, double n, double k, double count,
                 double bytes) {
  rh__kernel_emit(x, (rh_kernel){.what = what, .kind = RH_KERNEL_GEMM, .m = m, .n = n, .k = k,
                                 .count = count, .flops = 2 * m * n * k * count, .bytes = bytes,
                                 .winograd = x->winograd, .conv = x->conv});
}

/* A 3x3 convolution of stride 1, not grouped: cuDNN may run its forward and data gradient as
 * Winograd's F(2x2, 3x3) on the CUDA cores (kernels.h). */
static bool winograd_shape(const rh_layer_op *o) {
  return o->sub == 1 && o->kernel == 3 && o->stride == 1 && o->groups <= 1;
}

void rh_kernel_list_free(rh_kernel_list *l) {
  free(l->v);
  *l = (rh_kernel_list){0};
}

/* ---- GEMM layers: convolutions and linear layers ------------------------------------------- */

static void gemm_forward(expansion *x, const rh_layer *l) {
  const rh_layer_op *o = &l->op;
  x->conv = o->sub == 1;
  double vb = x->km->value_bytes, B = x->batch, M = B * o->m, g = o->groups > 0 ? o->groups : 1;
  double in = B * o->in, out = M * o->n, weights = o->n * o->k, ng = o->n / g;
  if (x->km->mixed && x->km->fw.amp_weight_casts && l->parameters > 0)
    rh__kernel_memory(x, "weight cast", l->parameters * (4 + vb), 1);
  bool transposes = o->sub == 1 && x->km->fw.layout == 0 && x->km->gpu.tensor_cores;
  if (transposes) rh__kernel_memory(x, "to nhwc", 2 * in * vb, 1);
  x->winograd = winograd_shape(o);
  gemm(x, o->sub == 1 ? "fprop" : "gemm", M, ng, o->k, g, (in + weights + out) * vb);
  x->winograd = false;
  if (transposes) rh__kernel_memory(x, "to nchw", 2 * out * vb, 1);
}

static void gemm_backward(expansion *x, const rh_layer *l) {
  const rh_layer_op *o = &l->op;
  x->conv = o->sub == 1;
  const rh_framework *fw = &x->km->fw;
  double vb = x->km->value_bytes, B = x->batch, M = B * o->m, g = o->groups > 0 ? o->groups : 1;
  double in = B * o->in, out = M * o->n, weights = o->n * o->k, ng = o->n / g;
  bool transposes = o->sub == 1 && fw->layout == 0 && x->km->gpu.tensor_cores;
  if (transposes) rh__kernel_memory(x, "to nhwc", 2 * (out + in) * vb, 2);
  x->winograd = winograd_shape(o);
  if (!o->first) gemm(x, "dgrad", M, o->k, ng, g, (out + weights + in) * vb);
  x->winograd = false;
  gemm(x, "wgrad", ng, o->k, M, g, (out + in + weights) * vb);
  if (transposes && !o->first) rh__kernel_memory(x, "to nchw", 2 * in * vb, 1);
  if (o->bias) rh__kernel_memory(x, "bias grad", out * vb, 1);
  if (l->parameters > 0 && x->km->mixed && fw->amp_weight_casts)
    rh__kernel_memory(x, "grad cast", l->parameters * (4 + vb), 1);
  if (l->parameters > 0 && fw->zero_grad == 1)
    rh__kernel_memory(x, "accumulate grad", l->parameters * 12, 1);
}

/* The residual stream after a transformer's projection: dropout, then the add. */
static void residual(expansion *x, const rh_layer *l, bool backward) {
  double vb = x->km->value_bytes, v = x->batch * l->op.m * l->op.n;
  bool drop = x->km->dropout > 0;
  if (x->km->fw.fuse_dropout_add) {
    const char *what = drop ? (backward ? "dropout+add bwd" : "dropout+add") : (backward ? "add bwd" : "add");
    rh__kernel_memory(x, what, v * (3 * vb + (drop ? 1 : 0)), 1);
    return;
  }
  if (drop) rh__kernel_memory(x, backward ? "dropout bwd" : "dropout", v * (2 * vb + 1), 1);
  if (!x->fuse_next_norm) rh__kernel_memory(x, backward ? "add bwd" : "add", 3 * v * vb, 1);
}

/* ---- elementwise layers ---------------------------------------------------------------------- */

static void norm(expansion *x, const rh_layer *l, bool backward, int absorbed) {
  double vb = x->km->value_bytes, v = x->batch * l->op.values;
  /* absorbed: 1 a ReLU after it, 2 a residual add and a ReLU (batch norm's fusions) */
  double extra = absorbed == 2 ? 2 : absorbed == 1 ? 1 : 0;
  if (l->op.sub == 0) {
    rh__kernel_memory(x, backward ? "bn bwd" : (absorbed ? "bn+relu" : "bn"),
                      (backward ? 5 + extra : 3 + (absorbed == 2)) * v * vb, 1);
    return;
  }
  double add = x->add_into_norm ? 1 : 0; /* the residual add fused in: one more input */
  if (!backward) {
    rh__kernel_memory(x, add ? "add+norm" : "norm", (2 + add) * v * vb, 1);
    return;
  }
  rh__kernel_memory(x, add ? "add+norm bwd" : "norm bwd", (3 + add) * v * vb, 1);
  rh__kernel_memory(x, "norm weight grad", 2 * v * vb, 1);
}

static void act(expansion *x, const rh_layer *l, bool backward) {
  double vb = x->km->value_bytes, v = x->batch * l->op.values;
  double passes = l->op.sub == 2 ? (backward ? 5 : 3) : (backward ? 3 : 2);
  rh__kernel_memory(x, backward ? "act bwd" : "act", passes * v * vb, 1);
}

static void pool(expansion *x, const rh_layer *l, bool backward) {
  double vb = x->km->value_bytes, in = x->batch * l->op.in, out = x->batch * l->op.values;
  bool max = l->op.sub == 0; /* max pooling keeps int64 indices */
  if (!backward) {
    rh__kernel_memory(x, "pool", (in + out) * vb + (max ? 8 * out : 0), 1);
    return;
  }
  rh__kernel_memory(x, "pool bwd", in * vb + out * vb + (max ? 8 * out + in * vb : 0), max ? 2 : 1);
}

static void embed(expansion *x, const rh_layer *l, bool backward) {
  double vb = x->km->value_bytes, v = x->batch * l->op.values;
  if (!backward) {
    rh__kernel_memory(x, "embedding", 3 * v * vb, 1);
    return;
  }
  /* a dense gradient of the table: zeroed, then the rows' gradients sorted and summed in */
  rh__kernel_memory(x, "embedding bwd", l->op.rows * l->op.n * 4 + 2 * v * vb + 8 * v / l->op.n, 4);
}

/* Softmax cross-entropy over `classes` for R rows: in fp32 (autocast's list), unless fused. */
static void loss(expansion *x, double rows, double classes, bool backward) {
  double vb = x->km->value_bytes, v = x->batch * rows * classes;
  if (x->km->fw.fuse_loss) { /* forward and backward in one pass, during forward */
    if (!backward) rh__kernel_memory(x, "fused cross-entropy", 2 * v * vb, 1);
    return;
  }
  if (!backward) {
    rh__kernel_memory(x, "log_softmax", v * (vb + 4), 1);
    rh__kernel_memory(x, "nll", 4 * x->batch * rows, 1);
    return;
  }
  rh__kernel_memory(x, "nll bwd", 4 * v, 2);
  rh__kernel_memory(x, "log_softmax bwd", 3 * 4 * v, 1);
  if (vb < 4) rh__kernel_memory(x, "cast", v * (4 + vb), 1);
}

/* A layer without a shape: one kernel on the roofline. */
static void other(expansion *x, const rh_layer *l, bool backward) {
  double f = l->forward_flops * x->batch * (backward ? 2 : 1);
  double bytes = l->traffic * x->km->value_bytes * x->batch * (backward ? 2 : 1);
  rh__kernel_emit(x, (rh_kernel){.what = "layer", .kind = RH_KERNEL_MEMORY, .flops = f,
                                 .bytes = bytes});
}

/* ---- the walk -------------------------------------------------------------------------------- */

static rh_layer_kind kind_at(const rh_kernel_model *km, int i) {
  return i >= 0 && i < km->nlayers ? km->layers[i].op.kind : RH_LAYER_OTHER;
}

/* How many layers after layer i its kernel absorbs (0: none). */
static int absorbs(const rh_kernel_model *km, int i) {
  const rh_layer_op *o = &km->layers[i].op;
  if (o->kind == RH_LAYER_NORM && o->sub == 0 && km->fw.fuse_bn_relu) {
    if (kind_at(km, i + 1) == RH_LAYER_ACT) return 1;
    if (kind_at(km, i + 1) == RH_LAYER_ADD && kind_at(km, i + 2) == RH_LAYER_ACT) return 2;
  }
  if (o->kind == RH_LAYER_GEMM && km->fw.fuse_bias_act && kind_at(km, i + 1) == RH_LAYER_ACT &&
      km->layers[i + 1].op.sub != 2)
    return 1;
  return 0;
}

static void layer(expansion *x, int i, bool backward, int absorbed) {
  const rh_kernel_model *km = x->km;
  const rh_layer *l = &km->layers[i];
  x->layer = i;
  /* a residual add goes into the norm after it when the framework fuses them */
  x->fuse_next_norm = km->fw.fuse_norm && l->op.residual && kind_at(km, i + 1) == RH_LAYER_NORM;
  x->add_into_norm = km->fw.fuse_norm && l->op.kind == RH_LAYER_NORM && i > 0 &&
                     km->layers[i - 1].op.residual;
  switch (l->op.kind) {
  case RH_LAYER_GEMM:
    if (backward && l->op.residual) residual(x, l, true);
    if (backward) gemm_backward(x, l);
    else gemm_forward(x, l);
    if (!backward && l->op.residual) residual(x, l, false);
    break;
  case RH_LAYER_ATTENTION: rh__kernels_attention(x, l, backward); break;
  case RH_LAYER_NORM: norm(x, l, backward, absorbed); break;
  case RH_LAYER_ACT: act(x, l, backward); break;
  case RH_LAYER_ADD: rh__kernel_memory(x, backward ? "add bwd" : "add", 3 * x->batch * l->op.values * km->value_bytes, 1); break;
  case RH_LAYER_POOL: pool(x, l, backward); break;
  case RH_LAYER_CONCAT:
    if (!backward) rh__kernel_memory(x, "concat", 2 * x->batch * l->op.values * km->value_bytes, 1);
    break;
  case RH_LAYER_EMBED: embed(x, l, backward); break;
  case RH_LAYER_LOSS: loss(x, l->op.m, l->op.rows, backward); break;
  default: other(x, l, backward); break;
  }
}

/* The classifier's loss of a network whose list has none (the convolutional family). */
static bool needs_loss(const rh_kernel_model *km, double *classes) {
  if (km->nlayers == 0 || kind_at(km, km->nlayers - 1) == RH_LAYER_LOSS) return false;
  const rh_layer *last = &km->layers[km->nlayers - 1];
  if (last->op.kind != RH_LAYER_GEMM) return false;
  *classes = last->op.n;
  return true;
}

bool rh_kernels_expand(const rh_kernel_model *km, double batch, rh_kernel_list *out) {
  expansion x = {.km = km, .batch = batch, .out = out};
  int *absorbed = calloc((size_t)(km->nlayers ? km->nlayers : 1), sizeof *absorbed);
  if (!absorbed) return false;
  double classes = 0;
  bool add_loss = needs_loss(km, &classes);
  x.phase = RH_STEP_FORWARD;
  for (int i = 0; i < km->nlayers; i++) {
    int a = absorbs(km, i);
    layer(&x, i, false, a);
    for (int j = 1; j <= a; j++) absorbed[i + j] = -1;
    if (a) absorbed[i] = a;
    i += a;
  }
  if (add_loss) loss(&x, 1, classes, false);
  rh__kernels_scale_loss(&x);
  x.phase = RH_STEP_BACKWARD;
  if (add_loss) loss(&x, 1, classes, true);
  for (int i = km->nlayers - 1; i >= 0; i--)
    if (absorbed[i] >= 0) layer(&x, i, true, absorbed[i]);
  free(absorbed);
  x.phase = RH_STEP_OPTIMIZER;
  x.layer = -1;
  rh__kernels_optimizer(&x);
  return !out->failed;
}
