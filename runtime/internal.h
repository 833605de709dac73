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

/* How collectives are timed on the simulator: SimGrid's analytic CM02 network (every message
 * simulated), SimGrid's TCP-calibrated LV08 network, or NCCL's own cost model (nccl_model.c). */
typedef enum rh_net_model { RH_NET_EXACT = 0, RH_NET_REALISTIC = 1, RH_NET_NCCL = 2 } rh_net_model;
extern const char *const rh_net_model_names[]; /* "exact", "realistic", "nccl"; NULL-ended */

/* GPU generations, for NCCL's per-generation protocol ceilings. */
typedef enum rh_gpu_arch {
  RH_ARCH_PASCAL, RH_ARCH_VOLTA, RH_ARCH_AMPERE, RH_ARCH_HOPPER, RH_ARCH_BLACKWELL, RH_ARCH_COUNT
} rh_gpu_arch;
extern const char *const rh_arch_names[RH_ARCH_COUNT + 1]; /* NULL-terminated */

/* The fabric the nodes' NICs meet on.  switch: one non-blocking switch; fat_tree: each node's
 * uplink on a leaf of nodes_per_leaf nodes, the leaves joined by spines through uplinks of
 * 1/oversubscription of their down bandwidth; rail: NIC k of every node (one NIC per GPU) on rail
 * k's leaf, one leaf per rail and group of nodes_per_leaf nodes (a DGX SuperPOD's scalable unit),
 * the leaves joined by spines likewise. */
typedef enum rh_topology_kind { RH_TOPO_SWITCH, RH_TOPO_FAT_TREE, RH_TOPO_RAIL } rh_topology_kind;
/* packed: the job's nodes fill leaf after leaf (a topology-aware scheduler); scattered: node i
 * on leaf i mod leaves (a fragmented cluster: every neighbour on another leaf). */
typedef enum rh_placement { RH_PLACE_PACKED, RH_PLACE_SCATTERED } rh_placement;

/* What the NCCL model needs beyond the links: how the node and the network are built. */
typedef struct rh_fabric {
  rh_gpu_arch arch;
  bool nvlink;            /* a node's GPUs talk over NVLink (else over PCIe) */
  bool nvswitch;          /* ... through NVSwitch (else point to point) */
  double intra_cap;       /* NCCL's ceiling on a node's ring bus bandwidth, bytes/s; 0: none */
  double nvls_efficiency; /* NVLS algorithm bandwidth as a fraction of intra_bw; 0: no NVLS */
  double pcie_bw;         /* one GPU's or NIC's PCIe slot, per direction; 0: not a limit */
  double nic_efficiency;  /* fraction of a NIC's line rate the transport achieves (IB, RoCE, TCP) */
  bool tcp;               /* the nodes talk over TCP sockets, not RDMA (InfiniBand, RoCE) */
  int channels;           /* NCCL channels (rings, trees) a communicator opens */
  int nodes_per_leaf;     /* nodes under one leaf switch (rail: nodes of a rail group); 0: one switch */
  double oversubscription; /* leaf down- to uplink bandwidth ratio, >= 1 */
  rh_topology_kind topology; /* how the nodes' NICs meet (the simulated network) */
  rh_placement placement; /* how the job's nodes lie on the leaves */
} rh_fabric;

/* A GPU cluster as a scenario describes it.  Used by the simulator to build its platform and by
 * the cost model to pick algorithms.  Units: seconds, bytes per second, FLOP per second. */
typedef struct rh_cluster {
  int nodes;              /* nodes the job starts on */
  int spares;             /* further nodes in the cluster, idle until a failure or discovery */
  int *gpus_per_node;     /* nodes + spares entries; owned by whoever filled the struct */
  double gpu_flops;       /* sustained training FLOP/s of one GPU */
  double intra_bw;        /* GPU <-> node switch, per direction, per GPU */
  double intra_lat;       /* GPU <-> node switch, one hop */
  double intra_backbone_bw; /* shared node fabric limit; 0 = non-blocking switch (NVSwitch) */
  int nics_per_node;
  double nic_bw;          /* one NIC, per direction */
  double nic_lat;         /* node <-> network switch, one hop */
  double reduce_bw;       /* bytes/s a GPU reduces locally; 0 = reduction is free (fused) */
  double nccl_slowdown;   /* share of a GPU's compute NCCL's kernels take while a collective runs */
  bool exact_network;     /* true: analytic CM02 network; false: SimGrid's default LV08 */
  rh_net_model net_model; /* how collectives are timed (RH_NET_NCCL: priced, not simulated) */
  rh_fabric fabric;
  double storage_write_bw, storage_read_bw; /* checkpoint storage, bytes/s; 0: free */
  double storage_latency; /* seconds per checkpoint file */
} rh_cluster;

/* GPUs of the nodes the job starts on (spares not counted). */
int rh_cluster_size(const rh_cluster *cl);
/* The first GPU slot of `node` when the cluster's GPUs are numbered node by node, spares last. */
int rh_cluster_first_slot(const rh_cluster *cl, int node);

