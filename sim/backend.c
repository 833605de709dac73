/*
 * backend.c: the SimGrid backend.  Each rank is an actor on its GPU's host; messages go through
 * mailboxes named by (source, destination, tag) with the asynchronous calls only, because the
 * blocking ones abort the process when a peer dies.  Real payloads are copied at send time and
 * copied out at the receiver; timing-only messages carry nothing but their simulated size.
 * SimGrid errors are mapped to rh_status here and nowhere else.
 */
#include "internal.h"
#include "platform.h"

#include <simgrid/engine.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/host.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- job and rank state ---------------------------------------------------------------------- */

/* One rendezvous in progress (a negotiation, a check, or a coarse-grain sync): the members'
 * records gathered in shared memory, in no simulated time. */
typedef struct audit_point {
  uint64_t key;
  int n, count, left;
  size_t bytes;
  uint8_t *records; /* n * bytes */
  uint8_t *arrived; /* n flags */
  sg_sem_t all_came;
} audit_point;

typedef struct sim_job {
  const rh_cluster *cluster;
  const rh_settings *settings;
  rh_topology topo;
  rh_rank_fn fn;
  void *arg;
  audit_point **audits; /* entries are heap-allocated: waiters keep pointers while it grows */
  size_t naudits, capaudits;
  double end_time;
} sim_job;

typedef struct sim_rank {
  rh_ctx ctx;
  sim_job *job;
  sg_host_t host;
  struct rh_task *last_task; /* the newest background task not yet finished */
  int result;
  bool done;
} sim_rank;

/* What travels: the sender's length and whether numbers follow, so that a receiver expecting
 * something else fails with RH_ERR_MISMATCH instead of reading past the message. */
typedef struct message {
  size_t bytes;
  bool has_data;
  unsigned char data[];
} message;

struct rh_p2p {
  sg_comm_t comm;
  message *payload; /* send: the message handed over; recv: filled on completion */
  void *dst;     /* recv: where the payload goes; NULL for timing-only */
  size_t bytes;
  bool is_recv;
};

struct rh_task {
  rh_status (*fn)(void *);
  void *arg;
  rh_status status;
  sg_sem_t done;      /* released when fn returned */
  sg_sem_t turn;      /* released when this task may start (its predecessor finished) */
  sg_sem_t next_turn; /* the successor's turn, if one was spawned before this one finished */
  sim_rank *owner;
};

static sim_rank *rank_of(const rh_ctx *ctx) { return (sim_rank *)ctx->backend; }

static rh_status map_error(sg_error_t e) {
  switch (e) {
  case SG_OK: return RH_OK;
  case SG_ERROR_TIMEOUT: return RH_ERR_TIMEOUT;
  case SG_ERROR_HOST:
  case SG_ERROR_NETWORK:
  case SG_ERROR_CANCELED: return RH_ERR_PEER_DEAD;
  default: return RH_ERR_BACKEND;
  }
}

static sg_mailbox_t mailbox(int src, int dst, uint32_t tag) {
  char name[48];
  snprintf(name, sizeof name, "%d>%d#%u", src, dst, tag);
  return sg_mailbox_by_name(name);
}

/* ---- point to point ------------------------------------------------------------------------- */

static rh_status sim_isend(rh_ctx *ctx, int peer, uint32_t tag, const void *buf, size_t bytes,
                           rh_p2p **out) {
  rh_p2p *r = calloc(1, sizeof *r);
  if (!r) return RH_ERR_NOMEM;
  size_t carried = buf ? bytes : 0;
  r->payload = malloc(sizeof(message) + carried);
  if (!r->payload) {
    free(r);
    return RH_ERR_NOMEM;
  }
  r->payload->bytes = bytes;
  r->payload->has_data = buf != NULL;
  if (carried) memcpy(r->payload->data, buf, carried);
  r->bytes = bytes;
  r->comm = sg_mailbox_put_async(mailbox(ctx->rank, peer, tag), r->payload, (long)bytes);
  *out = r;
  return RH_OK;
}

