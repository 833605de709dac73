/*
 * coll_priced.c: a collective run at the NCCL model's price (network_model: nccl).  As an NCCL
 * kernel waits for its peers, the collective starts when the last rank arrives; the plan's
 * seconds then pass and the ranks meet again, so that a peer that died or hung meanwhile is
 * noticed as in any collective.  A link down on the path stalls it (up to the collective timeout,
 * then RH_ERR_TIMEOUT); a degraded one slows its bandwidth part and adds its latency to every hop.
 * Real numbers cross through the backend's zero-cost audit and are reduced in rank order, so
 * every rank holds the same bits.
 *
 *   r0 ──┐                 ┌── r0        meet: the last arrival starts the collective
 *   r1 ──┼── plan seconds ─┼── r1        meet: everyone finished, or someone failed
 *   r2 ──┘                 └── r2        numbers: each rank's buffer through the audit
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Waits while a link on the path is down, up to the timeout; the time to charge otherwise. */
static rh_status stall_or_price(const rh_coll *c, const rh_plan *plan, double *seconds) {
  rh_ctx *ctx = c->ctx;
  *seconds = plan->seconds;
  if (!ctx->ops->links) return RH_OK;
  bool across = ctx->topo->nodes > 1 && c->group != &ctx->node &&
                !(c->group == &ctx->shard && ctx->shard.ranks == ctx->node.ranks);
  double factor = 1, extra = 0, waited = 0;
  while (!ctx->ops->links(ctx, across, &factor, &extra)) {
    if (waited >= c->timeout) {
      snprintf(ctx->last_error, sizeof ctx->last_error,
               "stall: collective #%u: a link on its path is down (%.6g s, the collective timeout)",
               c->seq, c->timeout);
      return RH_ERR_TIMEOUT;
    }
    double nap = fmin(1.0, c->timeout - waited);
    rh_status st = ctx->ops->sleep(ctx, nap);
    if (st != RH_OK) return st;
    waited += nap;
  }
  if (factor < 1 || extra > 0)
    *seconds = plan->latency + (plan->seconds - plan->latency) / factor + extra * plan->hops;
  return RH_OK;
}

/* Every rank's `bytes` record, piece `k` of the collective, through the audit into all. */
static rh_status exchange(const rh_coll *c, uint64_t k, const void *mine, size_t bytes, void *all) {
  rh_ctx *ctx = c->ctx;
  uint8_t *arrived = calloc((size_t)ctx->world.n, 1);
  if (!arrived) return RH_ERR_NOMEM;
  rh_status st = ctx->ops->audit(ctx, RH_AUDIT_DATA | (k << 34) | c->seq, mine, bytes, all,
                                 arrived, c->timeout);
  free(arrived);
  return st;
}

/* The numbers, in pieces small enough that the records of every rank at once stay near 16 MiB:
 * each piece is gathered from every rank of the world, then the group's records are reduced in
 * its order (allreduce), taken from the root (broadcast) or put in place (allgather). */
static rh_status numbers(const rh_coll *c, rh_nccl_coll coll, int root, const size_t *counts) {
  rh_ctx *ctx = c->ctx;
  const rh_group *g = rh__coll_group(c);
  size_t esz = rh_dtype_size(c->dtype), W = (size_t)ctx->world.n, n = (size_t)g->n, per = 0;
  size_t off = 0;
  char *buf = c->buf;
  if (coll == RH_NC_ALLGATHER) {
    for (size_t r = 0; r < n; r++) {
      if (counts[r] > per) per = counts[r];
      if ((int)r < g->me) off += counts[r];
    }
  } else {
    per = c->count;
  }
  size_t piece = (16u << 20) / (W * W) / esz;
  if (piece < 1024) piece = 1024;
  char *mine = malloc(piece * esz), *all = malloc(W * piece * esz);
  rh_status st = mine && all ? RH_OK : RH_ERR_NOMEM;
  for (size_t lo = 0, k = 0; lo < per && st == RH_OK; lo += piece, k++) {
    size_t m = per - lo < piece ? per - lo : piece, bytes = m * esz;
    if (coll == RH_NC_ALLGATHER) {
      memset(mine, 0, bytes);
      size_t own = counts[g->me];
      if (lo < own) memcpy(mine, buf + (off + lo) * esz, (own - lo < m ? own - lo : m) * esz);
    } else {
      memcpy(mine, buf + lo * esz, bytes);
    }
    st = exchange(c, k, mine, bytes, all);
    if (st != RH_OK) break;
    switch (coll) {
    case RH_NC_ALLREDUCE:
    case RH_NC_REDUCE_SCATTER: /* every block reduced; this rank keeps its own */
      memcpy(buf + lo * esz, all + (size_t)g->ranks[0] * bytes, bytes);
      for (size_t r = 1; r < n; r++)
        rh__reduce(buf + lo * esz, all + (size_t)g->ranks[r] * bytes, m, c->dtype, c->op);
      break;
    case RH_NC_BROADCAST: memcpy(buf + lo * esz, all + (size_t)g->ranks[root] * bytes, bytes); break;
    default: { /* allgather: rank r's elements lo.. go after the blocks before it */
      size_t at = 0;
      for (size_t r = 0; r < n; r++) {
        if (lo < counts[r]) {
          size_t take = counts[r] - lo < m ? counts[r] - lo : m;
          memcpy(buf + (at + lo) * esz, all + (size_t)g->ranks[r] * bytes, take * esz);
        }
        at += counts[r];
      }
    }
    }
  }
  free(mine);
  free(all);
  return st;
}

rh_status rh__coll_priced(const rh_coll *c, rh_nccl_coll coll, const rh_plan *plan, int root,
                          const size_t *counts) {
  rh_ctx *ctx = c->ctx;
  const rh_group *g = rh__coll_group(c);
  /* the timeline: the wait for the last rank, then NCCL's kernel ("nccl ring/simple") */
  rh__trace_begin(ctx, RH_TRACK_COMM, "phase", "wait for peers", NAN, 0);
  rh_status st = ctx->ops->model_sync(ctx, g, true, NULL, c->timeout);
  rh__trace_end(ctx, RH_TRACK_COMM, NAN);
  if (st != RH_OK) return st;
  if (ctx->trace) {
    char name[48], plan_name[32];
    snprintf(name, sizeof name, "nccl %s", rh__plan_name(plan, plan_name, sizeof plan_name));
    rh__trace_phase(ctx, g, name);
  }
  double seconds;
  st = stall_or_price(c, plan, &seconds);
  if (st != RH_ERR_TIMEOUT) { /* every rank saw the same link down at the same time */
    if (st == RH_OK && seconds > 0) st = ctx->ops->sleep(ctx, seconds);
    rh_status met = ctx->ops->model_sync(ctx, g, st == RH_OK, NULL, c->timeout);
    if (st == RH_OK) st = met;
  }
  rh__trace_end(ctx, RH_TRACK_COMM, NAN);
  if (st == RH_OK && c->buf) st = numbers(c, coll, root, counts);
  return st;
}
