/*
 * faults.c: the injector, a daemon actor on the launcher host that applies a scenario's faults
 * through SimGrid's own means:
 *
 *   host_crash      every GPU host of the node turned off (its workers' actors die with it)
 *   gpu_crash       the GPU's host turned off
 *   hang            the GPU's actors suspended: alive, answering nothing
 *   link_down       the link's bandwidth set to almost nothing, restored when the window ends
 *   link_degraded   bandwidth times factor, latency plus extra, for the window
 *   straggler       the host's pstate set to the one at factor of its speed, for the window
 *
 * A fault fires at a simulated time, or when rank 0 begins a step, optionally at the first
 * allreduce, broadcast, commit, sync or rendezvous after that, and `after` seconds later.  Random
 * failures come from the MTBF of a GPU and of a node: the next one after an exponential time at
 * the total rate of the job's current GPUs and nodes, drawn from the scenario's seed.
 */
#include "platform.h"
#include "sim.h"
#include "zone.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How a scripted fault stands. */
typedef enum { ARM_WAIT, ARM_PHASE, ARM_DUE, ARM_DONE } arm_state;

typedef struct armed {
  arm_state state;
  double due;       /* ARM_DUE: when it takes effect */
  double heal_at;   /* after it took effect: when its window ends (INFINITY: never) */
  bool active;      /* a window fault in force */
} armed;

/* A link whose bandwidth and latency the faults change, with what the platform gave it. */
typedef struct tracked_link {
  sg_link_t link;
  double bw, lat;
} tracked_link;

struct sim_injector {
  sg_sem_t wake;
  armed *armed;            /* by scripted fault */
  uint64_t rng;
  double next_random;      /* INFINITY: none */
  /* random failures drawn, with the state of their windows (they have none: crashes) */
};

static double now(void) { return simgrid_get_clock(); }

static double uniform(uint64_t *s) { return rh__uniform(s); }

/* ---- the links and hosts a fault touches ---------------------------------------------------- */

/* The directed links of a fault's link (at most FAULT_LINKS), down then up as SimGrid lists them:
 * a GPU's private link, or a node's port to the network, which under the rail fabric is each of
 * its NICs (the names zone.cpp gives them); returns how many. */
enum { FAULT_LINKS = 2 * 64 };
static int fault_links(const sim_job *job, const rh_fault *f, sg_link_t *out) {
  int n = 0, rails = f->uplink ? rh_fabric_rails(job->cluster) : 1;
  for (int r = 0; r < rails && n + 2 <= FAULT_LINKS; r++) {
    char name[64];
    int len = !f->uplink ? snprintf(name, sizeof name, "node%d_link_%d", f->node,
                                    rh_cluster_first_slot(job->cluster, f->node) + f->gpu)
              : rails == 1 ? snprintf(name, sizeof name, "node%d-uplink", f->node)
                           : snprintf(name, sizeof name, "node%d-nic%d", f->node, r);
    for (int k = 0; k < 2; k++) {
      snprintf(name + len, sizeof name - (size_t)len, k ? "_UP" : "_DOWN");
      sg_link_t l = rh__zone_link(name);
      if (l) out[n++] = l;
    }
  }
  return n;
}

/* The GPU slots a fault touches: one, or every GPU of its node. */
static int fault_slots(const sim_job *job, const rh_fault *f, int *first) {
  *first = rh_cluster_first_slot(job->cluster, f->node) + (f->gpu >= 0 ? f->gpu : 0);
  return f->gpu >= 0 ? 1 : job->cluster->gpus_per_node[f->node];
}

static bool window_kind(rh_fault_kind k) {
  return k == RH_FAULT_LINK_DOWN || k == RH_FAULT_LINK_DEGRADED || k == RH_FAULT_STRAGGLER;
}

