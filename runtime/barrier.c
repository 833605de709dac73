/*
 * barrier.c: dissemination barrier.  In round k each rank sends an empty message to rank + 2^k
 * and waits for one from rank - 2^k; after ceil(lg p) rounds every rank has heard, directly or
 * not, from every other.  Example on 5 ranks: distances 1, 2, 4.
 */
#include "internal.h"

rh_status rh__barrier_dissemination(const rh_coll *c) {
  rh_ctx *ctx = c->ctx;
  const rh_group *g = &ctx->world;
  int n = g->n;
  rh_status st = RH_OK;
  for (int d = 1; d < n && st == RH_OK; d <<= 1) {
    rh_p2p *req[2] = {NULL, NULL};
    st = ctx->ops->isend(ctx, g->ranks[(g->me + d) % n], c->tag, NULL, 0, &req[0]);
    if (st == RH_OK)
      st = ctx->ops->irecv(ctx, g->ranks[(g->me - d + n) % n], c->tag, NULL, 0, &req[1]);
    rh_status w = ctx->ops->waitall(ctx, req, 2, c->timeout);
    if (st == RH_OK) st = w;
  }
  return st;
}
