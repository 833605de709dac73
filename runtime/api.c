/*
 * api.c: the public collective calls.  Each call checks its arguments, takes the next sequence
 * number (every rank numbers its collectives the same way, which keeps concurrent collectives
 * apart on the wire), applies prescale, compression and postscale around the algorithm the
 * decision file picks, and runs it.  The non-blocking forms run the same code in a background
 * task of the backend.  With a timeline (trace.c) each collective is a slice of the rank's
 * collectives' track: its negotiation, then the phases of what ran (ring.c, coll_priced.c).
 */
#include "internal.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The tag of a collective's messages: seq mod this.  A rank runs its collectives one at a time in
 * issue order (its requests queue behind each other, however many), and both the simulator's
 * mailboxes and MPI match a pair's messages in the order they were posted, so the tag need not
 * tell apart more than a few neighbouring collectives; it bounds no count of requests. */
#define RH_TAG_WINDOW 256u

double rh_time(const rh_ctx *ctx) { return ctx->ops->now(ctx); }

rh_status rh_compute(rh_ctx *ctx, double flops) {
  if (!(flops >= 0)) return RH_ERR_INVALID;
  return ctx->ops->compute(ctx, flops);
}

rh_status rh_compute_priced(rh_ctx *ctx, double flops, double seconds) {
  if (!(flops >= 0) || !(seconds >= 0)) return RH_ERR_INVALID;
  if (ctx->ops->priced) return ctx->ops->priced(ctx, flops, seconds);
  /* the backend spends FLOPs at the cluster's GPU rate: the seconds' worth of them */
  double rate = ctx->cluster ? ctx->cluster->gpu_flops : 0;
  return rate > 0 ? ctx->ops->compute(ctx, seconds * rate) : ctx->ops->compute(ctx, flops);
}

int rh_restarts(const rh_ctx *ctx) { return ctx->restarts; }

double rh__storage_seconds(const rh_cluster *cl, double bytes, bool write) {
  double bw = write ? cl->storage_write_bw : cl->storage_read_bw;
  return (bw > 0 ? bytes / bw : 0) + cl->storage_latency;
}

rh_status rh_storage_io(rh_ctx *ctx, double bytes, bool write) {
  const rh_cluster *cl = ctx->cluster;
  if (!cl || !ctx->ops->charge || !(bytes >= 0)) return bytes >= 0 ? RH_OK : RH_ERR_INVALID;
  double t = rh__storage_seconds(cl, bytes, write);
  return t > 0 ? ctx->ops->charge(ctx, t) : RH_OK;
}

void rh_step_begin(rh_ctx *ctx, int epoch, long step) {
  ctx->epoch = epoch;
  ctx->step = step;
  ctx->steps_begun++;
  rh__trace_step(ctx);
  if (ctx->ops->progress) ctx->ops->progress(ctx, RH_PHASE_STEP);
}

static rh_status check_max(rh_ctx *ctx, double *values, size_t count);

long rh_repeat_steps(rh_ctx *ctx, int epoch, long first, long steps, double seconds,
                     const rh_repeat_cycle *cycle, rh_status *st) {
  *st = RH_OK;
  if (!ctx->ops->repeat_bound || (int)rh_setting(ctx, RH_SETTING_GRAIN) == RH_GRAIN_FINE)
    return 0; /* the fine grain simulates every message of every step */
  /* every rank says what it could charge; rank 0 bounds it by the scheduled events; all charge
   * the fewest steps offered, each as long as the longest rank's, so that none takes a lead: a
   * check folds the three figures (the fewest steps as the largest of their negations) */
  long every = cycle && cycle->every > 0 ? cycle->every : 0;
  long offer = steps > 0 && seconds > 0 ? steps : 0;
  double extra = every ? cycle->seconds : 0;
  /* rank 0 bounds the steps by the events: at the mean pace, with room for one more cycle */
  if (ctx->rank == 0 && offer > 0)
    offer = ctx->ops->repeat_bound(ctx, epoch, first, offer,
                                   seconds + (every ? extra / (double)every : 0),
                                   every ? seconds + extra : 0);
  double figures[3] = {-(double)offer, seconds, extra};
  *st = check_max(ctx, figures, 3);
  if (*st != RH_OK) return -1;
  long n = (long)-figures[0];
  double longest = figures[1] > 0 ? figures[1] : 0;
  extra = figures[2] > 0 ? figures[2] : 0;
  /* reaching a cycle's end, the charge ends at one, whose extra is the caller's to run (a real
   * commit, where the state is saved): the ones before it are charged */
  long cycles = 0;
  if (every) {
    long first_end = every - cycle->done % every;
    if (n >= first_end) {
      n = first_end + (n - first_end) / every * every;
      cycles = (cycle->done + n) / every - cycle->done / every - 1;
    }
  }
  if (n > 0) *st = ctx->ops->charge(ctx, (double)n * longest + (double)cycles * extra);
  if (*st != RH_OK) return -1;
  ctx->steps_begun += n;
  ctx->step = first + n - 1;
  ctx->epoch = epoch;
  return n;
}

bool rh_charge_alike(rh_ctx *ctx, double seconds, rh_status *st) {
  *st = RH_OK;
  if (!ctx->ops->repeat_bound || (int)rh_setting(ctx, RH_SETTING_GRAIN) == RH_GRAIN_FINE)
    return false;
  double offer = seconds > 0 ? 1 : 0;
  if (ctx->rank == 0 && offer > 0)
    offer = (double)ctx->ops->repeat_bound(ctx, ctx->epoch, ctx->step, 1, seconds, 0);
  double figures[2] = {-offer, seconds};
  *st = check_max(ctx, figures, 2);
  if (*st != RH_OK || -figures[0] < 1) return false;
  *st = ctx->ops->charge(ctx, figures[1]);
  return *st == RH_OK;
}

/* A failed collective breaks this rank's world, as a failed NCCL communicator is aborted: the
 * rank tells the backend (which releases the peers waiting on it) and notes what it saw first;
 * its later collectives fail at once, until an elastic reset forms a new world. */
static bool peer_failure(rh_status st) {
  return st == RH_ERR_PEER_DEAD || st == RH_ERR_TIMEOUT || st == RH_ERR_ABORTED;
}

static void break_world(rh_ctx *ctx, rh_status st) {
  if (ctx->broken || !peer_failure(st)) return;
  ctx->broken = true;
  rh__log_rank(ctx, RH_EV_NOTICED, st, 0, 0, ctx->last_error);
  if (ctx->trace) { /* on the rank's own track, where its step stopped */
    char what[64];
    snprintf(what, sizeof what, "noticed: %s", rh_status_string(st));
    rh__trace_mark(ctx, RH_TRACK_MAIN, "failure", what, ctx->last_error);
  }
  if (ctx->ops->abandon) ctx->ops->abandon(ctx);
}

static rh_coll coll_for(rh_ctx *ctx, uint32_t seq, void *buf, size_t count, rh_dtype dtype,
                        rh_op op) {
  return (rh_coll){.ctx = ctx, .tag = seq % RH_TAG_WINDOW, .seq = seq, .buf = buf, .count = count,
                   .dtype = dtype, .op = op == RH_AVERAGE ? RH_SUM : op,
                   .timeout = rh_setting(ctx, RH_SETTING_TIMEOUT)};
}

/* Whether a timing-only collective may run at the coarse grain, decided once for the whole
 * collective so that concurrent rings never mix grains: `auto` takes it where every ring step is
 * the same (blocks divide evenly), `coarse` everywhere. */

static bool coarse_for(const rh_ctx *ctx, bool timing_only, bool even) {
  int grain = (int)rh_setting(ctx, RH_SETTING_GRAIN);
  if (!timing_only || grain == RH_GRAIN_FINE || !ctx->ops->model_sync) return false;
  return grain == RH_GRAIN_COARSE || even;
}

/* ---- running the algorithm ------------------------------------------------------------------ */

typedef enum { K_ALLREDUCE, K_BROADCAST, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER } coll_kind;

