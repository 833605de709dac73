/*
 * backend.c: the MPI backend, one process per rank, launched by mpirun or srun.  MPI bootstraps
 * the job: rank, size, and the hosts (MPI_Get_processor_name) that give local and cross ranks.
 * The runtime's own algorithms run over MPI point-to-point messages, so a job reduces in the same
 * order, and gets the same bits, as on the simulator; RH_COLLECTIVES=native uses MPI's own
 * collectives instead (MPI's reduction order).  Every wait polls against a deadline, so a
 * hung peer is a timeout; MPI errors are mapped to rh_status here and nowhere else.
 *
 * Compute is the modelled GPU's time (flops / the scenario's GPU rate), slept: this path runs
 * real multi-process jobs on any machine.
 *
 * Built with RH_MPI_GPU (the library rh_mpi_gpu), the same backend drives GPUs: each rank takes
 * the device of its local rank, rank 0's NCCL unique id reaches the others by MPI_Bcast, every
 * collective on real buffers runs through NCCL on device memory (host buffers are staged), and
 * compute spends the FLOPs in cuBLAS GEMMs.  Audits, checks and timing-only messages stay on MPI.
 *
 * Elastic training (elastic.c) and scripted faults (faults.c) have files of their own.
 *
 * With a timeline asked for, each process records its rank's events (on wall time since rank 0's
 * origin), and at the end rank 0 of the last world gathers them and writes the one file.
 */
#include "mpi_backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the CPU path's collectives and compute, which the GPU flavour replaces */
#ifdef RH_MPI_GPU
#define CPU_ONLY __attribute__((unused))
#else
#define CPU_ONLY
#endif

/* ---- job and rank state ------------------------------------------------------------------ */

struct rh_p2p {
  MPI_Request req;
  void *scratch; /* timing-only: the bytes that stand in for the payload, owned */
  size_t bytes;
  int peer;
  bool is_recv, done, completed; /* done: no longer pending; completed: not cancelled */
};

struct rh_task {
  rh_status (*fn)(void *);
  void *arg;
  rh_status status;
  bool done;
  rh_task *next; /* in the runner's queue */
};

struct mpi_runner {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* a task queued, a task done, or the end */
  rh_task *head, *tail; /* queued, not yet started */
  bool running, stopping;
  pthread_t thread;
};

static mpi_rank *rank_of(const rh_ctx *ctx) { return mpi__rank_of(ctx); }
static mpi_job *job_of(const rh_ctx *ctx) { return mpi__job_of(ctx); }

static rh_status map_error(int err) {
  if (err == MPI_SUCCESS) return RH_OK;
  int cls = MPI_ERR_OTHER;
  MPI_Error_class(err, &cls);
  if (cls == MPI_ERR_TRUNCATE) return RH_ERR_MISMATCH;
  return RH_ERR_BACKEND;
}

/* ---- point to point ---------------------------------------------------------------------- */

static rh_status post(rh_ctx *ctx, int peer, uint32_t tag, void *buf, size_t bytes, bool recv,
                      MPI_Comm comm, rh_p2p **out) {
  if (bytes > (size_t)0x7fffffff) return RH_ERR_UNSUPPORTED; /* one MPI message */
  rh_p2p *r = calloc(1, sizeof *r);
  if (!r) return RH_ERR_NOMEM;
  r->bytes = bytes;
  r->peer = peer;
  r->is_recv = recv;
  if (!buf && bytes) { /* timing-only: real bytes must still travel */
    buf = r->scratch = calloc(1, bytes);
    if (!buf) {
      free(r);
      return RH_ERR_NOMEM;
    }
  }
  mpi_job *job = job_of(ctx);
  pthread_mutex_lock(&job->lock);
  int err = recv ? MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, (int)tag, comm, &r->req)
                 : MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, (int)tag, comm, &r->req);
  pthread_mutex_unlock(&job->lock);
  if (err != MPI_SUCCESS) {
    free(r->scratch);
    free(r);
    return map_error(err);
  }
  *out = r;
  return RH_OK;
}

static rh_status mpi_isend(rh_ctx *ctx, int peer, uint32_t tag, const void *buf, size_t bytes,
                           rh_p2p **out) {
  return post(ctx, peer, tag, (void *)buf, bytes, false, job_of(ctx)->comms.coll, out);
}

static rh_status mpi_irecv(rh_ctx *ctx, int peer, uint32_t tag, void *buf, size_t bytes,
                           rh_p2p **out) {
  return post(ctx, peer, tag, buf, bytes, true, job_of(ctx)->comms.coll, out);
}

