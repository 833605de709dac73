/*
 * optim.c: SGD with momentum, Adam and Adadelta on flat float parameters (see optim.h), with
 * PyTorch's update rules.  Parameters and state are updated in float; scalar factors such as the
 * learning rate and Adam's bias corrections are computed in double and cast to float once per
 * step, so that every rank and every rerun gives the same bits.
 */
#include "optim.h"

#include <math.h>
#include <stdlib.h>

rh_status rh_optimizer_init(rh_optimizer *o, rh_optimizer_kind kind, size_t n, double momentum,
                            double beta1, double beta2, double eps, double rho) {
  if (!o) return RH_ERR_INVALID;
  *o = (rh_optimizer){0};
  if (n == 0) return RH_ERR_INVALID;
  switch (kind) {
  case RH_OPT_SGD:
    if (!(momentum >= 0.0) || !isfinite(momentum)) return RH_ERR_INVALID;
    break;
  case RH_OPT_ADAM:
    if (!(beta1 >= 0.0 && beta1 < 1.0) || !(beta2 >= 0.0 && beta2 < 1.0)) return RH_ERR_INVALID;
    if (!(eps >= 0.0) || !isfinite(eps)) return RH_ERR_INVALID;
    break;
  case RH_OPT_ADADELTA:
    if (!(rho >= 0.0 && rho <= 1.0)) return RH_ERR_INVALID;
    if (!(eps >= 0.0) || !isfinite(eps)) return RH_ERR_INVALID;
    break;
  default:
    return RH_ERR_INVALID;
  }
  rh_optimizer d = {.kind = kind, .momentum = momentum, .beta1 = beta1, .beta2 = beta2,
                    .eps = eps, .rho = rho, .n = n};
  size_t count = rh_optimizer_state_count(&d);
  if (count > SIZE_MAX / sizeof(float)) return RH_ERR_NOMEM;
  /* The state is owned by o and released by rh_optimizer_free; calloc gives the zero start. */
  d.state = calloc(count, sizeof(float));
  if (!d.state) return RH_ERR_NOMEM;
  *o = d;
  return RH_OK;
}

size_t rh_optimizer_state_count(const rh_optimizer *o) {
  switch (o->kind) {
  case RH_OPT_SGD: return o->n;
  case RH_OPT_ADAM: return 2 * o->n;
  case RH_OPT_ADADELTA: return 2 * o->n;
  }
  return 0;
}

/* state: buf[n].  buf = momentum * buf + g (buf = g on the first step); p -= lr * buf. */
static void sgd_step(rh_optimizer *o, float *p, const float *g, double lr, size_t from,
                     size_t to) {
  float *buf = o->state;
  const float mom = (float)o->momentum, lrf = (float)lr;
  if (o->steps == 0) {
    for (size_t i = from; i < to; i++) buf[i] = g[i];
  } else {
    for (size_t i = from; i < to; i++) buf[i] = mom * buf[i] + g[i];
  }
  for (size_t i = from; i < to; i++) p[i] -= lrf * buf[i];
}

/* state: m[n] then v[n].  PyTorch's form of the update:
 *   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps),
 * which is the header's formula with the bias corrections folded into scalars. */
static void adam_step(rh_optimizer *o, float *p, const float *g, double lr, size_t from,
                      size_t to) {
  float *m = o->state, *v = o->state + o->n;
  const double t = o->steps + 1.0;
  const float b1 = (float)o->beta1, c1 = (float)(1.0 - o->beta1);
  const float b2 = (float)o->beta2, c2 = (float)(1.0 - o->beta2);
  const float step_size = (float)(lr / (1.0 - pow(o->beta1, t)));
  const float sqrt_bc2 = (float)sqrt(1.0 - pow(o->beta2, t));
  const float eps = (float)o->eps;
  for (size_t i = from; i < to; i++) {
    m[i] = b1 * m[i] + c1 * g[i];
    v[i] = b2 * v[i] + c2 * (g[i] * g[i]);
    float denom = sqrtf(v[i]) / sqrt_bc2 + eps;
    p[i] -= step_size * (m[i] / denom);
  }
}

/* state: s[n] (mean square of gradients) then u[n] (mean square of updates). */
static void adadelta_step(rh_optimizer *o, float *p, const float *g, double lr, size_t from,
                          size_t to) {
  float *s = o->state, *u = o->state + o->n;
  const float rho = (float)o->rho, c = (float)(1.0 - o->rho);
  const float eps = (float)o->eps, lrf = (float)lr;
  for (size_t i = from; i < to; i++) {
    s[i] = rho * s[i] + c * (g[i] * g[i]);
    float d = sqrtf(u[i] + eps) / sqrtf(s[i] + eps) * g[i];
    u[i] = rho * u[i] + c * (d * d);
    p[i] -= lrf * d;
  }
}

void rh_optimizer_update(rh_optimizer *o, float *params, const float *grad, double lr,
                         size_t from, size_t count) {
  size_t to = from + count < o->n ? from + count : o->n;
  switch (o->kind) {
  case RH_OPT_SGD: sgd_step(o, params, grad, lr, from, to); break;
  case RH_OPT_ADAM: adam_step(o, params, grad, lr, from, to); break;
  case RH_OPT_ADADELTA: adadelta_step(o, params, grad, lr, from, to); break;
  }
}

void rh_optimizer_step(rh_optimizer *o, float *params, const float *grad, double lr) {
  rh_optimizer_update(o, params, grad, lr, 0, o->n);
  o->steps += 1.0;
}

void rh_optimizer_free(rh_optimizer *o) {
  if (!o) return;
  free(o->state);
  o->state = NULL;
}
