/*
 * failures.c: see failures.h.  An incident's lost time runs from the last point the
 * job keeps (its last commit, or the checkpoint a relaunch resumes from) to the moment it trains
 * again; lost intervals are merged before they are added up, so a failure during the recovery of
 * another is not counted twice.  A degradation's cost is the extra time of the steps that began
 * during its window, against the median step of the same world outside every window.
 */
#include "failures.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef enum { HOW_NONE, HOW_ELASTIC, HOW_HOSTS, HOW_RELAUNCH, HOW_ENDED, HOW_STOPPED, HOW_DELAY,
               HOW_DURING, HOW_GONE } how_t;

static const char *const how_names[] = {"unnoticed", "elastic",  "host change", "relaunch",
                                        "job ended", "job stopped", "delay",
                                        "during another recovery", "already left"};

typedef struct incident {
  const rh_fault *fault; /* NULL: a host change */
  int index;             /* the event's fault index */
  double at;             /* when it took effect */
  int epoch;             /* where rank 0 was (0-based; -1 unknown) */
  long step;
  uint32_t generation;
  how_t how;
  double noticed;        /* NAN: nobody noticed */
  char seen[400];        /* who noticed what */
  double from, to;       /* the lost interval */
  double world_at;       /* the new world (or relaunch) formed then */
  double synced;         /* training again */
  long redone;           /* steps rolled back */
  int before, after;     /* world sizes */
  int attempts;          /* worlds formed again by failures during the recovery */
  int left_in;           /* HOW_GONE: the incident its node left the job in (1-based; 0: none) */
  char world[600];       /* the new world's nodes, and nodes that left */
  double until;          /* a window's end */
  double slow;           /* a window's extra step time */
  long slow_steps;
  bool unseen;           /* it ended the job with no worker left to notice it */
} incident;

static const rh_fault *fault_of(const rh_fault_plan *plan, const rh_joblog *log, int index) {
  if (index >= 0 && plan && index < plan->nfaults) return &plan->faults[index];
  if (index <= -2 && log && (size_t)(-2 - index) < log->nrandom) return &log->random[-2 - index];
  return NULL;
}

static bool windowed(const rh_fault *f) {
  return f->kind == RH_FAULT_LINK_DEGRADED || f->kind == RH_FAULT_STRAGGLER ||
         (f->kind == RH_FAULT_LINK_DOWN && !isinf(f->duration));
}

static void describe_fault(const rh_fault *f, char *buf, size_t len) {
  const char *kind = rh_fault_names[f->kind];
  if (f->kind == RH_FAULT_LINK_DOWN || f->kind == RH_FAULT_LINK_DEGRADED) {
    if (f->uplink) snprintf(buf, len, "%s of node %d's uplink", kind, f->node);
    else snprintf(buf, len, "%s of node %d GPU %d's link", kind, f->node, f->gpu);
  } else if (f->gpu >= 0) {
    snprintf(buf, len, "%s of node %d GPU %d", kind, f->node, f->gpu);
  } else {
    snprintf(buf, len, "%s of node %d", kind, f->node);
  }
}

/* "ranks 0-1 saw a peer died; ranks 2-5 saw ..." from the NOTICED events of one world. */
static void who_noticed(const rh_joblog *log, size_t first, uint32_t gen, double after, char *buf,
                        size_t len) {
  int most = 0;
  for (size_t k = first; k < log->n; k++)
    if (log->events[k].kind == RH_EV_NOTICED && log->events[k].generation == gen &&
        log->events[k].rank >= most)
      most = log->events[k].rank + 1;
  uint8_t *flags = calloc((size_t)(most ? most : 1), 1);
  rh_status *kind = calloc((size_t)(most ? most : 1), sizeof *kind);
  if (!flags || !kind) {
    free(flags);
    free(kind);
    buf[0] = 0;
    return;
  }
  for (size_t k = first; k < log->n; k++) {
    const rh_event *e = &log->events[k];
    if (e->kind == RH_EV_NOTICED && e->generation == gen && e->time >= after && !flags[e->rank]) {
      flags[e->rank] = 1;
      kind[e->rank] = e->status;
    }
  }
  size_t n = 0;
  buf[0] = 0;
  static const rh_status order[] = {RH_ERR_PEER_DEAD, RH_ERR_TIMEOUT, RH_ERR_ABORTED};
  for (int o = 0; o < 3; o++) {
    uint8_t *mine = calloc((size_t)(most ? most : 1), 1);
    int count = 0;
    for (int r = 0; mine && r < most; r++) count += mine[r] = flags[r] && kind[r] == order[o];
    if (count && n < len) {
      char ranks[200];
      rh__rank_list(mine, most, 1, ranks, sizeof ranks);
      n += (size_t)snprintf(buf + n, len - n, "%sranks %s: %s", n ? "; " : "", ranks,
                            rh_status_string(order[o]));
    }
    free(mine);
  }
  free(flags);
  free(kind);
}