/* Polls until every request is done or the deadline passes; cancels what is left. */
static rh_status wait_requests(rh_ctx *ctx, rh_p2p **reqs, size_t n, double timeout) {
  mpi_job *job = job_of(ctx);
  double since = mpi__wall(), deadline = timeout >= 0 ? since + timeout : -1;
  rh_status first = RH_OK, news = RH_OK;
  int late_peer = -1;
  double look = since;
  for (;;) {
    size_t left = 0;
    pthread_mutex_lock(&job->lock);
    for (size_t i = 0; i < n; i++) {
      rh_p2p *r = reqs[i];
      if (!r || r->done) continue;
      int flag = 0;
      MPI_Status status;
      int err = MPI_Test(&r->req, &flag, &status);
      if (err != MPI_SUCCESS) {
        r->done = true;
        if (first == RH_OK) first = map_error(err);
        continue;
      }
      if (!flag) {
        left++;
        continue;
      }
      r->done = r->completed = true;
      if (r->is_recv) {
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        if ((size_t)count != r->bytes && first == RH_OK) first = RH_ERR_MISMATCH;
      }
    }
    bool late = deadline >= 0 && mpi__wall() > deadline;
    if (left && !late && news == RH_OK) news = mpi__news(ctx, &look); /* a death the driver saw */
    if (left && (late || news != RH_OK)) { /* a peer that never came: give up on what is left */
      for (size_t i = 0; i < n; i++) {
        rh_p2p *r = reqs[i];
        if (!r || r->done) continue;
        if (late_peer < 0) late_peer = r->peer;
        MPI_Cancel(&r->req);
        MPI_Request_free(&r->req);
        r->done = true;
      }
      if (first == RH_OK) first = news != RH_OK ? news : RH_ERR_TIMEOUT;
      left = 0;
    }
    pthread_mutex_unlock(&job->lock);
    if (!left) break;
    mpi__pause(since);
  }
  if (first == RH_ERR_TIMEOUT && late_peer >= 0)
    snprintf(ctx->last_error, sizeof ctx->last_error, "waited %g s for rank %d", timeout, late_peer);
  return first;
}

static rh_status mpi_waitall(rh_ctx *ctx, rh_p2p **reqs, size_t n, double timeout) {
  rh_status st = wait_requests(ctx, reqs, n, timeout);
  for (size_t i = 0; i < n; i++) {
    if (!reqs[i]) continue;
    free(reqs[i]->scratch);
    free(reqs[i]);
    reqs[i] = NULL;
  }
  return st;
}

/* ---- time ------------------------------------------------------------------------------- */

/* The system clock, not MPI_Wtime: Open MPI may read per-core cycle counters that do not agree
 * between processes, where the system clock is one per host (and NTP-aligned across hosts). */
static double mpi_now(const rh_ctx *ctx) { return mpi__wall() - job_of(ctx)->t0; }

CPU_ONLY static rh_status mpi_compute(rh_ctx *ctx, double flops) {
  if (ctx->cluster && ctx->cluster->gpu_flops > 0)
    mpi__sleep(flops / ctx->cluster->gpu_flops * mpi__slowdown(ctx));
  return RH_OK;
}

static rh_status mpi_sleep(rh_ctx *ctx, double seconds) {
  (void)ctx;
  mpi__sleep(seconds);
  return RH_OK;
}

/* ---- audits ------------------------------------------------------------------------------ */

/* Every rank sends its record to every other; the key picks the communicator (negotiations and
 * checks may run at once on two threads of a rank) and, modulo the tag range, the tag. */
static rh_status mpi_audit(rh_ctx *ctx, uint64_t key, const void *mine, size_t bytes, void *all,
                           uint8_t *arrived, double timeout) {
  mpi_job *job = job_of(ctx);
  int n = ctx->world.n, me = ctx->rank;
  MPI_Comm comm = (key & RH_AUDIT_CHECK) ? job->comms.check : job->comms.neg;
  uint32_t tag = (uint32_t)(key & 0x7fff);
  rh_p2p **reqs = calloc(2 * (size_t)n, sizeof *reqs);
  if (!reqs) return RH_ERR_NOMEM;
  memcpy((char *)all + (size_t)me * bytes, mine, bytes);
  rh_status st = RH_OK;
  for (int r = 0; r < n && st == RH_OK; r++) {
    if (r == me) continue;
    st = post(ctx, r, tag, (char *)all + (size_t)r * bytes, bytes, true, comm, &reqs[2 * r]);
    if (st == RH_OK) st = post(ctx, r, tag, (void *)mine, bytes, false, comm, &reqs[2 * r + 1]);
  }
  rh_status w = wait_requests(ctx, reqs, 2 * (size_t)n, timeout);
  if (st == RH_OK) st = w;
  for (int r = 0; r < n; r++) /* a record came when its receive completed */
    arrived[r] = r == me || (reqs[2 * r] && reqs[2 * r]->completed);
  for (size_t i = 0; i < 2 * (size_t)n; i++) {
    if (!reqs[i]) continue;
    free(reqs[i]->scratch);
    free(reqs[i]);
  }
  free(reqs);
  return st;
}

/* ---- MPI's own collectives ----------------------------------------------------------------- */

static void half_reduce(void *in, void *inout, int *len, rh_op op) {
  rh__reduce(inout, in, (size_t)*len, RH_FLOAT16, op);
}
static void half_sum(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  half_reduce(in, inout, len, RH_SUM);
}
static void half_min(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  half_reduce(in, inout, len, RH_MIN);
}
static void half_max(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  half_reduce(in, inout, len, RH_MAX);
}

