/*
 * platform.h: the SimGrid platform of a cluster description.  One <cluster> zone per node (one host
 * per GPU, named "rank<R>", its GPU link as the cluster's private link), a switch zone joining the
 * nodes' uplinks.  decision.c's cost model charges these same routes.
 */
#ifndef REHEARSAL_SIM_PLATFORM_H
#define REHEARSAL_SIM_PLATFORM_H

#include "internal.h"

#include <stdio.h>

/* Writes the platform XML for `cl` to `out`.  Returns RH_OK or RH_ERR_IO. */
rh_status rh_sim_platform_write(const rh_cluster *cl, FILE *out);

#endif