/* The step of the world of `size` ranks when nothing slowed it: the median, by steps, of the
 * pace runs outside every window and lost interval. */
typedef struct pace { double step; long steps; } pace;

static int by_step(const void *a, const void *b) {
  double x = ((const pace *)a)->step, y = ((const pace *)b)->step;
  return (x > y) - (x < y);
}

static double nominal_step(const rh_train_result *res, const incident *inc, int ninc, int size) {
  pace *p = calloc(res->nruns + 1, sizeof *p);
  size_t n = 0;
  long total = 0;
  for (size_t i = 0; p && i < res->nruns; i++) {
    const rh_step_run *r = &res->runs[i];
    double end = r->start + r->step * (double)r->steps;
    bool clean = r->size == size;
    for (int k = 0; k < ninc && clean; k++) {
      if (inc[k].fault && windowed(inc[k].fault) && r->start < inc[k].until && end > inc[k].at)
        clean = false;
      /* the steps a job's end throws away ran at their pace: only those after the fault are not */
      bool ends = inc[k].how == HOW_ENDED || inc[k].how == HOW_STOPPED;
      if (inc[k].how != HOW_DELAY && inc[k].how != HOW_NONE && inc[k].how != HOW_GONE &&
          r->start < inc[k].to && end > (ends ? inc[k].at : inc[k].from))
        clean = false;
    }
    if (!clean) continue;
    p[n++] = (pace){r->step, r->steps};
    total += r->steps;
  }
  double median = NAN;
  if (n) {
    qsort(p, n, sizeof *p, by_step);
    long seen = 0;
    for (size_t i = 0; i < n && isnan(median); i++)
      if (2 * (seen += p[i].steps) >= total) median = p[i].step;
  }
  free(p);
  return median;
}

/* Extra time of the steps that ran during [t0, t1), against the nominal step of their world. */
static double slowdown(const rh_train_result *res, const incident *inc, int ninc, double t0,
                       double t1, double end, long *steps, int epoch) {
  double extra = 0, nominal = NAN;
  int nominal_of = -1; /* the size `nominal` is the step of: runs of one size follow each other */
  for (size_t i = 0; i < res->nruns; i++) {
    const rh_step_run *r = &res->runs[i];
    if (epoch >= 0 && r->epoch != epoch) continue;
    if (r->size != nominal_of) {
      nominal = nominal_step(res, inc, ninc, r->size);
      nominal_of = r->size;
    }
    if (isnan(nominal) || r->step <= nominal) continue;
    /* steps k that overlap [t0, t1): start + (k + 1) step > t0 and start + k step < t1 */
    double lo = floor((t0 - r->start) / r->step + 1e-9), hi = ceil((t1 - r->start) / r->step - 1e-9);
    lo = fmax(lo, 0);
    hi = fmin(hi, (double)r->steps);
    if (hi <= lo) continue;
    /* no more than those steps' time before the job's end: a step that would have ended after it
     * never did */
    double span = fmin(r->start + hi * r->step, end) - (r->start + lo * r->step);
    extra += fmin((hi - lo) * (r->step - nominal), fmax(0, span));
    if (steps) *steps += (long)(hi - lo);
  }
  return extra;
}

/* The newest checkpoint written by time t (0: none). */
static double checkpoint_before(const rh_train_result *res, double t) {
  double ckpt = 0;
  for (size_t c = 0; c < res->nckpt; c++)
    if (res->ckpt_time[c] <= t) ckpt = res->ckpt_time[c];
  return ckpt;
}

/* A job none of whose workers returned lost them all: it ended at the last thing its log says
 * (a crash, or the driver giving up), not at 0.  Otherwise its end is `end`. */
static bool none_left(const rh_joblog *log, double end) {
  return !(end > 0) && log && log->n > 0;
}

static double job_end(const rh_joblog *log, double end) {
  if (!none_left(log, end)) return end;
  for (size_t k = 0; k < log->n; k++) end = fmax(end, log->events[k].time);
  return end;
}

