/*
 * zone.h: the simulated cluster built in code, in one SimGrid zone whose routes are worked out
 * from a GPU's node, leaf and rail when a message needs them (zone.cpp, C++: SimGrid's C API cannot
 * build a platform).  Loading is O(hosts): no zone per node, no route table.  Plain C types only,
 * so that the C side (platform.c) fills the description.
 */
#ifndef REHEARSAL_SIM_ZONE_H
#define REHEARSAL_SIM_ZONE_H

#include <simgrid/forward.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where a flow from node a to GPU local_b of node b meets the network: the ports it leaves and
 * enters by (node * rails + rail) and the leaf ports it crosses (leaf * rails + rail; -1: none). */
typedef struct rh_zone_path {
  int out, in, leaf_out, leaf_in;
} rh_zone_path;

typedef struct rh_zone_spec {
  int nodes;              /* spares included */
  const int *gpus;        /* GPUs of each node */
  const double *speeds;   /* every GPU host's pstates, FLOP/s (pstate 0: full speed) */
  int nspeeds;
  double intra_bw, intra_lat; /* a GPU's private link to its node's switch, per direction */
  double backbone_bw;     /* a node's shared fabric; 0: none */
  double port_bw;         /* a node's port: its NICs together, or one NIC of a rail */
  double nic_lat;         /* a hop of the network */
  int rails;              /* ports a node has: 1, or one NIC per rail (port node * rails + rail) */
  int leaves;             /* leaves (per rail); 0: one non-blocking switch */
  double leaf_bw;         /* a leaf's uplinks to the spines together, per direction */
  /* the fabric's routing between nodes (the cost model's, runtime/cluster.c), asked with
   * `cluster` for every message between nodes; cluster outlives the simulation */
  rh_zone_path (*route)(const void *cluster, int a, int b, int local_b);
  const void *cluster;
} rh_zone_spec;

/* Builds the platform in the SimGrid engine that simgrid_init started, and seals it.  Returns 0,
 * or -1 with a message in err. */
int rh__zone_build(const rh_zone_spec *spec, char *err, size_t len);
/* The platform's link of this name, or NULL (one lookup; sg_link_by_name fails on none). */
sg_link_t rh__zone_link(const char *name);

#ifdef __cplusplus
}
#endif

#endif
