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
  for (size_t off = 0; off < c->count && st == RH_OK; off += chunk) {
    size_t cnt = c->count - off < chunk ? c->count - off : chunk;
    void *p = base ? base + off * esz : NULL;
    if (pos > 0) {
      rh_p2p *r = NULL;
      st = ctx->ops->irecv(ctx, prev, c->tag, p, cnt * esz, &r);
      rh_status w = ctx->ops->waitall(ctx, &r, 1, c->timeout);
      if (st == RH_OK) st = w;
    }
    if (st == RH_OK && pos < n - 1) {
      st = ctx->ops->waitall(ctx, &pending, 1, c->timeout);
      pending = NULL;
      if (st == RH_OK) st = ctx->ops->isend(ctx, next, c->tag, p, cnt * esz, &pending);
    }
  }
  /* after a failure the send still pending is released at once, not waited for */
  rh_status w = ctx->ops->waitall(ctx, &pending, 1, st == RH_OK ? c->timeout : 0);
  return st != RH_OK ? st : w;
}
