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

#include <stdlib.h>

rh_status rh__allreduce_hierarchical(const rh_coll *c) {
  rh_ctx *ctx = c->ctx;
  if (!rh_topology_uniform(ctx->topo)) return rh__allreduce_ring(c);
  const rh_group *node = &ctx->node, *cross = &ctx->cross;
  int L = node->n, M = cross->n;
  size_t *buf = malloc(2 * (size_t)(L + M) * sizeof(size_t));
  if (!buf) return RH_ERR_NOMEM;
  size_t *counts = buf, *offsets = buf + L, *sub_counts = buf + 2 * L, *sub_offsets = sub_counts + M;
  rh__blocks(c->count, L, counts, offsets);
  rh_status st = rh__ring_reduce_scatter(c, node, counts, offsets);
  if (st == RH_OK && M > 1) {
    int own = (node->me + 1) % L;
    rh__blocks(counts[own], M, sub_counts, sub_offsets);
    for (int i = 0; i < M; i++) sub_offsets[i] += offsets[own];
    st = rh__ring_reduce_scatter(c, cross, sub_counts, sub_offsets);
    if (st == RH_OK) st = rh__ring_allgather(c, cross, sub_counts, sub_offsets, 1);
  }
  if (st == RH_OK) st = rh__ring_allgather(c, node, counts, offsets, 1);
  free(buf);
  return st;
}
