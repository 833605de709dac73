/*
 * optimizer.c: the step's own kernels, after backward: gradients zeroed (a memset a tensor, where
 * the framework does not set them to None), mixed precision's unscale and overflow check and the
 * scale's update, and the optimizer's update of every parameter.  An optimizer runs as a loop
 * over the tensors (PyTorch 1.x's default: each of its elementwise ops a kernel a tensor), over
 * lists of tensors (`foreach`: an op a kernel for up to 48 tensors, PyTorch's multi-tensor apply
 * with three or four lists), fused (one kernel for all its ops, up to 36 tensors a launch), or
 * one fused kernel a tensor (TensorFlow's ResourceApplyMomentum, MXNet's sgd_mom_update).
 * Bytes a parameter, fp32 state:
 *
 *     SGD            p += -lr g                          1 op    12 bytes
 *     momentum       b = m b + g; p += -lr b             3 ops   32 bytes  (fused: 20)
 *     Adam           m, v, sqrt(v), /, +eps, p update    7 ops   72 bytes  (fused: 28)
 */
#include "expand.h"

#include <math.h>

/* Parameter tensors: a weight, and a bias or a norm's shift beside it. */
static double tensors(const rh_kernel_model *km) {
  double t = 0;
  for (int i = 0; i < km->nlayers; i++) {
    const rh_layer *l = &km->layers[i];
    if (!(l->parameters > 0)) continue;
    bool two = l->op.bias || (l->op.kind == RH_LAYER_NORM && l->op.sub != 2);
    t += two ? 2 : 1;
  }
  return t;
}

static double parameters(const rh_kernel_model *km) {
  double p = 0;
  for (int i = 0; i < km->nlayers; i++) p += km->layers[i].parameters;
  return p;
}

/* Launches of `ops` elementwise ops over T tensors, as the framework's optimizer runs them. */
static int launches(const rh_framework *fw, double ops, double T) {
  switch (fw->optimizer) {
  case RH_OPT_FUSED: return (int)ceil(T / 36);
  case RH_OPT_PER_TENSOR_FUSED: return (int)T;
  case RH_OPT_FOREACH: return (int)(ops * ceil(T / 48));
  default: return (int)(ops * T);
  }
}

void rh__kernels_scale_loss(expansion *x) {
  if (x->km->scaler) rh__kernel_memory(x, "loss scale", 8, 1);
}

void rh__kernels_optimizer(expansion *x) {
  const rh_kernel_model *km = x->km;
  const rh_framework *fw = &km->fw;
  double P = parameters(km), T = tensors(km);
  if (!(P > 0)) return;
  if (fw->zero_grad == 1) rh__kernel_memory(x, "zero grad", 4 * P, (int)T);
  if (km->scaler) { /* GradScaler: unscale and check, then update */
    rh__kernel_memory(x, "unscale", 8 * P, (int)ceil(T / 110));
    rh__kernel_memory(x, "scale update", 16, 1);
  }
  static const double ops[] = {1, 3, 7}, bytes[] = {12, 32, 72}, fused[] = {12, 20, 28};
  int o = km->optimizer;
  bool one_pass = fw->optimizer == RH_OPT_FUSED || fw->optimizer == RH_OPT_PER_TENSOR_FUSED;
  rh__kernel_memory(x, o == RH_KOPT_ADAM ? "adam" : o == RH_KOPT_MOMENTUM ? "sgd momentum" : "sgd",
                    P * (one_pass ? fused[o] : bytes[o]), launches(fw, ops[o], T));
}
