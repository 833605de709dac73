/*
 * replay.c: the walk over a job's wall time.  Failures come as one Poisson stream (every random
 * cause's rate times its units, each draw's cause picked in proportion to the rates) merged with
 * the scripted ones.  Between failures the job trains in cycles of `every` seconds of training and
 * a checkpoint (sync: training waits for its write; async: for the snapshot alone, the write
 * finishing `write` seconds later, when the checkpoint becomes durable).  A failure while training
 * throws away the training since the last durable checkpoint and starts its recovery; one during
 * a recovery starts it again (the first one's cut at that moment); a planned stop drains the job
 * with a checkpoint and loses nothing.  At the horizon the training in progress counts: the job
 * goes on past the window.  So trained + checkpointing + lost = horizon.
 */
#include "incidents.h"
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double rh__incident_rate(const rh_incident_job *job);
int rh__incident_pick(const rh_incident_job *job, double u);

static double uniform(uint64_t *s) { /* (0, 1): a draw's log is finite */
  return ((double)(rh__splitmix64(s) >> 11) + 0.5) * 0x1.0p-53;
}

typedef struct stream {
  const rh_incident_job *job;
  uint64_t state;
  double rate, drawn;
  int drawn_cause;
  int *next_at; /* per cause: its next scripted time */
} stream;

static void draw(stream *s) {
  if (!(s->rate > 0)) {
    s->drawn = INFINITY;
    return;
  }
  s->drawn += -log(uniform(&s->state)) / s->rate;
  s->drawn_cause = rh__incident_pick(s->job, uniform(&s->state));
}

/* The next failure, scripted or drawn: false past the horizon. */
static bool next_incident(stream *s, double *at, int *cause) {
  const rh_incident_job *job = s->job;
  double best = s->drawn;
  int pick = -1;
  for (int i = 0; i < job->ncauses; i++) {
    const rh_cause *c = &job->causes[i];
    if (s->next_at[i] < c->nat && c->at[s->next_at[i]] < best) {
      best = c->at[s->next_at[i]];
      pick = i;
    }
  }
  if (!(best < job->horizon)) return false;
  *at = best;
  if (pick >= 0) {
    *cause = pick;
    s->next_at[pick]++;
  } else {
    *cause = s->drawn_cause;
    draw(s);
  }
  return true;
}

/* Training from a (re)start over `span` seconds: what it trained, waited for checkpoints, and
 * kept (up to the last durable checkpoint); the time to the end of the current cycle. */
typedef struct progress {
  double trained, blocked, kept, to_cycle_end;
  long checkpoints;
} progress;

static progress progress_over(const rh_recovery *r, double span) {
  progress p = {.trained = span, .to_cycle_end = INFINITY};
  if (!(r->every > 0) || !isfinite(r->every)) return p;
  double block = r->async ? r->snapshot : r->write, len = r->every + block;
  double cycles = floor(span / len), within = span - cycles * len;
  p.blocked = cycles * block + fmax(0, within - r->every);
  p.trained = span - p.blocked;
  p.checkpoints = (long)cycles;
  double durable = cycles;
  if (r->async) /* the k-th write ends `write` after its snapshot */
    durable = span >= r->write ? fmin(cycles, floor((span - r->write) / len)) : 0;
  p.kept = fmax(0, durable) * r->every;
  p.to_cycle_end = len - within;
  return p;
}

/* Nodes out for repair (their return times, in order: every repair takes as long). */
typedef struct pool {
  double *back;
  long head, tail;
} pool;

/* The wait for a node at x, and the failed node sent to repair. */
static double take_node(const rh_recovery *r, pool *p, double x) {
  if (r->spares < 0) return 0;
  while (p->head < p->tail && p->back[p->head] <= x) p->head++;
  double wait = 0;
  if (r->spares - (p->tail - p->head) < 1) { /* none free: the first back from repair */
    wait = p->head < p->tail ? p->back[p->head] - x : r->repair;
    if (p->head < p->tail) p->head++;
  }
  p->back[p->tail++] = x + r->repair;
  return wait;
}

static double recovery_span(const double cost[RH_COST_COUNT]) {
  double sum = 0;
  for (int k = RH_COST_DETECT; k < RH_COST_COUNT; k++) sum += cost[k];
  return sum;
}

/* A recovery cut `elapsed` seconds in: its later parts never happened. */
static void cut(double cost[RH_COST_COUNT], double elapsed) {
  for (int k = RH_COST_DETECT; k < RH_COST_COUNT; k++) {
    cost[k] = fmin(cost[k], fmax(0, elapsed));
    elapsed -= cost[k];
  }
}

typedef struct walk {
  const rh_incident_job *job;
  rh_incident_replay *out;
  pool spares;
  bool recovering;
  double start;     /* training's (re)start, or the recovery's end while recovering */
  double rec_begin; /* the recovery in progress began */
  long current;     /* its incident */
} walk;

/* The recovery of `inc` from `begin`: a node taken when diagnosis ends (an unplanned GPU or node
 * failure needs one), then the pipeline; training starts again at its end. */
