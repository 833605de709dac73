/*
 * backend.c: the SimGrid backend's operations.  Each worker is an actor on its GPU's host;
 * messages go through mailboxes named by (world, source, destination, tag) with the asynchronous
 * calls only, because the blocking ones abort the process when a peer dies.  Real payloads are
 * copied at send time and copied out at the receiver; timing-only messages carry nothing but
 * their simulated size.  SimGrid errors are mapped to rh_status here and nowhere else.
 * A world's shared parts (its members, posted messages, rendezvous points) are world.c's.
 *
 * With a timeline asked for, each worker records into a recorder of its own from the start of
 * its training function, and the launch writes them with the job log's events at its end.
 */
#include "platform.h"
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What travels: the sender's length and whether numbers follow, so that a receiver expecting
 * something else fails with RH_ERR_MISMATCH instead of reading past the message. */
typedef struct message {
  size_t bytes;
  bool has_data;
  unsigned char data[];
} message;

struct rh_task {
  rh_status (*fn)(void *);
  void *arg;
  rh_status status;
  bool finished;        /* fn returned */
  bool joined;          /* someone waits for it: done is released when fn returns */
  sg_sem_t done;
  struct rh_task *next; /* the next queued task of the same worker */
};

static sim_worker *worker_of(const rh_ctx *ctx) { return (sim_worker *)ctx->backend; }

static rh_status map_error(sg_error_t e) {
  switch (e) {
  case SG_OK: return RH_OK;
  case SG_ERROR_TIMEOUT: return RH_ERR_TIMEOUT;
  case SG_ERROR_HOST:
  case SG_ERROR_NETWORK:
  case SG_ERROR_CANCELED: return RH_ERR_PEER_DEAD;
  default: return RH_ERR_BACKEND;
  }
}


/* ---- point to point ------------------------------------------------------------------------- */

/* A message in an abandoned world, or to a member known dead, fails at once. */
static rh_status refuse(rh_ctx *ctx, int peer) {
  sim_world *w = worker_of(ctx)->world;
  if (w && w->aborted) return RH_ERR_ABORTED;
  return w && w->dead[peer] ? RH_ERR_PEER_DEAD : RH_OK;
}

/* Writes v's decimal digits at p; returns the end. */
static char *digits(char *p, unsigned long v) {
  char tmp[24];
  int k = 0;
  do tmp[k++] = (char)('0' + v % 10);
  while ((v /= 10) > 0);
  while (k > 0) *p++ = tmp[--k];
  return p;
}

/* One mailbox per world and ordered pair of ranks.  A rank runs its collectives one at a time in
 * issue order, so two ranks post their messages to each other in the same order on both sides,
 * and a mailbox matches in that order: the tag is not needed to tell them apart.  SimGrid never
 * frees a mailbox, and a name per tag would keep 256 of them per pair (gigabytes at 4096 ranks
 * after a few resets).  The name, "g<generation>:<src>><dst>", is written by hand: a fine-grain
 * ring names two boxes per message, and snprintf was a tenth of its cost. */
static void box_name(const rh_ctx *ctx, int src, int dst, char *buf, size_t len) {
  char name[80], *p = name;
  *p++ = 'g';
  p = digits(p, ctx->generation);
  *p++ = ':';
  p = digits(p, (unsigned long)src);
  *p++ = '>';
  p = digits(p, (unsigned long)dst);
  *p = 0;
  size_t n = (size_t)(p - name);
  if (n >= len) n = len - 1;
  memcpy(buf, name, n);
  buf[n] = 0;
}