/* The kinds that reduce: an op, prescale and postscale. */
static bool reduces(int kind) { return kind == K_ALLREDUCE || kind == K_REDUCE_SCATTER; }

/* One run of an algorithm over the world. */
typedef struct algo_run {
  rh_coll *c;
  coll_kind kind;
  rh_algo algo;
  int root;             /* broadcast */
  const size_t *counts; /* allgather */
} algo_run;

static rh_status run_algo(void *arg, bool symmetric) {
  const algo_run *a = arg;
  /* the default grain takes the ring's one-step shortcut only where every rank is alike: a
   * collective the replay found asymmetric simulates every message */
  if (!symmetric && (int)rh_setting(a->c->ctx, RH_SETTING_GRAIN) == RH_GRAIN_AUTO) a->c->coarse = false;
  switch (a->kind) {
  case K_ALLREDUCE:
    return a->algo == RH_ALG_ALLREDUCE_HIERARCHICAL ? rh__allreduce_hierarchical(a->c)
                                                     : rh__allreduce_ring(a->c);
  case K_BROADCAST:
    return a->algo == RH_ALG_BCAST_RING ? rh__bcast_ring(a->c, a->root) : rh__bcast_tree(a->c, a->root);
  case K_REDUCE_SCATTER: return rh__reduce_scatter_ring(a->c);
  default:
    if (!a->counts) { /* equal blocks, in rank order */
      rh_blocks b = rh__even_blocks(a->c->count, rh__coll_group(a->c)->n, 0);
      return rh__ring_allgather(a->c, rh__coll_group(a->c), &b, 0);
    }
    return rh__allgatherv_ring(a->c, a->counts);
  }
}

static uint64_t fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; i++, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  return h;
}

/* Runs the algorithm.  A timing-only collective that the coarse grain may run (its ring steps
 * all alike) is offered to the backend's replay first: the time of what it runs depends on the
 * kind, the algorithm, the root and the bytes (the world and the settings being the same). */
static rh_status run_algorithm(algo_run *a, size_t bytes) {
  rh_ctx *ctx = a->c->ctx;
  if (!a->c->coarse || !ctx->ops->replay) return run_algo(a, true);
  uint64_t what = 14695981039346656037ull;
  what = fnv(what, a->kind);
  what = fnv(what, a->algo);
  what = fnv(what, (uint64_t)a->root);
  what = fnv(what, bytes);
  what = fnv(what, a->c->count);
  what = fnv(what, rh_dtype_size(a->c->dtype));
  what = fnv(what, a->c->group == &ctx->shard ? 1 : a->c->group == &ctx->replica ? 2 : 0);
  bool replayed;
  return ctx->ops->replay(ctx, a->c->seq, what, run_algo, a, &replayed);
}

static bool valid_type(rh_dtype dtype) { return (int)dtype >= 0 && dtype < RH_DTYPE_COUNT; }

const char *rh_last_error(const rh_ctx *ctx) { return ctx->last_error; }

/* ---- negotiation -------------------------------------------------------------------------- */

static const char *const kind_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                          "barrier"};

/* What a rank says it is about to run; compared byte for byte across ranks. */
typedef struct coll_desc {
  uint32_t kind, dtype, op;
  int32_t root;
  uint64_t count;
  uint64_t shape; /* allgatherv: a hash of every rank's count */
  uint32_t invalid; /* this rank's arguments are wrong: every rank fails the collective */
  uint32_t scope;   /* rh_scope: the group each rank runs it over */
  double prescale, postscale;
  char name[40];
} coll_desc;

static coll_desc describe(coll_kind kind, rh_dtype dtype, rh_op op, int root, size_t count,
                          const rh_reduce_opts *o) {
  coll_desc d;
  memset(&d, 0, sizeof d); /* padding too: descriptors are compared with memcmp */
  d.kind = kind;
  d.dtype = dtype;
  d.op = op;
  d.root = root;
  d.count = count;
  d.prescale = o ? o->prescale : 1;
  d.postscale = o ? o->postscale : 1;
  if (o && o->name) rh__cat(d.name, sizeof d.name, o->name, NULL, NULL, 0);
  return d;
}

static int say(const coll_desc *d, char *buf, size_t len) {
  if (d->kind == K_BARRIER) return snprintf(buf, len, "barrier");
  int k = snprintf(buf, len, "%s%s%s%s (%llu x %s", kind_names[d->kind], d->name[0] ? " '" : "",
                   d->name, d->name[0] ? "'" : "", (unsigned long long)d->count,
                   rh_dtype_name((rh_dtype)d->dtype));
  if (reduces((int)d->kind))
    k += snprintf(buf + k, len - (size_t)k, ", %s", rh_op_name((rh_op)d->op));
  if (d->kind == K_BROADCAST) k += snprintf(buf + k, len - (size_t)k, ", root %d", d->root);
  if (d->prescale != 1 || d->postscale != 1)
    k += snprintf(buf + k, len - (size_t)k, ", scale %g/%g", d->prescale, d->postscale);
  if (d->scope != RH_SCOPE_WORLD)
    k += snprintf(buf + k, len - (size_t)k, ", %s",
                  d->scope == RH_SCOPE_SHARD ? "in the shard group" : "across shard groups");
  return k + snprintf(buf + k, len - (size_t)k, ")");
}

void rh__rank_list(const uint8_t *flags, int n, uint8_t value, char *buf, size_t len) {
  size_t k = 0;
  buf[0] = 0;
  for (int r = 0; r < n && k < len; r++) {
    if (flags[r] != value) continue;
    int end = r;
    while (end + 1 < n && flags[end + 1] == value) end++;
    k += (size_t)snprintf(buf + k, len - k, "%s%d", k ? "," : "", r);
    if (end > r && k < len) k += (size_t)snprintf(buf + k, len - k, "%s%d", end > r + 1 ? "-" : ",", end);
    r = end;
  }
}

/* All ranks agree on collective `seq` before it runs; on disagreement or absence every rank that
 * took part fails it and says why in last_error. */
