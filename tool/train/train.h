/*
 * train.h: the training loop of `rehearsal run`, written against the public runtime header alone
 * so that it runs unchanged on every target.  It replays a recipe either timing-only (the model is
 * FLOPs and bytes) or with real numbers (a small C model on real or synthetic data), and with real
 * numbers it checks the recipe: each check is a verdict with the ranks involved.  Mistake switches
 * make the loop commit the errors people make, so that the checks can be seen to catch them.
 */
#ifndef REHEARSAL_TRAIN_H
#define REHEARSAL_TRAIN_H

#include "data.h"
#include "model.h"
#include "optim.h"
#include "recipe.h"
#include "compute_model.h"
#include "kernels/kernels.h"
#include "losses.h"
#include "rehearsal.h"

#include <stdbool.h>

typedef enum rh_check_id {
  RH_CHECK_SERIAL = 0,  /* same parameters as serial SGD with batch size x B on the same samples */
  RH_CHECK_IDENTICAL,   /* parameters identical, bit for bit, on every rank after every step */
  RH_CHECK_SAMPLES,     /* no training sample used twice in an epoch; the shards cover the epoch */
  RH_CHECK_LR,          /* the learning rate of every step equals the recipe's formula */
  RH_CHECK_METRICS,     /* the logged metrics are the mean over all ranks */
  RH_CHECK_CHECKPOINT,  /* exactly one writer (rank 0) per checkpoint */
  RH_CHECK_RESUME,      /* resuming from a checkpoint ends with the parameters of the whole run */
  RH_CHECK_COLLECTIVES, /* every rank issued the same collectives; none stalled */
  RH_CHECK_WORK_LOST,   /* elastic: each failure rolls back to the last commit the recipe makes */
  RH_CHECK_STATE_RESET, /* elastic: after each reset every rank holds the same state */
  RH_CHECK_MIN_NP,      /* elastic: never fewer than min_np workers; below it the job ends */
  RH_CHECK_NOTICED,     /* every crash, hang or lasting link fault of the scenario was noticed */
  RH_CHECK_INTERVAL,    /* the commit or checkpoint interval suits the failure rate */
  RH_CHECK_FITS_MEMORY, /* the job's memory per GPU fits in the GPU's */
  RH_CHECK_ACCURACY,    /* the final validation accuracy is one worker's, within a bound */
  RH_CHECK_SHARDED,     /* a sharded step averages the gradients DDP does, its shards cover all */
  RH_CHECK_COUNT
} rh_check_id;

extern const char *const rh_check_names[RH_CHECK_COUNT + 1];      /* NULL-terminated */

typedef enum rh_mistake {
  RH_MISTAKE_NO_SHARDING = 1 << 0,          /* every rank reads the whole data set */
  RH_MISTAKE_NO_INITIAL_BROADCAST = 1 << 1, /* each rank keeps its own random initialisation */
  RH_MISTAKE_NO_LR_SCALING = 1 << 2,        /* the base lr, not scaled by the number of workers */
  RH_MISTAKE_METRIC_RANK0_ONLY = 1 << 3,    /* only rank 0 calls the metric average */
  RH_MISTAKE_NO_METRIC_AVERAGE = 1 << 4,    /* every rank logs its own, unaveraged metric */
  RH_MISTAKE_CHECKPOINT_EVERY_RANK = 1 << 5, /* every rank writes the checkpoint */
  RH_MISTAKE_MISMATCHED_COLLECTIVE = 1 << 6, /* the last rank reduces its tensors in another order */
  RH_MISTAKE_MISSING_COLLECTIVE = 1 << 7,   /* the last rank skips one gradient allreduce */
  RH_MISTAKE_NO_COMMIT = 1 << 8,            /* elastic: the state is never committed */
  RH_MISTAKE_LR_NOT_RESCALED = 1 << 9,      /* elastic: no reset callback rescales the lr */
  RH_MISTAKE_SAMPLER_NOT_RESET = 1 << 10,   /* elastic: the data is not re-sharded on a reset */
} rh_mistake;

extern const char *const rh_mistake_names[]; /* bit i <-> name i; NULL-terminated */

typedef struct rh_train_layer {
  const char *name;
  double parameters;
  double forward_flops; /* per sample; 0: a share of the model's by parameters */
  double memory_bytes;  /* per sample, forward (read and written); backward moves twice that */
  bool recompute;       /* activation checkpointing: its forward runs again in backward */
} rh_train_layer;

