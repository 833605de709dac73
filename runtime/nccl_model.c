/*
 * nccl_model.c: NCCL's own cost model (src/graph/tuning.cc), the price of a collective by
 * algorithm (tree, ring, NVLS) and protocol (LL, LL128, Simple):
 *
 *     seconds = latency + bytes / algorithm bandwidth + pipeline fill
 *
 * Latency is NCCL's: a base per algorithm and protocol plus a per-hop figure for NVLink, PCIe or
 * the network, counted over the steps the algorithm takes (ring: 2(p-1) for allreduce, of which
 * 2(nodes-1) cross the network; tree: up and down the node chain and the log2(nodes) levels).
 * Bus bandwidth is the slowest link's on the algorithm's path (a node's NVLink or PCIe, the node's
 * NICs at the transport's achievable rate, divided by the leaf oversubscription), times NCCL's
 * protocol efficiencies and per-channel ceilings; the bus-to-algorithm ratio is the ring's
 * p / nsteps, the tree's 1/2, and for NVLS the switch's own reduction (every GPU sends and receives
 * the buffer once).  The fill is the ramp of a chunked pipeline: a chunk (no more than a rank's
 * share) crosses up to 2 x NCCL_STEPS - 2 = 14 buffered steps before the pipeline runs full.  A
 * chunk is NCCL_STEPS / 2 steps of the protocol's buffer (buffer / NCCL_STEPS each), counted in
 * data bytes: Simple 4 x 512 KiB = 2 MiB; LL128 4 x 600 KiB x 120/128; LL 4 x 64 KiB x 1/2.
 */
#include "internal.h"

#include <math.h>

const char *const rh_nccl_algo_names[RH_NA_COUNT] = {"tree", "ring", "nvls"};
const char *const rh_nccl_proto_names[RH_NP_COUNT] = {"ll", "ll128", "simple"};
const char *const rh_net_model_names[] = {"exact", "realistic", "nccl", NULL};
const char *const rh_arch_names[RH_ARCH_COUNT + 1] = {"pascal", "volta", "ampere", "hopper",
                                                       "blackwell", NULL};

/* Latencies in microseconds [algorithm][protocol]: NCCL's base, and its per-hop figures. */
static const double base_lat[RH_NA_COUNT][RH_NP_COUNT] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}};
enum { HW_NVLINK, HW_PCI, HW_NET };
static const double hw_lat[3][RH_NA_COUNT][RH_NP_COUNT] = {
    /* NVLink */ {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 25}},
    /* PCIe */ {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 0}},
    /* network */ {{5.0, 8.5, 14}, {2.7, 4.0, 14}, {0, 0, 18}}};

/* Per-generation ceilings, GB/s, by nodes (1, 2, more): LL's bus bandwidth, and per channel the
 * ring's LL128 and the tree's Simple and LL128. */
static const double ll_max[RH_ARCH_COUNT][3] = {
    {39.0, 39.0, 20.4}, {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0},
    {282.0, 90.0, 70.0}};
static const double ring_ll128_ch[RH_ARCH_COUNT][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7},
    {40.0, 40.0, 40.0}};
static const double tree_ch[RH_ARCH_COUNT][3] = {
    {26.5, 18.5, 10.0}, {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0},
    {70.0, 42.8, 24.0}};
static const double tree_ll128_ch[RH_ARCH_COUNT][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0},
    {55.6, 31.67, 20.0}};

/* data bytes of a chunk [protocol] (NCCL's buffers: LL 512 KiB, LL128 4800 KiB, Simple 4 MiB) */
static const double chunk_bytes[RH_NP_COUNT] = {4 * 65536.0 / 2, 4 * 614400.0 * 120 / 128,
                                                4 * 524288.0};
#define PIPELINE_DEPTH 14 /* 2 x NCCL_STEPS - 2 */

static int log2_floor(int n) {
  int l = 0;
  while (n >>= 1) l++;
  return l;
}

/* A node's bus bandwidth inside (NVLink, under NCCL's ceiling, or PCIe). */
static double intra_bus(const rh_cluster *cl) {
  const rh_fabric *f = &cl->fabric;
  double bw = f->nvlink ? cl->intra_bw : (f->pcie_bw > 0 ? fmin(cl->intra_bw, f->pcie_bw)
                                                        : cl->intra_bw);
  if (f->intra_cap > 0) bw = fmin(bw, f->intra_cap);
  return bw;
}

