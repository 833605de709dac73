/*
 * topology.c: Horovod's assignment of ranks to hosts.  On the simulator ranks fill hosts in the
 * listed order; under a launcher they are wherever it put them.  local_rank is the index among
 * the host's ranks; cross_rank is the index of the host among the hosts that have that local rank
 * (so with 3 GPUs on host A and 2 on host B, rank 2 has cross_size 1).
 */
#include "internal.h"

#include <stdlib.h>

rh_status rh_topology_init_map(rh_topology *t, const int *node_of, int size) {
  *t = (rh_topology){0};
  if (size < 1) return RH_ERR_INVALID;
  int nodes = 0;
  for (int r = 0; r < size; r++) {
    if (node_of[r] < 0 || node_of[r] > nodes) return RH_ERR_INVALID; /* numbered by appearance */
    if (node_of[r] == nodes) nodes++;
  }
  t->size = size;
  t->nodes = nodes;
  t->node_of = calloc((size_t)size, sizeof(int));
  t->local_rank_of = calloc((size_t)size, sizeof(int));
  t->cross_rank_of = calloc((size_t)size, sizeof(int));
  t->identity = calloc((size_t)size, sizeof(int));
  t->node_size = calloc((size_t)nodes, sizeof(int));
  t->node_ranks = calloc((size_t)nodes, sizeof(int *));
  if (!t->node_of || !t->local_rank_of || !t->cross_rank_of || !t->identity || !t->node_size ||
      !t->node_ranks) {
    rh_topology_free(t);
    return RH_ERR_NOMEM;
  }
  for (int r = 0; r < size; r++) {
    t->identity[r] = r;
    t->node_of[r] = node_of[r];
    t->local_rank_of[r] = t->node_size[node_of[r]]++;
    if (t->node_size[node_of[r]] > t->max_local_size) t->max_local_size = t->node_size[node_of[r]];
  }
  t->cross_size_of = calloc((size_t)t->max_local_size, sizeof(int));
  t->cross_ranks = calloc((size_t)t->max_local_size, sizeof(int *));
  if (!t->cross_size_of || !t->cross_ranks) {
    rh_topology_free(t);
    return RH_ERR_NOMEM;
  }
  for (int n = 0; n < nodes; n++)
    if (!(t->node_ranks[n] = calloc((size_t)t->node_size[n], sizeof(int)))) {
      rh_topology_free(t);
      return RH_ERR_NOMEM;
    }
  for (int r = 0; r < size; r++) t->node_ranks[node_of[r]][t->local_rank_of[r]] = r;
  /* cross ranks: hosts in order, so count per local rank walking the hosts */
  for (int n = 0; n < nodes; n++)
    for (int l = 0; l < t->node_size[n]; l++)
      t->cross_rank_of[t->node_ranks[n][l]] = t->cross_size_of[l]++;
  for (int l = 0; l < t->max_local_size; l++) {
    t->cross_ranks[l] = calloc((size_t)t->cross_size_of[l], sizeof(int));
    if (!t->cross_ranks[l]) {
      rh_topology_free(t);
      return RH_ERR_NOMEM;
    }
  }
  for (int r = 0; r < size; r++) t->cross_ranks[t->local_rank_of[r]][t->cross_rank_of[r]] = r;
  t->uniform = true;
  for (int n = 1; n < nodes; n++) t->uniform = t->uniform && t->node_size[n] == t->node_size[0];
  if (!(t->paces = rh__pace_cache_new(1 + (size_t)nodes + (size_t)t->max_local_size))) {
    rh_topology_free(t);
    return RH_ERR_NOMEM;
  }
  return RH_OK;
}

rh_status rh_topology_init(rh_topology *t, const int *gpus_per_node, int nodes) {
  *t = (rh_topology){0};
  if (nodes < 1) return RH_ERR_INVALID;
  int size = 0;
  for (int n = 0; n < nodes; n++) {
    if (gpus_per_node[n] < 1) return RH_ERR_INVALID;
    size += gpus_per_node[n];
  }
  int *node_of = malloc((size_t)size * sizeof(int));
  if (!node_of) return RH_ERR_NOMEM;
  for (int n = 0, r = 0; n < nodes; n++)
    for (int l = 0; l < gpus_per_node[n]; l++) node_of[r++] = n;
  rh_status st = rh_topology_init_map(t, node_of, size);
  free(node_of);
  return st;
}

void rh_topology_free(rh_topology *t) {
  if (t->cross_ranks)
    for (int l = 0; l < t->max_local_size; l++) free(t->cross_ranks[l]);
  free(t->cross_ranks);
  if (t->node_ranks)
    for (int n = 0; n < t->nodes; n++) free(t->node_ranks[n]);
  free(t->node_ranks);
  free(t->node_of);
  free(t->local_rank_of);
  free(t->cross_rank_of);
  free(t->identity);
  free(t->replica_ranks);
  free(t->node_size);
  free(t->cross_size_of);
  rh__pace_cache_free(t->paces);
  *t = (rh_topology){0};
}

