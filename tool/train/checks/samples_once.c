/*
 * samples_once.c: no training sample is used twice in an epoch across the ranks, beyond the
 * sampler's own padding; and where the recipe's loader covers the whole set, every sample is
 * used.  After each step every rank's samples are gathered and counted by every rank, so the
 * count holds across an elastic reset (it is part of the committed evidence, rolled back with
 * the steps a failure undoes); it is judged at the end of each epoch.
 */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

static rh_status after_step(rank_state *s, int epoch, long step, double lr) {
  (void)epoch;
  (void)step;
  (void)lr;
  if (!train__checking(s, RH_CHECK_SAMPLES)) return RH_OK;
  long B = s->cfg->batch;
  long *mine = malloc((size_t)B * sizeof *mine);
  if (!mine) return RH_ERR_NOMEM;
  for (long j = 0; j < B; j++) mine[j] = j < s->nused ? s->used[j] : -1; /* a short last batch */
  rh_status st = rh_check_allgather(s->ctx, mine, (size_t)B * sizeof(long), s->all_used);
  free(mine);
  for (int r = 0; st == RH_OK && r < s->size; r++)
    for (long j = 0; j < B; j++) {
      long idx = s->all_used[(size_t)r * (size_t)B + (size_t)j];
      if (idx < 0) continue;
      s->ev.draws++;
      s->ev.seg_draws++;
      if (s->sample_count[idx]++ == 0) {
        s->sample_owner[idx] = r;
      } else {
        s->ev.own_repeats += s->sample_owner[idx] == r;
        int most = s->cfg->max_size > s->size ? s->cfg->max_size : s->size;
        s->involved[r] = 1;
        if (s->sample_owner[idx] < most) s->involved[s->sample_owner[idx]] = 1; /* else: a rank of
          the larger world a checkpoint was written in */
      }
    }
  return st;
}

static rh_status after_epoch(rank_state *s, int epoch, long steps_run) {
  if (!train__checking(s, RH_CHECK_SAMPLES) || steps_run == 0) return RH_OK;
  const rh_train_config *cfg = s->cfg;
  long N = cfg->train_samples, total = s->ev.draws, distinct = 0;
  for (long i = 0; i < N; i++) distinct += s->sample_count[i] > 0;
  long repeats = total - distinct;
  /* only the recipe's own padding may repeat a sample: in the segment that reaches the end of
   * the epoch each rank covers at most its shard of ceil(left / size) positions, of which
   * size * shard - left repeat the start of what was left */
  int n = s->size;
  long per_rank = s->ev.seg_draws / n, shard = rh_sampler_shard_size(s->ev.seg_left, n);
  long covered = per_rank < shard ? per_rank : shard;
  long allowed = (long)n * covered > s->ev.seg_left ? (long)n * covered - s->ev.seg_left : 0;
  int most = cfg->max_size > n ? cfg->max_size : n;
  char ranks[256];
  train__rank_list(s->involved, most, ranks, sizeof ranks);
  bool whole = cfg->steps_rule == RH_STEPS_LOADER && !cfg->replicated && !s->pos.stopped;
  if (repeats > allowed && s->ev.own_repeats == repeats && n > 1)
    /* no rank drew another's sample: each went round its own shard again */
    train__verdict(s, RH_CHECK_SAMPLES, false,
                   "epoch %d: %ld of %ld sample draws repeated a sample already used that epoch "
                   "(%ld distinct of %ld), each by the rank that had drawn it: the ranks' shards "
                   "are disjoint, but each rank went round its own shard %.3g times%s",
                   epoch + 1, repeats, total, distinct, N, (double)total / (double)N,
                   cfg->steps_rule == RH_STEPS_FULL
                       ? " (steps_per_epoch: full runs the whole set's steps on every rank; "
                         "divided runs 1/size of them)"
                       : "");
  else if (repeats > allowed)
    train__verdict(s, RH_CHECK_SAMPLES, false,
                   "epoch %d: %ld of %ld sample draws repeated a sample already used that epoch "
                   "(%ld distinct of %ld); ranks %s used the same samples",
                   epoch + 1, repeats, total, distinct, N, ranks);
  else if (whole && distinct < N)
    train__verdict(s, RH_CHECK_SAMPLES, false,
                   "epoch %d: %ld of %ld samples were never drawn (%ld distinct in %ld draws, the "
                   "last %ld over %d rank%s): the shards did not cover what was left of the epoch",
                   epoch + 1, N - distinct, N, distinct, total, s->ev.seg_draws, n, n == 1 ? "" : "s");
  else
    train__verdict(s, RH_CHECK_SAMPLES, true,
                   "each epoch (the last: %ld draws over %d rank%s, %ld distinct samples of %ld, "
                   "%ld repeated by the sampler's padding)",
                   total, n, n == 1 ? "" : "s", distinct, N, repeats);
  return RH_OK;
}

const train_check train__check_samples = {
    .id = RH_CHECK_SAMPLES, .after_step = after_step, .after_epoch = after_epoch};
