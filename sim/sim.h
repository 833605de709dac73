/*
 * sim.h: what the files of the SimGrid backend share.  A job runs workers (one actor per GPU
 * process, plus one per background task) on the GPU hosts of the platform; the workers of one
 * generation form a world (a topology, its rendezvous points and its posted messages).  The
 * driver (driver.c) starts workers, re-forms worlds after failures and host changes, and
 * relaunches a failed job; the injector (faults.c) applies the scenario's faults through
 * SimGrid's own means: hosts turned off, actors suspended, link bandwidths and host pstates.
 */
#ifndef REHEARSAL_SIM_SIM_H
#define REHEARSAL_SIM_SIM_H

#include "internal.h"

#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/exec.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/mailbox.h>
#include <simgrid/semaphore.h>

typedef struct sim_job sim_job;
typedef struct sim_world sim_world;
typedef struct sim_worker sim_worker;

/* One rendezvous in progress (a negotiation, a check, or a coarse-grain sync): the members'
 * records gathered in shared memory, in no simulated time. */
typedef struct audit_point {
  uint64_t key;
  size_t slot;                /* its place in the world's list */
  struct audit_point *hnext; /* the next point of its bucket in the world's index */
  int n, count, left;
  size_t bytes;
  uint8_t *first_record; /* bytes: the first member's record */
  uint8_t *records; /* n * bytes, made when a record differs from the first (until then each
                     * member that came brought first_record) */
  bool lost;        /* ... and could not be made */
  uint8_t *arrived; /* n flags */
  const int *ranks; /* the members' world ranks (n entries) */
  sg_sem_t all_came;
  int waiting;      /* members blocked on all_came */
  int pins;         /* releases of all_came under way: each yields, so the point must outlive
                     * them even when its members leave meanwhile */
  bool differs;     /* some record differs from the first that came */
  int first;        /* the member whose record came first (-1: none yet) */
  double max_value; /* a meeting (model_sync): the largest value brought, and whether all were ok */
  bool all_ok;
  double maxima[RH_AUDIT_MAX_VALUES]; /* a folded check (audit_max): the largest of each value */
  int decision;     /* a replay's meeting (replay.c): what its members do, once decided */
  uint64_t what;    /* ... the collective's digest, as the first member brought it */
  double price, since; /* ... the price to wait, or when the run it measures began */
  long changes;     /* ... the job's changes when it began */
} audit_point;

/* A posted point-to-point message, listed in its world until it is waited. */
struct rh_p2p {
  sg_comm_t comm;
  struct message *payload; /* send: the message handed over; recv: filled on completion */
  void *dst;               /* recv: where the payload goes; NULL for timing-only */
  size_t bytes;
  bool is_recv;
  sg_sem_t nap_sem;        /* an interruptible sleep (not a message): the worker's semaphore it
                            * waits on with a timeout, which a sweep releases */
  char box[64];            /* the mailbox, for the abort sweep */
  int peer;                /* the other rank */
  sim_world *world;
  struct rh_p2p *prev, *next;
};

struct sim_world {
  uint32_t generation;
  rh_topology topo;
  int *slots;           /* by rank: the GPU slot it runs on */
  sim_worker **members; /* by rank */
  uint8_t *dead;        /* by rank: the member's process died */
  sim_job *job;
  bool aborted;         /* a member gave up on it after a failed collective */
  audit_point **audits; /* entries are heap-allocated: waiters keep pointers while it grows */
  size_t naudits, capaudits;
  audit_point **index;  /* the same by key: buckets (a power of two) of chained points; a
                         * coarse-grain step opens one point per node at once */
  size_t nbuckets;
  struct rh_p2p *pending; /* posted messages not yet waited */
  struct sim_price *prices; /* what replayed collectives cost in this world (replay.c) */
  size_t nprices, capprices;
  double last_meeting;  /* replay.c: when the world's last collective began (negative: none yet) */
  double longest_gap;   /* and the longest time between two collectives' beginnings */
  /* the last negotiation that every member came to with the same collective (backend.c) */
  bool agreed;
  uint32_t agreed_seq;
  double agreed_at;     /* when it ended: every member left it then */
  /* arrival flags of world-wide points, kept for the next: an allocation of thousands of bytes
   * per collective makes glibc consolidate every free chunk of the process (backend.c) */
  uint8_t *spare_arrived[8];
  int nspare;
  sim_world *next_world;  /* the job's list of worlds (freed at the end) */
};

