/*
 * internal.h: what the pieces of the training tool share: the per-rank state of a replay, the
 * helpers every check uses, and the table of checks.  The loop (loop.c) runs the steps and calls
 * the checks' hooks; the training state (state.c) broadcasts, checkpoints and restores; each check
 * is a file of checks/ that fills one entry of the table.
 */
#ifndef REHEARSAL_TRAIN_INTERNAL_H
#define REHEARSAL_TRAIN_INTERNAL_H

#include "train.h"

#include <stdint.h>
#include <stdio.h>

/* One gradient tensor, in the flat gradient (real models) or by its element count (timing). */
typedef struct train_tensor {
  const char *name;
  size_t offset, count;
  double share; /* of the backward FLOPs */
} train_tensor;

/* Where the training is.  Part of the state: committed, restored after a failure, sent to new
 * workers, and written into checkpoints. */
typedef struct train_position {
  double epoch;       /* the epoch in progress, 0-based */
  double step;        /* steps of it done */
  double processed;   /* its samples trained on, over all ranks (Horovod's processed_num) */
  double global_step; /* steps done since the start */
  double epoch_start; /* global_step when the epoch began (where its end-of-epoch commit was) */
  double epochs_run;  /* epochs completed */
  double stopped;     /* 1: the stop step was reached */
} train_position;
enum { POSITION_FIELDS = sizeof(train_position) / sizeof(double) };

/* What a rank knows about the checks and the epochs.  Every rank evaluates the evidence it
 * gathers, so every rank holds the same verdicts (the serial replica's figures are rank 0's and
 * reach the others at each sync); it is saved with the state and restored after a failure. */
typedef struct train_evidence {
  rh_check_result checks[RH_CHECK_COUNT];
  long identical_steps;
  bool identical_failed, lr_failed;
  double serial_max_diff;
  long serial_steps, serial_batch;
  int checkpoint_writes;
  bool validated;        /* some epoch ran validation */
  rh_epoch_stats now;    /* the epoch in progress */
  double epoch_loss, epoch_correct, epoch_samples;
  long draws;            /* sample draws of the epoch, over all ranks */
  long own_repeats;      /* of which repeated a sample the same rank had drawn first */
  long seg_draws;        /* of which in the current segment (since the last cut of the shards) */
  long seg_left;         /* the samples the segment was cut from */
  int world_resets;      /* resets of the job's world so far */
  int resets_checked;    /* of which the elastic checks have looked at */
  int smallest, largest; /* the fewest and the most ranks a world of the job had */
  long rolled_back;      /* steps done again after failures, over the run */
  double shard_worst;    /* sharded_equivalence: the worst difference over its bound */
  long shard_steps;
  bool shard_gap;        /* the ranks' blocks did not cover the parameters once */
} train_evidence;

typedef struct rank_state rank_state;
/* What runs the epochs from the position (the loop's train__run_epochs). */
typedef rh_status (*train_epochs_fn)(rank_state *s, int to);

