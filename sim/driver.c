/*
 * driver.c: the job's launcher and elastic driver, one actor on the platform's launcher host.
 * It starts the workers of the first world, and then:
 *
 * - elastic (Horovod's ElasticDriver): when workers come to a rendezvous after a failure or a
 *   host change, it waits for every member still alive (a member that does not come within the
 *   rendezvous timeout, or that cannot reach the driver, failed), blacklists the nodes of failed
 *   members, assigns ranks over the remaining hosts in their assignment order (hosts keep their
 *   relative order, new hosts go last, ranks fill hosts up to max_np), starts workers on new
 *   slots, and releases everyone into the new world after the rendezvous time.  Below min_np it
 *   waits for hosts up to the slots timeout, then ends the job.  Host discovery changes the host
 *   list at the scenario's times, seen at the next poll.
 * - fixed size with a restart policy: when a launch fails, it waits the relaunch time and starts
 *   the program again (it resumes from its checkpoint) on the nodes that did not fail, spare
 *   nodes replacing failed ones.
 *
 *   launch ──> world 0 ──failure──> rendezvous ──> world 1 ──> ... ──> every worker done
 *                 └────failure (fixed size)──> relaunch ──> world 1 ──> ...
 */
#include "sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { RDV_NONE, RDV_OPEN, RDV_SLOTS, RDV_FORMED } rdv_phase;

struct sim_driver {
  sg_sem_t wake;
  bool over;
  /* host discovery (elastic) */
  uint8_t *discovered;  /* by node: in the host list discovery reports */
  int *order, norder;   /* host assignment order (nodes) */
  int next_change;      /* first scheduled change not yet seen */
  double change_stamp;  /* the pending notice of a host change (0: none), and its kind */
  int change_kind;
  /* the rendezvous in progress */
  rdv_phase phase;
  double deadline;       /* RDV_OPEN: members that have not come by then failed */
  double slots_deadline; /* RDV_SLOTS: min_np slots must be there by then */
  double release_at;     /* RDV_FORMED: the new world is released then */
  sim_world *forming;
  /* relaunch of a fixed-size job */
  bool relaunching;      /* one is due at relaunch_at */
  double relaunch_at;
  int *launch_nodes, nlaunch_nodes;
};

static double now(void) { return simgrid_get_clock(); }

static void log_event(sim_job *job, rh_event_kind kind, int node, rh_status st, double a,
                      const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void log_event(sim_job *job, rh_event_kind kind, int node, rh_status st, double a,
                      const char *fmt, ...) {
  rh_event e = {.kind = kind, .time = now(), .generation = job->world ? job->world->generation : 0,
                .rank = -1, .node = node, .gpu = -1, .fault = -1, .status = st, .epoch = -1,
                .step = -1, .a = a};
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e.text, sizeof e.text, fmt, ap);
    va_end(ap);
  }
  rh__log(job->log, &e);
}

/* ---- worlds and workers --------------------------------------------------------------------- */

/* A world over `nodes` (in assignment order): Horovod's rank assignment, capped at max_np (0: no
 * cap).  Its members are left for the caller to place. */
