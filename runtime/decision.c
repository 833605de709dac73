/*
 * decision.c: which algorithm runs a collective.  The settings may name one; on `auto` the
 * alpha-beta cost of each candidate on this job's cluster decides.  Each message is charged the
 * path it really takes (edge(): two GPU hops inside a node; the GPU hops, the sending node's
 * uplink and the receiving node's downlink across nodes), and a node's shared fabric is divided among
 * the flows that cross it at once; the test suite holds these costs to the simulator's times.
 * Without a cluster description (real hardware) the ring and the tree are the defaults.
 * Under the NCCL model (network_model: nccl) the plan is NCCL's own choice of algorithm and
 * protocol by its price (nccl_model.c); either way the plan that runs is the plan reported.
 */
#include "internal.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The flows crossing each shared resource at once: each node's backbone, each port of the
 * fabric out and in (a node's uplink, or one NIC of a rail), each leaf's uplinks to the spines
 * out and in (cluster.c's rh_fabric_route says which a flow takes). */
typedef struct net_load {
  int *backbone, *out, *in, *leaf_out, *leaf_in;
  size_t nodes, ports, leaves; /* their lengths */
} net_load;

static bool load_new(const rh_ctx *ctx, net_load *ld) {
  const rh_cluster *cl = ctx->cluster;
  size_t nodes = (size_t)ctx->topo->nodes, ports = (size_t)rh_fabric_ports(cl);
  size_t leaves = (size_t)rh_fabric_leaves(cl) * (size_t)rh_fabric_rails(cl);
  if (ports < nodes) ports = nodes;
  int *all = calloc(nodes + 2 * ports + 2 * leaves + 1, sizeof(int));
  *ld = (net_load){all, all + nodes, all + nodes + ports, all + nodes + 2 * ports,
                   all + nodes + 2 * ports + leaves, nodes, ports, leaves};
  return all != NULL;
}

static void load_free(net_load *ld) { free(ld->backbone); }

/* Counts k flows from rank a to rank b. */
static void load_add(const rh_ctx *ctx, net_load *ld, int a, int b, int k) {
  int na = ctx->topo->node_of[a], nb = ctx->topo->node_of[b];
  ld->backbone[na] += k;
  if (na == nb) return;
  ld->backbone[nb] += k;
  rh_fabric_path p = rh_fabric_route(ctx->cluster, na, nb, ctx->topo->local_rank_of[b]);
  ld->out[p.out] += k;
  ld->in[p.in] += k;
  if (p.leaf_out < 0) return;
  ld->leaf_out[p.leaf_out] += k;
  ld->leaf_in[p.leaf_in] += k;
}

static double share(double bw, int flows) { return bw / (flows > 0 ? flows : 1); }

/* Seconds per byte of a flow from rank a to rank b under the load ld, and its latency: the GPU
 * hops, a node's backbone, and across nodes the ports and, between leaves, the spines' links. */
static void edge(const rh_ctx *ctx, int a, int b, const net_load *ld, double *lat, double *spb) {
  const rh_cluster *cl = ctx->cluster;
  int na = ctx->topo->node_of[a], nb = ctx->topo->node_of[b];
  double bw = cl->intra_bw, l = 2 * cl->intra_lat;
  if (cl->intra_backbone_bw > 0) {
    bw = fmin(bw, share(cl->intra_backbone_bw, ld->backbone[na]));
    if (nb != na) bw = fmin(bw, share(cl->intra_backbone_bw, ld->backbone[nb]));
  }
  if (na != nb) {
    rh_fabric_path p = rh_fabric_route(cl, na, nb, ctx->topo->local_rank_of[b]);
    double port = rh_fabric_port_bw(cl);
    bw = fmin(bw, fmin(share(port, ld->out[p.out]), share(port, ld->in[p.in])));
    l += 2 * cl->nic_lat;
    if (p.leaf_out >= 0) {
      double up = rh_fabric_leaf_bw(cl);
      bw = fmin(bw, fmin(share(up, ld->leaf_out[p.leaf_out]), share(up, ld->leaf_in[p.leaf_in])));
      l += 2 * cl->nic_lat;
    }
  }
  *lat = l;
  *spb = 1.0 / bw;
}

/* One flow on every resource: a path alone. */
static void no_sharing(net_load *ld) {
  for (size_t i = 0; i < ld->nodes; i++) ld->backbone[i] = 1;
  for (size_t i = 0; i < ld->ports; i++) ld->out[i] = ld->in[i] = 1;
  for (size_t i = 0; i < ld->leaves; i++) ld->leaf_out[i] = ld->leaf_in[i] = 1;
}

/* The load of `streams` identical rings over g. */
static void ring_flows(const rh_ctx *ctx, const rh_group *g, int streams, net_load *ld) {
  for (int i = 0; i < g->n; i++) load_add(ctx, ld, g->ranks[i], g->ranks[(i + 1) % g->n], streams);
}

/* A topology's ring paces, found once for all the ranks that share it: an open-addressing table
 * by group and stream count, with room for every group of the topology several times over.
 * Real targets run a rank's collectives on threads of their own, hence the lock. */
enum { PACE_PROBES = 8 };
struct rh_pace_cache {
  pthread_mutex_t lock;
  size_t mask; /* slots - 1, slots a power of two */
  struct rh_pace {
    const int *ranks; /* the group: one of the topology's own lists; NULL: an empty slot */
    int n, streams;
    double cluster[6]; /* the numbers it was found from */
    double a, b;
  } slot[];
};

struct rh_pace_cache *rh__pace_cache_new(size_t groups) {
  size_t slots = 16;
  while (slots < 4 * groups) slots *= 2;
  struct rh_pace_cache *c = calloc(1, sizeof *c + slots * sizeof c->slot[0]);
  if (c && pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    c = NULL;
  }
  if (c) c->mask = slots - 1;
  return c;
}

void rh__pace_cache_free(struct rh_pace_cache *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->lock);
  free(c);
}

static size_t pace_home(const struct rh_pace_cache *c, const struct rh_pace *k) {
  return (size_t)rh__mix64((uint64_t)(uintptr_t)k->ranks ^ ((uint64_t)k->streams << 48)) & c->mask;
}

/* Looks key up (found: its a and b filled in) or, with `store`, keeps it. */
static bool pace_cached(struct rh_pace_cache *c, struct rh_pace *key, bool store) {
  bool found = false;
  size_t home = pace_home(c, key);
  pthread_mutex_lock(&c->lock);
  for (size_t i = 0; i < PACE_PROBES && !found; i++) {
    struct rh_pace *p = &c->slot[(home + i) & c->mask];
    if (store && (!p->ranks || i == PACE_PROBES - 1)) { /* the last probe: evicted */
      *p = *key;
      found = true;
    } else if (!p->ranks) {
      break;
    } else if (!store && p->ranks == key->ranks && p->n == key->n &&
               p->streams == key->streams && !memcmp(p->cluster, key->cluster, sizeof key->cluster)) {
      key->a = p->a;
      key->b = p->b;
      found = true;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return found;
}

/* Whether g's ranks are one of t's own lists (the world, a node, a local rank across nodes),
 * which live as long as t does. */
static bool topology_group(const rh_topology *t, const rh_group *g) {
  if (!t->paces || g->n < 1 || g->ranks[0] < 0 || g->ranks[0] >= t->size) return false;
  int r = g->ranks[0];
  return g->ranks == t->identity || g->ranks == t->node_ranks[t->node_of[r]] ||
         g->ranks == t->cross_ranks[t->local_rank_of[r]];
}

/* Latency and seconds per byte of the slowest edge of a ring over g (a ring's steps advance at
 * the pace of its slowest edge), with `streams` such rings at once. */
static void ring_pace(const rh_ctx *ctx, const rh_group *g, int streams, double *a, double *b) {
  const rh_cluster *cl = ctx->cluster;
  struct rh_pace_cache *cache = topology_group(ctx->topo, g) ? ctx->topo->paces : NULL;
  struct rh_pace key = {.ranks = g->ranks, .n = g->n, .streams = streams,
                        .cluster = {cl->intra_bw, cl->intra_lat, cl->intra_backbone_bw, cl->nic_bw,
                                    cl->nics_per_node, cl->nic_lat}};
  if (cache && pace_cached(cache, &key, false)) {
    *a = key.a;
    *b = key.b;
    return;
  }
  net_load ld;
  *a = 0;
  *b = 0;
  if (!load_new(ctx, &ld)) return;
  ring_flows(ctx, g, streams, &ld);
  for (int i = 0; i < g->n && g->n > 1; i++) {
    double l, spb;
    edge(ctx, g->ranks[i], g->ranks[(i + 1) % g->n], &ld, &l, &spb);
    if (l > *a) *a = l;
    if (spb > *b) *b = spb;
  }
  load_free(&ld);
  if (!cache) return;
  key.a = *a;
  key.b = *b;
  pace_cached(cache, &key, true);
}

/* Ring allreduce over g, `streams` of them side by side: 2(p-1) steps of n/p bytes. */
static double ring_allreduce_cost(const rh_ctx *ctx, const rh_group *g, double n, int streams) {
  if (g->n < 2) return 0;
  double a, b, p = g->n;
  ring_pace(ctx, g, streams, &a, &b);
  double t = 2 * (p - 1) * a + 2 * n * (p - 1) / p * b;
  if (ctx->cluster->reduce_bw > 0) t += n * (p - 1) / p / ctx->cluster->reduce_bw;
  return t;
}

/* The pipelined chain from root: the first chunk crosses every hop, then each further chunk
 * costs the slowest hop's time. */
static double bcast_ring_cost(const rh_ctx *ctx, double n, int root) {
  const rh_group *g = &ctx->world;
  int p = g->n;
  double chunk = rh_setting(ctx, RH_SETTING_PIPELINE_CHUNK);
  double k = ceil(n / (chunk > 0 ? chunk : 1));
  if (k < 1) k = 1;
  double c = n / k, fill = 0, slowest = 0;
  net_load ld;
  if (!load_new(ctx, &ld)) return NAN;
  for (int h = 0; h < p - 1; h++) load_add(ctx, &ld, (root + h) % p, (root + h + 1) % p, 1);
  for (int h = 0; h < p - 1; h++) { /* each hop is one flow through its nodes */
    double l, spb;
    edge(ctx, (root + h) % p, (root + h + 1) % p, &ld, &l, &spb);
    fill += l + c * spb;
    if (l + c * spb > slowest) slowest = l + c * spb;
  }
  load_free(&ld);
  return fill + (k - 1) * slowest;
}

/* The binomial tree from root, send by send: each rank forwards the whole message to its
 * children one after the other once it has it. */
static double bcast_tree_cost(const rh_ctx *ctx, double n, int root) {
  int p = ctx->world.n;
  double *got = calloc((size_t)p, sizeof(double)), last = 0;
  net_load ld = {0};
  if (!got || !load_new(ctx, &ld)) {
    free(got);
    load_free(&ld);
    return NAN;
  }
  no_sharing(&ld); /* one send at a time */
  /* relative ranks in increasing order receive before they send, so one pass suffices */
  for (int v = 0; v < p; v++) {
    int low = 1;
    while (low < p && !(v & low)) low <<= 1; /* v's lowest set bit (p for the root) */
    double t = got[v];
    for (int mask = low >> 1; mask > 0; mask >>= 1) {
      if (v + mask >= p) continue;
      double l, spb;
      edge(ctx, (v + root) % p, (v + mask + root) % p, &ld, &l, &spb);
      t += l + n * spb;
      got[v + mask] = t;
      if (t > last) last = t;
    }
  }
  free(got);
  load_free(&ld);
  return last;
}

double rh__predict(const rh_ctx *ctx, rh_algo algo, size_t bytes) {
  if (!ctx->cluster) return NAN;
  double n = (double)bytes;
  switch (algo) {
  case RH_ALG_ALLREDUCE_RING: return ring_allreduce_cost(ctx, &ctx->world, n, 1);
  case RH_ALG_ALLREDUCE_HIERARCHICAL: {
    if (!rh_topology_uniform(ctx->topo)) return ring_allreduce_cost(ctx, &ctx->world, n, 1);
    int L = ctx->node.n;
    /* reduce-scatter and allgather inside each node: one ring allreduce's worth; then L rings
     * across nodes at once, one per local rank, on n/L bytes each */
    return ring_allreduce_cost(ctx, &ctx->node, n, 1) +
           ring_allreduce_cost(ctx, &ctx->cross, n / L, L);
  }
  case RH_ALG_BCAST_RING: return ctx->world.n < 2 ? 0 : bcast_ring_cost(ctx, n, 0);
  case RH_ALG_BCAST_TREE: return ctx->world.n < 2 ? 0 : bcast_tree_cost(ctx, n, 0);
  }
  return NAN;
}

rh_algo rh__choose_allreduce(const rh_ctx *ctx, size_t bytes) {
  int want = (int)rh_setting(ctx, RH_SETTING_ALGORITHM);
  if (want == RH_ALGO_RING || want == RH_ALGO_TREE || want == RH_ALGO_NVLS)
    return RH_ALG_ALLREDUCE_RING; /* NCCL's tree and NVLS exist in the NCCL model alone */
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

/* ---- plans: the choice and its price, by the model that times the job ---------------------- */

/* The cheapest of the algorithms and protocols the settings allow for coll over ranks on nodes. */
static rh_plan nccl_best(const rh_ctx *ctx, const rh_cluster *cl, rh_nccl_coll coll, int ranks,
                         int nodes, double bytes) {
  int want = (int)rh_setting(ctx, RH_SETTING_ALGORITHM);
  int proto = (int)rh_setting(ctx, RH_SETTING_PROTOCOL);
  rh_plan best = {.algo = RH_ALG_ALLREDUCE_RING, .nalgo = RH_NA_RING, .nproto = RH_NP_SIMPLE,
                  .seconds = NAN, .latency = 0, .hops = 0};
  for (int pass = 0; pass < 2 && !(best.seconds >= 0); pass++) {
    /* pass 0: what the settings ask; pass 1 (when that does not run here): anything, as NCCL
     * falls back from an NCCL_ALGO or NCCL_PROTO it cannot use */
    for (int a = 0; a < RH_NA_COUNT; a++) {
      if (pass == 0 && ((want == RH_ALGO_RING && a != RH_NA_RING) ||
                        (want == RH_ALGO_TREE && a != RH_NA_TREE) ||
                        (want == RH_ALGO_NVLS && a != RH_NA_NVLS)))
        continue;
      for (int p = 0; p < RH_NP_COUNT; p++) {
        if (pass == 0 && proto != RH_PROTO_AUTO && p != proto - 1) continue;
        rh_nccl_price pr = rh__nccl_price(cl, coll, ranks, nodes, (rh_nccl_algo)a,
                                          (rh_nccl_proto)p, bytes);
        if (!(pr.seconds >= 0) || (best.seconds >= 0 && !(pr.seconds < best.seconds))) continue;
        best.nalgo = a;
        best.nproto = p;
        best.seconds = pr.seconds;
        best.latency = pr.latency;
        best.hops = pr.hops;
      }
    }
  }
  if (ranks < 2) best.seconds = best.latency = 0;
  return best;
}

/* NCCL's plan for coll over groups of `ranks` ranks on whole nodes, all at once: a node's (or a
 * few nodes') ranks when `within`, else one rank a node, the node's L ranks' rings sharing its
 * NICs. */
static rh_plan group_plan(const rh_ctx *ctx, bool within, int ranks, rh_nccl_coll coll,
                          double bytes) {
  const rh_cluster *cl = ctx->cluster;
  int L = ctx->node.n > 0 ? ctx->node.n : 1;
  if (within) return nccl_best(ctx, cl, coll, ranks, ranks > L ? ranks / L : 1, bytes);
  rh_cluster shared = *cl;
  shared.nics_per_node = 1;
  shared.nic_bw = cl->nic_bw * (cl->nics_per_node > 0 ? cl->nics_per_node : 1) / L;
  shared.fabric.pcie_bw = 0;
  return nccl_best(ctx, &shared, coll, ranks, ranks, bytes);
}

/* Horovod's hierarchical allreduce on NCCL: a reduce-scatter inside each node, an allreduce of
 * each 1/L across nodes, an allgather inside each node. */
static rh_plan nccl_hierarchical(const rh_ctx *ctx, double bytes) {
  int L = ctx->node.n;
  int M = ctx->cross.n;
  rh_plan rs = group_plan(ctx, true, L, RH_NC_REDUCE_SCATTER, bytes);
  rh_plan ar = group_plan(ctx, false, M, RH_NC_ALLREDUCE, bytes / L);
  rh_plan ag = group_plan(ctx, true, L, RH_NC_ALLGATHER, bytes);
  return (rh_plan){.algo = RH_ALG_ALLREDUCE_HIERARCHICAL, .nalgo = -1, .nproto = ar.nproto,
                   .seconds = rs.seconds + ar.seconds + ag.seconds,
                   .latency = rs.latency + ar.latency + ag.latency,
                   .hops = rs.hops + ar.hops + ag.hops};
}

rh_plan rh__plan(const rh_ctx *ctx, rh_nccl_coll coll, size_t bytes) {
  rh_plan plan = {.algo = RH_ALG_ALLREDUCE_RING, .nalgo = -1, .nproto = -1, .seconds = NAN};
  const rh_cluster *cl = ctx->cluster;
  if (cl && cl->net_model == RH_NET_NCCL) {
    bool hier = coll == RH_NC_ALLREDUCE &&
                (int)rh_setting(ctx, RH_SETTING_ALGORITHM) == RH_ALGO_HIERARCHICAL &&
                rh_topology_uniform(ctx->topo) && ctx->topo->nodes > 1 && ctx->node.n > 1;
    if (hier) return nccl_hierarchical(ctx, (double)bytes);
    int nodes = ctx->topo->nodes;
    /* uneven hosts: NCCL's view is the largest host's */
    int ranks = rh_topology_uniform(ctx->topo) ? ctx->world.n : ctx->topo->max_local_size * nodes;
    if (ctx->world.n < 2) ranks = ctx->world.n;
    plan = nccl_best(ctx, cl, coll, ranks, nodes, (double)bytes);
    plan.algo = coll == RH_NC_BROADCAST ? RH_ALG_BCAST_RING : RH_ALG_ALLREDUCE_RING;
    return plan;
  }
  switch (coll) {
  case RH_NC_ALLREDUCE: plan.algo = rh__choose_allreduce(ctx, bytes); break;
  case RH_NC_BROADCAST: plan.algo = rh__choose_bcast(ctx, bytes); break;
  default: return plan; /* the ring allgather: simulated, not priced */
  }
  plan.seconds = ctx->world.n < 2 ? 0 : rh__predict(ctx, plan.algo, bytes);
  return plan;
}

rh_plan rh__plan_in(const rh_ctx *ctx, int scope, rh_nccl_coll coll, size_t bytes) {
  if (scope == RH_SCOPE_WORLD) return rh__plan(ctx, coll, bytes);
  const rh_cluster *cl = ctx->cluster;
  int n = rh_scope_size(ctx, (rh_scope)scope);
  if (!cl || cl->net_model != RH_NET_NCCL || n == 0)
    return (rh_plan){.algo = RH_ALG_ALLREDUCE_RING, .nalgo = -1, .nproto = -1, .seconds = NAN};
  return group_plan(ctx, scope == RH_SCOPE_SHARD, n, coll, (double)bytes);
}

const char *rh__plan_name(const rh_plan *plan, char *buf, size_t len) {
  static const char *const algo_names[] = {"ring", "hierarchical", "ring", "tree"};
  if (plan->nalgo >= 0)
    snprintf(buf, len, "%s/%s", rh_nccl_algo_names[plan->nalgo], rh_nccl_proto_names[plan->nproto]);
  else if (plan->algo == RH_ALG_ALLREDUCE_HIERARCHICAL && plan->nproto >= 0)
    snprintf(buf, len, "hierarchical/%s", rh_nccl_proto_names[plan->nproto]);
  else
    snprintf(buf, len, "%s", algo_names[plan->algo]);
  return buf;
}

double rh_predict_allreduce(const rh_ctx *ctx, size_t bytes) {
  return rh__plan(ctx, RH_NC_ALLREDUCE, bytes).seconds;
}
