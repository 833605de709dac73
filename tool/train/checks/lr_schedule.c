/*
 * lr_schedule.c: the learning rate of every step equals what Horovod's Keras callbacks give the
 * recipe: the lr scaled by the number of workers, LearningRateWarmupCallback, and the staircase
 * of LearningRateScheduleCallback (from the end of warmup, then from each decay epoch on).  The
 * expected lr is worked out here from the callbacks' own formulas and rules (horovod/_keras/
 * callbacks.py), not taken from the recipe code the training uses, so that a wrong formula is
 * caught as well as a missing scaling.  Each rank's lr and the expected one are gathered after
 * each step; the first step where some rank differs fails the check.
 */
#include "../internal.h"

#include <math.h>
#include <stdlib.h>

/* LearningRateWarmupCallback's multiplier at `epoch` (fractional: the batch's share of it); it
 * adds 1 / steps_per_epoch "to produce round numbers at the end of each epoch". */
static double warmup_multiplier(double epoch, long steps_per_epoch, int size, double warmup) {
  epoch += 1.0 / (double)steps_per_epoch;
  return 1.0 / size * (epoch * (size - 1) / warmup + 1);
}

/* What the callbacks leave depends on the current epoch alone: the warmup callback sets the lr at
 * every batch of its epochs, and from the end of warmup on some staircase callback (the last has
 * no end) sets it at every epoch's begin. */
double train__horovod_lr(const train_horovod_lr *h, int epoch, long batch) {
  /* on_batch_begin: the warmup callback (staircase=False) while current_epoch < end_epoch: the
   * integer epoch, so a warmup of 2.5 epochs adjusts all of epoch 2 (the third) */
  if (h->warmup_epochs > 0 && epoch < h->warmup_epochs)
    return h->initial_lr * warmup_multiplier(epoch + (double)batch / (double)h->steps_per_epoch,
                                             h->steps_per_epoch, h->size, h->warmup_epochs);
  /* on_epoch_begin: the staircase callbacks, each active from its start_epoch to before its
   * end_epoch: [warmup, d0) x 1, [d0, d1) x factor, ... [d_last, inf) x factor^n */
  double start = h->warmup_epochs, mult = 1, lr = h->initial_lr;
  for (int k = 0; k <= h->ndecay; k++) {
    double end = k < h->ndecay ? h->decay_epochs[k] : INFINITY;
    if (epoch >= start && epoch < end) lr = h->initial_lr * mult;
    start = end;
    mult *= h->decay_factor;
  }
  return lr;
}

static train_horovod_lr horovod_recipe(const rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  double factor = cfg->lr_scaling == RH_LR_SIZE         ? s->size
                  : cfg->lr_scaling == RH_LR_LOCAL_SIZE ? s->local_size
                                                        : 1;
  return (train_horovod_lr){.initial_lr = cfg->base_lr * factor, .size = s->size,
                            .warmup_epochs = cfg->warmup_epochs, .decay_epochs = cfg->decay_epochs,
                            .ndecay = cfg->ndecay, .decay_factor = cfg->decay_factor,
                            .steps_per_epoch = s->steps_per_epoch};
}

static rh_status after_step(rank_state *s, int epoch, long step, double lr) {
  if (!train__checking(s, RH_CHECK_LR) || s->ev.lr_failed) return RH_OK;
  const rh_train_config *cfg = s->cfg;
  int n = s->size;
  train_horovod_lr h = horovod_recipe(s);
  double want = train__horovod_lr(&h, epoch, step);
  double mine[2] = {lr, want}, *all = calloc((size_t)n * 2, sizeof(double));
  uint8_t *wrong = calloc((size_t)n, 1);
  rh_status st = all && wrong ? rh_check_allgather(s->ctx, mine, sizeof mine, all) : RH_ERR_NOMEM;
  int bad = 0;
  /* the same operations in another order may round differently: a part in 1e12 is no mistake */
  for (int r = 0; st == RH_OK && r < n; r++)
    bad += wrong[r] = !(fabs(all[2 * r] - all[2 * r + 1]) <= 1e-12 * fabs(all[2 * r + 1]));
  if (st == RH_OK && bad) {
    char ranks[256];
    train__rank_list(wrong, n, ranks, sizeof ranks);
    int r0 = 0;
    while (!wrong[r0]) r0++;
    s->ev.lr_failed = true;
    train__verdict(s, RH_CHECK_LR, false,
                   "epoch %d step %ld: ranks %s used lr %.9g where Horovod's callbacks give %.9g "
                   "(base %.9g x %s factor %.9g)",
                   epoch + 1, step + 1, ranks, all[2 * r0], all[2 * r0 + 1], cfg->base_lr,
                   cfg->lr_scaling == RH_LR_SIZE         ? "size"
                   : cfg->lr_scaling == RH_LR_LOCAL_SIZE ? "local_size"
                                                         : "no",
                   h.initial_lr / cfg->base_lr);
  }
  free(all);
  free(wrong);
  return st;
}

static void finish(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  if (!cfg->real || s->ev.lr_failed) return;
  train_horovod_lr h = horovod_recipe(s);
  char warmup[400] = "";
  double w = cfg->warmup_epochs;
  if (w > 0 && w != floor(w)) {
    /* Horovod's warmup callback keeps adjusting through the epoch its end falls in */
    int last = (int)floor(w);
    double peak = train__horovod_lr(&h, last, s->steps_per_epoch - 1) / h.initial_lr;
    snprintf(warmup, sizeof warmup,
             "; warmup of %.9g epochs: Horovod's LearningRateWarmupCallback adjusts through all of "
             "epoch %d, to %.9g x the scaled lr at its last step, and epoch %d on has the scaled lr "
             "again, as LearningRateScheduleCallback(start_epoch=%.9g) sets it (a program without "
             "that callback keeps %.9g x)",
             w, last + 1, peak, last + 2, w, peak);
  }
  train__verdict(s, RH_CHECK_LR, true,
                 "every step's lr equals Horovod's callbacks (base %.9g x %.9g%s%s)%s", cfg->base_lr,
                 h.initial_lr / cfg->base_lr, w > 0 ? ", warmup" : "",
                 cfg->ndecay ? ", step decay" : "", warmup);
}

const train_check train__check_lr = {.id = RH_CHECK_LR, .after_step = after_step, .finish = finish};