/* The fabric (rh_topology_kind), one set of facts for the platform and the cost model.  A port is
 * where a node meets the network: its uplink (switch, fat_tree: all its NICs together) or one of
 * its NICs (rail, port node * rails + rail); a leaf port is a leaf's uplink bundle to the spines
 * (fat_tree: one per leaf; rail: one per leaf and rail).  A flow between nodes leaves through the
 * port of the destination GPU's rail (NCCL's PXN) and crosses the spines between leaves. */
int rh_fabric_rails(const rh_cluster *cl);        /* 1, or the NICs of a node under rail */
int rh_fabric_ports(const rh_cluster *cl);        /* nodes (spares included) x rails */
int rh_fabric_leaves(const rh_cluster *cl);       /* leaves (per rail); 0 under switch */
int rh_fabric_leaf_of(const rh_cluster *cl, int node);
double rh_fabric_port_bw(const rh_cluster *cl);   /* a port's bandwidth, per direction */
double rh_fabric_leaf_bw(const rh_cluster *cl);   /* a leaf port's, per direction */
/* The ports and leaf ports (-1: none) a flow from node a to GPU local_b of node b crosses. */
typedef struct rh_fabric_path { int out, in, leaf_out, leaf_in; } rh_fabric_path;
rh_fabric_path rh_fabric_route(const rh_cluster *cl, int a, int b, int local_b);

/* ---- failures and elastic training (target-independent descriptions) ---------------------- */

typedef enum rh_fault_kind {
  RH_FAULT_HOST_CRASH,    /* a node stops, with every GPU on it */
  RH_FAULT_GPU_CRASH,     /* one GPU's process dies */
  RH_FAULT_HANG,          /* one GPU's process stops answering but stays alive */
  RH_FAULT_LINK_DOWN,     /* a link carries nothing, for a window or for good */
  RH_FAULT_LINK_DEGRADED, /* a link's bandwidth times factor and latency plus extra, for a window */
  RH_FAULT_STRAGGLER,     /* a GPU, or every GPU of a node, computes at factor of its speed */
  RH_FAULT_KIND_COUNT
} rh_fault_kind;

extern const char *const rh_fault_names[RH_FAULT_KIND_COUNT + 1]; /* NULL-terminated */

/* Where a rank is, for triggers that fire "during" something. */
typedef enum rh_phase {
  RH_PHASE_NONE = 0,
  RH_PHASE_ALLREDUCE,
  RH_PHASE_BROADCAST,
  RH_PHASE_ALLGATHER,
  RH_PHASE_COMMIT,     /* rh_state_commit */
  RH_PHASE_SYNC,       /* the state broadcast from rank 0 after a (re)start */
  RH_PHASE_RENDEZVOUS, /* re-forming the world after a failure or a host change */
  RH_PHASE_STEP,       /* rh_step_begin */
  RH_PHASE_REDUCE_SCATTER,
  RH_PHASE_COUNT
} rh_phase;

extern const char *const rh_phase_names[RH_PHASE_COUNT + 1]; /* "-", allreduce, ...; NULL-ended */

typedef struct rh_fault {
  rh_fault_kind kind;
  int node;             /* cluster node, 0-based (spares follow the job's nodes) */
  int gpu;              /* GPU on that node; -1: the whole node */
  bool uplink;          /* link faults: the node's network uplink; else the GPU's own link */
  double at;            /* trigger: simulated seconds; < 0 when the trigger is a step */
  int epoch;            /* trigger: rank 0 begins this step (0-based); epoch < 0: not set */
  long step;
  rh_phase during;      /* then the first such phase from the trigger on (NONE: the trigger) */
  double after;         /* seconds after that */
  double duration;      /* window; INFINITY: for good */
  double factor;        /* degraded bandwidth or straggler speed, as a fraction in (0, 1] */
  double extra_latency; /* seconds added to a degraded link */
  int line;             /* in the scenario, for reports; 0 for random failures */
} rh_fault;

typedef struct rh_fault_plan {
  const rh_fault *faults; /* scripted, in scenario order */
  int nfaults;
  double gpu_mtbf, node_mtbf; /* seconds between random failures of one GPU / one node; 0: none */
  uint64_t seed;
} rh_fault_plan;

/* Elastic host discovery: at `at` seconds, `node` joins the job's hosts or leaves them. */
typedef struct rh_host_change {
  double at;
  int node;
  bool added;
  int line; /* in the scenario, for reports; 0: none */
} rh_host_change;

typedef struct rh_elastic_config {
  int min_np, max_np;        /* max_np 0: no cap */
  double rendezvous;         /* seconds the driver takes to re-form the world */
  double rendezvous_timeout; /* how long it waits for a worker that does not come back */
  double slots_timeout;      /* how long it waits for min_np slots (HOROVOD_ELASTIC_TIMEOUT) */
  double worker_start;       /* a new worker's start-up, process to rendezvous */
  double discovery_interval; /* how often the driver asks for the host list */
  double commit_bw;          /* bytes per second of a commit's copy of the state; 0: free */
  const rh_host_change *changes;
  int nchanges;
} rh_elastic_config;

typedef struct rh_restart_config {
  double relaunch;  /* seconds from the job's end to its relaunch (a scheduler's requeue) */
  int max_restarts;
} rh_restart_config;

