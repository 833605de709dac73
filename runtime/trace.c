/*
 * trace.c: the timeline of a job (`--timeline FILE`): what each rank did, as a Chrome trace /
 * Perfetto JSON file (the Trace Event Format of Horovod's HOROVOD_TIMELINE; chrome://tracing and
 * ui.perfetto.dev open it).
 *
 *   process "node N"   thread "rank R (gpu G)"       its steps: forward and backward (by layer),
 *                                                    the wait for gradients; commits, checkpoints;
 *                                                    failures noticed, rendezvous, recovery
 *                      thread "rank R collectives"   each collective: negotiate, then its phases
 *                      thread "NVLink", "uplink"     the phases that cross the node's links, as
 *                                                    the node's first rank ran them
 *                      thread "faults"               faults that hit the node (simulator)
 *   process "job"      thread "events"               worlds formed, nodes that left, relaunches,
 *                                                    and a counter of the ranks
 *
 * Each worker records into a recorder of its own.  A slice is kept as one complete event ("X")
 * when it ends, and each track is put in time order when the file is written: every slice has
 * its end and every track's times grow.  A rank's collectives run on a background thread beside
 * its own work on real targets, so a recorder's tracks are kept under a spin lock (never
 * contended on the simulator, where actors take turns).
 *
 * What a long run keeps, per rank, of its budget of events:
 * - detail (the collectives, and slices nested two deep: the layers) for the first FULL_STEPS
 *   steps of each world, while less than a quarter of the budget went to it;
 * - from half the budget, the top slices of an epoch merge into one slice per run of steps, the
 *   time of each category summed inside it, so the sums the epoch's figures are made of remain;
 * - from three quarters, runs no longer end at epochs, and moments are left out.
 */
#include "internal.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { FULL_STEPS = 5, MAX_DEPTH = 12, MAX_NUMS = 4, MAX_CATS = 8, MAX_NAMED_RANKS = 6 };

#define LEAD 4u /* links bit: recorded by the first rank of its node (the link tracks' source) */

typedef struct trace_num {
  char key[16];
  double value;
} trace_num;

typedef struct trace_event {
  double ts, dur; /* seconds on the job's clock; dur < 0: a moment */
  uint32_t seq;   /* order of recording, for ties */
  uint8_t depth;  /* nesting when it began */
  uint8_t links;  /* RH_LINK_* and LEAD */
  uint8_t nnum;
  char cat[16];
  char name[64];
  trace_num num[MAX_NUMS];
  char text_key[12], text[28];
  char *detail; /* a long text, owned; NULL: none */
} trace_event;

/* What becomes of a slice when it ends. */
typedef enum { KEEP, DROP, FOLD_STEP, FOLD_CHILD, FOLD_SELF } fate;

typedef struct open_slice {
  trace_event ev;
  fate fate;
} open_slice;

typedef struct track {
  trace_event *ev;
  size_t n, cap;
  open_slice open[MAX_DEPTH];
  int depth;          /* may pass MAX_DEPTH: slices that deep are not kept */
  bool moment_last;   /* the last thing recorded was a moment (args go to it) */
  uint32_t seq;
} track;

/* Top slices of an epoch merged into one: how long, how many steps, each category's time. */
typedef struct run {
  bool open;
  double start, end;
  int epoch;
  uint32_t generation;
  long steps;
  int ncat;
  char cat[MAX_CATS][16];
  double sum[MAX_CATS];
} run;

struct rh_tracer {
  rh_timeline *tl;
  int node, slot, gpu, order;
  atomic_flag lock;
  track tracks[RH_TRACKS];
  uint32_t generation;
  long world_steps; /* ctx->steps_begun when this world began */
  atomic_int detail; /* collectives are recorded: set by the rank's own thread at each step */
  double recovery;   /* when the world formed, no step begun since; NAN: none */
  double committed;  /* when the last commit ended (the job's start before one) */
  run run;
  int ranks[MAX_NAMED_RANKS], nranks; /* the ranks it had, for its track's name */
  long left_out, merged;
};

struct rh_timeline {
  char target[16];
  bool simulated;
  long budget; /* events per rank */
  rh_tracer **workers;
  size_t n, cap;
};

/* ---- the timeline and its recorders ----------------------------------------------------- */

rh_timeline *rh__timeline_new(const char *target, bool simulated, int ranks, long events) {
  rh_timeline *tl = calloc(1, sizeof *tl);
  if (!tl) return NULL;
  snprintf(tl->target, sizeof tl->target, "%s", target ? target : "");
  tl->simulated = simulated;
  long share = RH_TIMELINE_EVENTS / (ranks > 0 ? ranks : 1);
  tl->budget = events > 0 ? events : share > 256 ? share : 256;
  return tl;
}

static void track_free(track *k) {
  for (size_t i = 0; i < k->n; i++) free(k->ev[i].detail);
  for (int d = 0; d < k->depth && d < MAX_DEPTH; d++) free(k->open[d].ev.detail);
  free(k->ev);
}

void rh__timeline_free(rh_timeline *tl) {
  if (!tl) return;
  for (size_t i = 0; i < tl->n; i++) {
    for (int k = 0; k < RH_TRACKS; k++) track_free(&tl->workers[i]->tracks[k]);
    free(tl->workers[i]);
  }
  free(tl->workers);
  free(tl);
}

static void note_rank(rh_tracer *t, int rank) {
  if (t->nranks > 0 && t->ranks[t->nranks - 1] == rank) return;
  if (t->nranks < MAX_NAMED_RANKS) t->ranks[t->nranks++] = rank;
}