static sim_world *new_world(sim_job *job, const int *nodes, int k, int max_np) {
  const rh_cluster *cl = job->cluster;
  int total = 0;
  for (int i = 0; i < k; i++) total += cl->gpus_per_node[nodes[i]];
  if (total == 0) return NULL;
  sim_world *w = calloc(1, sizeof *w);
  int *node_of = calloc((size_t)total, sizeof(int)), *topo_node = calloc((size_t)total, sizeof(int));
  int size = w && node_of && topo_node ? rh__assign_hosts(nodes, k, cl->gpus_per_node, max_np, node_of) : 0;
  for (int r = 0, idx = -1; r < size; r++) { /* the topology numbers nodes by first appearance */
    if (r == 0 || node_of[r] != node_of[r - 1]) idx++;
    topo_node[r] = idx;
  }
  if (w) {
    w->slots = calloc((size_t)total, sizeof(int));
    w->members = calloc((size_t)total, sizeof *w->members);
    w->dead = calloc((size_t)total, 1);
  }
  if (!size || !w->slots || !w->members || !w->dead ||
      rh_topology_init_map(&w->topo, topo_node, size) != RH_OK) {
    if (w) {
      free(w->slots);
      free(w->members);
      free(w->dead);
    }
    free(w);
    free(node_of);
    free(topo_node);
    return NULL;
  }
  for (int r = 0; r < size; r++)
    w->slots[r] = rh_cluster_first_slot(cl, node_of[r]) + w->topo.local_rank_of[r];
  free(node_of);
  free(topo_node);
  w->job = job;
  w->last_meeting = -1; /* no collective yet */
  w->generation = job->generations++;
  w->next_world = job->worlds;
  job->worlds = w;
  return w;
}

static sim_worker *new_worker(sim_job *job, int slot) {
  sim_worker *wk = calloc(1, sizeof *wk);
  if (!wk) return NULL;
  wk->job = job;
  wk->slot = slot;
  wk->host = job->hosts[slot];
  wk->launch = job->launches - 1;
  wk->result = 1;
  return wk;
}

/* Puts worker wk into world w as rank r: its context moves there. */
static void place(sim_job *job, sim_world *w, int r, sim_worker *wk) {
  w->members[r] = wk;
  wk->world = w;
  if (!wk->ctx.ops) {
    rh_ctx_init(&wk->ctx, r, &w->topo, job->settings, job->cluster, &sim__ops, wk);
    wk->ctx.elastic = job->elastic;
    wk->ctx.log = job->log;
    wk->ctx.restarts = wk->launch;
  }
  rh__ctx_set_world(&wk->ctx, r, &w->topo, w->generation);
}

/* "0,1,3": the nodes of a world, in rank order.  A list longer than buf is cut after a whole
 * number and says how many nodes it leaves out ("0,1,2,...,73 and 16300 more"). */
static void describe_nodes(const sim_job *job, const sim_world *w, char *buf, size_t len) {
  int nodes = 0;
  size_t whole = 0; /* the length of the whole list */
  for (int r = 0; r < w->topo.size; r++) {
    int node = job->node_of_slot[w->slots[r]];
    if (r > 0 && node == job->node_of_slot[w->slots[r - 1]]) continue;
    whole += (size_t)snprintf(NULL, 0, "%s%d", nodes ? "," : "", node);
    nodes++;
  }
  /* room for " and 2147483647 more" where the list does not fit */
  size_t room = whole < len ? len : len > 24 ? len - 24 : 0, k = 0;
  int shown = 0;
  buf[0] = 0;
  for (int r = 0; r < w->topo.size; r++) {
    int node = job->node_of_slot[w->slots[r]];
    if (r > 0 && node == job->node_of_slot[w->slots[r - 1]]) continue;
    char item[16];
    size_t m = (size_t)snprintf(item, sizeof item, "%s%d", shown ? "," : "", node);
    if (k + m >= room) break;
    memcpy(buf + k, item, m + 1);
    k += m;
    shown++;
  }
  if (shown < nodes && k < len) snprintf(buf + k, len - k, " and %d more", nodes - shown);
}

static void log_world(sim_job *job, const sim_world *w) {
  char list[200];
  describe_nodes(job, w, list, sizeof list);
  log_event(job, RH_EV_WORLD, -1, RH_OK, w->topo.size, "nodes %s", list);
}

/* Whether every GPU host of a node is on. */
static bool node_usable(const sim_job *job, int node) {
  int first = rh_cluster_first_slot(job->cluster, node);
  for (int l = 0; l < job->cluster->gpus_per_node[node]; l++)
    if (!sg_host_is_on(job->hosts[first + l])) return false;
  return true;
}

