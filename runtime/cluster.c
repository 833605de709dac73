/*
 * cluster.c: the path model shared by the simulator's platform and the algorithm cost model.
 * Inside a node a message crosses the sender's GPU link and the receiver's; across nodes it also
 * crosses the sending node's uplink and the receiving node's downlink (all NICs of a node
 * aggregated, as NCCL spreads its channels over them).
 */
#include "internal.h"

void rh_cluster_path(const rh_cluster *cl, int node_a, int node_b, double *lat, double *bw) {
  double l = 2 * cl->intra_lat, b = cl->intra_bw;
  if (cl->intra_backbone_bw > 0 && cl->intra_backbone_bw < b) b = cl->intra_backbone_bw;
  if (node_a != node_b) {
    double nic = cl->nic_bw * (cl->nics_per_node > 0 ? cl->nics_per_node : 1);
    l += 2 * cl->nic_lat;
    if (nic < b) b = nic;
  }
  *lat = l;
  *bw = b;
}

int rh_cluster_size(const rh_cluster *cl) {
  int n = 0;
  for (int i = 0; i < cl->nodes; i++) n += cl->gpus_per_node[i];
  return n;
}