static rh_status sim_irecv(rh_ctx *ctx, int peer, uint32_t tag, void *buf, size_t bytes,
                           rh_p2p **out) {
  rh_p2p *r = calloc(1, sizeof *r);
  if (!r) return RH_ERR_NOMEM;
  r->is_recv = true;
  r->dst = buf;
  r->bytes = bytes;
  r->comm = sg_mailbox_get_async(mailbox(peer, ctx->rank, tag), (void **)&r->payload);
  *out = r;
  return RH_OK;
}

static rh_status sim_waitall(rh_ctx *ctx, rh_p2p **reqs, size_t n, double timeout) {
  (void)ctx;
  rh_status first = RH_OK;
  double deadline = timeout >= 0 ? simgrid_get_clock() + timeout : -1;
  for (size_t i = 0; i < n; i++) {
    rh_p2p *r = reqs[i];
    if (!r) continue;
    sg_error_t e;
    if (first != RH_OK) {
      e = sg_comm_wait_for(r->comm, 0); /* releases the comm after an earlier failure */
    } else if (deadline < 0) {
      e = sg_comm_wait(r->comm);
    } else {
      double left = deadline - simgrid_get_clock();
      e = sg_comm_wait_for(r->comm, left > 0 ? left : 0);
    }
    rh_status st = map_error(e);
    /* A "timeout" before the deadline is the partner cancelling its side after a failure. */
    if (st == RH_ERR_TIMEOUT && first == RH_OK && (deadline < 0 || simgrid_get_clock() < deadline))
      st = RH_ERR_ABORTED;
    if (r->is_recv && st == RH_OK) { /* the receiver owns a delivered message */
      message *m = r->payload;
      if (m->bytes != r->bytes || m->has_data != (r->dst != NULL)) st = RH_ERR_MISMATCH;
      else if (r->dst) memcpy(r->dst, m->data, r->bytes);
      free(m);
    } else if (!r->is_recv && st != RH_OK) {
      free(r->payload); /* never delivered */
    }
    if (first == RH_OK) first = st;
    free(r);
    reqs[i] = NULL;
  }
  return first;
}

/* ---- time ------------------------------------------------------------------------------------- */

static double sim_now(const rh_ctx *ctx) {
  (void)ctx;
  return simgrid_get_clock();
}

static rh_status sim_compute(rh_ctx *ctx, double flops) {
  (void)ctx;
  if (flops > 0) sg_actor_execute(flops);
  return RH_OK;
}

static rh_status sim_sleep(rh_ctx *ctx, double seconds) {
  (void)ctx;
  if (seconds > 0) sg_actor_sleep_for(seconds);
  return RH_OK;
}

static rh_status sim_reduce_cost(rh_ctx *ctx, size_t bytes) {
  double bw = ctx->cluster ? ctx->cluster->reduce_bw : 0;
  if (bw > 0 && bytes > 0) sg_actor_sleep_for((double)bytes / bw);
  return RH_OK;
}

/* ---- audits ---------------------------------------------------------------------------------- */

static void audit_leave(sim_job *job, audit_point *a) {
  if (++a->left < a->n) return;
  for (size_t i = 0; i < job->naudits; i++)
    if (job->audits[i] == a) {
      job->audits[i] = job->audits[--job->naudits];
      break;
    }
  sg_sem_destroy(a->all_came);
  free(a->records);
  free(a->arrived);
  free(a);
}

/* Member `me` of an n-member rendezvous `key` leaves its record and waits for the others (no
 * simulated time passes); all and arrived receive what came.  RH_ERR_TIMEOUT when some member
 * did not come within `timeout` seconds (negative: no limit). */
