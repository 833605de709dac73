/*
 * rehearsal.h: the whole public API of the rehearsal collective runtime.
 *
 * A training program is one function that runs on every rank.  It talks to the other ranks only
 * through the calls below, so the same program runs on a simulated cluster (one SimGrid actor per
 * rank, all in one process) and on real machines (one process per rank).  Nothing here names a
 * backend type; per-rank state lives in the rh_ctx handed to the rank function.
 */
#ifndef REHEARSAL_H
#define REHEARSAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ------------------------------------------------------------------------------- */

/* One status type for every call.  RH_OK is zero, errors are negative.  A peer that died is an
 * ordinary status (RH_ERR_PEER_DEAD), never an abort of the process. */
typedef enum rh_status {
  RH_OK = 0,
  RH_ERR_INVALID = -1,     /* an argument is out of range or inconsistent */
  RH_ERR_NOMEM = -2,       /* an allocation failed */
  RH_ERR_TIMEOUT = -3,     /* a wait ran past its deadline (a peer is hung or absent) */
  RH_ERR_PEER_DEAD = -4,   /* a peer rank, its host or the link to it died */
  RH_ERR_MISMATCH = -5,    /* ranks issued different collectives (shape, type, op, root) */
  RH_ERR_BACKEND = -6,     /* the backend library reported an error it has no mapping for */
  RH_ERR_UNSUPPORTED = -7, /* the operation is not available on this target or for this type */
  RH_ERR_IO = -8,          /* a file could not be read or written */
  RH_ERR_ABORTED = -9,     /* a peer abandoned the collective after a failure of its own */
  RH_ERR_HOSTS_CHANGED = -10, /* elastic: hosts were added or removed; the world is re-formed */
  RH_ERR_TOO_FEW = -11,    /* elastic: fewer workers than min_np remain; the job ends */
  RH_ERR_EXCLUDED = -12,   /* elastic: this worker's host left the job (failed or removed) */
} rh_status;

/* A static, human-readable string for a status; never NULL. */
const char *rh_status_string(rh_status status);

/* ---- types -------------------------------------------------------------------------------- */

typedef enum rh_dtype {
  RH_FLOAT32 = 0,
  RH_FLOAT64 = 1,
  RH_FLOAT16 = 2, /* IEEE 754 binary16, stored as uint16_t */
  RH_INT32 = 3,
  RH_DTYPE_COUNT
} rh_dtype;

typedef enum rh_op {
  RH_SUM = 0,
  RH_AVERAGE = 1, /* sum, then a postscale of 1/size (Horovod's definition) */
  RH_MIN = 2,
  RH_MAX = 3,
  RH_OP_COUNT
} rh_op;

/* Size in bytes of one element, or 0 for an invalid type. */
size_t rh_dtype_size(rh_dtype dtype);
const char *rh_dtype_name(rh_dtype dtype);
const char *rh_op_name(rh_op op);

/* IEEE binary16 conversions, round to nearest even. */
uint16_t rh_float_to_half(float value);
float rh_half_to_float(uint16_t half);

/* ---- ranks -------------------------------------------------------------------------------- */

typedef struct rh_ctx rh_ctx;

/* Horovod's meaning: ranks fill hosts in listed order; local_rank is the slot on the host;
 * cross_rank is the index of the host among the hosts that have this local_rank. */
int rh_rank(const rh_ctx *ctx);
int rh_size(const rh_ctx *ctx);
int rh_local_rank(const rh_ctx *ctx);
int rh_local_size(const rh_ctx *ctx);
int rh_cross_rank(const rh_ctx *ctx);
int rh_cross_size(const rh_ctx *ctx);

/* Seconds since the job started: simulated time on the simulator, wall time on real hardware. */
double rh_time(const rh_ctx *ctx);

/* Spends `flops` floating-point operations on this rank's GPU (simulated: the GPU's modelled
 * rate; real: a synthetic kernel).  Blocks until done. */
rh_status rh_compute(rh_ctx *ctx, double flops);

/* Spends work whose time a model gives: `flops` floating-point operations that take `seconds`
 * by the model (a roofline's layer; a framework's overhead, with flops 0).  Simulated, and on
 * processes without a GPU: `seconds`.  On a GPU: the `flops` as a synthetic kernel, so what
 * they really take is measured, not the model's guess.  Blocks until done. */
rh_status rh_compute_priced(rh_ctx *ctx, double flops, double seconds);