struct sim_worker {
  rh_ctx ctx;
  sg_exec_t nccl_load;   /* NCCL's share of the GPU while collectives run (NULL: none) */
  int collectives;       /* collectives running on this rank now */
  sim_job *job;
  int slot;              /* GPU host index */
  sg_host_t host;
  sg_actor_t actor;
  sim_world *world;      /* current world; NULL while it waits to join one */
  struct rh_task *queue, *queue_tail; /* background tasks not yet started, in spawn order */
  sg_sem_t queued;       /* released to wake the runner when it waits with nothing queued */
  bool runner_idle;      /* ... which it does */
  sg_actor_t runner;     /* runs the worker's background tasks (made on the first spawn) */
  int launch;            /* which launch started it (0: the first) */
  int result;
  bool done;             /* its function returned */
  bool dead;             /* its process died (host or GPU crash) */
  bool hung;             /* suspended by a hang fault */
  double ready_at;       /* start-up ends (a new worker joining an elastic world) */
  /* rendezvous with the driver */
  bool arrived;          /* waits in a rendezvous */
  bool joining;          /* a new worker: its world is assigned, it waits to be released */
  rh_status answer;
  sg_sem_t wake;
  sg_sem_t nap;          /* released to end this worker's naps early (sim_sleep) */
  sim_worker *next_worker; /* the job's list of workers (freed at the end) */
};

/* A node's place in the job. */
typedef enum node_state { NODE_IN, NODE_SPARE, NODE_LEFT } node_state;

typedef struct sim_driver sim_driver;
typedef struct sim_injector sim_injector;

struct sim_job {
  const rh_cluster *cluster;
  const rh_settings *settings;
  const rh_fault_plan *faults;
  const rh_elastic_config *elastic;
  const rh_restart_config *restart;
  rh_rank_fn fn;
  void *arg;
  /* starts a worker's actor on its slot, which runs fn once ready (the backend's, handed to the
   * driver that launches and adds workers, so that the driver needs nothing else of it) */
  void (*start_worker)(sim_job *job, sim_worker *wk);
  /* what the fault injector tells the driver: a worker it killed, and a change the driver may
   * have to act on (the driver's, handed to the injector, which then needs nothing of it) */
  void (*worker_died)(sim_job *job, sim_worker *wk);
  void (*poke)(sim_job *job);
  int nnodes;            /* nodes + spares */
  int nslots;            /* GPU hosts */
  sg_host_t *hosts;      /* by slot */
  int *node_of_slot;
  sim_worker **slot_worker; /* the slot's current worker (NULL: none) */
  node_state *node_state;
  sim_world *world;      /* the current world */
  sim_world *worlds;     /* every world, newest first */
  sim_worker *workers;   /* every worker, newest first */
  uint32_t generations;  /* worlds formed so far */
  int launches;          /* launches so far (1 + relaunches) */
  rh_joblog *log;
  sim_driver *driver;
  sim_injector *injector;
  double end_time;
  int last_failed;       /* workers of the last launch that failed */
  int last_size;
  long changes;          /* faults applied and healed, worlds formed: a run that saw none ran in
                          * an unchanged job */
  long replayed;         /* collectives replayed at their price (replay.c) */
  long losses;           /* workers killed and hosts turned off so far, each counted before it
                          * happens: while none, no member of any world is dead */
};

sim_worker *sim__worker_self(void);

/* ---- a world (world.c) ---------------------------------------------------------------------- */
/* The world's member of `rank` is dead or its host is off. */
bool sim__member_dead(const sim_world *w, int rank);
/* The world's rendezvous points: got by key (made on first use for n members of `bytes`
 * records), left by each member (the last one frees it), and one waiter released. */