rh_tracer *rh__timeline_add(rh_timeline *tl, const rh_ctx *ctx, int node, int slot, int gpu) {
  if (!tl) return NULL;
  if (tl->n == tl->cap) {
    size_t cap = tl->cap ? 2 * tl->cap : 16;
    rh_tracer **grown = realloc(tl->workers, cap * sizeof *grown);
    if (!grown) return NULL;
    tl->workers = grown;
    tl->cap = cap;
  }
  rh_tracer *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->tl = tl;
  t->node = node;
  t->slot = slot;
  t->gpu = gpu;
  t->order = (int)tl->n;
  atomic_flag_clear(&t->lock);
  t->generation = ctx->generation;
  t->world_steps = ctx->steps_begun;
  atomic_init(&t->detail, 1);
  t->recovery = NAN;
  note_rank(t, ctx->rank);
  tl->workers[tl->n++] = t;
  return t;
}

static void lock(rh_tracer *t) {
  while (atomic_flag_test_and_set_explicit(&t->lock, memory_order_acquire)) {
  }
}

static void unlock(rh_tracer *t) { atomic_flag_clear_explicit(&t->lock, memory_order_release); }

/* ---- recording ---------------------------------------------------------------------------- */

/* Copies what fits of src into dst (n bytes), cut short where it does not. */
static void copy(char *dst, size_t n, const char *src) {
  size_t k = src ? strnlen(src, n - 1) : 0;
  if (k) memcpy(dst, src, k);
  dst[k] = 0;
}

static trace_event *push(track *k) {
  if (k->n == k->cap) {
    size_t cap = k->cap ? 2 * k->cap : 32;
    trace_event *grown = realloc(k->ev, cap * sizeof *grown);
    if (!grown) return NULL; /* a report: losing an event must not stop the job */
    k->ev = grown;
    k->cap = cap;
  }
  trace_event *e = &k->ev[k->n++];
  memset(e, 0, sizeof *e);
  e->seq = k->seq++;
  return e;
}

static void set_num(trace_event *e, const char *key, double value) {
  for (int i = 0; i < e->nnum; i++)
    if (strcmp(e->num[i].key, key) == 0) {
      e->num[i].value = value;
      return;
    }
  if (e->nnum == MAX_NUMS) return;
  copy(e->num[e->nnum].key, sizeof e->num[0].key, key);
  e->num[e->nnum++].value = value;
}

static double num_of(const trace_event *e, const char *key, double otherwise) {
  for (int i = 0; i < e->nnum; i++)
    if (strcmp(e->num[i].key, key) == 0) return e->num[i].value;
  return otherwise;
}

static void describe(trace_event *e, const char *cat, const char *name) {
  copy(e->cat, sizeof e->cat, cat);
  copy(e->name, sizeof e->name, name);
}

static long kept(const rh_tracer *t, int k) { return (long)t->tracks[k].n; }

/* The event that args go to: the newest open slice, else the moment just recorded. */
static trace_event *newest(track *k) {
  if (k->depth > 0) return k->depth <= MAX_DEPTH ? &k->open[k->depth - 1].ev : NULL;
  return k->moment_last && k->n > 0 ? &k->ev[k->n - 1] : NULL;
}

/* A run's category: its place among the sums. */
static void run_add(run *r, const char *cat, double dur) {
  int i = 0;
  while (i < r->ncat && strcmp(r->cat[i], cat) != 0) i++;
  if (i == r->ncat) {
    if (r->ncat == MAX_CATS) i = MAX_CATS - 1; /* a program of many categories: the last takes the rest */
    else copy(r->cat[r->ncat++], sizeof r->cat[0], cat);
  }
  r->sum[i] += dur;
}

/* The merged run as slices: one for the run, inside it one per category, back to back (their
 * times happened inside the run, interleaved; only the sums are kept). */
static void run_flush(rh_tracer *t) {
  run *r = &t->run;
  if (!r->open) return;
  r->open = false;
  track *k = &t->tracks[RH_TRACK_MAIN];
  trace_event *e = push(k);
  if (!e) return;
  e->ts = r->start;
  e->dur = r->end - r->start;
  snprintf(e->cat, sizeof e->cat, "step");
  if (r->epoch >= 0)
    snprintf(e->name, sizeof e->name, "epoch %d: %ld step%s, merged", r->epoch + 1, r->steps,
             r->steps == 1 ? "" : "s");
  else
    snprintf(e->name, sizeof e->name, "%ld step%s, merged", r->steps, r->steps == 1 ? "" : "s");
  set_num(e, "steps", (double)r->steps);
  if (r->epoch >= 0) set_num(e, "epoch", r->epoch + 1);
  double at = r->start;
  for (int i = 0; i < r->ncat; i++) {
    trace_event *c = push(k);
    if (!c) return;
    c->ts = at;
    c->dur = r->sum[i];
    c->depth = 1;
    describe(c, r->cat[i], r->cat[i]);
    if (r->epoch >= 0) set_num(c, "epoch", r->epoch + 1);
    at += r->sum[i];
  }
}

/* A top slice that merges begins at `at`: it joins the open run, unless that run is of another
 * epoch or world (past three quarters of the budget runs go on regardless). */
static void run_join(rh_tracer *t, const rh_ctx *ctx, double at) {
  run *r = &t->run;
  bool hard = kept(t, RH_TRACK_MAIN) >= 3 * t->tl->budget / 4;
  if (r->open && !hard && (r->epoch != ctx->epoch || r->generation != ctx->generation))
    run_flush(t);
  if (!r->open)
    *r = (run){.open = true, .start = at, .end = at, .epoch = ctx->epoch,
               .generation = ctx->generation};
}

