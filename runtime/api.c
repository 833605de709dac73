/*
 * api.c: the public collective calls.  Each call checks its arguments, takes the next sequence
 * number (every rank numbers its collectives the same way, which keeps concurrent collectives
 * apart on the wire), applies prescale, compression and postscale around the algorithm the
 * decision file picks, and runs it.  The non-blocking forms run the same code in a background
 * task of the backend.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Collectives in flight at once on one rank are kept apart by tag = seq mod this. */
#define RH_TAG_WINDOW 256u

double rh_time(const rh_ctx *ctx) { return ctx->ops->now(ctx); }

rh_status rh_compute(rh_ctx *ctx, double flops) {
  if (!(flops >= 0)) return RH_ERR_INVALID;
  return ctx->ops->compute(ctx, flops);
}

static rh_coll coll_for(rh_ctx *ctx, uint32_t seq, void *buf, size_t count, rh_dtype dtype,
                        rh_op op) {
  return (rh_coll){.ctx = ctx, .tag = seq % RH_TAG_WINDOW, .buf = buf, .count = count,
                   .dtype = dtype, .op = op == RH_AVERAGE ? RH_SUM : op,
                   .timeout = rh_setting(ctx, RH_SETTING_TIMEOUT)};
}

static bool valid_type(rh_dtype dtype) { return (int)dtype >= 0 && dtype < RH_DTYPE_COUNT; }

const char *rh_last_error(const rh_ctx *ctx) { return ctx->last_error; }

/* ---- negotiation -------------------------------------------------------------------------- */

typedef enum { K_ALLREDUCE, K_BROADCAST, K_ALLGATHER, K_BARRIER } coll_kind;
static const char *const kind_names[] = {"allreduce", "broadcast", "allgather", "barrier"};

/* What a rank says it is about to run; compared byte for byte across ranks. */
typedef struct coll_desc {
  uint32_t kind, dtype, op;
  int32_t root;
  uint64_t count;
  uint64_t shape; /* allgatherv: a hash of every rank's count */
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
  if (o && o->name) snprintf(d.name, sizeof d.name, "%s", o->name);
  return d;
}

