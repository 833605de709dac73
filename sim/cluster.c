/*
 * cluster.c: the simulated cluster built in code (zone.cpp) from a cluster description, the
 * platform the simulator runs on; its routes between nodes are the fabric's (rh_fabric_route), the
 * same the cost model charges.
 */
#include "platform.h"
#include "zone.h"

#include <simgrid/engine.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The fabric's routing, for the zone. */
static rh_zone_path route(const void *cluster, int a, int b, int local_b) {
  rh_fabric_path p = rh_fabric_route(cluster, a, b, local_b);
  return (rh_zone_path){p.out, p.in, p.leaf_out, p.leaf_in};
}

rh_status rh_sim_platform_build(const rh_cluster *cl, const rh_fault_plan *plan, char *err, size_t len) {
  int leaves = rh_fabric_leaves(cl);
  double *speeds = malloc(sizeof *speeds * (size_t)(1 + (plan ? plan->nfaults : 0)));
  if (!speeds) {
    snprintf(err, len, "out of memory for the simulated cluster");
    return RH_ERR_NOMEM;
  }
  rh_zone_spec spec = {.nodes = cl->nodes + cl->spares, .gpus = cl->gpus_per_node,
                       .speeds = speeds, .nspeeds = rh_sim_gpu_speeds(cl, plan, speeds),
                       .intra_bw = cl->intra_bw, .intra_lat = cl->intra_lat,
                       .backbone_bw = cl->intra_backbone_bw, .port_bw = rh_fabric_port_bw(cl),
                       .nic_lat = cl->nic_lat, .rails = rh_fabric_rails(cl), .leaves = leaves,
                       .leaf_bw = leaves > 0 ? rh_fabric_leaf_bw(cl) : 0, .route = route,
                       .cluster = cl};
  int rc = rh__zone_build(&spec, err, len);
  free(speeds);
  return rc == 0 ? RH_OK : RH_ERR_INVALID;
}

bool rh_sim_platform_load(const rh_cluster *cl, const rh_fault_plan *plan, bool xml, const char *keep) {
  char err[512];
  if (!xml) {
    if (rh_sim_platform_build(cl, plan, err, sizeof err) == RH_OK) return true;
    fprintf(stderr, "rehearsal: %s\n", err);
    return false;
  }
  char tmpl[] = "/tmp/rehearsal-platform-XXXXXX";
  const char *path = keep ? keep : tmpl;
  FILE *f = NULL;
  if (keep) {
    f = fopen(keep, "w");
  } else {
    int fd = mkstemp(tmpl);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
  }
  rh_status st = f ? rh_sim_platform_write(cl, plan, f) : RH_ERR_IO;
  if (f && fclose(f) != 0 && st == RH_OK) st = RH_ERR_IO;
  if (st == RH_OK) simgrid_load_platform(path);
  else if (st == RH_ERR_UNSUPPORTED)
    fprintf(stderr, "rehearsal: the XML platform has one switch; this fabric is built in code only\n");
  else
    fprintf(stderr, "rehearsal: cannot write the platform file %s\n", path);
  if (!keep) unlink(tmpl);
  return st == RH_OK;
}
