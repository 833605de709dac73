/*
 * collectives_match.c: every rank issued the same collectives in the same order, and none
 * stalled.  The runtime's negotiation compares every collective before it runs; a mismatch or a
 * stall fails the collective, and that failure is this check's verdict (train__failed).  A run
 * that ends without one passes; with the negotiation off (check_collectives: off) nothing was
 * compared, and the check says SKIP.
 */
#include "../internal.h"

static void finish(rank_state *s) {
  /* without the negotiation nothing was compared: a pass would claim what was not seen */
  if ((int)rh_setting(s->ctx, RH_SETTING_CHECK_COLLECTIVES) == 0) {
    train__skip(s, RH_CHECK_COLLECTIVES,
                "check_collectives is off: the collectives were not compared (a stall still fails "
                "the run)");
    return;
  }
  train__verdict(s, RH_CHECK_COLLECTIVES, true,
                 "every rank issued the same collectives in the same order");
}

const train_check train__check_collectives = {.id = RH_CHECK_COLLECTIVES, .finish = finish};