static int say(const coll_desc *d, char *buf, size_t len) {
  if (d->kind == K_BARRIER) return snprintf(buf, len, "barrier");
  int k = snprintf(buf, len, "%s%s%s%s (%llu x %s", kind_names[d->kind], d->name[0] ? " '" : "",
                   d->name, d->name[0] ? "'" : "", (unsigned long long)d->count,
                   rh_dtype_name((rh_dtype)d->dtype));
  if (d->kind == K_ALLREDUCE) k += snprintf(buf + k, len - (size_t)k, ", %s", rh_op_name((rh_op)d->op));
  if (d->kind == K_BROADCAST) k += snprintf(buf + k, len - (size_t)k, ", root %d", d->root);
  if (d->prescale != 1 || d->postscale != 1)
    k += snprintf(buf + k, len - (size_t)k, ", scale %g/%g", d->prescale, d->postscale);
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
  coll_desc *all = calloc((size_t)n, sizeof *all);
  uint8_t *arrived = calloc((size_t)n, 1), *group = calloc((size_t)n, 1);
  if (!all || !arrived || !group) {
    free(all);
    free(arrived);
    free(group);
    return RH_ERR_NOMEM;
  }
  double timeout = rh_setting(ctx, RH_SETTING_TIMEOUT);
  rh_status st = ctx->ops->audit(ctx, RH_AUDIT_COLLECTIVE | seq, d, sizeof *d, all, arrived, timeout);
  char what[160], ranks[160];
  say(d, what, sizeof what);
  if (st == RH_ERR_TIMEOUT) {
    char came[160];
    rh__rank_list(arrived, n, 1, came, sizeof came);
    rh__rank_list(arrived, n, 0, ranks, sizeof ranks);
    snprintf(ctx->last_error, sizeof ctx->last_error,
             "stall: collective #%u %s: ranks %s waited %g s; ranks %s never issued it", seq, what,
             came, timeout, ranks);
  } else if (st == RH_OK) {
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
  if (st == RH_OK || st == RH_ERR_MISMATCH || (st == RH_ERR_TIMEOUT && ctx->last_error[0]))
    return st;
  char what[160];
  say(d, what, sizeof what);
  snprintf(ctx->last_error, sizeof ctx->last_error, "collective #%u %s: %s", seq, what,
           rh_status_string(st));
  return st;
}

rh_status rh_check_allgather(rh_ctx *ctx, const void *mine, size_t bytes, void *all) {
  uint32_t k = ctx->audits++;
  if (ctx->ops->audit) {
    uint8_t *arrived = calloc((size_t)ctx->world.n, 1);
    if (!arrived) return RH_ERR_NOMEM;
    rh_status st = ctx->ops->audit(ctx, RH_AUDIT_CHECK | k, mine, bytes, all, arrived,
                                   rh_setting(ctx, RH_SETTING_TIMEOUT));
    if (st == RH_ERR_TIMEOUT) {
      char missing[160];
      rh__rank_list(arrived, ctx->world.n, 0, missing, sizeof missing);
      snprintf(ctx->last_error, sizeof ctx->last_error, "stall: check #%u: ranks %s never came",
               k, missing);
    }
    free(arrived);
    return st;
  }
  /* without an audit channel, a real allgather of 4-byte words */
  if (bytes % 4) return RH_ERR_INVALID;
  return rh_allgather(ctx, mine, bytes / 4, all, RH_INT32);
}

/* ---- allreduce ---------------------------------------------------------------------------- */

static rh_status allreduce_run(rh_ctx *ctx, uint32_t seq, const void *send, void *recv,
                               size_t count, rh_dtype dtype, rh_op op, const rh_reduce_opts *o);

static rh_status allreduce_seq(rh_ctx *ctx, uint32_t seq, const void *send, void *recv,
                               size_t count, rh_dtype dtype, rh_op op, const rh_reduce_opts *o) {
  if (!(!send && !recv) && (!send || !recv) && count > 0) return RH_ERR_INVALID;
  coll_desc d = describe(K_ALLREDUCE, dtype, op, -1, count, o);
  rh_status st = negotiate(ctx, seq, &d);
  if (st == RH_OK) st = allreduce_run(ctx, seq, send, recv, count, dtype, op, o);
  return note(ctx, st, seq, &d);
}

static rh_status allreduce_run(rh_ctx *ctx, uint32_t seq, const void *send, void *recv,
                               size_t count, rh_dtype dtype, rh_op op, const rh_reduce_opts *o) {
  bool timing_only = !send && !recv;
  rh_reduce_opts opts = o ? *o : (rh_reduce_opts)RH_REDUCE_OPTS_INIT;
  bool fp16 = opts.compression == RH_COMPRESS_FP16 ||
              (opts.compression == RH_COMPRESS_DEFAULT &&
               (int)rh_setting(ctx, RH_SETTING_COMPRESSION) == RH_WIRE_FP16);
  fp16 = fp16 && (dtype == RH_FLOAT32 || dtype == RH_FLOAT64);
  if (!timing_only) {
    if (send != recv) memcpy(recv, send, count * rh_dtype_size(dtype));
    rh__scale(recv, count, dtype, opts.prescale);
  }
  void *wire = recv;
  rh_dtype wire_type = fp16 ? RH_FLOAT16 : dtype;
  if (fp16 && !timing_only) {
    wire = malloc(count * sizeof(uint16_t) + 1);
    if (!wire) return RH_ERR_NOMEM;
    rh__to_half(wire, recv, count, dtype);
  }
  rh_coll c = coll_for(ctx, seq, wire, count, wire_type, op);
  rh_status st = RH_OK;
  if (ctx->world.n > 1 && count > 0) {
    rh_algo algo = rh__choose_allreduce(ctx, count * rh_dtype_size(wire_type));
    st = algo == RH_ALG_ALLREDUCE_HIERARCHICAL ? rh__allreduce_hierarchical(&c)
                                               : rh__allreduce_ring(&c);
  }
  if (wire != recv) {
    if (st == RH_OK) rh__from_half(recv, wire, count, dtype);
    free(wire);
  }
  if (st == RH_OK && !timing_only) {
    if (op == RH_AVERAGE && dtype == RH_INT32) { /* exact integer division, toward zero */
      int32_t *v = recv;
      for (size_t i = 0; i < count; i++) v[i] /= ctx->world.n;
      rh__scale(recv, count, dtype, opts.postscale);
    } else {
      double post = opts.postscale * (op == RH_AVERAGE ? 1.0 / ctx->world.n : 1.0);
      rh__scale(recv, count, dtype, post);
    }
  }
  return st;
}

static rh_status check_reduce(rh_dtype dtype, rh_op op) {
  if (!valid_type(dtype) || (int)op < 0 || op >= RH_OP_COUNT) return RH_ERR_INVALID;
  return RH_OK;
}

rh_status rh_allreduce(rh_ctx *ctx, const void *send, void *recv, size_t count, rh_dtype dtype,
                       rh_op op, const rh_reduce_opts *opts) {
  rh_status st = check_reduce(dtype, op);
  if (st != RH_OK) return st;
  return allreduce_seq(ctx, ctx->seq++, send, recv, count, dtype, op, opts);
}

/* ---- broadcast, allgather, barrier ---------------------------------------------------------- */

static rh_status broadcast_seq(rh_ctx *ctx, uint32_t seq, void *buf, size_t count, rh_dtype dtype,
                               int root) {
  coll_desc d = describe(K_BROADCAST, dtype, RH_SUM, root, count, NULL);
  rh_status st = negotiate(ctx, seq, &d);
  if (st != RH_OK || ctx->world.n < 2 || count == 0) return note(ctx, st, seq, &d);
  rh_coll c = coll_for(ctx, seq, buf, count, dtype, RH_SUM);
  rh_algo algo = rh__choose_bcast(ctx, count * rh_dtype_size(dtype));
  st = algo == RH_ALG_BCAST_RING ? rh__bcast_ring(&c, root) : rh__bcast_tree(&c, root);
  return note(ctx, st, seq, &d);
}

rh_status rh_broadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root) {
  if (!valid_type(dtype) || root < 0 || root >= ctx->world.n) return RH_ERR_INVALID;
  return broadcast_seq(ctx, ctx->seq++, buf, count, dtype, root);
}