struct rank_state {
  rh_ctx *ctx;
  const rh_train_config *cfg;
  rh_train_result *res;
  int rank, size, local_size;
  bool last; /* the last rank: where the mistakes that need one rank happen */
  int emax_size;  /* the world size emax is for (0: none yet) */
  double emax;    /* E[max of size standard normals]: the slowest rank's excess (losses.h) */
  double alone;   /* the step's GPU work as priced, nothing beside it (no collective's share) */
  const rh_step_times *priced; /* the kernel model's step of priced_n samples */
  long priced_n;
  train_tensor *tensors;
  int ntensors;
  size_t nparams;
  /* real models */
  float *params, *grad, *x;
  int32_t *y;
  uint64_t dropout_key;  /* the step's dropout key (rh_net_dropout_key), for the serial replica */
  char *samples_log;     /* --record-samples: "epoch,step,rank,sample" lines so far (owned) */
  size_t samples_len, samples_cap;
  rh_optimizer opt;
  long *shard, shard_n;  /* this rank's samples of the current segment of the epoch */
  int shard_epoch;       /* the epoch the shard was cut for (-1: none) */
  long shard_step;       /* the epoch's step at which the shard begins */
  long seg_steps, seg_last_batch; /* the segment's steps (from shard_step) and its last batch */
  long *used, nused;     /* the samples of the step that just ran */
  int32_t *sample_count; /* draws of each sample in the epoch (samples_once), every rank */
  int32_t *sample_owner; /* the rank that drew it first */
  uint8_t *involved;     /* ranks that drew a sample twice (max_size entries) */
  /* serial replica (rank 0 when the check runs) */
  float *sparams, *sgrad, *sx;
  int32_t *sy;
  rh_optimizer sopt;
  long *all_used;
  /* schedules: what the recipe says, and what this (perhaps mistaken) program uses */
  rh_lr_schedule recipe_lr, used_lr;
  double step_loss; /* this rank's loss of its last batch (real models) */
  long steps_per_epoch, last_batch, last_step;
  bool recording; /* false while the resume check replays epochs */
  int epochs;       /* the job's epochs */
  uint8_t *written; /* written[e]: this run wrote checkpoint-e (epochs + 2 entries) */
  train_position pos;
  train_evidence ev;
  rh_epoch_stats *epoch_stats; /* every epoch's, on every rank (epochs entries) */
  /* elastic */
  rh_state *state;
  uint64_t commit_hash;     /* FNV-1a of the parameters at the last commit (in the state) */
  double commit_dt;         /* the last commit's time, and the epoch whose end it was (-1: */
  int commit_epoch;         /* in an epoch): outside the state, a restore adds it back */
  int resets;               /* resets this worker went through */
  long failed_at;           /* global steps done when the last failure hit; -1: none */
  long failed_epoch_start;  /* and the epoch's first global step then */
  double paces[2];          /* the last two steps' seconds (timing-only repeats) */
  train_epochs_fn run_epochs; /* elastic: what each pass of the run loop calls */
  /* sharded data parallelism (sharded.c) */
  int *unit_of;          /* full sharding, timing-only: each layer's unit (-1: the root unit) */
  size_t *unit_count;    /* each unit's parameters, the root unit's last (nunits + 1) */
  int nunits;
  int *unit_ends;        /* per unit: its first and its last layer in forward order (a unit
                          * wrapped around a deeper one has layers on both sides of it) */
  float *shard_buf;      /* real: the flat gradients, then parameters, padded to size blocks */
  float *shard_send;     /* real: this rank's block of parameters, for the allgather */
  float *raw_grads;      /* sharded_equivalence: every rank's own gradients of the step */
  size_t raw_cap;
  struct train_shard_step {  /* the step's collectives of the state */
    int gathers, scatters, allreduces; /* allreduces: hybrid's shards across nodes */
    double gather_bytes, scatter_bytes, allreduce_bytes, gather_wait, scatter_wait;
    bool worked_out; /* the step was worked out, not simulated (sharded.c) */
  } sharded;
};

static inline bool train__peer_failure(rh_status st) {
  return st == RH_ERR_PEER_DEAD || st == RH_ERR_TIMEOUT || st == RH_ERR_ABORTED;
}

/* ---- helpers the checks share (checks.c) ------------------------------------------------- */

/* Records a verdict on every rank (rank 0 also writes it into the result as it goes); the first
 * failure of a check stays. */
