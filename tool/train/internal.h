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

/* What a rank knows about the checks.  Every rank evaluates the evidence it gathers, so every
 * rank holds the same verdicts (the serial replica's figures are rank 0's alone). */
typedef struct train_evidence {
  rh_check_result checks[RH_CHECK_COUNT];
  long identical_steps;
  bool identical_failed, lr_failed;
  double serial_max_diff;
  long serial_steps, serial_batch;
  int checkpoint_writes;
  bool validated; /* some epoch ran validation */
} train_evidence;

typedef struct rank_state {
  rh_ctx *ctx;
  const rh_train_config *cfg;
  rh_train_result *res;
  int rank, size, local_size;
  bool last; /* the last rank: where the mistakes that need one rank happen */
  train_tensor *tensors;
  int ntensors;
  size_t nparams;
  /* real models */
  float *params, *grad, *x;
  int32_t *y;
  rh_optimizer opt;
  long *shard, shard_n;  /* this epoch's sample order for this rank */
  long *used, nused;     /* the samples of the step that just ran */
  long *epoch_used;      /* the samples of every step of the epoch */
  /* serial replica (rank 0 when the check runs) */
  float *sparams, *sgrad, *sx;
  int32_t *sy;
  rh_optimizer sopt;
  long *all_used;
  /* schedules: what the recipe says, and what this (perhaps mistaken) program uses */
  rh_lr_schedule recipe_lr, used_lr;
  long steps_per_epoch, last_batch, global_step, last_step;
  bool recording; /* false while the resume check replays epochs */
  bool stopped;
  int epochs_run;   /* epochs this rank completed (its own count: the result is rank 0's) */
  uint8_t *written; /* written[e]: this run wrote checkpoint-e (epochs + 2 entries) */
  double epoch_loss, epoch_correct, epoch_samples;
  train_evidence ev;
} rank_state;

/* ---- helpers the checks share (checks.c) ------------------------------------------------- */

/* Records a verdict on every rank (rank 0 also writes it into the result as it goes); the first
 * failure of a check stays. */
void train__verdict(rank_state *s, rh_check_id id, bool passed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
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
  void (*finish)(rank_state *s);                     /* the verdict of a check that held */
} train_check;

extern const train_check train__check_serial, train__check_identical, train__check_samples,
    train__check_lr, train__check_metrics, train__check_checkpoint, train__check_resume,
    train__check_collectives;

/* Each hook of every check, in table order; the first failure stops the walk. */
rh_status train__checks_before_step(rank_state *s);
rh_status train__checks_after_step(rank_state *s, int epoch, long step, double lr);
rh_status train__checks_after_epoch(rank_state *s, int epoch, long steps_run);
rh_status train__checks_after_metric(rank_state *s, double local, double logged, const char *name);
rh_status train__checks_after_checkpoint(rank_state *s, int epoch, bool wrote);
rh_status train__checks_after_run(rank_state *s, int epochs);
void train__checks_finish(rank_state *s);

/* ---- the loop and the state (loop.c, state.c) -------------------------------------------- */

/* Runs epochs [from, to). */
rh_status train__run_epochs(rank_state *s, int from, int to);
/* Rank 0's initial parameters and optimizer state reach every rank (or not, by mistake). */
rh_status train__initialise(rank_state *s);
/* Rank 0 writes the checkpoint of `epoch` epochs completed into the checkpoint directory. */
rh_status train__write_checkpoint(rank_state *s, int epoch);
/* Rank 0 reads checkpoint-`which` (the newest when which < 0) and broadcasts it; *start_epoch
 * receives the epoch to start from (0 when there was none). */
rh_status train__restore(rank_state *s, int which, int *start_epoch);

#endif
