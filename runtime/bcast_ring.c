/*
 * bcast_ring.c: pipelined chain broadcast.  The data is cut into chunks of RH_PIPELINE_CHUNK
 * bytes that flow root -> root+1 -> ... -> root-1, each rank forwarding chunk j while it receives
 * chunk j+1.  Example on 4 ranks, 3 chunks (time goes down):
 *
 *   t0: r0 -c0-> r1
 *   t1: r0 -c1-> r1 -c0-> r2
 *   t2: r0 -c2-> r1 -c1-> r2 -c0-> r3
 *   t3:          r1 -c2-> r2 -c1-> r3
 *   t4:                   r2 -c2-> r3
 *
 * Time (p - 1 + k - 1)(a + (n/k) b) for k chunks: near n b for large messages.
 *
 * Coarse grain (timing-only, 3 chunks or more): two chunks are simulated, which is enough for the
 * second to arrive at each rank one bottleneck hop after the first (a chunk waits for the slowest
 * hop before it); the last rank's gap is the pipeline's pace, and every rank then charges the
 * chunks left at that pace (a shorter last chunk at the pace times its share of a chunk).
 * Zero-cost rendezvous align the ranks before and after, so a peer that died meanwhile is
 * noticed.
 */
#include "internal.h"

rh_status rh__bcast_ring(const rh_coll *c, int root) {
  rh_ctx *ctx = c->ctx;
  const rh_group *g = &ctx->world;
  int n = g->n;
  if (n < 2 || c->count == 0) return RH_OK;
  size_t esz = rh_dtype_size(c->dtype);
  size_t chunk = (size_t)rh_setting(ctx, RH_SETTING_PIPELINE_CHUNK) / esz;
  if (chunk == 0) chunk = 1;
  int pos = (g->me - root + n) % n;
  int prev = g->ranks[(g->me - 1 + n) % n], next = g->ranks[(g->me + 1) % n];
  char *base = c->buf;
  rh_p2p *pending = NULL;
  rh_status st = RH_OK;
  size_t chunks = (c->count + chunk - 1) / chunk, simulated = chunks;
  bool coarse = c->coarse && !base && chunks >= 3 && ctx->ops->model_sync;
  if (coarse) {
    st = ctx->ops->model_sync(ctx, g, true, NULL, c->timeout);
    simulated = 2;
  }
  double arrived[2] = {0, 0};
  for (size_t j = 0, off = 0; j < simulated && st == RH_OK; j++, off += chunk) {
    size_t cnt = c->count - off < chunk ? c->count - off : chunk;
    void *p = base ? base + off * esz : NULL;
    if (pos > 0) {
      rh_p2p *r = NULL;
      st = ctx->ops->irecv(ctx, prev, c->tag, p, cnt * esz, &r);
      rh_status w = ctx->ops->waitall(ctx, &r, 1, c->timeout);
      if (st == RH_OK) st = w;
      if (j < 2) arrived[j] = ctx->ops->now(ctx);
    }
    if (st == RH_OK && pos < n - 1) {
      st = ctx->ops->waitall(ctx, &pending, 1, c->timeout);
      pending = NULL;
      if (st == RH_OK) st = ctx->ops->isend(ctx, next, c->tag, p, cnt * esz, &pending);
    }
  }
  /* after a failure the send still pending is released at once, not waited for */
  rh_status w = ctx->ops->waitall(ctx, &pending, 1, st == RH_OK ? c->timeout : 0);
  if (st == RH_OK) st = w;
  if (coarse) {
    double pace = pos == n - 1 ? arrived[1] - arrived[0] : 0; /* the last rank's gap */
    rh_status agreed = ctx->ops->model_sync(ctx, g, st == RH_OK, &pace, c->timeout);
    if (st == RH_OK) st = agreed;
    double left = (double)(c->count - 2 * chunk) / (double)chunk; /* chunks, the last in part */
    if (st == RH_OK) st = ctx->ops->sleep(ctx, left * pace);
    if (st == RH_OK) st = ctx->ops->model_sync(ctx, g, true, NULL, c->timeout);
  }
  return st;
}