/* ---- what happened (the job log) ---------------------------------------------------------- */

typedef enum rh_event_kind {
  RH_EV_FAULT,    /* an injected fault took effect: fault, node, gpu */
  RH_EV_HEALED,   /* a fault's window closed */
  RH_EV_NOTICED,  /* a rank's collective failed (its first in this world): status, text */
  RH_EV_RESTORED, /* a rank restored the last commit: a = the commit's time, b = steps rolled back */
  RH_EV_WORLD,    /* a world formed: generation, a = size, text = the nodes */
  RH_EV_SYNCED,   /* rank 0 finished sending the state: a = when the sync began */
  RH_EV_LEFT,     /* a node left the job: text says why (failed, removed, unreachable) */
  RH_EV_HOSTS,    /* discovery changed the hosts: a = 1 added, 2 removed, 3 both */
  RH_EV_STOPPED,  /* the launch ended with a failure */
  RH_EV_RELAUNCH, /* the job was started again: a = size */
  RH_EV_ENDED,    /* the job ended: status (RH_ERR_TOO_FEW, ...; RH_OK: text says why, as when a
                   * fixed-size job reached its max_restarts) */
  RH_EV_RESET,    /* rank 0 left its world for a rendezvous: a = 1 after a failure, 2 hosts;
                   * b = 1 when the new world starts without the state's sync (hosts removed) */
} rh_event_kind;

typedef struct rh_event {
  rh_event_kind kind;
  double time;
  uint32_t generation;
  int rank;        /* -1: not a rank's */
  int node, gpu;   /* -1: not a place */
  int fault;       /* index into the plan's scripted faults; -2 - k: random failure k (the
                    * log's random[k]); -1: none */
  rh_status status;
  int epoch;       /* where the rank (or rank 0) was: the last step begun, 0-based; -1 none */
  long step;
  double a, b;     /* figures, by kind */
  char text[240];
} rh_event;

/* A growing list of events in time order of logging; owned by the launch that made it. */
typedef struct rh_joblog {
  rh_event *events;
  size_t n, cap;
  rh_fault *random; /* the random failures drawn, in order (their events have fault -1) */
  size_t nrandom, caprandom;
} rh_joblog;

void rh__log(rh_joblog *log, const rh_event *e);
void rh__joblog_free(rh_joblog *log);
/* The index of the event that says `node` left the job before event k, or log->n: a fault of
 * such a node hits no worker of the job (a node that left never comes back to it). */
size_t rh__joblog_left(const rh_joblog *log, size_t k, int node);

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
  bool uniform;        /* every node has the same number of ranks */
  int *replica_ranks;  /* the replica groups of shard groups of replica_of ranks, one list after
                        * another (formed on the first rh__ctx_set_world that needs them) */
  int replica_of;
  /* decision.c: the pace of the rings over the groups above (O(ranks) to find, asked for by
   * every collective of every rank), shared by the ranks that hold the topology */
  struct rh_pace_cache *paces;
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
/* dst = a, b and at most c_max bytes of c, cut to len - 1 and NUL-terminated (a, b, c may be
 * NULL): snprintf's work for the names every rank writes for every collective, without its cost
 * (its frame touched fresh pages of each simulated rank's stack). */
static inline void rh__cat(char *dst, size_t len, const char *a, const char *b, const char *c,
                           size_t c_max) {
  size_t k = 0;
  for (; a && *a && k + 1 < len; a++) dst[k++] = *a;
  for (; b && *b && k + 1 < len; b++) dst[k++] = *b;
  for (size_t i = 0; c && c[i] && i < c_max && k + 1 < len; i++) dst[k++] = c[i];
  if (len) dst[k] = 0;
}

/* Seconds to write (or read) `bytes` of checkpoint on the cluster's storage: its bandwidth and
 * latency (rh_storage_io charges them to a rank). */
double rh__storage_seconds(const rh_cluster *cl, double bytes, bool write);
/* splitmix64's finalizer: every bit of x moves every bit of the result (hash tables' buckets). */
static inline uint64_t rh__mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
/* splitmix64: the next number of the stream whose state is *s.  The simulator's injector and the
 * real processes draw random failures from it, so that both draw the same. */
static inline uint64_t rh__splitmix64(uint64_t *s) { return rh__mix64(*s += 0x9e3779b97f4a7c15ull); }
/* A uniform double in [0, 1) from the stream: its top 53 bits. */
static inline double rh__uniform(uint64_t *s) { return (double)(rh__splitmix64(s) >> 11) * 0x1.0p-53; }
/* decision.c: a topology's cache of ring paces, for about `groups` groups. */
struct rh_pace_cache *rh__pace_cache_new(size_t groups);
void rh__pace_cache_free(struct rh_pace_cache *c);

/* ---- settings ---------------------------------------------------------------------------- */

typedef enum rh_setting_kind { RH_KIND_ENUM, RH_KIND_BYTES, RH_KIND_SECONDS } rh_setting_kind;

/* The largest values of the numeric settings: sizes a buffer of them can have, times that still
 * mean something (a collective's wait of 11 days, a fusion cycle of an hour). */