/* The first event of `kind` after index k (and at or after time t). */
static size_t find(const rh_joblog *log, size_t k, rh_event_kind kind, double t) {
  for (; k < log->n; k++)
    if (log->events[k].kind == kind && log->events[k].time >= t) return k;
  return log->n;
}

static int analyse(const rh_fault_plan *plan, const rh_joblog *log, const rh_train_result *res,
                   double end, incident *out, int cap) {
  bool lost_all = none_left(log, end);
  end = job_end(log, end);
  int n = 0, world = 0;
  for (size_t k = 0; log && k < log->n && n < cap; k++) {
    const rh_event *e = &log->events[k];
    if (e->kind == RH_EV_WORLD) world = (int)e->a;
    bool hosts = e->kind == RH_EV_RESET && e->a == 2;
    bool no_sync = hosts && e->b == 1; /* hosts removed only: training goes on at the release */
    if (e->kind != RH_EV_FAULT && !hosts) continue;
    incident *inc = &out[n++];
    *inc = (incident){.fault = hosts ? NULL : fault_of(plan, log, e->fault), .index = e->fault,
                      .at = e->time, .epoch = e->epoch, .step = e->step,
                      .generation = e->generation, .noticed = NAN, .from = e->time,
                      .to = e->time, .synced = NAN, .world_at = NAN, .until = end};
    if (!hosts && !inc->fault) { /* not a fault this report knows */
      n--;
      continue;
    }
    if (inc->fault && windowed(inc->fault)) {
      for (size_t j = k + 1; j < log->n; j++)
        if (log->events[j].kind == RH_EV_HEALED && log->events[j].fault == e->fault) {
          inc->until = log->events[j].time;
          break;
        }
    }
    /* a crash, hang or lasting fault of a node that had already left hits nothing of the job */
    size_t gone = inc->fault && !windowed(inc->fault) ? rh__joblog_left(log, k, inc->fault->node)
                                                      : log->n;
    if (gone < log->n) {
      inc->how = HOW_GONE;
      for (int m = 0; m < n - 1; m++)
        if (out[m].at <= log->events[gone].time) inc->left_in = m + 1;
      continue;
    }
    inc->before = world; /* the size of the world it hit */
    size_t seen = log->n;
    if (hosts) {
      inc->how = HOW_HOSTS;
      inc->noticed = e->time;
      seen = k;
    } else {
      for (size_t j = k + 1; j < log->n && seen == log->n; j++) {
        const rh_event *x = &log->events[j];
        if (x->kind == RH_EV_NOTICED && x->generation == e->generation) seen = j;
        if (x->kind == RH_EV_FAULT) break; /* another fault: it is that one's */
      }
      if (seen < log->n) {
        inc->noticed = log->events[seen].time;
        who_noticed(log, k + 1, e->generation, e->time, inc->seen, sizeof inc->seen);
        char first[300];
        snprintf(first, sizeof first, "; first: rank %d: %s", log->events[seen].rank,
                 log->events[seen].text);
        size_t have = strlen(inc->seen);
        snprintf(inc->seen + have, sizeof inc->seen - have, "%s", first);
      }
    }
    if (seen == log->n && lost_all && !windowed(inc->fault)) {
      /* no worker of the job returned: the faults nobody lived to notice ended it, and only its
       * checkpoints are kept */
      size_t ended = find(log, k + 1, RH_EV_ENDED, e->time);
      inc->how = HOW_ENDED;
      inc->unseen = true;
      inc->noticed = e->time;
      inc->from = checkpoint_before(res, e->time);
      inc->to = end;
      snprintf(inc->world, sizeof inc->world, "%s",
               ended < log->n ? log->events[ended].text : "no node was left, every worker died");
      continue;
    }
    if (seen == log->n) {
      /* a fault during another's recovery: the driver saw its node go */
      size_t left = find(log, k + 1, RH_EV_LEFT, e->time);
      if (left < log->n && log->events[left].node == inc->fault->node) {
        inc->how = HOW_DURING;
        inc->noticed = log->events[left].time;
      } else {
        inc->how = windowed(inc->fault) ? HOW_DELAY : HOW_NONE;
      }
      if (inc->how == HOW_DELAY)
        inc->slow = slowdown(res, out, n, inc->at, inc->until, end, &inc->slow_steps, -1);
      continue;
    }
    /* what came of it: a new world, a stop (and maybe a relaunch), or the end */
    size_t w = log->n, stop = log->n, ended = log->n;
    for (size_t j = seen; j < log->n; j++) {
      const rh_event *x = &log->events[j];
      if (x->kind == RH_EV_WORLD && x->generation > e->generation && w == log->n) w = j;
      if (x->kind == RH_EV_STOPPED && stop == log->n) stop = j;
      if (x->kind == RH_EV_ENDED && ended == log->n) ended = j;
    }
    /* a job that ends keeps only its checkpoints; a relaunch resumes from the newest one */
    double ckpt = checkpoint_before(res, e->time);
    if (ended < w && ended < stop) {
      inc->how = HOW_ENDED;
      inc->from = ckpt;
      inc->to = end;
      snprintf(inc->world, sizeof inc->world, "%s", log->events[ended].text);
    } else if (stop < w) {
      size_t again = find(log, stop, RH_EV_RELAUNCH, log->events[stop].time);
      inc->from = ckpt;
      if (again == log->n) {
        /* why the driver did not relaunch it: its reason, else there was no restart policy */
        size_t why = find(log, stop, RH_EV_ENDED, log->events[stop].time);
        inc->how = HOW_STOPPED;
        inc->to = end;
        snprintf(inc->world, sizeof inc->world, "%s",
                 why < log->n ? log->events[why].text : "no restart policy");
      } else {
        inc->how = HOW_RELAUNCH;
        inc->world_at = log->events[again].time;
        inc->after = (int)log->events[again].a;
        inc->to = end;
        for (size_t r = 0; r < res->nruns; r++)
          if (res->runs[r].start >= inc->world_at) {
            inc->to = inc->synced = res->runs[r].start;
            break;
          }
        size_t nw = find(log, again, RH_EV_WORLD, inc->world_at);
        if (nw < log->n) snprintf(inc->world, sizeof inc->world, "%s", log->events[nw].text);
      }
    } else if (w < log->n) {
      inc->how = inc->how == HOW_HOSTS ? HOW_HOSTS : HOW_ELASTIC;
      inc->world_at = log->events[w].time;
      inc->after = (int)log->events[w].a;
      snprintf(inc->world, sizeof inc->world, "%s", log->events[w].text);
      /* the nodes that left on the way */
      for (size_t j = seen; j < w; j++)
        if (log->events[j].kind == RH_EV_LEFT) {
          size_t have = strlen(inc->world);
          snprintf(inc->world + have, sizeof inc->world - have, "; node %d left: %s",
                   log->events[j].node, log->events[j].text);
        }
      if (inc->how == HOW_ELASTIC)
        for (size_t j = seen; j < w; j++)
          if (log->events[j].kind == RH_EV_RESTORED) {
            inc->from = fmin(log->events[j].a, inc->at);
            inc->redone = (long)log->events[j].b;
            if (log->events[j].rank == 0) break;
          }
      /* without a sync the recovery ends with the new world: a later one is another's */
      size_t sy = no_sync ? w : find(log, w, RH_EV_SYNCED, inc->world_at);
      inc->synced = sy < log->n && !no_sync ? log->events[sy].time : inc->world_at;
      inc->to = inc->synced;
      /* a failure during the recovery re-forms the world again: the sync is the last world's */
      for (size_t j = w + 1; j < log->n && j < sy; j++)
        if (log->events[j].kind == RH_EV_WORLD) {
          inc->world_at = log->events[j].time;
          inc->after = (int)log->events[j].a;
          snprintf(inc->world, sizeof inc->world, "%s", log->events[j].text);
          inc->attempts++;
        }
    }
  }
  return n;
}

