/*
 * faults.c: the scenario's scripted faults on real processes.  A process is the GPU of its slot in
 * the scenario's cluster (its MPI_COMM_WORLD rank, numbered node by node), and a fault that hits
 * it is done to it for real: a crash is SIGKILL, a hang SIGSTOP (the process stays, silent), a
 * straggler sleeps its compute 1 / factor times longer for the window.  Triggers are the
 * simulator's: a step (when the process begins it, or enters the phase named by `during` in it,
 * `after` seconds on), or seconds since the job began.
 *
 * A fault of a node's uplink (link_down, link_degraded with `link: uplink`) is done to the real
 * link by the command RH_LINK_COMMAND names, run by the node's first process:
 *
 *   $RH_LINK_COMMAND NODE down | NODE up                      the link carries nothing, again
 *   $RH_LINK_COMMAND NODE degrade RATE_BIT_S EXTRA_LATENCY_S  shaped: the scenario's NIC bandwidth
 *                                                             x factor (all the node's NICs), and
 *                                                             the extra one-way latency
 *   $RH_LINK_COMMAND NODE restore                             as it was
 *
 * (tests/netns/net.sh link is one, for hosts in network namespaces: tc tbf or netem on both ends
 * of a veth.)  Without it, and for a GPU's own link, which real processes do not have as a link of
 * their own, rank 0 says the fault is left out.  Random failures from an MTBF need the simulator's
 * clock: rank 0 says so, once, and they are left out.
 */
#include "mpi_backend.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

struct mpi_faults {
  const rh_fault *faults; /* the plan's, in scenario order */
  int n;
  bool *mine;   /* it hits this process */
  volatile bool *fired; /* the timer thread fires too */
  volatile double *began; /* stragglers, links: when the window opened (seconds since the job
                           * began; NAN) */
  volatile bool *restored; /* links: the window closed and the link is as it was */
  const char *link_command; /* RH_LINK_COMMAND (NULL: none) */
  double link_rate;        /* the node's NICs together, bits per second */
  double t0;     /* the job's time origin (wall clock) */
  pthread_t timer;
  bool timing;
  volatile bool closing;
};

static bool link_fault(const rh_fault *f) {
  return f->kind == RH_FAULT_LINK_DOWN || f->kind == RH_FAULT_LINK_DEGRADED;
}

/* Whether the fault is done to real processes (link faults: a node's uplink, with a command). */
static bool applied(const rh_fault *f, const char *link_command) {
  rh_fault_kind k = f->kind;
  if (link_fault(f)) return f->uplink && link_command;
  return k == RH_FAULT_HOST_CRASH || k == RH_FAULT_GPU_CRASH || k == RH_FAULT_HANG ||
         k == RH_FAULT_STRAGGLER;
}

