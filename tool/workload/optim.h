/*
 * optim.h: optimizers on flat float parameters, with their state in one array so that it can be
 * broadcast from rank 0 and written to checkpoints.  Update rules follow PyTorch's:
 *   SGD:      buf = momentum * buf + g (buf = g on the first step); p -= lr * buf
 *   Adam:     m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr * (m / (1 - b1^t)) /
 *             (sqrt(v / (1 - b2^t)) + eps)
 *   Adadelta: s = rho s + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(s + eps) * g;
 *             u = rho u + (1 - rho) d^2; p -= lr * d
 */
#ifndef REHEARSAL_OPTIM_H
#define REHEARSAL_OPTIM_H

#include "rehearsal.h"

#include <stddef.h>

typedef enum rh_optimizer_kind { RH_OPT_SGD = 0, RH_OPT_ADAM = 1, RH_OPT_ADADELTA = 2 } rh_optimizer_kind;

typedef struct rh_optimizer {
  rh_optimizer_kind kind;
  double momentum;          /* SGD */
  double beta1, beta2, eps; /* Adam (eps also Adadelta) */
  double rho;               /* Adadelta */
  size_t n;                 /* parameters */
  float *state;             /* rh_optimizer_state_count() floats, owned; zero at start */
  double steps;             /* updates applied so far (Adam's t); part of the state */
} rh_optimizer;

/* Sets up an optimizer for n parameters with the given hyperparameters (unused ones ignored). */
rh_status rh_optimizer_init(rh_optimizer *o, rh_optimizer_kind kind, size_t n, double momentum,
                            double beta1, double beta2, double eps, double rho);
/* Applies one update with learning rate lr. */
void rh_optimizer_step(rh_optimizer *o, float *params, const float *grad, double lr);
/* The update of parameters [from, from + count) alone (a shard of them: ZeRO's optimizer step),
 * the same bits each would get from rh_optimizer_step; the step is not counted (every rank counts
 * it once with o->steps += 1 after its shard). */
void rh_optimizer_update(rh_optimizer *o, float *params, const float *grad, double lr,
                         size_t from, size_t count);
/* Floats in o->state: SGD n (momentum buffer; 0 when momentum is 0 is still n), Adam 2n,
 * Adadelta 2n. */
size_t rh_optimizer_state_count(const rh_optimizer *o);
void rh_optimizer_free(rh_optimizer *o);

#endif
