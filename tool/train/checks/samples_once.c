/*
 * samples_once.c: no training sample is used twice in an epoch across the ranks, beyond the
 * sampler's own padding.  Each rank records the samples of every step; at the end of the epoch
 * every rank's list is gathered and counted.
 */
#include "../internal.h"

#include <stdlib.h>

static rh_status after_step(rank_state *s, int epoch, long step, double lr) {
  (void)epoch;
  (void)lr;
  if (!train__checking(s, RH_CHECK_SAMPLES)) return RH_OK;
  long base = step * s->cfg->batch;
  for (long j = 0; j < s->nused; j++) s->epoch_used[base + j] = s->used[j];
  return RH_OK;
}

static rh_status after_epoch(rank_state *s, int epoch, long steps_run) {
  if (!train__checking(s, RH_CHECK_SAMPLES) || steps_run == 0) return RH_OK;
  const rh_train_config *cfg = s->cfg;
  int n = s->size;
  long per_rank = (steps_run - 1) * cfg->batch + s->nused;
  long *all = calloc((size_t)n * (size_t)per_rank, sizeof *all);
  if (!all) return RH_ERR_NOMEM;
  rh_status st = rh_check_allgather(s->ctx, s->epoch_used, (size_t)per_rank * sizeof(long), all);
  long N = cfg->train_samples, total = (long)n * per_rank;
  int *owner = malloc((size_t)N * sizeof *owner);
  int *count = calloc((size_t)N, sizeof *count);
  uint8_t *involved = calloc((size_t)n, 1);
  if (st == RH_OK && (!owner || !count || !involved)) st = RH_ERR_NOMEM;
  if (st == RH_OK) {
    long repeats = 0, distinct = 0;
    for (int r = 0; r < n; r++)
      for (long k = 0; k < per_rank; k++) {
        long idx = all[(size_t)r * (size_t)per_rank + (size_t)k];
        if (count[idx]++ == 0) {
          owner[idx] = r;
          distinct++;
        } else {
          repeats++;
          involved[r] = 1;
          involved[owner[idx]] = 1;
        }
      }
    /* only the recipe's own padding may repeat a sample: each rank covers at most its shard of
     * ceil(N / size) positions, of which size * shard - N repeat the start of the order */
    long shard = rh_sampler_shard_size(N, n), covered = per_rank < shard ? per_rank : shard;
    long allowed = (long)n * covered > N ? (long)n * covered - N : 0;
    char ranks[256];
    train__rank_list(involved, n, ranks, sizeof ranks);
    if (repeats > allowed)
      train__verdict(s, RH_CHECK_SAMPLES, false,
                     "epoch %d: %ld of %ld sample draws repeated a sample already used that epoch "
                     "(%ld distinct of %ld); ranks %s used the same samples",
                     epoch + 1, repeats, total, distinct, N, ranks);
    else
      train__verdict(s, RH_CHECK_SAMPLES, true,
                     "each epoch (the last: %ld draws over %d ranks, %ld distinct samples of %ld, "
                     "%ld repeated by the sampler's padding)",
                     total, n, distinct, N, repeats);
  }
  free(owner);
  free(count);
  free(involved);
  free(all);
  return st;
}

const train_check train__check_samples = {
    .id = RH_CHECK_SAMPLES, .after_step = after_step, .after_epoch = after_epoch};
