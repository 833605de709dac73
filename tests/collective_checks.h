/*
 * collective_checks.h: the exact-result checks of every collective, shared by the simulator's and
 * the MPI backend's tests.
 */
#ifndef REHEARSAL_COLLECTIVE_CHECKS_H
#define REHEARSAL_COLLECTIVE_CHECKS_H

#include "internal.h"

/* Failures counted by the checks of this process (every rank of the simulator, or this rank). */
extern int rh_test_failures;

/* The rank function: runs every check; returns 0 when this process saw no failure. */
int rh_test_all_collectives(rh_ctx *ctx, void *arg);

#endif
