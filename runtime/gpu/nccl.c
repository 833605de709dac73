/*
 * nccl.c: an NCCL communicator whose every wait can end: a collective is enqueued on the
 * communicator's stream, then the stream and ncclCommGetAsyncError are polled until it completes,
 * NCCL reports an error, or the timeout passes; then the communicator is aborted
 * (ncclCommAbort), so a dead or hung peer never hangs the job.  NCCL codes become rh_status here.
 */
#include "gpu.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rh_nccl {
  ncclComm_t comm;
  cudaStream_t stream;
  bool aborted;
};

static rh_status map(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return RH_OK;
  case ncclInProgress: return RH_OK;
  case ncclInvalidArgument:
  case ncclInvalidUsage: return RH_ERR_INVALID;
  case ncclRemoteError: return RH_ERR_PEER_DEAD;
  default: return RH_ERR_BACKEND;
  }
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

rh_status rh_nccl_unique_id(void *id, size_t *len) {
  ncclUniqueId u;
  rh_status st = map(ncclGetUniqueId(&u));
  if (st == RH_OK) {
    memcpy(id, &u, sizeof u);
    *len = sizeof u;
  }
  return st;
}

rh_status rh_nccl_init(rh_nccl **out, const void *id, int rank, int size, int device) {
  rh_nccl *c = calloc(1, sizeof *c);
  if (!c) return RH_ERR_NOMEM;
  if (cudaSetDevice(device) != cudaSuccess || cudaStreamCreate(&c->stream) != cudaSuccess) {
    free(c);
    return RH_ERR_BACKEND;
  }
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  rh_status st = map(ncclCommInitRank(&c->comm, size, u, rank));
  if (st != RH_OK) {
    cudaStreamDestroy(c->stream);
    free(c);
    return st;
  }
  *out = c;
  return RH_OK;
}

/* Waits for the stream, polling NCCL's asynchronous error; aborts on an error or the timeout. */
static rh_status settle(rh_nccl *c, rh_status launched, double timeout) {
  if (launched != RH_OK) return launched;
  double deadline = timeout >= 0 ? seconds() + timeout : -1;
  for (;;) {
    cudaError_t q = cudaStreamQuery(c->stream);
    if (q == cudaSuccess) return RH_OK;
    if (q != cudaErrorNotReady) return RH_ERR_BACKEND;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(c->comm, &async);
    bool late = deadline >= 0 && seconds() > deadline;
    if ((async != ncclSuccess && async != ncclInProgress) || late) {
      ncclCommAbort(c->comm);
      c->aborted = true;
      return late ? RH_ERR_TIMEOUT : map(async);
    }
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
}

static ncclDataType_t type_of(rh_dtype t) {
  switch (t) {
  case RH_FLOAT64: return ncclFloat64;
  case RH_FLOAT16: return ncclFloat16;
  case RH_INT32: return ncclInt32;
  default: return ncclFloat32;
  }
}

rh_status rh_nccl_allreduce(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, rh_op op,
                            double timeout) {
  if (c->aborted) return RH_ERR_ABORTED;
  ncclRedOp_t r = op == RH_MIN ? ncclMin : op == RH_MAX ? ncclMax : ncclSum;
  return settle(c, map(ncclAllReduce(buf, buf, count, type_of(dtype), r, c->comm, c->stream)),
                timeout);
}

rh_status rh_nccl_broadcast(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, int root,
                            double timeout) {
  if (c->aborted) return RH_ERR_ABORTED;
  return settle(c, map(ncclBroadcast(buf, buf, count, type_of(dtype), root, c->comm, c->stream)),
                timeout);
}

void rh_nccl_free(rh_nccl *c) {
  if (!c) return;
  if (!c->aborted) ncclCommDestroy(c->comm);
  cudaStreamDestroy(c->stream);
  free(c);
}
