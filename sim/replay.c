/*
 * replay.c: a symmetric collective at the price it took before, with no message.
 *
 * A data-parallel job runs the same collectives step after step, every rank alike: in a uniform
 * world whose ranks all come at the same instant, a timing-only collective of a given kind,
 * algorithm and size takes the same time whenever the job is unchanged (no fault in force,
 * none due, the world as it was), as nothing else uses the network between collectives.  The
 * first such run is simulated as the grain says and its duration kept as the price of what ran;
 * later ones wait that price on every rank.  At 16,384 GPUs that is one timer per rank instead
 * of a ring's messages and rendezvous.
 *
 * The ranks meet at no cost and only within one instant: a rank waits for the others with a
 * timer of 1e-300 s, which SimGrid fires once no actor can run at the current time.  If they did
 * not all come then, the meeting expires and every rank runs the collective as if nothing had
 * met, so a straggler, a late rank or a dead one changes nothing to what the grain does, but for
 * one thing: SimGrid rounds an expiring timer up to its timing precision (1e-9 s), so the ranks
 * that waited start that collective 1 ns late.  With the negotiation on (the default) nobody
 * waits: a negotiation every rank came to ends for all of them at one instant (all_coming).
 *
 *   all came at t, price p known, quiet until t + p   ->  each rank waits p          (replayed)
 *   all came at t, quiet, no price yet                 ->  run, meet again at the end:
 *                                                         all ended together at t', nothing
 *                                                         changed meanwhile: price = t' - t
 *   otherwise                                          ->  run, told it is not symmetric (the
 *                                                         default grain then simulates every
 *                                                         message: runtime/api.c)
 */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* What a collective cost in this world. */
struct sim_price {
  uint64_t what;
  double seconds;
};

/* How a replay's meeting turned out. */
enum { OPEN, EXPIRED, RUN, MEASURE, REPLAY };

#define RH_AUDIT_REPLAY (1ull << 60) /* | seq; | 1 << 32 for the meeting after a measured run */

static const struct sim_price *find_price(const sim_world *w, uint64_t what) {
  for (size_t i = 0; i < w->nprices; i++)
    if (w->prices[i].what == what) return &w->prices[i];
  return NULL;
}

static void keep_price(sim_world *w, uint64_t what, double seconds) {
  if (find_price(w, what)) return;
  if (w->nprices == w->capprices) {
    size_t cap = w->capprices ? 2 * w->capprices : 8;
    struct sim_price *grown = realloc(w->prices, cap * sizeof *grown);
    if (!grown) return; /* no price kept: the next one runs again */
    w->prices = grown;
    w->capprices = cap;
  }
  w->prices[w->nprices++] = (struct sim_price){what, seconds};
}

/* Whether nothing can change in the job or in world w before `until`. */
static bool quiet(const sim_world *w, double until) {
  const sim_job *job = w->job;
  return !w->aborted && sim__injector_quiet(job, until) && sim__driver_quiet(job, w, until) &&
         !sim__world_any_dead(w);
}

/* Member `me` of the world's meeting point a on collective `what`, within the current instant.
 * The last of the members to come calls decide(a) and releases the others; a member whose wait
 * ends first expires the meeting.  On return a is decided; the caller leaves it. */
static void meet(sim_world *w, audit_point *a, int me, uint64_t what,
                 void (*decide)(sim_world *, audit_point *)) {
  int n = w->topo.size;
  if (a->first < 0) {
    a->first = me;
    a->what = what;
  }
  a->differs = a->differs || a->what != what;
  if (a->decision == OPEN && ++a->count == n) {
    if (a->differs) a->decision = RUN;
    else decide(w, a);
    a->pins += a->waiting;
    for (int k = a->waiting; k > 0; k--) sim__point_release(w, a);
  } else if (a->decision == OPEN) {
    a->waiting++;
    /* a timeout of zero would wait for good; this one ends with the instant, and if it
     * expires SimGrid has moved this rank's clock by its precision, 1e-9 s */
    sg_sem_acquire_timeout(a->all_came, 1e-300);
    a->waiting--;
    if (a->decision == OPEN) a->decision = EXPIRED;
  }
}