/* Accounts for `bytes` written to (or read from) the cluster's storage, as a checkpoint does:
 * on the simulator the scenario's storage bandwidth and latency are charged to this rank; on
 * real hardware nothing is (the real I/O took its own time). */
rh_status rh_storage_io(rh_ctx *ctx, double bytes, bool write);

/* How many times the job was relaunched before this worker started (0 on the first launch), as
 * torchrun's TORCHELASTIC_RESTART_COUNT: a relaunched program resumes from its checkpoint. */
int rh_restarts(const rh_ctx *ctx);

/* Tells the runtime that this rank begins step `step` of epoch `epoch` (both 0-based) of its
 * training.  Costs nothing; failure events a scenario schedules at a step fire when the rank that
 * is rank 0 reaches it, and the elastic reports say how much work a failure rolled back. */
void rh_step_begin(rh_ctx *ctx, int epoch, long step);

/* ---- tensor memory -------------------------------------------------------------------------- */

/* Where a rank keeps its tensors: the memory of its GPU on the GPU target (the device picked by
 * local_rank), host memory on the simulator and the CPU target.  Collectives take either this
 * memory or host memory; on the GPU target host buffers are staged through the device, so every
 * collective runs through NCCL and the device's kernels. */
bool rh_on_device(const rh_ctx *ctx); /* true on the GPU target */
void *rh_tensor_alloc(rh_ctx *ctx, size_t bytes); /* NULL when out of memory */
void rh_tensor_free(rh_ctx *ctx, void *tensor);
/* Copies host memory into a tensor, or a tensor into host memory; blocks until done. */
rh_status rh_tensor_write(rh_ctx *ctx, void *tensor, const void *host, size_t bytes);
rh_status rh_tensor_read(rh_ctx *ctx, void *host, const void *tensor, size_t bytes);

/* ---- collectives ---------------------------------------------------------------------------- */

/* Every rank must issue the same collectives in the same order with the same count, type, op,
 * scale factors and root.  Buffers are owned by the caller: host memory or tensor memory.
 *
 * Timing-only form: pass NULL for every buffer of a call (count still counts).  The collective then
 * moves the same simulated bytes but carries and reduces no numbers; this is how messages too big
 * to hold are modelled. */

typedef enum rh_compression {
  RH_COMPRESS_DEFAULT = 0, /* whatever the settings say (RH_COMPRESSION) */
  RH_COMPRESS_NONE = 1,
  RH_COMPRESS_FP16 = 2, /* float32/float64 tensors are cast to fp16 for the wire and back */
} rh_compression;

typedef struct rh_reduce_opts {
  double prescale;            /* multiplies each rank's input before the reduction (1.0 = none) */
  double postscale;           /* multiplies the result (1.0 = none); RH_AVERAGE multiplies 1/size too */
  rh_compression compression; /* RH_COMPRESS_DEFAULT follows the settings */
  const char *name;           /* optional tensor name for messages; may be NULL */
} rh_reduce_opts;

#define RH_REDUCE_OPTS_INIT {1.0, 1.0, RH_COMPRESS_DEFAULT, NULL}

/* Reduces `count` elements across all ranks into `recv` on every rank.  `send == recv` is allowed
 * (in place).  opts may be NULL.  Blocks until this rank's result is complete. */
rh_status rh_allreduce(rh_ctx *ctx, const void *send, void *recv, size_t count, rh_dtype dtype,
                       rh_op op, const rh_reduce_opts *opts);

/* Tensor fusion (Horovod's grouped allreduce): reduces n tensors in place, tensor i holding
 * counts[i] elements, as one allreduce of a fusion buffer they are packed into and unpacked from.
 * All of them live in the same memory; bufs NULL: timing-only. */
rh_status rh_allreduce_group(rh_ctx *ctx, void *const *bufs, const size_t *counts, int n,
                             rh_dtype dtype, rh_op op, const rh_reduce_opts *opts);

/* Copies `count` elements of `buf` on rank `root` into `buf` on every rank.  Blocks. */
rh_status rh_broadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root);

/* Gathers `count` elements from every rank into `recv` (size * count elements, in rank order). */
rh_status rh_allgather(rh_ctx *ctx, const void *send, size_t count, void *recv, rh_dtype dtype);

/* Unequal sizes: rank i contributes counts[i] elements (counts is the same array on every rank);
 * recv holds the sum of counts, in rank order. */