/* Starts a launch of the job on `nodes`: a new world and a new worker on every slot. */
static rh_status launch(sim_job *job, const int *nodes, int k) {
  sim_driver *d = job->driver;
  job->launches++;
  int max_np = job->elastic ? job->elastic->max_np : 0;
  sim_world *w = new_world(job, nodes, k, max_np);
  if (!w) return RH_ERR_NOMEM;
  for (int r = 0; r < w->topo.size; r++) { /* every member placed before any runs */
    sim_worker *wk = new_worker(job, w->slots[r]);
    if (!wk) return RH_ERR_NOMEM;
    place(job, w, r, wk);
  }
  for (int r = 0; r < w->topo.size; r++) job->start_worker(job, w->members[r]);
  job->world = w;
  job->changes++;
  job->last_size = w->topo.size;
  int *copy = malloc((size_t)k * sizeof(int));
  if (!copy) return RH_ERR_NOMEM;
  memcpy(copy, nodes, (size_t)k * sizeof(int));
  free(d->launch_nodes);
  d->launch_nodes = copy;
  d->nlaunch_nodes = k;
  for (int i = 0; i < k; i++) job->node_state[nodes[i]] = NODE_IN;
  if (job->launches > 1) log_event(job, RH_EV_RELAUNCH, -1, RH_OK, w->topo.size, "launch %d", job->launches);
  log_world(job, w);
  return RH_OK;
}

/* ---- who is where --------------------------------------------------------------------------- */

bool sim__driver_reachable(const sim_job *job, int slot) {
  return sg_host_is_on(job->hosts[slot]) && !sim__injector_link_down(job, slot);
}

/* A worker whose process died (its host may have been turned off by other means than the
 * injector, as a test does). */
static bool gone(const sim_worker *wk) { return wk->dead || !sg_host_is_on(wk->host); }

static void kill_actors_on(sg_host_t host) {
  size_t n = sg_actor_count();
  sg_actor_t *all = sg_actor_list();
  for (size_t i = 0; all && i < n; i++)
    if (sg_actor_get_host(all[i]) == host) sg_actor_kill(all[i]);
  free(all);
}

/* A hung worker is let go: its actors are killed (the launcher kills the process). */
static void kill_hung(sim_job *job, sim_worker *wk) {
  if (!wk->hung || wk->dead || wk->done) return;
  job->losses++;
  kill_actors_on(wk->host);
  wk->dead = true;
}

/* A node leaves the job (Horovod blacklists a failing worker's host; discovery removes one). */
static void node_leaves(sim_job *job, int node, const char *why) {
  sim_driver *d = job->driver;
  if (job->node_state[node] == NODE_LEFT) return;
  job->node_state[node] = NODE_LEFT;
  if (d->discovered) d->discovered[node] = 0;
  int k = 0;
  for (int i = 0; i < d->norder; i++)
    if (d->order[i] != node) d->order[k++] = d->order[i];
  d->norder = k;
  log_event(job, RH_EV_LEFT, node, RH_OK, 0, "%s", why);
}

/* The hosts an assignment would use now, in assignment order. */
static int available_hosts(const sim_job *job, int *out) {
  const sim_driver *d = job->driver;
  int k = 0;
  for (int i = 0; i < d->norder; i++) {
    int node = d->order[i];
    if (d->discovered[node] && job->node_state[node] != NODE_LEFT && node_usable(job, node))
      out[k++] = node;
  }
  return k;
}

/* ---- host discovery ---------------------------------------------------------------------- */

/* When the driver sees a change at `at`: its next poll. */
static double notice_time(const sim_job *job, double at) {
  double p = job->elastic->discovery_interval;
  return p > 0 ? ceil(at / p) * p : at;
}

/* Whether the assignment over the discovered hosts differs from the latest world's: the one
 * forming when there is one (it holds every change seen so far), else the current one.  Horovod's
 * ElasticDriver notifies no worker of a change that leaves the assignment as it is (a host that
 * had already gone removed, a blacklisted host added). */