/* Everything the loop needs, in plain terms (filled by the command from the scenario). */
typedef struct rh_train_config {
  /* model: real (a C model and data) or timing-only (named layers of given sizes) */
  bool real;
  rh_model model;             /* real */
  const rh_dataset *train;    /* real */
  const rh_dataset *validation; /* real; may have n == 0 */
  long validation_offset;     /* validation sample k is validation->(offset + k) */
  const rh_train_layer *layers; /* timing-only, forward order */
  int nlayers;
  double parameters;
  double forward_flops;       /* per sample, charged to the simulated GPU */
  rh_gpu_model gpu;           /* how long the GPU takes for a layer, and per step */
  double input_rate;          /* samples/s the input pipeline feeds a GPU (0: no limit) */
  rh_step_cache *priced;      /* the kernel model's priced steps (NULL: the roofline's layers) */
  long train_samples, validation_samples;
  /* recipe */
  long batch;
  double base_lr;
  rh_lr_scaling lr_scaling;
  double warmup_epochs;
  const double *decay_epochs;
  int ndecay;
  double decay_factor;
  rh_optimizer_kind optimizer;
  double momentum, beta1, beta2, eps, rho;
  int epochs;
  bool epochs_divided;
  rh_steps_rule steps_rule;
  rh_val_rule val_rule;
  long stop_at_step;
  long steps;                 /* recipe.steps: stop after this global step (0: the epochs say) */
  double duration;            /* recipe.duration: stop after the step that reaches it (s; 0: none) */
  uint64_t seed;             /* initial parameters and dropout */
  uint64_t sampler_seed;     /* the sampler's order (DistributedSampler's seed) */
  const float *init_params; /* model.init_from: the initial parameters (NULL: from the seed) */
  const char *samples_dir;  /* --record-samples: each rank writes samples-rank<R>.csv here */
  int shuffle;                /* rh_shuffle */
  int first_epoch;            /* what set_epoch gets for the first epoch (torch's order) */
  bool replicated;            /* every rank reads the whole set in its own order (Keras fit) */
  long val_batch;
  int checkpoint_every;       /* epochs; 0: none */
  const char *checkpoint_dir; /* NULL: no checkpoints written */
  bool resume;                /* start from the latest checkpoint in checkpoint_dir */
  /* checks and mistakes */
  bool check[RH_CHECK_COUNT];
  long serial_check_steps;    /* 0: every step */
  int resume_from_epoch;      /* RH_CHECK_RESUME: restart after this epoch's checkpoint */
  unsigned mistakes;
  /* failures: elastic training (Horovod's), or relaunches from the checkpoint */
  bool faults;                /* the scenario injects failures: a peer's failure is what it does,
                               * not a check's verdict */
  bool elastic;
  int min_np;
  long commit_every;          /* steps between commits (and one at each epoch's end) */
  long checkpoint_every_steps; /* 0: checkpoints at epoch ends only */
  int max_size;               /* the largest world the job may have (buffers are sized for it) */
  double optimizer_state;     /* optimizer floats per parameter, for timing-only state sizes */
  /* timing-only: how gradients are reduced and steps are cut */
  bool layer_flops;           /* the layers give their FLOPs (0 allowed): shares by FLOPs */
  double grad_bytes;          /* bytes of a gradient value: 4, or 2 (bf16); 0: 4 */
  bool ddp;                   /* PyTorch DDP's fixed buckets instead of Horovod's fusion */
  double bucket_cap, first_bucket; /* ddp: bytes */
  int accumulation;           /* micro-batches per step (the batch is their sum); 0, 1: none */
  rh_losses losses;           /* beside the network: the framework's work, the slowest rank */
  bool negotiate;             /* timing-only Horovod: each bucket's allreduce follows a negotiation */
  /* sharded data parallelism (sharded.c) */
  int sharding;               /* rh_sharding (memory.h); 0: none (DDP, Horovod) */
  bool shard_allreduce;       /* optimizer, gradients: allreduced, not reduce-scattered */
  bool overlap_comm;          /* optimizer, gradients: the reduce-scatters run in backward */
  double reduce_bucket;       /* optimizer, gradients, timing-only: elements per reduce-scatter */
  double allgather_bucket;    /* optimizer, gradients, timing-only: elements per allgather */
  int gathers_ahead;          /* full: units' allgathers in flight (FSDP's limiter: 2; 0: all) */
  int shard_group;            /* hybrid: ranks in a shard group (whole nodes); 0: a node's */
  double wrap_min_params;     /* full, hybrid: a unit's least parameters (size_based_auto_wrap_
                               * policy); 0: each transformer block a unit */
  bool sharded_checkpoints;   /* each rank writes its shard of a checkpoint, rank 0 the index */
  struct rh_progress *progress; /* steps done and failures, as they happen (NULL: none) */
} rh_train_config;