rh_status rh_allgatherv(rh_ctx *ctx, const void *send, void *recv, const size_t *counts,
                        rh_dtype dtype);

/* Reduces every rank's `send` (size x count elements) and leaves block `rank` of the result
 * (its elements rank x count to rank x count + count - 1) in `recv`, count elements: NCCL's
 * ncclReduceScatter, MPI_Reduce_scatter_block, the gradient step of ZeRO and FSDP.  `send` is
 * left as it was; recv may be send's own block.  opts as the allreduce's (prescale, postscale,
 * name; fp16 compression is RH_ERR_INVALID).  send and recv NULL: timing-only. */
rh_status rh_reduce_scatter(rh_ctx *ctx, const void *send, void *recv, size_t count,
                            rh_dtype dtype, rh_op op, const rh_reduce_opts *opts);

/* Returns once every rank has entered. */
rh_status rh_barrier(rh_ctx *ctx);

/* Seconds an allreduce of `bytes` takes by the cost model that times this job, for what the
 * runtime would run (its algorithm and protocol); NaN where there is no cluster description (real
 * hardware).  Costs nothing; the same on every rank. */
double rh_predict_allreduce(const rh_ctx *ctx, size_t bytes);

/* Seconds an allgather or a reduce-scatter of `bytes` in all (nccl-tests' size) takes where the
 * collectives are priced by NCCL's cost model (network_model: nccl) and every link of the job is
 * up at its rate now: what such a collective issued now sleeps.  NaN elsewhere (the exact
 * network, a link down or degraded, real hardware).  Costs nothing. */
double rh_predict_allgather(const rh_ctx *ctx, size_t bytes);
double rh_predict_reduce_scatter(const rh_ctx *ctx, size_t bytes);

/* The share of a GPU's compute NCCL's kernels take while a collective runs beside it, as the
 * simulator charges it (0: none, or real hardware, which measures its own). */
double rh_collective_compute_share(const rh_ctx *ctx);

/* Lets `seconds` pass on every rank at once, each as long as the longest rank's, where no
 * scheduled event (a fault, a host change) falls within them: a timing-only stretch every rank
 * computed for itself, in place of simulating it.  Every rank calls it at the same point.
 * Returns whether it charged (false: nothing passed; the caller simulates the stretch), with
 * *st set on a failure (a peer gone). */
bool rh_charge_alike(rh_ctx *ctx, double seconds, rh_status *st);

/* ---- checking ---------------------------------------------------------------------------- */

/* Before each collective the ranks agree on what it is (kind, type, op, count, root, scale
 * factors, name), as Horovod's coordinator does, unless RH_CHECK_COLLECTIVES is off.  A
 * disagreement fails the collective on every rank with RH_ERR_MISMATCH; a rank that never comes
 * makes the others fail with RH_ERR_TIMEOUT after the collective timeout.  Either way
 * rh_last_error() says which ranks issued what, or which never came. */

/* Text about the last failed call on this rank ("" when none); valid until the next call. */
const char *rh_last_error(const rh_ctx *ctx);

/* Gathers `bytes` from every rank into all (size * bytes, rank order), for checks: on the
 * simulator it takes no simulated time, so a check does not change the timing it checks.
 * RH_ERR_TIMEOUT when a rank does not come within the collective timeout. */
rh_status rh_check_allgather(rh_ctx *ctx, const void *mine, size_t bytes, void *all);
/* Rank 0's `bytes` of buf to every rank, for checks, at no simulated cost as above; each rank
 * holds one record, not one per rank (a state of thousands of ranks). */
rh_status rh_check_broadcast(rh_ctx *ctx, void *buf, size_t bytes);

/* ---- non-blocking forms --------------------------------------------------------------------- */

/* A request runs its collective in the background (a helper actor on the simulator, a progress
 * thread on real hardware) while the caller goes on.  The requests of one rank run one at a time,
 * in the order they were issued, as on Horovod's background thread and NCCL's stream.  The caller keeps the buffers alive and
 * untouched until rh_wait returns.  rh_wait frees the request, whatever it returns. */
typedef struct rh_request rh_request;

rh_status rh_iallreduce(rh_ctx *ctx, const void *send, void *recv, size_t count, rh_dtype dtype,
                        rh_op op, const rh_reduce_opts *opts, rh_request **out);