static rh_status negotiate(rh_ctx *ctx, uint32_t seq, const coll_desc *d) {
  if (!ctx->ops->audit || (int)rh_setting(ctx, RH_SETTING_CHECK_COLLECTIVES) == 0) return RH_OK;
  int n = ctx->world.n;
  double timeout = rh_setting(ctx, RH_SETTING_TIMEOUT);
  coll_desc *all = NULL;
  uint8_t *arrived = NULL;
  rh_status st;
  /* on the simulator the audit takes no time of its own: what shows is the wait for the last rank */
  rh__trace_begin(ctx, RH_TRACK_COMM, "negotiate", "negotiate", NAN, 0);
  if (ctx->ops->audit_folded) {
    /* folded where the target can: every rank's record is copied out only when they differ */
    st = ctx->ops->audit_folded(ctx, RH_AUDIT_COLLECTIVE | seq, d, sizeof *d, (void **)&all,
                                &arrived, timeout);
    if (!all && st == RH_OK && !d->invalid) {
      rh__trace_end(ctx, RH_TRACK_COMM, NAN);
      return RH_OK;
    }
  } else {
    all = calloc((size_t)n, sizeof *all);
    arrived = calloc((size_t)n, 1);
    st = all && arrived ? ctx->ops->audit(ctx, RH_AUDIT_COLLECTIVE | seq, d, sizeof *d, all, arrived, timeout)
                        : RH_ERR_NOMEM;
  }
  rh__trace_end(ctx, RH_TRACK_COMM, NAN);
  uint8_t *group = calloc((size_t)n, 1);
  if (!all || !arrived || !group) { /* (all agreed, on invalid arguments: every rank's are) */
    bool everyone_invalid = st == RH_OK && !all && d->invalid;
    free(all);
    free(arrived);
    free(group);
    if (!everyone_invalid) return st == RH_OK ? RH_ERR_NOMEM : st;
    char what[160];
    say(d, what, sizeof what);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "collective #%u %s: every rank passed invalid arguments", seq, what);
    return RH_ERR_INVALID;
  }
  char what[160], ranks[160];
  say(d, what, sizeof what);
  bool any_invalid = false;
  for (int r = 0; st == RH_OK && r < n; r++) {
    group[r] = all[r].invalid != 0;
    any_invalid = any_invalid || group[r];
  }
  if (any_invalid) {
    rh__rank_list(group, n, 1, ranks, sizeof ranks);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "collective #%u %s: ranks %s passed invalid arguments", seq, what, ranks);
    st = RH_ERR_INVALID;
  } else if (st == RH_ERR_TIMEOUT) {
    char came[160];
    rh__rank_list(arrived, n, 1, came, sizeof came);
    rh__rank_list(arrived, n, 0, ranks, sizeof ranks);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "stall: collective #%u %s: ranks %s waited %g s; ranks %s never issued it", seq, what,
             came, timeout, ranks);
  } else if (st == RH_OK) {
    for (int r = 0; r < n; r++) group[r] = 0;
    /* group the ranks by what they issued, this rank's group first */
    int groups = 0;
    size_t k = 0;
    for (int i = -1; i < n; i++) {
      int lead = i < 0 ? ctx->rank : i;
      if (group[lead]) continue;
      groups++;
      for (int r = 0; r < n; r++)
        if (!group[r] && memcmp(&all[r], &all[lead], sizeof *d) == 0) group[r] = (uint8_t)groups;
    }
    if (groups > 1) {
      /* Different tensor names: each waits for ranks that went on to another one, which is a
       * stall in Horovod's terms, named per tensor.  Same name, other shape: a mismatch. */
      bool names_differ = false;
      for (int r = 0; r < n; r++)
        names_differ = names_differ || strcmp(all[r].name, d->name) != 0;
      st = RH_ERR_MISMATCH;
      k = (size_t)snprintf(ctx->last_error, sizeof ctx->last_error,
                           names_differ ? "stall: collective #%u: ranks wait on different tensors:"
                                        : "mismatch: collective #%u differs between ranks:",
                           seq);
      for (int g = 1; g <= groups && k < sizeof ctx->last_error; g++) {
        int lead = 0;
        while (group[lead] != g) lead++;
        rh__rank_list(group, n, (uint8_t)g, ranks, sizeof ranks);
        say(&all[lead], what, sizeof what);
        k += (size_t)snprintf(ctx->last_error + k, sizeof ctx->last_error - k,
                              "%s ranks %s issued %s", g > 1 ? ";" : "", ranks, what);
        if (names_differ && k < sizeof ctx->last_error) {
          uint8_t *others = arrived; /* reused as scratch: the ranks outside group g */
          for (int r = 0; r < n; r++) others[r] = group[r] != g;
          rh__rank_list(others, n, 1, ranks, sizeof ranks);
          k += (size_t)snprintf(ctx->last_error + k, sizeof ctx->last_error - k,
                                ", missing on ranks %s", ranks);
        }
      }
    }
  }
  free(all);
  free(arrived);
  free(group);
  return st;
}

/* Records a failure's detail for rh_last_error unless negotiation already did. */
static rh_status note(rh_ctx *ctx, rh_status st, uint32_t seq, const coll_desc *d) {
  if (st == RH_OK || ctx->last_error[0]) return st; /* negotiation already explained it */
  char what[160];
  say(d, what, sizeof what);
  snprintf(ctx->last_error, sizeof ctx->last_error, "collective #%u %s: %s", seq, what,
           rh_status_string(st));
  return st;
}

/* Explains check k's failure st in rh_last_error (arrived: who came, NULL if unknown) and
 * breaks the world after a peer's. */
static void check_failed(rh_ctx *ctx, uint32_t k, rh_status st, const uint8_t *arrived) {
  if (st == RH_ERR_TIMEOUT && arrived) {
    char missing[160];
    rh__rank_list(arrived, ctx->world.n, 0, missing, sizeof missing);
    snprintf(ctx->last_error, sizeof ctx->last_error, "stall: check #%u: ranks %s never came", k,
             missing);
  } else if (st != RH_OK) {
    snprintf(ctx->last_error, sizeof ctx->last_error, "check #%u: %s", k, rh_status_string(st));
  }
  break_world(ctx, st);
}

/* A check's audit (RH_AUDIT_ROOT in `flags`: `all` takes rank 0's record alone). */
static rh_status check_audit(rh_ctx *ctx, uint64_t flags, const void *mine, size_t bytes,
                             void *all) {
  uint32_t k = ctx->audits++;
  if (ctx->broken) {
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "check #%u: this rank's world was abandoned after a failure", k);
    return RH_ERR_ABORTED;
  }
  if (ctx->ops->audit) {
    uint8_t *arrived = calloc((size_t)ctx->world.n, 1);
    if (!arrived) return RH_ERR_NOMEM;
    rh_status st = ctx->ops->audit(ctx, RH_AUDIT_CHECK | flags | k, mine, bytes, all, arrived,
                                   rh_setting(ctx, RH_SETTING_TIMEOUT));
    check_failed(ctx, k, st, arrived);
    free(arrived);
    return st;
  }
  /* without an audit channel, a real allgather of 4-byte words */
  if (bytes % 4) return RH_ERR_INVALID;
  return rh_allgather(ctx, mine, bytes / 4, all, RH_INT32);
}

rh_status rh_check_allgather(rh_ctx *ctx, const void *mine, size_t bytes, void *all) {
  return check_audit(ctx, 0, mine, bytes, all);
}

/* The largest of each of `count` values over the world's ranks, in place, as a check (numbered
 * as rh_check_allgather's, failing as they do): folded by the backend where it can, which costs
 * O(count) per rank; otherwise every rank's values are gathered (a few real processes). */
static rh_status check_max(rh_ctx *ctx, double *values, size_t count) {
  if (!ctx->ops->audit_max) {
    double *all = malloc((size_t)ctx->world.n * count * sizeof *all);
    if (!all) return RH_ERR_NOMEM;
    rh_status st = check_audit(ctx, 0, values, count * sizeof *values, all);
    for (int r = 0; st == RH_OK && r < ctx->world.n; r++)
      for (size_t i = 0; i < count; i++) values[i] = fmax(values[i], all[(size_t)r * count + i]);
    free(all);
    return st;
  }
  uint32_t k = ctx->audits++;
  if (ctx->broken) {
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "check #%u: this rank's world was abandoned after a failure", k);
    return RH_ERR_ABORTED;
  }
  uint8_t *arrived = NULL;
  rh_status st = ctx->ops->audit_max(ctx, RH_AUDIT_CHECK | k, values, count, &arrived,
                                     rh_setting(ctx, RH_SETTING_TIMEOUT));
  check_failed(ctx, k, st, arrived);
  free(arrived);
  return st;
}

rh_status rh_check_broadcast(rh_ctx *ctx, void *buf, size_t bytes) {
  if (ctx->ops->audit && ctx->ops->audit_root)
    return check_audit(ctx, RH_AUDIT_ROOT, buf, bytes, buf);
  /* through a gather of every rank's record (real processes: a few) */
  size_t padded = (bytes + 3) / 4 * 4;
  unsigned char *mine = calloc(padded ? padded : 1, 1);
  unsigned char *all = calloc((size_t)ctx->world.n * (padded ? padded : 1), 1);
  rh_status st = mine && all ? RH_OK : RH_ERR_NOMEM;
  if (st == RH_OK) {
    memcpy(mine, buf, bytes);
    st = check_audit(ctx, 0, mine, padded, all);
  }
  if (st == RH_OK) memcpy(buf, all, bytes);
  free(mine);
  free(all);
  return st;
}

/* ---- the collectives ------------------------------------------------------------------------ */

/* One collective as issued.  Every call becomes one: blocking calls run it at once when nothing
 * of this rank's is in flight, else behind the rank's requests, so each rank runs its collectives
 * in the one order it issued them (as NCCL's stream requires, and as keeps tags apart). */
