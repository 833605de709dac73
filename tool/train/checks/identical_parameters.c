/*
 * identical_parameters.c: the parameters are identical, bit for bit, on every rank after every
 * step.  Each rank's FNV-1a hash of its parameters is gathered after each step; the first step
 * where some rank differs from rank 0 fails the check, naming the ranks.
 */
#include "../internal.h"


static rh_status after_step(rank_state *s, int epoch, long step, double lr) {
  (void)lr;
  if (!train__checking(s, RH_CHECK_IDENTICAL) || s->ev.identical_failed) return RH_OK;
  char ranks[256];
  rh_status st = train__ranks_unlike_rank0(s, train__fnv(s->params, s->nparams * sizeof(float)),
                                           ranks, sizeof ranks);
  if (st == RH_OK && ranks[0]) {
    s->ev.identical_failed = true;
    train__verdict(s, RH_CHECK_IDENTICAL, false,
                   "after epoch %d step %ld the parameters of ranks %s differ from rank 0's",
                   epoch + 1, step + 1, ranks);
  }
  s->ev.identical_steps++;
  return st;
}

static void finish(rank_state *s) {
  if (s->cfg->real && !s->ev.identical_failed)
    train__verdict(s, RH_CHECK_IDENTICAL, true,
                   "parameters identical, bit for bit, on all %d rank%s after each of %ld step%s",
                   s->size, s->size == 1 ? "" : "s", s->ev.identical_steps,
                   s->ev.identical_steps == 1 ? "" : "s");
}

const train_check train__check_identical = {
    .id = RH_CHECK_IDENTICAL, .after_step = after_step, .finish = finish};