static rh_status rendezvous(sim_job *job, uint64_t key, int n, int me, const void *mine,
                            size_t bytes, void *all, uint8_t *arrived, double timeout) {
  audit_point *a = NULL;
  for (size_t i = 0; i < job->naudits && !a; i++)
    if (job->audits[i]->key == key) a = job->audits[i];
  if (!a) {
    if (job->naudits == job->capaudits) {
      size_t cap = job->capaudits ? 2 * job->capaudits : 16;
      audit_point **grown = realloc(job->audits, cap * sizeof *grown);
      if (!grown) return RH_ERR_NOMEM;
      job->audits = grown;
      job->capaudits = cap;
    }
    a = calloc(1, sizeof *a);
    if (a) {
      a->records = calloc((size_t)n, bytes ? bytes : 1);
      a->arrived = calloc((size_t)n, 1);
    }
    if (!a || !a->records || !a->arrived) {
      if (a) {
        free(a->records);
        free(a->arrived);
      }
      free(a);
      return RH_ERR_NOMEM;
    }
    a->key = key;
    a->n = n;
    a->bytes = bytes;
    a->all_came = sg_sem_init(0);
    job->audits[job->naudits++] = a;
  }
  /* records of another size: still arrive (so nobody waits for this rank), but say so */
  bool same = a->bytes == bytes;
  if (same) memcpy(a->records + (size_t)me * bytes, mine, bytes);
  a->arrived[me] = 1;
  rh_status st = RH_OK;
  if (++a->count == n) {
    for (int i = 1; i < n; i++) sg_sem_release(a->all_came);
  } else if (timeout < 0) {
    sg_sem_acquire(a->all_came);
  } else if (sg_sem_acquire_timeout(a->all_came, timeout)) {
    st = RH_ERR_TIMEOUT;
  }
  if (same) memcpy(all, a->records, (size_t)n * bytes);
  memcpy(arrived, a->arrived, (size_t)n);
  audit_leave(job, a);
  return same ? st : RH_ERR_MISMATCH;
}

static rh_status sim_audit(rh_ctx *ctx, uint64_t key, const void *mine, size_t bytes, void *all,
                           uint8_t *arrived, double timeout) {
  return rendezvous(rank_of(ctx)->job, key, ctx->world.n, ctx->rank, mine, bytes, all, arrived,
                    timeout);
}

static rh_status sim_model_sync(rh_ctx *ctx, const rh_group *g, bool ok, double timeout) {
  sim_job *job = rank_of(ctx)->job;
  uint64_t key = RH_AUDIT_SYNC | ((uint64_t)g->id << 32) | ctx->syncs++;
  uint8_t mine = ok, *all = calloc((size_t)g->n, 1), *arrived = calloc((size_t)g->n, 1);
  if (!all || !arrived) {
    free(all);
    free(arrived);
    return RH_ERR_NOMEM;
  }
  rh_status st = rendezvous(job, key, g->n, g->me, &mine, 1, all, arrived, timeout);
  for (int i = 0; i < g->n && st == RH_OK; i++)
    if (!all[i]) st = RH_ERR_ABORTED;
  for (int i = 0; i < g->n && st == RH_ERR_TIMEOUT; i++) {
    char name[32];
    snprintf(name, sizeof name, "rank%d", g->ranks[i]);
    if (!arrived[i] && !sg_host_is_on(sg_host_by_name(name))) st = RH_ERR_PEER_DEAD;
  }
  free(all);
  free(arrived);
  return st;
}

/* ---- background tasks ----------------------------------------------------------------------- */

static void task_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  rh_task *t = sg_actor_self_get_data();
  sg_sem_acquire(t->turn);
  sg_sem_destroy(t->turn);
  t->status = t->fn(t->arg);
  if (t->next_turn) sg_sem_release(t->next_turn);
  if (t->owner->last_task == t) t->owner->last_task = NULL;
  sg_sem_release(t->done);
}

static rh_status sim_spawn(rh_ctx *ctx, rh_status (*fn)(void *), void *arg, rh_task **out) {
  rh_task *t = calloc(1, sizeof *t);
  if (!t) return RH_ERR_NOMEM;
  t->fn = fn;
  t->arg = arg;
  t->done = sg_sem_init(0);
  t->owner = rank_of(ctx);
  rh_task *prev = t->owner->last_task;
  t->turn = sg_sem_init(prev ? 0 : 1);
  if (prev) prev->next_turn = t->turn;
  t->owner->last_task = t;
  char name[32];
  snprintf(name, sizeof name, "rank%d-bg", ctx->rank);
  sg_actor_t a = sg_actor_init(name, rank_of(ctx)->host);
  sg_actor_set_data(a, t);
  sg_actor_start(a, task_main, 0, NULL);
  *out = t;
  return RH_OK;
}