/* Runs RH_LINK_COMMAND with the words of fault f on its node; says on stderr when it fails. */
static void run_link_command(const mpi_faults *m, const rh_fault *f, const char *what) {
  char cmd[2048];
  if (strcmp(what, "degrade") == 0)
    snprintf(cmd, sizeof cmd, "%s %d degrade %.0fbit %.9gs", m->link_command, f->node,
             m->link_rate * f->factor, f->extra_latency);
  else
    snprintf(cmd, sizeof cmd, "%s %d %s", m->link_command, f->node, what);
  fflush(NULL);
  int rc = system(cmd);
  if (rc != 0)
    fprintf(stderr, "rehearsal: scenario line %d: the %s of node %d's link was not done: `%s` "
                    "exited with %d\n", f->line, rh_fault_names[f->kind], f->node, cmd,
            WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
}

static void fire(mpi_faults *m, int i) {
  const rh_fault *f = &m->faults[i];
  m->fired[i] = true;
  if (f->kind == RH_FAULT_STRAGGLER) {
    m->began[i] = mpi__wall() - m->t0;
    return;
  }
  if (link_fault(f)) {
    run_link_command(m, f, f->kind == RH_FAULT_LINK_DOWN ? "down" : "degrade");
    m->began[i] = mpi__wall() - m->t0;
    return;
  }
  fflush(NULL); /* what the process printed before it failed */
  raise(f->kind == RH_FAULT_HANG ? SIGSTOP : SIGKILL);
}

/* The link of fault i as it was, at the end of its window. */
static void restore(mpi_faults *m, int i) {
  const rh_fault *f = &m->faults[i];
  run_link_command(m, f, f->kind == RH_FAULT_LINK_DOWN ? "up" : "restore");
  m->restored[i] = true;
}

/* Fires the time-triggered faults of this process at their seconds since the job began, and ends
 * the windows of its link faults. */
static void *timer_main(void *arg) {
  mpi_faults *m = arg;
  for (;;) {
    int next = -1;
    double when = INFINITY;
    bool pending = false; /* a link fault of a step trigger may still fire */
    for (int i = 0; i < m->n; i++) {
      const rh_fault *f = &m->faults[i];
      if (!m->mine[i]) continue;
      double t = INFINITY;
      if (!m->fired[i] && f->epoch < 0) t = f->at;
      else if (link_fault(f) && m->fired[i] && !m->restored[i] && isfinite(f->duration))
        t = m->began[i] + f->duration;
      pending = pending || (link_fault(f) && !m->fired[i] && f->epoch >= 0 && isfinite(f->duration));
      if (t < when) {
        when = t;
        next = i;
      }
    }
    if (next < 0 && !pending) return NULL;
    while (!m->closing && (next < 0 || mpi__wall() - m->t0 < when)) {
      double left = next < 0 ? 0.1 : when - (mpi__wall() - m->t0);
      mpi__sleep(left < 0.1 ? left : 0.1); /* a look at `closing` ten times a second */
      if (next < 0) break; /* a step trigger may have fired a link fault: look again */
    }
    if (m->closing) return NULL;
    if (next < 0) continue;
    if (m->fired[next]) restore(m, next);
    else fire(m, next);
  }
}

rh_status mpi__faults_open(mpi_job *job, const rh_fault_plan *plan, const rh_cluster *cluster,
                           int slot) {
  job->faults = NULL;
  if (!plan || !cluster) return RH_OK;
  const char *link_command = getenv("RH_LINK_COMMAND");
  if (link_command && !*link_command) link_command = NULL;
  if (job->world_rank == 0) {
    for (int i = 0; i < plan->nfaults; i++) {
      const rh_fault *f = &plan->faults[i];
      if (applied(f, link_command)) continue;
      if (link_fault(f) && f->uplink)
        fprintf(stderr, "rehearsal: scenario line %d: a %s of a node's link needs a command that "
                        "does it (RH_LINK_COMMAND; tests/netns/net.sh link for hosts in network "
                        "namespaces); it is left out\n", f->line, rh_fault_names[f->kind]);
      else if (link_fault(f))
        fprintf(stderr, "rehearsal: scenario line %d: a %s of a GPU's own link cannot be done to "
                        "real processes (the simulator models it); it is left out\n", f->line,
                rh_fault_names[f->kind]);
      else
        fprintf(stderr, "rehearsal: scenario line %d: a %s cannot be done to real processes "
                        "(the simulator models it); it is left out\n",
                f->line, rh_fault_names[f->kind]);
    }
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
                    .began = calloc((size_t)n + 1, sizeof(double)),
                    .restored = calloc((size_t)n + 1, sizeof(bool)),
                    .link_command = link_command,
                    .link_rate = 8 * cluster->nic_bw * (cluster->nics_per_node > 0
                                                            ? cluster->nics_per_node : 1)};
  if (!m->mine || !m->fired || !m->began || !m->restored) {
    free(m->mine);
    free((void *)m->fired);
    free((void *)m->began);
    free((void *)m->restored);
    free(m);
    return RH_ERR_NOMEM;
  }
  bool timed = false;
  for (int i = 0; i < n; i++) {
    const rh_fault *f = &plan->faults[i];
    /* a node's link is its first process's to fault */
    bool whole = f->kind == RH_FAULT_HOST_CRASH || f->gpu < 0 || link_fault(f);
    m->mine[i] = applied(f, link_command) && f->node == node &&
                 (whole || f->gpu == gpu) && (!link_fault(f) || gpu == 0);
    m->began[i] = NAN;
    timed = timed || (m->mine[i] && (f->epoch < 0 || link_fault(f)));
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
  /* a link left faulted past the job (its window outlasted it, or it was for good) is given
   * back: the next job on these hosts starts from the link as it was */
  for (int i = 0; i < m->n; i++)
    if (m->mine[i] && link_fault(&m->faults[i]) && m->fired[i] && !m->restored[i]) restore(m, i);
  free(m->mine);
  free((void *)m->fired);
  free((void *)m->began);
  free((void *)m->restored);
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