static rh_status allgatherv_seq(rh_ctx *ctx, uint32_t seq, const void *send, void *recv,
                                const size_t *counts, rh_dtype dtype) {
  bool timing_only = !send && !recv;
  if (!timing_only && (!send || !recv)) return RH_ERR_INVALID;
  size_t esz = rh_dtype_size(dtype), off = 0, total = 0;
  uint64_t shape = 1469598103934665603ull; /* FNV-1a over the counts */
  for (int i = 0; i < ctx->world.n; i++) {
    if (i < ctx->rank) off += counts[i];
    total += counts[i];
    shape = (shape ^ counts[i]) * 1099511628211ull;
  }
  coll_desc d = describe(K_ALLGATHER, dtype, RH_SUM, -1, total, NULL);
  d.shape = shape;
  rh_status st = negotiate(ctx, seq, &d);
  if (st != RH_OK) return note(ctx, st, seq, &d);
  if (!timing_only) memmove((char *)recv + off * esz, send, counts[ctx->rank] * esz);
  rh_coll c = coll_for(ctx, seq, recv, 0, dtype, RH_SUM);
  return note(ctx, rh__allgatherv_ring(&c, counts), seq, &d);
}

rh_status rh_allgatherv(rh_ctx *ctx, const void *send, void *recv, const size_t *counts,
                        rh_dtype dtype) {
  if (!valid_type(dtype) || !counts) return RH_ERR_INVALID;
  return allgatherv_seq(ctx, ctx->seq++, send, recv, counts, dtype);
}

rh_status rh_allgather(rh_ctx *ctx, const void *send, size_t count, void *recv, rh_dtype dtype) {
  size_t *counts = malloc((size_t)ctx->world.n * sizeof(size_t));
  if (!counts) return RH_ERR_NOMEM;
  for (int i = 0; i < ctx->world.n; i++) counts[i] = count;
  rh_status st = rh_allgatherv(ctx, send, recv, counts, dtype);
  free(counts);
  return st;
}

