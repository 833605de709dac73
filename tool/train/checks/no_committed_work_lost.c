/*
 * no_committed_work_lost.c: elastic.  Each failure rolls the job back to the last commit the
 * recipe makes (every commit_every_steps steps, and at the end of each epoch), no further, and
 * the parameters restored are the ones committed there.  After the reset and the sync, every rank
 * says where its failure left it (a new worker: nowhere); the furthest is where the job was.
 */
#include "../internal.h"

#include <stdlib.h>

static rh_status after_reset(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  int n = s->size;
  long mine[3] = {s->failed_at, s->failed_epoch_start, 0};
  if (cfg->real) mine[2] = train__fnv(s->params, s->nparams * sizeof(float)) == s->commit_hash;
  else mine[2] = 1;
  long *all = calloc((size_t)n * 3, sizeof *all);
  rh_status st = all ? rh_check_allgather(s->ctx, mine, sizeof mine, all) : RH_ERR_NOMEM;
  long at = -1, epoch_start = 0;
  bool same_params = true;
  for (int r = 0; st == RH_OK && r < n; r++) {
    if (all[3 * r] > at) {
      at = all[3 * r];
      epoch_start = all[3 * r + 1];
    }
    same_params = same_params && all[3 * r + 2];
  }
  free(all);
  if (st != RH_OK || at < 0) return st; /* hosts changed: nothing was restored */
  long every = cfg->commit_every > 0 ? cfg->commit_every : 1;
  long expect = at / every * every, restored = (long)s->pos.global_step;
  char text[40];
  if (epoch_start > expect) expect = epoch_start;
  s->ev.rolled_back += at - restored;
  s->ev.now.rolled_back += at - restored;
  if (restored < expect)
    train__verdict(s, RH_CHECK_WORK_LOST, false,
                   "the failure after %ld step%s rolled back to step %ld, where the recipe's last "
                   "commit was at step %ld (%s and at each epoch's end): %ld step%s of "
                   "committed work lost%s",
                   at, at == 1 ? "" : "s", restored, expect, train__every(every, text, sizeof text),
                   expect - restored, expect - restored == 1 ? "" : "s",
                   restored == 0 ? " (nothing was ever committed)" : "");
  else if (restored > expect || !same_params)
    train__verdict(s, RH_CHECK_WORK_LOST, false,
                   "the failure after %ld step%s restored step %ld but not the parameters "
                   "committed there", at, at == 1 ? "" : "s", restored);
  return RH_OK;
}

static void finish(rank_state *s) {
  char text[40];
  if (s->ev.rolled_back == 0 && s->ev.world_resets == 0)
    train__skip(s, RH_CHECK_WORK_LOST, "no failure needed a restore");
  else
    train__verdict(s, RH_CHECK_WORK_LOST, true,
                   "each failure rolled back to the last commit (%s and at each epoch's end), no "
                   "further: %ld step%s done again in all",
                   train__every(s->cfg->commit_every, text, sizeof text), s->ev.rolled_back,
                   s->ev.rolled_back == 1 ? "" : "s");
}

const train_check train__check_work_lost = {
    .id = RH_CHECK_WORK_LOST, .after_reset = after_reset, .finish = finish};