static bool assignment_changes(sim_job *job) {
  int *hosts = calloc((size_t)job->nnodes, sizeof(int));
  if (!hosts) return false;
  int k = available_hosts(job, hosts), total = 0;
  for (int i = 0; i < k; i++) total += job->cluster->gpus_per_node[hosts[i]];
  int *node_of = calloc((size_t)(total ? total : 1), sizeof(int));
  int size = node_of ? rh__assign_hosts(hosts, k, job->cluster->gpus_per_node,
                                        job->elastic->max_np, node_of) : 0;
  const sim_world *w = job->driver->forming ? job->driver->forming : job->world;
  bool differ = !w || size != w->topo.size;
  for (int r = 0; !differ && r < size; r++) differ = node_of[r] != job->node_of_slot[w->slots[r]];
  free(hosts);
  free(node_of);
  return differ;
}

static void discover(sim_job *job) {
  sim_driver *d = job->driver;
  const rh_elastic_config *el = job->elastic;
  while (d->next_change < el->nchanges &&
         notice_time(job, el->changes[d->next_change].at) <= now()) {
    const rh_host_change *c = &el->changes[d->next_change++];
    if (c->added) {
      d->discovered[c->node] = 1;
      bool known = false;
      for (int i = 0; i < d->norder; i++) known = known || d->order[i] == c->node;
      if (!known) d->order[d->norder++] = c->node;
    } else {
      d->discovered[c->node] = 0;
    }
    log_event(job, RH_EV_HOSTS, c->node, RH_OK, c->added ? RH_HOSTS_ADDED : RH_HOSTS_REMOVED,
              "node %d %s", c->node, c->added ? "added" : "removed");
    if (assignment_changes(job)) {
      d->change_stamp = now();
      d->change_kind |= c->added ? RH_HOSTS_ADDED : RH_HOSTS_REMOVED;
    }
  }
}

double sim__driver_next_change(const sim_job *job) {
  const sim_driver *d = job->driver;
  if (!job->elastic || !d || d->next_change >= job->elastic->nchanges) return INFINITY;
  return notice_time(job, job->elastic->changes[d->next_change].at);
}

bool sim__driver_quiet(const sim_job *job, const sim_world *w, double until) {
  return job->world == w && job->driver->phase == RDV_NONE && sim__driver_next_change(job) > until;
}

void sim__driver_host_updates(sim_job *job, double *stamp, int *kind) {
  *stamp = job->driver->change_stamp;
  *kind = job->driver->change_kind;
}

/* ---- rendezvous ----------------------------------------------------------------------------- */

rh_status sim__driver_rendezvous(sim_job *job, sim_worker *wk) {
  sim_driver *d = job->driver;
  if (!wk->joining) {
    if (d->over || job->world != wk->world) return RH_ERR_EXCLUDED; /* the job went on */
    if (d->phase == RDV_NONE) {
      d->phase = RDV_OPEN;
      d->deadline = now() + job->elastic->rendezvous_timeout;
    }
  }
  wk->arrived = true;
  sg_sem_release(d->wake);
  sg_sem_acquire(wk->wake);
  wk->arrived = false;
  wk->joining = false;
  return wk->answer;
}

static void answer(sim_worker *wk, rh_status st) {
  wk->answer = st;
  wk->arrived = false;
  sg_sem_release(wk->wake);
}

/* Ends the elastic job: every worker waiting in the rendezvous gets `st`. */
static void end_job(sim_job *job, rh_status st, const char *why) {
  sim_driver *d = job->driver;
  d->phase = RDV_NONE;
  log_event(job, RH_EV_ENDED, -1, st, 0, "%s", why);
  for (sim_worker *wk = job->workers; wk; wk = wk->next_worker)
    if (wk->arrived) answer(wk, st);
}

/* Blacklists the failed members of the current world and forms the next one, or waits for
 * slots, or ends the job. */