static rh_status sim_join(rh_ctx *ctx, rh_task *t, double timeout) {
  (void)ctx;
  rh_status st;
  if (timeout < 0) {
    sg_sem_acquire(t->done);
    st = t->status;
  } else {
    st = sg_sem_acquire_timeout(t->done, timeout) ? RH_ERR_TIMEOUT : t->status;
  }
  if (st == RH_ERR_TIMEOUT) return st; /* the task still runs and owns its state */
  sg_sem_destroy(t->done);
  free(t);
  return st;
}

static const rh_backend_ops sim_ops = {
    .name = "simgrid",
    .isend = sim_isend,
    .irecv = sim_irecv,
    .waitall = sim_waitall,
    .now = sim_now,
    .compute = sim_compute,
    .reduce_cost = sim_reduce_cost,
    .model_sync = sim_model_sync,
    .sleep = sim_sleep,
    .spawn = sim_spawn,
    .join = sim_join,
    .audit = sim_audit,
};

/* ---- launch ----------------------------------------------------------------------------------- */

static void rank_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sim_rank *r = sg_actor_self_get_data();
  r->result = r->job->fn(&r->ctx, r->job->arg);
  r->done = true;
  double now = simgrid_get_clock();
  if (now > r->job->end_time) r->job->end_time = now;
}

static bool launched;

int rh__launch(const rh_launch_config *cfg, rh_rank_fn fn, void *arg, rh_launch_result *res) {
  if (launched) {
    fprintf(stderr, "rehearsal: the simulator runs one job per process\n");
    return 1;
  }
  launched = true;
  const rh_cluster *cl = cfg->cluster;
  sim_job job = {.cluster = cl, .settings = cfg->settings, .fn = fn, .arg = arg};
  if (rh_topology_init(&job.topo, cl->gpus_per_node, cl->nodes) != RH_OK) return 1;

  char tmpl[] = "/tmp/rehearsal-platform-XXXXXX";
  const char *path = cfg->platform_file;
  FILE *f;
  if (path) {
    f = fopen(path, "w");
  } else {
    int fd = mkstemp(tmpl);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    path = tmpl;
  }
  if (!f || rh_sim_platform_write(cl, f) != RH_OK || fclose(f) != 0) {
    fprintf(stderr, "rehearsal: cannot write the platform file %s\n", path);
    rh_topology_free(&job.topo);
    return 1;
  }

  char a0[] = "rehearsal", a1[] = "--log=root.thres:critical",
       a2[] = "--cfg=contexts/stack-size:1024", a3[] = "--cfg=network/model:CM02",
       a4[] = "--cfg=network/crosstraffic:0", a5[] = "--cfg=network/TCP-gamma:0";
  char *argv[] = {a0, a1, a2, a3, a4, a5, NULL};
  int argc = cl->exact_network ? 6 : 3;
  argv[argc] = NULL;
  simgrid_init(&argc, argv);
  simgrid_load_platform(path);
  if (!cfg->platform_file) unlink(path);

  int size = job.topo.size;
  sim_rank *ranks = calloc((size_t)size, sizeof *ranks);
  if (!ranks) {
    rh_topology_free(&job.topo);
    return 1;
  }
  for (int r = 0; r < size; r++) {
    char name[32];
    snprintf(name, sizeof name, "rank%d", r);
    ranks[r].job = &job;
    ranks[r].host = sg_host_by_name(name);
    ranks[r].result = 1;
    rh_ctx_init(&ranks[r].ctx, r, &job.topo, cfg->settings, cl, &sim_ops, &ranks[r]);
    sg_actor_t a = sg_actor_init(name, ranks[r].host);
    sg_actor_set_data(a, &ranks[r]);
    sg_actor_start(a, rank_main, 0, NULL);
  }
  simgrid_run();

  int failed = 0;
  for (int r = 0; r < size; r++)
    if (!ranks[r].done || ranks[r].result != 0) failed++;
  if (res) *res = (rh_launch_result){.end_time = job.end_time, .failed_ranks = failed, .rank = -1,
                                    .target = "simulator"};
  free(ranks);
  for (size_t i = 0; i < job.naudits; i++) { /* left by ranks that never came */
    sg_sem_destroy(job.audits[i]->all_came);
    free(job.audits[i]->records);
    free(job.audits[i]->arrived);
    free(job.audits[i]);
  }
  free(job.audits);
  rh_topology_free(&job.topo);
  return failed ? 1 : 0;
}
