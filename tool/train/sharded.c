/*
 * sharded.c: the step of sharded data parallelism (recipe.sharding), beside DDP's in loop.c.
 *
 * ZeRO-1 and ZeRO-2 (optimizer, gradients), as DeepSpeed runs them: backward fills buckets of
 * reduce_bucket_size gradients, each reduce-scattered (overlap_comm: once it is full; else all
 * after backward) so that each rank holds the average of its block of every bucket; the optimizer
 * runs on that shard alone (1/size of its work); then the updated parameters are allgathered in
 * buckets of allgather_bucket_size before the next forward.  Both stages move the same bytes;
 * they differ in memory (memory.c).
 *
 * ZeRO-3 and FSDP FULL_SHARD (full): the model is cut into units (FSDP's transformer wrap: each
 * block a unit, the rest the root unit).  Forward gathers each unit's parameters before its
 * layers run, the next unit's allgather issued as this one begins (FSDP's limit_all_gathers: two
 * in flight); the root unit is gathered first and kept.  Backward gathers each unit again
 * (reshard_after_forward), the next one's issued before this one's gradients go (BACKWARD_PRE),
 * and reduce-scatters a unit's gradients once its backward is done.  The optimizer runs on the
 * shard.  A rank runs its collectives one at a time in the order it issued them (one NCCL
 * stream), so an allgather waits behind the reduce-scatters issued before it.  The step's compute
 * is its GPU work; the allgathers it waited for in forward and backward, and the reduce-scatters
 * after, are its wait.
 *
 * With real numbers (the seeds' networks, whose layers form no blocks: the root unit alone), the
 * flat gradients, padded to size equal blocks, are reduce-scattered after backward; each rank
 * updates its block of the parameters and of the optimizer's state, and the parameters are
 * allgathered: FSDP's step for a model of one unit, ZeRO's with one bucket.  An element's update
 * is DDP's arithmetic; only the order the ranks' gradients are added in differs.  With
 * reduce_scatter: false the gradients are DDP's allreduced buckets, and the run ends on DDP's bits.
 *
 * Hybrid (FSDP HYBRID_SHARD, HSDP) is full sharding over a shard group (the GPUs of a node, or
 * recipe.shard_group_size GPUs of whole nodes), the groups being replicas: the units are
 * allgathered and reduce-scattered inside the group (RH_SCOPE_SHARD), and each reduce-scattered
 * shard is then averaged across the groups by an allreduce of the ranks at the same place in each
 * (RH_SCOPE_REPLICA), on the same queue, as FSDP's post-backward hook runs it.  A rank's block is
 * its place in its shard group.
 */
#include "internal.h"
#include "memory.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool zero12(const rank_state *s) {
  return s->cfg->sharding == RH_SHARD_OPTIMIZER || s->cfg->sharding == RH_SHARD_GRADIENTS;
}

/* Hybrid sharding over the shard groups; a world an elastic reset left without them (a GPU gone,
 * its node's others staying; a group size that does not divide it) shards over all its ranks,
 * as full sharding. */
static bool hybrid(const rank_state *s) {
  return s->cfg->sharding == RH_SHARD_HYBRID && rh_scope_size(s->ctx, RH_SCOPE_SHARD) > 0;
}

int train__shard_degree(const rank_state *s) {
  if (hybrid(s)) return rh_scope_size(s->ctx, RH_SCOPE_SHARD);
  bool whole = zero12(s) || s->cfg->sharding == RH_SHARD_FULL || s->cfg->sharding == RH_SHARD_HYBRID;
  return whole ? s->size : 1;
}

/* This rank's block among the shard group's (its place in its shard group under hybrid). */
static int shard_index(const rank_state *s) {
  return hybrid(s) ? rh_scope_rank(s->ctx, RH_SCOPE_SHARD) : s->rank;
}

/* The group the state is sharded over, and how many groups hold it (hybrid's replicas; 1
 * otherwise). */
static rh_scope shard_scope(const rank_state *s) {
  return hybrid(s) ? RH_SCOPE_SHARD : RH_SCOPE_WORLD;
}

static int replicas(const rank_state *s) {
  return hybrid(s) ? rh_scope_size(s->ctx, RH_SCOPE_REPLICA) : 1;
}

