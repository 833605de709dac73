/*
 * allreduce_ring.c: bandwidth-optimal ring allreduce, a reduce-scatter then an allgather over all
 * ranks (see ring.c for the step diagram).  Each rank sends 2(p-1)/p of the data in 2(p-1) steps:
 * time 2(p-1)a + 2n(p-1)/p b, with a and b of the slowest link between ring neighbours.
 */
#include "internal.h"

#include <stdlib.h>

rh_status rh__allreduce_ring(const rh_coll *c) {
  const rh_group *g = &c->ctx->world;
  size_t *counts = malloc(2 * (size_t)g->n * sizeof(size_t));
  if (!counts) return RH_ERR_NOMEM;
  size_t *offsets = counts + g->n;
  rh__blocks(c->count, g->n, counts, offsets);
  rh_status st = rh__ring_reduce_scatter(c, g, counts, offsets);
  if (st == RH_OK) st = rh__ring_allgather(c, g, counts, offsets, 1);
  free(counts);
  return st;
}
