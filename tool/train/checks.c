/*
 * checks.c: the table of the recipe checks and what they share.  Each check lives in its own file
 * under checks/ and fills a train_check with the hooks it needs; the loop calls every check's hook
 * through the walkers below, in table order.  A verdict is recorded on every rank (the evidence is
 * gathered by every rank), and rank 0 reports.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const rh_check_names[RH_CHECK_COUNT + 1] = {
    "serial_equivalence", "identical_parameters", "samples_once",  "lr_schedule",
    "metrics_averaged",   "one_checkpoint_writer", "resume_equivalence", "collectives_match",
    "no_committed_work_lost", "state_identical_after_reset", "min_np_respected",
    "failures_noticed", "commit_interval", "fits_memory", "accuracy_parity",
    "sharded_equivalence", NULL};

/* The order of the hooks: each step's evidence is gathered in this order on every rank. */
static const train_check *const table[] = {
    &train__check_identical, &train__check_lr,         &train__check_samples,
    &train__check_serial,    &train__check_metrics,    &train__check_checkpoint,
    &train__check_resume,    &train__check_collectives, &train__check_work_lost,
    &train__check_state_reset, &train__check_min_np,   &train__check_noticed,
    &train__check_interval,  &train__check_fits_memory, &train__check_accuracy,
    &train__check_sharded,
};
enum { NCHECKS = sizeof table / sizeof table[0] };

void train__verdict(rank_state *s, rh_check_id id, bool passed, const char *fmt, ...) {
  rh_check_result *mine = &s->ev.checks[id];
  if (mine->ran && !mine->passed) return; /* the first failure stays */
  mine->ran = true;
  mine->passed = passed;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mine->detail, sizeof mine->detail, fmt, ap);
  va_end(ap);
  rh_check_result *c = &s->res->checks[id];
  if (s->rank == 0 && !(c->ran && !c->passed)) *c = *mine;
}

rh_status train__ranks_unlike_rank0(rank_state *s, uint64_t mine, char *ranks, size_t len) {
  int n = s->size;
  uint64_t *all = calloc((size_t)n, sizeof *all);
  uint8_t *differ = calloc((size_t)n, 1);
  rh_status st = all && differ ? rh_check_allgather(s->ctx, &mine, sizeof mine, all) : RH_ERR_NOMEM;
  int bad = 0;
  for (int r = 0; st == RH_OK && r < n; r++) bad += differ[r] = all[r] != all[0];
  ranks[0] = 0;
  if (st == RH_OK && bad) train__rank_list(differ, n, ranks, len);
  free(all);
  free(differ);
  return st;
}

const char *train__every(long steps, char *buf, size_t len) {
  if (steps == 1) snprintf(buf, len, "every step");
  else snprintf(buf, len, "every %ld steps", steps);
  return buf;
}

void train__skip(rank_state *s, rh_check_id id, const char *why) {
  rh_check_result *mine = &s->ev.checks[id];
  if (mine->ran) return;
  mine->skipped = true;
  snprintf(mine->detail, sizeof mine->detail, "%s", why);
  rh_check_result *c = &s->res->checks[id];
  if (s->rank == 0 && !c->ran) *c = *mine;
}

bool train__checking(const rank_state *s, rh_check_id id) {
  return s->cfg->real && s->cfg->check[id] && s->recording;
}

rh_status train__failed(rank_state *s, rh_status st, rh_check_id blame) {
  if (st == RH_OK) return st;
  rh_train_result *r = s->res;
  /* a peer's failure in an elastic job is recovered from; the job log tells it */
  if (s->cfg->elastic && train__peer_failure(st)) return st;
  if (r->error == RH_OK) {
    r->error = st;
    r->error_rank = s->rank;
    if (rh_last_error(s->ctx)[0] || !r->error_detail[0])
      snprintf(r->error_detail, sizeof r->error_detail, "%s", rh_last_error(s->ctx));
  }
  /* a collective's failure is the check's verdict; I/O or memory errors are the job's alone */
  bool collective = st == RH_ERR_MISMATCH || train__peer_failure(st);
  /* a failure the scenario injected stops the job: the failures report names it */
  if (!collective || (s->cfg->faults && train__peer_failure(st))) return st;
  rh_check_result failure = {.ran = true, .passed = false};
  snprintf(failure.detail, sizeof failure.detail, "rank %d: %s", s->rank,
           rh_last_error(s->ctx)[0] ? rh_last_error(s->ctx) : rh_status_string(st));
  rh_check_result *mine = &s->ev.checks[blame], *c = &r->checks[blame];
  if (!mine->ran || mine->passed) *mine = failure;
  if (!c->ran || c->passed) *c = failure;
  return st;
}

