/*
 * mpi_backend.h: what the MPI backend's files share.  backend.c holds the operations and the
 * launch; elastic.c re-forms the world with the survivors of a failure (under `rehearsal
 * elastic`); faults.c applies the scenario's scripted faults to real processes.
 */
#ifndef REHEARSAL_MPI_BACKEND_H
#define REHEARSAL_MPI_BACKEND_H

#include "internal.h"
#ifdef RH_MPI_GPU
#include "gpu.h"
#endif

#include <mpi.h>
#include <pthread.h>

/* The communicators of one world: MPI_COMM_WORLD's at launch, the survivors' after a reset. */
typedef struct mpi_comms {
  MPI_Comm coll;   /* the collectives' messages */
  MPI_Comm native; /* MPI's own collectives (RH_COLLECTIVES=native) */
  MPI_Comm neg;    /* negotiations */
  MPI_Comm check;  /* checks */
  MPI_Comm end;    /* the job's last word: when it ended, and how many ranks failed */
} mpi_comms;

typedef struct mpi_faults mpi_faults;

typedef struct mpi_job {
  mpi_comms comms;
  MPI_Op half_ops[RH_OP_COUNT]; /* fp16 has no MPI type: sum, min and max of our own */
  double t0;                    /* the job's time origin (wall clock, rank 0's) */
  pthread_mutex_t lock;         /* every MPI call holds it (MPI_THREAD_SERIALIZED) */
  rh_topology topo;             /* the current world's */
  int world_rank, world_size;   /* in MPI_COMM_WORLD: a process's identity across worlds */
  int *host_of;                 /* world_size entries: each process's host (first appearance) */
  int *members;                 /* the current world's processes, in rank order */
  const rh_elastic_config *elastic;
  const char *elastic_dir;      /* RH_ELASTIC_DIR: the driver's rendezvous files (NULL: none) */
  bool reformed;                /* the world was re-formed: MPI_COMM_WORLD holds failed peers */
  bool left;                    /* this process left the job at a rendezvous */
  bool excluded;                /* because the new world is without it */
  mpi_faults *faults;
#ifdef RH_MPI_GPU
  rh_nccl *nccl;
  int device; /* this process's GPU */
#endif
} mpi_job;

/* A rank's background tasks (its collectives issued without waiting): one thread runs them one
 * at a time in issue order, however many are queued.  On the heap, owned by the rank, joined and
 * freed at its job's end. */
typedef struct mpi_runner mpi_runner;

typedef struct mpi_rank {
  rh_ctx ctx;
  mpi_job *job;
  mpi_runner *runner; /* made on the first task */
} mpi_rank;

static inline mpi_rank *mpi__rank_of(const rh_ctx *ctx) { return (mpi_rank *)ctx->backend; }
static inline mpi_job *mpi__job_of(const rh_ctx *ctx) { return mpi__rank_of(ctx)->job; }

/* Seconds on the wall clock (the system's: one per host, NTP-aligned across hosts). */
double mpi__wall(void);
/* The pause between two polls of a wait that began at `since` (mpi__wall). */
void mpi__pause(double since);
/* Sleeps, through signals. */
void mpi__sleep(double seconds);
/* Duplicates `parent` into a world's communicators, errors returned. */
void mpi__comms_open(mpi_comms *c, MPI_Comm parent);
#ifdef RH_MPI_GPU
/* Makes the NCCL communicator of a world (comm: its MPI communicator) on this process's GPU;
 * 0, or 1 when a rank could not. */
int mpi__nccl_open(mpi_job *job, MPI_Comm comm, int rank, int size, double timeout);
#endif

/* ---- elastic.c ---------------------------------------------------------------------------- */

/* The rendezvous (the backend's op): tells the driver this process came, waits for the world it
 * forms, and moves into it. */
rh_status mpi__rendezvous(rh_ctx *ctx);
/* A process started on standby (host discovery): waits for the first world that takes it and
 * moves into it (RH_OK), or leaves when none does (RH_ERR_EXCLUDED: the job ended without it). */
rh_status mpi__standby(rh_ctx *ctx);
/* The backend's host_updates op: the driver's last change of the hosts (hosts.update). */
void mpi__host_updates(rh_ctx *ctx, double *stamp, int *kind);
/* What the driver saw die in this world, looked at in a wait at most every 0.1 s (*look: when
 * next): RH_ERR_PEER_DEAD with its words in last_error, or RH_OK.  (A process killed in a
 * collective is seen by the driver at once, and by its peers only at the timeout.) */
rh_status mpi__news(rh_ctx *ctx, double *look);

/* ---- faults.c ----------------------------------------------------------------------------- */

/* Takes the plan's faults that hit this process (slot `slot` of the scenario's cluster): crashes
 * and hangs (the process kills or stops itself), stragglers (compute slowed); says once, on
 * rank 0, which faults real processes cannot apply.  Time triggers start counting now. */
rh_status mpi__faults_open(mpi_job *job, const rh_fault_plan *plan, const rh_cluster *cluster,
                           int slot);
void mpi__faults_close(mpi_job *job);
/* The backend's progress op: step and phase triggers. */
void mpi__progress(rh_ctx *ctx, rh_phase phase);
/* How many times longer compute takes now (a straggler window: 1 / its factor). */
double mpi__slowdown(const rh_ctx *ctx);

#endif