static void close_rendezvous(sim_job *job) {
  sim_driver *d = job->driver;
  sim_world *old = job->world;
  for (int r = 0; r < old->topo.size; r++) {
    sim_worker *wk = old->members[r];
    int node = job->node_of_slot[wk->slot];
    if (wk->done) continue;
    if (gone(wk)) node_leaves(job, node, "failed: its process died");
    else if (!wk->arrived) node_leaves(job, node, "failed: did not come back to the rendezvous");
    else if (!sim__driver_reachable(job, wk->slot)) node_leaves(job, node, "failed: unreachable");
  }
  int *hosts = calloc((size_t)job->nnodes, sizeof(int));
  if (!hosts) {
    end_job(job, RH_ERR_NOMEM, "out of memory");
    return;
  }
  int k = available_hosts(job, hosts), slots = 0;
  for (int i = 0; i < k; i++) slots += job->cluster->gpus_per_node[hosts[i]];
  int max_np = job->elastic->max_np, size = max_np > 0 && slots > max_np ? max_np : slots;
  if (size < job->elastic->min_np) {
    free(hosts);
    if (d->phase != RDV_SLOTS) {
      d->phase = RDV_SLOTS;
      d->slots_deadline = now() + job->elastic->slots_timeout;
    } else if (now() >= d->slots_deadline) {
      char why[160];
      snprintf(why, sizeof why, "%d slots remain, min_np is %d (waited %g s for hosts)", size,
               job->elastic->min_np, job->elastic->slots_timeout);
      end_job(job, RH_ERR_TOO_FEW, why);
    }
    return;
  }
  sim_world *w = new_world(job, hosts, k, max_np);
  free(hosts);
  if (!w) {
    end_job(job, RH_ERR_NOMEM, "out of memory");
    return;
  }
  /* Horovod needs a worker of the previous world in the new one, to send the state from */
  bool kept = false;
  for (int r = 0; r < w->topo.size && !kept; r++) {
    sim_worker *wk = job->slot_worker[w->slots[r]];
    kept = wk && wk->world == old && wk->arrived && !wk->dead;
  }
  if (!kept) {
    end_job(job, RH_ERR_TOO_FEW, "no worker of the previous world remains to send the state");
    return;
  }
  /* survivors keep their slots (their ranks may change); new slots get new workers */
  for (int r = 0; r < w->topo.size; r++) {
    sim_worker *wk = job->slot_worker[w->slots[r]];
    if (wk && wk->world == old && wk->arrived && !wk->dead) {
      w->members[r] = wk;
      continue;
    }
    wk = new_worker(job, w->slots[r]);
    if (!wk) {
      end_job(job, RH_ERR_NOMEM, "out of memory");
      return;
    }
    wk->joining = true;
    wk->ready_at = now() + job->elastic->worker_start;
    place(job, w, r, wk);
  }
  for (int r = 0; r < w->topo.size; r++)
    if (w->members[r]->joining && !w->members[r]->actor) job->start_worker(job, w->members[r]);
  d->forming = w;
  job->changes++;
  d->phase = RDV_FORMED;
  d->release_at = now() + job->elastic->rendezvous;
  d->change_stamp = 0; /* the new world holds every change seen so far */
  d->change_kind = 0;
}

/* The formed world starts once its new workers are up and the rendezvous time has passed. */
static void release(sim_job *job) {
  sim_driver *d = job->driver;
  sim_world *w = d->forming, *old = job->world;
  if (now() < d->release_at) return;
  for (int r = 0; r < w->topo.size; r++) {
    sim_worker *wk = w->members[r];
    if (wk->joining && !wk->arrived && !wk->dead) return; /* still starting */
  }
  /* the new world first: an answer lets its worker run at once (and perhaps come back) */
  for (int r = 0; r < w->topo.size; r++) {
    place(job, w, r, w->members[r]);
    if (gone(w->members[r])) w->dead[r] = 1; /* died while the world formed */
  }
  job->world = w;
  job->changes++;
  job->last_size = w->topo.size;
  d->forming = NULL;
  d->phase = RDV_NONE;
  log_world(job, w);
  for (int r = 0; r < old->topo.size; r++) /* members of the old world not in the new one leave */
    if (old->members[r]->world != w) kill_hung(job, old->members[r]);
  for (sim_worker *wk = job->workers; wk; wk = wk->next_worker)
    if (wk->arrived && !wk->dead) answer(wk, wk->world == w ? RH_OK : RH_ERR_EXCLUDED);
}