/* Whether detail is kept: the world's first steps, while a quarter of the budget lasts. */
static bool detailed(const rh_tracer *t, const rh_ctx *ctx, int k) {
  return ctx->steps_begun - t->world_steps <= FULL_STEPS && kept(t, k) < t->tl->budget / 4;
}

static fate fate_of(rh_tracer *t, const rh_ctx *ctx, int k, int depth, const char *cat) {
  track *tr = &t->tracks[k];
  fate parent = depth > 0 ? tr->open[depth - 1].fate : KEEP;
  if (k == RH_TRACK_COMM) {
    if (depth > 0) return parent == KEEP ? KEEP : DROP;
    return atomic_load(&t->detail) && kept(t, k) < t->tl->budget / 4 ? KEEP : DROP;
  }
  if (depth == 0) {
    if (kept(t, k) < t->tl->budget / 2) return KEEP;
    return cat && strcmp(cat, "step") == 0 ? FOLD_STEP : FOLD_SELF;
  }
  if (depth == 1) return parent == KEEP ? KEEP : parent == FOLD_STEP ? FOLD_CHILD : DROP;
  return parent == KEEP && detailed(t, ctx, k) ? KEEP : DROP;
}

static void close_slice(rh_tracer *t, track *k, open_slice *o, double at) {
  trace_event *ev = &o->ev;
  if (at < ev->ts) at = ev->ts;
  ev->dur = at - ev->ts;
  if (strcmp(ev->cat, "commit") == 0) t->committed = at;
  run *r = &t->run;
  switch (o->fate) {
  case KEEP: {
    trace_event *e = push(k);
    if (e) {
      uint32_t seq = e->seq;
      *e = *ev;
      e->seq = seq;
      ev->detail = NULL; /* the kept event owns it now */
    } else {
      t->left_out++;
    }
    break;
  }
  case FOLD_STEP:
    r->steps += (long)num_of(ev, "steps", 1);
    r->end = fmax(r->end, at);
    t->merged++;
    break;
  case FOLD_SELF:
    run_add(r, ev->cat, ev->dur);
    r->end = fmax(r->end, at);
    t->merged++;
    break;
  case FOLD_CHILD:
    run_add(r, ev->cat, ev->dur);
    t->merged++;
    break;
  case DROP: t->left_out++; break;
  }
  free(ev->detail);
  ev->detail = NULL;
}

void rh__trace_begin(rh_ctx *ctx, int k, const char *cat, const char *name, double at,
                     unsigned links) {
  rh_tracer *t = ctx->trace;
  if (!t) return;
  double now = isnan(at) ? ctx->ops->now(ctx) : at;
  lock(t);
  track *tr = &t->tracks[k];
  int depth = tr->depth++;
  tr->moment_last = false;
  if (depth < MAX_DEPTH) {
    open_slice *o = &tr->open[depth];
    if (depth > 0 && now < tr->open[depth - 1].ev.ts) now = tr->open[depth - 1].ev.ts;
    o->fate = fate_of(t, ctx, k, depth, cat);
    if (o->fate == FOLD_STEP || o->fate == FOLD_SELF) run_join(t, ctx, now);
    memset(&o->ev, 0, sizeof o->ev);
    o->ev.ts = now;
    o->ev.depth = (uint8_t)depth;
    o->ev.links = (uint8_t)(links | (ctx->node.me == 0 ? LEAD : 0));
    describe(&o->ev, cat, name);
    if (k == RH_TRACK_MAIN && depth <= 1 && ctx->epoch >= 0) set_num(&o->ev, "epoch", ctx->epoch + 1);
  }
  unlock(t);
}

void rh__trace_end(rh_ctx *ctx, int k, double at) {
  rh_tracer *t = ctx->trace;
  if (!t) return;
  double now = isnan(at) ? ctx->ops->now(ctx) : at;
  lock(t);
  track *tr = &t->tracks[k];
  tr->moment_last = false;
  if (tr->depth > 0) {
    int depth = --tr->depth;
    if (depth < MAX_DEPTH) close_slice(t, tr, &tr->open[depth], now);
    else t->left_out++;
  }
  unlock(t);
}

void rh__trace_num(rh_ctx *ctx, int k, const char *key, double value) {
  rh_tracer *t = ctx->trace;
  if (!t || !key) return;
  lock(t);
  trace_event *e = newest(&t->tracks[k]);
  if (e) set_num(e, key, value);
  unlock(t);
}

void rh__trace_text(rh_ctx *ctx, int k, const char *key, const char *value) {
  rh_tracer *t = ctx->trace;
  if (!t || !key || !value) return;
  lock(t);
  trace_event *e = newest(&t->tracks[k]);
  if (e) {
    copy(e->text_key, sizeof e->text_key, key);
    copy(e->text, sizeof e->text, value);
  }
  unlock(t);
}

void rh__trace_detail(rh_ctx *ctx, int k, const char *text) {
  rh_tracer *t = ctx->trace;
  if (!t || !text) return;
  lock(t);
  trace_event *e = newest(&t->tracks[k]);
  if (e) {
    free(e->detail);
    e->detail = strdup(text);
  }
  unlock(t);
}

void rh__trace_mark(rh_ctx *ctx, int k, const char *cat, const char *name, const char *detail) {
  rh_tracer *t = ctx->trace;
  if (!t) return;
  double now = ctx->ops->now(ctx);
  lock(t);
  track *tr = &t->tracks[k];
  bool keep = k == RH_TRACK_COMM ? atomic_load(&t->detail) && kept(t, k) < t->tl->budget / 4
                                 : kept(t, k) < 3 * t->tl->budget / 4;
  trace_event *e = keep ? push(tr) : NULL;
  tr->moment_last = e != NULL;
  if (e) {
    e->ts = now;
    e->dur = -1;
    e->depth = (uint8_t)(tr->depth < 255 ? tr->depth : 255);
    describe(e, cat, name);
    if (detail) e->detail = strdup(detail);
    if (k == RH_TRACK_MAIN && ctx->epoch >= 0) set_num(e, "epoch", ctx->epoch + 1);
  } else {
    t->left_out++;
  }
  unlock(t);
}