static rh_status sim_isend(rh_ctx *ctx, int peer, uint32_t tag, const void *buf, size_t bytes,
                           rh_p2p **out) {
  rh_status st = refuse(ctx, peer);
  if (st != RH_OK) return st;
  rh_p2p *r = calloc(1, sizeof *r);
  if (!r) return RH_ERR_NOMEM;
  size_t carried = buf ? bytes : 0;
  r->payload = malloc(sizeof(message) + carried);
  if (!r->payload) {
    free(r);
    return RH_ERR_NOMEM;
  }
  r->payload->bytes = bytes;
  r->payload->has_data = buf != NULL;
  if (carried) memcpy(r->payload->data, buf, carried);
  r->bytes = bytes;
  r->peer = peer;
  box_name(ctx, ctx->rank, peer, r->box, sizeof r->box);
  sim_worker *wk = worker_of(ctx);
  double extra = wk->world ? sim__injector_extra_latency(wk->job, wk->slot, wk->world->slots[peer]) : 0;
  if (extra > 0) sg_actor_sleep_for(extra); /* a degraded link's latency, paid before the message */
  r->comm = sg_mailbox_put_async(sg_mailbox_by_name(r->box), r->payload, (long)bytes);
  sim__post_add(worker_of(ctx)->world, r);
  *out = r;
  return RH_OK;
}

static rh_status sim_irecv(rh_ctx *ctx, int peer, uint32_t tag, void *buf, size_t bytes,
                           rh_p2p **out) {
  rh_status st = refuse(ctx, peer);
  if (st != RH_OK) return st;
  rh_p2p *r = calloc(1, sizeof *r);
  if (!r) return RH_ERR_NOMEM;
  r->is_recv = true;
  r->dst = buf;
  r->bytes = bytes;
  r->peer = peer;
  box_name(ctx, peer, ctx->rank, r->box, sizeof r->box);
  r->comm = sg_mailbox_get_async(sg_mailbox_by_name(r->box), (void **)&r->payload);
  sim__post_add(worker_of(ctx)->world, r);
  *out = r;
  return RH_OK;
}

static rh_status sim_waitall(rh_ctx *ctx, rh_p2p **reqs, size_t n, double timeout) {
  rh_status first = RH_OK;
  double deadline = timeout >= 0 ? simgrid_get_clock() + timeout : -1;
  for (size_t i = 0; i < n; i++) {
    rh_p2p *r = reqs[i];
    if (!r) continue;
    sg_error_t e;
    /* posting yields to the other actors: a sweep may have run before this message was listed */
    bool missed = r->world && (r->world->aborted || r->world->dead[r->peer]);
    if (first != RH_OK || missed) {
      e = sg_comm_wait_for(r->comm, 0); /* releases the comm after a failure */
    } else if (deadline < 0) {
      e = sg_comm_wait(r->comm);
    } else {
      double left = deadline - simgrid_get_clock();
      e = sg_comm_wait_for(r->comm, left > 0 ? left : 0);
    }
    sim_world *w = r->world;
    sim__post_remove(r);
    rh_status st = map_error(e);
    /* A "timeout" before the deadline is the partner cancelling its side after a failure, or the
     * world's abandonment, or the death of the peer. */
    if (st == RH_ERR_TIMEOUT && first == RH_OK &&
        (missed || deadline < 0 || simgrid_get_clock() < deadline))
      st = w && w->dead[r->peer] ? RH_ERR_PEER_DEAD : RH_ERR_ABORTED;
    if (r->is_recv && st == RH_OK) { /* the receiver owns a delivered message */
      message *m = r->payload;
      if (m->bytes != r->bytes || m->has_data != (r->dst != NULL)) st = RH_ERR_MISMATCH;
      else if (r->dst) memcpy(r->dst, m->data, r->bytes);
      free(m);
    } else if (!r->is_recv && st != RH_OK) {
      free(r->payload); /* never delivered */
    }
    if (first == RH_OK) first = st;
    if (st == RH_ERR_TIMEOUT && first == st) {
      snprintf(ctx->last_error, sizeof ctx->last_error, "waited %g s for rank %d", timeout, r->peer);
    }
    free(r);
    reqs[i] = NULL;
  }
  return first;
}

/* ---- time ------------------------------------------------------------------------------------- */

