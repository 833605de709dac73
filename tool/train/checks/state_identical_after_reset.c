/*
 * state_identical_after_reset.c: elastic.  After each reset and the sync from the new rank 0,
 * every rank of the new world holds the same state, bit for bit: the position, the parameters
 * and the optimizer.  Each rank's FNV-1a hash of them is gathered.
 */
#include "../internal.h"


static uint64_t state_hash(const rank_state *s) {
  uint64_t h = train__fnv(&s->pos, sizeof s->pos);
  if (s->cfg->real) {
    h ^= train__fnv(s->params, s->nparams * sizeof(float)) * 3;
    h ^= train__fnv(s->opt.state, rh_optimizer_state_count(&s->opt) * sizeof(float)) * 7;
  }
  return h ^ train__fnv(&s->opt.steps, sizeof s->opt.steps) * 11;
}

static rh_status after_reset(rank_state *s) {
  char ranks[256];
  rh_status st = train__ranks_unlike_rank0(s, state_hash(s), ranks, sizeof ranks);
  if (st == RH_OK && ranks[0])
    train__verdict(s, RH_CHECK_STATE_RESET, false,
                   "after reset %d (%d ranks) the state of ranks %s differs from rank 0's",
                   s->ev.world_resets, s->size, ranks);
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
