/*
 * faults.c: the scenario's scripted faults on real processes.  A process is the GPU of its slot in
 * the scenario's cluster (its MPI_COMM_WORLD rank, numbered node by node), and a fault that hits
 * it is done to it for real: a crash is SIGKILL, a hang SIGSTOP (the process stays, silent), a
 * straggler sleeps its compute 1 / factor times longer for the window.  Triggers are the
 * simulator's: a step (when the process begins it, or enters the phase named by `during` in it,
 * `after` seconds on), or seconds since the job began.  Link faults and random failures need the
 * simulator's network and clock: rank 0 says so, once, and they are left out.
 */
#include "mpi_backend.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

struct mpi_faults {
  const rh_fault *faults; /* the plan's, in scenario order */
  int n;
  bool *mine;   /* it hits this process */
  volatile bool *fired; /* the timer thread fires too */
  volatile double *began; /* stragglers: when the window opened (seconds since the job began; NAN) */
  double t0;     /* the job's time origin (wall clock) */
  pthread_t timer;
  bool timing;
  volatile bool closing;
};

static bool applied(rh_fault_kind k) {
  return k == RH_FAULT_HOST_CRASH || k == RH_FAULT_GPU_CRASH || k == RH_FAULT_HANG ||
         k == RH_FAULT_STRAGGLER;
}

static void fire(mpi_faults *m, int i) {
  const rh_fault *f = &m->faults[i];
  m->fired[i] = true;
  if (f->kind == RH_FAULT_STRAGGLER) {
    m->began[i] = mpi__wall() - m->t0;
    return;
  }
  fflush(NULL); /* what the process printed before it failed */
  raise(f->kind == RH_FAULT_HANG ? SIGSTOP : SIGKILL);
}

/* Fires the time-triggered faults of this process at their seconds since the job began. */
static void *timer_main(void *arg) {
  mpi_faults *m = arg;
  for (;;) {
    int next = -1;
    for (int i = 0; i < m->n; i++)
      if (m->mine[i] && !m->fired[i] && m->faults[i].epoch < 0 &&
          (next < 0 || m->faults[i].at < m->faults[next].at))
        next = i;
    if (next < 0) return NULL;
    while (!m->closing && mpi__wall() - m->t0 < m->faults[next].at) {
      double left = m->faults[next].at - (mpi__wall() - m->t0);
      mpi__sleep(left < 0.1 ? left : 0.1); /* a look at `closing` ten times a second */
    }
    if (m->closing) return NULL;
    fire(m, next);
  }
}

rh_status mpi__faults_open(mpi_job *job, const rh_fault_plan *plan, const rh_cluster *cluster,
                           int slot) {
  job->faults = NULL;
  if (!plan || !cluster) return RH_OK;
  if (job->world_rank == 0) {
    for (int i = 0; i < plan->nfaults; i++)
      if (!applied(plan->faults[i].kind))
        fprintf(stderr, "rehearsal: scenario line %d: a %s cannot be done to real processes "
                        "(the simulator models it); it is left out\n",
                plan->faults[i].line, rh_fault_names[plan->faults[i].kind]);
    if (plan->gpu_mtbf > 0 || plan->node_mtbf > 0)
      fprintf(stderr, "rehearsal: random failures (gpu_mtbf_hours, node_mtbf_hours) are drawn on "
                      "the simulator's clock; real processes see only the scripted ones\n");
  }
  int node = -1, gpu = -1;
  for (int n = 0; n < cluster->nodes + cluster->spares && node < 0; n++) {
    int first = rh_cluster_first_slot(cluster, n);
    if (slot >= first && slot < first + cluster->gpus_per_node[n]) {
      node = n;
      gpu = slot - first;
    }
  }
  mpi_faults *m = calloc(1, sizeof *m);
  int n = plan->nfaults;
  if (!m) return RH_ERR_NOMEM;
  *m = (mpi_faults){.faults = plan->faults, .n = n, .t0 = job->t0,
                    .mine = calloc((size_t)n + 1, sizeof(bool)),
                    .fired = calloc((size_t)n + 1, sizeof(bool)),
                    .began = calloc((size_t)n + 1, sizeof(double))};
  if (!m->mine || !m->fired || !m->began) {
    free(m->mine);
    free((void *)m->fired);
    free((void *)m->began);
    free(m);
    return RH_ERR_NOMEM;
  }
  bool timed = false;
  for (int i = 0; i < n; i++) {
    const rh_fault *f = &plan->faults[i];
    bool whole = f->kind == RH_FAULT_HOST_CRASH || f->gpu < 0;
    m->mine[i] = applied(f->kind) && f->node == node && (whole || f->gpu == gpu);
    m->began[i] = NAN;
    timed = timed || (m->mine[i] && f->epoch < 0);
  }
  job->faults = m;
  if (timed) m->timing = pthread_create(&m->timer, NULL, timer_main, m) == 0;
  return RH_OK;
}

void mpi__faults_close(mpi_job *job) {
  mpi_faults *m = job->faults;
  if (!m) return;
  m->closing = true;
  if (m->timing) pthread_join(m->timer, NULL);
  free(m->mine);
  free((void *)m->fired);
  free((void *)m->began);
  free(m);
  job->faults = NULL;
}

void mpi__progress(rh_ctx *ctx, rh_phase phase) {
  mpi_faults *m = mpi__job_of(ctx)->faults;
  for (int i = 0; m && i < m->n; i++) {
    const rh_fault *f = &m->faults[i];
    if (!m->mine[i] || m->fired[i] || f->epoch < 0 || f->epoch != ctx->epoch || f->step != ctx->step)
      continue;
    if (phase != (f->during == RH_PHASE_NONE ? RH_PHASE_STEP : f->during)) continue;
    if (f->after > 0) mpi__sleep(f->after);
    fire(m, i);
  }
}

double mpi__slowdown(const rh_ctx *ctx) {
  const mpi_faults *m = mpi__job_of(ctx)->faults;
  double slow = 1, now = m ? mpi__wall() - m->t0 : 0;
  for (int i = 0; m && i < m->n; i++) {
    const rh_fault *f = &m->faults[i];
    if (f->kind == RH_FAULT_STRAGGLER && m->mine[i] && !isnan(m->began[i]) &&
        now < m->began[i] + f->duration && f->factor > 0)
      slow /= f->factor;
  }
  return slow;
}
