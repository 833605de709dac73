/*
 * sharding_what_if.h: the run again with the state sharded one stage less or more, or hybrid
 * (sharding_what_if.c).
 */
#ifndef REHEARSAL_SHARDING_WHAT_IF_H
#define REHEARSAL_SHARDING_WHAT_IF_H

#include "bottleneck.h"
#include "run.h"


/* For a simulated timing run whose state is sharded (or does not fit unsharded): runs the job
 * with each alternative sharding, all at once, and fills alts with their figures (alts->n 0:
 * the run asks for none). */
void rh_sharding_what_if(const run_job *j, rh_sharding_alts *alts);

#endif