typedef struct rh_epoch_stats {
  long steps;
  double start, end;   /* seconds */
  double compute;      /* seconds of forward + backward */
  double exposed_comm; /* seconds a step waited for its allreduces after backward ended */
  double alone;        /* seconds of the steps' GPU work as priced, with nothing beside it: no
                        * collective sharing the GPU, no wait (the baseline without communication) */
  double lr_first, lr_last;
  double train_loss, train_accuracy; /* averaged over ranks (real models) */
  double val_loss, val_accuracy;     /* NAN without validation */
  long val_steps;
  int size;            /* ranks at the end of the epoch */
  long rolled_back;    /* steps of the epoch done again after a failure */
  double commit, checkpoint; /* seconds spent committing and writing checkpoints */
} rh_epoch_stats;

/* Steps of one world that took the same time: the record of a run's pace, for the reports. */
typedef struct rh_step_run {
  double start, step;  /* when the first began; seconds each */
  long steps;
  int size;
  int epoch;
} rh_step_run;

typedef struct rh_check_result {
  bool ran, passed;
  bool skipped; /* not applicable to this recipe or run (detail says why) */
  char detail[512];
} rh_check_result;

/* One training step as rank 0 saw it (DIR/steps.csv). */
typedef struct rh_step_record {
  long global_step; /* 1-based, over the whole job */
  int epoch;        /* 0-based */
  long step;        /* 0-based within the epoch */
  int size;         /* ranks in the step's world */
  double start;     /* seconds */
  double compute, wait; /* forward + backward; waiting for the gradients after backward */
  double alone;         /* the step's GPU work as priced, nothing beside it (rh_epoch_stats) */
  double lr;
  double loss;      /* rank 0's batch loss (real models; NAN timing-only) */
  /* Steps the record stands for: a run the simulator charged without running them is one record,
   * step k of it (0-based) global_step + k, begun k (compute + wait) after start, at the lr
   * `schedule` gives it (1: a step of its own, with its lr and loss). */
  long count;
  rh_lr_schedule schedule;
  long steps_per_epoch;
} rh_step_record;

/* What a run produced; rank 0 fills it (every rank agrees on the verdicts). */
typedef struct rh_train_result {
  int epochs;                 /* epochs run (after the epochs rule and the stop step) */
  long steps_per_epoch;
  rh_epoch_stats *epochs_stats; /* allocated by rh_train_result_init for `capacity` epochs */
  int capacity;
  int buckets_per_step;
  double bucket_bytes_max;
  double *bucket_bytes;       /* each bucket of rank 0's last full step, in issue order (owned) */
  double *bucket_wait;        /* and the seconds that step waited for it after backward (owned) */
  double *bucket_ready;       /* and when backward closed it, seconds after backward began (owned) */
  double backward;            /* that step's backward, seconds */
  double framework_step;      /* rank 0's last step: the framework's own seconds (losses.h) */
  double framework_after;     /* the part of framework_step after backward (copies out) */
  double input_step;          /* rank 0's last step: the GPU's wait for the input pipeline */
  double straggler_step;      /* and its wait for the slowest rank */
  /* sharded: rank 0's last step, the collectives of the state and what they kept it waiting */
  int shard_gathers, shard_scatters;     /* allgathers, reduce-scatters (or allreduces) */
  double shard_gather_bytes, shard_scatter_bytes;
  int shard_allreduces;       /* hybrid: allreduces of the shards across nodes */
  double shard_allreduce_bytes; /* their bytes (each rank's shard) */
  double shard_gather_wait, shard_scatter_wait; /* seconds */
  long shard_worked_out;      /* steps every rank worked out for itself instead of simulating */
  double gradient_bytes;
  int start_epoch;            /* > 0 when resumed from a checkpoint */
  uint64_t params_hash;       /* FNV-1a of the final parameters' bytes (real models) */
  float *final_params;        /* and the parameters (owned; model.nparams floats) */
  rh_check_result checks[RH_CHECK_COUNT];
  rh_status error;            /* first failure seen on any rank */
  int error_rank;
  char error_detail[1024];
  /* failures */
  rh_status ended;            /* elastic: how the job ended (RH_ERR_TOO_FEW: below min_np) */
  int resets;                 /* elastic resets */
  long commits;
  double state_bytes;         /* a checkpoint's bytes: what a commit copies and a sync sends */
  rh_step_run *runs;          /* the pace of the steps (rank 0's), in time order */
  size_t nruns, capruns;
  double *ckpt_time;          /* when each checkpoint was written (rank 0's), in order */
  long *ckpt_step;            /* and the global step it holds */
  size_t nckpt, capckpt;
  long resumed_step;          /* the global step the last launch resumed from (-1: none) */
  rh_step_record *steps;      /* every step rank 0 ran (or charged), in order, runs as one */
  size_t nsteps, capsteps;
  long recorded;              /* steps the records stand for */
  long unrecorded;            /* steps no memory was left to record */
  int notes;                  /* failures told to the progress line so far */
  long duration_step;         /* recipe.duration: the global step after which every rank stops
                               * (rank 0's, which the ranks share on the simulator; 0: not yet) */
} rh_train_result;