/* The GPU-time the job held from 0 to end, and the part of it in the world (GPU-seconds).  A
 * node that failed is blacklisted but stays allocated to the job until it ends, its GPUs idle
 * and held; a host that discovery removed is given back. */
static void gpu_time(const incident *inc, int n, int first_size, double end, double *held,
                     double *in_world) {
  double t = 0, w = first_size, idle = 0;
  *held = *in_world = 0;
  for (int i = 0; i < n; i++) {
    const incident *c = &inc[i];
    bool resized = c->how == HOW_ELASTIC || c->how == HOW_HOSTS || c->how == HOW_RELAUNCH;
    if (!resized || isnan(c->world_at) || c->world_at > end) continue;
    double at = fmax(t, c->world_at);
    *in_world += w * (at - t);
    *held += (w + idle) * (at - t);
    if (c->how == HOW_ELASTIC && c->before > c->after) idle += c->before - c->after;
    w = c->after;
    t = at;
  }
  *in_world += w * (end - t);
  *held += (w + idle) * (end - t);
}

/* Incidents in order of the start of their lost interval, the first analysed first on a tie. */
typedef struct by_from_key { double from; int index; } by_from_key;

static int by_from(const void *a, const void *b) {
  const by_from_key *x = a, *y = b;
  if (x->from != y->from) return (x->from > y->from) - (x->from < y->from);
  return (x->index > y->index) - (x->index < y->index);
}

