/*
 * cluster.c: facts about a cluster description.  The paths between GPUs, as the platform builds
 * them and the cost model charges them, are in sim/platform.c and decision.c's edge().
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