struct rh_request {
  rh_ctx *ctx;
  coll_kind kind;
  uint32_t seq;
  const void *send;
  void *recv;
  size_t count;
  rh_dtype dtype;
  rh_op op;
  int root;
  rh_reduce_opts opts;
  char name[40];  /* a copy: the caller's string may be gone when a request runs */
  size_t *counts; /* allgatherv, group: a copy, owned */
  void **group;   /* group: the tensors (a copy, owned; NULL: timing-only) */
  int ngroup;     /* group: how many; -1 for a single buffer */
  bool invalid;   /* this rank's arguments are wrong */
  rh_scope scope; /* the group it runs over */
  double submitted; /* when it was issued */
  rh_task *task;
};

/* ---- where the work runs ------------------------------------------------------------------- */

/* The ranks request r runs over: the world, or this rank's group of its scope. */
static const rh_group *grp(const rh_request *r) {
  return r->scope == RH_SCOPE_SHARD     ? &r->ctx->shard
         : r->scope == RH_SCOPE_REPLICA ? &r->ctx->replica
                                      : &r->ctx->world;
}

/* A collective on r's buffer: over its group. */
static rh_coll coll_of(const rh_request *r, void *buf, size_t count, rh_dtype dtype) {
  rh_coll c = coll_for(r->ctx, r->seq, buf, count, dtype, r->op);
  c.group = grp(r);
  return c;
}

/* The memory a collective's numbers are worked on in: the device's on a device target (host
 * buffers are staged through it), the host's elsewhere. */
static const rh_memory_ops *work_memory(const rh_ctx *ctx) {
  return ctx->ops->device ? ctx->ops->device : &rh__host_memory;
}

/* The memory `p` is in. */
static const rh_memory_ops *home_of(const rh_ctx *ctx, const void *p) {
  const rh_memory_ops *dev = ctx->ops->device;
  return dev && dev->owns(p) ? dev : &rh__host_memory;
}

/* A buffer of `bytes` in work memory holding what `user` holds (copy: false leaves it
 * undefined): `user` itself when it is there already. */
static void *stage_in(rh_ctx *ctx, void *user, size_t bytes, bool copy, rh_status *st) {
  const rh_memory_ops *m = work_memory(ctx);
  if (home_of(ctx, user) == m) return user;
  void *w = m->alloc(ctx, bytes);
  if (!w) *st = RH_ERR_NOMEM;
  else if (copy) *st = m->copy(ctx, w, user, bytes);
  return w;
}

/* Copies a staged buffer back (when `st` is RH_OK) and releases it. */
static void stage_out(rh_ctx *ctx, void *user, void *work, size_t bytes, rh_status *st) {
  if (!work || work == user) return;
  const rh_memory_ops *m = work_memory(ctx);
  if (*st == RH_OK) *st = m->copy(ctx, user, work, bytes);
  m->release(ctx, work);
}

/* Whether the backend's own collective (MPI's, NCCL's) runs request r: it needs real buffers, the
 * world (the backends' communicators are the world's), and a backend that has one; on a device
 * target it always runs (for one rank too: the data path is the same at every size), elsewhere
 * when the `collectives` setting asks and there are peers. */
static bool use_native(const rh_request *r, bool available, const void *buf) {
  const rh_ctx *ctx = r->ctx;
  if (!buf || !available || r->scope != RH_SCOPE_WORLD) return false;
  if (ctx->ops->device) return true;
  return ctx->world.n > 1 && (int)rh_setting(ctx, RH_SETTING_COLLECTIVES) == RH_IMPL_NATIVE;
}

/* Whether collectives are priced by the NCCL model rather than simulated message by message:
 * the scenario asks for it, on a simulator (real targets take the time they take). */
static bool priced(const rh_ctx *ctx) {
  return ctx->cluster && ctx->cluster->net_model == RH_NET_NCCL && ctx->ops->model_sync &&
         ctx->ops->audit && ctx->world.n > 1;
}

/* The NCCL model's plan for request r's collective of `bytes`, over its groups. */
static rh_plan plan_of(const rh_request *r, rh_nccl_coll coll, size_t bytes) {
  return rh__plan_in(r->ctx, (int)r->scope, coll, bytes);
}

/* Whether every link of the job runs at its rate now. */
static bool links_nominal(rh_ctx *ctx) {
  double factor = 1, extra = 0;
  if (!ctx->ops->links) return true;
  return ctx->ops->links(ctx, ctx->topo->nodes > 1, &factor, &extra) && !(factor < 1) &&
         !(extra > 0);
}

double rh_predict_in(const rh_ctx *ctx, rh_scope scope, rh_collective coll, size_t bytes) {
  static const rh_nccl_coll kinds[] = {RH_NC_ALLREDUCE, RH_NC_ALLGATHER, RH_NC_REDUCE_SCATTER};
  if ((int)coll < 0 || coll > RH_COLL_REDUCE_SCATTER || (int)scope < 0 || scope > RH_SCOPE_REPLICA)
    return NAN;
  /* (the backend's query of the links reads, it changes nothing) */
  if (!priced(ctx) || !links_nominal((rh_ctx *)ctx)) return NAN;
  return rh__plan_in(ctx, (int)scope, kinds[coll], bytes).seconds;
}

double rh_predict_allgather(const rh_ctx *ctx, size_t bytes) {
  return rh_predict_in(ctx, RH_SCOPE_WORLD, RH_COLL_ALLGATHER, bytes);
}

double rh_predict_reduce_scatter(const rh_ctx *ctx, size_t bytes) {
  return rh_predict_in(ctx, RH_SCOPE_WORLD, RH_COLL_REDUCE_SCATTER, bytes);
}

double rh_collective_compute_share(const rh_ctx *ctx) {
  return ctx->ops->occupy && ctx->cluster && ctx->cluster->nccl_slowdown > 0
             ? ctx->cluster->nccl_slowdown : 0;
}

/* ---- what the timeline says of the algorithm ---------------------------------------------- */

/* The backend's own collective (MPI's, NCCL's) begins, as one phase over the world. */
static void native_phase(rh_ctx *ctx, const char *what) {
  if (!ctx->trace) return;
  char name[48];
  snprintf(name, sizeof name, "%s %s", ctx->ops->name, what);
  rh__trace_text(ctx, RH_TRACK_COMM, "algorithm", ctx->ops->name);
  rh__trace_phase(ctx, &ctx->world, name);
}

/* The NCCL model's plan (its phase is coll_priced.c's). */
static void trace_plan(rh_ctx *ctx, const rh_plan *plan) {
  if (!ctx->trace) return;
  char name[32];
  rh__trace_text(ctx, RH_TRACK_COMM, "algorithm", rh__plan_name(plan, name, sizeof name));
}

/* ---- allreduce ------------------------------------------------------------------------------ */

/* A reduction's result of `count` elements in work memory: AVERAGE's 1/size (an exact integer
 * division for int32), then the postscale. */
static rh_status postscale(const rh_request *r, void *result, size_t count) {
  rh_ctx *ctx = r->ctx;
  const rh_memory_ops *m = work_memory(ctx);
  double post = r->opts.postscale;
  rh_status st = RH_OK;
  if (r->op == RH_AVERAGE && r->dtype == RH_INT32) /* exact integer division, toward zero */
    st = m->divide(ctx, result, count, grp(r)->n);
  else if (r->op == RH_AVERAGE)
    post *= 1.0 / grp(r)->n;
  return st == RH_OK ? m->scale(ctx, result, count, r->dtype, post) : st;
}

/* Reduces `work` (count elements, in work memory) in place: prescale, compression, the
 * algorithm or the native collective, postscale.  work NULL: timing-only. */