#define RH_SETTING_MAX_BYTES 1099511627776.0 /* 1 TiB */
#define RH_SETTING_MAX_TIMEOUT 1e6           /* s */
#define RH_SETTING_MAX_CYCLE 3600.0          /* s */

typedef struct rh_setting_def {
  const char *name;    /* scenario key under `collective:` */
  const char *env;     /* environment variable */
  rh_setting_kind kind;
  double default_value;
  const char *const *choices; /* RH_KIND_ENUM: NULL-terminated names, value = index */
  bool zero_ok;               /* numbers: zero is meaningful (else the value must be > 0) */
  const char *doc;
  double max;                 /* numbers: the largest value (bytes are also whole) */
} rh_setting_def;

/* Where a setting's value came from; a later source wins (the command line last). */
typedef enum rh_setting_source {
  RH_SOURCE_DEFAULT = 0, RH_SOURCE_ENVIRONMENT, RH_SOURCE_SCENARIO, RH_SOURCE_COMMAND_LINE
} rh_setting_source;
extern const char *const rh_setting_source_names[];

typedef struct rh_settings {
  double value[RH_SETTING_COUNT];
  unsigned char source[RH_SETTING_COUNT]; /* rh_setting_source */
  /* RH_SOURCE_ENVIRONMENT: the variable that gave the value (the setting's RH_* one, or Horovod's
   * or NCCL's: HOROVOD_FUSION_THRESHOLD, NCCL_PROTO...), a static string; else NULL */
  const char *variable[RH_SETTING_COUNT];
  /* The variable (as in `variable`) that gave setting i a value the scenario or the command line
   * then replaced, later in the precedence: it is named as overridden, not dropped unseen; NULL
   * where none did */
  const char *overridden[RH_SETTING_COUNT];
  /* NCCL variables that gave a setting the scenario cannot use (NCCL_ALGO=Tree without
   * network_model: nccl): the setting went back to its default, and they are named as ignored */
  const char *unused[2];
} rh_settings;

extern const rh_setting_def rh__setting_defs[RH_SETTING_COUNT];

/* Fills the defaults, then applies the environment: the Horovod and NCCL variables that mean a
 * setting (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME in ms, HOROVOD_HIERARCHICAL_ALLREDUCE,
 * NCCL_ALGO, NCCL_PROTO), then the RH_* ones over them.  On a malformed value of either returns
 * RH_ERR_INVALID and writes a message naming the variable into err. */
rh_status rh_settings_init(rh_settings *s, char *err, size_t errlen);
/* The HOROVOD_* and NCCL_* variables set (non-empty) that nothing reads here: without a
 * counterpart (NCCL_DEBUG), or with a value that has none (NCCL_ALGO=Tree,Ring), less the names in
 * also_read (NULL-terminated; may be NULL), which the caller reads itself, and with the unused ones
 * of s (may be NULL).  Sorted, each once, as a NULL-terminated array in one allocation (free()
 * it); NULL when out of memory. */
char **rh_settings_ignored(const rh_settings *s, const char *const *also_read);
/* Parses `text` for setting id (an enum name, or a number).  RH_ERR_INVALID if it does not fit. */
rh_status rh_settings_parse(rh_setting_id id, const char *text, double *out);
/* Index of `name` among the settings, or -1. */
int rh_settings_find(const char *name);

enum { RH_ALGO_AUTO = 0, RH_ALGO_RING = 1, RH_ALGO_HIERARCHICAL = 2, RH_ALGO_TREE = 3,
       RH_ALGO_NVLS = 4 };
enum { RH_PROTO_AUTO = 0, RH_PROTO_LL = 1, RH_PROTO_LL128 = 2, RH_PROTO_SIMPLE = 3 };
enum { RH_BCAST_AUTO = 0, RH_BCAST_RING = 1, RH_BCAST_TREE = 2 };
enum { RH_GRAIN_AUTO = 0, RH_GRAIN_FINE = 1, RH_GRAIN_COARSE = 2 };
enum { RH_WIRE_NONE = 0, RH_WIRE_FP16 = 1 };
enum { RH_IMPL_RUNTIME = 0, RH_IMPL_NATIVE = 1 };