static MPI_Datatype mpi_type(rh_dtype t) {
  switch (t) {
  case RH_FLOAT32: return MPI_FLOAT;
  case RH_FLOAT64: return MPI_DOUBLE;
  case RH_INT32: return MPI_INT32_T;
  default: return MPI_UINT16_T; /* fp16, with our own ops */
  }
}

static MPI_Op mpi_op(const mpi_job *job, rh_dtype t, rh_op op) {
  if (t == RH_FLOAT16) return job->half_ops[op];
  return op == RH_MIN ? MPI_MIN : op == RH_MAX ? MPI_MAX : MPI_SUM;
}

/* Polls a started MPI collective until it is done or `timeout` passes (then it is abandoned:
 * MPI cannot cancel a collective, so the communicator is unusable afterwards). */
static rh_status finish(rh_ctx *ctx, int err, MPI_Request *req, double timeout) {
  mpi_job *job = job_of(ctx);
  if (err != MPI_SUCCESS) return map_error(err);
  double since = mpi__wall(), deadline = timeout >= 0 ? since + timeout : -1, look = since;
  for (;;) {
    int flag = 0;
    pthread_mutex_lock(&job->lock);
    err = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    pthread_mutex_unlock(&job->lock);
    if (err != MPI_SUCCESS) return map_error(err);
    if (flag) return RH_OK;
    if (deadline >= 0 && mpi__wall() > deadline) return RH_ERR_TIMEOUT;
    rh_status news = mpi__news(ctx, &look); /* a death the driver saw */
    if (news != RH_OK) return news;
    mpi__pause(since);
  }
}

CPU_ONLY static rh_status mpi_allreduce(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, rh_op op,
                               double timeout) {
  if (count > 0x7fffffff) return RH_ERR_UNSUPPORTED;
  mpi_job *job = job_of(ctx);
  MPI_Request req;
  pthread_mutex_lock(&job->lock);
  int err = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(dtype), mpi_op(job, dtype, op),
                           job->comms.native, &req);
  pthread_mutex_unlock(&job->lock);
  return finish(ctx, err, &req, timeout);
}

CPU_ONLY static rh_status mpi_broadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root,
                               double timeout) {
  if (count > 0x7fffffff) return RH_ERR_UNSUPPORTED;
  mpi_job *job = job_of(ctx);
  MPI_Request req;
  pthread_mutex_lock(&job->lock);
  int err = MPI_Ibcast(buf, (int)count, mpi_type(dtype), root, job->comms.native, &req);
  pthread_mutex_unlock(&job->lock);
  return finish(ctx, err, &req, timeout);
}

CPU_ONLY static rh_status mpi_allgatherv(rh_ctx *ctx, void *buf, const size_t *counts, rh_dtype dtype,
                                double timeout) {
  mpi_job *job = job_of(ctx);
  int n = ctx->world.n;
  int *cnt = calloc((size_t)n, sizeof(int)), *displ = calloc((size_t)n, sizeof(int));
  size_t off = 0;
  rh_status st = cnt && displ ? RH_OK : RH_ERR_NOMEM;
  for (int r = 0; r < n && st == RH_OK; r++) {
    if (counts[r] > 0x7fffffff || off > 0x7fffffff) st = RH_ERR_UNSUPPORTED;
    cnt[r] = (int)counts[r];
    displ[r] = (int)off;
    off += counts[r];
  }
  if (st == RH_OK) {
    MPI_Request req;
    pthread_mutex_lock(&job->lock);
    int err = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, displ,
                              mpi_type(dtype), job->comms.native, &req);
    pthread_mutex_unlock(&job->lock);
    st = finish(ctx, err, &req, timeout);
  }
  free(cnt); /* after the collective completed (or was abandoned: MPI keeps its own copy) */
  free(displ);
  return st;
}

/* MPI_Reduce_scatter_block in place: MPI leaves the result at the front of buf, and it moves to
 * this rank's block. */
CPU_ONLY static rh_status mpi_reduce_scatter(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype,
                                             rh_op op, double timeout) {
  if (count > 0x7fffffff) return RH_ERR_UNSUPPORTED;
  mpi_job *job = job_of(ctx);
  MPI_Request req;
  pthread_mutex_lock(&job->lock);
  int err = MPI_Ireduce_scatter_block(MPI_IN_PLACE, buf, (int)count, mpi_type(dtype),
                                      mpi_op(job, dtype, op), job->comms.native, &req);
  pthread_mutex_unlock(&job->lock);
  rh_status st = finish(ctx, err, &req, timeout);
  size_t block = count * rh_dtype_size(dtype);
  if (st == RH_OK && ctx->rank > 0) memmove((char *)buf + (size_t)ctx->rank * block, buf, block);
  return st;
}

#ifdef RH_MPI_GPU
/* ---- NCCL's collectives and real compute on the rank's GPU ----------------------------------- */

static rh_status nccl_failed(rh_ctx *ctx, rh_status st) {
  if (st != RH_OK && !ctx->last_error[0])
    snprintf(ctx->last_error, sizeof ctx->last_error, "%s", rh_nccl_error(job_of(ctx)->nccl));
  return st;
}