void rh__trace_phase(rh_ctx *ctx, const rh_group *g, const char *what) {
  if (!ctx->trace) return;
  const rh_topology *topo = ctx->topo;
  unsigned links;
  const char *where = "";
  if (g->id == 0) { /* the world: a ring over every node crosses both */
    links = (topo->nodes > 1 ? RH_LINK_UPLINK : 0) | (topo->max_local_size > 1 ? RH_LINK_NVLINK : 0);
  } else if (g->id <= (uint32_t)topo->nodes) {
    links = RH_LINK_NVLINK;
    where = "local ";
  } else if (g->id > (uint32_t)topo->nodes + (uint32_t)topo->max_local_size) {
    bool shard = g == &ctx->shard; /* a shard group of whole nodes, or its replica group */
    links = RH_LINK_UPLINK | (shard ? RH_LINK_NVLINK : 0);
    where = shard ? "shard " : "replica ";
  } else {
    links = RH_LINK_UPLINK;
    where = "cross ";
  }
  char name[64];
  rh__cat(name, sizeof name, where, what, NULL, 0);
  rh__trace_begin(ctx, RH_TRACK_COMM, "phase", name, NAN, links);
}

/* A kept slice of the main track that happened from `from` to `to`. */
static trace_event *slice(rh_tracer *t, const rh_ctx *ctx, const char *cat, const char *name,
                          double from, double to) {
  track *tr = &t->tracks[RH_TRACK_MAIN];
  trace_event *e = kept(t, RH_TRACK_MAIN) < t->tl->budget ? push(tr) : NULL;
  if (!e) {
    t->left_out++;
    return NULL;
  }
  e->ts = from;
  e->dur = to > from ? to - from : 0;
  e->depth = (uint8_t)(tr->depth < 255 ? tr->depth : 255);
  describe(e, cat, name);
  if (ctx->epoch >= 0) set_num(e, "epoch", ctx->epoch + 1);
  return e;
}

void rh__trace_step(rh_ctx *ctx) {
  rh_tracer *t = ctx->trace;
  if (!t) return;
  double now = ctx->ops->now(ctx);
  lock(t);
  if (!isnan(t->recovery)) { /* the world's first step: its recovery is over */
    slice(t, ctx, "elastic", "recovery: sync, then back to training", t->recovery, now);
    t->recovery = NAN;
  }
  atomic_store(&t->detail, ctx->steps_begun - t->world_steps <= FULL_STEPS);
  unlock(t);
}

/* A failure rolled the survivors back to their last commit: the steps begun after it, up to
 * `until`, were thrown away (the epoch table counts them as lost time, not as compute or wait),
 * so their kept slices say so, and the others still add up to the table. */
static void roll_back(rh_tracer *t, double until) {
  track *tr = &t->tracks[RH_TRACK_MAIN];
  static const char *const cats[] = {"step", "compute", "wait", "layer"};
  for (size_t i = 0; i < tr->n; i++) {
    trace_event *e = &tr->ev[i];
    if (e->dur < 0 || e->ts < t->committed || e->ts >= until) continue;
    for (size_t c = 0; c < sizeof cats / sizeof cats[0]; c++)
      if (strcmp(e->cat, cats[c]) == 0) {
        snprintf(e->cat, sizeof e->cat, "rolled back");
        set_num(e, "rolled_back", 1);
        break;
      }
  }
}

void rh__trace_world(rh_ctx *ctx, double since, rh_status st) {
  rh_tracer *t = ctx->trace;
  if (!t) return;
  double now = ctx->ops->now(ctx);
  lock(t);
  track *tr = &t->tracks[RH_TRACK_MAIN];
  /* what the program left open ends where the rendezvous began */
  while (tr->depth > 0) {
    int depth = --tr->depth;
    if (depth < MAX_DEPTH) close_slice(t, tr, &tr->open[depth], since);
  }
  tr->moment_last = false;
  run_flush(t);
  if (!isnan(t->recovery)) { /* a failure hit the recovery of the last one */
    slice(t, ctx, "elastic", "recovery, cut short", t->recovery, since);
    t->recovery = NAN;
  }
  trace_event *e = slice(t, ctx, "elastic", "rendezvous", since, now);
  if (e && st == RH_OK) {
    set_num(e, "world", ctx->generation);
    set_num(e, "rank", ctx->rank);
    set_num(e, "size", ctx->world.n);
  } else if (e) {
    snprintf(e->text_key, sizeof e->text_key, "status");
    copy(e->text, sizeof e->text, rh_status_string(st));
  }
  if (st == RH_OK) roll_back(t, since);
  if (st == RH_OK) {
    t->generation = ctx->generation;
    t->world_steps = ctx->steps_begun;
    atomic_store(&t->detail, 1);
    t->recovery = now;
    note_rank(t, ctx->rank);
  }
  unlock(t);
}

/* ---- the public calls ------------------------------------------------------------------- */

bool rh_trace_on(const rh_ctx *ctx) { return ctx && ctx->trace != NULL; }

void rh_trace_begin(rh_ctx *ctx, const char *category, const char *name) {
  rh__trace_begin(ctx, RH_TRACK_MAIN, category, name, NAN, 0);
}

void rh_trace_end(rh_ctx *ctx) { rh__trace_end(ctx, RH_TRACK_MAIN, NAN); }

