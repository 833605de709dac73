/*
 * lr_schedule.c: the learning rate of every step equals the recipe's formula (lr scaling by the
 * number of workers, Horovod's warmup, step decay).  Each rank's lr and the recipe's are gathered
 * after each step; the first step where some rank differs fails the check.
 */
#include "../internal.h"

#include <stdlib.h>

static rh_status after_step(rank_state *s, int epoch, long step, double lr) {
  if (!train__checking(s, RH_CHECK_LR) || s->ev.lr_failed) return RH_OK;
  const rh_train_config *cfg = s->cfg;
  int n = s->size;
  double want = rh_recipe_lr(&s->recipe_lr, epoch, step, s->steps_per_epoch);
  double mine[2] = {lr, want}, *all = calloc((size_t)n * 2, sizeof(double));
  uint8_t *wrong = calloc((size_t)n, 1);
  rh_status st = all && wrong ? rh_check_allgather(s->ctx, mine, sizeof mine, all) : RH_ERR_NOMEM;
  int bad = 0;
  for (int r = 0; st == RH_OK && r < n; r++) bad += wrong[r] = all[2 * r] != all[2 * r + 1];
  if (st == RH_OK && bad) {
    char ranks[256];
    train__rank_list(wrong, n, ranks, sizeof ranks);
    int r0 = 0;
    while (!wrong[r0]) r0++;
    s->ev.lr_failed = true;
    train__verdict(s, RH_CHECK_LR, false,
                   "epoch %d step %ld: ranks %s used lr %.9g where the recipe gives %.9g (base "
                   "%.9g x %s factor %.9g)",
                   epoch + 1, step + 1, ranks, all[2 * r0], all[2 * r0 + 1], cfg->base_lr,
                   cfg->lr_scaling == RH_LR_SIZE         ? "size"
                   : cfg->lr_scaling == RH_LR_LOCAL_SIZE ? "local_size"
                                                         : "no",
                   rh_recipe_lr_factor(cfg->lr_scaling, s->size, s->local_size));
  }
  free(all);
  free(wrong);
  return st;
}

static void finish(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  if (cfg->real && !s->ev.lr_failed)
    train__verdict(s, RH_CHECK_LR, true, "every step's lr equals the recipe (base %.9g x %.9g%s%s)",
                   cfg->base_lr, rh_recipe_lr_factor(cfg->lr_scaling, s->size, s->local_size),
                   cfg->warmup_epochs > 0 ? ", warmup" : "", cfg->ndecay ? ", step decay" : "");
}

const train_check train__check_lr = {.id = RH_CHECK_LR, .after_step = after_step, .finish = finish};