bool rh_topology_uniform(const rh_topology *t) { return t->uniform; }

/* The shard and replica groups of ctx's world: a node and its cross group where the shard group
 * is a node's ranks; groups of G consecutive ranks (whole nodes) and the ranks at one place in
 * each, otherwise, whose lists the topology keeps (formed once for all the ranks sharing it);
 * none (n 0) where the world's nodes differ or G does not cut it. */
static void form_shard_groups(rh_ctx *ctx) {
  rh_topology *t = (rh_topology *)ctx->topo; /* its replica lists are a cache of its own */
  int L = t->max_local_size, G = ctx->shard_size > 0 ? ctx->shard_size : L, r = ctx->rank;
  ctx->shard = ctx->replica = (rh_group){.n = 0, .me = -1};
  if (!t->uniform || G % L != 0 || t->size % G != 0) return;
  if (G == L) {
    ctx->shard = ctx->node;
    ctx->replica = ctx->cross;
    return;
  }
  int M = t->size / G; /* shard groups */
  if (t->replica_of != G) {
    int *lists = malloc((size_t)t->size * sizeof *lists);
    if (!lists) return;
    for (int q = 0; q < t->size; q++) lists[(q % G) * M + q / G] = q;
    free(t->replica_ranks);
    t->replica_ranks = lists;
    t->replica_of = G;
  }
  uint32_t base = 1u + (uint32_t)t->nodes + (uint32_t)L;
  ctx->shard = (rh_group){.n = G, .me = r % G, .ranks = t->identity + (r / G) * G,
                          .id = base + (uint32_t)(r / G)};
  ctx->replica = (rh_group){.n = M, .me = r / G, .ranks = t->replica_ranks + (r % G) * M,
                            .id = base + (uint32_t)M + (uint32_t)(r % G)};
}

void rh__ctx_set_world(rh_ctx *ctx, int rank, const rh_topology *topo, uint32_t generation) {
  ctx->rank = rank;
  ctx->topo = topo;
  ctx->generation = generation;
  ctx->seq = ctx->audits = ctx->syncs = 0;
  ctx->broken = false;
  int node = topo->node_of[rank], local = topo->local_rank_of[rank];
  ctx->world = (rh_group){.n = topo->size, .me = rank, .ranks = topo->identity, .id = 0};
  ctx->node = (rh_group){.n = topo->node_size[node], .me = local,
                         .ranks = topo->node_ranks[node],
                         .id = 1u + (uint32_t)node};
  ctx->cross = (rh_group){.n = topo->cross_size_of[local], .me = topo->cross_rank_of[rank],
                          .ranks = topo->cross_ranks[local],
                          .id = 1u + (uint32_t)topo->nodes + (uint32_t)local};
  form_shard_groups(ctx);
}

rh_status rh_set_shard_group(rh_ctx *ctx, int size) {
  int before = ctx->shard_size;
  ctx->shard_size = size;
  if (size < 0 || (form_shard_groups(ctx), ctx->shard.n == 0)) {
    ctx->shard_size = before;
    form_shard_groups(ctx);
    return RH_ERR_INVALID;
  }
  return RH_OK;
}

int rh_scope_size(const rh_ctx *ctx, rh_scope scope) {
  return scope == RH_SCOPE_SHARD ? ctx->shard.n : scope == RH_SCOPE_REPLICA ? ctx->replica.n
                                                                           : ctx->world.n;
}

int rh_scope_rank(const rh_ctx *ctx, rh_scope scope) {
  const rh_group *g = scope == RH_SCOPE_SHARD     ? &ctx->shard
                      : scope == RH_SCOPE_REPLICA ? &ctx->replica
                                                  : &ctx->world;
  return g->n > 0 ? g->me : -1;
}

void rh_ctx_init(rh_ctx *ctx, int rank, const rh_topology *topo, const rh_settings *settings,
                 const rh_cluster *cluster, const rh_backend_ops *ops, void *backend) {
  *ctx = (rh_ctx){.settings = settings, .cluster = cluster, .ops = ops, .backend = backend,
                  .epoch = -1, .step = -1};
  rh__ctx_set_world(ctx, rank, topo, 0);
}

int rh__assign_hosts(const int *order, int nhosts, const int *slots, int max_np, int *node_of) {
  int rank = 0;
  for (int h = 0; h < nhosts; h++)
    for (int l = 0; l < slots[order[h]] && (max_np <= 0 || rank < max_np); l++)
      node_of[rank++] = order[h];
  return rank;
}

int rh_rank(const rh_ctx *ctx) { return ctx->rank; }
int rh_size(const rh_ctx *ctx) { return ctx->topo->size; }
int rh_local_rank(const rh_ctx *ctx) { return ctx->topo->local_rank_of[ctx->rank]; }
int rh_local_size(const rh_ctx *ctx) { return ctx->node.n; }
int rh_cross_rank(const rh_ctx *ctx) { return ctx->cross.me; }
int rh_cross_size(const rh_ctx *ctx) { return ctx->cross.n; }
