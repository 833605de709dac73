/*
 * collectives_match.c: every rank issued the same collectives in the same order, and none
 * stalled.  The runtime's negotiation compares every collective before it runs; a mismatch or a
 * stall fails the collective, and that failure is this check's verdict (train__failed).  A run
 * that ends without one passes.
 */
#include "../internal.h"

static void finish(rank_state *s) {
  train__verdict(s, RH_CHECK_COLLECTIVES, true,
                 "every rank issued the same collectives in the same order");
}

const train_check train__check_collectives = {.id = RH_CHECK_COLLECTIVES, .finish = finish};
