/*
 * allreduce_ring.c: bandwidth-optimal ring allreduce, a reduce-scatter then an allgather over all
 * ranks (see ring.c for the step diagram).  Each rank sends 2(p-1)/p of the data in 2(p-1) steps:
 * time 2(p-1)a + 2n(p-1)/p b, with a and b of the slowest link between ring neighbours.
 */
#include "internal.h"

rh_status rh__allreduce_ring(const rh_coll *c) {
  const rh_group *g = rh__coll_group(c);
  rh_blocks b = rh__even_blocks(c->count, g->n, 0);
  rh_status st = rh__ring_reduce_scatter(c, g, &b);
  if (st == RH_OK) st = rh__ring_allgather(c, g, &b, 1);
  return st;
}