/* Host changes seen by the elastic driver (Horovod's HostUpdateResult bits). */
enum { RH_HOSTS_ADDED = 1, RH_HOSTS_REMOVED = 2 };

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
  /* Work the caller has priced: `flops` that the timing model says take `seconds`.  NULL: the
   * backend's compute at the cluster's GPU rate spends the seconds (the simulator, the CPU
   * processes).  A target that runs FLOPs for real runs the flops: their time is the measure. */
  rh_status (*priced)(rh_ctx *ctx, double flops, double seconds);
  /* Charges the time of reducing `bytes` locally; NULL when reduction time is not modelled. */
  rh_status (*reduce_cost)(rh_ctx *ctx, size_t bytes);
  /* Zero-cost rendezvous of the group's ranks in modelled time (simulators only; NULL
   * elsewhere).  Lets an algorithm simulate one step of a uniform pattern and skip the rest.
   * `ok` false says this rank failed: the others then return RH_ERR_ABORTED.  A member that
   * never comes within `timeout` gives RH_ERR_PEER_DEAD if its host died, else RH_ERR_TIMEOUT.
   * `value` (NULL: none): this rank's figure in, the largest of the group's out. */
  rh_status (*model_sync)(rh_ctx *ctx, const rh_group *g, bool ok, double *value, double timeout);
  /* A timing-only collective of the world that the coarse grain may run, number `seq`, offered
   * for replay (simulators; NULL elsewhere): when every rank comes at the same instant and the
   * price of `what` (a digest of all its time depends on) was learnt earlier in an unchanged
   * job, each rank waits that price and *replayed is set.  Otherwise run(arg, symmetric) runs
   * it: symmetric when all ranks came together and nothing can change in the job meanwhile (its
   * time may then become the price), false when something breaks the symmetry (a late rank, a
   * fault in force or due, a world changing). */
  rh_status (*replay)(rh_ctx *ctx, uint32_t seq, uint64_t what,
                      rh_status (*run)(void *arg, bool symmetric), void *arg, bool *replayed);
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
  /* The audit honours RH_AUDIT_ROOT in its key: all then receives rank 0's record alone. */
  bool audit_root;
  /* The audit folded as members arrive, as one coordinator compares what each worker brings
   * (NULL: use audit).  When every record came and equals this rank's, nothing is copied and
   * *all and *arrived stay NULL; otherwise (a record differs, or some did not come) they are
   * allocated for the caller, who frees them, and filled as audit fills them.  O(bytes) per
   * member when all agree, however large the world. */
  rh_status (*audit_folded)(rh_ctx *ctx, uint64_t key, const void *mine, size_t bytes, void **all,
                            uint8_t **arrived, double timeout);
  /* The audit folded to the largest of each of `count` values (at most RH_AUDIT_MAX_VALUES):
   * values holds this rank's in and the group's largest out, with nothing gathered, so that a
   * check needing a few extremes costs O(count) per member however large the world (NULL: the
   * runtime gathers the records and folds them).  *arrived is NULL unless some member did not
   * come; it is then allocated for the caller and filled as audit fills arrived. */
  rh_status (*audit_max)(rh_ctx *ctx, uint64_t key, double *values, size_t count,
                         uint8_t **arrived, double timeout);
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
  /* buf holds size blocks of count elements; on return block `rank` holds their reduction */
  rh_status (*reduce_scatter)(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, rh_op op,
                              double timeout);
  /* A device target's memory (NULL: host memory only).  On such a target every collective on
   * real buffers runs through the native collectives above, on this memory: host buffers are
   * staged through it, so the scaling, compression and fusion run as its kernels. */
  const rh_memory_ops *device;

  /* ---- failures and elastic training (NULL where the target has none) ---- */
  /* This rank gives up on its world after a failed collective: every member waiting on it is
   * released (its waits return RH_ERR_ABORTED), as an aborted NCCL communicator and a closed
   * controller connection tell the others at once; a target that cannot release them (MPI)
   * reports the failure there and then. */
  void (*abandon)(rh_ctx *ctx);
  /* Leaves the world and joins the next one the elastic driver forms (Horovod's shutdown and
   * init); blocks until it is formed, then ctx holds the new rank, size and topology.
   * RH_ERR_TOO_FEW, RH_ERR_EXCLUDED, or RH_ERR_UNSUPPORTED where a world cannot be re-formed
   * inside the process (the job is relaunched instead). */
  rh_status (*rendezvous)(rh_ctx *ctx);
  /* The newest host change the driver has seen: its time stamp (0: none) and RH_HOSTS_* bits. */
  void (*host_updates)(rh_ctx *ctx, double *stamp, int *kind);
  /* This rank enters `phase` (failure triggers fire here). */
  void (*progress)(rh_ctx *ctx, rh_phase phase);
  /* A collective starts (on) or ends (off) on this rank: its kernels share the GPU, so compute
   * runs at 1 - cluster->nccl_slowdown of its speed meanwhile (simulators only; NULL elsewhere). */
  void (*occupy)(rh_ctx *ctx, bool on);
  /* The links the world's collectives cross (simulators only; NULL elsewhere): false when one of
   * them is down, else the worst bandwidth factor (<= 1) and extra latency in force on them; the
   * nodes' uplinks count when `across_nodes`. */
  bool (*links)(rh_ctx *ctx, bool across_nodes, double *bw_factor, double *extra_latency);
  /* Charges modelled seconds (simulators only): a commit's copy, a checkpoint's write. */
  rh_status (*charge)(rh_ctx *ctx, double seconds);
  /* How many of `steps` steps of `seconds` (a mean), from step `first` of `epoch`, may be
   * charged without running them before a scheduled event, `slack` seconds more of room left
   * (simulators only; NULL elsewhere). */
  long (*repeat_bound)(rh_ctx *ctx, int epoch, long first, long steps, double seconds,
                       double slack);
} rh_backend_ops;