static double sim_now(const rh_ctx *ctx) {
  (void)ctx;
  return simgrid_get_clock();
}

/* A rank's computation is an execution on its GPU's host, shared by SimGrid's CPU model with
 * what else runs there (NCCL's share while a collective runs) and slowed by a straggler.  Alone
 * on the GPU, at a speed that no fault will change before it ends, it takes flops / speed: a
 * timer then does what the execution would, without a variable in the CPU model to solve. */
static rh_status sim_compute(rh_ctx *ctx, double flops) {
  sim_worker *wk = worker_of(ctx);
  if (flops <= 0) return RH_OK;
  double seconds = flops / sg_host_get_speed(wk->host);
  if (!wk->nccl_load && wk->job->cluster->nccl_slowdown <= 0 && isfinite(seconds) &&
      sim__injector_quiet(wk->job, simgrid_get_clock() + seconds))
    sg_actor_sleep_for(seconds);
  else
    sg_actor_execute(flops);
  return RH_OK;
}

/* A sleep inside a world that its abandonment interrupts (the coarse grain charges ring steps
 * this way): a timed wait on the worker's nap semaphore, listed in the world so that a sweep
 * releases it.  A release meant for an earlier nap that ended by itself wakes a later one too
 * early: it then waits out the rest. */
static rh_status sim_sleep(rh_ctx *ctx, double seconds) {
  sim_worker *wk = worker_of(ctx);
  sim_world *w = wk->world;
  if (seconds <= 0) return RH_OK;
  if (!w) {
    sg_actor_sleep_for(seconds);
    return RH_OK;
  }
  if (w->aborted) return RH_ERR_ABORTED;
  /* on the heap: the nap stays listed if the host dies under it, and a dead actor's stack goes */
  rh_p2p *nap = calloc(1, sizeof *nap);
  if (!nap) return RH_ERR_NOMEM;
  nap->nap_sem = wk->nap;
  sim__post_add(w, nap);
  double end = simgrid_get_clock() + seconds;
  rh_status st = RH_OK;
  for (;;) {
    if (w->aborted) st = RH_ERR_ABORTED;
    else if (sim__world_any_dead(w)) st = RH_ERR_PEER_DEAD;
    if (st != RH_OK || simgrid_get_clock() >= end) break;
    sg_sem_acquire_timeout(wk->nap, end - simgrid_get_clock());
  }
  sim__post_remove(nap);
  free(nap);
  return st;
}

static rh_status sim_charge(rh_ctx *ctx, double seconds) {
  (void)ctx;
  if (seconds > 0) sg_actor_sleep_for(seconds);
  return RH_OK;
}

static rh_status sim_reduce_cost(rh_ctx *ctx, size_t bytes) {
  double bw = ctx->cluster ? ctx->cluster->reduce_bw : 0;
  if (bw > 0 && bytes > 0) sg_actor_sleep_for((double)bytes / bw);
  return RH_OK;
}

/* ---- rendezvous ------------------------------------------------------------------------------- */

/* A meeting's record: folded into the point as members arrive (no copy per member). */
typedef struct meeting {
  double value;
  bool ok;
} meeting;

/* `folded` (audit_folded, audit_max): all and arrived are left out unless a record differs or a
 * member did not come; then *all (unless `all` is NULL) and *arrived are allocated and filled.
 * `maxima` (audit_max): `count` values, this member's in, the largest of each out. */
typedef struct folded_out {
  void **all;
  uint8_t **arrived;
  double *maxima;
  size_t count;
} folded_out;

/* Member `me` of an n-member rendezvous `key` of world w (members' world ranks in `ranks`) leaves
 * its record and waits for the others (no simulated time passes); all and arrived receive what
 * came.  RH_ERR_TIMEOUT when some member did not come within `timeout` seconds (negative: no
 * limit), RH_ERR_PEER_DEAD when one that did not come died, RH_ERR_ABORTED when the world was
 * abandoned. */