static rh_status reduce_in_place(rh_request *r, void *work) {
  rh_ctx *ctx = r->ctx;
  const rh_memory_ops *m = work_memory(ctx);
  size_t count = r->count;
  bool timing_only = !work;
  bool fp16 = r->opts.compression == RH_COMPRESS_FP16 ||
              (r->opts.compression == RH_COMPRESS_DEFAULT &&
               (int)rh_setting(ctx, RH_SETTING_COMPRESSION) == RH_WIRE_FP16);
  fp16 = fp16 && (r->dtype == RH_FLOAT32 || r->dtype == RH_FLOAT64);
  rh_status st = RH_OK;
  if (!timing_only) st = m->scale(ctx, work, count, r->dtype, r->opts.prescale);
  void *wire = work;
  rh_dtype wire_type = fp16 ? RH_FLOAT16 : r->dtype;
  if (st == RH_OK && fp16 && !timing_only) {
    wire = m->alloc(ctx, count * sizeof(uint16_t));
    if (!wire) return RH_ERR_NOMEM;
    st = m->to_half(ctx, wire, work, count, r->dtype);
  }
  rh_coll c = coll_of(r, wire, count, wire_type);
  bool world = r->scope == RH_SCOPE_WORLD;
  if (st != RH_OK || count == 0) {
  } else if (use_native(r, ctx->ops->allreduce != NULL, wire)) {
    native_phase(ctx, "allreduce");
    st = ctx->ops->allreduce(ctx, wire, count, wire_type, c.op, c.timeout);
    rh__trace_end(ctx, RH_TRACK_COMM, NAN);
  } else if (priced(ctx)) {
    rh_plan plan = plan_of(r, RH_NC_ALLREDUCE, count * rh_dtype_size(wire_type));
    trace_plan(ctx, &plan);
    st = rh__coll_priced(&c, RH_NC_ALLREDUCE, &plan, 0, NULL);
  } else if (c.group->n > 1) {
    rh_algo algo = world ? rh__choose_allreduce(ctx, count * rh_dtype_size(wire_type))
                         : RH_ALG_ALLREDUCE_RING;
    bool hier = algo == RH_ALG_ALLREDUCE_HIERARCHICAL && rh_topology_uniform(ctx->topo);
    size_t unit = hier ? (size_t)ctx->node.n * (size_t)ctx->cross.n : (size_t)c.group->n;
    c.coarse = coarse_for(ctx, timing_only, count % unit == 0);
    rh__trace_text(ctx, RH_TRACK_COMM, "algorithm", hier ? "hierarchical" : "ring");
    algo_run run = {.c = &c, .kind = K_ALLREDUCE,
                    .algo = hier ? RH_ALG_ALLREDUCE_HIERARCHICAL : RH_ALG_ALLREDUCE_RING};
    st = run_algorithm(&run, count * rh_dtype_size(wire_type));
  }
  if (wire != work) {
    if (st == RH_OK) st = m->from_half(ctx, work, wire, count, r->dtype);
    m->release(ctx, wire);
  }
  if (st == RH_OK && !timing_only) st = postscale(r, work, count);
  return st;
}

static rh_status allreduce_run(rh_request *r) {
  rh_ctx *ctx = r->ctx;
  const rh_memory_ops *m = work_memory(ctx);
  size_t esz = rh_dtype_size(r->dtype), bytes = r->count * esz;
  rh_status st = RH_OK;
  if (ctx->ops->device && (r->ngroup >= 0 ? !r->group : !r->recv)) {
    /* timing-only on real GPUs: the bytes move for real, through a scratch buffer */
    void *scratch = m->alloc(ctx, bytes);
    if (!scratch) return RH_ERR_NOMEM;
    st = reduce_in_place(r, scratch);
    m->release(ctx, scratch);
    return st == RH_OK ? m->sync(ctx) : st;
  }
  if (r->ngroup >= 0) { /* tensor fusion: pack, reduce, unpack */
    if (!r->group) return reduce_in_place(r, NULL);
    const rh_memory_ops *home = home_of(ctx, r->ngroup ? r->group[0] : NULL);
    void *fused = m->alloc(ctx, bytes), *packed = fused;
    if (!fused) return RH_ERR_NOMEM;
    if (home != m && !(packed = home->alloc(ctx, bytes))) st = RH_ERR_NOMEM;
    if (st == RH_OK) st = home->pack(ctx, packed, r->group, r->counts, r->ngroup, esz, false);
    if (st == RH_OK && packed != fused) st = m->copy(ctx, fused, packed, bytes);
    if (st == RH_OK) st = reduce_in_place(r, fused);
    if (st == RH_OK && packed != fused) st = m->copy(ctx, packed, fused, bytes);
    if (st == RH_OK) st = home->pack(ctx, packed, r->group, r->counts, r->ngroup, esz, true);
    if (st == RH_OK) st = home->sync(ctx);
    if (packed != fused && packed) home->release(ctx, packed);
    m->release(ctx, fused);
    return st;
  }
  if (!r->send && !r->recv) return reduce_in_place(r, NULL);
  void *work = stage_in(ctx, r->recv, bytes, false, &st);
  if (st == RH_OK) st = m->copy(ctx, work, r->send, bytes); /* nothing when in place */
  if (st == RH_OK) st = reduce_in_place(r, work);
  stage_out(ctx, r->recv, work, bytes, &st);
  if (st == RH_OK) st = m->sync(ctx);
  return st;
}

/* ---- broadcast and allgather --------------------------------------------------------------- */

static rh_status broadcast_run(rh_request *r) {
  rh_ctx *ctx = r->ctx;
  size_t bytes = r->count * rh_dtype_size(r->dtype);
  if (r->count == 0 || (ctx->world.n < 2 && !ctx->ops->device)) return RH_OK;
  rh_status st = RH_OK;
  if (use_native(r, ctx->ops->broadcast != NULL, r->recv)) {
    void *work = stage_in(ctx, r->recv, bytes, ctx->rank == r->root, &st);
    native_phase(ctx, "broadcast");
    if (st == RH_OK) st = ctx->ops->broadcast(ctx, work, r->count, r->dtype, r->root,
                                              rh_setting(ctx, RH_SETTING_TIMEOUT));
    rh__trace_end(ctx, RH_TRACK_COMM, NAN);
    stage_out(ctx, r->recv, work, bytes, &st);
    return st;
  }
  if (ctx->world.n < 2) return RH_OK;
  rh_coll c = coll_for(ctx, r->seq, r->recv, r->count, r->dtype, RH_SUM);
  if (priced(ctx)) {
    rh_plan plan = rh__plan(ctx, RH_NC_BROADCAST, bytes);
    trace_plan(ctx, &plan);
    return rh__coll_priced(&c, RH_NC_BROADCAST, &plan, r->root, NULL);
  }
  /* auto: equal chunks only (a shorter last one is charged in proportion: bcast_ring.c) */
  size_t chunk = (size_t)rh_setting(ctx, RH_SETTING_PIPELINE_CHUNK);
  c.coarse = coarse_for(ctx, !r->recv, chunk > 0 && bytes % chunk == 0);
  rh_algo algo = rh__choose_bcast(ctx, bytes);
  bool ring = algo == RH_ALG_BCAST_RING;
  rh__trace_text(ctx, RH_TRACK_COMM, "algorithm", ring ? "ring" : "tree");
  rh__trace_phase(ctx, &ctx->world, ring ? "chain broadcast" : "tree broadcast");
  algo_run run = {.c = &c, .kind = K_BROADCAST, .algo = algo, .root = r->root};
  st = run_algorithm(&run, bytes);
  rh__trace_end(ctx, RH_TRACK_COMM, NAN);
  return st;
}

/* A timing-only allgather of equal blocks keeps no counts (r->count each): a rank's work on it
 * does not grow with the world. */
static rh_status allgather_even_run(rh_request *r) {
  rh_ctx *ctx = r->ctx;
  size_t esz = rh_dtype_size(r->dtype), n = (size_t)grp(r)->n;
  rh_coll c = coll_of(r, NULL, r->count * n, r->dtype);
  if (n < 2) return RH_OK;
  if (priced(ctx)) {
    rh_plan plan = plan_of(r, RH_NC_ALLGATHER, r->count * esz * n);
    trace_plan(ctx, &plan);
    return rh__coll_priced(&c, RH_NC_ALLGATHER, &plan, 0, NULL);
  }
  c.coarse = coarse_for(ctx, true, true);
  rh__trace_text(ctx, RH_TRACK_COMM, "algorithm", "ring");
  algo_run run = {.c = &c, .kind = K_ALLGATHER};
  return run_algorithm(&run, r->count * esz * n);
}

