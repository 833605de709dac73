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
 * (exit 0: done; 3: done in part, the rate without the delay; else not done: said on stderr).
 * The node's first process gives the link back at the window's end and at its own end; one
 * killed before then (a crash of the same node, a hang) leaves it faulted for the site to mend.
 *
 * (tests/netns/net.sh link is one, for hosts in network namespaces: tc tbf or netem on both ends
 * of a veth.)  Without it, and for a GPU's own link, which real processes do not have as a link of
 * their own, rank 0 says the fault is left out.
 *
 * Random failures (gpu_mtbf_hours, node_mtbf_hours) are the simulator's draws on the job's wall
 * clock: every process draws the same sequence from the scenario's seed (splitmix64, as the
 * simulator's injector does), the next failure Exp(rate) after the last over the live GPUs and
 * nodes of its world, and its victim among them, so that all agree on who fails when without a
 * word between them; the victim kills itself (a GPU crash its process, a node crash every process
 * of the node) at its next phase past that time.  With compute slept at the modelled GPU's speed a
 * job's seconds are the simulator's, and the same failures fall on the same GPUs.
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
  /* random failures */
  double gpu_mtbf, node_mtbf; /* seconds; 0: none */
  uint64_t rng;
  double next_random;      /* seconds since the job began; INFINITY: none */
  int self;                /* this process (its MPI_COMM_WORLD rank) */
  int *node_of;            /* each process's node in the scenario */
  bool *dead;              /* each process: a random failure took it */
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
  int rc = system(cmd), code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  if (code == 3) /* the command's word for a part done: the rate without the delay */
    fprintf(stderr, "rehearsal: scenario line %d: the %s of node %d's link was done in part: `%s` "
                    "exited with 3\n", f->line, rh_fault_names[f->kind], f->node, cmd);
  else if (rc != 0)
    fprintf(stderr, "rehearsal: scenario line %d: the %s of node %d's link was not done: `%s` "
                    "exited with %d\n", f->line, rh_fault_names[f->kind], f->node, cmd, code);
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

/* ---- random failures ------------------------------------------------------------------------ */

static double uniform(uint64_t *s) { return rh__uniform(s); } /* the simulator's stream */

/* The live processes of the current world in rank order into live[] (their count), and the first
 * of each run of one node's into first[] (*nodes: how many), as the simulator counts them. */
static int live_members(const mpi_faults *m, const mpi_job *job, int n, int *live, int *first,
                        int *nodes) {
  int k = 0;
  *nodes = 0;
  for (int r = 0; r < n; r++) {
    int p = job->members[r];
    if (m->dead[p]) continue;
    if (k == 0 || m->node_of[p] != m->node_of[live[k - 1]]) first[(*nodes)++] = p;
    live[k++] = p;
  }
  return k;
}