/* The lost intervals, merged: their total within [t0, t1). */
static double lost_within(const incident *inc, int n, double t0, double t1) {
  double total = 0, reach = t0;
  by_from_key *order = calloc((size_t)(n ? n : 1), sizeof *order);
  for (int i = 0; order && i < n; i++) order[i] = (by_from_key){inc[i].from, i};
  if (order) qsort(order, (size_t)n, sizeof *order, by_from);
  for (int round = 0; order && round < n; round++) {
    const incident *c = &inc[order[round].index];
    if (c->how == HOW_NONE || c->how == HOW_DELAY || c->how == HOW_DURING || c->how == HOW_GONE)
      continue;
    double a = fmax(fmax(c->from, reach), t0), b = fmin(c->to, t1);
    if (b > a) total += b - a;
    if (c->to > reach) reach = c->to;
  }
  free(order);
  return total;
}

/* Every incident of the log, analysed: *n of them (0, and NULL, when there is none or no memory
 * for them: *n is then -1). */
static incident *incidents_of(const rh_fault_plan *plan, const rh_joblog *log,
                              const rh_train_result *res, double end, int *n) {
  size_t cap = 0;
  for (size_t k = 0; log && k < log->n; k++)
    cap += log->events[k].kind == RH_EV_FAULT ||
           (log->events[k].kind == RH_EV_RESET && log->events[k].a == 2);
  *n = 0;
  if (cap == 0 || cap > INT_MAX) return NULL;
  incident *inc = calloc(cap, sizeof *inc);
  if (!inc) {
    *n = -1;
    return NULL;
  }
  *n = analyse(plan, log, res, end, inc, (int)cap);
  return inc;
}

double rh_failure_lost_within(const rh_fault_plan *plan, const rh_joblog *log,
                              const rh_train_result *res, double end, double t0, double t1) {
  int n;
  incident *inc = incidents_of(plan, log, res, end, &n);
  if (n < 0) n = 0;
  end = job_end(log, end);
  double lost = lost_within(inc, n, t0, t1);
  for (int i = 0; i < n; i++)
    if (inc[i].how == HOW_DELAY)
      lost += slowdown(res, inc, n, fmax(inc[i].at, t0), fmin(inc[i].until, t1), end, NULL, -1);
  free(inc);
  return lost;
}

