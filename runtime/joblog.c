/*
 * joblog.c: the job log, where backends and the runtime write what happened to a job: faults that
 * took effect, the first failure each rank noticed, restores, worlds formed, relaunches.  The
 * reports (the failures section of `rehearsal run`) read it after the job; nothing in it changes
 * what the job does.  Also the names of fault kinds and phases, for scenarios and reports.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const rh_fault_names[RH_FAULT_KIND_COUNT + 1] = {
    "host_crash", "gpu_crash", "hang", "link_down", "link_degraded", "straggler", NULL};

const char *const rh_phase_names[RH_PHASE_COUNT + 1] = {
    "-",    "allreduce",  "broadcast", "allgather",      "commit",
    "sync", "rendezvous", "step",      "reduce_scatter", NULL};

void rh__log(rh_joblog *log, const rh_event *e) {
  if (!log) return;
  if (log->n == log->cap) {
    size_t cap = log->cap ? 2 * log->cap : 64;
    rh_event *grown = realloc(log->events, cap * sizeof *grown);
    if (!grown) return; /* the log is a report: losing an entry must not stop the job */
    log->events = grown;
    log->cap = cap;
  }
  log->events[log->n++] = *e;
}

void rh__log_rank(rh_ctx *ctx, rh_event_kind kind, rh_status status, double a, double b,
                  const char *text) {
  if (!ctx->log) return;
  rh_event e = {.kind = kind, .time = rh_time(ctx), .generation = ctx->generation,
                .rank = ctx->rank, .node = -1, .gpu = -1, .fault = -1, .status = status,
                .epoch = ctx->epoch, .step = ctx->step, .a = a, .b = b};
  if (text) snprintf(e.text, sizeof e.text, "%s", text);
  rh__log(ctx->log, &e);
}

size_t rh__joblog_left(const rh_joblog *log, size_t k, int node) {
  for (size_t j = 0; j < k && j < log->n; j++)
    if (log->events[j].kind == RH_EV_LEFT && log->events[j].node == node) return j;
  return log->n;
}

void rh__joblog_free(rh_joblog *log) {
  if (!log) return;
  free(log->events);
  free(log->random);
  *log = (rh_joblog){0};
}