/* The failures due by now, each drawn as the simulator draws it; this process dies at its own. */
static void random_failures(mpi_faults *m, const rh_ctx *ctx) {
  const mpi_job *job = mpi__job_of(ctx);
  double now = mpi__wall() - m->t0;
  int n = ctx->world.n;
  int *live = calloc(2 * (size_t)n + 2, sizeof(int)), *first = live ? live + n + 1 : NULL;
  while (live && now >= m->next_random) {
    int nodes, gpus = live_members(m, job, n, live, first, &nodes);
    double gpu_part = m->gpu_mtbf > 0 ? gpus / m->gpu_mtbf : 0;
    double rate = gpu_part + (m->node_mtbf > 0 ? nodes / m->node_mtbf : 0);
    if (rate <= 0) {
      m->next_random = INFINITY;
      break;
    }
    double u = uniform(&m->rng) * rate, at = m->next_random;
    int victim = -1, node = -1;
    if (u < gpu_part) {
      victim = live[(int)fmin(gpus - 1, floor(u / gpu_part * gpus))];
      m->dead[victim] = true;
    } else {
      node = m->node_of[first[(int)fmin(nodes - 1, floor((u - gpu_part) / (rate - gpu_part) * nodes))]];
      for (int i = 0; i < gpus; i++) m->dead[live[i]] = m->dead[live[i]] || m->node_of[live[i]] == node;
    }
    if (victim == m->self || (node >= 0 && node == m->node_of[m->self])) {
      fprintf(stderr, "rehearsal: rank %d (node %d), %.3f s into the job: a random %s drawn for "
                      "%.3f s (%s); the process is killed\n", ctx->rank, m->node_of[m->self], now,
              node >= 0 ? "host_crash" : "gpu_crash", at,
              node >= 0 ? "node_mtbf_hours" : "gpu_mtbf_hours");
      fflush(NULL);
      raise(SIGKILL);
    }
    /* the next, over the GPUs and nodes left, from the failure's time (the simulator's) */
    gpus = live_members(m, job, n, live, first, &nodes);
    rate = (m->gpu_mtbf > 0 ? gpus / m->gpu_mtbf : 0) + (m->node_mtbf > 0 ? nodes / m->node_mtbf : 0);
    m->next_random = rate > 0 ? at - log(1 - uniform(&m->rng)) / rate : INFINITY;
  }
  free(live);
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
  }
  /* each process's node: the cluster's slots, node by node (spares last) */
  int *node_of = calloc((size_t)job->world_size + 1, sizeof(int));
  if (!node_of) return RH_ERR_NOMEM;
  for (int p = 0; p < job->world_size; p++) node_of[p] = -1;
  for (int k = 0, p = 0; k < cluster->nodes + cluster->spares; k++)
    for (int g = 0; g < cluster->gpus_per_node[k] && p < job->world_size; g++) node_of[p++] = k;
  int node = node_of[slot], gpu = node >= 0 ? slot - rh_cluster_first_slot(cluster, node) : -1;
  mpi_faults *m = calloc(1, sizeof *m);
  int n = plan->nfaults;
  if (!m) {
    free(node_of);
    return RH_ERR_NOMEM;
  }
  *m = (mpi_faults){.faults = plan->faults, .n = n, .t0 = job->t0,
                    .mine = calloc((size_t)n + 1, sizeof(bool)),
                    .fired = calloc((size_t)n + 1, sizeof(bool)),
                    .began = calloc((size_t)n + 1, sizeof(double)),
                    .restored = calloc((size_t)n + 1, sizeof(bool)),
                    .link_command = link_command,
                    .link_rate = 8 * cluster->nic_bw * (cluster->nics_per_node > 0
                                                            ? cluster->nics_per_node : 1)};
  m->gpu_mtbf = plan->gpu_mtbf;
  m->node_mtbf = plan->node_mtbf;
  /* a process that joins a grown job has not drawn the failures before it: the processes would
   * no longer agree on who fails */
  if ((m->gpu_mtbf > 0 || m->node_mtbf > 0) && getenv("RH_ELASTIC_STANDBY")) {
    if (job->world_rank == 0)
      fprintf(stderr, "rehearsal: random failures (gpu_mtbf_hours, node_mtbf_hours) are not drawn "
                      "on real processes of a job that grows by host discovery (the simulator "
                      "draws them); they are left out\n");
    m->gpu_mtbf = m->node_mtbf = 0;
  }
  m->rng = plan->seed;
  m->next_random = INFINITY;
  m->self = slot;
  m->node_of = node_of;
  m->dead = calloc((size_t)job->world_size + 1, sizeof(bool));
  if (!m->mine || !m->fired || !m->began || !m->restored || !m->node_of || !m->dead) {
    free(m->node_of);
    free(m->dead);
    free(m->mine);
    free((void *)m->fired);
    free((void *)m->began);
    free((void *)m->restored);
    free(m);
    return RH_ERR_NOMEM;
  }
  /* the first random failure over every process of the job, from its start */
  int nodes = 0;
  for (int p = 0; p < job->world_size; p++) nodes += p == 0 || m->node_of[p] != m->node_of[p - 1];
  double rate = (m->gpu_mtbf > 0 ? job->world_size / m->gpu_mtbf : 0) +
                (m->node_mtbf > 0 ? nodes / m->node_mtbf : 0);
  if (rate > 0) m->next_random = -log(1 - uniform(&m->rng)) / rate;
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
  free(m->node_of);
  free(m->dead);
  free(m);
  job->faults = NULL;
}

void mpi__progress(rh_ctx *ctx, rh_phase phase) {
  mpi_faults *m = mpi__job_of(ctx)->faults;
  if (m && isfinite(m->next_random)) random_failures(m, ctx);
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
