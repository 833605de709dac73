/*
 * platform.h: the SimGrid platform of a cluster description: one host per GPU, spare nodes
 * included, named "gpu<slot>" with slots numbered node by node, each with its private link to its
 * node's switch; the nodes' uplinks on the fabric; a launcher host for the driver and the fault
 * injector.  The simulator builds it in code, in one zone (zone.cpp); the same network as XML, a
 * SimGrid <cluster> zone per node, is what `rehearsal platform` prints and what RH_SIM_PLATFORM=xml
 * loads instead (the same numbers, slower past a few thousand GPUs).  decision.c's cost model
 * charges these same routes.
 */
#ifndef REHEARSAL_SIM_PLATFORM_H
#define REHEARSAL_SIM_PLATFORM_H

#include "internal.h"

#include <stdio.h>

/* Builds the platform in the engine simgrid_init started; the GPU hosts get one pstate per
 * straggler factor of `plan` (may be NULL).  Returns RH_OK, or RH_ERR_INVALID with err filled. */
rh_status rh_sim_platform_build(const rh_cluster *cl, const rh_fault_plan *plan, char *err, size_t len);
/* Builds the platform in code or, with xml, writes its XML (into `keep`, or a temporary file
 * removed after) and loads that through SimGrid's parser: the same network either way.  Says
 * what failed on stderr and returns false. */
bool rh_sim_platform_load(const rh_cluster *cl, const rh_fault_plan *plan, bool xml, const char *keep);
/* Writes the platform XML for `cl` to `out`; the GPU hosts get one pstate per straggler factor
 * of `plan` (may be NULL).  Returns RH_OK, RH_ERR_IO, or RH_ERR_UNSUPPORTED for a fabric other
 * than the switch (the leaves and rails exist built in code only). */
rh_status rh_sim_platform_write(const rh_cluster *cl, const rh_fault_plan *plan, FILE *out);
/* SimGrid's settings for a simulation of `cl`, as simgrid_init's arguments: argv[0] = program,
 * then at most RH_SIM_SETTINGS options, then NULL (argv has room for RH_SIM_SETTINGS + 2).
 * Returns the count. */
enum { RH_SIM_SETTINGS = 6 };
int rh_sim_settings(const rh_cluster *cl, const char *program, char **argv);
/* A GPU host's speeds, FLOP/s: full, then one pstate per straggler factor of plan in order of
 * first use (speeds has room for 1 + plan's faults).  Returns the count. */
int rh_sim_gpu_speeds(const rh_cluster *cl, const rh_fault_plan *plan, double *speeds);
/* The pstate of a GPU host computing at `factor` of its speed (a straggler factor of plan). */
int rh_sim_straggler_pstate(const rh_fault_plan *plan, double factor);

#endif
