/*
 * model.c: softmax regression and a one-hidden-layer ReLU MLP on one flat float parameter array
 * (see model.h).  Activations are computed in float with fixed loop orders; the log-sum-exp of
 * the softmax and the loss are computed in double.  Gradients are of the mean loss, accumulated
 * sample by sample in float, so the same inputs always give the same bits.
 */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- description ---------------------------------------------------------------------------- */

rh_status rh_model_init(rh_model *m, rh_model_kind kind, int inputs, int hidden, int classes) {
  if (!m || inputs <= 0 || classes <= 0) return RH_ERR_INVALID;
  if (kind != RH_MODEL_SOFTMAX && kind != RH_MODEL_MLP) return RH_ERR_INVALID;
  if (kind == RH_MODEL_MLP && hidden <= 0) return RH_ERR_INVALID;

  rh_model d = {.kind = kind, .inputs = inputs, .classes = classes};
  size_t in = (size_t)inputs, out = (size_t)classes;
  if (kind == RH_MODEL_SOFTMAX) {
    d.hidden = 0;
    d.ntensors = 2;
    d.tensors[0] = (rh_tensor_desc){"fc.weight", 0, out * in, 2, {classes, inputs}};
    d.tensors[1] = (rh_tensor_desc){"fc.bias", out * in, out, 1, {classes}};
  } else {
    size_t hid = (size_t)hidden;
    d.hidden = hidden;
    d.ntensors = 4;
    d.tensors[0] = (rh_tensor_desc){"fc1.weight", 0, hid * in, 2, {hidden, inputs}};
    d.tensors[1] = (rh_tensor_desc){"fc1.bias", hid * in, hid, 1, {hidden}};
    d.tensors[2] = (rh_tensor_desc){"fc2.weight", hid * in + hid, out * hid, 2, {classes, hidden}};
    d.tensors[3] = (rh_tensor_desc){"fc2.bias", hid * in + hid + out * hid, out, 1, {classes}};
  }
  const rh_tensor_desc *last = &d.tensors[d.ntensors - 1];
  d.nparams = last->offset + last->count;
  *m = d;
  return RH_OK;
}

/* ---- initial parameters --------------------------------------------------------------------- */

/* splitmix64 (Steele, Lea and Flood): one 64-bit output per call from a 64-bit state. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A double uniform in [0, 1) from the top 53 bits of the next output. */
static double uniform01(uint64_t *state) {
  return (double)(splitmix64(state) >> 11) * 0x1p-53;
}

void rh_model_init_params(const rh_model *m, float *params, uint64_t seed) {
  if (m->kind == RH_MODEL_NET) {
    rh_net_init_params(&m->net, params, seed);
    return;
  }
  uint64_t state = seed;
  /* Weights and biases alternate in the tensor list; the fan-in of a weight is the width of the
   * layer's input.  Tensors are filled in forward order, elements in storage order. */
  for (int t = 0; t < m->ntensors; t++) {
    const rh_tensor_desc *td = &m->tensors[t];
    float *p = params + td->offset;
    if (t % 2 == 1) {
      memset(p, 0, td->count * sizeof *p);
      continue;
    }
    int fan_in = (t == 0) ? m->inputs : m->hidden;
    double bound = 1.0 / sqrt((double)fan_in);
    for (size_t i = 0; i < td->count; i++) {
      /* (float) rounds to nearest, so a value can meet the bound but not pass it. */
      p[i] = (float)((2.0 * uniform01(&state) - 1.0) * bound);
    }
  }
}

/* Counts the multiply-adds of the matrix products only (2 FLOPs each); the bias additions, the
 * ReLU and the softmax are left out, being smaller by a factor of the layer width. */
double rh_model_forward_flops(const rh_model *m) {
  if (m->kind == RH_MODEL_NET) return rh_net_forward_flops(&m->net);
  double in = m->inputs, hid = m->hidden, out = m->classes;
  if (m->kind == RH_MODEL_SOFTMAX) return 2.0 * in * out;
  return 2.0 * (in * hid + hid * out);
}

