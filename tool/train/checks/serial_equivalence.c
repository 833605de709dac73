/*
 * serial_equivalence.c: each step of N workers with batch B gives the parameters of a serial SGD
 * step with batch N x B on the same samples.  Rank 0 keeps a serial replica: before each step it
 * takes rank 0's parameters and optimizer state, after the step it runs one serial step on every
 * rank's samples of that step and measures the largest difference.
 */
#include "../internal.h"

#include <math.h>
#include <string.h>

/* One step of the ranks is compared with one serial step from the same parameters, to this
 * tolerance relative to the largest parameter: both sides are fp32, and the distributed side
 * sums size per-rank means in ring order where the serial side sums size x B samples in order,
 * so they differ by a few ulps.  A rank on other parameters, other samples or another lr differs
 * by orders of magnitude more. */
#define SERIAL_TOLERANCE 1e-5
/* With fp16 on the wire each gradient is rounded to 11 bits before the average. */
#define SERIAL_TOLERANCE_FP16 1e-3

static rh_status before_step(rank_state *s) {
  /* the replica starts each step from rank 0's state: the check compares one step at a time, so
   * fp32 sums in another order cannot add up over a long run */
  const rh_train_config *cfg = s->cfg;
  if (!train__checking(s, RH_CHECK_SERIAL) ||
      (cfg->serial_check_steps > 0 && (long)s->pos.global_step >= cfg->serial_check_steps))
    return RH_OK; /* the same on every rank: after_step compares no step past them */
  /* a sharded state is whole only over the ranks: every rank takes part in gathering it */
  rh_status st = train__shard_whole_state(s, false);
  if (!s->sparams || st != RH_OK) return st;
  memcpy(s->sparams, s->params, s->nparams * sizeof(float));
  memcpy(s->sopt.state, s->opt.state, rh_optimizer_state_count(&s->opt) * sizeof(float));
  s->sopt.steps = s->opt.steps;
  return RH_OK;
}

static rh_status after_step(rank_state *s, int epoch, long step, double lr) {
  (void)epoch;
  (void)step;
  const rh_train_config *cfg = s->cfg;
  bool serial = train__checking(s, RH_CHECK_SERIAL) &&
                (cfg->serial_check_steps == 0 || (long)s->pos.global_step < cfg->serial_check_steps);
  if (!serial) return RH_OK;
  /* the samples every rank used this step, in rank order: the serial batch */
  rh_status st = rh_check_allgather(s->ctx, s->used, (size_t)cfg->batch * sizeof(long), s->all_used);
  if (st != RH_OK || s->rank != 0) return st;
  int in = cfg->model.inputs, n = s->size;
  long m = 0;
  for (int r = 0; r < n; r++)
    for (long j = 0; j < s->nused; j++, m++)
      rh_dataset_get(cfg->train, s->all_used[(size_t)r * (size_t)cfg->batch + (size_t)j],
                     s->sx + (size_t)m * (size_t)in, &s->sy[m]);
  int c;
  /* the same dropout masks: rank r's samples were positions r x nused .. of this batch */
  rh_model_loss_grad_at(&cfg->model, s->sparams, s->sx, s->sy, (int)m, s->sgrad, &c,
                        s->dropout_key, 0);
  rh_optimizer_step(&s->sopt, s->sparams, s->sgrad, lr);
  double diff = 0, big = 0;
  for (size_t i = 0; i < s->nparams; i++) {
    double d = fabs((double)s->params[i] - (double)s->sparams[i]);
    if (d > diff) diff = d;
    if (fabs(s->sparams[i]) > big) big = fabs(s->sparams[i]);
  }
  double rel = diff / (big > 1 ? big : 1);
  if (rel > s->ev.serial_max_diff) s->ev.serial_max_diff = rel;
  s->ev.serial_steps++;
  if (m > s->ev.serial_batch) s->ev.serial_batch = m;
  return RH_OK;
}

static void finish(rank_state *s) {
  if (!s->cfg->real || s->rank != 0) return; /* the replica's figures are rank 0's */
  bool fp16 = (int)rh_setting(s->ctx, RH_SETTING_COMPRESSION) == 1;
  double tolerance = fp16 ? SERIAL_TOLERANCE_FP16 : SERIAL_TOLERANCE;
  train__verdict(s, RH_CHECK_SERIAL, s->ev.serial_max_diff <= tolerance,
                 "%ld step%s, each against serial SGD with batch %ld from the same parameters: "
                 "largest difference %.3g of the largest parameter (tolerance %g: %s)",
                 s->ev.serial_steps, s->ev.serial_steps == 1 ? "" : "s", s->ev.serial_batch, s->ev.serial_max_diff, tolerance,
                 fp16 ? "gradients travel as fp16" : "fp32 sums in another order");
}

const train_check train__check_serial = {.id = RH_CHECK_SERIAL, .before_step = before_step,
                                         .after_step = after_step, .finish = finish};