/* Whether the algorithm's traffic between nodes pays the leaves' oversubscription.  NCCL orders
 * its rings node after node, each channel's ring on one rail (rail-aligned NICs, PXN), so a
 * ring leaves a leaf once per leaf where the job's nodes fill leaf after leaf, and every hop
 * where they are scattered; its trees join far-apart nodes (a double binary tree over the
 * nodes), which crosses the spines wherever the job spans leaves.  Under `topology: switch`,
 * nodes_per_leaf is the NCCL model's alone and every algorithm pays it. */
static bool pays_leaves(const rh_fabric *f, int nodes, rh_nccl_algo algo) {
  if (f->nodes_per_leaf <= 0 || nodes <= f->nodes_per_leaf || f->oversubscription <= 1) return false;
  if (f->topology == RH_TOPO_SWITCH || algo != RH_NA_RING) return true;
  return f->placement == RH_PLACE_SCATTERED;
}

/* A node's bandwidth into the network: its NICs at the transport's rate, each no faster than its
 * PCIe slot, shared by the node's `ppn` GPUs' PCIe slots, over the leaf's oversubscription where
 * the algorithm pays it. */
static double net_bus(const rh_cluster *cl, int ppn, int nodes, rh_nccl_algo algo) {
  const rh_fabric *f = &cl->fabric;
  double nic = cl->nic_bw * (f->nic_efficiency > 0 ? f->nic_efficiency : 1);
  if (f->pcie_bw > 0) nic = fmin(nic, f->pcie_bw);
  double bw = nic * (cl->nics_per_node > 0 ? cl->nics_per_node : 1);
  if (f->pcie_bw > 0) bw = fmin(bw, f->pcie_bw * ppn);
  if (pays_leaves(f, nodes, algo)) bw /= f->oversubscription;
  return bw;
}

double rh__nccl_bus_factor(rh_nccl_coll coll, int ranks) {
  return coll == RH_NC_ALLREDUCE ? 2.0 * (ranks - 1) / ranks
         : coll == RH_NC_BROADCAST ? 1.0
                                   : (double)(ranks - 1) / ranks;
}

double rh__nccl_bus_bound(const rh_cluster *cl, int ranks, int nodes, rh_nccl_algo algo) {
  int ppn = nodes > 0 ? ranks / nodes : ranks;
  double bw = INFINITY;
  if (ppn > 1) bw = intra_bus(cl);
  if (nodes > 1) bw = fmin(bw, net_bus(cl, ppn, nodes, algo));
  if (!isfinite(bw) && cl->fabric.pcie_bw > 0) bw = cl->fabric.pcie_bw;
  /* NVLS: the switch reduces, so each GPU's link carries the buffer once each way while the
   * bus bandwidth counts 2(p-1)/p of it */
  if (algo == RH_NA_NVLS && ranks > 1) bw = cl->intra_bw * 2.0 * (ranks - 1) / ranks;
  return bw;
}

static bool available(const rh_cluster *cl, rh_nccl_coll coll, int ranks, int nodes,
                      rh_nccl_algo algo, rh_nccl_proto proto) {
  const rh_fabric *f = &cl->fabric;
  if (algo == RH_NA_NVLS)
    return coll == RH_NC_ALLREDUCE && proto == RH_NP_SIMPLE && nodes == 1 && ranks > 1 &&
           f->nvswitch && f->nvls_efficiency > 0;
  if (algo == RH_NA_TREE && coll != RH_NC_ALLREDUCE) return false;
  /* LL128 only where NCCL enables it by default: NVLink nodes of Volta and later */
  if (proto == RH_NP_LL128 && (!f->nvlink || f->arch < RH_ARCH_VOLTA)) return false;
  return true;
}