void rh_trace_begin_at(rh_ctx *ctx, const char *category, const char *name, double time) {
  rh__trace_begin(ctx, RH_TRACK_MAIN, category, name, time, 0);
}

void rh_trace_end_at(rh_ctx *ctx, double time) { rh__trace_end(ctx, RH_TRACK_MAIN, time); }

void rh_trace_instant(rh_ctx *ctx, const char *category, const char *name) {
  rh__trace_mark(ctx, RH_TRACK_MAIN, category, name, NULL);
}

void rh_trace_arg(rh_ctx *ctx, const char *key, double value) {
  rh__trace_num(ctx, RH_TRACK_MAIN, key, value);
}

/* ---- writing ------------------------------------------------------------------------------ */

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void json_number(FILE *f, double v) {
  if (isfinite(v)) fprintf(f, "%.15g", v);
  else fputs("null", f);
}

/* Writes the separator before every event but the first of the part. */
typedef struct out {
  FILE *f;
  bool any;
} out;

static FILE *next(out *o) {
  if (o->any) fputs(",\n", o->f);
  o->any = true;
  return o->f;
}

static void write_args(FILE *f, const trace_event *e, const char *extra_key, const char *extra) {
  fputs(",\"args\":{", f);
  bool first = true;
  for (int i = 0; i < e->nnum; i++) {
    fprintf(f, "%s", first ? "" : ",");
    json_string(f, e->num[i].key);
    fputc(':', f);
    json_number(f, e->num[i].value);
    first = false;
  }
  if (e->text_key[0]) {
    fprintf(f, "%s", first ? "" : ",");
    json_string(f, e->text_key);
    fputc(':', f);
    json_string(f, e->text);
    first = false;
  }
  if (e->detail) {
    fprintf(f, "%s\"detail\":", first ? "" : ",");
    json_string(f, e->detail);
    first = false;
  }
  if (extra_key) {
    fprintf(f, "%s", first ? "" : ",");
    json_string(f, extra_key);
    fputc(':', f);
    json_string(f, extra);
  }
  fputc('}', f);
}

/* A time on the trace's clock: whole nanoseconds, written as microseconds (the format's unit). */
static long long nanoseconds(double seconds) { return llround(seconds * 1e9); }
static void put_us(FILE *f, long long ns) {
  fprintf(f, "%s%lld.%03lld", ns < 0 ? "-" : "", llabs(ns) / 1000, llabs(ns) % 1000);
}

/* One event of a track: a complete slice, or a moment on its thread.  A slice's start and end are
 * each rounded to the nanosecond, and its duration is their difference, so that a slice that
 * ends where the next begins does not overlap it once rounded. */
static void write_event(out *o, int pid, long tid, const trace_event *e, const char *name,
                        const char *extra_key, const char *extra) {
  FILE *f = next(o);
  long long ts = nanoseconds(e->ts);
  fprintf(f, e->dur < 0 ? "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%ld,\"ts\":"
                        : "{\"ph\":\"X\",\"pid\":%d,\"tid\":%ld,\"ts\":", pid, tid);
  put_us(f, ts);
  if (e->dur >= 0) {
    fputs(",\"dur\":", f);
    put_us(f, nanoseconds(e->ts + e->dur) - ts);
  }
  fputs(",\"cat\":", f);
  json_string(f, e->cat[0] ? e->cat : "-");
  fputs(",\"name\":", f);
  json_string(f, name ? name : e->name);
  write_args(f, e, extra_key, extra);
  fputc('}', f);
}

static void write_meta(out *o, int pid, long tid, const char *what, const char *name, long sort) {
  FILE *f = next(o);
  fprintf(f, "{\"ph\":\"M\",\"pid\":%d,", pid);
  if (tid >= 0) fprintf(f, "\"tid\":%ld,", tid);
  fprintf(f, "\"name\":\"%s\",\"args\":{\"name\":", what);
  json_string(f, name);
  fputs("}}", f);
  f = next(o);
  fprintf(f, "{\"ph\":\"M\",\"pid\":%d,", pid);
  if (tid >= 0) fprintf(f, "\"tid\":%ld,", tid);
  fprintf(f, "\"name\":\"%s_sort_index\",\"args\":{\"sort_index\":%ld}}",
          tid >= 0 ? "thread" : "process", sort);
}

/* Thread ids, unique in the file: a rank's two tracks by its slot, a node's own after them. */
static long rank_tid(int slot, int k) { return 2L * slot + k; }
static long node_tid(int node, int which) { return 1000000L + 4L * node + which; }
enum { TID_NVLINK, TID_UPLINK, TID_FAULTS, TID_JOB };

/* An event of a track, with the recorder it came from, for sorting several recorders' tracks
 * (workers that took the same slot in turn). */
typedef struct placed {
  const trace_event *e;
  int order;
} placed;

/* Time order; at the same time a slice before those nested in it, and siblings in the order
 * they were recorded (a negotiation that took no time before the phase after it). */
static int by_time(const void *a, const void *b) {
  const placed *x = a, *y = b;
  if (x->e->ts != y->e->ts) return x->e->ts < y->e->ts ? -1 : 1;
  if (x->e->depth != y->e->depth) return x->e->depth < y->e->depth ? -1 : 1;
  if (x->order != y->order) return x->order < y->order ? -1 : 1;
  return x->e->seq < y->e->seq ? -1 : x->e->seq > y->e->seq;
}

/* The latest time a recorder saw: where its open slices end. */
static double last_time(const rh_tracer *t) {
  double last = 0;
  for (int k = 0; k < RH_TRACKS; k++) {
    const track *tr = &t->tracks[k];
    for (size_t i = 0; i < tr->n; i++) last = fmax(last, tr->ev[i].ts + fmax(tr->ev[i].dur, 0));
    for (int d = 0; d < tr->depth && d < MAX_DEPTH; d++) last = fmax(last, tr->open[d].ev.ts);
  }
  if (t->run.open) last = fmax(last, t->run.end);
  if (!isnan(t->recovery)) last = fmax(last, t->recovery);
  return last;
}