static rh_status rendezvous(sim_world *w, uint64_t key, int n, int me, const int *ranks,
                            const void *mine, size_t bytes, void *all, uint8_t *arrived,
                            meeting *meet, double timeout, const folded_out *folded) {
  bool root_only = key & RH_AUDIT_ROOT; /* all takes rank 0's record alone */
  if (w->aborted) return RH_ERR_ABORTED;
  audit_point *a = sim__point_get(w, key, n, bytes, ranks);
  if (!a) return RH_ERR_NOMEM;
  /* records of another size: still arrive (so nobody waits for this rank), but say so */
  bool same = a->bytes == bytes;
  if (same && bytes) {
    /* compared with the first record as it arrives: agreement is known without a copy per
     * member, and every member's record is kept only once one differs */
    if (a->first < 0) {
      a->first = me;
      memcpy(a->first_record, mine, bytes);
    } else if (!a->differs && memcmp(a->first_record, mine, bytes) != 0) {
      a->differs = true;
      a->records = calloc((size_t)n, bytes);
      a->lost = !a->records;
      for (int i = 0; i < n && a->records; i++)
        if (a->arrived[i]) memcpy(a->records + (size_t)i * bytes, a->first_record, bytes);
    }
    if (a->records) memcpy(a->records + (size_t)me * bytes, mine, bytes);
  }
  if (meet) {
    a->max_value = fmax(a->max_value, meet->value);
    a->all_ok = a->all_ok && meet->ok;
  }
  for (size_t i = 0; folded && i < folded->count; i++)
    a->maxima[i] = fmax(a->maxima[i], folded->maxima[i]);
  a->arrived[me] = 1;
  rh_status st = RH_OK;
  double deadline = timeout >= 0 ? simgrid_get_clock() + timeout : -1;
  if (++a->count == n) {
    if ((key & ~0xffffffffull) == RH_AUDIT_COLLECTIVE && same && !a->differs) { /* a negotiation */
      w->agreed = true;
      w->agreed_seq = (uint32_t)key;
      w->agreed_at = simgrid_get_clock();
    }
    /* the waiters leave as they wake, but the point stays until this member leaves too */
    a->pins += a->waiting;
    for (int k = a->waiting; k > 0; k--) sim__point_release(w, a);
  } else {
    for (;;) {
      bool died = false; /* a member that is not there and never will be */
      for (int i = 0; i < n && !died && sim__world_may_have_dead(w); i++)
        died = !a->arrived[i] && sim__member_dead(w, ranks[i]);
      if (died) {
        st = RH_ERR_PEER_DEAD;
        break;
      }
      a->waiting++;
      int late = 0;
      if (deadline < 0) sg_sem_acquire(a->all_came);
      else late = sg_sem_acquire_timeout(a->all_came, fmax(0, deadline - simgrid_get_clock()));
      a->waiting--;
      if (a->count == n) break;
      if (late) {
        st = RH_ERR_TIMEOUT;
        break;
      }
      if (w->aborted) {
        st = RH_ERR_ABORTED;
        break;
      }
    }
  }
  if (folded && (st != RH_OK || a->differs || !same)) {
    void *got = folded->all ? calloc((size_t)n, bytes ? bytes : 1) : NULL;
    *folded->arrived = calloc((size_t)n, 1);
    if ((folded->all && !got) || !*folded->arrived) {
      free(got);
      free(*folded->arrived);
      *folded->arrived = NULL;
      if (st == RH_OK) st = RH_ERR_NOMEM;
    } else {
      if (folded->all) *folded->all = all = got;
      arrived = *folded->arrived;
    }
  }
  if (same && all && a->records) {
    memcpy(all, a->records, (size_t)(root_only ? 1 : n) * bytes);
  } else if (same && all) { /* all that came brought the first record */
    for (int i = 0; i < (root_only ? 1 : n); i++)
      if (a->arrived[i]) memcpy((uint8_t *)all + (size_t)i * bytes, a->first_record, bytes);
      else memset((uint8_t *)all + (size_t)i * bytes, 0, bytes);
  }
  if (arrived) memcpy(arrived, a->arrived, (size_t)n);
  if (folded && folded->count) memcpy(folded->maxima, a->maxima, folded->count * sizeof(double));
  if (a->lost && st == RH_OK) st = RH_ERR_NOMEM;
  if (meet) {
    meet->value = a->max_value;
    meet->ok = a->all_ok;
    for (int i = 0; i < n && st == RH_ERR_TIMEOUT; i++)
      if (!a->arrived[i] && sim__member_dead(w, ranks[i])) st = RH_ERR_PEER_DEAD;
  }
  sim__point_leave(w, a);
  return same ? st : RH_ERR_MISMATCH;
}

