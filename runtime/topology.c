/*
 * topology.c: Horovod's assignment of ranks to hosts.  Ranks fill hosts in the listed order;
 * local_rank is the slot on the host; cross_rank is the index of the host among the hosts that
 * have that local rank (so with 3 GPUs on host A and 2 on host B, rank 2 has cross_size 1).
 */
#include "internal.h"

#include <stdlib.h>

rh_status rh_topology_init(rh_topology *t, const int *gpus_per_node, int nodes) {
  *t = (rh_topology){0};
  if (nodes < 1) return RH_ERR_INVALID;
  int size = 0, maxl = 0;
  for (int n = 0; n < nodes; n++) {
    if (gpus_per_node[n] < 1) return RH_ERR_INVALID;
    size += gpus_per_node[n];
    if (gpus_per_node[n] > maxl) maxl = gpus_per_node[n];
  }
  t->size = size;
  t->nodes = nodes;
  t->max_local_size = maxl;
  t->node_of = calloc((size_t)size, sizeof(int));
  t->local_rank_of = calloc((size_t)size, sizeof(int));
  t->cross_rank_of = calloc((size_t)size, sizeof(int));
  t->identity = calloc((size_t)size, sizeof(int));
  t->node_first = calloc((size_t)nodes, sizeof(int));
  t->node_size = calloc((size_t)nodes, sizeof(int));
  t->cross_size_of = calloc((size_t)maxl, sizeof(int));
  t->cross_ranks = calloc((size_t)maxl, sizeof(int *));
  if (!t->node_of || !t->local_rank_of || !t->cross_rank_of || !t->identity || !t->node_first ||
      !t->node_size || !t->cross_size_of || !t->cross_ranks) {
    rh_topology_free(t);
    return RH_ERR_NOMEM;
  }
  int r = 0;
  for (int n = 0; n < nodes; n++) {
    t->node_first[n] = r;
    t->node_size[n] = gpus_per_node[n];
    for (int l = 0; l < gpus_per_node[n]; l++, r++) {
      t->identity[r] = r;
      t->node_of[r] = n;
      t->local_rank_of[r] = l;
      t->cross_rank_of[r] = t->cross_size_of[l]++;
    }
  }
  for (int l = 0; l < maxl; l++) {
    t->cross_ranks[l] = calloc((size_t)t->cross_size_of[l], sizeof(int));
    if (!t->cross_ranks[l]) {
      rh_topology_free(t);
      return RH_ERR_NOMEM;
    }
  }
  for (r = 0; r < size; r++) t->cross_ranks[t->local_rank_of[r]][t->cross_rank_of[r]] = r;
  return RH_OK;
}

void rh_topology_free(rh_topology *t) {
  if (t->cross_ranks)
    for (int l = 0; l < t->max_local_size; l++) free(t->cross_ranks[l]);
  free(t->cross_ranks);
  free(t->node_of);
  free(t->local_rank_of);
  free(t->cross_rank_of);
  free(t->identity);
  free(t->node_first);
  free(t->node_size);
  free(t->cross_size_of);
  *t = (rh_topology){0};
}

bool rh_topology_uniform(const rh_topology *t) {
  for (int n = 1; n < t->nodes; n++)
    if (t->node_size[n] != t->node_size[0]) return false;
  return true;
}

void rh_ctx_init(rh_ctx *ctx, int rank, const rh_topology *topo, const rh_settings *settings,
                 const rh_cluster *cluster, const rh_backend_ops *ops, void *backend) {
  *ctx = (rh_ctx){.rank = rank, .topo = topo, .settings = settings, .cluster = cluster,
                  .ops = ops, .backend = backend};
  int node = topo->node_of[rank], local = topo->local_rank_of[rank];
  ctx->world = (rh_group){.n = topo->size, .me = rank, .ranks = topo->identity, .id = 0};
  ctx->node = (rh_group){.n = topo->node_size[node], .me = local,
                         .ranks = &topo->identity[topo->node_first[node]],
                         .id = 1u + (uint32_t)node};
  ctx->cross = (rh_group){.n = topo->cross_size_of[local], .me = topo->cross_rank_of[rank],
                          .ranks = topo->cross_ranks[local],
                          .id = 1u + (uint32_t)topo->nodes + (uint32_t)local};
}

int rh_rank(const rh_ctx *ctx) { return ctx->rank; }
int rh_size(const rh_ctx *ctx) { return ctx->topo->size; }
int rh_local_rank(const rh_ctx *ctx) { return ctx->topo->local_rank_of[ctx->rank]; }
int rh_local_size(const rh_ctx *ctx) { return ctx->node.n; }
int rh_cross_rank(const rh_ctx *ctx) { return ctx->cross.me; }
int rh_cross_size(const rh_ctx *ctx) { return ctx->cross.n; }