/* Ends what a recorder left open (a worker killed, or one that did not end its slices), merges
 * its last run. */
static void settle(rh_tracer *t) {
  lock(t);
  double last = last_time(t);
  for (int k = 0; k < RH_TRACKS; k++) {
    track *tr = &t->tracks[k];
    while (tr->depth > 0) {
      int depth = --tr->depth;
      if (depth >= MAX_DEPTH) continue;
      set_num(&tr->open[depth].ev, "interrupted", 1);
      close_slice(t, tr, &tr->open[depth], last);
    }
  }
  run_flush(t);
  t->recovery = NAN;
  unlock(t);
}

/* The phases of a node's links, from the collectives' tracks of its first ranks. */
typedef struct link_event {
  trace_event e; /* the phase, named by its collective */
  int order;
} link_event;

typedef struct link_list {
  link_event *ev;
  size_t n, cap;
} link_list;

static void link_add(link_list *l, const trace_event *phase, const trace_event *coll, int order) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 64;
    link_event *grown = realloc(l->ev, cap * sizeof *grown);
    if (!grown) return;
    l->ev = grown;
    l->cap = cap;
  }
  link_event *le = &l->ev[l->n++];
  le->e = *phase;
  le->e.detail = NULL;
  le->e.depth = 0;
  le->order = order;
  snprintf(le->e.name, sizeof le->e.name, "%.36s (%.24s)", coll ? coll->name : "?", phase->name);
  if (coll) {
    le->e.nnum = 0;
    set_num(&le->e, "bytes", num_of(coll, "bytes", NAN));
    memcpy(le->e.text_key, coll->text_key, sizeof le->e.text_key);
    memcpy(le->e.text, coll->text, sizeof le->e.text);
  }
}

static int max_node_of(const rh_timeline *tl, const rh_joblog *log) {
  int most = -1;
  for (size_t i = 0; i < tl->n; i++)
    if (tl->workers[i]->node > most) most = tl->workers[i]->node;
  for (size_t i = 0; log && i < log->n; i++)
    if (log->events[i].node > most) most = log->events[i].node;
  return most;
}

/* "rank 3 (gpu 1)", or "rank 3, then 1 (gpu 1)" for a worker whose rank changed. */
static void track_name(rh_tracer *const *ws, size_t n, char *buf, size_t len) {
  size_t k = (size_t)snprintf(buf, len, "rank");
  int last = -1;
  bool first = true;
  for (size_t w = 0; w < n; w++)
    for (int i = 0; i < ws[w]->nranks && k < len; i++) {
      if (ws[w]->ranks[i] == last) continue;
      last = ws[w]->ranks[i];
      k += (size_t)snprintf(buf + k, len - k, "%s %d", first ? "" : ", then", last);
      first = false;
    }
  if (k < len) snprintf(buf + k, len - k, " (gpu %d)", ws[0]->gpu);
}

/* The events of one slot's tracks (ws: its recorders, in the order they started). */
static void write_slot(out *o, rh_tracer *const *ws, size_t n, link_list *links) {
  int pid = ws[0]->node, slot = ws[0]->slot;
  char name[160];
  track_name(ws, n, name, sizeof name);
  write_meta(o, pid, rank_tid(slot, RH_TRACK_MAIN), "thread_name", name, rank_tid(slot, 0));
  snprintf(name, sizeof name, "rank %d collectives", ws[0]->ranks[0]);
  write_meta(o, pid, rank_tid(slot, RH_TRACK_COMM), "thread_name", name, rank_tid(slot, 1));
  for (int k = 0; k < RH_TRACKS; k++) {
    size_t total = 0;
    for (size_t w = 0; w < n; w++) total += ws[w]->tracks[k].n;
    placed *all = malloc((total ? total : 1) * sizeof *all);
    if (!all) continue;
    size_t m = 0;
    for (size_t w = 0; w < n; w++)
      for (size_t i = 0; i < ws[w]->tracks[k].n; i++) all[m++] = (placed){&ws[w]->tracks[k].ev[i], ws[w]->order};
    qsort(all, m, sizeof *all, by_time);
    const trace_event *coll = NULL; /* the collective a phase belongs to */
    for (size_t i = 0; i < m; i++) {
      const trace_event *e = all[i].e;
      write_event(o, pid, rank_tid(slot, k), e, NULL, NULL, NULL);
      if (k != RH_TRACK_COMM) continue;
      if (e->depth == 0) coll = e;
      if ((e->links & LEAD) && (e->links & RH_LINK_NVLINK)) link_add(&links[0], e, coll, all[i].order);
      if ((e->links & LEAD) && (e->links & RH_LINK_UPLINK)) link_add(&links[1], e, coll, all[i].order);
    }
    free(all);
  }
}

static int link_by_time(const void *a, const void *b) {
  const link_event *x = a, *y = b;
  placed p = {&x->e, x->order}, q = {&y->e, y->order};
  return by_time(&p, &q);
}

static void write_links(out *o, int node, link_list *links) {
  static const char *const names[] = {"NVLink", "uplink"};
  for (int l = 0; l < 2; l++) {
    if (!links[l].n) continue;
    long tid = node_tid(node, l == 0 ? TID_NVLINK : TID_UPLINK);
    write_meta(o, node, tid, "thread_name", names[l], tid);
    qsort(links[l].ev, links[l].n, sizeof *links[l].ev, link_by_time);
    for (size_t i = 0; i < links[l].n; i++) write_event(o, node, tid, &links[l].ev[i].e, NULL, NULL, NULL);
  }
}