/* ---- the end of a launch, and relaunches -------------------------------------------------- */

static bool live(const sim_worker *wk) { return !wk->done && !gone(wk) && !wk->hung; }

static int failed_members(const sim_world *w) {
  int failed = 0;
  for (int r = 0; r < w->topo.size; r++) {
    const sim_worker *wk = w->members[r];
    failed += gone(wk) || wk->hung || (wk->done && wk->result != 0);
  }
  return failed;
}

static void finish(sim_job *job) {
  sim_driver *d = job->driver;
  sim_world *w = job->world;
  for (int r = 0; r < w->topo.size; r++) kill_hung(job, w->members[r]);
  job->last_failed = failed_members(w);
  d->over = true;
}

/* Spare nodes replace the failed nodes of a launch, in order. */
static void relaunch(sim_job *job) {
  sim_driver *d = job->driver;
  d->relaunching = false;
  int *nodes = calloc((size_t)job->nnodes, sizeof(int)), k = 0;
  if (!nodes) {
    finish(job);
    return;
  }
  for (int i = 0; i < d->nlaunch_nodes; i++)
    if (job->node_state[d->launch_nodes[i]] != NODE_LEFT && node_usable(job, d->launch_nodes[i]))
      nodes[k++] = d->launch_nodes[i];
  for (int n = 0; n < job->nnodes && k < d->nlaunch_nodes; n++)
    if (job->node_state[n] == NODE_SPARE && node_usable(job, n)) nodes[k++] = n;
  if (k == 0 || launch(job, nodes, k) != RH_OK) {
    log_event(job, RH_EV_ENDED, -1, RH_ERR_TOO_FEW, 0, "no node left to relaunch on");
    finish(job);
  }
  free(nodes);
}

/* A launch whose workers all stopped: done, or relaunched after a failure. */
static void launch_over(sim_job *job) {
  sim_driver *d = job->driver;
  sim_world *w = job->world;
  for (int r = 0; r < w->topo.size; r++)
    if (live(w->members[r])) return;
  int failed = failed_members(w);
  bool elastic = job->elastic != NULL;
  if (failed && !elastic) {
    log_event(job, RH_EV_STOPPED, -1, RH_OK, failed, "%d of %d workers failed", failed,
              w->topo.size);
    const rh_restart_config *rs = job->restart;
    if (rs && job->launches - 1 < rs->max_restarts) {
      for (int r = 0; r < w->topo.size; r++) {
        sim_worker *wk = w->members[r];
        if (gone(wk) || wk->hung)
          node_leaves(job, job->node_of_slot[wk->slot], wk->hung ? "failed: hung" : "failed: its process died");
        kill_hung(job, wk);
      }
      d->relaunching = true;
      d->relaunch_at = now() + rs->relaunch;
      return;
    }
    /* a policy's limit, not a status of the job's: the reason is the text alone */
    if (rs) log_event(job, RH_EV_ENDED, -1, RH_OK, 0, "max_restarts %d reached", rs->max_restarts);
  }
  finish(job);
}

