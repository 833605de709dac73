/*
 * internal.h: what the runtime's modules and its backends share, and the user never sees.
 *
 * The runtime is layered: the public calls (api.c) check arguments, apply scaling and compression,
 * and pick an algorithm (decision.c); each algorithm (one file each) is written against the
 * point-to-point ops of a backend (rh_backend_ops), which is the only part that knows the target.
 */
#ifndef REHEARSAL_INTERNAL_H
#define REHEARSAL_INTERNAL_H

#include "rehearsal.h"

#include <stdbool.h>

/* ---- cluster description (target-independent) --------------------------------------------- */

/* A GPU cluster as a scenario describes it.  Used by the simulator to build its platform and by
 * the cost model to pick algorithms.  Units: seconds, bytes per second, FLOP per second. */
typedef struct rh_cluster {
  int nodes;
  int *gpus_per_node;     /* nodes entries; owned by whoever filled the struct */
  double gpu_flops;       /* sustained training FLOP/s of one GPU */
  double intra_bw;        /* GPU <-> node switch, per direction, per GPU */
  double intra_lat;       /* GPU <-> node switch, one hop */
  double intra_backbone_bw; /* shared node fabric limit; 0 = non-blocking switch (NVSwitch) */
  int nics_per_node;
  double nic_bw;          /* one NIC, per direction */
  double nic_lat;         /* node <-> network switch, one hop */
  double reduce_bw;       /* bytes/s a GPU reduces locally; 0 = reduction is free (fused) */
  bool exact_network;     /* true: analytic CM02 network; false: SimGrid's default LV08 */
} rh_cluster;

int rh_cluster_size(const rh_cluster *cl);

/* ---- topology ---------------------------------------------------------------------------- */

/* A set of ranks that runs a collective among themselves, and this rank's index in it. */
typedef struct rh_group {
  int n;
  int me;
  const int *ranks; /* world ranks, n entries; not owned */
  uint32_t id;      /* unique per group in the job; backends key shared objects on it */
} rh_group;

/* Horovod's rank assignment, built once per job and shared read-only by every rank. */
typedef struct rh_topology {
  int size;
  int nodes;
  int max_local_size;
  int *node_of;        /* size entries */
  int *local_rank_of;  /* size entries */
  int *cross_rank_of;  /* size entries */
  int *node_size;      /* nodes entries */
  int **node_ranks;    /* nodes lists: the node's world ranks, in rank order */
  int *cross_size_of;  /* max_local_size entries: hosts that have this local rank */
  int **cross_ranks;   /* max_local_size lists: world ranks with this local rank, host order */
  int *identity;       /* size entries: 0..size-1 */
} rh_topology;

/* Builds the topology for `nodes` hosts with the given slot counts (each >= 1), ranks filling
 * the hosts in order. */
rh_status rh_topology_init(rh_topology *t, const int *gpus_per_node, int nodes);
/* Builds it from where each rank runs (node_of[r], nodes numbered in order of first
 * appearance), as a launcher placed them: local ranks count a host's ranks in rank order. */
rh_status rh_topology_init_map(rh_topology *t, const int *node_of, int size);
void rh_topology_free(rh_topology *t);
/* True when every node has the same number of ranks. */
bool rh_topology_uniform(const rh_topology *t);

/* ---- settings ---------------------------------------------------------------------------- */

typedef enum rh_setting_kind { RH_KIND_ENUM, RH_KIND_BYTES, RH_KIND_SECONDS } rh_setting_kind;

typedef struct rh_setting_def {
  const char *name;    /* scenario key under `collective:` */
  const char *env;     /* environment variable */
  rh_setting_kind kind;
  double default_value;
  const char *const *choices; /* RH_KIND_ENUM: NULL-terminated names, value = index */
  bool zero_ok;               /* numbers: zero is meaningful (else the value must be > 0) */
  const char *doc;
} rh_setting_def;

typedef struct rh_settings {
  double value[RH_SETTING_COUNT];
} rh_settings;

extern const rh_setting_def rh__setting_defs[RH_SETTING_COUNT];

