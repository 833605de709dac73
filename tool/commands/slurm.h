/*
 * slurm.h: the Slurm commands a sweep submits its points with (sbatch job arrays), looks at
 * (squeue) and stops (scancel), found on PATH as users have them.
 */
#ifndef REHEARSAL_SLURM_H
#define REHEARSAL_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* `sbatch --parsable ARGS... SCRIPT SCRIPT_ARGS...`: the job id into jobid, 0; or 1 with what
 * sbatch said on stderr (it passes through). */
int rh_slurm_submit(const char *const *args, int nargs, const char *script,
                    const char *const *script_args, int nscript_args, char *jobid, size_t len);
/* The tasks of the given jobs (this user's) that Slurm still holds (`squeue -r --me`), each
 * handed to fn with its job id, its array index and its state code (PD pending, R running, CG
 * completing, ...); 0, or 1 when squeue could not be asked. */
int rh_slurm_tasks(const char *const *jobids, int n,
                   void (*fn)(void *arg, const char *jobid, int task, const char *state), void *arg);
/* `scancel` of the given jobs (every task of an array). */
void rh_slurm_cancel(const char *const *jobids, int n);
/* Whether Slurm answers here (`sinfo`): 0, or 1 with a line on stderr saying it does not. */
int rh_slurm_ready(const char *who);
/* The largest array index the cluster takes (slurm.conf's MaxArraySize less one; 1000 when it
 * cannot be read, Slurm's default). */
int rh_slurm_max_array_index(void);

#endif