bool train__shards_units(const rank_state *s) {
  bool units = s->cfg->sharding == RH_SHARD_FULL || s->cfg->sharding == RH_SHARD_HYBRID;
  return units && !s->cfg->real && s->size > 1;
}

/* Bytes of a parameter as gathered and of a gradient as reduced (bf16: 2). */
static double value_bytes(const rank_state *s) {
  return s->cfg->real || !(s->cfg->grad_bytes > 0) ? sizeof(float) : s->cfg->grad_bytes;
}

static rh_dtype value_type(const rank_state *s) {
  return value_bytes(s) == 2 ? RH_FLOAT16 : RH_FLOAT32;
}

static size_t block_of(size_t count, int size) { return (count + (size_t)size - 1) / (size_t)size; }

/* The units of a timing model, by FSDP's wrap policy (memory.h). */
static rh_status find_units(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  int n = cfg->nlayers;
  s->unit_of = malloc((size_t)(n ? n : 1) * sizeof *s->unit_of);
  const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
  double *params = malloc((size_t)(n ? n : 1) * sizeof *params);
  rh_status st = s->unit_of && names && params ? RH_OK : RH_ERR_NOMEM;
  for (int i = 0; i < n && st == RH_OK; i++) {
    names[i] = cfg->layers[i].name ? cfg->layers[i].name : "";
    params[i] = (double)s->tensors[i].count;
  }
  s->nunits = st == RH_OK ? rh_memory_wrap(n, names, params, cfg->wrap_min_params, s->unit_of) : -1;
  free(names);
  free(params);
  if (s->nunits < 0) return RH_ERR_NOMEM;
  s->unit_count = calloc((size_t)s->nunits + 1, sizeof *s->unit_count);
  s->unit_ends = malloc(2 * ((size_t)s->nunits + 1) * sizeof *s->unit_ends);
  if (!s->unit_count || !s->unit_ends) return RH_ERR_NOMEM;
  for (int u = 0; u < s->nunits; u++) s->unit_ends[2 * u] = -1;
  for (int i = 0; i < n; i++) {
    int u = s->unit_of[i];
    s->unit_count[u >= 0 ? u : s->nunits] += s->tensors[i].count;
    if (u < 0) continue;
    if (s->unit_ends[2 * u] < 0) s->unit_ends[2 * u] = i;
    s->unit_ends[2 * u + 1] = i;
  }
  return RH_OK;
}

rh_status train__shard_setup(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  if (cfg->sharding == RH_SHARD_NONE) return RH_OK;
  /* (every rank the same size; a world it does not cut leaves hybrid as full sharding) */
  if (cfg->sharding == RH_SHARD_HYBRID) rh_set_shard_group(s->ctx, cfg->shard_group);
  if (!cfg->real) return cfg->sharding >= RH_SHARD_HYBRID ? find_units(s) : RH_OK;
  int most = cfg->max_size > s->size ? cfg->max_size : s->size;
  /* the whole of a block array, gathered from every rank of the world (hybrid: each node's
   * blocks again) */
  size_t whole = s->nparams + (size_t)most;
  if (cfg->sharding == RH_SHARD_HYBRID) whole += (size_t)most * s->nparams;
  s->shard_buf = malloc(whole * sizeof(float));
  s->shard_send = malloc((block_of(s->nparams, 1) + 1) * sizeof(float));
  return s->shard_buf && s->shard_send ? RH_OK : RH_ERR_NOMEM;
}

void train__shard_free(rank_state *s) {
  free(s->unit_of);
  free(s->unit_count);
  free(s->unit_ends);
  free(s->shard_buf);
  free(s->shard_send);
}

/* ---- full sharding, timing-only: a pass unit by unit ------------------------------------------ */

/* A symmetric step as a schedule each rank works out for itself (every rank alike: timing-only,
 * priced collectives, no failure): the compute stream, slowed to `rate` while a collective runs
 * beside it (NCCL's share of the GPU), and the one queue the collectives run on in issue order. */