rh_status rh_iallreduce_group(rh_ctx *ctx, void *const *bufs, const size_t *counts, int n,
                              rh_dtype dtype, rh_op op, const rh_reduce_opts *opts,
                              rh_request **out);
rh_status rh_ibroadcast(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, int root,
                        rh_request **out);
rh_status rh_iallgather(rh_ctx *ctx, const void *send, size_t count, void *recv, rh_dtype dtype,
                        rh_request **out);
rh_status rh_iallgatherv(rh_ctx *ctx, const void *send, void *recv, const size_t *counts,
                         rh_dtype dtype, rh_request **out);
rh_status rh_ireduce_scatter(rh_ctx *ctx, const void *send, void *recv, size_t count,
                             rh_dtype dtype, rh_op op, const rh_reduce_opts *opts,
                             rh_request **out);

/* ---- collectives within groups of ranks ------------------------------------------------------ */

/* The ranks a scoped collective runs over: every rank; this rank's shard group, `size`
 * consecutive ranks of whole nodes (rh_set_shard_group; by default its node's ranks, Horovod's
 * local communicator); or its replica group, the ranks at this rank's place in every shard group
 * (by default the ranks with its local_rank, one a node: Horovod's cross communicator).  FSDP's
 * HYBRID_SHARD (HSDP, PyTorch's DeviceMesh of (replicate, shard)) shards over the shard group and
 * replicates across: a reduce-scatter and an allgather in RH_SCOPE_SHARD, an allreduce of the
 * shard in RH_SCOPE_REPLICA, as NCCL runs them on ncclCommSplit's communicators.  Every rank of
 * the world issues the same scoped collective at the same point of its order (it is negotiated
 * across the world), and each runs over its own group: block counts, rank order and AVERAGE's
 * divisor are the group's.  The groups need nodes of equal size that the shard group divides
 * into (RH_ERR_INVALID otherwise).  `out` NULL: the call blocks.  On the GPU target the numbers
 * of a group other than the world are RH_ERR_UNSUPPORTED. */
typedef enum rh_scope { RH_SCOPE_WORLD = 0, RH_SCOPE_SHARD = 1, RH_SCOPE_REPLICA = 2 } rh_scope;

/* Sets the size of the shard groups, in ranks: whole nodes that divide the world (DeepSpeed's
 * MiCS shard size, the shard dimension of a DeviceMesh); 0, the default, a node's ranks.  Every
 * rank sets the same; it lasts across elastic resets (a world it does not divide forms no
 * groups: the scoped collectives there are RH_ERR_INVALID).  RH_ERR_INVALID where this world
 * cannot be cut so (the groups stay as they were). */
rh_status rh_set_shard_group(rh_ctx *ctx, int size);
/* The ranks in this rank's group of `scope`, and its place among them; 0 and -1 where the world
 * forms no such groups. */
int rh_scope_size(const rh_ctx *ctx, rh_scope scope);
int rh_scope_rank(const rh_ctx *ctx, rh_scope scope);

rh_status rh_iallreduce_in(rh_ctx *ctx, rh_scope scope, const void *send, void *recv,
                           size_t count, rh_dtype dtype, rh_op op, const rh_reduce_opts *opts,
                           rh_request **out);
rh_status rh_iallgather_in(rh_ctx *ctx, rh_scope scope, const void *send, size_t count,
                           void *recv, rh_dtype dtype, rh_request **out);
rh_status rh_ireduce_scatter_in(rh_ctx *ctx, rh_scope scope, const void *send, void *recv,
                                size_t count, rh_dtype dtype, rh_op op,
                                const rh_reduce_opts *opts, rh_request **out);

/* The price of a scoped collective of `bytes` in all (nccl-tests' size; an allreduce's buffer) on
 * its groups, all at once, as rh_predict_allgather prices the world's. */
typedef enum rh_collective {
  RH_COLL_ALLREDUCE = 0, RH_COLL_ALLGATHER = 1, RH_COLL_REDUCE_SCATTER = 2
} rh_collective;
double rh_predict_in(const rh_ctx *ctx, rh_scope scope, rh_collective coll, size_t bytes);

/* Blocks until the request's collective finished on this rank or the collective timeout
 * (RH_TIMEOUT) passed; returns its status and frees the request. */
rh_status rh_wait(rh_request *req);

