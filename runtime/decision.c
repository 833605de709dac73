/*
 * decision.c: which algorithm runs a collective.  The settings may name one; on `auto` the
 * alpha-beta cost of each candidate on this job's cluster decides (the same model the simulator
 * is validated against).  Without a cluster description (real hardware) the ring and the tree
 * are the defaults.
 */
#include "internal.h"

#include <math.h>

/* Latency and seconds-per-byte of the slowest link between neighbours of a ring over `g`. */
static void ring_link(const rh_ctx *ctx, const rh_group *g, double *a, double *b) {
  double lat = 0, bw = INFINITY;
  for (int i = 0; i < g->n && g->n > 1; i++) {
    double l, w;
    rh_cluster_path(ctx->cluster, ctx->topo->node_of[g->ranks[i]],
                    ctx->topo->node_of[g->ranks[(i + 1) % g->n]], &l, &w);
    if (l > lat) lat = l;
    if (w < bw) bw = w;
  }
  *a = lat;
  *b = 1.0 / bw;
}

/* Ring allreduce over g where `streams` rings run at once through each node's uplink. */
static double ring_allreduce_cost(const rh_ctx *ctx, const rh_group *g, double n, double streams) {
  if (g->n < 2) return 0;
  double a, b, p = g->n;
  ring_link(ctx, g, &a, &b);
  const rh_cluster *cl = ctx->cluster;
  if (streams > 1 && ctx->topo->nodes > 1) {
    double up = cl->nic_bw * (cl->nics_per_node > 0 ? cl->nics_per_node : 1) / streams;
    if (1.0 / up > b) b = 1.0 / up;
  }
  double t = 2 * (p - 1) * a + 2 * n * (p - 1) / p * b;
  if (cl->reduce_bw > 0) t += n * (p - 1) / p / cl->reduce_bw;
  return t;
}

double rh__predict(const rh_ctx *ctx, rh_algo algo, size_t bytes) {
  if (!ctx->cluster) return NAN;
  double n = (double)bytes, p = ctx->world.n;
  double a, b;
  switch (algo) {
  case RH_ALG_ALLREDUCE_RING: return ring_allreduce_cost(ctx, &ctx->world, n, 1);
  case RH_ALG_ALLREDUCE_HIERARCHICAL: {
    if (!rh_topology_uniform(ctx->topo)) return ring_allreduce_cost(ctx, &ctx->world, n, 1);
    double L = ctx->node.n;
    double t = ring_allreduce_cost(ctx, &ctx->node, n, 1);
    /* L concurrent cross-node rings on n/L bytes each share the node's uplink; the intra
     * phases are a reduce-scatter and an allgather, one ring allreduce's worth */
    t += ring_allreduce_cost(ctx, &ctx->cross, n / L, L);
    return t;
  }
  case RH_ALG_BCAST_RING: {
    if (p < 2) return 0;
    ring_link(ctx, &ctx->world, &a, &b);
    double chunk = rh_setting(ctx, RH_SETTING_PIPELINE_CHUNK);
    double k = ceil(n / (chunk > 0 ? chunk : 1));
    if (k < 1) k = 1;
    return (p - 1 + k - 1) * (a + n / k * b);
  }
  case RH_ALG_BCAST_TREE: {
    if (p < 2) return 0;
    ring_link(ctx, &ctx->world, &a, &b);
    return ceil(log2(p)) * (a + n * b);
  }
  }
  return NAN;
}

rh_algo rh__choose_allreduce(const rh_ctx *ctx, size_t bytes) {
  int want = (int)rh_setting(ctx, RH_SETTING_ALGORITHM);
  if (want == RH_ALGO_RING) return RH_ALG_ALLREDUCE_RING;
  if (want == RH_ALGO_HIERARCHICAL) return RH_ALG_ALLREDUCE_HIERARCHICAL;
  if (!ctx->cluster || ctx->topo->nodes < 2 || ctx->node.n < 2 || !rh_topology_uniform(ctx->topo))
    return RH_ALG_ALLREDUCE_RING;
  return rh__predict(ctx, RH_ALG_ALLREDUCE_HIERARCHICAL, bytes) <
                 rh__predict(ctx, RH_ALG_ALLREDUCE_RING, bytes)
             ? RH_ALG_ALLREDUCE_HIERARCHICAL
             : RH_ALG_ALLREDUCE_RING;
}

rh_algo rh__choose_bcast(const rh_ctx *ctx, size_t bytes) {
  int want = (int)rh_setting(ctx, RH_SETTING_BCAST_ALGORITHM);
  if (want == RH_BCAST_RING) return RH_ALG_BCAST_RING;
  if (want == RH_BCAST_TREE) return RH_ALG_BCAST_TREE;
  if (!ctx->cluster) return RH_ALG_BCAST_TREE;
  return rh__predict(ctx, RH_ALG_BCAST_RING, bytes) < rh__predict(ctx, RH_ALG_BCAST_TREE, bytes)
             ? RH_ALG_BCAST_RING
             : RH_ALG_BCAST_TREE;
}