typedef struct schedule {
  double now, free; /* seconds from the step's start: the compute stream; the queue's last end */
  double rate;      /* compute's speed while a collective runs */
  double *busy;     /* the collectives' [start, end) pairs, in order */
  int nbusy, first; /* pairs; the first that may end after now */
  double *ag_end;   /* per unit: when its allgather ends (< 0: none in flight) */
  double ag_price[2], rs_price[2]; /* seconds, [0] a block unit's, [1] the root's */
  double ar_price[2]; /* hybrid: the allreduce of a reduce-scattered shard across nodes */
} schedule;

typedef struct pass {
  rank_state *s;
  long n;
  bool backward;
  double f, seconds;    /* GPU work not charged yet */
  rh_request **ag, **rs, **ar; /* per unit, the root unit's last */
  double waited;        /* seconds the passes waited for allgathers */
  schedule *k;          /* non-NULL: the step worked out, not simulated */
} pass;

/* `seconds` of compute from k->now: at full speed, and at k->rate inside the collectives' spans. */
static void schedule_compute(schedule *k, double seconds) {
  double left = seconds;
  while (k->first < k->nbusy && k->busy[2 * k->first + 1] <= k->now) k->first++;
  for (int i = k->first; i < k->nbusy && left > 0; i++) {
    double a = k->busy[2 * i], b = k->busy[2 * i + 1];
    if (a > k->now) {
      if (left <= a - k->now) break;
      left -= a - k->now;
      k->now = a;
    }
    if (left <= (b - k->now) * k->rate) {
      k->now += left / k->rate;
      return;
    }
    left -= (b - k->now) * k->rate;
    k->now = b;
  }
  k->now += left;
}

/* A collective of `price` seconds issued now: it starts once the queue is free. */
static double schedule_issue(schedule *k, double price) {
  double start = fmax(k->now, k->free);
  k->free = start + price;
  k->busy[2 * k->nbusy] = start;
  k->busy[2 * k->nbusy + 1] = k->free;
  k->nbusy++;
  return k->free;
}

static rh_status charge(pass *p) {
  rank_state *s = p->s;
  if (!(p->seconds > 0) && !(p->f > 0)) return RH_OK;
  s->alone += p->seconds;
  rh_status st = RH_OK;
  if (p->k) schedule_compute(p->k, p->seconds);
  else if (rh_compute_roofline(&s->cfg->gpu)) st = rh_compute_priced(s->ctx, p->f, p->seconds);
  else st = rh_compute(s->ctx, p->f);
  p->f = p->seconds = 0;
  return st;
}

/* Layer i's work in this pass (backward: with its recompute); on a timeline, a kernel of its own. */
static rh_status run_layer(pass *p, int i) {
  rank_state *s = p->s;
  p->f += train__layer_flops(s, i, p->n, p->backward);
  p->seconds += train__layer_seconds(s, i, p->n, p->backward);
  if (p->backward && s->cfg->layers[i].recompute) {
    p->f += train__layer_flops(s, i, p->n, false);
    p->seconds += train__layer_seconds(s, i, p->n, false);
  }
  if (!rh_trace_on(s->ctx)) return RH_OK;
  rh_trace_begin(s->ctx, "layer", s->tensors[i].name);
  rh_status st = charge(p);
  rh_trace_end(s->ctx);
  return st;
}

/* Unit u's allgather, issued once the kernels before it are (none for an empty unit). */
static rh_status gather(pass *p, int u) {
  rank_state *s = p->s;
  if (u < 0 || u > s->nunits || s->unit_count[u] == 0) return RH_OK;
  if (p->k ? p->k->ag_end[u] >= 0 : p->ag[u] != NULL) return RH_OK; /* issued already */
  rh_status st = charge(p);
  int D = train__shard_degree(s);
  size_t block = block_of(s->unit_count[u], D);
  if (p->k) p->k->ag_end[u] = schedule_issue(p->k, p->k->ag_price[u == s->nunits]);
  else if (st == RH_OK)
    st = rh_iallgather_in(s->ctx, shard_scope(s), NULL, block, NULL, value_type(s), &p->ag[u]);
  s->sharded.gathers++;
  s->sharded.gather_bytes += (double)block * D * value_bytes(s);
  return st;
}