static rh_status gpu_allreduce(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, rh_op op,
                               double timeout) {
  rh_status st = rh_gpu_bind();
  if (st == RH_OK) st = rh_nccl_allreduce(job_of(ctx)->nccl, buf, count, dtype, op, timeout);
  return nccl_failed(ctx, st);
}

static rh_status gpu_broadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root,
                               double timeout) {
  rh_status st = rh_gpu_bind();
  if (st == RH_OK) st = rh_nccl_broadcast(job_of(ctx)->nccl, buf, count, dtype, root, timeout);
  return nccl_failed(ctx, st);
}

static rh_status gpu_allgatherv(rh_ctx *ctx, void *buf, const size_t *counts, rh_dtype dtype,
                                double timeout) {
  rh_status st = rh_gpu_bind();
  if (st == RH_OK) st = rh_nccl_allgatherv(job_of(ctx)->nccl, buf, counts, dtype, timeout);
  return nccl_failed(ctx, st);
}

static rh_status gpu_reduce_scatter(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype,
                                    rh_op op, double timeout) {
  rh_status st = rh_gpu_bind();
  if (st == RH_OK)
    st = rh_nccl_reduce_scatter(job_of(ctx)->nccl, buf, count, dtype, op, ctx->rank, timeout);
  return nccl_failed(ctx, st);
}

static rh_status gpu_compute(rh_ctx *ctx, double flops) {
  (void)ctx;
  rh_status st = rh_gpu_bind();
  return st == RH_OK ? rh_gpu_compute(flops, rh_gpu_stream()) : st;
}

/* the GPU runs the FLOPs themselves: their real time is what a run measures */
static rh_status gpu_priced(rh_ctx *ctx, double flops, double seconds) {
  (void)seconds;
  return gpu_compute(ctx, flops);
}
#endif

/* ---- background tasks: one thread a rank runs them in issue order -------------------------- */

/* As Horovod's background thread and NCCL's stream: any number of requests may be queued (a
 * model's every gradient tensor), and they run one after another.  A thread per task held a
 * stack per queued request; one runner holds a small record each. */
static void *runner_main(void *arg) {
  mpi_runner *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !q->stopping) pthread_cond_wait(&q->cv, &q->mu);
    rh_task *t = q->head;
    if (!t) break;
    q->head = t->next;
    if (!q->head) q->tail = NULL;
    if (q->stopping) { /* the job ended with it never started: it runs no more */
      t->status = RH_ERR_ABORTED;
      t->done = true;
      continue;
    }
    q->running = true;
    pthread_mutex_unlock(&q->mu);
    rh_status st = t->fn(t->arg);
    pthread_mutex_lock(&q->mu);
    t->status = st;
    t->done = true;
    q->running = false;
    pthread_cond_broadcast(&q->cv);
  }
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

static mpi_runner *runner_of(mpi_rank *rk) {
  if (rk->runner) return rk->runner;
  mpi_runner *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  if (pthread_create(&q->thread, NULL, runner_main, q) != 0) {
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
    return NULL;
  }
  return rk->runner = q;
}

/* At the job's end: the requests a rank function left unwaited that never started are ended
 * (RH_ERR_ABORTED), the one running ends within its own timeout, and the runner is joined and
 * freed, before the job's state it works on goes. */
static void runner_close(mpi_rank *rk) {
  mpi_runner *q = rk->runner;
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->stopping = true;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
  rk->runner = NULL;
}

static rh_status mpi_spawn(rh_ctx *ctx, rh_status (*fn)(void *), void *arg, rh_task **out) {
  mpi_runner *q = runner_of(rank_of(ctx));
  rh_task *t = q ? calloc(1, sizeof *t) : NULL;
  if (!t) return RH_ERR_NOMEM;
  *t = (rh_task){.fn = fn, .arg = arg};
  pthread_mutex_lock(&q->mu);
  if (q->tail) q->tail->next = t;
  else q->head = t;
  q->tail = t;
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  *out = t;
  return RH_OK;
}

static rh_status mpi_join(rh_ctx *ctx, rh_task *t, double timeout) {
  (void)timeout; /* the task's own waits carry the timeout */
  mpi_runner *q = rank_of(ctx)->runner;
  pthread_mutex_lock(&q->mu);
  while (!t->done) pthread_cond_wait(&q->cv, &q->mu);
  pthread_mutex_unlock(&q->mu);
  rh_status st = t->status;
  free(t);
  return st;
}

/* A rank that gives up on its world after a failure says so at once, on its own stderr: on
 * real processes this is the report that comes within the timeout (the job's end may wait for
 * peers that are gone). */
static void mpi_abandon(rh_ctx *ctx) {
  fprintf(stderr, "rehearsal: rank %d, %.3f s into the job: %s\n", ctx->rank, mpi_now(ctx),
          ctx->last_error[0] ? ctx->last_error : "a collective failed");
}

/* The rendezvous of an elastic reset (elastic.c), on the rank's timeline.  A rank that cannot
 * join a new world says why on its stderr, as mpi_abandon does: the driver that would report it
 * may be the one that is gone (the job ending, or this host leaving it, the driver reports). */
