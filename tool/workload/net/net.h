/*
 * net.h: the seeds' convolutional networks as real models, trained in C on the host.
 *
 * A network is a list of operations on one image (channels x rows x cols, NCHW as PyTorch holds
 * it): conv2d (stride, padding; Keras 'same' pads the extra row and column after), max-pool,
 * ReLU, dropout and Dropout2d, flatten, linear; softmax cross-entropy closes it.  The same list
 * gives the training numbers (net.c: forward and backward over a batch) and the timing model's
 * layers (rh_net_layers: parameters, FLOPs, traffic and activations per sample), so the two
 * cannot disagree about the network.
 *
 * Parameters live in one flat float array, tensor by tensor in forward order (weight then bias of
 * each conv and linear, as PyTorch's state_dict lists them); a conv weight is out x in x k x k and
 * a linear weight out x in, both as PyTorch stores them.
 *
 * Determinism: loop orders are fixed; the GEMMs are OpenBLAS's, single-threaded, so one machine
 * gives the same bits in every process.  Dropout's masks are counter-based: the mask of element i
 * of dropout layer L at step t is a function of (key, L, i) where key comes from (seed, step)
 * (rh_net_dropout_key) and i counts over the step's global batch, so that the rank enters through
 * its samples' positions; reruns, the simulator and real processes draw the same.
 */
#ifndef RH_NET_H
#define RH_NET_H

#include "rehearsal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum rh_net_op_kind {
  RH_OP_END = 0,   /* ends a spec's list */
  RH_OP_CONV,
  RH_OP_MAXPOOL,
  RH_OP_RELU,
  RH_OP_DROPOUT,   /* elementwise, p dropped, the rest scaled by 1 / (1 - p) */
  RH_OP_DROPOUT2D, /* whole channels */
  RH_OP_FLATTEN,
  RH_OP_LINEAR,
} rh_net_op_kind;

typedef struct rh_net_op {
  rh_net_op_kind kind;
  const char *name; /* conv and linear: the tensors' prefix (conv1 -> conv1.weight, conv1.bias) */
  int out;          /* conv: output channels; linear: output features (0: the classes) */
  int k, stride;    /* conv kernel and stride; max-pool window (its stride is k) */
  int pad_lo, pad_hi; /* conv: zeros before and after each spatial dimension */
  double p;         /* dropout probability */
} rh_net_op;

#define RH_NET_MAX_OPS 24
#define RH_NET_MAX_TENSORS 16

typedef enum rh_net_init { RH_INIT_TORCH = 0, RH_INIT_KERAS = 1 } rh_net_init;

typedef struct rh_net_spec {
  const char *name;
  const char *about;  /* where the network is written down */
  int channels, rows, cols; /* the input it was written for */
  rh_net_init init;   /* PyTorch's default initialisers, or Keras's (Glorot uniform, zero bias) */
  rh_net_op ops[RH_NET_MAX_OPS]; /* up to the first RH_OP_END */
} rh_net_spec;

/* The shipped networks, NULL-terminated, and their names in the same order. */
extern const rh_net_spec *const rh_nets[];
extern const char *const rh_net_names[];
const rh_net_spec *rh_net_find(const char *name);

/* A network fixed to its input and classes: each op's input and output shapes, the tensors. */
typedef struct rh_net_shape { int c, h, w; } rh_net_shape;
typedef struct rh_net {
  const rh_net_spec *spec;
  int nops;
  int classes;
  rh_net_shape in[RH_NET_MAX_OPS], out[RH_NET_MAX_OPS];
  int weight[RH_NET_MAX_OPS]; /* index of the op's weight tensor, -1: none (bias is weight + 1) */
  int ntensors;
  struct { char name[48]; size_t offset, count; int fan_in, fan_out, ndim, dims[4]; } tensors[RH_NET_MAX_TENSORS];
  size_t nparams;
  size_t inputs;              /* c x h x w of the input */
  size_t largest;             /* the largest activation of one sample, in floats */
} rh_net;

/* Fixes spec to an input of channels x rows x cols and `classes` outputs.  NULL, or why not (the
 * image too small for a conv or pool, too many tensors) written into why. */
const char *rh_net_build(rh_net *n, const rh_net_spec *spec, int channels, int rows, int cols,
                         int classes);

/* Initial parameters from seed: PyTorch's defaults (conv and linear weights and biases uniform in
 * +-1/sqrt(fan_in): kaiming_uniform with a = sqrt(5)), or Keras's (Glorot uniform weights in
 * +-sqrt(6 / (fan_in + fan_out)), zero biases). */
void rh_net_init_params(const rh_net *n, float *params, uint64_t seed);

/* Forward FLOPs of one sample (2 per multiply-add of the convs and linears). */
double rh_net_forward_flops(const rh_net *n);

/* Forward FLOPs of the op whose weight is tensor t (0 for a bias): the tensor's share of a step. */
double rh_net_tensor_flops(const rh_net *n, int t);

/* The dropout key of a training step: every mask of the step derives from it. */
uint64_t rh_net_dropout_key(uint64_t seed, long step);

/* Keep factor of element i (over the batch, sample-major) of the op at index `op`: 0, or
 * 1 / (1 - p) where the element's uniform draw, the top 24 bits of splitmix64's finalizer of
 * key + (op + 1) x 0xD1B54A32D192ED03 + (i + 1) x 0x9E3779B97F4A7C15 over 2^24, is at least p. */
float rh_net_keep(uint64_t key, int op, uint64_t i, double p);

/* Mean softmax cross-entropy over `batch` samples (x: batch x inputs) and, when grad is not NULL,
 * its gradient (overwritten).  train: dropout on, with masks from key for the samples at
 * positions first .. first + batch - 1 of the step's global batch (rank r of a step of batch B
 * per rank holds positions r x B ..., so one serial step on every rank's samples in rank order
 * draws the same masks); else dropout is the identity.  *correct: samples whose arg-max is the
 * label.  NaN on a label outside the classes or when memory runs out (grad then zeroed). */
double rh_net_loss_grad(const rh_net *n, const float *params, const float *x, const int32_t *y,
                        int batch, float *grad, int *correct, bool train, uint64_t key,
                        long first);

/* Cross-entropy of one sample from its logits, the log-sum-exp shifted by the largest logit and
 * computed in double.  dz (when not NULL) receives scale x (softmax - one_hot(label)); *argmax the
 * first index of the largest logit. */
double rh_softmax_cross_entropy(const float *logits, int classes, int label, double scale,
                                float *dz, int *argmax);

/* Gives back the calling thread's batch buffers (rh_net_loss_grad keeps them from call to call). */
void rh_net_release(void);

/* Appends the network's layers (for the timing model): one per op, with its parameters, forward
 * FLOPs, values read and written, and values kept for backward, per sample. */
struct rh_layers;
bool rh_net_layers(const rh_net *n, struct rh_layers *out);

#endif