static rh_status await(pass *p, int u) {
  rank_state *s = p->s;
  rh_status st = charge(p);
  if (p->k && p->k->ag_end[u] >= 0) {
    double wait = fmax(0, p->k->ag_end[u] - p->k->now);
    p->k->now += wait;
    p->k->ag_end[u] = -1;
    p->waited += wait;
    s->sharded.gather_wait += wait;
  }
  if (p->k || st != RH_OK || !p->ag[u]) return st;
  double t = rh_time(s->ctx);
  st = rh_wait(p->ag[u]);
  p->ag[u] = NULL;
  p->waited += rh_time(s->ctx) - t;
  s->sharded.gather_wait += rh_time(s->ctx) - t;
  return st;
}

static rh_status scatter(pass *p, int u) {
  rank_state *s = p->s;
  rh_status st = charge(p);
  if (st != RH_OK || s->unit_count[u] == 0) return st;
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = u == s->nunits ? "root unit" : "unit";
  int D = train__shard_degree(s);
  size_t block = block_of(s->unit_count[u], D);
  bool across = replicas(s) > 1; /* hybrid: the shard is averaged across the nodes next */
  s->sharded.scatters++;
  s->sharded.scatter_bytes += (double)block * D * value_bytes(s);
  s->sharded.allreduces += across;
  s->sharded.allreduce_bytes += across ? (double)block * value_bytes(s) : 0;
  if (p->k) {
    schedule_issue(p->k, p->k->rs_price[u == s->nunits]);
    if (across) schedule_issue(p->k, p->k->ar_price[u == s->nunits]);
    return RH_OK;
  }
  st = rh_ireduce_scatter_in(s->ctx, shard_scope(s), NULL, NULL, block, value_type(s), RH_AVERAGE,
                             &o, &p->rs[u]);
  if (st != RH_OK || !across) return st;
  o.name = u == s->nunits ? "root shard" : "shard";
  return rh_iallreduce_in(s->ctx, RH_SCOPE_REPLICA, NULL, NULL, block, value_type(s), RH_AVERAGE,
                          &o, &p->ar[u]);
}

/* Whether layer i is its unit's first in forward order (its last in backward), or its last. */
static bool opens(const rank_state *s, int i) {
  return s->unit_of[i] >= 0 && s->unit_ends[2 * s->unit_of[i]] == i;
}

static bool closes(const rank_state *s, int i) {
  return s->unit_of[i] >= 0 && s->unit_ends[2 * s->unit_of[i] + 1] == i;
}

static rh_status forward_units(pass *p) {
  rank_state *s = p->s;
  int U = s->nunits;
  bool limited = s->cfg->gathers_ahead > 0;
  p->backward = false;
  rh_status st = gather(p, U);
  for (int u = 0; u < (limited ? 1 : U) && st == RH_OK; u++) st = gather(p, u);
  if (st == RH_OK) st = await(p, U);
  for (int i = 0; i < s->ntensors && st == RH_OK; i++) {
    if (opens(s, i)) {
      st = await(p, s->unit_of[i]);
      if (st == RH_OK && limited && s->unit_of[i] + 1 < U) st = gather(p, s->unit_of[i] + 1);
    }
    if (st == RH_OK) st = run_layer(p, i);
  }
  return st == RH_OK ? charge(p) : st;
}

static rh_status backward_units(pass *p, bool reduce) {
  rank_state *s = p->s;
  int U = s->nunits;
  bool limited = s->cfg->gathers_ahead > 0;
  p->backward = true;
  rh_status st = RH_OK;
  for (int u = U - 1; u >= (limited ? U - 1 : 0) && u >= 0 && st == RH_OK; u--) st = gather(p, u);
  for (int i = s->ntensors - 1; i >= 0 && st == RH_OK; i--) {
    int u = s->unit_of[i];
    if (closes(s, i)) {
      st = await(p, u);
      if (st == RH_OK && limited && u > 0) st = gather(p, u - 1);
    }
    if (st == RH_OK) st = run_layer(p, i);
    if (st == RH_OK && reduce && opens(s, i)) st = scatter(p, u);
  }
  if (st == RH_OK) st = charge(p);
  if (st == RH_OK && reduce) st = scatter(p, U);
  return st;
}

