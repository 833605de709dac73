/*
 * api.c: the public collective calls.  Each call checks its arguments, takes the next sequence
 * number (every rank numbers its collectives the same way, which keeps concurrent collectives
 * apart on the wire), applies prescale, compression and postscale around the algorithm the
 * decision file picks, and runs it.  The non-blocking forms run the same code in a background
 * task of the backend.
 */
#include "internal.h"

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

/* ---- allreduce ---------------------------------------------------------------------------- */

static rh_status allreduce_seq(rh_ctx *ctx, uint32_t seq, const void *send, void *recv,
                               size_t count, rh_dtype dtype, rh_op op, const rh_reduce_opts *o) {
  bool timing_only = !send && !recv;
  if (!timing_only && (!send || !recv) && count > 0) return RH_ERR_INVALID;
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
  rh_coll c = coll_for(ctx, seq, buf, count, dtype, RH_SUM);
  if (ctx->world.n < 2 || count == 0) return RH_OK;
  rh_algo algo = rh__choose_bcast(ctx, count * rh_dtype_size(dtype));
  return algo == RH_ALG_BCAST_RING ? rh__bcast_ring(&c, root) : rh__bcast_tree(&c, root);
}

rh_status rh_broadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root) {
  if (!valid_type(dtype) || root < 0 || root >= ctx->world.n) return RH_ERR_INVALID;
  return broadcast_seq(ctx, ctx->seq++, buf, count, dtype, root);
}

static rh_status allgatherv_seq(rh_ctx *ctx, uint32_t seq, const void *send, void *recv,
                                const size_t *counts, rh_dtype dtype) {
  bool timing_only = !send && !recv;
  size_t esz = rh_dtype_size(dtype), off = 0;
  for (int i = 0; i < ctx->rank; i++) off += counts[i];
  if (!timing_only) {
    if (!send || !recv) return RH_ERR_INVALID;
    memmove((char *)recv + off * esz, send, counts[ctx->rank] * esz);
  }
  rh_coll c = coll_for(ctx, seq, recv, 0, dtype, RH_SUM);
  return rh__allgatherv_ring(&c, counts);
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
  rh_coll c = coll_for(ctx, ctx->seq++, NULL, 0, RH_FLOAT32, RH_SUM);
  return rh__barrier_dissemination(&c);
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