/* Whether every member is sure to come to collective seq's replay within this instant, so that
 * none need wait for the others: its negotiation ended now with all of them agreeing, and nothing
 * between the two takes time (Horovod's cycle may: then they meet).  Their digests agree too, as
 * a digest follows from the negotiated collective, the world and the job's settings alone. */
static bool all_coming(const rh_ctx *ctx, const sim_world *w, uint32_t seq) {
  return w->agreed && w->agreed_seq == seq && w->agreed_at == simgrid_get_clock() &&
         !(rh_setting(ctx, RH_SETTING_CYCLE_TIME) > 0);
}

/* A replayed collective ends on every rank at once, where the fine grain lets a rank whose links
 * are faster finish a little earlier; the next collective's negotiation brings them together
 * again.  So nothing may change until the next collective begins either: the horizon is the
 * price and the longest time yet between two collectives' beginnings. */
static void decide_start(sim_world *w, audit_point *a) {
  double now = simgrid_get_clock();
  if (w->last_meeting >= 0 && now - w->last_meeting > w->longest_gap)
    w->longest_gap = now - w->last_meeting;
  w->last_meeting = now;
  const struct sim_price *p = find_price(w, a->what);
  a->since = now;
  a->changes = w->job->changes;
  if (p && quiet(w, now + p->seconds + w->longest_gap)) {
    a->decision = REPLAY;
    a->price = p->seconds;
    w->job->replayed++;
  } else {
    a->decision = p || !quiet(w, now) ? RUN : MEASURE;
  }
}

/* After a measured run (`since` and `changes` from its start meeting, all_ok false when some
 * member failed it): the time it took is the price, if nothing changed meanwhile. */
static void decide_end(sim_world *w, audit_point *a) {
  double now = simgrid_get_clock();
  a->decision = RUN;
  if (a->all_ok && w->job->changes == a->changes && quiet(w, now))
    keep_price(w, a->what, now - a->since);
}

rh_status sim__replay(rh_ctx *ctx, uint32_t seq, uint64_t what,
                      rh_status (*run)(void *arg, bool symmetric), void *arg, bool *replayed) {
  sim_worker *wk = (sim_worker *)ctx->backend;
  sim_world *w = wk->world;
  *replayed = false;
  if (!w || w->aborted) return run(arg, false);
  uint64_t key = RH_AUDIT_REPLAY | seq;
  audit_point *a = sim__point_get(w, key, w->topo.size, 0, NULL);
  if (!a) return run(arg, false);
  if (all_coming(ctx, w, seq)) {
    if (a->decision == OPEN) { /* the first member decides for all */
      a->first = ctx->rank;
      a->what = what;
      decide_start(w, a);
    }
  } else {
    meet(w, a, ctx->rank, what, decide_start);
  }
  int how = a->decision;
  double price = a->price, since = a->since;
  long changes = a->changes;
  sim__point_leave(w, a);
  if (how == REPLAY) {
    *replayed = true;
    rh__trace_phase(ctx, &ctx->world, "replayed");
    sg_actor_sleep_for(price);
    rh__trace_end(ctx, RH_TRACK_COMM, NAN);
    return RH_OK;
  }
  rh_status st = run(arg, how == MEASURE);
  if (how != MEASURE) return st;
  /* measured: the members meet again; if all end at one instant, nothing having changed, the
   * time it took is the price of `what` */
  audit_point *end = sim__point_get(w, key | (1ull << 32), w->topo.size, 0, NULL);
  if (!end) return st;
  if (end->first < 0) {
    end->since = since;
    end->changes = changes;
  }
  if (st != RH_OK) end->all_ok = false;
  meet(w, end, ctx->rank, what, decide_end);
  sim__point_leave(w, end);
  return st;
}