audit_point *sim__point_get(sim_world *w, uint64_t key, int n, size_t bytes, const int *ranks);
void sim__point_leave(sim_world *w, audit_point *a);
void sim__point_release(sim_world *w, audit_point *a);
/* A message a member posted, listed in its world (so that an abandoned world can wake its
 * waiter), and taken off the list once done. */
void sim__post_add(sim_world *w, rh_p2p *r);
void sim__post_remove(rh_p2p *r);
/* A member of w died: its peers blocked on it are told. */
void sim__member_died(sim_world *w, int rank);
/* Releases everything blocked in w (its rendezvous points and posted messages). */
void sim__abort_world(sim_world *w);
void sim__free_world(sim_world *w);
/* A symmetric timing-only collective at its price (replay.c; the backend's replay op). */
rh_status sim__replay(rh_ctx *ctx, uint32_t seq, uint64_t what,
                      rh_status (*run)(void *arg, bool symmetric), void *arg, bool *replayed);
/* Whether nothing can change in the job's faults before `until` (faults.c), and in its world
 * (driver.c): no fault in force, none waiting for a step or a phase, none due, no host change. */
bool sim__injector_quiet(const sim_job *job, double until);
bool sim__driver_quiet(const sim_job *job, const sim_world *w, double until);
/* Whether some member of w may be dead (O(1): false while the job has lost nothing). */
bool sim__world_may_have_dead(const sim_world *w);
/* Whether some member of w is dead (a scan of the members only once the job lost one). */
bool sim__world_any_dead(const sim_world *w);

/* ---- backend (backend.c) ------------------------------------------------------------------ */
extern const rh_backend_ops sim__ops;

/* ---- driver (driver.c) -------------------------------------------------------------------- */
/* Starts the driver actor, which launches the job's workers and sees the job to its end. */
rh_status sim__driver_start(sim_job *job);
/* Worker events the driver reacts to. */
void sim__driver_worker_done(sim_job *job, sim_worker *wk);
void sim__driver_worker_died(sim_job *job, sim_worker *wk);
/* A worker asks to join the next world (blocks); RH_OK with its ctx moved into it. */
rh_status sim__driver_rendezvous(sim_job *job, sim_worker *wk);
void sim__driver_host_updates(sim_job *job, double *stamp, int *kind);
/* The faults changed what can reach the driver (a link healed, a host died). */
void sim__driver_poke(sim_job *job);
/* Whether a worker's process can reach the driver (its host is on and its links are up). */
bool sim__driver_reachable(const sim_job *job, int slot);
void sim__driver_free(sim_job *job);

/* ---- faults (faults.c) -------------------------------------------------------------------- */
rh_status sim__injector_start(sim_job *job);
/* Rank `rank` of the current world enters a phase (triggers of rank 0 fire here). */
void sim__injector_progress(sim_job *job, const rh_ctx *ctx, rh_phase phase);
/* The time of the next fault, heal or random failure, and the steps that may pass before a step
 * trigger (INFINITY / steps when none); *phase: a fault waits for a phase (nothing may be skipped). */
double sim__injector_next(const sim_job *job, int epoch, long first, long *steps, bool *phase);
/* The time the driver sees the next scheduled host change (INFINITY: none). */
double sim__driver_next_change(const sim_job *job);
/* The extra latency the degraded links in force add to a message from slot `from` to `to`. */
double sim__injector_extra_latency(const sim_job *job, int from, int to);
/* The link faults in force: whether the slot's GPU link or its node's uplink is down. */
bool sim__injector_link_down(const sim_job *job, int slot);
/* The link faults in force on the GPU links of `slots` (and their nodes' uplinks when `across`):
 * false when one is down; else the smallest bandwidth factor and the largest extra latency. */
bool sim__injector_links(const sim_job *job, const int *slots, int n, bool across,
                         double *factor, double *extra);
void sim__injector_free(sim_job *job);


#endif
