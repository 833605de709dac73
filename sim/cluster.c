/*
 * cluster.c: the simulated cluster built in code (zone.cpp) from a cluster description, the
 * platform the simulator runs on.
 */
#include "platform.h"
#include "zone.h"

#include <stdio.h>
#include <stdlib.h>

rh_status rh_sim_platform_build(const rh_cluster *cl, const rh_fault_plan *plan, char *err, size_t len) {
  int nodes = cl->nodes + cl->spares, leaves = rh_fabric_leaves(cl);
  double *speeds = malloc(sizeof *speeds * (size_t)(1 + (plan ? plan->nfaults : 0)));
  int *leaf_of = malloc(sizeof *leaf_of * (size_t)nodes);
  if (!speeds || !leaf_of) {
    free(speeds);
    free(leaf_of);
    snprintf(err, len, "out of memory for the simulated cluster");
    return RH_ERR_NOMEM;
  }
  for (int n = 0; n < nodes; n++) leaf_of[n] = rh_fabric_leaf_of(cl, n);
  rh_zone_spec spec = {.nodes = nodes, .gpus = cl->gpus_per_node, .speeds = speeds,
                       .nspeeds = rh_sim_gpu_speeds(cl, plan, speeds), .intra_bw = cl->intra_bw,
                       .intra_lat = cl->intra_lat, .backbone_bw = cl->intra_backbone_bw,
                       .port_bw = rh_fabric_port_bw(cl), .nic_lat = cl->nic_lat,
                       .rails = rh_fabric_rails(cl), .leaves = leaves, .leaf_of = leaf_of,
                       .leaf_bw = leaves > 0 ? rh_fabric_leaf_bw(cl) : 0};
  int rc = rh__zone_build(&spec, err, len);
  free(speeds);
  free(leaf_of);
  return rc == 0 ? RH_OK : RH_ERR_INVALID;
}