static void recover(walk *w, rh_incident *inc, const rh_cause *c, double begin, double detect) {
  const rh_recovery *r = &w->job->rec;
  bool node = c->detect != RH_DETECT_PLANNED && (c->out == RH_OUT_GPU || c->out == RH_OUT_NODE);
  double wait = node ? take_node(r, &w->spares, begin + detect + rh_cause_diagnosis(r, c)) : 0;
  rh_incident_pipeline(w->job, c, detect, wait, inc->cost);
  w->rec_begin = begin;
  w->start = begin + recovery_span(inc->cost);
}

/* A failure at f while the job trains (since w->start). */
static void strike_training(walk *w, rh_incident *inc, const rh_cause *c) {
  const rh_recovery *r = &w->job->rec;
  progress p = progress_over(r, inc->at - w->start);
  w->out->checkpoints += p.checkpoints;
  w->out->checkpointing += p.blocked;
  double detect = c->detect == RH_DETECT_CHECKSUM && !c->own_detect
                      ? (isfinite(p.to_cycle_end) ? p.to_cycle_end : 0)
                      : rh_cause_detect(r, c);
  double begin = inc->at;
  if (c->detect == RH_DETECT_PLANNED) { /* drained with a checkpoint: nothing lost */
    w->out->trained += p.trained;
    w->out->checkpointing += r->write;
    w->out->checkpoints++;
    begin += r->write;
  } else {
    w->out->trained += p.kept;
    inc->cost[RH_COST_REDO] = p.trained - p.kept;
  }
  recover(w, inc, c, begin, detect);
}

/* A failure during a recovery: the recovery starts again from it. */
static void strike_recovering(walk *w, rh_incident *inc, const rh_cause *c) {
  inc->in_recovery = true;
  if (c->detect == RH_DETECT_PLANNED) return; /* folded into the recovery in progress */
  cut(w->out->incidents[w->current].cost, inc->at - w->rec_begin);
  double detect = c->detect == RH_DETECT_CHECKSUM && !c->own_detect ? 0 : rh_cause_detect(&w->job->rec, c);
  recover(w, inc, c, inc->at, detect);
}

static void finish(walk *w) {
  const rh_incident_job *job = w->job;
  rh_incident_replay *out = w->out;
  if (w->recovering && job->horizon < w->start) {
    cut(out->incidents[w->current].cost, job->horizon - w->rec_begin);
  } else {
    progress p = progress_over(&job->rec, job->horizon - w->start);
    out->trained += p.trained;
    out->checkpointing += p.blocked;
    out->checkpoints += p.checkpoints;
  }
  for (long i = 0; i < out->n; i++) {
    rh_cause_total *t = &out->by_cause[out->incidents[i].cause];
    t->count++;
    for (int k = 0; k < RH_COST_COUNT; k++) {
      t->cost[k] += out->incidents[i].cost[k];
      out->lost += out->incidents[i].cost[k];
    }
    out->spare_wait_max = fmax(out->spare_wait_max, out->incidents[i].cost[RH_COST_WAIT]);
  }
  out->effective = job->horizon > 0 ? out->trained / job->horizon : 0;
}

static int grow(rh_incident_replay *out, long *cap, pool *p) {
  if (out->n < *cap) return 0;
  long n = *cap ? *cap * 2 : 256;
  rh_incident *inc = realloc(out->incidents, (size_t)n * sizeof *inc);
  if (inc) out->incidents = inc;
  double *back = realloc(p->back, (size_t)n * sizeof *back);
  if (back) p->back = back;
  if (!inc || !back) return -1;
  *cap = n;
  return 0;
}

int rh_incident_replay_run(const rh_incident_job *job, rh_incident_replay *out) {
  *out = (rh_incident_replay){.by_cause = calloc((size_t)(job->ncauses ? job->ncauses : 1),
                                                 sizeof(rh_cause_total))};
  stream s = {.job = job, .state = job->seed, .rate = rh__incident_rate(job),
              .next_at = calloc((size_t)(job->ncauses ? job->ncauses : 1), sizeof(int))};
  walk w = {.job = job, .out = out, .current = -1};
  long cap = 0;
  int rc = out->by_cause && s.next_at ? 0 : -1;
  draw(&s);
  double at;
  int cause;
  while (rc == 0 && next_incident(&s, &at, &cause)) {
    if ((rc = grow(out, &cap, &w.spares)) != 0) break;
    rh_incident *inc = &out->incidents[out->n];
    *inc = (rh_incident){.at = at, .cause = cause};
    const rh_cause *c = &job->causes[cause];
    if (w.recovering && at < w.start) {
      strike_recovering(&w, inc, c);
    } else {
      strike_training(&w, inc, c);
    }
    if (!inc->in_recovery || c->detect != RH_DETECT_PLANNED) w.current = out->n;
    w.recovering = true;
    out->n++;
  }
  free(s.next_at);
  free(w.spares.back);
  if (rc == 0) finish(&w);
  else rh_incident_replay_free(out);
  return rc;
}

void rh_incident_replay_free(rh_incident_replay *r) {
  free(r->incidents);
  free(r->by_cause);
  *r = (rh_incident_replay){0};
}