/* Link state: the platform's figures times every window fault in force on it. */
static void set_link(sim_job *job, sg_link_t link) {
  const rh_fault_plan *plan = job->faults;
  const sim_injector *in = job->injector;
  double bw = 0, lat = 0;
  /* the platform's figures are kept in the link's data the first time a fault touches it */
  tracked_link *t = sg_link_get_data(link);
  if (!t) {
    t = calloc(1, sizeof *t);
    if (!t) return;
    t->link = link;
    t->bw = sg_link_get_bandwidth(link);
    t->lat = sg_link_get_latency(link);
    sg_link_set_data(link, t);
  }
  bw = t->bw;
  lat = t->lat;
  for (int i = 0; i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    if (!in->armed[i].active || (f->kind != RH_FAULT_LINK_DOWN && f->kind != RH_FAULT_LINK_DEGRADED))
      continue;
    sg_link_t links[FAULT_LINKS];
    int n = fault_links(job, f, links);
    bool mine = false;
    for (int k = 0; k < n; k++) mine = mine || links[k] == link;
    if (!mine) continue;
    /* a link down stalls its flows and loses nothing; a degraded one's extra latency is paid
     * by the senders of the messages that cross it (sim__injector_extra_latency): SimGrid 3.32
     * leaves a message stuck for good when a link's latency is lowered during its latency */
    if (f->kind == RH_FAULT_LINK_DOWN) bw = 1e-9;
    else bw *= f->factor;
  }
  sg_link_set_bandwidth(link, bw);
  (void)lat;
}

double sim__injector_extra_latency(const sim_job *job, int from, int to) {
  const rh_fault_plan *plan = job->faults;
  const sim_injector *in = job->injector;
  if (!plan || !in) return 0;
  int a = job->node_of_slot[from], b = job->node_of_slot[to];
  double extra = 0;
  for (int i = 0; i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    if (!in->armed[i].active || f->kind != RH_FAULT_LINK_DEGRADED) continue;
    int gpu_slot = f->uplink ? -1 : rh_cluster_first_slot(job->cluster, f->node) + f->gpu;
    bool crosses = f->uplink ? a != b && (f->node == a || f->node == b)
                             : gpu_slot == from || gpu_slot == to;
    if (crosses) extra += f->extra_latency;
  }
  return extra;
}

/* Host speed: the slowest straggler in force on it, or full speed. */
static void set_speed(sim_job *job, int slot) {
  const rh_fault_plan *plan = job->faults;
  double slowest = 1;
  for (int i = 0; i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    if (!job->injector->armed[i].active || f->kind != RH_FAULT_STRAGGLER) continue;
    int first, n = fault_slots(job, f, &first);
    if (slot >= first && slot < first + n && f->factor < slowest) slowest = f->factor;
  }
  int pstate = slowest < 1 ? rh_sim_straggler_pstate(plan, slowest) : 0;
  sg_host_set_pstate(job->hosts[slot], (unsigned long)pstate);
}

bool sim__injector_link_down(const sim_job *job, int slot) {
  double factor, extra;
  return !sim__injector_links(job, &slot, 1, job->nnodes > 1, &factor, &extra);
}

bool sim__injector_links(const sim_job *job, const int *slots, int n, bool across,
                         double *factor, double *extra) {
  const rh_fault_plan *plan = job->faults;
  *factor = 1;
  *extra = 0;
  if (!plan || !job->injector) return true;
  bool up = true;
  for (int i = 0; i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    if (!job->injector->armed[i].active ||
        (f->kind != RH_FAULT_LINK_DOWN && f->kind != RH_FAULT_LINK_DEGRADED))
      continue;
    bool on_path = false;
    for (int k = 0; k < n && !on_path; k++) {
      int node = job->node_of_slot[slots[k]];
      on_path = f->uplink ? across && f->node == node
                          : rh_cluster_first_slot(job->cluster, f->node) + f->gpu == slots[k];
    }
    if (!on_path) continue;
    if (f->kind == RH_FAULT_LINK_DOWN) up = false;
    else {
      if (f->factor < *factor) *factor = f->factor;
      if (f->extra_latency > *extra) *extra = f->extra_latency;
    }
  }
  return up;
}

/* ---- applying a fault ------------------------------------------------------------------------ */