static rh_status allgatherv_run(rh_request *r) {
  rh_ctx *ctx = r->ctx;
  if (!r->counts) return allgather_even_run(r);
  const rh_group *g = grp(r);
  size_t esz = rh_dtype_size(r->dtype), off = 0, total = 0;
  bool even = true;
  for (int i = 0; i < g->n; i++) {
    if (i < g->me) off += r->counts[i];
    total += r->counts[i];
    even = even && r->counts[i] == r->counts[0];
  }
  size_t mine = r->counts[g->me] * esz;
  rh_status st = RH_OK;
  if (use_native(r, ctx->ops->allgatherv != NULL, r->recv)) {
    const rh_memory_ops *m = work_memory(ctx);
    void *work = stage_in(ctx, r->recv, total * esz, false, &st);
    if (st == RH_OK) st = m->copy(ctx, (char *)work + off * esz, r->send, mine);
    native_phase(ctx, "allgather");
    if (st == RH_OK)
      st = ctx->ops->allgatherv(ctx, work, r->counts, r->dtype, rh_setting(ctx, RH_SETTING_TIMEOUT));
    rh__trace_end(ctx, RH_TRACK_COMM, NAN);
    stage_out(ctx, r->recv, work, total * esz, &st);
    if (st == RH_OK) st = m->sync(ctx);
    return st;
  }
  if (r->recv && mine > 0) memmove((char *)r->recv + off * esz, r->send, mine);
  rh_coll c = coll_of(r, r->recv, 0, r->dtype);
  if (g->n < 2) return RH_OK;
  if (priced(ctx)) { /* NCCL has no allgatherv: the largest block from every rank */
    size_t most = 0;
    for (int i = 0; i < g->n; i++)
      if (r->counts[i] > most) most = r->counts[i];
    rh_plan plan = plan_of(r, RH_NC_ALLGATHER, most * esz * (size_t)g->n);
    trace_plan(ctx, &plan);
    return rh__coll_priced(&c, RH_NC_ALLGATHER, &plan, 0, r->counts);
  }
  c.coarse = coarse_for(ctx, !r->recv, even);
  rh__trace_text(ctx, RH_TRACK_COMM, "algorithm", "ring");
  algo_run run = {.c = &c, .kind = K_ALLGATHER, .counts = r->counts};
  return run_algorithm(&run, r->counts[0] * esz * (size_t)g->n);
}

/* ---- reduce-scatter ------------------------------------------------------------------------- */

/* Reduces `work` (world.n blocks of r->count elements, in work memory) so that block `rank`
 * holds the result: prescale, the algorithm or the native collective, then AVERAGE's division and
 * postscale on this rank's block.  work NULL: timing-only. */
static rh_status scatter_in_place(rh_request *r, void *work) {
  rh_ctx *ctx = r->ctx;
  const rh_memory_ops *m = work_memory(ctx);
  const rh_group *g = grp(r);
  size_t n = (size_t)g->n, total = r->count * n, esz = rh_dtype_size(r->dtype);
  rh_status st = work ? m->scale(ctx, work, total, r->dtype, r->opts.prescale) : RH_OK;
  rh_coll c = coll_of(r, work, total, r->dtype);
  if (st != RH_OK || r->count == 0) {
  } else if (use_native(r, ctx->ops->reduce_scatter != NULL, work)) {
    native_phase(ctx, "reduce-scatter");
    st = ctx->ops->reduce_scatter(ctx, work, r->count, r->dtype, c.op, c.timeout);
    rh__trace_end(ctx, RH_TRACK_COMM, NAN);
  } else if (priced(ctx)) {
    rh_plan plan = plan_of(r, RH_NC_REDUCE_SCATTER, total * esz);
    trace_plan(ctx, &plan);
    st = rh__coll_priced(&c, RH_NC_REDUCE_SCATTER, &plan, 0, NULL);
  } else if (n > 1) {
    c.coarse = coarse_for(ctx, !work, true); /* equal blocks: every ring step alike */
    rh__trace_text(ctx, RH_TRACK_COMM, "algorithm", "ring");
    algo_run run = {.c = &c, .kind = K_REDUCE_SCATTER};
    st = run_algorithm(&run, total * esz);
  }
  if (st == RH_OK && work) /* this rank's block */
    st = postscale(r, (char *)work + (size_t)g->me * r->count * esz, r->count);
  return st;
}

/* The send buffer is the caller's and stays as it was: the work runs on a copy, and this rank's
 * block of it goes to recv (timing-only on a device target: a scratch buffer, for real).  A copy
 * that a failed native collective (MPI's, NCCL's) was given is not released: abandoned, that
 * collective may still reach it. */
static rh_status reduce_scatter_run(rh_request *r) {
  rh_ctx *ctx = r->ctx;
  const rh_memory_ops *m = work_memory(ctx);
  size_t block = r->count * rh_dtype_size(r->dtype), bytes = block * (size_t)grp(r)->n;
  bool timing_only = !r->send;
  if (timing_only && !ctx->ops->device) return scatter_in_place(r, NULL);
  void *work = m->alloc(ctx, bytes + 1);
  if (!work) return RH_ERR_NOMEM;
  bool native = use_native(r, ctx->ops->reduce_scatter != NULL, work);
  rh_status st = timing_only ? RH_OK : m->copy(ctx, work, r->send, bytes);
  if (st == RH_OK) st = scatter_in_place(r, work);
  if (st == RH_OK && !timing_only)
    st = m->copy(ctx, r->recv, (char *)work + (size_t)grp(r)->me * block, block);
  if (st == RH_OK || !native) m->release(ctx, work);
  if (st == RH_OK) st = m->sync(ctx);
  return st;
}

static const rh_phase kind_phases[] = {RH_PHASE_ALLREDUCE, RH_PHASE_BROADCAST, RH_PHASE_ALLGATHER,
                                       RH_PHASE_REDUCE_SCATTER, RH_PHASE_NONE};