static rh_status sim_audit(rh_ctx *ctx, uint64_t key, const void *mine, size_t bytes, void *all,
                           uint8_t *arrived, double timeout) {
  return rendezvous(worker_of(ctx)->world, key, ctx->world.n, ctx->rank, ctx->world.ranks, mine,
                    bytes, all, arrived, NULL, timeout, NULL);
}

static rh_status sim_audit_folded(rh_ctx *ctx, uint64_t key, const void *mine, size_t bytes,
                                  void **all, uint8_t **arrived, double timeout) {
  *all = NULL;
  *arrived = NULL;
  folded_out out = {all, arrived, NULL, 0};
  return rendezvous(worker_of(ctx)->world, key, ctx->world.n, ctx->rank, ctx->world.ranks, mine,
                    bytes, NULL, NULL, NULL, timeout, &out);
}

static rh_status sim_audit_max(rh_ctx *ctx, uint64_t key, double *values, size_t count,
                               uint8_t **arrived, double timeout) {
  if (count > RH_AUDIT_MAX_VALUES) return RH_ERR_INVALID;
  *arrived = NULL;
  folded_out out = {NULL, arrived, values, count};
  return rendezvous(worker_of(ctx)->world, key, ctx->world.n, ctx->rank, ctx->world.ranks, NULL,
                    0, NULL, NULL, NULL, timeout, &out);
}

static rh_status sim_model_sync(rh_ctx *ctx, const rh_group *g, bool ok, double *value,
                                double timeout) {
  uint64_t key = RH_AUDIT_SYNC | ((uint64_t)g->id << 32) | ctx->syncs++;
  /* folded as members arrive: O(1) memory per member, however large the group */
  meeting m = {value ? *value : -INFINITY, ok};
  rh_status st = rendezvous(worker_of(ctx)->world, key, g->n, g->me, g->ranks, NULL, 0, NULL,
                            NULL, &m, timeout, NULL);
  if (st == RH_OK && !m.ok) st = RH_ERR_ABORTED;
  if (st == RH_OK && value && m.value > *value) *value = m.value;
  return st;
}

/* ---- background tasks ----------------------------------------------------------------------- */

/* A worker's background tasks run one at a time, in spawn order, on one runner actor beside it
 * (made on the first spawn): a task is a collective, thousands per rank in a long job, and an
 * actor per task would cost a stack each.  The runner is a daemon: it ends with the job.  The
 * semaphores are released only for an actor that waits on them (the runner with nothing queued,
 * a join before the task ended): most hand-overs then cost no simcall. */
static void runner_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sim_worker *wk = sg_actor_self_get_data();
  for (;;) {
    while (!wk->queue) {
      wk->runner_idle = true; /* cleared by the spawn that releases `queued` */
      sg_sem_acquire(wk->queued);
    }
    rh_task *t = wk->queue;
    wk->queue = t->next;
    if (!wk->queue) wk->queue_tail = NULL;
    t->status = t->fn(t->arg);
    t->finished = true;
    if (t->joined) sg_sem_release(t->done);
  }
}