/* The step's framework overhead and host time, before a micro-batch's forward (as forward()). */
static rh_status step_overheads(pass *p, long n) {
  rank_state *s = p->s;
  const rh_step_times *t = train__priced(s, n);
  double host = t ? t->host : 0;
  if (p->k) { /* the GPU's own work, as step_work charges it */
    s->alone += s->cfg->gpu.overhead + host;
    schedule_compute(p->k, fmax(0, s->cfg->gpu.overhead));
    schedule_compute(p->k, fmax(0, host));
    return RH_OK;
  }
  rh_status st = train__step_work(s, "framework overhead", s->cfg->gpu.overhead);
  return t && st == RH_OK ? train__step_work(s, "host", host) : st;
}

/* Forward and backward of every micro-batch; *end_of_backward: when the last backward ended. */
static rh_status passes(pass *p, long n, int acc, double *end_of_backward) {
  rh_ctx *ctx = p->s->ctx;
  long micro = acc > 1 ? (n + acc - 1) / acc : n;
  rh_status st = RH_OK;
  for (int m = 0; m < acc && st == RH_OK; m++) {
    p->n = m + 1 < acc ? micro : n - micro * (acc - 1);
    st = step_overheads(p, p->n);
    if (st == RH_OK) st = forward_units(p);
    if (st == RH_OK && rh_trace_on(ctx)) {
      rh_trace_end_at(ctx, rh_time(ctx));
      rh_trace_begin_at(ctx, "compute", "backward", rh_time(ctx));
    }
    if (st == RH_OK) st = backward_units(p, m + 1 == acc);
  }
  *end_of_backward = p->k ? p->k->now : rh_time(ctx);
  return st;
}

/* Whether every rank's step is alike, so that each may work it out for itself: timing-only on
 * priced collectives (their prices known now), no failure or change of the world scheduled, no
 * Horovod cycle, no timeline to draw. */
static bool symmetric(const rank_state *s, schedule *k) {
  const rh_train_config *cfg = s->cfg;
  if (cfg->faults || cfg->elastic || rh_trace_on(s->ctx) || cfg->losses.step_spread > 0 ||
      rh_setting(s->ctx, RH_SETTING_CYCLE_TIME) > 0)
    return false;
  double esz = value_bytes(s);
  int D = train__shard_degree(s);
  rh_scope scope = shard_scope(s);
  for (int root = 0; root < 2; root++) {
    size_t count = root ? s->unit_count[s->nunits] : s->nunits ? s->unit_count[0] : 0;
    size_t block = block_of(count, D), bytes = block * (size_t)D * (size_t)esz;
    k->ag_price[root] = rh_predict_in(s->ctx, scope, RH_COLL_ALLGATHER, bytes);
    k->rs_price[root] = rh_predict_in(s->ctx, scope, RH_COLL_REDUCE_SCATTER, bytes);
    k->ar_price[root] = replicas(s) > 1 ? rh_predict_in(s->ctx, RH_SCOPE_REPLICA, RH_COLL_ALLREDUCE,
                                                        block * (size_t)esz) : 0;
    if (!isfinite(k->ag_price[root]) || !isfinite(k->rs_price[root]) ||
        !isfinite(k->ar_price[root]))
      return false;
  }
  /* the blocks are alike in size: one price for all of them */
  for (int u = 1; u < s->nunits; u++)
    if (s->unit_count[u] != s->unit_count[0]) return false;
  double share = rh_collective_compute_share(s->ctx);
  k->rate = share < 0.5 ? 1 - share : 0.5; /* max-min sharing with NCCL's bounded load */
  return true;
}

/* The step worked out on a schedule and charged at once on every rank; *done false where it
 * cannot be (the caller simulates it). */
static rh_status worked_out(rank_state *s, long n, int acc, double *t_compute, bool *done) {
  *done = false;
  schedule k = {0};
  if (!symmetric(s, &k)) return RH_OK;
  int U = s->nunits, most = 2 * (acc * (3 * U + 3) + 2);
  k.busy = malloc((size_t)most * 2 * sizeof(double));
  k.ag_end = malloc(((size_t)U + 1) * sizeof(double));
  if (!k.busy || !k.ag_end) {
    free(k.busy);
    free(k.ag_end);
    return RH_ERR_NOMEM;
  }
  for (int u = 0; u <= U; u++) k.ag_end[u] = -1;
  struct train_shard_step before = s->sharded;
  double alone = s->alone, backward_end;
  pass p = {.s = s, .k = &k};
  rh_status st = passes(&p, n, acc, &backward_end);
  double end = fmax(k.now, k.free), t0 = rh_time(s->ctx);
  free(k.busy);
  free(k.ag_end);
  if (st == RH_OK && rh_charge_alike(s->ctx, end, &st)) {
    *done = true;
    s->sharded.worked_out = true;
    s->sharded.scatter_wait += end - backward_end;
    *t_compute = t0 + backward_end - p.waited;
    return RH_OK;
  }
  s->sharded = before; /* nothing passed: the step is simulated */
  s->alone = alone;
  return st;
}