static void log_fault(sim_job *job, rh_event_kind kind, const rh_fault *f, int index) {
  const sim_world *w = job->world;
  rh_event e = {.kind = kind, .time = now(), .generation = w ? w->generation : 0, .rank = -1,
                .node = f->node, .gpu = f->gpu, .fault = index, .status = RH_OK, .epoch = -1,
                .step = -1, .a = f->factor};
  /* where the job was: rank 0's last step */
  if (w && w->members[0]) {
    e.epoch = w->members[0]->ctx.epoch;
    e.step = w->members[0]->ctx.step;
  }
  snprintf(e.text, sizeof e.text, "%s", rh_fault_names[f->kind]);
  rh__log(job->log, &e);
}

static void crash(sim_job *job, int first, int n) {
  job->losses++;
  for (int s = first; s < first + n; s++) sg_host_turn_off(job->hosts[s]);
  for (int s = first; s < first + n; s++) {
    sim_worker *wk = job->slot_worker[s];
    if (wk && !wk->done) job->worker_died(job, wk);
  }
}

static void hang(sim_job *job, int slot) {
  size_t n = sg_actor_count();
  sg_actor_t *all = sg_actor_list();
  for (size_t i = 0; all && i < n; i++)
    if (sg_actor_get_host(all[i]) == job->hosts[slot]) sg_actor_suspend(all[i]);
  free(all);
  sim_worker *wk = job->slot_worker[slot];
  if (wk && !wk->done) wk->hung = true;
  job->poke(job);
}

/* The fault `f` (scripted fault `index`, or a random one: index < -1) takes effect. */
static void apply(sim_job *job, const rh_fault *f, int index) {
  int first, n = fault_slots(job, f, &first);
  job->changes++;
  log_fault(job, RH_EV_FAULT, f, index);
  switch (f->kind) {
  case RH_FAULT_HOST_CRASH:
  case RH_FAULT_GPU_CRASH: crash(job, first, n); break;
  case RH_FAULT_HANG:
    for (int s = first; s < first + n; s++) hang(job, s);
    break;
  case RH_FAULT_LINK_DOWN:
  case RH_FAULT_LINK_DEGRADED: {
    sg_link_t links[FAULT_LINKS];
    int k = fault_links(job, f, links);
    for (int i = 0; i < k; i++) set_link(job, links[i]);
    job->poke(job);
    break;
  }
  case RH_FAULT_STRAGGLER:
    for (int s = first; s < first + n; s++) set_speed(job, s);
    break;
  default: break;
  }
}

static void heal(sim_job *job, int index) {
  const rh_fault *f = &job->faults->faults[index];
  job->changes++;
  job->injector->armed[index].active = false;
  int first, n = fault_slots(job, f, &first);
  if (f->kind == RH_FAULT_STRAGGLER) {
    for (int s = first; s < first + n; s++) set_speed(job, s);
  } else {
    sg_link_t links[FAULT_LINKS];
    int k = fault_links(job, f, links);
    for (int i = 0; i < k; i++) set_link(job, links[i]);
    job->poke(job);
  }
  log_fault(job, RH_EV_HEALED, f, index);
}

/* ---- random failures ------------------------------------------------------------------------ */

/* The live members of the current world (ranks into out), and how many distinct nodes they
 * are on (first rank of each into first_of_node). */
static int live_members(const sim_job *job, int *out, int *first_of_node, int *nodes) {
  const sim_world *w = job->world;
  int n = 0;
  *nodes = 0;
  for (int r = 0; w && r < w->topo.size; r++) {
    if (sim__member_dead(w, r) || w->members[r]->done || w->members[r]->hung) continue;
    if (n == 0 || job->node_of_slot[w->slots[r]] != job->node_of_slot[w->slots[out[n - 1]]])
      first_of_node[(*nodes)++] = r;
    out[n++] = r;
  }
  return n;
}

/* The rate of random failures over the live GPUs and nodes of the job's world, per second. */
static double random_rate(const sim_job *job, int *gpus, int *nodes) {
  const rh_fault_plan *p = job->faults;
  const sim_world *w = job->world;
  int *ranks = w ? calloc((size_t)w->topo.size * 2, sizeof(int)) : NULL;
  *gpus = ranks ? live_members(job, ranks, ranks + w->topo.size, nodes) : 0;
  if (!ranks) *nodes = 0;
  free(ranks);
  double rate = 0;
  if (p->gpu_mtbf > 0) rate += *gpus / p->gpu_mtbf;
  if (p->node_mtbf > 0) rate += *nodes / p->node_mtbf;
  return rate;
}

