/*
 * cluster.c: facts about a cluster description, its fabric's ports and leaves among them.  The
 * paths between GPUs, as the platform builds them and the cost model charges them, are in
 * sim/zone.cpp and decision.c's edge().
 */
#include "internal.h"

int rh_cluster_size(const rh_cluster *cl) {
  int n = 0;
  for (int i = 0; i < cl->nodes; i++) n += cl->gpus_per_node[i];
  return n;
}

int rh_cluster_first_slot(const rh_cluster *cl, int node) {
  int n = 0;
  for (int i = 0; i < node && i < cl->nodes + cl->spares; i++) n += cl->gpus_per_node[i];
  return n;
}

int rh_fabric_rails(const rh_cluster *cl) {
  return cl->fabric.topology == RH_TOPO_RAIL && cl->nics_per_node > 0 ? cl->nics_per_node : 1;
}

int rh_fabric_ports(const rh_cluster *cl) {
  return (cl->nodes + cl->spares) * rh_fabric_rails(cl);
}

int rh_fabric_leaves(const rh_cluster *cl) {
  int npl = cl->fabric.nodes_per_leaf;
  if (cl->fabric.topology == RH_TOPO_SWITCH || npl < 1) return 0;
  return (cl->nodes + cl->spares + npl - 1) / npl;
}

int rh_fabric_leaf_of(const rh_cluster *cl, int node) {
  int leaves = rh_fabric_leaves(cl);
  if (leaves < 1) return 0;
  return cl->fabric.placement == RH_PLACE_SCATTERED ? node % leaves : node / cl->fabric.nodes_per_leaf;
}

double rh_fabric_port_bw(const rh_cluster *cl) {
  int nics = cl->nics_per_node > 0 ? cl->nics_per_node : 1;
  return cl->fabric.topology == RH_TOPO_RAIL ? cl->nic_bw : cl->nic_bw * nics;
}

double rh_fabric_leaf_bw(const rh_cluster *cl) {
  double over = cl->fabric.oversubscription >= 1 ? cl->fabric.oversubscription : 1;
  return cl->fabric.nodes_per_leaf * rh_fabric_port_bw(cl) / over;
}

rh_fabric_path rh_fabric_route(const rh_cluster *cl, int a, int b, int local_b) {
  int rails = rh_fabric_rails(cl), r = rails > 1 ? local_b % rails : 0;
  rh_fabric_path p = {a * rails + r, b * rails + r, -1, -1};
  if (rh_fabric_leaves(cl) > 0) {
    int la = rh_fabric_leaf_of(cl, a), lb = rh_fabric_leaf_of(cl, b);
    if (la != lb) {
      p.leaf_out = la * rails + r;
      p.leaf_in = lb * rails + r;
    }
  }
  return p;
}