/* ---- the job log's events (the simulator's) -------------------------------------------- */

static const rh_fault *fault_of(const rh_fault_plan *plan, const rh_joblog *log, int index) {
  if (index >= 0) return plan && index < plan->nfaults ? &plan->faults[index] : NULL;
  size_t k = (size_t)(-2 - index);
  return index <= -2 && k < log->nrandom ? &log->random[k] : NULL;
}

/* "host_crash of node 1", "link_down of node 1's uplink", "straggler of node 2 GPU 0" */
static void fault_words(const rh_event *e, const rh_fault *f, char *buf, size_t len) {
  const char *kind = f ? rh_fault_names[f->kind] : "fault";
  bool link = f && (f->kind == RH_FAULT_LINK_DOWN || f->kind == RH_FAULT_LINK_DEGRADED);
  int k = snprintf(buf, len, "%s of node %d", kind, e->node);
  if (link && f->uplink) snprintf(buf + k, len - (size_t)k, "'s uplink");
  else if (e->gpu >= 0) snprintf(buf + k, len - (size_t)k, " GPU %d%s", e->gpu, link ? "'s link" : "");
}

static void write_moment(out *o, int pid, long tid, double t, const char *cat, const char *name,
                         const char *detail) {
  trace_event e = {.ts = t, .dur = -1, .detail = (char *)detail};
  describe(&e, cat, name);
  write_event(o, pid, tid, &e, NULL, NULL, NULL);
}

/* A fault and its end: one slice on the node's faults track when its window closed and does not
 * overlap the one before it there; else a moment for each. */
static void write_fault(out *o, const rh_fault_plan *plan, const rh_joblog *log, size_t i,
                        uint8_t *used, double *free_from) {
  const rh_event *e = &log->events[i];
  const rh_fault *f = fault_of(plan, log, e->fault);
  char words[120], name[160];
  fault_words(e, f, words, sizeof words);
  long tid = node_tid(e->node, TID_FAULTS);
  if (e->kind == RH_EV_HEALED) {
    snprintf(name, sizeof name, "healed: %s", words);
    write_moment(o, e->node, tid, e->time, "fault", name, NULL);
    return;
  }
  size_t end = log->n;
  for (size_t j = i + 1; j < log->n && end == log->n; j++) {
    const rh_event *h = &log->events[j];
    if (h->kind == RH_EV_HEALED && !used[j] && h->fault == e->fault && h->node == e->node && h->gpu == e->gpu)
      end = j;
  }
  if (end < log->n && e->time >= free_from[e->node]) {
    used[end] = 1;
    trace_event s = {.ts = e->time, .dur = log->events[end].time - e->time};
    describe(&s, "fault", words);
    if (f && f->factor > 0 && f->factor < 1) set_num(&s, "factor", f->factor);
    if (f && f->extra_latency > 0) set_num(&s, "latency_us", f->extra_latency * 1e6);
    write_event(o, e->node, tid, &s, NULL, NULL, NULL);
    free_from[e->node] = log->events[end].time;
    return;
  }
  write_moment(o, e->node, tid, e->time, "fault", words, f && !f->line ? "a random failure" : NULL);
}

static void write_log(out *o, const rh_fault_plan *plan, const rh_joblog *log, int job_pid) {
  int nodes = job_pid;
  uint8_t *used = calloc(log->n + 1, 1), *named = calloc((size_t)nodes + 1, 1);
  double *free_from = calloc((size_t)nodes + 1, sizeof *free_from);
  if (!used || !named || !free_from) {
    free(used);
    free(named);
    free(free_from);
    return;
  }
  long job_tid = node_tid(job_pid, TID_JOB);
  write_meta(o, job_pid, -1, "process_name", "job", job_pid);
  write_meta(o, job_pid, job_tid, "thread_name", "events", job_tid);
  char name[300];
  for (size_t i = 0; i < log->n; i++) {
    const rh_event *e = &log->events[i];
    switch (e->kind) {
    case RH_EV_FAULT:
    case RH_EV_HEALED:
      if (e->node < 0 || e->node >= nodes || used[i]) break;
      if (!named[e->node]) {
        named[e->node] = 1;
        write_meta(o, e->node, node_tid(e->node, TID_FAULTS), "thread_name", "faults",
                   node_tid(e->node, TID_FAULTS));
      }
      write_fault(o, plan, log, i, used, free_from);
      break;
    case RH_EV_WORLD: {
      snprintf(name, sizeof name, "world %u: %d ranks on %s", e->generation, (int)e->a, e->text);
      write_moment(o, job_pid, job_tid, e->time, "job", name, NULL);
      FILE *f = next(o);
      fprintf(f, "{\"ph\":\"C\",\"pid\":%d,\"tid\":%ld,\"ts\":", job_pid, job_tid);
      put_us(f, nanoseconds(e->time));
      fprintf(f, ",\"name\":\"ranks\",\"args\":{\"ranks\":%d}}", (int)e->a);
      break;
    }
    case RH_EV_LEFT:
      snprintf(name, sizeof name, "node %d left: %s", e->node, e->text);
      write_moment(o, job_pid, job_tid, e->time, "job", name, NULL);
      break;
    case RH_EV_HOSTS: write_moment(o, job_pid, job_tid, e->time, "job", e->text, NULL); break;
    case RH_EV_STOPPED:
      snprintf(name, sizeof name, "the launch stopped: %s", e->text);
      write_moment(o, job_pid, job_tid, e->time, "job", name, NULL);
      break;
    case RH_EV_RELAUNCH:
      snprintf(name, sizeof name, "relaunched on %d ranks", (int)e->a);
      write_moment(o, job_pid, job_tid, e->time, "job", name, NULL);
      break;
    case RH_EV_ENDED:
      snprintf(name, sizeof name, "the job ended: %s",
               e->status == RH_OK ? e->text : rh_status_string(e->status));
      write_moment(o, job_pid, job_tid, e->time, "job", name, e->text);
      break;
    default: break; /* a rank's own events are on its track, recorded as they happened */
    }
  }
  free(used);
  free(named);
  free(free_from);
}