/* ---- forward and backward ------------------------------------------------------------------- */

/* Scratch for one sample: hidden activations, logits, and their gradients.  Owned by the caller
 * of scratch_alloc, released with free(s->base). */
typedef struct scratch {
  float *base;
  float *h, *dh;      /* hidden floats each (NULL for softmax regression) */
  float *logits, *dz; /* classes floats each */
} scratch;

static int scratch_alloc(const rh_model *m, scratch *s) {
  size_t hid = (size_t)m->hidden, out = (size_t)m->classes;
  s->base = malloc((2 * hid + 2 * out) * sizeof(float));
  if (!s->base) return -1;
  s->logits = s->base;
  s->dz = s->base + out;
  s->h = hid ? s->base + 2 * out : NULL;
  s->dh = hid ? s->base + 2 * out + hid : NULL;
  return 0;
}

/* out[o] = b[o] + sum_i w[o][i] * x[i], in float, i ascending. */
static void dense(const float *w, const float *b, const float *x, int nin, int nout, float *out) {
  for (int o = 0; o < nout; o++) {
    const float *row = w + (size_t)o * (size_t)nin;
    float acc = 0.0f;
    for (int i = 0; i < nin; i++) acc += row[i] * x[i];
    out[o] = acc + b[o];
  }
}

/* Logits of one sample into s->logits (and the ReLU activations into s->h for the MLP). */
static void forward_sample(const rh_model *m, const float *params, const float *x, scratch *s) {
  const rh_tensor_desc *t = m->tensors;
  if (m->kind == RH_MODEL_SOFTMAX) {
    dense(params + t[0].offset, params + t[1].offset, x, m->inputs, m->classes, s->logits);
    return;
  }
  dense(params + t[0].offset, params + t[1].offset, x, m->inputs, m->hidden, s->h);
  for (int j = 0; j < m->hidden; j++) s->h[j] = s->h[j] > 0.0f ? s->h[j] : 0.0f;
  dense(params + t[2].offset, params + t[3].offset, s->h, m->hidden, m->classes, s->logits);
}

/* grad += the gradient of one sample's scaled loss, given its dz (and, for the MLP, its ReLU
 * activations in s->h).  s->dh is used as scratch. */
static void backward_sample(const rh_model *m, const float *params, const float *x, scratch *s,
                            float *grad) {
  const rh_tensor_desc *t = m->tensors;
  int nin = m->inputs, nout = m->classes;
  /* The output layer's input is x for softmax regression and h for the MLP. */
  int li = (m->kind == RH_MODEL_SOFTMAX) ? 0 : 2;
  const float *a = (m->kind == RH_MODEL_SOFTMAX) ? x : s->h;
  int na = (m->kind == RH_MODEL_SOFTMAX) ? nin : m->hidden;

  float *gw = grad + t[li].offset, *gb = grad + t[li + 1].offset;
  for (int k = 0; k < nout; k++) {
    float dzk = s->dz[k];
    float *row = gw + (size_t)k * (size_t)na;
    for (int j = 0; j < na; j++) row[j] += dzk * a[j];
    gb[k] += dzk;
  }
  if (m->kind == RH_MODEL_SOFTMAX) return;

  /* dh[j] = sum_k w2[k][j] * dz[k] for active units (k ascending), 0 where the ReLU is off. */
  const float *w2 = params + t[2].offset;
  int hid = m->hidden;
  for (int j = 0; j < hid; j++) s->dh[j] = 0.0f;
  for (int k = 0; k < nout; k++) {
    float dzk = s->dz[k];
    const float *row = w2 + (size_t)k * (size_t)hid;
    for (int j = 0; j < hid; j++) s->dh[j] += row[j] * dzk;
  }
  float *gw1 = grad + t[0].offset, *gb1 = grad + t[1].offset;
  for (int j = 0; j < hid; j++) {
    if (!(s->h[j] > 0.0f)) continue;
    float dhj = s->dh[j];
    float *row = gw1 + (size_t)j * (size_t)nin;
    for (int i = 0; i < nin; i++) row[i] += dhj * x[i];
    gb1[j] += dhj;
  }
}