#define RH_AUDIT_COLLECTIVE (0ull << 32)
#define RH_AUDIT_CHECK (1ull << 32)
#define RH_AUDIT_SYNC (1ull << 62) /* | group id << 32 | the rank's rendezvous count */
#define RH_AUDIT_ROOT (1ull << 61) /* with RH_AUDIT_CHECK: rank 0's record alone */
#define RH_AUDIT_DATA (2ull << 32) /* | seq: a priced collective's numbers (coll_priced.c) */
#define RH_AUDIT_MAX_VALUES 4 /* the most values one audit_max folds */

/* ---- timeline (trace.c) ---------------------------------------------------------------------- */

/* What each rank did, for `--timeline FILE`: every worker (a rank's actor on the simulator, its
 * process on real targets) records into a recorder of its own, and the launch writes them all at
 * its end as one Chrome trace / Perfetto JSON file.  Times are the job's clock (ops->now);
 * recording never charges modelled time.  Without a timeline ctx->trace is NULL and every call
 * below returns at once. */
typedef struct rh_timeline rh_timeline; /* a launch's: its recorders, and how much each keeps */
typedef struct rh_tracer rh_tracer;     /* one worker's */

/* A worker's two tracks: its own work (compute, waits, commits, failures) and its collectives,
 * which run in the background beside that work. */
enum { RH_TRACK_MAIN = 0, RH_TRACK_COMM = 1, RH_TRACKS = 2 };
/* The link groups a phase of a collective crosses (the node's NVLink, its network uplink). */
enum { RH_LINK_NVLINK = 1, RH_LINK_UPLINK = 2 };

/* Events kept per job by default, shared among its ranks (each keeps at least 256). */
#define RH_TIMELINE_EVENTS 400000L

/* A timeline for a job of `ranks` ranks on `target` ("simulator", "mpi", "nccl"); `simulated`:
 * its clock is simulated time (else wall time since the launch).  events: per rank (0: the
 * default).  NULL when out of memory. */
rh_timeline *rh__timeline_new(const char *target, bool simulated, int ranks, long events);
void rh__timeline_free(rh_timeline *tl);
/* A recorder for the worker of ctx (its current world), on GPU `gpu` of `node`, cluster slot
 * `slot` (the GPU's index in the cluster; on real targets the process's).  NULL: no memory. */
rh_tracer *rh__timeline_add(rh_timeline *tl, const rh_ctx *ctx, int node, int slot, int gpu);
/* Whether FILE can be written (its folder exists and takes files); else why, into err. */
bool rh__timeline_path_ok(const char *path, char *err, size_t len);
/* The timeline's events as a fragment of a JSON array (no brackets): every recorder's tracks,
 * the link tracks of their nodes, and the job log's events (log NULL: none; plan resolves its
 * faults).  Open slices are ended where their recorder last recorded.  The caller frees it. */
char *rh__timeline_part(rh_timeline *tl, const rh_fault_plan *plan, const rh_joblog *log,
                        size_t *len);
/* Writes FILE whole or not at all: the n fragments (from one rh__timeline_part per process) in
 * one trace, with what tl kept and left out said in its metadata.  RH_ERR_IO with a message. */
rh_status rh__timeline_write(const rh_timeline *tl, const char *path, char *const *parts,
                             const size_t *lens, int n);

/* A slice on a track: begins at `at` (NAN: now), ends at `at` (NAN: now); slices nest.  links:
 * RH_LINK_* bits, for the link tracks (collectives' phases). */
void rh__trace_begin(rh_ctx *ctx, int track, const char *cat, const char *name, double at,
                     unsigned links);
void rh__trace_end(rh_ctx *ctx, int track, double at);
/* A figure, a word or a long text (detail) of the newest open slice, or of the instant just
 * recorded when none is open. */
void rh__trace_num(rh_ctx *ctx, int track, const char *key, double value);
void rh__trace_text(rh_ctx *ctx, int track, const char *key, const char *value);
void rh__trace_detail(rh_ctx *ctx, int track, const char *text);
/* A moment on a track, with a long text (NULL: none): one call, as another thread may record on
 * the track meanwhile (a collective's failure noticed in the background). */
void rh__trace_mark(rh_ctx *ctx, int track, const char *cat, const char *name, const char *detail);
/* A phase of a collective over group g begins on the collectives' track ("reduce-scatter" over
 * a node's group is "local reduce-scatter"), with the links the group crosses; ends with
 * rh__trace_end(ctx, RH_TRACK_COMM, NAN). */
void rh__trace_phase(rh_ctx *ctx, const rh_group *g, const char *what);
/* This rank began a step (rh_step_begin). */
void rh__trace_step(rh_ctx *ctx);
/* This rank came out of a rendezvous begun at `since` with status st (ctx in its new world on
 * RH_OK): the rendezvous, then the recovery up to the next step. */
void rh__trace_world(rh_ctx *ctx, double since, rh_status st);

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
  double round;              /* Horovod's cycle: when this rank's last round of collectives began */
  char last_error[1024];      /* detail of the last failure, for rh_last_error */
  rh_group world, node, cross;
  int shard_size;            /* rh_set_shard_group's (0: a node's ranks) */
  rh_group shard, replica;   /* the scopes' groups in this world (n 0: not formed) */
  /* failures and elastic training */
  uint32_t generation;       /* worlds formed before this rank's current one */
  int restarts;              /* relaunches of the job before this worker started */
  bool broken;               /* a collective of this world failed: the rest return ABORTED */
  const rh_elastic_config *elastic; /* NULL: a fixed-size job */
  rh_joblog *log;            /* where events go; NULL: nowhere */
  int epoch;                 /* the last step this rank began (rh_step_begin); -1: none yet */
  long step;
  long steps_begun;          /* steps begun in this worker's life */
  rh_tracer *trace;          /* this worker's timeline recorder; NULL: no timeline (trace.c) */
};