/* Charges `steps` more steps of `seconds` each without running them, as a simulator can when
 * a timing-only step repeats exactly: the time passes as if they ran.  Every rank calls it at the
 * same point with the same `epoch` and `first` (the first step charged); a rank whose steps do
 * not repeat passes 0 steps, and then none is charged anywhere.  Each step is charged as the
 * longest rank's `seconds`.  Fewer are charged where a scheduled fault or host change would fall
 * among them (with room for one more step and its commit after them); none on real hardware,
 * which must run its steps.  `cycle` (NULL: none) adds what repeats every few steps, a commit:
 * it comes after each step whose count, from cycle->done, is a multiple of cycle->every.  Steps
 * that reach such a step end there, and that last one is left to the caller to run for real
 * (the commit that saves the state); those before it are charged, each the longest rank's
 * cycle->seconds.  Returns how many steps were charged (the same on every rank), or -1 with a
 * status in *st on a failure. */
typedef struct rh_repeat_cycle {
  long every;     /* steps between two of them */
  long done;      /* steps done before `first`, counted as `every` counts them */
  double seconds; /* each one's */
} rh_repeat_cycle;
long rh_repeat_steps(rh_ctx *ctx, int epoch, long first, long steps, double seconds,
                     const rh_repeat_cycle *cycle, rh_status *st);

/* ---- elastic training ------------------------------------------------------------------------ */

/* Horovod's elastic mode (hvd.elastic): a program keeps what it needs to continue in a state
 * object, commits it every few steps, and runs its training through rh_elastic_run.  When a peer
 * fails, the survivors restore the last commit, re-form the world with the workers that remain
 * (ranks reassigned as Horovod's driver does), run the reset callbacks (rescale the lr, re-shard
 * the data) and receive the state from the new rank 0; then the training function runs again
 * from the committed position.  When hosts join or leave (the scenario's discovery), the next
 * commit returns RH_ERR_HOSTS_CHANGED and the world is re-formed without a restore.  The elastic
 * settings (min_np, max_np, timeouts) come from the scenario's `elastic:` section.
 *
 * A state holds registered buffers (host or tensor memory; NULL for timing-only: the count still
 * counts) and handlers for anything else.  Every rank holds its own saved copy. */
typedef struct rh_state rh_state;

/* Something kept in the state that is not a plain buffer (a sampler's position, a program's
 * records).  save: live to saved copy; restore: saved to live; sync: make every rank's live state
 * rank 0's (a collective). */
typedef struct rh_state_handler {
  rh_status (*save)(rh_ctx *ctx, void *obj);
  rh_status (*restore)(rh_ctx *ctx, void *obj);
  rh_status (*sync)(rh_ctx *ctx, void *obj);
} rh_state_handler;

/* A new, empty state; NULL when out of memory.  The caller frees it with rh_state_free. */
rh_state *rh_state_create(rh_ctx *ctx);
void rh_state_free(rh_state *state);
/* Adds `count` elements of `buf` (the caller's, alive as long as the state) to the state. */
rh_status rh_state_register(rh_state *state, const char *name, void *buf, size_t count,
                            rh_dtype dtype);
rh_status rh_state_register_handler(rh_state *state, const char *name,
                                    const rh_state_handler *handler, void *obj);
/* fn(ctx, arg) runs after every reset, before the state is synchronised (Horovod's
 * register_reset_callbacks); callbacks run in the order they were added. */
rh_status rh_state_on_reset(rh_state *state, void (*fn)(rh_ctx *ctx, void *arg), void *arg);
/* Saves the state, then checks with rank 0 whether hosts were added or removed (a collective):
 * RH_ERR_HOSTS_CHANGED when they were.  Blocks. */
rh_status rh_state_commit(rh_state *state);
rh_status rh_state_save(rh_state *state);    /* local copy of the live state */
rh_status rh_state_restore(rh_state *state); /* the live state back to the last save */
rh_status rh_state_sync(rh_state *state);    /* rank 0's live state to every rank, then saved */

/* Horovod's @hvd.elastic.run: synchronises the state, then runs fn until it returns RH_OK, or a
 * failure that cannot be recovered from: RH_ERR_TOO_FEW when fewer than min_np workers remain,
 * RH_ERR_EXCLUDED when this worker's host left the job, or any other status of fn.  fn must
 * wait every request it issued before it returns.  Without an `elastic:` section a failure of a
 * peer ends the run, as on a fixed-size job. */