/* Fills the defaults, then applies the environment.  On a malformed environment value returns
 * RH_ERR_INVALID and writes a message naming the variable into err. */
rh_status rh_settings_init(rh_settings *s, char *err, size_t errlen);
/* Parses `text` for setting id (an enum name, or a number).  RH_ERR_INVALID if it does not fit. */
rh_status rh_settings_parse(rh_setting_id id, const char *text, double *out);
/* Index of `name` among the settings, or -1. */
int rh_settings_find(const char *name);

enum { RH_ALGO_AUTO = 0, RH_ALGO_RING = 1, RH_ALGO_HIERARCHICAL = 2 };
enum { RH_BCAST_AUTO = 0, RH_BCAST_RING = 1, RH_BCAST_TREE = 2 };
enum { RH_GRAIN_AUTO = 0, RH_GRAIN_FINE = 1, RH_GRAIN_COARSE = 2 };
enum { RH_WIRE_NONE = 0, RH_WIRE_FP16 = 1 };
enum { RH_IMPL_RUNTIME = 0, RH_IMPL_NATIVE = 1 };

/* ---- backend ----------------------------------------------------------------------------- */

/* Where tensors live and how they are moved, scaled and cast there.  The host's table does it
 * with the C functions below; a GPU target's does it with CUDA kernels on one stream, ordered with
 * its collectives.  Calls may return before the work is done; `sync` waits for all of it. */
typedef struct rh_memory_ops {
  const char *name;
  bool (*owns)(const void *p); /* p is this table's memory */
  void *(*alloc)(rh_ctx *ctx, size_t bytes);
  void (*release)(rh_ctx *ctx, void *p);
  /* Any direction between host memory and this table's; blocks when host memory is involved. */
  rh_status (*copy)(rh_ctx *ctx, void *dst, const void *src, size_t bytes);
  rh_status (*scale)(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, double factor);
  /* int32 buf[i] /= n, truncating toward zero */
  rh_status (*divide)(rh_ctx *ctx, int32_t *buf, size_t count, int n);
  rh_status (*to_half)(rh_ctx *ctx, uint16_t *dst, const void *src, size_t count, rh_dtype from);
  rh_status (*from_half)(rh_ctx *ctx, void *dst, const uint16_t *src, size_t count, rh_dtype to);
  /* The n tensors one after the other into `fused` (unpack: back out of it), elements of esz. */
  rh_status (*pack)(rh_ctx *ctx, void *fused, void *const *bufs, const size_t *counts, int n,
                    size_t esz, bool unpack);
  rh_status (*sync)(rh_ctx *ctx);
} rh_memory_ops;

extern const rh_memory_ops rh__host_memory;

typedef struct rh_p2p rh_p2p;   /* a backend's point-to-point request */
typedef struct rh_task rh_task; /* a backend's background task */

/* One target.  Every wait takes a timeout and reports a dead peer as a status, so a failure
 * never hangs or aborts the job.  Backends are selected at build time. */