/* Shared by loss_grad and evaluate so that both give the same loss bits.  Returns NaN (with grad
 * zeroed and *correct 0) when a label is outside [0, classes) or scratch cannot be allocated; a
 * batch of 0 samples has loss 0. */
static double loss_common(const rh_model *m, const float *params, const float *x,
                          const int32_t *y, int batch, float *grad, int *correct) {
  if (grad) memset(grad, 0, m->nparams * sizeof *grad);
  int right = 0;
  if (correct) *correct = 0;
  if (batch <= 0) return 0.0;
  for (int b = 0; b < batch; b++)
    if (y[b] < 0 || y[b] >= m->classes) return NAN;

  scratch s;
  if (scratch_alloc(m, &s) != 0) return NAN;
  double scale = 1.0 / (double)batch;
  double total = 0.0;
  for (int b = 0; b < batch; b++) {
    const float *xb = x + (size_t)b * (size_t)m->inputs;
    forward_sample(m, params, xb, &s);
    int argmax;
    total += rh_softmax_cross_entropy(s.logits, m->classes, y[b], scale, grad ? s.dz : NULL, &argmax);
    if (argmax == y[b]) right++;
    if (grad) backward_sample(m, params, xb, &s, grad);
  }
  free(s.base);
  if (correct) *correct = right;
  return total / (double)batch;
}

double rh_model_loss_grad_at(const rh_model *m, const float *params, const float *x,
                             const int32_t *y, int batch, float *grad, int *correct, uint64_t key,
                             long first) {
  if (m->kind == RH_MODEL_NET)
    return rh_net_loss_grad(&m->net, params, x, y, batch, grad, correct, true, key, first);
  return loss_common(m, params, x, y, batch, grad, correct);
}

double rh_model_loss_grad(const rh_model *m, const float *params, const float *x, const int32_t *y,
                          int batch, float *grad, int *correct) {
  return rh_model_loss_grad_at(m, params, x, y, batch, grad, correct, 0, 0);
}

double rh_model_evaluate(const rh_model *m, const float *params, const float *x, const int32_t *y,
                         int batch, int *correct) {
  if (m->kind == RH_MODEL_NET)
    return rh_net_loss_grad(&m->net, params, x, y, batch, NULL, correct, false, 0, 0);
  return loss_common(m, params, x, y, batch, NULL, correct);
}

const char *rh_model_init_net(rh_model *m, const rh_net_spec *spec, int channels, int rows,
                              int cols, int classes) {
  memset(m, 0, sizeof *m);
  const char *why = rh_net_build(&m->net, spec, channels, rows, cols, classes);
  if (why) return why;
  m->kind = RH_MODEL_NET;
  m->inputs = (int)m->net.inputs;
  m->classes = classes;
  m->nparams = m->net.nparams;
  m->ntensors = m->net.ntensors;
  for (int t = 0; t < m->ntensors; t++) {
    snprintf(m->tensors[t].name, sizeof m->tensors[t].name, "%s", m->net.tensors[t].name);
    m->tensors[t].offset = m->net.tensors[t].offset;
    m->tensors[t].count = m->net.tensors[t].count;
    m->tensors[t].ndim = m->net.tensors[t].ndim;
    memcpy(m->tensors[t].dims, m->net.tensors[t].dims, sizeof m->tensors[t].dims);
  }
  return NULL;
}

int rh_model_read_params(const rh_model *m, const char *path, float *params, char *err,
                         size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return -1;
  }
  size_t got = fread(params, sizeof(float), m->nparams, f);
  float extra;
  bool more = fread(&extra, sizeof extra, 1, f) == 1;
  fclose(f);
  if (got != m->nparams || more) {
    snprintf(err, errlen, "%s: %s %zu float32 values; the model has %zu parameters", path,
             more ? "more than" : "holds", got, m->nparams);
    return -1;
  }
  return 0;
}