static int by_time(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Seconds as the report prints them: to the microsecond, or with 7 digits where that would be
 * more than 16 of them (a degradation that went on for ages). */
#define SECONDS_LEN 32
static const char *seconds(char *buf, double x) {
  snprintf(buf, SECONDS_LEN, fabs(x) < 1e9 ? "%.6f" : "%.7g", x);
  return buf;
}

/* Which of the plan's scripted faults took effect (one flag each; NULL without memory). */
static uint8_t *fired_faults(const rh_fault_plan *plan, const rh_joblog *log) {
  uint8_t *fired = calloc((size_t)(plan && plan->nfaults > 0 ? plan->nfaults : 1), 1);
  for (size_t k = 0; fired && log && k < log->n; k++)
    if (log->events[k].kind == RH_EV_FAULT && log->events[k].fault >= 0 &&
        log->events[k].fault < plan->nfaults)
      fired[log->events[k].fault] = 1;
  return fired;
}

/* How many of the discovery's changes the driver never saw (the job ended before its poll after
 * them): it sees them in order, one RH_EV_HOSTS each, so they are the last ones. */
static int unseen_changes(const rh_elastic_config *elastic, const rh_joblog *log) {
  if (!elastic) return 0;
  int seen = 0;
  for (size_t k = 0; log && k < log->n; k++) seen += log->events[k].kind == RH_EV_HOSTS;
  return seen < elastic->nchanges ? elastic->nchanges - seen : 0;
}

void rh_failure_totals_free(rh_failure_totals *t) {
  free(t->struck);
  t->struck = NULL;
  t->nstruck = 0;
}

void rh_failure_report(FILE *out, json_t *root, const rh_fault_plan *plan,
                       const rh_elastic_config *elastic, const rh_joblog *log,
                       const rh_train_result *res, double end, rh_failure_totals *t) {
  *t = (rh_failure_totals){.goodput = 1, .none_left = none_left(log, end)};
  int n;
  incident *inc = incidents_of(plan, log, res, end, &n);
  t->end = end = job_end(log, end);
  uint8_t *fired = fired_faults(plan, log);
  t->struck = calloc((size_t)(n > 0 ? n : 1), sizeof *t->struck);
  if (n < 0 || !fired || !t->struck) {
    if (out) fprintf(out, "\nfailures\n  no memory to analyse the job's failures\n");
    free(inc);
    free(fired);
    rh_failure_totals_free(t);
    return;
  }
  for (int e = 0; e < res->epochs; e++) {
    t->commit += res->epochs_stats[e].commit;
    t->checkpoint += res->epochs_stats[e].checkpoint;
  }
  double lost = lost_within(inc, n, 0, end), slow = 0, recovery = 0;
  int recoveries = 0;
  for (int i = 0; i < n; i++) {
    if (inc[i].how == HOW_ELASTIC || inc[i].how == HOW_RELAUNCH || inc[i].how == HOW_ENDED ||
        inc[i].how == HOW_STOPPED || inc[i].how == HOW_DURING)
      t->struck[t->nstruck++] = inc[i].at;
    slow += inc[i].slow;
    t->resets += inc[i].how == HOW_ELASTIC || inc[i].how == HOW_HOSTS;
    t->relaunches += inc[i].how == HOW_RELAUNCH;
    if ((inc[i].how == HOW_ELASTIC || inc[i].how == HOW_RELAUNCH) && !isnan(inc[i].synced)) {
      recovery += inc[i].synced - inc[i].noticed;
      recoveries++;
    }
  }
  int first_size = res->nruns ? res->runs[0].size : 0;
  qsort(t->struck, (size_t)t->nstruck, sizeof *t->struck, by_time);
  t->incidents = n;
  t->lost = fmin(lost + slow, end); /* overlapping windows and recoveries are not more than all */
  t->slow = slow;
  t->step = nominal_step(res, inc, n, first_size);
  t->recovery = recoveries ? recovery / recoveries : NAN;
  /* the time that counted, times the share of the GPUs held that were in the world */
  gpu_time(inc, n, first_size, end, &t->gpu_held, &t->gpu_in_world);
  double share = t->gpu_held > 0 ? t->gpu_in_world / t->gpu_held : 1;
  t->time_goodput = end > 0 ? fmax(0, (end - t->lost - t->commit - t->checkpoint) / end) : 1;
  t->goodput = t->time_goodput * share;

  /* scripted faults whose trigger the job never reached */
  int unfired = 0;
  for (int i = 0; plan && i < plan->nfaults; i++) unfired += !fired[i];
  /* and discovery changes the job ended before the driver saw */
  int unseen = unseen_changes(elastic, log);
  unfired += unseen;
  json_t *events = json_array();
  if (out && (n || unfired || t->commit > 0 || t->checkpoint > 0)) fprintf(out, "\nfailures\n");
  /* the first RH_FAILURE_LISTED incidents have their lines; every one has its JSON */
  int listed = 0;
  for (int i = 0; i < n; i++) {
    incident *c = &inc[i];
    FILE *o = listed < RH_FAILURE_LISTED ? out : NULL;
    listed += o != NULL;
    char what[160];
    if (c->fault) describe_fault(c->fault, what, sizeof what);
    else snprintf(what, sizeof what, "host change");
    double cost = c->how == HOW_DELAY ? c->slow
                  : c->how == HOW_NONE || c->how == HOW_DURING || c->how == HOW_GONE ? 0
                  : c->to - c->from;
    json_t *j = json_pack("{s:s, s:f, s:s}", "event", what, "time_s", c->at, "outcome", how_names[c->how]);
    char origin[64] = "", set[40];
    if (c->fault && c->fault->line) {
      rh_scenario_event_origin(c->fault->line, c->index, origin, sizeof origin);
      snprintf(set, sizeof set, "failures.events[%d]", c->index);
      if (rh_scenario_line_is_set(c->fault->line))
        json_object_set_new(j, "set", json_string(set));
      else json_object_set_new(j, "line", json_integer(c->fault->line));
    }
    if (c->fault && c->fault->line == 0) json_object_set_new(j, "random", json_true());
    if (c->epoch >= 0) {
      json_object_set_new(j, "epoch", json_integer(c->epoch + 1));
      json_object_set_new(j, "step", json_integer(c->step + 1));
    }
    if (o) {
      fprintf(o, "  %d. %s at %.6f s", i + 1, what, c->at);
      if (c->epoch >= 0) fprintf(o, " (epoch %d, step %ld", c->epoch + 1, c->step + 1);
      if (c->fault && c->fault->line)
        fprintf(o, "%s%s%s", c->epoch >= 0 ? "; " : " (",
                rh_scenario_line_is_set(c->fault->line) ? "" : "scenario ", origin);
      else if (c->fault) fprintf(o, "%sa random failure", c->epoch >= 0 ? "; " : " (");
      if (c->epoch >= 0 || c->fault) fprintf(o, ")");
      fprintf(o, "\n");
    }
    if (c->how == HOW_DELAY) {
      char until[SECONDS_LEN], slower[SECONDS_LEN];
      if (o)
        fprintf(o, "     until %s s: %ld step%s ran in the window, %s s slower in all\n",
                seconds(until, c->until), c->slow_steps, c->slow_steps == 1 ? "" : "s",
                seconds(slower, c->slow));
      json_object_set_new(j, "until_s", json_real(c->until));
      json_object_set_new(j, "slow_steps", json_integer(c->slow_steps));
    } else if (c->how == HOW_NONE) {
      if (o) fprintf(o, "     nobody noticed it\n");
    } else if (c->how == HOW_GONE) {
      if (o && c->left_in)
        fprintf(o, "     node %d had already left the job (event %d)\n", c->fault->node,
                c->left_in);
      else if (o)
        fprintf(o, "     node %d had already left the job\n", c->fault->node);
      if (c->left_in) json_object_set_new(j, "left_in_event", json_integer(c->left_in));
    } else if (c->how == HOW_DURING) {
      if (o) fprintf(o, "     during the recovery of another failure: its node left at %.6f s\n", c->noticed);
    } else if (c->unseen) {
      if (o) fprintf(o, "     no worker of the job was left to notice it\n");
    } else if (c->fault) { /* a host change is the driver's own: no rank notices it */
      if (o) fprintf(o, "     noticed %+.6f s after: %s\n", c->noticed - c->at, c->seen);
      json_object_set_new(j, "detection_s", json_real(c->noticed - c->at));
      json_object_set_new(j, "noticed_by", json_string(c->seen));
    }
    if (c->how == HOW_ELASTIC || c->how == HOW_HOSTS) {
      double work = c->at - c->from, rdv = c->world_at - c->noticed, sync = c->synced - c->world_at;
      if (o) {
        fprintf(o, "     elastic reset: %d -> %d rank%s, %s%s\n", c->before, c->after,
                c->after == 1 ? "" : "s", c->world,
                c->attempts ? " (formed again: a failure hit the recovery)" : "");
        if (c->how == HOW_ELASTIC)
          fprintf(o, "     cost %.6f s = redone %.6f s (%ld step%s begun since the last commit) + "
                       "detection %.6f s + rendezvous %.6f s + sync %.6f s\n",
                  cost, work, c->redone, c->redone == 1 ? "" : "s", c->noticed - c->at, rdv, sync);
        else
          fprintf(o, "     cost %.6f s = rendezvous %.6f s + sync %.6f s\n", cost, rdv, sync);
      }
      json_object_set_new(j, "ranks_before", json_integer(c->before));
      json_object_set_new(j, "ranks_after", json_integer(c->after));
      json_object_set_new(j, "world", json_string(c->world));
      json_object_set_new(j, "rendezvous_s", json_real(rdv));
      json_object_set_new(j, "sync_s", json_real(sync));
      json_object_set_new(j, "redone_s", json_real(work));
      json_object_set_new(j, "steps_redone", json_integer(c->redone));
    } else if (c->how == HOW_RELAUNCH) {
      double work = c->at - c->from, relaunch = c->world_at - c->noticed, restore = c->to - c->world_at;
      if (o) {
        fprintf(o, "     relaunched at %.6f s on %d rank%s (%s) from the checkpoint of %.6f s\n",
                c->world_at, c->after, c->after == 1 ? "" : "s", c->world, c->from);
        fprintf(o, "     cost %.6f s = redone %.6f s since the checkpoint + detection %.6f s + "
                     "relaunch %.6f s + restart and restore %.6f s\n",
                cost, work, c->noticed - c->at, relaunch, restore);
      }
      json_object_set_new(j, "ranks_after", json_integer(c->after));
      json_object_set_new(j, "relaunch_s", json_real(relaunch));
      json_object_set_new(j, "restore_s", json_real(restore));
      json_object_set_new(j, "redone_s", json_real(work));
    } else if (c->how == HOW_ENDED || c->how == HOW_STOPPED) {
      if (o) {
        if (c->how == HOW_ENDED) fprintf(o, "     the job ended: %s\n", c->world);
        else fprintf(o, "     the job stopped (%s)\n", c->world);
        char lost_s[SECONDS_LEN];
        fprintf(o, "     lost %s s: all since %s\n", seconds(lost_s, cost),
                c->from > 0 ? "its last checkpoint" : "the start (no checkpoint was written)");
      }
    }
    json_object_set_new(j, "cost_s", json_real(cost));
    json_array_append_new(events, j);
  }
  int k = n;
  for (int i = 0; plan && i < plan->nfaults; i++) {
    if (fired[i]) continue;
    FILE *o = listed < RH_FAILURE_LISTED ? out : NULL;
    listed += o != NULL;
    char what[160];
    describe_fault(&plan->faults[i], what, sizeof what);
    int line = plan->faults[i].line;
    bool set = rh_scenario_line_is_set(line);
    char origin[64], path[40];
    rh_scenario_event_origin(line, i, origin, sizeof origin);
    snprintf(path, sizeof path, "failures.events[%d]", i);
    if (o)
      fprintf(o, "  %d. %s (%s%s)\n     never happened: the job ended at %.6f s, before its "
                 "trigger\n", ++k, what, set ? "" : "scenario ", origin, end);
    json_t *j = json_pack("{s:s}", "event", what);
    json_object_set_new(j, set ? "set" : "line", set ? json_string(path) : json_integer(line));
    json_object_set_new(j, "outcome", json_string("never happened"));
    json_object_set_new(j, "cost_s", json_real(0.0));
    json_array_append_new(events, j);
  }
  for (int i = elastic ? elastic->nchanges - unseen : 0; elastic && i < elastic->nchanges; i++) {
    FILE *o = listed < RH_FAILURE_LISTED ? out : NULL;
    listed += o != NULL;
    const rh_host_change *c = &elastic->changes[i];
    char what[80], origin[64] = "", path[40];
    snprintf(what, sizeof what, "host change: node %d %s", c->node, c->added ? "added" : "removed");
    bool set = rh_scenario_line_is_set(c->line);
    snprintf(path, sizeof path, "elastic.discovery[%d]", i);
    if (set) snprintf(origin, sizeof origin, " (--set elastic.discovery, change %d)", i + 1);
    else if (c->line) snprintf(origin, sizeof origin, " (scenario line %d)", c->line);
    /* the driver would have seen it at its next poll of the discovery script */
    double p = elastic->discovery_interval, poll = p > 0 ? ceil(c->at / p) * p : c->at;
    if (o)
      fprintf(o, "  %d. %s at %.6f s%s\n     never happened: the job ended at %.6f s, before the "
                 "driver's poll at %.6f s (discovery_interval_s %g)\n", ++k, what, c->at, origin,
              end, poll, p);
    json_t *j = json_pack("{s:s}", "event", what);
    if (set) json_object_set_new(j, "set", json_string(path));
    else if (c->line) json_object_set_new(j, "line", json_integer(c->line));
    json_object_set_new(j, "outcome", json_string("never happened"));
    json_object_set_new(j, "cost_s", json_real(0.0));
    json_array_append_new(events, j);
  }
  if (out && listed < n + unfired)
    fprintf(out, "  ... and %d more (in the total, and each in summary.json)\n",
            n + unfired - listed);
  char lost_s[SECONDS_LEN], end_s[SECONDS_LEN], slow_s[SECONDS_LEN];
  if (out && (n || unfired || t->commit > 0 || t->checkpoint > 0))
    fprintf(out, "  total        %s s lost of %s s (%s s in slower steps); commits %.6f s, "
                 "checkpoints %.6f s; goodput %.2f%%\n",
            seconds(lost_s, t->lost), seconds(end_s, end), seconds(slow_s, slow), t->commit,
            t->checkpoint, 100 * t->goodput);
  if (root)
    json_object_set_new(root, "failures",
                        json_pack("{s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i}", "events",
                                  events, "lost_s", t->lost, "slow_steps_s", slow, "commit_s",
                                  t->commit, "checkpoint_s", t->checkpoint, "goodput", t->goodput,
                                  "gpu_seconds_held", t->gpu_held, "gpu_seconds_in_world",
                                  t->gpu_in_world, "resets", t->resets, "relaunches",
                                  t->relaunches));
  else
    json_decref(events);
  free(inc);
  free(fired);
}
