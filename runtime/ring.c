/*
 * ring.c: the two ring phases every ring algorithm is made of, over any group of ranks.
 *
 * Reduce-scatter, example on 4 ranks, blocks a..d; step s sends block (me - s) to the right and
 * reduces block (me - s - 1) arriving from the left:
 *
 *   step 0:  r0 -a-> r1   r1 -b-> r2   r2 -c-> r3   r3 -d-> r0
 *   step 1:  r0 -d-> r1   r1 -a-> r2   r2 -b-> r3   r3 -c-> r0
 *   step 2:  r0 -c-> r1   r1 -d-> r2   r2 -a-> r3   r3 -b-> r0
 *   after:   r0 owns b    r1 owns c    r2 owns d    r3 owns a       (index i owns i + 1)
 *
 * Allgather then circulates the owned blocks the same way with copies instead of reductions.
 * Coarse grain: when the steps are identical (timing-only, equal blocks: api.c decides once per
 * collective), one step is simulated between two zero-cost rendezvous and the remaining steps are
 * charged as that step's duration; a last rendezvous notices a peer that died meanwhile.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* One ring step: send block `sb` right, receive block `rb` from the left into `tmp` (reduce) or
 * in place (copy). */
static rh_status ring_step(const rh_coll *c, const rh_group *g, const rh_blocks *b, int sb,
                           int rb, void *tmp, bool reduce) {
  rh_ctx *ctx = c->ctx;
  size_t esz = rh_dtype_size(c->dtype);
  int right = g->ranks[mod(g->me + 1, g->n)], left = g->ranks[mod(g->me - 1, g->n)];
  char *base = c->buf;
  rh_p2p *req[2] = {NULL, NULL};
  size_t scount = rh__block_count(b, sb), rcount = rh__block_count(b, rb);
  size_t roff = rh__block_offset(b, rb);
  rh_status st = ctx->ops->isend(ctx, right, c->tag,
                                 base ? base + rh__block_offset(b, sb) * esz : NULL, scount * esz,
                                 &req[0]);
  if (st == RH_OK) {
    void *dst = base ? (reduce ? tmp : base + roff * esz) : NULL;
    st = ctx->ops->irecv(ctx, left, c->tag, dst, rcount * esz, &req[1]);
  }
  rh_status wst = ctx->ops->waitall(ctx, req, 2, c->timeout);
  if (st == RH_OK) st = wst;
  if (st != RH_OK || !reduce) return st;
  if (base) rh__reduce(base + roff * esz, tmp, rcount, c->dtype, c->op);
  if (ctx->ops->reduce_cost) st = ctx->ops->reduce_cost(ctx, rcount * esz);
  return st;
}

/* Runs steps 0..n-2 of a phase, at the fine or the coarse grain. */
static rh_status ring_phase(const rh_coll *c, const rh_group *g, const rh_blocks *b,
                            int first_send, bool reduce) {
  int n = g->n;
  if (n < 2) return RH_OK;
  rh_ctx *ctx = c->ctx;
  void *tmp = NULL;
  if (c->buf && reduce) {
    /* the longest block: of an even split, whichever a rotation put first */
    size_t maxc = b->counts ? b->counts[0] : b->count / (size_t)n + (b->count % (size_t)n != 0);
    for (int i = 1; b->counts && i < n; i++)
      if (b->counts[i] > maxc) maxc = b->counts[i];
    tmp = malloc(maxc * rh_dtype_size(c->dtype) + 1);
    if (!tmp) return RH_ERR_NOMEM;
  }
  rh_status st = RH_OK;
  if (c->coarse && n >= 3) {
    /* align, run one step, agree that it went well, charge the rest, and meet again so that a
     * peer that died meanwhile is noticed */
    st = ctx->ops->model_sync(ctx, g, true, NULL, c->timeout);
    double t0 = ctx->ops->now(ctx);
    rh_status step = st;
    if (st == RH_OK)
      step = ring_step(c, g, b, mod(first_send, n), mod(first_send - 1, n), tmp, reduce);
    if (st == RH_OK) st = ctx->ops->model_sync(ctx, g, step == RH_OK, NULL, c->timeout);
    if (step != RH_OK) st = step; /* this rank's own failure says more than ABORTED */
    if (st == RH_OK) st = ctx->ops->sleep(ctx, (double)(n - 2) * (ctx->ops->now(ctx) - t0));
    if (st == RH_OK) st = ctx->ops->model_sync(ctx, g, true, NULL, c->timeout);
  } else {
    for (int s = 0; s < n - 1 && st == RH_OK; s++)
      st = ring_step(c, g, b, mod(first_send - s, n), mod(first_send - s - 1, n), tmp, reduce);
  }
  free(tmp);
  return st;
}

/* Each phase is a slice of the rank's collectives' track in the timeline, named by its group:
 * "reduce-scatter" over the world, "local reduce-scatter" inside a node, "cross ..." across. */
rh_status rh__ring_reduce_scatter(const rh_coll *c, const rh_group *g, const rh_blocks *b) {
  rh__trace_phase(c->ctx, g, "reduce-scatter");
  rh_status st = ring_phase(c, g, b, g->me, true);
  rh__trace_end(c->ctx, RH_TRACK_COMM, NAN);
  return st;
}

rh_status rh__ring_allgather(const rh_coll *c, const rh_group *g, const rh_blocks *b, int shift) {
  rh__trace_phase(c->ctx, g, "allgather");
  rh_status st = ring_phase(c, g, b, g->me + shift, false);
  rh__trace_end(c->ctx, RH_TRACK_COMM, NAN);
  return st;
}
