/*
 * nccl.c: an NCCL communicator whose every wait can end.  The communicator is made non-blocking
 * (ncclConfig_t.blocking = 0), so neither its creation nor a collective can block the caller:
 * each is started, then ncclCommGetAsyncError and the stream are polled until it completes, NCCL
 * reports an error, or the timeout passes; then the communicator is aborted (ncclCommAbort), so a
 * dead or hung peer never hangs the job.  NCCL codes become rh_status here and nowhere else.
 */
#include "gpu.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct rh_nccl {
  ncclComm_t comm;
  cudaStream_t stream;
  bool own_stream;
  bool aborted;
  char error[256];
};

static rh_status map(ncclResult_t r) {
  switch (r) {
  case ncclSuccess:
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

/* Between polls: yield for the first millisecond (a sleep lasts some 50 us whatever is asked,
 * more than a small collective takes), then sleep 1% of the time waited so far, from 20 us up to
 * 2 ms, so that a rank waiting on a stalled peer costs its core next to nothing. */
static void pause_briefly(double since) {
  double waited = seconds() - since;
  if (waited < 1e-3) {
    sched_yield();
    return;
  }
  double ns = waited * 1e7;
  if (ns < 20000) ns = 20000;
  if (ns > 2000000) ns = 2000000;
  struct timespec ts = {0, (long)ns};
  nanosleep(&ts, NULL);
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

static rh_status give_up(rh_nccl *c, rh_status st, const char *what, ncclResult_t r) {
  snprintf(c->error, sizeof c->error, "%s: %s%s", what,
           st == RH_ERR_TIMEOUT ? "timed out" : ncclGetErrorString(r),
           st == RH_ERR_TIMEOUT || r == ncclRemoteError ? " (a peer is dead or hung)" : "");
  const char *last = ncclGetLastError(c->comm);
  if (st != RH_ERR_TIMEOUT && last && *last)
    snprintf(c->error + strlen(c->error), sizeof c->error - strlen(c->error), ": %s", last);
  ncclCommAbort(c->comm);
  c->aborted = true;
  return st;
}

/* Polls until the communicator has no operation in progress and the stream is idle; aborts on an
 * error or past the deadline. */
static rh_status settle(rh_nccl *c, ncclResult_t launched, const char *what, double timeout) {
  if (launched != ncclSuccess && launched != ncclInProgress)
    return give_up(c, map(launched), what, launched);
  double start = seconds(), deadline = timeout >= 0 ? start + timeout : -1;
  for (;;) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(c->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) return give_up(c, map(async), what, async);
    if (async == ncclSuccess) { /* enqueued: now the stream */
      cudaError_t q = c->stream ? cudaStreamQuery(c->stream) : cudaSuccess;
      if (q == cudaSuccess) return RH_OK;
      if (q != cudaErrorNotReady) {
        snprintf(c->error, sizeof c->error, "%s: %s", what, cudaGetErrorString(q));
        return RH_ERR_BACKEND;
      }
    }
    if (deadline >= 0 && seconds() > deadline) return give_up(c, RH_ERR_TIMEOUT, what, ncclSuccess);
    pause_briefly(start);
  }
}

rh_status rh_nccl_init(rh_nccl **out, const void *id, int rank, int size, int device,
                       void *stream, double timeout) {
  rh_nccl *c = calloc(1, sizeof *c);
  if (!c) return RH_ERR_NOMEM;
  if (cudaSetDevice(device) != cudaSuccess) {
    free(c);
    return RH_ERR_BACKEND;
  }
  c->stream = stream;
  if (!stream) {
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess) {
      free(c);
      return RH_ERR_BACKEND;
    }
    c->own_stream = true;
  }
  ncclUniqueId u;
  memcpy(&u, id, sizeof u);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&c->comm, size, u, rank, &config);
  rh_status st = RH_OK;
  if (r != ncclSuccess && r != ncclInProgress) {
    snprintf(c->error, sizeof c->error, "ncclCommInitRankConfig: %s", ncclGetErrorString(r));
    st = map(r) == RH_OK ? RH_ERR_BACKEND : map(r);
    if (c->comm) ncclCommAbort(c->comm);
  } else {
    cudaStream_t keep = c->stream;
    c->stream = NULL; /* nothing enqueued yet: wait for the communicator alone */
    st = settle(c, r, "ncclCommInitRankConfig", timeout);
    c->stream = keep;
  }
  if (st != RH_OK) {
    fprintf(stderr, "rehearsal: rank %d: %s\n", rank, c->error);
    if (c->own_stream) cudaStreamDestroy(c->stream);
    free(c);
    return st;
  }
  *out = c;
  return RH_OK;
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
  return settle(c, ncclAllReduce(buf, buf, count, type_of(dtype), r, c->comm, c->stream),
                "ncclAllReduce", timeout);
}

rh_status rh_nccl_broadcast(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, int root,
                            double timeout) {
  if (c->aborted) return RH_ERR_ABORTED;
  return settle(c, ncclBroadcast(buf, buf, count, type_of(dtype), root, c->comm, c->stream),
                "ncclBroadcast", timeout);
}

/* In place as NCCL defines it: the result lands in this rank's block of buf. */
rh_status rh_nccl_reduce_scatter(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, rh_op op,
                                 int rank, double timeout) {
  if (c->aborted) return RH_ERR_ABORTED;
  ncclRedOp_t r = op == RH_MIN ? ncclMin : op == RH_MAX ? ncclMax : ncclSum;
  char *mine = (char *)buf + (size_t)rank * count * rh_dtype_size(dtype);
  return settle(c, ncclReduceScatter(buf, mine, count, type_of(dtype), r, c->comm, c->stream),
                "ncclReduceScatter", timeout);
}

/* NCCL has no allgatherv: one broadcast per rank in a group, as Horovod does. */
rh_status rh_nccl_allgatherv(rh_nccl *c, void *buf, const size_t *counts, rh_dtype dtype,
                             double timeout) {
  if (c->aborted) return RH_ERR_ABORTED;
  int n = 0;
  ncclCommCount(c->comm, &n);
  size_t esz = rh_dtype_size(dtype), off = 0;
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < n && (r == ncclSuccess || r == ncclInProgress); i++) {
    char *block = (char *)buf + off * esz;
    if (counts[i] > 0) r = ncclBroadcast(block, block, counts[i], type_of(dtype), i, c->comm, c->stream);
    off += counts[i];
  }
  ncclResult_t end = ncclGroupEnd();
  if (r == ncclSuccess || r == ncclInProgress) r = end;
  return settle(c, r, "ncclBroadcast (allgatherv)", timeout);
}

const char *rh_nccl_error(const rh_nccl *c) { return c ? c->error : ""; }

void rh_nccl_free(rh_nccl *c) {
  if (!c) return;
  if (!c->aborted) {
    ncclCommFinalize(c->comm);
    ncclResult_t async = ncclInProgress;
    double start = seconds();
    while (async == ncclInProgress && seconds() < start + 10) {
      ncclCommGetAsyncError(c->comm, &async);
      pause_briefly(start);
    }
    if (async == ncclSuccess) ncclCommDestroy(c->comm);
    else ncclCommAbort(c->comm);
  }
  if (c->own_stream) cudaStreamDestroy(c->stream);
  free(c);
}