void train__rank_list(const uint8_t *flags, int n, char *buf, size_t len) {
  size_t k = 0;
  buf[0] = 0;
  for (int r = 0; r < n && k < len; r++) {
    if (!flags[r]) continue;
    int end = r;
    while (end + 1 < n && flags[end + 1]) end++;
    if (end >= r + 2) k += (size_t)snprintf(buf + k, len - k, "%s%d-%d", k ? "," : "", r, end);
    else for (int q = r; q <= end && k < len; q++)
      k += (size_t)snprintf(buf + k, len - k, "%s%d", k ? "," : "", q);
    r = end;
  }
}

uint64_t train__fnv(const void *data, size_t bytes) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void train__report(rank_state *s) {
  if (s->rank != 0) return;
  for (int i = 0; i < RH_CHECK_COUNT; i++) {
    rh_check_result *c = &s->res->checks[i];
    if (!(c->ran && !c->passed) && (s->ev.checks[i].ran || s->ev.checks[i].skipped))
      *c = s->ev.checks[i];
  }
}

/* ---- walkers ------------------------------------------------------------------------------ */

rh_status train__checks_before_step(rank_state *s) {
  rh_status st = RH_OK;
  for (int i = 0; i < NCHECKS && st == RH_OK; i++)
    if (table[i]->before_step) st = table[i]->before_step(s);
  return st;
}

rh_status train__checks_after_step(rank_state *s, int epoch, long step, double lr) {
  rh_status st = RH_OK;
  for (int i = 0; i < NCHECKS && st == RH_OK; i++)
    if (table[i]->after_step) st = table[i]->after_step(s, epoch, step, lr);
  return st;
}

rh_status train__checks_after_epoch(rank_state *s, int epoch, long steps_run) {
  rh_status st = RH_OK;
  for (int i = 0; i < NCHECKS && st == RH_OK; i++)
    if (table[i]->after_epoch) st = table[i]->after_epoch(s, epoch, steps_run);
  return st;
}

rh_status train__checks_after_metric(rank_state *s, double local, double logged, const char *name) {
  rh_status st = RH_OK;
  for (int i = 0; i < NCHECKS && st == RH_OK; i++)
    if (table[i]->after_metric) st = table[i]->after_metric(s, local, logged, name);
  return st;
}

rh_status train__checks_after_checkpoint(rank_state *s, int epoch, bool wrote) {
  rh_status st = RH_OK;
  for (int i = 0; i < NCHECKS && st == RH_OK; i++)
    if (table[i]->after_checkpoint) st = table[i]->after_checkpoint(s, epoch, wrote);
  return st;
}

rh_status train__checks_after_run(rank_state *s, int epochs) {
  rh_status st = RH_OK;
  for (int i = 0; i < NCHECKS && st == RH_OK; i++)
    if (table[i]->after_run) st = table[i]->after_run(s, epochs);
  return st;
}

rh_status train__checks_after_reset(rank_state *s) {
  rh_status st = RH_OK;
  for (int i = 0; i < NCHECKS && st == RH_OK; i++)
    if (table[i]->after_reset && s->cfg->check[table[i]->id]) st = table[i]->after_reset(s);
  return st;
}

void train__checks_finish(rank_state *s) {
  for (int i = 0; i < NCHECKS; i++)
    if (table[i]->finish && s->cfg->check[table[i]->id]) table[i]->finish(s);
}