static rh_status mpi_rendezvous(rh_ctx *ctx) {
  double since = mpi_now(ctx);
  int rank = ctx->rank;
  rh_status st = mpi__rendezvous(ctx);
  rh__trace_world(ctx, since, st);
  if (st != RH_OK && st != RH_ERR_TOO_FEW && st != RH_ERR_EXCLUDED)
    fprintf(stderr, "rehearsal: rank %d, %.3f s into the job: %s\n", rank, mpi_now(ctx),
            ctx->last_error[0] ? ctx->last_error : rh_status_string(st));
  return st;
}

static const rh_backend_ops mpi_ops = {
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .waitall = mpi_waitall,
    .now = mpi_now,
    .sleep = mpi_sleep,
    .spawn = mpi_spawn,
    .join = mpi_join,
    .audit = mpi_audit,
    .abandon = mpi_abandon,
    .rendezvous = mpi_rendezvous,
    .host_updates = mpi__host_updates,
    .progress = mpi__progress,
#ifdef RH_MPI_GPU
    .name = "nccl",
    .compute = gpu_compute,
    .priced = gpu_priced,
    .allreduce = gpu_allreduce,
    .broadcast = gpu_broadcast,
    .allgatherv = gpu_allgatherv,
    .reduce_scatter = gpu_reduce_scatter,
    .device = &rh_gpu_memory,
#else
    .name = "mpi",
    .compute = mpi_compute,
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .allgatherv = mpi_allgatherv,
    .reduce_scatter = mpi_reduce_scatter,
#endif
};

#ifdef RH_MPI_GPU
/* Pins this rank's GPU by local rank and makes the job's NCCL communicator.  Returns 0, or the
 * launch's exit code: 77 when no rank has a device (as the GPU tests skip), 1 otherwise. */