static void step(sim_job *job) {
  sim_driver *d = job->driver;
  if (job->elastic) {
    discover(job);
    if (d->phase == RDV_OPEN || d->phase == RDV_SLOTS) {
      bool all_in = true;
      const sim_world *old = job->world;
      for (int r = 0; r < old->topo.size && all_in; r++) {
        const sim_worker *wk = old->members[r];
        if (!wk->done && !gone(wk)) all_in = wk->arrived && sim__driver_reachable(job, wk->slot);
      }
      if (all_in || now() >= d->deadline || d->phase == RDV_SLOTS) close_rendezvous(job);
    }
    if (d->phase == RDV_FORMED) release(job);
  }
  if (!d->relaunching && d->phase == RDV_NONE && !d->over) launch_over(job);
  /* A relaunch due now (relaunch_s 0) starts at once: the driver's wait cannot be for no time
   * (SimGrid waits for good when a semaphore's timeout is 0). */
  if (d->relaunching && now() >= d->relaunch_at) relaunch(job);
}

static double next_wake(const sim_job *job) {
  const sim_driver *d = job->driver;
  double next = INFINITY;
  if (job->elastic && d->next_change < job->elastic->nchanges)
    next = fmin(next, notice_time(job, job->elastic->changes[d->next_change].at));
  if (d->phase == RDV_OPEN) next = fmin(next, d->deadline);
  if (d->phase == RDV_SLOTS) next = fmin(next, d->slots_deadline);
  if (d->phase == RDV_FORMED) next = fmin(next, d->release_at);
  if (d->relaunching) next = fmin(next, d->relaunch_at);
  return next;
}

static void driver_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sim_job *job = sg_actor_self_get_data();
  sim_driver *d = job->driver;
  int *nodes = calloc((size_t)job->cluster->nodes, sizeof(int));
  for (int i = 0; nodes && i < job->cluster->nodes; i++) nodes[i] = i;
  rh_status st = nodes ? launch(job, nodes, job->cluster->nodes) : RH_ERR_NOMEM;
  free(nodes);
  if (st != RH_OK) {
    fprintf(stderr, "rehearsal: cannot start the job: %s\n", rh_status_string(st));
    d->over = true;
    job->last_failed = 1;
  }
  while (!d->over) {
    double next = next_wake(job);
    if (isinf(next)) sg_sem_acquire(d->wake);
    else sg_sem_acquire_timeout(d->wake, fmax(0, next - now()));
    step(job);
  }
  for (sim_worker *wk = job->workers; wk; wk = wk->next_worker)
    if (wk->arrived) answer(wk, RH_ERR_EXCLUDED); /* nobody is left waiting for a world */
}

/* ---- events from workers and faults --------------------------------------------------------- */

void sim__driver_poke(sim_job *job) {
  if (job->driver) sg_sem_release(job->driver->wake);
}

void sim__driver_worker_done(sim_job *job, sim_worker *wk) {
  (void)wk;
  sim__driver_poke(job);
}

void sim__driver_worker_died(sim_job *job, sim_worker *wk) {
  if (wk->dead) return;
  job->losses++;
  wk->dead = true;
  if (wk->world) sim__member_died(wk->world, wk->ctx.rank);
  sim__driver_poke(job);
}

rh_status sim__driver_start(sim_job *job) {
  sim_driver *d = calloc(1, sizeof *d);
  if (!d) return RH_ERR_NOMEM;
  job->driver = d;
  d->wake = sg_sem_init(0);
  d->discovered = calloc((size_t)job->nnodes, 1);
  d->order = calloc((size_t)job->nnodes, sizeof(int));
  if (!d->discovered || !d->order) return RH_ERR_NOMEM;
  for (int n = 0; n < job->nnodes; n++) {
    bool initial = n < job->cluster->nodes;
    job->node_state[n] = initial ? NODE_IN : NODE_SPARE;
    d->discovered[n] = initial;
    if (initial) d->order[d->norder++] = n;
  }
  sg_actor_t a = sg_actor_init("driver", sg_host_by_name("launcher"));
  sg_actor_set_data(a, job);
  sg_actor_start(a, driver_main, 0, NULL);
  return RH_OK;
}

void sim__driver_free(sim_job *job) {
  sim_driver *d = job->driver;
  if (!d) return;
  sg_sem_destroy(d->wake);
  free(d->discovered);
  free(d->order);
  free(d->launch_nodes);
  free(d);
  job->driver = NULL;
}