/* ---- the parts and the file ------------------------------------------------------------- */

static int by_slot(const void *a, const void *b) {
  const rh_tracer *x = *(rh_tracer *const *)a, *y = *(rh_tracer *const *)b;
  if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

char *rh__timeline_part(rh_timeline *tl, const rh_fault_plan *plan, const rh_joblog *log,
                        size_t *len) {
  char *buf = NULL;
  size_t size = 0;
  out o = {.f = open_memstream(&buf, &size)};
  if (!o.f) return NULL;
  for (size_t i = 0; i < tl->n; i++) settle(tl->workers[i]);
  rh_tracer **ws = malloc((tl->n ? tl->n : 1) * sizeof *ws);
  int nodes = max_node_of(tl, log) + 1;
  link_list *links = calloc(2 * (size_t)(nodes > 0 ? nodes : 1), sizeof *links);
  uint8_t *named = calloc((size_t)(nodes > 0 ? nodes : 1), 1);
  if (ws && links && named) {
    memcpy(ws, tl->workers, tl->n * sizeof *ws);
    qsort(ws, tl->n, sizeof *ws, by_slot);
    for (size_t i = 0, j; i < tl->n; i = j) {
      for (j = i + 1; j < tl->n && ws[j]->slot == ws[i]->slot;) j++;
      int node = ws[i]->node;
      if (!named[node]) {
        char name[32];
        snprintf(name, sizeof name, "node %d", node);
        write_meta(&o, node, -1, "process_name", name, node);
        named[node] = 1;
      }
      write_slot(&o, ws + i, j - i, &links[2 * node]);
    }
    for (int node = 0; node < nodes; node++) write_links(&o, node, &links[2 * node]);
    for (size_t i = 0; log && i < log->n; i++) { /* spare nodes a fault hit before any rank ran there */
      int node = log->events[i].node;
      if (node < 0 || node >= nodes || named[node]) continue;
      char name[32];
      snprintf(name, sizeof name, "node %d", node);
      write_meta(&o, node, -1, "process_name", name, node);
      named[node] = 1;
    }
    if (log && log->n) write_log(&o, plan, log, nodes);
  }
  for (int i = 0; links && i < 2 * nodes; i++) free(links[i].ev);
  free(links);
  free(named);
  free(ws);
  if (fclose(o.f) != 0) {
    free(buf);
    return NULL;
  }
  *len = size;
  return buf;
}

bool rh__timeline_path_ok(const char *path, char *err, size_t len) {
  char dir[1024];
  const char *slash = strrchr(path, '/');
  if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) + (slash == path), path);
  else snprintf(dir, sizeof dir, ".");
  struct stat st;
  if (!path[0] || (slash && !slash[1])) {
    snprintf(err, len, "--timeline %s: not a file name", path);
    return false;
  }
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    snprintf(err, len, "--timeline %s: is a directory", path);
    return false;
  }
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK) != 0) {
    snprintf(err, len, "--timeline %s: cannot write into %s", path, dir);
    return false;
  }
  return true;
}

rh_status rh__timeline_write(const rh_timeline *tl, const char *path, char *const *parts,
                             const size_t *lens, int n) {
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  if (!f) {
    fprintf(stderr, "rehearsal: cannot write the timeline %s\n", path);
    return RH_ERR_IO;
  }
  fputs("{\"traceEvents\":[\n", f);
  bool any = false;
  for (int i = 0; i < n; i++) {
    if (!parts[i] || !lens[i]) continue;
    if (any) fputs(",\n", f);
    fwrite(parts[i], 1, lens[i], f);
    any = true;
  }
  long left_out = 0, merged = 0;
  for (size_t i = 0; i < tl->n; i++) {
    left_out += tl->workers[i]->left_out;
    merged += tl->workers[i]->merged;
  }
  fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"target\":");
  json_string(f, tl->target);
  fprintf(f, ",\"clock\":\"%s\",\"events_per_rank\":%ld,\"detailed_steps_per_world\":%d,",
          tl->simulated ? "simulated seconds since the job's start, in microseconds (whole nanoseconds)"
                        : "wall-clock seconds since the launch (rank 0's clock), in microseconds (whole nanoseconds)",
          tl->budget, FULL_STEPS);
  fprintf(f, "\"detail\":\"each world's first %d steps in full (layers, collectives and their "
             "phases, link tracks), of the steps it ran one by one (steps the simulator charges "
             "without running them, a steady timing-only run from its fourth step on, are one "
             "slice per run of them); then one slice per step with its compute and wait; past "
             "half of a rank's %ld events, one slice per run of steps of an epoch, the time of "
             "each category summed inside it; past three quarters, runs go on across epochs and "
             "moments are left out\",",
          FULL_STEPS, tl->budget);
  fprintf(f, "\"events_left_out\":%ld,\"events_merged\":%ld%s}}\n", left_out, merged,
          tl->simulated ? "" : ",\"counted_on\":\"rank 0\"");
  bool ok = !ferror(f);
  if (fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) {
    remove(tmp);
    fprintf(stderr, "rehearsal: cannot write the timeline %s\n", path);
    return RH_ERR_IO;
  }
  return RH_OK;
}
