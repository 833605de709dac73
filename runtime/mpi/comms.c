/*
 * comms.c: what the MPI backend, its elastic resets (elastic.c) and its faults (faults.c) share:
 * the process's clock and its polling pauses, and a world's communicators (MPI's, and NCCL's on
 * the GPU flavour).  It depends on none of them, so that they depend on it and not on each other.
 */
#include "mpi_backend.h"

#include <errno.h>
#include <time.h>

double mpi__wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1% of the time waited so far, from 20 us up to 2 ms: a message that comes soon is seen at
 * once, and a rank waiting on a stalled peer costs its core next to nothing (a blocking MPI wait
 * would spin). */
void mpi__pause(double since) {
  double ns = (mpi__wall() - since) * 1e7;
  if (ns < 20000) ns = 20000;
  if (ns > 2000000) ns = 2000000;
  struct timespec ts = {0, (long)ns};
  nanosleep(&ts, NULL);
}

void mpi__sleep(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

void mpi__comms_open(mpi_comms *c, MPI_Comm parent) {
  MPI_Comm *all[] = {&c->coll, &c->native, &c->neg, &c->check, &c->end};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    MPI_Comm_dup(parent, all[i]);
    MPI_Comm_set_errhandler(*all[i], MPI_ERRORS_RETURN);
  }
}

#ifdef RH_MPI_GPU
/* Makes the NCCL communicator of a world (comm: its MPI communicator) on this process's GPU.
 * Every rank learns whether all could: 0, or 1. */
int mpi__nccl_open(mpi_job *job, MPI_Comm comm, int rank, int size, double timeout) {
  unsigned char id[128] = {0};
  size_t idlen = 0;
  rh_status st = rank == 0 ? rh_nccl_unique_id(id, &idlen) : RH_OK;
  int failed = st != RH_OK, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm);
  if (any) return 1;
  MPI_Bcast(id, sizeof id, MPI_BYTE, 0, comm);
  st = rh_nccl_init(&job->nccl, id, rank, size, job->device, rh_gpu_stream(), timeout);
  failed = st != RH_OK;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm);
  return any ? 1 : 0;
}
#endif