static void draw_next(sim_job *job) {
  sim_injector *in = job->injector;
  int gpus, nodes;
  double rate = random_rate(job, &gpus, &nodes);
  in->next_random = rate > 0 ? now() - log(1 - uniform(&in->rng)) / rate : INFINITY;
}

static void random_failure(sim_job *job) {
  sim_injector *in = job->injector;
  const rh_fault_plan *p = job->faults;
  const sim_world *w = job->world;
  int *ranks = calloc((size_t)w->topo.size * 2 + 1, sizeof(int)), nodes = 0;
  int gpus = ranks ? live_members(job, ranks, ranks + w->topo.size, &nodes) : 0;
  double gpu_part = p->gpu_mtbf > 0 ? gpus / p->gpu_mtbf : 0;
  double rate = gpu_part + (p->node_mtbf > 0 ? nodes / p->node_mtbf : 0);
  double u = uniform(&in->rng) * rate;
  rh_fault f = {.at = now(), .epoch = -1, .duration = INFINITY, .factor = 1, .gpu = -1};
  if (rate <= 0) {
    free(ranks);
    return;
  }
  if (u < gpu_part) {
    int slot = w->slots[ranks[(int)fmin(gpus - 1, floor(u / gpu_part * gpus))]];
    f.kind = RH_FAULT_GPU_CRASH;
    f.node = job->node_of_slot[slot];
    f.gpu = slot - rh_cluster_first_slot(job->cluster, f.node);
  } else {
    int k = (int)fmin(nodes - 1, floor((u - gpu_part) / (rate - gpu_part) * nodes));
    f.kind = RH_FAULT_HOST_CRASH;
    f.node = job->node_of_slot[w->slots[ranks[w->topo.size + k]]];
  }
  free(ranks);
  rh_joblog *log = job->log;
  if (log->nrandom == log->caprandom) {
    size_t cap = log->caprandom ? 2 * log->caprandom : 16;
    rh_fault *grown = realloc(log->random, cap * sizeof *grown);
    if (!grown) return;
    log->random = grown;
    log->caprandom = cap;
  }
  log->random[log->nrandom] = f;
  apply(job, &f, -2 - (int)log->nrandom++);
}

/* ---- triggers -------------------------------------------------------------------------------- */

void sim__injector_progress(sim_job *job, const rh_ctx *ctx, rh_phase phase) {
  sim_injector *in = job->injector;
  const rh_fault_plan *plan = job->faults;
  if (!in || !plan || !job->world || ctx->rank != 0 || ctx->generation != job->world->generation)
    return;
  bool poke = false;
  for (int i = 0; i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    armed *a = &in->armed[i];
    if (a->state == ARM_WAIT && phase == RH_PHASE_STEP && f->epoch >= 0 && f->epoch == ctx->epoch &&
        f->step == ctx->step) {
      a->state = f->during != RH_PHASE_NONE ? ARM_PHASE : ARM_DUE;
      if (a->state == ARM_DUE) a->due = now() + f->after;
      /* a step trigger that also waits for a step waits for the next one */
      if (f->during == RH_PHASE_STEP) continue;
    }
    if (a->state == ARM_PHASE && f->during == phase) {
      a->state = ARM_DUE;
      a->due = now() + f->after;
    }
    poke = poke || a->state == ARM_DUE;
  }
  if (poke) sg_sem_release(in->wake);
}

static double next_due(const sim_job *job) {
  const sim_injector *in = job->injector;
  double next = in->next_random;
  for (int i = 0; i < job->faults->nfaults; i++) {
    const armed *a = &in->armed[i];
    const rh_fault *f = &job->faults->faults[i];
    if (a->state == ARM_WAIT && f->epoch < 0 && f->at >= 0) next = fmin(next, f->at);
    if (a->state == ARM_DUE) next = fmin(next, a->due);
    if (a->active) next = fmin(next, a->heal_at);
  }
  return next;
}