/* ---- launching -------------------------------------------------------------------------- */

typedef struct rh_launch_config {
  const rh_cluster *cluster;   /* the cluster to model (simulator), or NULL */
  const rh_settings *settings;
  const char *platform_file;   /* simulator: keep the generated platform here; NULL: temporary */
  const rh_fault_plan *faults;       /* NULL: nothing fails on purpose */
  const rh_elastic_config *elastic;  /* NULL: a fixed-size job */
  const rh_restart_config *restart;  /* NULL: a failed launch ends the job */
  const char *timeline;        /* write what each rank did here, as a Chrome trace (trace.c);
                                * NULL: no timeline */
  long timeline_events;        /* events kept per rank before the timeline summarises; 0: the
                                * default (RH_TIMELINE_EVENTS shared by the job's ranks) */
} rh_launch_config;

typedef struct rh_launch_result {
  double end_time;  /* simulated (or wall) seconds when the last rank returned */
  int failed_ranks; /* ranks of the last launch whose function returned non-zero or never did */
  int rank;         /* this process's rank; -1 when every rank runs in this process */
  const char *target; /* the backend's name: "simulator", "mpi", "nccl" */
  rh_joblog *log;   /* what happened; the caller frees it with rh__joblog_free and free */
  int size;         /* ranks of the last world */
  long replayed;    /* collectives replayed at their price (simulator: sim/replay.c) */
} rh_launch_result;

/* Runs fn on every rank of the target selected at build time.  Returns 0 when every rank
 * returned 0, 1 otherwise; fills res when non-NULL.  The simulator can run once per process. */
int rh__launch(const rh_launch_config *cfg, rh_rank_fn fn, void *arg, rh_launch_result *res);

/* Writes a short list of ranks ("0-2,5") whose flags are `value` into buf. */
void rh__rank_list(const uint8_t *flags, int n, uint8_t value, char *buf, size_t len);

/* Fills a context for `rank`; the pointers must outlive it. */
void rh_ctx_init(rh_ctx *ctx, int rank, const rh_topology *topo, const rh_settings *settings,
                 const rh_cluster *cluster, const rh_backend_ops *ops, void *backend);
/* Moves a context into a new world (an elastic reset): rank, topology and groups change, the
 * collective counters start again and the broken flag clears. */
void rh__ctx_set_world(rh_ctx *ctx, int rank, const rh_topology *topo, uint32_t generation);

/* Horovod's assignment of ranks to hosts (runner/common/util/hosts.py): hosts in `order` (node
 * indices), each with slots[node] GPUs, fill ranks in turn up to max_np (0: no cap).  Writes the
 * node of every rank into node_of (room for the sum of slots) and returns the world size. */
int rh__assign_hosts(const int *order, int nhosts, const int *slots, int max_np, int *node_of);

/* Records an event of this rank (time, rank, generation and step filled in). */
void rh__log_rank(rh_ctx *ctx, rh_event_kind kind, rh_status status, double a, double b,
                  const char *text);

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
  uint32_t seq;   /* the collective's number in this world */
  bool coarse;    /* timing-only and uniform: simulate one ring step, charge the rest (api.c) */
  const rh_group *group; /* the ranks it runs over (a scoped collective); NULL: the world */
} rh_coll;

/* The ranks collective c runs over. */
static inline const rh_group *rh__coll_group(const rh_coll *c) {
  return c->group ? c->group : &c->ctx->world;
}

/* How a buffer is cut into a group's n blocks: listed (`counts`, `offsets`: allgatherv's
 * blocks), or, with counts NULL, `count` elements from element `base` split evenly, the first
 * count % n blocks one longer, block i of the group being the split's block (i + rot) % n (a
 * reduce-scatter that leaves group index i its own block i shifts by n - 1).  An even split is
 * worked out block by block, so a rank of a 16,384-GPU ring holds no world-sized arrays while it
 * waits. */
typedef struct rh_blocks {
  const size_t *counts, *offsets;
  size_t count, base;
  int n, rot;
} rh_blocks;

static inline rh_blocks rh__even_blocks(size_t count, int n, size_t base) {
  rh_blocks b = {NULL, NULL, count, base, n, 0};
  return b;
}
static inline size_t rh__block_count(const rh_blocks *b, int i) {
  if (b->counts) return b->counts[i];
  size_t k = (size_t)((i + b->rot) % b->n);
  return b->count / (size_t)b->n + (k < b->count % (size_t)b->n ? 1 : 0);
}
static inline size_t rh__block_offset(const rh_blocks *b, int i) {
  if (b->offsets) return b->offsets[i];
  size_t q = b->count / (size_t)b->n, r = b->count % (size_t)b->n;
  size_t k = (size_t)((i + b->rot) % b->n);
  return b->base + k * q + (k < r ? k : r);
}

