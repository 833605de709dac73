/*
 * allreduce_hierarchical.c: Horovod's hierarchical allreduce.  Inside each node a ring
 * reduce-scatter leaves local rank i with the node's sum of block i + 1; the ranks with the same
 * local rank then ring-allreduce that block across nodes (all local ranks at once, sharing the
 * node's NICs); a ring allgather inside the node spreads the result.  Example, 2 nodes x 2 GPUs:
 *
 *   node A: r0 r1          reduce-scatter in A and in B     r0,r2 own block 1; r1,r3 own block 0
 *   node B: r2 r3          allreduce r0<->r2 and r1<->r3    blocks complete across nodes
 *                          allgather in A and in B          every rank has every block
 *
 * Needs the same number of ranks on every node (as Horovod does); otherwise the ring is used.
 */
#include "internal.h"

rh_status rh__allreduce_hierarchical(const rh_coll *c) {
  rh_ctx *ctx = c->ctx;
  if (!rh_topology_uniform(ctx->topo)) return rh__allreduce_ring(c);
  const rh_group *node = &ctx->node, *cross = &ctx->cross;
  int L = node->n, M = cross->n;
  rh_blocks blocks = rh__even_blocks(c->count, L, 0);
  rh_status st = rh__ring_reduce_scatter(c, node, &blocks);
  if (st == RH_OK && M > 1) {
    int own = (node->me + 1) % L;
    rh_blocks sub =
        rh__even_blocks(rh__block_count(&blocks, own), M, rh__block_offset(&blocks, own));
    st = rh__ring_reduce_scatter(c, cross, &sub);
    if (st == RH_OK) st = rh__ring_allgather(c, cross, &sub, 1);
  }
  if (st == RH_OK) st = rh__ring_allgather(c, node, &blocks, 1);
  return st;
}
