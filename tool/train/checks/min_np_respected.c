/*
 * min_np_respected.c: elastic.  The job never trains on fewer than min_np workers; when fewer
 * remain it ends, cleanly and reported (state.c writes that verdict when the elastic loop returns
 * RH_ERR_TOO_FEW).  After each reset every rank looks at the new world's size.
 */
#include "../internal.h"

static rh_status after_reset(rank_state *s) {
  if (s->size < s->cfg->min_np)
    train__verdict(s, RH_CHECK_MIN_NP, false,
                   "after reset %d the job went on with %d worker%s, fewer than min_np %d",
                   s->ev.world_resets, s->size, s->size == 1 ? "" : "s", s->cfg->min_np);
  return RH_OK;
}

static void finish(rank_state *s) {
  train__verdict(s, RH_CHECK_MIN_NP, true,
                 "the job trained on %d to %d workers, never fewer than min_np %d",
                 s->ev.smallest, s->ev.largest, s->cfg->min_np);
}

const train_check train__check_min_np = {
    .id = RH_CHECK_MIN_NP, .after_reset = after_reset, .finish = finish};
