/*
 * model.h: small real models for replaying recipes with real numbers: softmax regression and a
 * one-hidden-layer MLP (ReLU), forward and backward in C on float parameters held in one flat
 * array.  The parameters are split into named tensors, the units that are allreduced and fused.
 */
#ifndef REHEARSAL_MODEL_H
#define REHEARSAL_MODEL_H

#include "rehearsal.h"
#include "net/net.h"

#include <stddef.h>
#include <stdint.h>

typedef enum rh_model_kind { RH_MODEL_SOFTMAX = 0, RH_MODEL_MLP = 1, RH_MODEL_NET = 2 } rh_model_kind;

typedef struct rh_tensor_desc {
  char name[48]; /* e.g. "fc1.weight" */
  size_t offset;    /* first element in the flat parameter array */
  size_t count;
  int ndim, dims[4]; /* its shape as PyTorch holds it: (out, in, k, k), (out, in), (out) */
} rh_tensor_desc;

typedef struct rh_model {
  rh_model_kind kind;
  int inputs, hidden, classes; /* hidden is 0 for softmax regression */
  size_t nparams;
  int ntensors;
  rh_tensor_desc tensors[RH_NET_MAX_TENSORS]; /* in forward order: weight then bias of each layer */
  rh_net net; /* RH_MODEL_NET: the network (net/net.h) */
} rh_model;

/* A convolutional network (net/net.h) on images of channels x rows x cols; NULL, or why not. */
const char *rh_model_init_net(rh_model *m, const rh_net_spec *spec, int channels, int rows,
                              int cols, int classes);

/* Describes a model; RH_ERR_INVALID for non-positive sizes (hidden ignored for softmax). */
rh_status rh_model_init(rh_model *m, rh_model_kind kind, int inputs, int hidden, int classes);

/* Reads nparams float32 values (little-endian) from path into params: model.init_from.  0, or -1
 * with why in err (the file cannot be read, or holds another number of values). */
int rh_model_read_params(const rh_model *m, const char *path, float *params, char *err,
                         size_t errlen);

/* Deterministic initial parameters from seed: softmax and MLP weights uniform in +-1/sqrt(fan_in)
 * and biases 0; a network's as rh_net_init_params draws them. */
void rh_model_init_params(const rh_model *m, float *params, uint64_t seed);

/* Forward FLOPs of one sample (multiply-adds count 2). */
double rh_model_forward_flops(const rh_model *m);

/* Mean cross-entropy loss over `batch` samples (x: batch x inputs, row-major; y: labels) and its
 * gradient with respect to the parameters, written to grad (nparams floats, overwritten).
 * *correct receives the number of samples whose arg-max class equals the label.  Allocates its
 * own scratch; deterministic: the same inputs give the same bits. */
double rh_model_loss_grad(const rh_model *m, const float *params, const float *x, const int32_t *y,
                          int batch, float *grad, int *correct);

/* The same for a training step whose dropout masks come from `key` (rh_net_dropout_key), the
 * batch being positions first .. first + batch - 1 of the step's global batch (net.h).  Models
 * without dropout ignore both. */
double rh_model_loss_grad_at(const rh_model *m, const float *params, const float *x,
                             const int32_t *y, int batch, float *grad, int *correct, uint64_t key,
                             long first);

/* Mean loss and number correct, without gradients (dropout off). */
double rh_model_evaluate(const rh_model *m, const float *params, const float *x, const int32_t *y,
                         int batch, int *correct);

#endif
