/*
 * one_checkpoint_writer.c: exactly one rank, rank 0, writes each checkpoint.  After each
 * checkpoint every rank says whether it wrote one.
 */
#include "../internal.h"

#include <stdlib.h>

static rh_status after_checkpoint(rank_state *s, int epoch, bool wrote) {
  if (!s->cfg->check[RH_CHECK_CHECKPOINT]) return RH_OK;
  uint8_t mine = wrote, *all = calloc((size_t)s->size, 1);
  rh_status st = all ? rh_check_allgather(s->ctx, &mine, 1, all) : RH_ERR_NOMEM;
  int writers = 0;
  for (int r = 0; st == RH_OK && r < s->size; r++) writers += all[r];
  if (st == RH_OK && (writers != 1 || !all[0])) {
    char ranks[256];
    train__rank_list(all, s->size, ranks, sizeof ranks);
    train__verdict(s, RH_CHECK_CHECKPOINT, false, "checkpoint-%d.bin was written by %d rank%s (%s)",
                   epoch + 1, writers, writers == 1 ? "" : "s", ranks);
  }
  free(all);
  return st;
}

static void finish(rank_state *s) {
  if (!s->cfg->real) return;
  if (s->ev.checkpoint_writes > 0)
    train__verdict(s, RH_CHECK_CHECKPOINT, true, "%d checkpoint%s written by rank 0 alone", s->ev.checkpoint_writes,
                   s->ev.checkpoint_writes == 1 ? "," : "s, each");
  else
    train__skip(s, RH_CHECK_CHECKPOINT, "no checkpoint was due in the epochs that ran");
}

const train_check train__check_checkpoint = {
    .id = RH_CHECK_CHECKPOINT, .after_checkpoint = after_checkpoint, .finish = finish};
