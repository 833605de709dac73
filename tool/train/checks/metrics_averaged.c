/*
 * metrics_averaged.c: the validation metrics a run logs are the mean over the ranks.  After each
 * averaged metric, every rank's own value and the value it logged are gathered and the logged
 * values compared with the mean.
 */
#include "../internal.h"

#include <math.h>
#include <stdlib.h>

static rh_status after_metric(rank_state *s, double local, double logged, const char *name) {
  if (!train__checking(s, RH_CHECK_METRICS)) return RH_OK;
  int n = s->size;
  double mine[2] = {local, logged}, *all = calloc((size_t)n * 2, sizeof(double));
  uint8_t *off = calloc((size_t)n, 1);
  rh_status st = all && off ? rh_check_allgather(s->ctx, mine, sizeof mine, all) : RH_ERR_NOMEM;
  if (st == RH_OK) {
    double mean = 0;
    for (int r = 0; r < n; r++) mean += all[2 * r];
    mean /= n;
    int bad = 0;
    for (int r = 0; r < n; r++) bad += off[r] = fabs(all[2 * r + 1] - mean) > 1e-12 * (1 + fabs(mean));
    if (bad) {
      char ranks[256];
      train__rank_list(off, n, ranks, sizeof ranks);
      train__verdict(s, RH_CHECK_METRICS, false,
                     "%s: ranks %s logged a value that is not the mean over ranks (rank 0 logged "
                     "%.9g, the mean is %.9g)",
                     name, ranks, all[1], mean);
    }
  }
  free(all);
  free(off);
  return st;
}

static void finish(rank_state *s) {
  if (!s->cfg->real) return;
  if (s->ev.validated)
    train__verdict(s, RH_CHECK_METRICS, true, "validation loss and accuracy are the mean over %d rank%s",
                   s->size, s->size == 1 ? "" : "s");
  else
    train__skip(s, RH_CHECK_METRICS, "no validation ran: no metric to average");
}

const train_check train__check_metrics = {
    .id = RH_CHECK_METRICS, .after_metric = after_metric, .finish = finish};