static void injector_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sim_job *job = sg_actor_self_get_data();
  sim_injector *in = job->injector;
  const rh_fault_plan *plan = job->faults;
  sg_actor_daemonize(sg_actor_self());
  while (!job->world) sg_actor_yield(); /* the driver launches the job first */
  draw_next(job);
  for (;;) {
    double next = next_due(job);
    if (isinf(next)) sg_sem_acquire(in->wake);
    else if (next > now()) sg_sem_acquire_timeout(in->wake, next - now());
    /* time-triggered faults become due, or wait for their phase */
    for (int i = 0; i < plan->nfaults; i++) {
      const rh_fault *f = &plan->faults[i];
      armed *a = &in->armed[i];
      if (a->state == ARM_WAIT && f->epoch < 0 && f->at >= 0 && f->at <= now()) {
        a->state = f->during != RH_PHASE_NONE ? ARM_PHASE : ARM_DUE;
        a->due = f->at + f->after;
      }
    }
    for (int i = 0; i < plan->nfaults; i++) { /* windows that end */
      armed *a = &in->armed[i];
      if (a->active && a->heal_at <= now()) heal(job, i);
    }
    for (int i = 0; i < plan->nfaults; i++) { /* in scenario order */
      armed *a = &in->armed[i];
      if (a->state != ARM_DUE || a->due > now()) continue;
      const rh_fault *f = &plan->faults[i];
      a->state = ARM_DONE;
      if (window_kind(f->kind)) {
        a->active = true;
        a->heal_at = now() + f->duration;
      }
      apply(job, f, i);
    }
    if (in->next_random <= now()) {
      random_failure(job);
      draw_next(job);
    }
  }
}

rh_status sim__injector_start(sim_job *job) {
  const rh_fault_plan *plan = job->faults;
  if (!plan || (plan->nfaults == 0 && plan->gpu_mtbf <= 0 && plan->node_mtbf <= 0)) return RH_OK;
  sim_injector *in = calloc(1, sizeof *in);
  if (!in) return RH_ERR_NOMEM;
  job->injector = in;
  in->wake = sg_sem_init(0);
  in->rng = plan->seed;
  in->next_random = INFINITY;
  in->armed = calloc((size_t)(plan->nfaults ? plan->nfaults : 1), sizeof *in->armed);
  if (!in->armed) return RH_ERR_NOMEM;
  for (int i = 0; i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    /* a phase with neither a time nor a step: from the start */
    if (f->at < 0 && f->epoch < 0) in->armed[i].state = f->during != RH_PHASE_NONE ? ARM_PHASE : ARM_DUE;
    in->armed[i].due = f->after;
  }
  sg_actor_t a = sg_actor_init("injector", sg_host_by_name("launcher"));
  sg_actor_set_data(a, job);
  sg_actor_start(a, injector_main, 0, NULL);
  return RH_OK;
}

double sim__injector_next(const sim_job *job, int epoch, long first, long *steps, bool *phase) {
  const sim_injector *in = job->injector;
  *phase = false;
  if (!in) return INFINITY;
  for (int i = 0; i < job->faults->nfaults; i++) {
    const rh_fault *f = &job->faults->faults[i];
    const armed *a = &in->armed[i];
    if (a->state == ARM_PHASE) *phase = true;
    if (a->state == ARM_WAIT && f->epoch == epoch && f->step >= first && f->step - first < *steps)
      *steps = f->step - first;
  }
  return next_due(job);
}

bool sim__injector_quiet(const sim_job *job, double until) {
  const sim_injector *in = job->injector;
  if (!in) return true;
  for (int i = 0; i < job->faults->nfaults; i++) {
    const armed *a = &in->armed[i];
    if (a->active || a->state == ARM_PHASE) return false;
    if (a->state == ARM_WAIT && job->faults->faults[i].epoch >= 0) return false; /* a step's */
  }
  return next_due(job) > until;
}

void sim__injector_free(sim_job *job) {
  sim_injector *in = job->injector;
  if (!in) return;
  size_t count = sg_link_count();
  sg_link_t *all = sg_link_list();
  for (size_t i = 0; all && i < count; i++) {
    free(sg_link_get_data(all[i]));
    sg_link_set_data(all[i], NULL);
  }
  free(all);
  sg_sem_destroy(in->wake);
  free(in->armed);
  free(in);
  job->injector = NULL;
}