typedef rh_status (*rh_elastic_fn)(rh_ctx *ctx, rh_state *state, void *arg);
rh_status rh_elastic_run(rh_ctx *ctx, rh_state *state, rh_elastic_fn fn, void *arg);

/* ---- timeline ------------------------------------------------------------------------------ */

/* When the launch was asked for a timeline (`--timeline FILE`), every rank records what it does
 * as slices on its own track of a Chrome trace (chrome://tracing, ui.perfetto.dev), as Horovod's
 * HOROVOD_TIMELINE does: the runtime records each collective (its negotiation, then its
 * algorithm's phases) on a track beside the rank's, and the program records its own work with the
 * calls below.  Without a timeline they return at once.  Times are rh_time's; recording costs no
 * simulated time.  Slices nest: rh_trace_end ends the newest slice begun.  Categories are the
 * program's words, but one is the runtime's: slices of category "step", at the top of the track,
 * are a program's steps.
 *
 * To keep a long run's file small, detail is kept for the first steps (rh_step_begin) of each
 * world only: after them the collectives and slices nested two deep or more are left out; past a
 * budget of events per rank, the top slices of an epoch merge into one slice per run of steps,
 * whose children are the time of each category, summed (a step's children by their categories,
 * other top slices by their own).  The file's metadata says what was left out. */

/* Whether this rank records a timeline (to skip building names when it does not). */
bool rh_trace_on(const rh_ctx *ctx);
void rh_trace_begin(rh_ctx *ctx, const char *category, const char *name);
void rh_trace_end(rh_ctx *ctx);
/* The same at a given time on rh_time's clock, for work measured before it is named, or
 * charged without running (rh_repeat_steps): a slice nested in another begins no earlier than it,
 * and a slice ends no earlier than it began. */
void rh_trace_begin_at(rh_ctx *ctx, const char *category, const char *name, double time);
void rh_trace_end_at(rh_ctx *ctx, double time);
/* A moment: something that happened now. */
void rh_trace_instant(rh_ctx *ctx, const char *category, const char *name);
/* A figure shown with the newest open slice (with the instant just recorded when none is open).
 * A "steps" figure on a step slice says how many steps it stands for (work charged at once). */
void rh_trace_arg(rh_ctx *ctx, const char *key, double value);

/* ---- settings ------------------------------------------------------------------------------ */

/* Settings have a name, an environment variable (RH_<NAME>), a default, and may be overridden by a
 * scenario file.  Values are read at launch; a rank reads them with rh_setting. */
typedef enum rh_setting_id {
  RH_SETTING_ALGORITHM = 0,   /* allreduce algorithm: auto, ring, hierarchical, tree, nvls */
  RH_SETTING_BCAST_ALGORITHM, /* broadcast algorithm: auto, ring, tree */
  RH_SETTING_FUSION_THRESHOLD, /* bytes fused into one allreduce */
  RH_SETTING_COMPRESSION,     /* none or fp16 */
  RH_SETTING_TIMEOUT,         /* seconds a collective may wait for a peer */
  RH_SETTING_GRAIN,           /* simulation grain: auto, fine, coarse */
  RH_SETTING_PIPELINE_CHUNK,  /* bytes per pipelined chunk in ring broadcast */
  RH_SETTING_CHECK_COLLECTIVES, /* ranks agree on each collective before it runs: on, off */
  RH_SETTING_COLLECTIVES,     /* runtime (own algorithms) or native (the backend's: MPI, NCCL) */
  RH_SETTING_PROTOCOL,        /* NCCL model's protocol: auto, ll, ll128, simple */
  RH_SETTING_CYCLE_TIME,      /* Horovod's cycle: collectives start on its ticks (0: at once) */
  RH_SETTING_COUNT
} rh_setting_id;

/* The value of a setting as a number (enumerated settings give their index). */
double rh_setting(const rh_ctx *ctx, rh_setting_id id);

/* ---- launching ------------------------------------------------------------------------------ */

/* The training program: runs on every rank; returns 0 on success. */
typedef int (*rh_rank_fn)(rh_ctx *ctx, void *arg);

/* Runs `fn` on every rank and returns 0 if every rank returned 0, else 1 (or 2 for bad input).
 * Simulator: the cluster comes from `--scenario FILE` in argv (or RH_SCENARIO); one actor per GPU.
 * Real hardware: one process per rank, launched by mpirun or srun. */
int rh_main(int argc, char **argv, rh_rank_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* REHEARSAL_H */