rh_status train__sharded_passes(rank_state *s, long n, int acc, double step_from,
                                double *t_compute) {
  rh_ctx *ctx = s->ctx;
  bool done;
  rh_status st = worked_out(s, n, acc, t_compute, &done);
  if (st != RH_OK || done) return st;
  int U = s->nunits;
  rh_request **reqs = calloc(3 * ((size_t)U + 1), sizeof *reqs);
  if (!reqs) return RH_ERR_NOMEM;
  pass p = {.s = s, .ag = reqs, .rs = reqs + U + 1, .ar = reqs + 2 * (U + 1)};
  double backward_end, straggler = 0;
  st = passes(&p, n, acc, &backward_end);
  /* the slowest rank's compute, as DDP's step waits for it before its last bucket */
  if (st == RH_OK) st = train__slowest_rank(s, backward_end - step_from - p.waited, &straggler);
  if (s->rank == 0) s->res->straggler_step = straggler;
  *t_compute = rh_time(ctx) - p.waited;
  /* whatever is still in flight (a failure's leftovers too) is waited for: the reduce-scatters
   * are the step's wait after backward */
  for (int u = 0; u < 3 * (U + 1); u++) {
    if (!reqs[u]) continue;
    double t = rh_time(ctx);
    rh_status w = rh_wait(reqs[u]);
    if (u > U) s->sharded.scatter_wait += rh_time(ctx) - t;
    if (st == RH_OK) st = w;
  }
  free(reqs);
  return st;
}

/* ---- ZeRO-1/2, timing-only --------------------------------------------------------------------- */

rh_status train__shard_scatter(rank_state *s, size_t count, double bytes, const char *name,
                               rh_request **req) {
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = name;
  size_t block = block_of(count, s->size);
  s->sharded.scatters++;
  s->sharded.scatter_bytes += (double)block * s->size * bytes;
  return rh_ireduce_scatter(s->ctx, NULL, NULL, block, bytes == 2 ? RH_FLOAT16 : RH_FLOAT32,
                            RH_AVERAGE, &o, req);
}

rh_status train__shard_gather_params(rank_state *s) {
  if (!zero12(s) || s->cfg->real || s->size < 2) return RH_OK;
  double bucket = s->cfg->allgather_bucket > 0 ? s->cfg->allgather_bucket : (double)s->nparams;
  size_t nb = (size_t)((double)s->nparams / bucket) + 1;
  rh_request **reqs = calloc(nb, sizeof *reqs);
  if (!reqs) return RH_ERR_NOMEM;
  rh_status st = RH_OK;
  size_t left = s->nparams;
  for (size_t b = 0; b < nb && left > 0 && st == RH_OK; b++) {
    size_t count = (double)left < bucket ? left : (size_t)bucket;
    size_t block = block_of(count, s->size);
    st = rh_iallgather(s->ctx, NULL, block, NULL, value_type(s), &reqs[b]);
    s->sharded.gathers++;
    s->sharded.gather_bytes += (double)block * s->size * value_bytes(s);
    left -= count;
  }
  double t = rh_time(s->ctx);
  for (size_t b = 0; b < nb; b++) {
    rh_status w = reqs[b] ? rh_wait(reqs[b]) : RH_OK;
    if (st == RH_OK) st = w;
  }
  s->sharded.gather_wait += rh_time(s->ctx) - t;
  free(reqs);
  return st;
}

/* ---- real numbers ----------------------------------------------------------------------------- */