/* Agrees with the other ranks on the collective, then runs it. */
static rh_status run_collective(rh_request *r) {
  rh_ctx *ctx = r->ctx;
  ctx->last_error[0] = 0;
  coll_desc d = describe(r->kind, r->dtype, r->op, r->root, r->count,
                         reduces(r->kind) ? &r->opts : NULL);
  if (ctx->broken) {
    char what[160];
    say(&d, what, sizeof what);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "collective #%u %s: this rank's world was abandoned after a failure", r->seq, what);
    return RH_ERR_ABORTED;
  }
  if (ctx->ops->progress && kind_phases[r->kind] != RH_PHASE_NONE)
    ctx->ops->progress(ctx, kind_phases[r->kind]);
  d.invalid = r->invalid;
  if (r->kind == K_ALLGATHER && !r->invalid) {
    /* FNV-1a over the counts; blocks all alike hash as their one count, whichever call gave
     * them, so that an allgather agrees with an allgatherv of the same blocks */
    uint64_t shape = 1469598103934665603ull;
    size_t total = 0;
    bool even = true;
    for (int i = 0; r->counts && i < grp(r)->n; i++) {
      total += r->counts[i];
      shape = (shape ^ r->counts[i]) * 1099511628211ull;
      even = even && r->counts[i] == r->counts[0];
    }
    size_t each = r->counts ? r->counts[0] : r->count;
    if (even) shape = (1469598103934665603ull ^ each) * 1099511628211ull;
    d.count = r->counts ? total : each * (size_t)grp(r)->n;
    d.shape = shape;
  }
  d.scope = (uint32_t)r->scope;
  rh_status st = negotiate(ctx, r->seq, &d);
  if (st == RH_OK && r->invalid) st = RH_ERR_INVALID; /* without negotiation: this rank alone */
  if (st == RH_OK && r->scope != RH_SCOPE_WORLD && ctx->ops->device) { /* no split communicators */
    char what[160];
    say(&d, what, sizeof what);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "collective #%u %s: the %s target runs collectives over the world only", r->seq, what,
             ctx->ops->name);
    st = RH_ERR_UNSUPPORTED;
  }
  /* Horovod's background loop takes up what was submitted once per cycle (simulators: real
   * targets keep their own time): a collective submitted before the running round began goes in
   * it; one that waited behind the round starts the next as soon as the cycle has passed; one
   * submitted to an idle loop starts on the loop's next tick */
  double cycle = rh_setting(ctx, RH_SETTING_CYCLE_TIME);
  if (st == RH_OK && r->kind != K_BARRIER && cycle > 0 && ctx->ops->model_sync &&
      r->submitted > ctx->round) {
    double now = ctx->ops->now(ctx), start;
    if (r->submitted < now) start = fmax(ctx->round + cycle, now);
    else start = ctx->round + cycle * fmax(1, ceil((now - ctx->round) / cycle));
    ctx->round = start;
    if (start > now) {
      rh__trace_begin(ctx, RH_TRACK_COMM, "cycle", "wait for the cycle", now, 0);
      st = ctx->ops->sleep(ctx, start - now);
      rh__trace_end(ctx, RH_TRACK_COMM, NAN);
    }
  }
  bool occupied = st == RH_OK && r->kind != K_BARRIER && ctx->ops->occupy && grp(r)->n > 1;
  if (occupied) ctx->ops->occupy(ctx, true);
  if (st == RH_OK) {
    switch (r->kind) {
    case K_ALLREDUCE: st = allreduce_run(r); break;
    case K_BROADCAST: st = broadcast_run(r); break;
    case K_ALLGATHER: st = allgatherv_run(r); break;
    case K_REDUCE_SCATTER: st = reduce_scatter_run(r); break;
    case K_BARRIER: {
      rh_coll c = coll_for(ctx, r->seq, NULL, 0, RH_FLOAT32, RH_SUM);
      rh__trace_phase(ctx, &ctx->world, "dissemination");
      st = rh__barrier_dissemination(&c);
      rh__trace_end(ctx, RH_TRACK_COMM, NAN);
      break;
    }
    }
  }
  if (occupied) ctx->ops->occupy(ctx, false);
  st = note(ctx, st, r->seq, &d);
  break_world(ctx, st);
  return st;
}

/* The bytes a collective moves, for the timeline: its buffer's (allgather, reduce-scatter: all
 * blocks, as nccl-tests' size). */
static double coll_bytes(const rh_request *r) {
  double count = (double)r->count;
  int n = grp(r)->n;
  if (r->kind == K_REDUCE_SCATTER) count *= n;
  if (r->kind == K_ALLGATHER) {
    count = r->counts ? 0 : count * n;
    for (int i = 0; r->counts && i < n; i++) count += (double)r->counts[i];
  }
  return count * (double)rh_dtype_size(r->dtype);
}

/* The collective as it runs on this rank, on its collectives' track: its negotiation and its
 * algorithm's phases inside it. */
static rh_status execute(rh_request *r) {
  rh_ctx *ctx = r->ctx;
  if (!ctx->trace) return run_collective(r);
  char name[64];
  rh__cat(name, sizeof name, kind_names[r->kind], r->opts.name ? " " : "", r->opts.name, 40);
  double now = ctx->ops->now(ctx);
  rh__trace_begin(ctx, RH_TRACK_COMM, "collective", name, now, 0);
  rh__trace_num(ctx, RH_TRACK_COMM, "bytes", coll_bytes(r));
  rh__trace_num(ctx, RH_TRACK_COMM, "seq", r->seq);
  if (now > r->submitted) rh__trace_num(ctx, RH_TRACK_COMM, "queued_ms", (now - r->submitted) * 1e3);
  rh_status st = run_collective(r);
  if (st != RH_OK) {
    rh__trace_text(ctx, RH_TRACK_COMM, "status", rh_status_string(st));
    rh__trace_detail(ctx, RH_TRACK_COMM, ctx->last_error);
  }
  rh__trace_end(ctx, RH_TRACK_COMM, NAN);
  return st;
}

static rh_status task_main(void *arg) { return execute(arg); }

static void release(rh_request *r) {
  free(r->counts);
  free(r->group);
  free(r);
}

/* Takes r (heap-allocated, owned from here on): runs it now, or queues it behind this rank's
 * requests; `out` NULL means the caller blocks until it is done. */
static rh_status submit(rh_request *r, rh_request **out) {
  rh_ctx *ctx = r->ctx;
  r->seq = ctx->seq++;
  r->submitted = ctx->ops->now(ctx);
  if (r->opts.name) {
    rh__cat(r->name, sizeof r->name, r->opts.name, NULL, NULL, 0);
    r->opts.name = r->name;
  }
  if (!out && ctx->inflight == 0) {
    rh_status st = execute(r);
    release(r);
    return st;
  }
  rh_status st = ctx->ops->spawn(ctx, task_main, r, &r->task);
  if (st != RH_OK) {
    release(r);
    return st;
  }
  ctx->inflight++;
  if (out) {
    *out = r;
    return RH_OK;
  }
  return rh_wait(r);
}

static rh_request *request(rh_ctx *ctx, coll_kind kind) {
  rh_request *r = calloc(1, sizeof *r);
  if (r) *r = (rh_request){.ctx = ctx, .kind = kind, .root = -1, .ngroup = -1,
                           .opts = (rh_reduce_opts)RH_REDUCE_OPTS_INIT};
  return r;
}

static rh_request *allreduce_request(rh_ctx *ctx, const void *send, void *recv, size_t count,
                                     rh_dtype dtype, rh_op op, const rh_reduce_opts *opts) {
  rh_request *r = request(ctx, K_ALLREDUCE);
  if (!r) return NULL;
  r->send = send;
  r->recv = recv;
  r->count = count;
  r->dtype = dtype;
  r->op = op;
  if (opts) r->opts = *opts;
  bool timing_only = !send && !recv;
  r->invalid = !valid_type(dtype) || (int)op < 0 || op >= RH_OP_COUNT ||
               (!timing_only && count > 0 && (!send || !recv));
  if (r->invalid) r->dtype = RH_FLOAT32, r->op = RH_SUM; /* keep the descriptor printable */
  return r;
}

rh_status rh_allreduce(rh_ctx *ctx, const void *send, void *recv, size_t count, rh_dtype dtype,
                       rh_op op, const rh_reduce_opts *opts) {
  rh_request *r = allreduce_request(ctx, send, recv, count, dtype, op, opts);
  return r ? submit(r, NULL) : RH_ERR_NOMEM;
}