typedef struct rh_backend_ops {
  const char *name;
  /* Posts a send of `bytes` from `buf` to world rank `peer`.  buf NULL: timing-only message.
   * The backend copies or pins buf; the caller may reuse it once the request is waited. */
  rh_status (*isend)(rh_ctx *ctx, int peer, uint32_t tag, const void *buf, size_t bytes,
                     rh_p2p **out);
  /* Posts a receive of `bytes` into `buf` (NULL: timing-only) from world rank `peer`. */
  rh_status (*irecv)(rh_ctx *ctx, int peer, uint32_t tag, void *buf, size_t bytes, rh_p2p **out);
  /* Waits for all n requests (NULL entries skipped) until `timeout` seconds pass; releases every
   * request whatever the outcome.  Returns the first failure. */
  rh_status (*waitall)(rh_ctx *ctx, rh_p2p **reqs, size_t n, double timeout);
  double (*now)(const rh_ctx *ctx);
  rh_status (*compute)(rh_ctx *ctx, double flops);
  /* Charges the time of reducing `bytes` locally; NULL when reduction time is not modelled. */
  rh_status (*reduce_cost)(rh_ctx *ctx, size_t bytes);
  /* Zero-cost rendezvous of the group's ranks in modelled time (simulators only; NULL
   * elsewhere).  Lets an algorithm simulate one step of a uniform pattern and skip the rest.
   * `ok` false says this rank failed: the others then return RH_ERR_ABORTED.  A member that
   * never comes within `timeout` gives RH_ERR_PEER_DEAD if its host died, else RH_ERR_TIMEOUT. */
  rh_status (*model_sync)(rh_ctx *ctx, const rh_group *g, bool ok, double timeout);
  rh_status (*sleep)(rh_ctx *ctx, double seconds);
  /* Runs fn(arg) in the background on this rank; the tasks of one rank run one at a time in
   * spawn order.  join waits for it (timeout in seconds, negative: no limit) and releases the
   * task; it returns fn's status. */
  rh_status (*spawn)(rh_ctx *ctx, rh_status (*fn)(void *), void *arg, rh_task **out);
  rh_status (*join)(rh_ctx *ctx, rh_task *task, double timeout);
  /* The audit with key `key` on every rank gathers `bytes` from each into all (n * bytes) and
   * sets arrived[r] for each rank whose record came; RH_ERR_TIMEOUT when some did not within
   * `timeout` (all and arrived then hold what came).  Takes no modelled time on simulators.
   * Keys: RH_AUDIT_COLLECTIVE | seq for negotiations, RH_AUDIT_CHECK | n for checks. */
  rh_status (*audit)(rh_ctx *ctx, uint64_t key, const void *mine, size_t bytes, void *all,
                     uint8_t *arrived, double timeout);
  /* The backend's own collectives (MPI's, NCCL's), used when the `collectives` setting says
   * native; NULL: the runtime's algorithms over isend/irecv.  They work in place on buf (never
   * NULL: timing-only calls use the algorithms); op is SUM, MIN or MAX; a wait past `timeout` is
   * RH_ERR_TIMEOUT, after which the backend's communicator may be unusable. */
  rh_status (*allreduce)(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, rh_op op,
                         double timeout);
  rh_status (*broadcast)(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root,
                         double timeout);
  /* buf holds every rank's block in rank order, this rank's already in place */
  rh_status (*allgatherv)(rh_ctx *ctx, void *buf, const size_t *counts, rh_dtype dtype,
                          double timeout);
  /* A device target's memory (NULL: host memory only).  On such a target every collective on
   * real buffers runs through the native collectives above, on this memory: host buffers are
   * staged through it, so the scaling, compression and fusion run as its kernels. */
  const rh_memory_ops *device;
} rh_backend_ops;

#define RH_AUDIT_COLLECTIVE (0ull << 32)
#define RH_AUDIT_CHECK (1ull << 32)
#define RH_AUDIT_SYNC (1ull << 62) /* | group id << 32 | the rank's rendezvous count */

/* ---- per-rank context -------------------------------------------------------------------- */

struct rh_ctx {
  int rank;
  const rh_topology *topo;
  const rh_settings *settings;
  const rh_cluster *cluster; /* for the cost model; may be NULL on real hardware */
  const rh_backend_ops *ops;
  void *backend;             /* the backend's per-rank state */
  uint32_t seq;              /* collectives issued by this rank so far */
  uint32_t audits;           /* audits (negotiations and checks) issued so far */
  uint32_t syncs;            /* coarse-grain rendezvous taken so far */
  uint32_t inflight;         /* requests issued and not yet waited */
  char last_error[1024];      /* detail of the last failure, for rh_last_error */
  rh_group world, node, cross;
};

/* ---- launching -------------------------------------------------------------------------- */

typedef struct rh_launch_config {
  const rh_cluster *cluster;   /* the cluster to model (simulator), or NULL */
  const rh_settings *settings;
  const char *platform_file;   /* simulator: keep the generated platform here; NULL: temporary */
} rh_launch_config;