rh_nccl_price rh__nccl_price(const rh_cluster *cl, rh_nccl_coll coll, int ranks, int nodes,
                             rh_nccl_algo algo, rh_nccl_proto proto, double bytes) {
  rh_nccl_price pr = {0, 0, 0, 0, NAN, 0};
  if (ranks < 2) {
    pr.seconds = 0;
    return pr;
  }
  if (nodes < 1 || !available(cl, coll, ranks, nodes, algo, proto)) return pr;
  const rh_fabric *f = &cl->fabric;
  int ppn = ranks / nodes, a = (int)algo, p = (int)proto;
  int idx = nodes <= 2 ? nodes - 1 : 2, arch = f->arch;
  int ch = f->channels > 0 ? f->channels : 1;
  double bw = rh__nccl_bus_bound(cl, ranks, nodes, RH_NA_RING) / 1e9; /* GB/s, as NCCL's tables */
  int nsteps = coll == RH_NC_ALLREDUCE ? 2 * (ranks - 1)
               : (coll == RH_NC_ALLGATHER || coll == RH_NC_REDUCE_SCATTER) ? ranks - 1
                                                                            : ranks;
  int ninter = coll == RH_NC_ALLREDUCE ? 2 * (nodes - 1)
               : (coll == RH_NC_ALLGATHER || coll == RH_NC_REDUCE_SCATTER) ? nodes - 1
                                                                            : nodes;
  double bus = bw, ratio = 0.5;
  int stages = PIPELINE_DEPTH;
  switch (algo) {
  case RH_NA_RING:
    if (proto == RH_NP_LL) bus = fmin(ll_max[arch][idx], bw * 0.5);
    if (proto == RH_NP_LL128) bus = fmin(bw * (ppn < 2 ? 0.7 : 0.92), ch * ring_ll128_ch[arch][idx]);
    ratio = (double)ranks / nsteps;
    if (coll == RH_NC_BROADCAST) ratio = 1; /* a pipelined chain: the link's rate */
    if (nsteps < stages) stages = nsteps;
    break;
  case RH_NA_TREE:
    bus = fmin(bw * 0.92, ch * tree_ch[arch][idx]);
    if (proto == RH_NP_LL) bus = fmin(bus / 3.8, ll_max[arch][idx]);
    if (proto == RH_NP_LL128)
      bus = fmin(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), ch * tree_ll128_ch[arch][idx]);
    {
      int depth = 2 * (ppn - 1 + log2_floor(nodes));
      if (depth < stages) stages = depth > 0 ? depth : 1;
    }
    break;
  case RH_NA_NVLS:
    /* the switch reduces: the algorithm bandwidth is the GPU's NVLink at NVLS efficiency */
    bus = cl->intra_bw * f->nvls_efficiency / 1e9 * 2.0 * (ranks - 1) / ranks;
    ratio = (double)ranks / (2.0 * (ranks - 1));
    if (ranks - 1 < stages) stages = ranks - 1;
    break;
  default: return pr;
  }
  double algbw = bus * ratio * 1e9;
  /* latency */
  int intra_hw = f->nvlink ? HW_NVLINK : HW_PCI;
  double intra = hw_lat[intra_hw][a][p], inter = hw_lat[HW_NET][a][p];
  if (proto == RH_NP_SIMPLE) inter += 2 * cl->nic_lat * 1e6; /* the wire, both hops to the switch */
  double lat = base_lat[a][p];
  if (algo == RH_NA_RING) {
    if (coll == RH_NC_BROADCAST) lat += nsteps * (nodes > 1 ? inter : intra);
    else lat += (nsteps - ninter) * intra + ninter * inter;
    /* NCCL's plateau of a multi-node ring allreduce past tiny sizes */
    if (proto == RH_NP_SIMPLE && nodes > 1 && coll == RH_NC_ALLREDUCE &&
        bytes / ((double)ch * ranks) >= 64)
      lat *= arch >= RH_ARCH_AMPERE ? 1.4 : 1.9;
  } else if (algo == RH_NA_TREE) {
    lat += 2 * ((ppn - 1) * intra + log2_floor(nodes) * inter);
  } else {
    lat += hw_lat[HW_NVLINK][a][p];
  }
  pr.latency = lat * 1e-6;
  pr.hops = algo == RH_NA_RING ? (coll == RH_NC_ALLREDUCE ? 2 * (ranks - 1) : ranks - 1)
            : algo == RH_NA_TREE ? 2 * (ppn - 1 + (int)ceil(log2(nodes)))
                                 : 2;
  pr.bandwidth = algbw;
  pr.bus = bus * 1e9;
  pr.fill = stages * fmin(chunk_bytes[p], bytes / ranks) / (algo == RH_NA_NVLS ? algbw : pr.bus);
  pr.seconds = pr.latency + bytes / algbw + pr.fill;
  return pr;
}