typedef struct rh_train_job {
  const rh_train_config *cfg;
  rh_train_result *result;
} rh_train_job;

rh_status rh_train_result_init(rh_train_result *r, int capacity);
void rh_train_result_free(rh_train_result *r);

/* The rank function of `rehearsal run`; arg is an rh_train_job. */
int rh_train_rank(rh_ctx *ctx, void *arg);

/* ---- verdicts that need the whole job (after the launch) ------------------------------------- */

struct rh_fault_plan;
struct rh_joblog;

/* failures_noticed: every crash, hang and lasting link fault the plan scripts happened and some
 * rank noticed it (a collective failed, or the job stopped or changed its world), from the log;
 * end: when the last worker returned, 0 when none did (the faults that killed the last ones ended
 * the job: nobody was left to notice them). */
void rh_train_verdict_noticed(rh_train_result *r, const struct rh_fault_plan *plan,
                              const struct rh_joblog *log, double end);

/* What commit_interval judges, as the run measured it (seconds). */
typedef struct rh_interval_figures {
  bool elastic;    /* the interval is between commits; else between checkpoints */
  long steps;      /* the recipe's interval in steps */
  double interval; /* and in seconds, with the cost of one commit (checkpoint) */
  double cost;     /* one commit's (checkpoint's) seconds */
  double mtbf;     /* the job's seconds between failures, from the plan's MTBFs */
} rh_interval_figures;

/* The fraction of the time lost to commits and to work redone at an interval (first order:
 * cost / interval + interval / 2 mtbf; least at Young's interval, rh_young). */
double rh_interval_waste(double interval, double cost, double mtbf);
/* commit_interval: the interval loses at most `tolerance` (a fraction of the time) more than
 * Young's would. */
void rh_train_verdict_interval(rh_train_result *r, const rh_interval_figures *f, double tolerance);

/* accuracy_parity's bound in points for n baseline accuracies (fractions): within_points, or
 * where wider the one-sided 97.5% prediction bound t(0.975, n - 1) sd sqrt(1 + 1/n) of one more
 * run from their spread (n >= 2).  Their mean and sd (fractions; sd NaN below 2) in *mean, *sd. */
double rh_accuracy_bound(const double *baseline, int n, double within_points, double *mean,
                         double *sd);
/* accuracy_parity: the run's final validation accuracy (a fraction) is at most the bound below
 * the mean of the n one-worker baselines; `source` says where they came from (or, with n 0, why
 * there are none: the check is then skipped). */
void rh_train_verdict_accuracy(rh_train_result *r, double accuracy, const double *baseline, int n,
                               double within_points, const char *source);

/* fits_memory: the estimate of one GPU's memory (parts in bytes, memory.h) is at most the GPU's
 * `capacity` bytes. */
struct rh_memory_use;
/* `fits`: what would fit instead, for a job that does not ("sharding: optimizer (ZeRO-1) over
 * 128 ranks, 45.6 GB"; NULL or "": nothing known). */
void rh_train_verdict_memory(rh_train_result *r, const struct rh_memory_use *m, double capacity,
                             const char *fits);

#endif