void train__verdict(rank_state *s, rh_check_id id, bool passed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Gathers every rank's hash: the ranks whose hash differs from rank 0's listed in `ranks`
 * ("" when none). */
rh_status train__ranks_unlike_rank0(rank_state *s, uint64_t mine, char *ranks, size_t len);
/* "every step" or "every N steps", in buf. */
const char *train__every(long steps, char *buf, size_t len);
/* The check does not apply to this recipe or run; says why. */
void train__skip(rank_state *s, rh_check_id id, const char *why);
/* Whether check id gathers evidence now (real model, switched on, not replaying). */
bool train__checking(const rank_state *s, rh_check_id id);
/* Remembers the first failure of the job with the runtime's explanation; a collective's failure
 * is the verdict of check `blame`.  Returns st. */
rh_status train__failed(rank_state *s, rh_status st, rh_check_id blame);
/* Writes "a,b-d" for the ranks whose flag is set. */
void train__rank_list(const uint8_t *flags, int n, char *buf, size_t len);
uint64_t train__fnv(const void *data, size_t bytes);
/* Rank 0 copies its verdicts into the result (a failure already there stays). */
void train__report(rank_state *s);

/* ---- the checks --------------------------------------------------------------------------- */

/* One check: the hooks the loop calls (any may be NULL), in the order of the table. */
typedef struct train_check {
  rh_check_id id;
  rh_status (*before_step)(rank_state *s);
  rh_status (*after_step)(rank_state *s, int epoch, long step, double lr);
  rh_status (*after_epoch)(rank_state *s, int epoch, long steps_run);
  rh_status (*after_metric)(rank_state *s, double local, double logged, const char *name);
  rh_status (*after_checkpoint)(rank_state *s, int epoch, bool wrote);
  rh_status (*after_run)(rank_state *s, int epochs); /* the run is over (replays may follow) */
  rh_status (*after_reset)(rank_state *s);           /* elastic: the world was re-formed, synced */
  void (*finish)(rank_state *s);                     /* the verdict of a check that held */
} train_check;

extern const train_check train__check_serial, train__check_identical, train__check_samples,
    train__check_lr, train__check_metrics, train__check_checkpoint, train__check_resume,
    train__check_collectives, train__check_work_lost, train__check_state_reset,
    train__check_min_np, train__check_noticed, train__check_interval, train__check_fits_memory,
    train__check_accuracy, train__check_sharded;

/* Each hook of every check, in table order; the first failure stops the walk. */
rh_status train__checks_before_step(rank_state *s);
rh_status train__checks_after_step(rank_state *s, int epoch, long step, double lr);
rh_status train__checks_after_epoch(rank_state *s, int epoch, long steps_run);
rh_status train__checks_after_metric(rank_state *s, double local, double logged, const char *name);
rh_status train__checks_after_checkpoint(rank_state *s, int epoch, bool wrote);
rh_status train__checks_after_run(rank_state *s, int epochs);
rh_status train__checks_after_reset(rank_state *s);
void train__checks_finish(rank_state *s);

/* ---- the loop and the state (loop.c, state.c) -------------------------------------------- */

/* What the loop's step is made of (loop.c), for the sharded step (sharded.c). */
const rh_step_times *train__priced(rank_state *s, long n);
double train__layer_flops(const rank_state *s, int i, long n, bool backward);
double train__layer_seconds(rank_state *s, int i, long n, bool backward);
rh_status train__step_work(rank_state *s, const char *what, double seconds);
/* The wait for the slowest rank of a step whose compute took `compute` seconds here (losses.h),
 * added to *spent. */
rh_status train__slowest_rank(rank_state *s, double compute, double *spent);
/* The step after backward: the optimizer (on its shard), the wait for input, the lr, the update
 * of real numbers; *t_compute moves by the GPU's work.  n: the last micro-batch's samples (the
 * priced step's), samples: the step's. */
rh_status train__end_step(rank_state *s, int epoch, long step, long n, long samples,
                          double step_from, double *t_compute, double *lr_out, double loss,
                          int correct);

/* ---- sharded data parallelism (sharded.c) ------------------------------------------------ */

/* The ranks one rank's state is sharded over (1: none; hybrid: its node's). */
int train__shard_degree(const rank_state *s);
/* Whether this rank writes its block of a sharded checkpoint (hybrid: the first node's ranks). */
bool train__shard_writer(const rank_state *s);
/* Full sharding's units of a timing model (FSDP's transformer wrap); buffers of a real one. */
rh_status train__shard_setup(rank_state *s);
void train__shard_free(rank_state *s);
/* Whether the step is full or hybrid sharding's, unit by unit (timing-only, two ranks or more). */
bool train__shards_units(const rank_state *s);
/* Full sharding's forward and backward of n samples in acc micro-batches, each unit's
 * parameters gathered before its layers run and its gradients reduce-scattered after its
 * backward (in the last micro-batch); *t_compute: the step's start plus its GPU work. */
rh_status train__sharded_passes(rank_state *s, long n, int acc, double step_from,
                                double *t_compute);
/* ZeRO-1/2, timing-only: a bucket's reduce-scatter (count elements of `bytes` each). */
rh_status train__shard_scatter(rank_state *s, size_t count, double bytes, const char *name,
                               rh_request **req);
/* ZeRO-1/2, timing-only: the updated parameters gathered after the optimizer step. */
rh_status train__shard_gather_params(rank_state *s);
/* Real numbers: the gradients reduce-scattered (or allreduced), this rank's shard updated, the
 * parameters gathered. */
rh_status train__sharded_update(rank_state *s, double lr);
/* Real numbers: every rank's block of the optimizer's state gathered into every rank's, so that
 * a commit or a checkpoint holds the whole state (FSDP's FULL_STATE_DICT): by an allgather that
 * costs its time (cost), or as a check's, at none.  Every rank calls it; nothing when unsharded. */
rh_status train__shard_whole_state(rank_state *s, bool cost);
/* Whether checkpoints are sharded (recipe.checkpoint_format: sharded, FSDP's SHARDED_STATE_DICT):
 * each rank writes its block of the parameters and the optimizer's state beside rank 0's index. */
bool train__shard_checkpoints(const rank_state *s);
/* This rank's shard of the checkpoint at `path` (PATH.shard-R-of-N, through a temporary file and
 * a rename); 0, or the errno. */
int train__shard_write(rank_state *s, const char *path);
/* The `nshards` shard files beside the index `path`, whoever wrote them, into the whole
 * parameters and optimizer state (nparams, and the state's floats): a checkpoint of N ranks read
 * by a world of any size.  False when one is missing, damaged or of another model. */
bool train__shard_read(rank_state *s, const char *path, uint64_t nshards, float *params,
                       float *state);
/* sharded_equivalence (checks/): every rank's own gradients noted before they are reduced; the
 * average of this rank's block [lo, hi) judged against DDP's. */
rh_status train__shard_note(rank_state *s);
rh_status train__shard_evidence(rank_state *s, size_t lo, size_t hi);

/* Runs from the position up to the end of epoch `to` - 1 (or the stop step). */
rh_status train__run_epochs(rank_state *s, int to);
/* The world's rank, size and what depends on them (the lr schedule, the steps per epoch);
 * state.c, since a reset of the world calls it. */
void train__refresh_world(rank_state *s, bool reset);
/* Rank 0's initial parameters and optimizer state reach every rank (or not, by mistake). */
rh_status train__initialise(rank_state *s);
/* The bytes a checkpoint of this model holds (and an elastic commit copies). */
double train__state_bytes(const rank_state *s);
/* Rank 0 writes a checkpoint of the position (every rank pays its write time on the simulator):
 * checkpoint-E.bin at the end of epoch E, checkpoint-step-G.bin after global step G. */
rh_status train__write_checkpoint(rank_state *s, bool epoch_end);
/* Rank 0 reads checkpoint-`which` (an epoch; the newest of all when which < 0) and broadcasts
 * it: the position moves there (the start when there was none).  *found: the epoch it holds. */
rh_status train__restore(rank_state *s, int which, int *found);
/* What Horovod's Keras callbacks are given (lr_schedule.c): the optimizer's initial lr (the base
 * lr scaled), the workers, LearningRateWarmupCallback's warmup_epochs (0: none), and the
 * staircase of LearningRateScheduleCallback (x decay_factor from each of decay_epochs on). */
typedef struct train_horovod_lr {
  double initial_lr;
  int size;
  double warmup_epochs;
  const double *decay_epochs;
  int ndecay;
  double decay_factor;
  long steps_per_epoch;
} train_horovod_lr;
/* The lr of batch `batch` of epoch `epoch` (both 0-based) that the callbacks leave. */
double train__horovod_lr(const train_horovod_lr *h, int epoch, long batch);
/* Reads one checkpoint file into the state: 0 (its epoch in *epoch, its ranks' metric sums in
 * *rows, *nrows of them; the caller frees *rows), -1 when it is absent, -2 when it is damaged or
 * of another model (the state is then left untouched, and the reason printed). */
int train__checkpoint_read(rank_state *s, const char *path, int *epoch, double **rows, int *nrows);
/* Elastic training: the state (the position, the parameters, the optimizer, the evidence), the
 * reset callback, and Horovod's run loop around `run` (the loop's train__run_epochs, handed in
 * so that the state does not call back into the loop). */
rh_status train__elastic(rank_state *s, train_epochs_fn run);
/* Commits the state (elastic), counting its time in the epoch in progress, or with epoch >= 0
 * in that epoch's row (a commit at its end). */
rh_status train__commit(rank_state *s, int epoch);
/* A commit charged with repeated steps, as long as the last real one: its time and count. */
void train__commit_charged(rank_state *s);

/* steps.c: rank 0's record of `count` steps from `step` of `epoch` that began at `start` and
 * took `compute` + `wait` seconds each (a repeated run of steps: the same each), and the progress
 * line. */
void train__record_steps(rank_state *s, int epoch, long step, long count, double start,
                         double compute, double wait);

#endif