static int open_gpu(mpi_job *job, const rh_topology *topo, int rank, int size, double timeout) {
  int devices = rh_gpu_device_count(), fewest = devices;
  MPI_Allreduce(&devices, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  char host[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  if (fewest == 0) {
    if (devices == 0) fprintf(stderr, "rehearsal: rank %d: no CUDA device found on %s\n", rank, host);
    return 77;
  }
  int local = topo->local_rank_of[rank], here = topo->node_size[topo->node_of[rank]];
  int bad = here > devices, any = 0;
  if (bad)
    fprintf(stderr, "rehearsal: %s runs %d ranks but has %d CUDA device%s (one rank per GPU)\n",
            host, here, devices, devices == 1 ? "" : "s");
  rh_status st = bad ? RH_ERR_INVALID : rh_gpu_open(local);
  job->device = local;
  int failed = st != RH_OK;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any) return 1;
  return mpi__nccl_open(job, MPI_COMM_WORLD, rank, size, timeout);
}
#endif

/* ---- launch ------------------------------------------------------------------------------- */

/* Which host each process runs on, numbered in order of first appearance.  RH_MPI_GPUS_PER_NODE=k
 * pretends every k consecutive ranks share a host (to rehearse several nodes on one machine). */
static int *place_ranks(int size) {
  int *node_of = calloc((size_t)size, sizeof(int));
  char *names = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
  if (!node_of || !names) {
    free(node_of);
    free(names);
    return NULL;
  }
  char mine[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(mine, &len);
  MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                MPI_COMM_WORLD);
  const char *per = getenv("RH_MPI_GPUS_PER_NODE");
  int k = per ? atoi(per) : 0;
  int nodes = 0;
  for (int r = 0; r < size; r++) {
    if (k > 0) {
      node_of[r] = r / k;
      continue;
    }
    int found = -1;
    for (int q = 0; q < r && found < 0; q++)
      if (strcmp(names + (size_t)q * MPI_MAX_PROCESSOR_NAME, names + (size_t)r * MPI_MAX_PROCESSOR_NAME) == 0)
        found = node_of[q];
    node_of[r] = found >= 0 ? found : nodes++;
  }
  free(names);
  return node_of;
}

/* Says (rank 0, on stderr) where the processes' hosts are not the scenario's nodes: the
 * topology-aware collectives follow the processes, so a run placed otherwise runs other
 * algorithms over other groups, and its numbers need not match the simulator's. */
static void say_placement(const rh_cluster *cl, const int *host_of, int size) {
  if (!cl) return;
  int hosts = 0;
  bool same = true;
  for (int r = 0; r < size; r++) hosts = host_of[r] + 1 > hosts ? host_of[r] + 1 : hosts;
  char got[160] = "", want[160] = "";
  for (int h = 0, r = 0; h < hosts; h++) {
    int k = 0;
    while (r < size && host_of[r] == h) k++, r++;
    int scen = h < cl->nodes + cl->spares ? cl->gpus_per_node[h] : 0;
    same = same && k == scen;
    size_t n = strlen(got);
    if (n < sizeof got - 16) snprintf(got + n, sizeof got - n, "%s%d", h ? ", " : "", k);
  }
  if (same && hosts == cl->nodes) return;
  for (int n = 0; n < cl->nodes; n++) {
    size_t l = strlen(want);
    if (l < sizeof want - 16) snprintf(want + l, sizeof want - l, "%s%d", n ? ", " : "", cl->gpus_per_node[n]);
  }
  fprintf(stderr,
          "rehearsal: note: the %d processes run on %d host%s (%s processes each) where the scenario "
          "has %d node%s (%s GPUs each): the collectives follow the processes, so the results may "
          "differ from the simulator's; on one machine, RH_MPI_GPUS_PER_NODE=k (mpirun -x "
          "RH_MPI_GPUS_PER_NODE) plays nodes of k GPUs\n",
          size, hosts, hosts == 1 ? "" : "s", got, cl->nodes, cl->nodes == 1 ? "" : "s", want);
}

/* The processes an elastic scenario may start with: min_np to max_np (its cluster's GPUs when
 * max_np is not given); a fixed-size one, exactly its cluster's GPUs. */
static bool size_allowed(const rh_launch_config *cfg, int size) {
  int gpus = rh_cluster_size(cfg->cluster);
  if (!cfg->elastic) return size == gpus;
  /* with host discovery the processes of hosts not yet added wait: any number from min_np */
  if (getenv("RH_ELASTIC_STANDBY") && getenv("RH_ELASTIC_DIR")) return size >= cfg->elastic->min_np;
  int most = cfg->elastic->max_np > 0 ? cfg->elastic->max_np : gpus;
  return size >= cfg->elastic->min_np && size <= most;
}

/* The job's end and its failed ranks, waited for as every collective is: a peer that died or
 * hangs must not hang the survivors here.  False when the peers did not answer. */
static bool agree_on_end(mpi_rank *me, double end, int failed, double *last, int *failures) {
  mpi_job *job = me->job;
  double mine[2] = {end, failed}, all[2] = {end, failed};
  double timeout = rh_setting(&me->ctx, RH_SETTING_TIMEOUT);
  MPI_Request req;
  pthread_mutex_lock(&job->lock);
  int err = MPI_Iallreduce(&mine[0], &all[0], 1, MPI_DOUBLE, MPI_MAX, job->comms.end, &req);
  pthread_mutex_unlock(&job->lock);
  bool ok = finish(&me->ctx, err, &req, timeout) == RH_OK;
  if (ok) {
    pthread_mutex_lock(&job->lock);
    err = MPI_Iallreduce(&mine[1], &all[1], 1, MPI_DOUBLE, MPI_SUM, job->comms.end, &req);
    pthread_mutex_unlock(&job->lock);
    ok = finish(&me->ctx, err, &req, timeout) == RH_OK;
  }
  *last = all[0];
  *failures = (int)all[1];
  return ok;
}

/* ---- the timeline ----------------------------------------------------------------------- */

/* Whether rank 0 can write the timeline where it was asked (every rank learns it). */
static bool timeline_path_ok(const char *path, int rank) {
  char err[1200];
  int ok = rank != 0 || rh__timeline_path_ok(path, err, sizeof err);
  if (!ok) fprintf(stderr, "rehearsal: %s\n", err);
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok;
}

/* Gathers `bytes` of every rank of the world to its rank 0, waited for as every collective is
 * (a peer gone must not hang the others).  lens and all: rank 0's, the others' NULL. */
static rh_status gather_text(mpi_rank *me, const char *mine, int bytes, int *lens, char **all) {
  mpi_job *job = me->job;
  rh_ctx *ctx = &me->ctx;
  double timeout = rh_setting(ctx, RH_SETTING_TIMEOUT);
  int n = ctx->world.n, root = ctx->rank == 0;
  MPI_Request req;
  pthread_mutex_lock(&job->lock);
  int err = MPI_Igather(&bytes, 1, MPI_INT, lens, 1, MPI_INT, 0, job->comms.end, &req);
  pthread_mutex_unlock(&job->lock);
  rh_status st = finish(ctx, err, &req, timeout);
  int *displs = root ? calloc((size_t)n, sizeof(int)) : NULL;
  size_t total = 0;
  for (int r = 0; root && displs && r < n; r++) {
    displs[r] = (int)total;
    total += (size_t)lens[r];
  }
  if (root && (!displs || total > 0x7fffffff || !(*all = malloc(total + 1)))) st = RH_ERR_NOMEM;
  /* every rank takes part in the second gather, whatever rank 0 found: none waits alone */
  pthread_mutex_lock(&job->lock);
  err = MPI_Igatherv(mine, bytes, MPI_CHAR, root ? *all : NULL, lens, displs, MPI_CHAR, 0,
                     job->comms.end, &req);
  pthread_mutex_unlock(&job->lock);
  rh_status got = finish(ctx, err, &req, timeout);
  free(displs);
  return st == RH_OK ? got : st;
}

/* The timeline at the end of the launch: rank 0 of the last world writes every rank's events in
 * one file; a rank whose peers did not finish with it writes its own beside it (FILE.rankN).
 * False when rank 0 could not write it. */
static bool write_timeline(mpi_rank *me, rh_timeline *tl, const char *path, bool agreed) {
  size_t len = 0;
  char *part = rh__timeline_part(tl, NULL, NULL, &len);
  if (!part || len > 0x7fffffff) {
    free(part);
    return false;
  }
  bool ok = true;
  if (!agreed) {
    char own[1100];
    snprintf(own, sizeof own, "%s.rank%d", path, me->job->world_rank);
    ok = rh__timeline_write(tl, own, &part, &len, 1) == RH_OK;
    if (ok) fprintf(stderr, "rehearsal: rank %d wrote its own timeline to %s\n", me->ctx.rank, own);
    free(part);
    return ok;
  }
  int n = me->ctx.world.n;
  bool root = me->ctx.rank == 0;
  int *lens = root ? calloc((size_t)n, sizeof(int)) : NULL;
  char *all = NULL;
  rh_status st = root && !lens ? RH_ERR_NOMEM : gather_text(me, part, (int)len, lens, &all);
  if (root && st == RH_OK) {
    char **parts = calloc((size_t)n, sizeof *parts);
    size_t *sizes = calloc((size_t)n, sizeof *sizes);
    st = parts && sizes ? RH_OK : RH_ERR_NOMEM;
    for (int r = 0, off = 0; st == RH_OK && r < n; off += lens[r], r++) {
      parts[r] = all + off;
      sizes[r] = (size_t)lens[r];
    }
    if (st == RH_OK) st = rh__timeline_write(tl, path, parts, sizes, n);
    free(parts);
    free(sizes);
  } else if (root) {
    fprintf(stderr, "rehearsal: the timeline %s: the ranks' events did not all come: %s\n", path,
            rh_status_string(st));
  }
  ok = !root || st == RH_OK;
  free(all);
  free(lens);
  free(part);
  return ok;
}

/* Started by srun without PMIx (--mpi=none, Slurm's default MpiDefault): Open MPI could not learn
 * its rank.  (Under PMIx, or under mpirun whose daemons srun started, PMIx names the process.) */
static bool srun_without_pmix(void) {
  return getenv("SLURM_STEP_ID") && !getenv("PMIX_RANK") && !getenv("PMI_RANK") &&
         !getenv("OMPI_COMM_WORLD_SIZE");
}

/* A fixed-size job whose ranks did not agree on its end: the first process to exit with a
 * failure makes mpirun (or srun --kill-on-bad-exit) kill the others, rank 0 too, and with it
 * the report it is still writing (its stdout, buffered, is lost whole).  So the other ranks
 * give it time: when rank 0 exits, the launcher ends them at once; when rank 0 is the one that
 * hangs, they leave after RH_REPORT_GRACE_S. */
#define RH_REPORT_GRACE_S 10
static void wait_for_the_report(void) {
  struct timespec left = {.tv_sec = RH_REPORT_GRACE_S};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

int rh__launch(const rh_launch_config *cfg, rh_rank_fn fn, void *arg, rh_launch_result *res) {
  int provided = 0, inited = 0;
  MPI_Initialized(&inited);
  if (!inited && srun_without_pmix()) {
    const char *id = getenv("SLURM_PROCID");
    if (!id || strcmp(id, "0") == 0)
      fprintf(stderr, "rehearsal: started by srun without PMIx, so no process can learn its rank: "
                      "srun --mpi=pmix (or MpiDefault=pmix in slurm.conf)\n");
    return 2;
  }
  if (!inited) MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
  else MPI_Query_thread(&provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (res) *res = (rh_launch_result){.rank = rank, .target = mpi_ops.name};
  if (provided < MPI_THREAD_SERIALIZED) {
    if (rank == 0) fprintf(stderr, "rehearsal: this MPI gives no MPI_THREAD_SERIALIZED\n");
    MPI_Finalize();
    return 1;
  }
  if (cfg->cluster && !size_allowed(cfg, size)) {
    int gpus = rh_cluster_size(cfg->cluster);
    if (rank == 0 && cfg->elastic)
      fprintf(stderr,
              "rehearsal: the elastic scenario runs on %d to %d processes but %d were started\n",
              cfg->elastic->min_np, cfg->elastic->max_np > 0 ? cfg->elastic->max_np : gpus, size);
    else if (rank == 0)
      fprintf(stderr,
              "rehearsal: the scenario's cluster has %d GPUs but %d processes were started "
              "(mpirun -np %d)\n", gpus, size, gpus);
    MPI_Finalize();
    return 2;
  }
  if (cfg->timeline && !timeline_path_ok(cfg->timeline, rank)) {
    MPI_Finalize();
    return 2;
  }
  mpi_job job = {.world_rank = rank, .world_size = size, .elastic = cfg->elastic,
                 .elastic_dir = cfg->elastic ? getenv("RH_ELASTIC_DIR") : NULL};
  job.host_of = place_ranks(size);
  job.members = calloc((size_t)size, sizeof(int));
  if (!job.host_of || !job.members || rh_topology_init_map(&job.topo, job.host_of, size) != RH_OK) {
    free(job.host_of);
    free(job.members);
    MPI_Finalize();
    return 1;
  }
  for (int r = 0; r < size; r++) job.members[r] = r;
  if (rank == 0 && !cfg->elastic) say_placement(cfg->cluster, job.host_of, size);
  pthread_mutex_init(&job.lock, NULL);
  mpi__comms_open(&job.comms, MPI_COMM_WORLD);
  MPI_Op_create(half_sum, 1, &job.half_ops[RH_SUM]);
  MPI_Op_create(half_sum, 1, &job.half_ops[RH_AVERAGE]); /* averages reduce as sums */
  MPI_Op_create(half_min, 1, &job.half_ops[RH_MIN]);
  MPI_Op_create(half_max, 1, &job.half_ops[RH_MAX]);
  mpi_rank me = {.job = &job};
  rh_ctx_init(&me.ctx, rank, &job.topo, cfg->settings, cfg->cluster, &mpi_ops, &me);
  me.ctx.elastic = cfg->elastic;
  rh_timeline *timeline = NULL;
  if (cfg->timeline) { /* one recorder: this process's rank */
    timeline = rh__timeline_new(mpi_ops.name, false, size, cfg->timeline_events);
    me.ctx.trace = rh__timeline_add(timeline, &me.ctx, job.host_of[rank], rank,
                                    job.topo.local_rank_of[rank]);
  }
#ifdef RH_MPI_GPU
  int gpu_failed = open_gpu(&job, &job.topo, rank, size, rh_setting(&me.ctx, RH_SETTING_TIMEOUT));
  if (gpu_failed) {
    rh__timeline_free(timeline);
    if (job.nccl) rh_nccl_free(job.nccl);
    rh_gpu_close();
    rh_topology_free(&job.topo);
    free(job.host_of);
    free(job.members);
    MPI_Finalize();
    return gpu_failed;
  }
#endif

  /* one time origin for the job: rank 0's, so that times compare across the processes of a host
   * (and across hosts as far as their clocks agree) */
  MPI_Barrier(MPI_COMM_WORLD);
  job.t0 = mpi__wall();
  MPI_Bcast(&job.t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  /* scripted faults hit processes by their place in the scenario's cluster: its slot numbering */
  if (mpi__faults_open(&job, cfg->faults, cfg->cluster, rank) != RH_OK) {
    rh__timeline_free(timeline);
    rh_topology_free(&job.topo);
    free(job.host_of);
    free(job.members);
    MPI_Finalize();
    return 1;
  }
  /* with host discovery a process waits for the first world that takes it (its host added) */
  if (job.elastic_dir && getenv("RH_ELASTIC_STANDBY")) {
    rh_status st = mpi__standby(&me.ctx);
    if (st != RH_OK) {
      if (st != RH_ERR_EXCLUDED && (rank == 0 || st != RH_ERR_TOO_FEW)) /* said once */
        fprintf(stderr, "rehearsal: process %d: %s\n", rank, me.ctx.last_error);
      mpi__faults_close(&job);
      rh__timeline_free(timeline);
      /* no rank of any world: it reports nothing */
      if (res) *res = (rh_launch_result){.rank = size, .target = mpi_ops.name};
      fflush(NULL);
      return st == RH_ERR_EXCLUDED ? 0 : 1; /* without MPI_Finalize: its peers may have died */
    }
  }
  int result = fn(&me.ctx, arg);
  double last = 0;
  int failures = 0;
  bool agreed = !job.left && agree_on_end(&me, mpi__wall() - job.t0, result != 0, &last, &failures);
  mpi__faults_close(&job);
  runner_close(&me);
  bool timeline_ok = true;
  if (timeline && !job.left) timeline_ok = write_timeline(&me, timeline, cfg->timeline, agreed);
  rh__timeline_free(timeline);
  me.ctx.trace = NULL;
  if (!timeline_ok) failures++;
  if (res)
    *res = (rh_launch_result){.end_time = last, .failed_ranks = failures, .rank = me.ctx.rank,
                              .target = mpi_ops.name, .size = me.ctx.world.n};
  if (!agreed || job.reformed) {
    /* MPI_Finalize waits for every process MPI_COMM_WORLD started, failed ones too: leave
     * without it (under `rehearsal elastic` mpirun lets the others go on; else it ends the job) */
    if (!agreed && !job.left)
      fprintf(stderr, "rehearsal: rank %d: the job's peers did not finish with it; leaving\n", rank);
    fflush(NULL);
    if (!agreed && !job.left && !job.elastic_dir && me.ctx.rank != 0) wait_for_the_report();
    return job.left || !agreed ? 1 : failures ? 1 : 0;
  }

#ifdef RH_MPI_GPU
  rh_nccl_free(job.nccl);
  rh_gpu_close();
#endif
  MPI_Comm *comms[] = {&job.comms.coll, &job.comms.native, &job.comms.neg, &job.comms.check,
                       &job.comms.end};
  for (size_t i = 0; i < sizeof comms / sizeof comms[0]; i++) MPI_Comm_free(comms[i]);
  for (int i = 0; i < RH_OP_COUNT; i++) MPI_Op_free(&job.half_ops[i]);
  pthread_mutex_destroy(&job.lock);
  rh_topology_free(&job.topo);
  free(job.host_of);
  free(job.members);
  MPI_Finalize();
  return failures ? 1 : 0;
}