static rh_status sim_spawn(rh_ctx *ctx, rh_status (*fn)(void *), void *arg, rh_task **out) {
  sim_worker *wk = worker_of(ctx);
  rh_task *t = calloc(1, sizeof *t);
  if (!t) return RH_ERR_NOMEM;
  t->fn = fn;
  t->arg = arg;
  if (!wk->runner) {
    char name[32];
    snprintf(name, sizeof name, "rank%d-bg", ctx->rank);
    wk->queued = sg_sem_init(0);
    wk->runner = sg_actor_init(name, wk->host);
    sg_actor_set_data(wk->runner, wk);
    sg_actor_start(wk->runner, runner_main, 0, NULL);
    sg_actor_daemonize(wk->runner);
  }
  if (wk->queue_tail) wk->queue_tail->next = t;
  else wk->queue = t;
  wk->queue_tail = t;
  if (wk->runner_idle) {
    wk->runner_idle = false;
    sg_sem_release(wk->queued);
  }
  *out = t;
  return RH_OK;
}

static rh_status sim_join(rh_ctx *ctx, rh_task *t, double timeout) {
  (void)ctx;
  if (!t->finished) {
    if (!t->joined) {
      t->joined = true;
      t->done = sg_sem_init(0);
    }
    if (timeout < 0) sg_sem_acquire(t->done);
    else if (sg_sem_acquire_timeout(t->done, timeout))
      return RH_ERR_TIMEOUT; /* the task still runs and owns its state */
  }
  rh_status st = t->status;
  if (t->joined) sg_sem_destroy(t->done);
  free(t);
  return st;
}

/* ---- failures and elastic --------------------------------------------------------------------- */

static void sim_abandon(rh_ctx *ctx) { sim__abort_world(worker_of(ctx)->world); }

static rh_status sim_rendezvous(rh_ctx *ctx) {
  sim_worker *wk = worker_of(ctx);
  double since = simgrid_get_clock();
  rh_status st = sim__driver_rendezvous(wk->job, wk);
  rh__trace_world(ctx, since, st);
  return st;
}

static void sim_host_updates(rh_ctx *ctx, double *stamp, int *kind) {
  sim__driver_host_updates(worker_of(ctx)->job, stamp, kind);
}

static void sim_progress(rh_ctx *ctx, rh_phase phase) {
  sim__injector_progress(worker_of(ctx)->job, ctx, phase);
}

/* Steps may be charged up to the step before a step trigger and while they all end, one more
 * step and the slack after them, before the next timed event (a fault, a window's end, a random
 * failure, a host change). */
static long sim_repeat_bound(rh_ctx *ctx, int epoch, long first, long steps, double seconds,
                             double slack) {
  sim_job *job = worker_of(ctx)->job;
  bool phase = false;
  long n = steps;
  double next = fmin(sim__injector_next(job, epoch, first, &n, &phase), sim__driver_next_change(job));
  if (phase) return 0;
  double room = floor((next - simgrid_get_clock() - slack) / seconds) - 1;
  if (room < (double)n) n = room > 0 ? (long)room : 0;
  return n;
}

/* NCCL's kernels on the GPU: a bounded execution beside the rank's own, so that SimGrid's sharing
 * leaves the rank's compute 1 - nccl_slowdown of the host's speed while a collective runs. */
static void sim_occupy(rh_ctx *ctx, bool on) {
  sim_worker *wk = worker_of(ctx);
  double share = wk->job->cluster->nccl_slowdown;
  if (share <= 0) return;
  if (on && wk->collectives++ == 0) {
    wk->nccl_load = sg_actor_exec_init(1e300);
    sg_exec_set_bound(wk->nccl_load, share * sg_host_get_speed(wk->host));
    sg_exec_start(wk->nccl_load);
  } else if (!on && wk->collectives > 0 && --wk->collectives == 0 && wk->nccl_load) {
    sg_exec_cancel(wk->nccl_load);
    wk->nccl_load = NULL;
  }
}

