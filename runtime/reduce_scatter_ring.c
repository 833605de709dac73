/*
 * reduce_scatter_ring.c: ring reduce-scatter over the world (ring.c's phase).  The ring leaves
 * group index i holding block i + 1; its blocks are rotated by n - 1 so that rank i ends holding
 * block i, as NCCL's ncclReduceScatter and MPI_Reduce_scatter_block leave it.  Time (p-1)a +
 * (n(p-1)/p) b for n bytes in all.
 */
#include "internal.h"

rh_status rh__reduce_scatter_ring(const rh_coll *c) {
  const rh_group *g = rh__coll_group(c);
  rh_blocks b = rh__even_blocks(c->count, g->n, 0);
  b.rot = g->n - 1;
  return rh__ring_reduce_scatter(c, g, &b);
}