/* Block k of n parameters cut into `size` equal blocks (the last ones short or empty). */
static void block_range(size_t n, int size, size_t k, size_t *per, size_t *lo, size_t *hi) {
  *per = block_of(n, size);
  size_t from = k * *per;
  *lo = from < n ? from : n;
  *hi = from + *per < n ? from + *per : n;
}

/* This rank's block of the flat parameters: [*lo, *hi), of `per` elements padded. */
static void my_block(const rank_state *s, size_t *per, size_t *lo, size_t *hi) {
  block_range(s->nparams, train__shard_degree(s), (size_t)shard_index(s), per, lo, hi);
}

/* Gathers the rank's block [lo, hi) of each of `arrays` arrays of nparams floats at `data`, in
 * place; by a real allgather over the shard group (cost) or a check's over the world (no
 * simulated time: the first shard group's ranks, 0 to its size - 1, hold the blocks in order). */
static rh_status gather_blocks(rank_state *s, float *data, int arrays, bool cost) {
  size_t per, lo, hi, N = s->nparams;
  my_block(s, &per, &lo, &hi);
  rh_status st = RH_OK;
  for (int a = 0; a < arrays && st == RH_OK; a++) {
    float *x = data + (size_t)a * N;
    memset(s->shard_send, 0, per * sizeof(float));
    memcpy(s->shard_send, x + lo, (hi - lo) * sizeof(float));
    st = cost ? rh_iallgather_in(s->ctx, shard_scope(s), s->shard_send, per, s->shard_buf,
                                 RH_FLOAT32, NULL)
              : rh_check_allgather(s->ctx, s->shard_send, per * sizeof(float), s->shard_buf);
    if (st == RH_OK) memcpy(x, s->shard_buf, N * sizeof(float));
  }
  return st;
}

rh_status train__shard_whole_state(rank_state *s, bool cost) {
  if (!s->cfg->real || !s->shard_buf || train__shard_degree(s) < 2) return RH_OK;
  return gather_blocks(s, s->opt.state, (int)(rh_optimizer_state_count(&s->opt) / s->nparams),
                       cost);
}

/* The average of this rank's block [lo, hi) of everyone's gradients into s->grad: reduce-scattered
 * over the shard group (hybrid: then allreduced across nodes); the time it took is the step's
 * wait for the gradients' collectives. */
static rh_status reduce_own_block(rank_state *s, size_t per, size_t lo, size_t hi) {
  int D = train__shard_degree(s);
  float *buf = s->shard_buf, *mine = buf + (size_t)shard_index(s) * per;
  double t = rh_time(s->ctx);
  memcpy(buf, s->grad, s->nparams * sizeof(float));
  memset(buf + s->nparams, 0, (per * (size_t)D - s->nparams) * sizeof(float));
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = "gradients";
  rh_status st = rh_ireduce_scatter_in(s->ctx, shard_scope(s), buf, mine, per, RH_FLOAT32,
                                       RH_AVERAGE, &o, NULL);
  s->sharded.scatters++;
  s->sharded.scatter_bytes += (double)per * D * sizeof(float);
  if (st == RH_OK && replicas(s) > 1) { /* hybrid: the node's average, averaged across nodes */
    o.name = "shard";
    st = rh_iallreduce_in(s->ctx, RH_SCOPE_REPLICA, mine, mine, per, RH_FLOAT32, RH_AVERAGE, &o,
                          NULL);
    s->sharded.allreduces++;
    s->sharded.allreduce_bytes += (double)per * sizeof(float);
  }
  if (st == RH_OK) memcpy(s->grad + lo, mine, (hi - lo) * sizeof(float));
  s->sharded.scatter_wait += rh_time(s->ctx) - t;
  return st;
}

rh_status train__sharded_update(rank_state *s, double lr) {
  size_t per, lo, hi;
  my_block(s, &per, &lo, &hi);
  /* (with reduce_scatter: false the gradients were allreduced whole, as DDP's) */
  rh_status st = s->cfg->shard_allreduce ? RH_OK : reduce_own_block(s, per, lo, hi);
  if (st == RH_OK) st = train__shard_evidence(s, lo, hi);
  if (st != RH_OK) return st;
  rh_optimizer_update(&s->opt, s->params, s->grad, lr, lo, hi - lo);
  s->opt.steps += 1.0;
  s->sharded.gathers++;
  s->sharded.gather_bytes += (double)per * train__shard_degree(s) * sizeof(float);
  double t = rh_time(s->ctx);
  st = gather_blocks(s, s->params, 1, true);
  s->sharded.gather_wait += rh_time(s->ctx) - t;
  return st;
}

