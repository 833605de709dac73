/*
 * platform.h: the SimGrid platform of a cluster description.  One <cluster> zone per node, spare
 * nodes included (one host per GPU, named "gpu<slot>" with slots numbered node by node, its GPU
 * link as the cluster's private link), a switch zone joining the nodes' uplinks, and a launcher
 * host for the driver and the fault injector.  decision.c's cost model charges these same routes.
 */
#ifndef REHEARSAL_SIM_PLATFORM_H
#define REHEARSAL_SIM_PLATFORM_H

#include "internal.h"

#include <stdio.h>

/* Writes the platform XML for `cl` to `out`; the GPU hosts get one pstate per straggler factor
 * of `plan` (may be NULL).  Returns RH_OK or RH_ERR_IO. */
rh_status rh_sim_platform_write(const rh_cluster *cl, const rh_fault_plan *plan, FILE *out);
/* SimGrid's settings for a simulation of `cl`, as simgrid_init's arguments: argv[0] = program,
 * then at most RH_SIM_SETTINGS options, then NULL (argv has room for RH_SIM_SETTINGS + 2).
 * Returns the count. */
enum { RH_SIM_SETTINGS = 6 };
int rh_sim_settings(const rh_cluster *cl, const char *program, char **argv);
/* The pstate of a GPU host computing at `factor` of its speed (a straggler factor of plan). */
int rh_sim_straggler_pstate(const rh_fault_plan *plan, double factor);

#endif
