/*
 * allgather_ring.c: ring allgather with unequal blocks (allgatherv).  Each rank starts with its own
 * block in place and, in p - 1 steps, forwards to the right the block it received last (the
 * allgather phase of ring.c with no shift).  Time (p-1)a + (n(p-1)/p) b for equal blocks.
 */
#include "internal.h"

#include <stdlib.h>

rh_status rh__allgatherv_ring(const rh_coll *c, const size_t *counts) {
  const rh_group *g = rh__coll_group(c);
  size_t *offsets = malloc((size_t)g->n * sizeof(size_t));
  if (!offsets) return RH_ERR_NOMEM;
  size_t off = 0;
  for (int i = 0; i < g->n; i++) {
    offsets[i] = off;
    off += counts[i];
  }
  rh_blocks b = {.counts = counts, .offsets = offsets, .n = g->n};
  rh_status st = rh__ring_allgather(c, g, &b, 0);
  free(offsets);
  return st;
}