/* ---- sharded checkpoints ------------------------------------------------------------------------ */

#define SHARD_MAGIC "RHSHARD1"

/* A shard file's head: which block of which checkpoint it holds. */
typedef struct shard_header {
  char magic[8];
  uint64_t nshards, shard;  /* of the world that wrote it */
  uint64_t lo, hi;          /* its block of the parameters */
  uint64_t nparams, arrays; /* the model's parameters; the optimizer's arrays of nparams floats */
} shard_header;

bool train__shard_checkpoints(const rank_state *s) {
  return s->cfg->sharded_checkpoints && train__shard_degree(s) > 1;
}

static void shard_path(char *buf, size_t len, const char *path, uint64_t k, uint64_t n) {
  snprintf(buf, len, "%s.shard-%llu-of-%llu", path, (unsigned long long)k, (unsigned long long)n);
}

bool train__shard_writer(const rank_state *s) {
  return !hybrid(s) || rh_scope_rank(s->ctx, RH_SCOPE_REPLICA) == 0; /* hybrid: the first group's */
}

int train__shard_write(rank_state *s, const char *path) {
  /* a timing-only model has no floats: the index says it all */
  if (!s->cfg->real || !train__shard_writer(s)) return 0;
  size_t per, lo, hi, N = s->nparams;
  my_block(s, &per, &lo, &hi);
  shard_header h = {.magic = SHARD_MAGIC, .nshards = (uint64_t)train__shard_degree(s),
                    .shard = (uint64_t)shard_index(s),
                    .lo = lo, .hi = hi, .nparams = N,
                    .arrays = rh_optimizer_state_count(&s->opt) / N};
  char name[1100], tmp[1120];
  shard_path(name, sizeof name, path, h.shard, h.nshards);
  snprintf(tmp, sizeof tmp, "%s.tmp", name);
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 &&
            fwrite(s->params + lo, sizeof(float), hi - lo, f) == hi - lo;
  for (uint64_t a = 0; ok && a < h.arrays; a++)
    ok = fwrite(s->opt.state + a * N + lo, sizeof(float), hi - lo, f) == hi - lo;
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, name) != 0) ok = false;
  if (ok) return 0;
  int e = errno ? errno : EIO;
  remove(tmp);
  fprintf(stderr, "rehearsal: rank %d cannot write %s: %s\n", s->rank, name, strerror(e));
  return e;
}

/* Shard k of n into params and state; false when it is not the block it should be. */
static bool read_shard(const rank_state *s, const char *path, uint64_t k, uint64_t n,
                       float *params, float *state) {
  char name[1100];
  shard_path(name, sizeof name, path, k, n);
  uint64_t N = s->nparams, arrays = rh_optimizer_state_count(&s->opt) / N;
  size_t per, lo, hi; /* the block the writer of shard k of n held */
  block_range(N, (int)n, k, &per, &lo, &hi);
  FILE *f = fopen(name, "rb");
  shard_header h = {0};
  bool ok = f && fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, SHARD_MAGIC, 8) == 0 &&
            h.nshards == n && h.shard == k && h.lo == lo && h.hi == hi && h.nparams == N &&
            h.arrays == arrays && fread(params + lo, sizeof(float), hi - lo, f) == hi - lo;
  for (uint64_t a = 0; ok && a < arrays; a++)
    ok = fread(state + a * N + lo, sizeof(float), hi - lo, f) == hi - lo;
  ok = ok && fgetc(f) == EOF;
  if (f) fclose(f);
  if (!ok) fprintf(stderr, "rehearsal: %s is missing, damaged or not a shard of this model\n", name);
  return ok;
}

bool train__shard_read(rank_state *s, const char *path, uint64_t nshards, float *params,
                       float *state) {
  if (!s->cfg->real) return true;
  for (uint64_t k = 0; k < nshards; k++)
    if (!read_shard(s, path, k, nshards, params, state)) return false;
  return true;
}