rh_status rh_barrier(rh_ctx *ctx) {
  uint32_t seq = ctx->seq++;
  coll_desc d = describe(K_BARRIER, RH_FLOAT32, RH_SUM, -1, 0, NULL);
  rh_status st = negotiate(ctx, seq, &d);
  if (st != RH_OK) return note(ctx, st, seq, &d);
  rh_coll c = coll_for(ctx, seq, NULL, 0, RH_FLOAT32, RH_SUM);
  return note(ctx, rh__barrier_dissemination(&c), seq, &d);
}

/* ---- non-blocking forms ------------------------------------------------------------------- */

typedef enum { REQ_ALLREDUCE, REQ_BROADCAST, REQ_ALLGATHERV } req_kind;

struct rh_request {
  rh_ctx *ctx;
  req_kind kind;
  uint32_t seq;
  const void *send;
  void *recv;
  size_t count;
  rh_dtype dtype;
  rh_op op;
  int root;
  bool has_opts;
  rh_reduce_opts opts;
  size_t *counts; /* allgatherv: a copy, owned */
  rh_task *task;
};

static rh_status run_request(void *arg) {
  rh_request *r = arg;
  switch (r->kind) {
  case REQ_ALLREDUCE:
    return allreduce_seq(r->ctx, r->seq, r->send, r->recv, r->count, r->dtype, r->op,
                         r->has_opts ? &r->opts : NULL);
  case REQ_BROADCAST: return broadcast_seq(r->ctx, r->seq, r->recv, r->count, r->dtype, r->root);
  case REQ_ALLGATHERV: return allgatherv_seq(r->ctx, r->seq, r->send, r->recv, r->counts, r->dtype);
  }
  return RH_ERR_INVALID;
}

static rh_status start_request(rh_request *r, rh_request **out) {
  r->seq = r->ctx->seq++;
  rh_status st = r->ctx->ops->spawn(r->ctx, run_request, r, &r->task);
  if (st != RH_OK) {
    free(r->counts);
    free(r);
    return st;
  }
  *out = r;
  return RH_OK;
}

rh_status rh_iallreduce(rh_ctx *ctx, const void *send, void *recv, size_t count, rh_dtype dtype,
                        rh_op op, const rh_reduce_opts *opts, rh_request **out) {
  rh_status st = check_reduce(dtype, op);
  if (st != RH_OK || !out) return st != RH_OK ? st : RH_ERR_INVALID;
  rh_request *r = calloc(1, sizeof *r);
  if (!r) return RH_ERR_NOMEM;
  *r = (rh_request){.ctx = ctx, .kind = REQ_ALLREDUCE, .send = send, .recv = recv, .count = count,
                    .dtype = dtype, .op = op, .has_opts = opts != NULL};
  if (opts) r->opts = *opts;
  return start_request(r, out);
}

rh_status rh_ibroadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root,
                        rh_request **out) {
  if (!valid_type(dtype) || root < 0 || root >= ctx->world.n || !out) return RH_ERR_INVALID;
  rh_request *r = calloc(1, sizeof *r);
  if (!r) return RH_ERR_NOMEM;
  *r = (rh_request){.ctx = ctx, .kind = REQ_BROADCAST, .recv = buf, .count = count,
                    .dtype = dtype, .root = root};
  return start_request(r, out);
}

rh_status rh_iallgatherv(rh_ctx *ctx, const void *send, void *recv, const size_t *counts,
                         rh_dtype dtype, rh_request **out) {
  if (!valid_type(dtype) || !counts || !out) return RH_ERR_INVALID;
  rh_request *r = calloc(1, sizeof *r);
  size_t *copy = malloc((size_t)ctx->world.n * sizeof(size_t));
  if (!r || !copy) {
    free(r);
    free(copy);
    return RH_ERR_NOMEM;
  }
  memcpy(copy, counts, (size_t)ctx->world.n * sizeof(size_t));
  *r = (rh_request){.ctx = ctx, .kind = REQ_ALLGATHERV, .send = send, .recv = recv,
                    .dtype = dtype, .counts = copy};
  return start_request(r, out);
}

rh_status rh_wait(rh_request *req) {
  if (!req) return RH_ERR_INVALID;
  /* The collective's own waits carry the timeout; the join only collects its status. */
  rh_status st = req->ctx->ops->join(req->ctx, req->task, -1);
  free(req->counts);
  free(req);
  return st;
}
