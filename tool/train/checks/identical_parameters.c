/*
 * identical_parameters.c: the parameters are identical, bit for bit, on every rank after every
 * step.  Each rank's FNV-1a hash of its parameters is gathered after each step; the first step
 * where some rank differs from rank 0 fails the check, naming the ranks.
 */
#include "../internal.h"

#include <stdlib.h>

static rh_status after_step(rank_state *s, int epoch, long step, double lr) {
  (void)lr;
  if (!train__checking(s, RH_CHECK_IDENTICAL) || s->ev.identical_failed) return RH_OK;
  int n = s->size;
  uint64_t mine = train__fnv(s->params, s->nparams * sizeof(float));
  uint64_t *all = calloc((size_t)n, sizeof *all);
  uint8_t *differ = calloc((size_t)n, 1);
  rh_status st = all && differ ? rh_check_allgather(s->ctx, &mine, sizeof mine, all) : RH_ERR_NOMEM;
  int bad = 0;
  for (int r = 0; st == RH_OK && r < n; r++) bad += differ[r] = all[r] != all[0];
  if (st == RH_OK && bad) {
    char ranks[256];
    train__rank_list(differ, n, ranks, sizeof ranks);
    s->ev.identical_failed = true;
    train__verdict(s, RH_CHECK_IDENTICAL, false,
                   "after epoch %d step %ld the parameters of ranks %s differ from rank 0's",
                   epoch + 1, step + 1, ranks);
  }
  s->ev.identical_steps++;
  free(all);
  free(differ);
  return st;
}

static void finish(rank_state *s) {
  if (s->cfg->real && !s->ev.identical_failed)
    train__verdict(s, RH_CHECK_IDENTICAL, true,
                   "parameters identical, bit for bit, on all %d ranks after each of %ld steps",
                   s->size, s->ev.identical_steps);
}

const train_check train__check_identical = {
    .id = RH_CHECK_IDENTICAL, .after_step = after_step, .finish = finish};