/* Ring phases over the group g on blocks (in elements, b->n = g->n of them).  After
 * reduce-scatter, group index i holds the reduced block (i + 1) % n; allgather starts from that. */
rh_status rh__ring_reduce_scatter(const rh_coll *c, const rh_group *g, const rh_blocks *b);
rh_status rh__ring_allgather(const rh_coll *c, const rh_group *g, const rh_blocks *b, int shift);

rh_status rh__allreduce_ring(const rh_coll *c);
rh_status rh__allreduce_hierarchical(const rh_coll *c);
rh_status rh__bcast_ring(const rh_coll *c, int root);
rh_status rh__bcast_tree(const rh_coll *c, int root);
/* c->buf is the whole output; this rank's block is already in place. */
rh_status rh__allgatherv_ring(const rh_coll *c, const size_t *counts);
/* c->buf holds world.n blocks of c->count / world.n elements; after it, block `rank` is reduced. */
rh_status rh__reduce_scatter_ring(const rh_coll *c);
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

/* ---- NCCL's cost model (nccl_model.c) ------------------------------------------------------ */

typedef enum rh_nccl_coll {
  RH_NC_ALLREDUCE, RH_NC_BROADCAST, RH_NC_ALLGATHER, RH_NC_REDUCE_SCATTER, RH_NC_COUNT
} rh_nccl_coll;
typedef enum rh_nccl_algo { RH_NA_TREE, RH_NA_RING, RH_NA_NVLS, RH_NA_COUNT } rh_nccl_algo;
typedef enum rh_nccl_proto { RH_NP_LL, RH_NP_LL128, RH_NP_SIMPLE, RH_NP_COUNT } rh_nccl_proto;
extern const char *const rh_nccl_algo_names[RH_NA_COUNT];  /* "tree", "ring", "nvls" */
extern const char *const rh_nccl_proto_names[RH_NP_COUNT]; /* "ll", "ll128", "simple" */

/* The price of one collective: seconds = latency + bytes / bandwidth + fill.  bandwidth is the
 * algorithm bandwidth (bytes/s of the user's buffer), bus the bus bandwidth it stands for. */
typedef struct rh_nccl_price {
  double latency, bandwidth, bus, fill, seconds; /* seconds NaN: not available here */
  int hops; /* messages in a row along the critical path */
} rh_nccl_price;

/* The price of `coll` on `bytes` over `ranks` ranks on `nodes` nodes (ppn = ranks / nodes) of
 * the cluster, by algorithm and protocol. */
rh_nccl_price rh__nccl_price(const rh_cluster *cl, rh_nccl_coll coll, int ranks, int nodes,
                             rh_nccl_algo algo, rh_nccl_proto proto, double bytes);
/* nccl-tests' busbw / algbw factor: 2(p-1)/p for allreduce, (p-1)/p for allgather and
 * reduce-scatter, 1 for broadcast. */
double rh__nccl_bus_factor(rh_nccl_coll coll, int ranks);
/* The largest bus bandwidth `algo` can show on this cluster: its bottleneck link's. */
double rh__nccl_bus_bound(const rh_cluster *cl, int ranks, int nodes, rh_nccl_algo algo);

/* What runs a collective and what it costs, by the model that times the job: for the exact and
 * realistic networks one of the runtime's algorithms (algo) priced by the alpha-beta model; for
 * the NCCL model NCCL's algorithm and protocol (nalgo, nproto; nalgo -1 with algo
 * HIERARCHICAL: Horovod's hierarchical allreduce, three NCCL collectives). */
typedef struct rh_plan {
  rh_algo algo;
  int nalgo, nproto; /* -1: not an NCCL price */
  double seconds;    /* NaN without a cluster description */
  double latency;    /* the part of seconds that does not depend on bandwidth */
  int hops;          /* messages in a row along the critical path (a degraded link's extra
                      * latency is paid on each) */
} rh_plan;
rh_plan rh__plan(const rh_ctx *ctx, rh_nccl_coll coll, size_t bytes);
/* The same for a collective over one of the scope's groups, every group at once (rh_scope):
 * a node's ranks on its NVLink; the ranks of one local rank across nodes, the local ranks' rings
 * sharing the node's NICs (as Horovod's hierarchical allreduce's middle step).  NaN for a group
 * other than the world where the collectives are not priced by NCCL's model. */
rh_plan rh__plan_in(const rh_ctx *ctx, int scope, rh_nccl_coll coll, size_t bytes);
/* "ring/simple", "hierarchical", "tree" ... into buf. */
const char *rh__plan_name(const rh_plan *plan, char *buf, size_t len);

/* Runs the world's collective c at the NCCL model's price (coll_priced.c): the ranks meet, the
 * plan's seconds pass, they meet again; real buffers cross through the zero-cost audit. */
rh_status rh__coll_priced(const rh_coll *c, rh_nccl_coll coll, const rh_plan *plan, int root,
                          const size_t *counts);

#endif /* REHEARSAL_INTERNAL_H */
