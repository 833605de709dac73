/*
 * bcast_tree.c: binomial-tree broadcast.  Relative to the root, rank v receives from v minus its
 * lowest set bit and then sends to v + 2^k for each 2^k below that bit, largest first.  Example
 * on 8 ranks:
 *
 *   round 1: 0 -> 4
 *   round 2: 0 -> 2, 4 -> 6
 *   round 3: 0 -> 1, 2 -> 3, 4 -> 5, 6 -> 7
 *
 * Time ceil(lg p)(a + n b): the choice for small messages.
 */
#include "internal.h"

rh_status rh__bcast_tree(const rh_coll *c, int root) {
  rh_ctx *ctx = c->ctx;
  const rh_group *g = &ctx->world;
  int n = g->n;
  if (n < 2 || c->count == 0) return RH_OK;
  size_t bytes = c->count * rh_dtype_size(c->dtype);
  int v = (g->me - root + n) % n;
  int mask = 1;
  rh_status st = RH_OK;
  while (mask < n) {
    if (v & mask) {
      rh_p2p *r = NULL;
      st = ctx->ops->irecv(ctx, g->ranks[(v - mask + root) % n], c->tag, c->buf, bytes, &r);
      rh_status w = ctx->ops->waitall(ctx, &r, 1, c->timeout);
      if (st == RH_OK) st = w;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0 && st == RH_OK; mask >>= 1) {
    if (v + mask >= n) continue;
    rh_p2p *r = NULL;
    st = ctx->ops->isend(ctx, g->ranks[(v + mask + root) % n], c->tag, c->buf, bytes, &r);
    rh_status w = ctx->ops->waitall(ctx, &r, 1, c->timeout);
    if (st == RH_OK) st = w;
  }
  return st;
}