rh_status rh_iallreduce(rh_ctx *ctx, const void *send, void *recv, size_t count, rh_dtype dtype,
                        rh_op op, const rh_reduce_opts *opts, rh_request **out) {
  if (!out) return RH_ERR_INVALID;
  rh_request *r = allreduce_request(ctx, send, recv, count, dtype, op, opts);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

static rh_request *group_request(rh_ctx *ctx, void *const *bufs, const size_t *counts, int n,
                                 rh_dtype dtype, rh_op op, const rh_reduce_opts *opts) {
  rh_request *r = allreduce_request(ctx, NULL, NULL, 0, dtype, op, opts);
  if (!r) return NULL;
  r->ngroup = n < 0 ? 0 : n;
  r->counts = calloc((size_t)r->ngroup + 1, sizeof(size_t));
  r->group = bufs ? calloc((size_t)r->ngroup + 1, sizeof(void *)) : NULL;
  if (!r->counts || (bufs && !r->group)) {
    release(r);
    return NULL;
  }
  bool bad = n < 0 || (n > 0 && !counts) || r->invalid;
  const rh_memory_ops *home = bufs && n > 0 ? home_of(ctx, bufs[0]) : NULL;
  for (int i = 0; i < n && !bad; i++) {
    r->counts[i] = counts[i];
    r->count += counts[i];
    if (bufs) {
      r->group[i] = bufs[i];
      /* every tensor real, and all in one memory */
      bad = (!bufs[i] && counts[i] > 0) || (bufs[i] && home_of(ctx, bufs[i]) != home);
    }
  }
  r->invalid = bad;
  return r;
}

rh_status rh_allreduce_group(rh_ctx *ctx, void *const *bufs, const size_t *counts, int n,
                             rh_dtype dtype, rh_op op, const rh_reduce_opts *opts) {
  rh_request *r = group_request(ctx, bufs, counts, n, dtype, op, opts);
  return r ? submit(r, NULL) : RH_ERR_NOMEM;
}

rh_status rh_iallreduce_group(rh_ctx *ctx, void *const *bufs, const size_t *counts, int n,
                              rh_dtype dtype, rh_op op, const rh_reduce_opts *opts,
                              rh_request **out) {
  if (!out) return RH_ERR_INVALID;
  rh_request *r = group_request(ctx, bufs, counts, n, dtype, op, opts);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

static rh_request *broadcast_request(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype,
                                     int root) {
  rh_request *r = request(ctx, K_BROADCAST);
  if (!r) return NULL;
  r->recv = buf;
  r->count = count;
  r->dtype = dtype;
  r->root = root;
  r->invalid = !valid_type(dtype) || root < 0 || root >= ctx->world.n;
  if (r->invalid) r->dtype = RH_FLOAT32;
  return r;
}

rh_status rh_broadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root) {
  rh_request *r = broadcast_request(ctx, buf, count, dtype, root);
  return r ? submit(r, NULL) : RH_ERR_NOMEM;
}

rh_status rh_ibroadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root,
                        rh_request **out) {
  if (!out) return RH_ERR_INVALID;
  rh_request *r = broadcast_request(ctx, buf, count, dtype, root);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

static rh_request *allgatherv_request(rh_ctx *ctx, const void *send, void *recv,
                                      const size_t *counts, rh_dtype dtype) {
  rh_request *r = request(ctx, K_ALLGATHER);
  if (!r) return NULL;
  r->send = send;
  r->recv = recv;
  r->dtype = dtype;
  r->counts = calloc((size_t)ctx->world.n, sizeof(size_t));
  if (!r->counts) {
    free(r);
    return NULL;
  }
  if (counts) memcpy(r->counts, counts, (size_t)ctx->world.n * sizeof(size_t));
  /* recv NULL: timing-only; a rank that contributes nothing may pass send NULL */
  r->invalid = !valid_type(dtype) || !counts ||
               (recv && !send && r->counts[ctx->rank] > 0) || (!recv && send);
  if (r->invalid) r->dtype = RH_FLOAT32;
  return r;
}

rh_status rh_allgatherv(rh_ctx *ctx, const void *send, void *recv, const size_t *counts,
                        rh_dtype dtype) {
  rh_request *r = allgatherv_request(ctx, send, recv, counts, dtype);
  return r ? submit(r, NULL) : RH_ERR_NOMEM;
}

rh_status rh_iallgatherv(rh_ctx *ctx, const void *send, void *recv, const size_t *counts,
                         rh_dtype dtype, rh_request **out) {
  if (!out) return RH_ERR_INVALID;
  rh_request *r = allgatherv_request(ctx, send, recv, counts, dtype);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

/* Equal blocks: the counts are kept only where numbers move (timing-only, none). */
static rh_request *allgather_request(rh_ctx *ctx, const void *send, size_t count, void *recv,
                                     rh_dtype dtype) {
  if (recv || send) {
    size_t *counts = malloc((size_t)ctx->world.n * sizeof(size_t));
    if (!counts) return NULL;
    for (int i = 0; i < ctx->world.n; i++) counts[i] = count;
    rh_request *r = allgatherv_request(ctx, send, recv, counts, dtype);
    free(counts);
    return r;
  }
  rh_request *r = request(ctx, K_ALLGATHER);
  if (!r) return NULL;
  r->count = count;
  r->dtype = dtype;
  r->invalid = !valid_type(dtype);
  if (r->invalid) r->dtype = RH_FLOAT32;
  return r;
}

rh_status rh_allgather(rh_ctx *ctx, const void *send, size_t count, void *recv, rh_dtype dtype) {
  rh_request *r = allgather_request(ctx, send, count, recv, dtype);
  return r ? submit(r, NULL) : RH_ERR_NOMEM;
}

rh_status rh_iallgather(rh_ctx *ctx, const void *send, size_t count, void *recv, rh_dtype dtype,
                        rh_request **out) {
  if (!out) return RH_ERR_INVALID;
  rh_request *r = allgather_request(ctx, send, count, recv, dtype);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

static rh_request *reduce_scatter_request(rh_ctx *ctx, const void *send, void *recv,
                                          size_t count, rh_dtype dtype, rh_op op,
                                          const rh_reduce_opts *opts) {
  rh_request *r = allreduce_request(ctx, send, recv, count, dtype, op, opts);
  if (!r) return NULL;
  r->kind = K_REDUCE_SCATTER;
  r->invalid = r->invalid || (opts && opts->compression == RH_COMPRESS_FP16); /* none here */
  return r;
}

rh_status rh_reduce_scatter(rh_ctx *ctx, const void *send, void *recv, size_t count,
                            rh_dtype dtype, rh_op op, const rh_reduce_opts *opts) {
  rh_request *r = reduce_scatter_request(ctx, send, recv, count, dtype, op, opts);
  return r ? submit(r, NULL) : RH_ERR_NOMEM;
}

rh_status rh_ireduce_scatter(rh_ctx *ctx, const void *send, void *recv, size_t count,
                             rh_dtype dtype, rh_op op, const rh_reduce_opts *opts,
                             rh_request **out) {
  if (!out) return RH_ERR_INVALID;
  rh_request *r = reduce_scatter_request(ctx, send, recv, count, dtype, op, opts);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

/* ---- scoped collectives ---------------------------------------------------------------------- */

/* r, run over the groups of `scope`: invalid for a scope that does not exist, or groups this
 * world does not form (nodes of different GPU counts, a shard group that does not cut it). */
static rh_request *scoped(rh_request *r, rh_scope scope) {
  if (!r) return NULL;
  bool bad = (int)scope < 0 || scope > RH_SCOPE_REPLICA ||
             (scope != RH_SCOPE_WORLD && rh_scope_size(r->ctx, scope) == 0);
  r->scope = bad ? RH_SCOPE_WORLD : scope;
  r->invalid = r->invalid || bad;
  return r;
}

rh_status rh_iallreduce_in(rh_ctx *ctx, rh_scope scope, const void *send, void *recv,
                           size_t count, rh_dtype dtype, rh_op op, const rh_reduce_opts *opts,
                           rh_request **out) {
  rh_request *r = scoped(allreduce_request(ctx, send, recv, count, dtype, op, opts), scope);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

/* (equal blocks: the counts are the world's, all alike, so a group reads them as its own) */
rh_status rh_iallgather_in(rh_ctx *ctx, rh_scope scope, const void *send, size_t count,
                           void *recv, rh_dtype dtype, rh_request **out) {
  rh_request *r = scoped(allgather_request(ctx, send, count, recv, dtype), scope);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

rh_status rh_ireduce_scatter_in(rh_ctx *ctx, rh_scope scope, const void *send, void *recv,
                                size_t count, rh_dtype dtype, rh_op op,
                                const rh_reduce_opts *opts, rh_request **out) {
  rh_request *r = scoped(reduce_scatter_request(ctx, send, recv, count, dtype, op, opts), scope);
  return r ? submit(r, out) : RH_ERR_NOMEM;
}

rh_status rh_barrier(rh_ctx *ctx) {
  rh_request *r = request(ctx, K_BARRIER);
  return r ? submit(r, NULL) : RH_ERR_NOMEM;
}

rh_status rh_wait(rh_request *req) {
  if (!req) return RH_ERR_INVALID;
  /* The collective's own waits carry the timeout; the join only collects its status. */
  rh_status st = req->ctx->ops->join(req->ctx, req->task, -1);
  req->ctx->inflight--;
  release(req);
  return st;
}
