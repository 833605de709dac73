/*
 * resume_equivalence.c: a run restarted from the checkpoint of `resume_from_epoch` ends with the
 * same parameters, bit for bit, as the run that never stopped.  After the run, the ranks restore
 * that checkpoint, replay the epochs after it without recording, and compare.
 */
#include "../internal.h"

#include <stdlib.h>
#include <string.h>

static rh_status after_run(rank_state *s, int epochs) {
  const rh_train_config *cfg = s->cfg;
  int k = cfg->resume_from_epoch;
  if (!train__checking(s, RH_CHECK_RESUME)) return RH_OK;
  if (k < 1 || k >= epochs) {
    char why[160];
    snprintf(why, sizeof why, "resume_from_epoch %d leaves nothing to replay: %d epoch%s ran", k,
             epochs, epochs == 1 ? "" : "s");
    train__skip(s, RH_CHECK_RESUME, why);
    return RH_OK;
  }
  if (!s->written[k]) {
    char why[160];
    snprintf(why, sizeof why, "this run wrote no checkpoint after epoch %d", k);
    train__skip(s, RH_CHECK_RESUME, why);
    return RH_OK;
  }
  float *whole = malloc(s->nparams * sizeof(float));
  if (!whole) return RH_ERR_NOMEM;
  memcpy(whole, s->params, s->nparams * sizeof(float));
  train_position whole_pos = s->pos;
  s->recording = false;
  int start = 0;
  rh_status st = train__restore(s, k, &start);
  if (st == RH_OK && start != k) {
    train__verdict(s, RH_CHECK_RESUME, false, "checkpoint-%d.bin was not found in %s", k,
                   cfg->checkpoint_dir);
  } else if (st == RH_OK) {
    st = train__run_epochs(s, epochs);
  }
  if (st == RH_OK && start == k) {
    uint8_t same = memcmp(whole, s->params, s->nparams * sizeof(float)) == 0;
    uint8_t *all = calloc((size_t)s->size, 1), *differ = calloc((size_t)s->size, 1);
    st = all && differ ? rh_check_allgather(s->ctx, &same, 1, all) : RH_ERR_NOMEM;
    int bad = 0;
    for (int r = 0; st == RH_OK && r < s->size; r++) bad += differ[r] = !all[r];
    char ranks[256] = "";
    if (bad) train__rank_list(differ, s->size, ranks, sizeof ranks);
    if (st == RH_OK && bad)
      train__verdict(s, RH_CHECK_RESUME, false,
                     "resumed after epoch %d, ranks %s ended with other parameters than the run "
                     "that never stopped", k, ranks);
    else if (st == RH_OK)
      train__verdict(s, RH_CHECK_RESUME, true,
                     "resumed after epoch %d from checkpoint-%d.bin: the same parameters, bit for "
                     "bit, on every rank", k, k);
    free(all);
    free(differ);
  }
  free(whole);
  s->pos = whole_pos;
  s->recording = true;
  return st;
}

const train_check train__check_resume = {.id = RH_CHECK_RESUME, .after_run = after_run};