static bool sim_links(rh_ctx *ctx, bool across, double *factor, double *extra) {
  sim_worker *wk = worker_of(ctx);
  if (!wk->world) return true;
  return sim__injector_links(wk->job, wk->world->slots, ctx->world.n, across, factor, extra);
}

const rh_backend_ops sim__ops = {
    .name = "simgrid",
    .isend = sim_isend,
    .irecv = sim_irecv,
    .waitall = sim_waitall,
    .now = sim_now,
    .compute = sim_compute,
    .reduce_cost = sim_reduce_cost,
    .model_sync = sim_model_sync,
    .sleep = sim_sleep,
    .spawn = sim_spawn,
    .join = sim_join,
    .audit = sim_audit,
    .audit_root = true,
    .audit_folded = sim_audit_folded,
    .audit_max = sim_audit_max,
    .abandon = sim_abandon,
    .rendezvous = sim_rendezvous,
    .host_updates = sim_host_updates,
    .progress = sim_progress,
    .charge = sim_charge,
    .links = sim_links,
    .occupy = sim_occupy,
    .repeat_bound = sim_repeat_bound,
    .replay = sim__replay,
};

/* ---- workers ---------------------------------------------------------------------------------- */

/* The launch's timeline (NULL: none asked for); the simulator runs one launch per process. */
static rh_timeline *timeline;

/* A worker records into its own recorder from the start of its training function. */
static void trace_worker(sim_worker *wk) {
  if (!timeline || wk->ctx.trace) return;
  const rh_cluster *cl = wk->job->cluster;
  int node = wk->job->node_of_slot[wk->slot];
  wk->ctx.trace = rh__timeline_add(timeline, &wk->ctx, node, wk->slot,
                                   wk->slot - rh_cluster_first_slot(cl, node));
}

static void worker_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sim_worker *wk = sg_actor_self_get_data();
  if (wk->ready_at > simgrid_get_clock()) sg_actor_sleep_until(wk->ready_at); /* start-up */
  if (wk->joining) {
    rh_status st = sim__driver_rendezvous(wk->job, wk);
    if (st != RH_OK) {
      wk->result = 0; /* a worker the job did not need after all */
      wk->done = true;
      sim__driver_worker_done(wk->job, wk);
      return;
    }
  }
  trace_worker(wk);
  wk->result = wk->job->fn(&wk->ctx, wk->job->arg);
  wk->done = true;
  double now = simgrid_get_clock();
  if (now > wk->job->end_time) wk->job->end_time = now;
  sim__driver_worker_done(wk->job, wk);
}

/* The job's start_worker: the worker's actor on its slot. */
static void start_worker(sim_job *job, sim_worker *wk) {
  char name[32];
  snprintf(name, sizeof name, "worker%d", wk->slot);
  wk->wake = sg_sem_init(0);
  wk->nap = sg_sem_init(0);
  wk->next_worker = job->workers;
  job->workers = wk;
  job->slot_worker[wk->slot] = wk;
  wk->actor = sg_actor_init(name, wk->host);
  sg_actor_set_data(wk->actor, wk);
  sg_actor_start(wk->actor, worker_main, 0, NULL);
}


/* ---- launch ----------------------------------------------------------------------------------- */

static bool launched;

