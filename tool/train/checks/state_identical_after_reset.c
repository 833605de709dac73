/*
 * state_identical_after_reset.c: elastic.  After each reset and the sync from the new rank 0,
 * every rank of the new world holds the same state, bit for bit: the position, the parameters
 * and the optimizer.  Each rank's FNV-1a hash of them is gathered.
 */
#include "../internal.h"

#include <stdlib.h>

static uint64_t state_hash(const rank_state *s) {
  uint64_t h = train__fnv(&s->pos, sizeof s->pos);
  if (s->cfg->real) {
    h ^= train__fnv(s->params, s->nparams * sizeof(float)) * 3;
    h ^= train__fnv(s->opt.state, rh_optimizer_state_count(&s->opt) * sizeof(float)) * 7;
  }
  return h ^ train__fnv(&s->opt.steps, sizeof s->opt.steps) * 11;
}

static rh_status after_reset(rank_state *s) {
  int n = s->size;
  uint64_t mine = state_hash(s), *all = calloc((size_t)n, sizeof *all);
  uint8_t *differ = calloc((size_t)n, 1);
  rh_status st = all && differ ? rh_check_allgather(s->ctx, &mine, sizeof mine, all) : RH_ERR_NOMEM;
  int bad = 0;
  for (int r = 0; st == RH_OK && r < n; r++) bad += differ[r] = all[r] != all[0];
  if (st == RH_OK && bad) {
    char ranks[256];
    train__rank_list(differ, n, ranks, sizeof ranks);
    train__verdict(s, RH_CHECK_STATE_RESET, false,
                   "after reset %d (%d ranks) the state of ranks %s differs from rank 0's",
                   s->ev.world_resets, n, ranks);
  }
  free(all);
  free(differ);
  return st;
}

static void finish(rank_state *s) {
  if (s->ev.world_resets == 0)
    train__skip(s, RH_CHECK_STATE_RESET, "the world was never re-formed");
  else
    train__verdict(s, RH_CHECK_STATE_RESET, true,
                   "after each of %d resets every rank held rank 0's state, bit for bit (%s)",
                   s->ev.world_resets,
                   s->cfg->real ? "position, parameters, optimizer" : "position");
}

const train_check train__check_state_reset = {
    .id = RH_CHECK_STATE_RESET, .after_reset = after_reset, .finish = finish};