typedef struct rh_launch_result {
  double end_time;  /* simulated (or wall) seconds when the last rank returned */
  int failed_ranks; /* ranks whose function returned non-zero or never returned */
  int rank;         /* this process's rank; -1 when every rank runs in this process */
  const char *target; /* the backend's name: "simulator", "mpi", "nccl" */
} rh_launch_result;

/* Runs fn on every rank of the target selected at build time.  Returns 0 when every rank
 * returned 0, 1 otherwise; fills res when non-NULL.  The simulator can run once per process. */
int rh__launch(const rh_launch_config *cfg, rh_rank_fn fn, void *arg, rh_launch_result *res);

/* Writes a short list of ranks ("0-2,5") whose flags are `value` into buf. */
void rh__rank_list(const uint8_t *flags, int n, uint8_t value, char *buf, size_t len);

/* Fills a context for `rank`; the pointers must outlive it. */
void rh_ctx_init(rh_ctx *ctx, int rank, const rh_topology *topo, const rh_settings *settings,
                 const rh_cluster *cluster, const rh_backend_ops *ops, void *backend);

/* ---- data -------------------------------------------------------------------------------- */

/* dst[i] = dst[i] op src[i]; op is SUM, MIN or MAX (AVERAGE reduces as SUM). */
void rh__reduce(void *dst, const void *src, size_t count, rh_dtype dtype, rh_op op);
/* buf[i] *= factor, in the element's own type (int32 truncates toward zero). */
void rh__scale(void *buf, size_t count, rh_dtype dtype, double factor);
/* Converts between float32/float64 and fp16. */
void rh__to_half(uint16_t *dst, const void *src, size_t count, rh_dtype from);
void rh__from_half(void *dst, const uint16_t *src, size_t count, rh_dtype to);

/* ---- algorithms -------------------------------------------------------------------------- */

/* One collective's working state, as the algorithms see it.  `buf` NULL means timing-only. */
typedef struct rh_coll {
  rh_ctx *ctx;
  uint32_t tag;
  void *buf;
  size_t count;
  rh_dtype dtype; /* the type on the wire */
  rh_op op;       /* SUM, MIN or MAX */
  double timeout; /* seconds per wait */
  bool coarse;    /* timing-only and uniform: simulate one ring step, charge the rest (api.c) */
} rh_coll;

/* Splits `count` elements into n blocks (the first count % n get one more). */
void rh__blocks(size_t count, int n, size_t *counts, size_t *offsets);

/* Ring phases over the group g on blocks (counts/offsets in elements, n = g->n entries).  After
 * reduce-scatter, group index i holds the reduced block (i + 1) % n; allgather starts from that. */
rh_status rh__ring_reduce_scatter(const rh_coll *c, const rh_group *g, const size_t *counts,
                                  const size_t *offsets);
rh_status rh__ring_allgather(const rh_coll *c, const rh_group *g, const size_t *counts,
                             const size_t *offsets, int shift);

rh_status rh__allreduce_ring(const rh_coll *c);
rh_status rh__allreduce_hierarchical(const rh_coll *c);
rh_status rh__bcast_ring(const rh_coll *c, int root);
rh_status rh__bcast_tree(const rh_coll *c, int root);
/* c->buf is the whole output; this rank's block is already in place. */
rh_status rh__allgatherv_ring(const rh_coll *c, const size_t *counts);
rh_status rh__barrier_dissemination(const rh_coll *c);

/* ---- decision ---------------------------------------------------------------------------- */

typedef enum rh_algo {
  RH_ALG_ALLREDUCE_RING,
  RH_ALG_ALLREDUCE_HIERARCHICAL,
  RH_ALG_BCAST_RING,
  RH_ALG_BCAST_TREE,
} rh_algo;

/* Predicted seconds of an algorithm for `bytes` on this job's cluster (alpha-beta model). */
double rh__predict(const rh_ctx *ctx, rh_algo algo, size_t bytes);
/* The algorithm the settings ask for, or the cheapest one when they say auto. */
rh_algo rh__choose_allreduce(const rh_ctx *ctx, size_t bytes);
rh_algo rh__choose_bcast(const rh_ctx *ctx, size_t bytes);

#endif /* REHEARSAL_INTERNAL_H */