int rh__launch(const rh_launch_config *cfg, rh_rank_fn fn, void *arg, rh_launch_result *res) {
  if (launched) {
    fprintf(stderr, "rehearsal: the simulator runs one job per process\n");
    return 1;
  }
  launched = true;
  const rh_cluster *cl = cfg->cluster;
  if (cfg->timeline) {
    char err[1200];
    if (!rh__timeline_path_ok(cfg->timeline, err, sizeof err)) {
      fprintf(stderr, "rehearsal: %s\n", err);
      return 2;
    }
    timeline = rh__timeline_new("simulator", true, rh_cluster_size(cl), cfg->timeline_events);
    if (!timeline) return 1;
  }
  rh_joblog *log = calloc(1, sizeof *log);
  sim_job job = {.cluster = cl, .settings = cfg->settings, .faults = cfg->faults,
                 .elastic = cfg->elastic, .restart = cfg->restart, .fn = fn, .arg = arg,
                 .start_worker = start_worker, .worker_died = sim__driver_worker_died,
                 .poke = sim__driver_poke, .log = log, .nnodes = cl->nodes + cl->spares};

  int slots = rh_cluster_first_slot(cl, cl->nodes + cl->spares); /* spares too */
  char *argv[RH_SIM_SETTINGS + 2];
  int argc = rh_sim_settings(cl, "rehearsal", argv);
  simgrid_init(&argc, argv);
  const char *how = getenv("RH_SIM_PLATFORM");
  bool xml = cfg->platform_file || (how && strcmp(how, "xml") == 0);
  if (!log || !rh_sim_platform_load(cl, cfg->faults, xml, cfg->platform_file)) {
    free(log);
    rh__timeline_free(timeline);
    timeline = NULL;
    return 1;
  }

  job.nslots = slots > 0 ? slots : 1;
  job.hosts = calloc((size_t)job.nslots, sizeof *job.hosts);
  job.node_of_slot = calloc((size_t)job.nslots, sizeof *job.node_of_slot);
  job.slot_worker = calloc((size_t)job.nslots, sizeof *job.slot_worker);
  job.node_state = calloc((size_t)job.nnodes, sizeof *job.node_state);
  int rc = 1;
  if (job.hosts && job.node_of_slot && job.slot_worker && job.node_state) {
    for (int n = 0, s = 0; n < job.nnodes; n++)
      for (int l = 0; l < cl->gpus_per_node[n]; l++, s++) job.node_of_slot[s] = n;
    /* each slot's host by its name, gpu<slot>, from one list: a lookup by name searches every
     * zone (one per node), hosts x nodes in all */
    size_t count = sg_host_count();
    sg_host_t *all = sg_host_list();
    for (size_t i = 0; all && i < count; i++) {
      const char *name = sg_host_get_name(all[i]);
      char *end = NULL;
      long s = strncmp(name, "gpu", 3) == 0 ? strtol(name + 3, &end, 10) : -1;
      if (s >= 0 && s < job.nslots && end && *end == 0) job.hosts[s] = all[i];
    }
    free(all);
    bool found = true;
    for (int s = 0; s < job.nslots && found; s++)
      if (!(found = job.hosts[s] != NULL)) fprintf(stderr, "rehearsal: the platform has no host gpu%d\n", s);
    if (found && sim__driver_start(&job) == RH_OK && sim__injector_start(&job) == RH_OK) {
      simgrid_run();
      rc = job.last_failed ? 1 : 0;
    }
  }
  int failed = job.last_failed;
  if (timeline) { /* every actor is done: the recorders are whole */
    size_t len = 0;
    char *part = rh__timeline_part(timeline, cfg->faults, log, &len);
    if (!part || rh__timeline_write(timeline, cfg->timeline, &part, &len, 1) != RH_OK) rc = 1;
    free(part);
    rh__timeline_free(timeline);
    timeline = NULL;
  }
  if (res)
    *res = (rh_launch_result){.end_time = job.end_time, .failed_ranks = failed, .rank = -1,
                              .target = "simulator", .log = log, .size = job.last_size,
                              .replayed = job.replayed};
  else {
    rh__joblog_free(log);
    free(log);
  }
  sim__injector_free(&job);
  sim__driver_free(&job);
  for (sim_world *w = job.worlds, *next; w; w = next) {
    next = w->next_world;
    sim__free_world(w);
  }
  for (sim_worker *wk = job.workers, *next; wk; wk = next) {
    next = wk->next_worker;
    sg_sem_destroy(wk->wake);
    sg_sem_destroy(wk->nap);
    if (wk->runner) sg_sem_destroy(wk->queued);
    free(wk);
  }
  free(job.hosts);
  free(job.node_of_slot);
  free(job.slot_worker);
  free(job.node_state);
  return rc;
}
