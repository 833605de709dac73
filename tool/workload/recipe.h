/*
 * recipe.h: the arithmetic of the Horovod recipes, as pure functions: learning-rate scaling,
 * Horovod's warmup, step decay, steps per epoch, validation steps, epochs and the stop step, and
 * the sharding of samples among ranks (PyTorch's DistributedSampler).
 */
#ifndef REHEARSAL_RECIPE_H
#define REHEARSAL_RECIPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum rh_lr_scaling {
  RH_LR_SIZE = 0,       /* lr * size (the linear scaling rule) */
  RH_LR_LOCAL_SIZE = 1, /* lr * local_size (Adasum on GPUs) */
  RH_LR_NONE = 2
} rh_lr_scaling;

typedef enum rh_steps_rule {
  RH_STEPS_DIVIDED = 0, /* train / (batch * size): Keras and TensorFlow recipes */
  RH_STEPS_FULL = 1,    /* train / batch: the serial count, every rank */
  RH_STEPS_LOADER = 2   /* ceil(ceil(train / size) / batch): PyTorch's loader over its shard */
} rh_steps_rule;

typedef enum rh_val_rule {
  RH_VAL_DIVIDED = 0,     /* (val / batch) / size */
  RH_VAL_OVERSAMPLED = 1, /* 3 * val / (batch * size) */
  RH_VAL_FULL = 2,        /* ceil(ceil(val / size) / batch): each rank its whole shard (PyTorch) */
  RH_VAL_NONE = 3
} rh_val_rule;

/* The factor the base learning rate is multiplied by. */
double rh_recipe_lr_factor(rh_lr_scaling scaling, int size, int local_size);

/* Horovod's LearningRateWarmupCallback for epoch < warmup_epochs:
 * initial_lr / size * (e * (size - 1) / warmup_epochs + 1), e = epoch + (batch + 1) / steps. */
double rh_recipe_warmup_lr(double initial_lr, int size, int epoch, long batch,
                           long steps_per_epoch, double warmup_epochs);

typedef struct rh_lr_schedule {
  double initial_lr;    /* base lr times the scaling factor */
  int size;
  double warmup_epochs; /* 0: none */
  const double *decay_epochs; /* staircase: from each of these epochs on, lr *= decay_factor */
  int ndecay;
  double decay_factor;
} rh_lr_schedule;

/* The learning rate of batch `batch` (0-based) of epoch `epoch` (0-based). */
double rh_recipe_lr(const rh_lr_schedule *s, int epoch, long batch, long steps_per_epoch);

long rh_recipe_steps_per_epoch(rh_steps_rule rule, long train, long batch, int size);
/* Samples in the last step of an epoch (smaller than batch only for RH_STEPS_LOADER). */
long rh_recipe_last_batch(rh_steps_rule rule, long train, long batch, int size);
long rh_recipe_validation_steps(rh_val_rule rule, long val, long batch, int size);
/* ceil(epochs / size) when divided, else epochs. */
int rh_recipe_epochs(int epochs, bool divided, int size);
/* TensorFlow's StopAtStepHook(last_step = S // size); 0 when stop_at_step is 0 (no stop). */
long rh_recipe_last_step(long stop_at_step, int size);

/* How an epoch's order is drawn: none; rehearsal's own generator (splitmix64, Fisher-Yates); or
 * torch's (torch.randperm with a generator seeded seed + epoch, as DistributedSampler draws it:
 * the same samples on the same ranks as PyTorch's, step by step). */
typedef enum rh_shuffle { RH_SHUFFLE_NONE = 0, RH_SHUFFLE_SPLITMIX = 1, RH_SHUFFLE_TORCH = 2 } rh_shuffle;

/* torch.randperm(n, generator=torch.Generator().manual_seed(seed)) of PyTorch's CPU generator
 * (MT19937 seeded with seed's low 32 bits; randperm_cpu's swaps), for n below 2^24.  0, or -1
 * when n is out of range or memory ran out. */
int rh_torch_randperm(long n, uint64_t seed, long *out);

/* DistributedSampler: each rank gets ceil(n / size) indices.  With shuffle (rh_shuffle), a
 * permutation of 0..n-1 drawn from (seed + epoch) is padded to size * ceil(n / size) by repeating
 * its start, and rank r takes positions r, r + size, ... */
long rh_sampler_shard_size(long n, int size);
/* Writes rh_sampler_shard_size(n, size) indices into out; 0, or -1 when memory ran out. */
int rh_sampler_indices(long n, int size, int rank, uint64_t seed, int epoch, int shuffle,
                        long *out);

/* Horovod's ElasticSampler: the epoch's order without its first `processed` samples (those the
 * job already trained on), padded to a multiple of size by repeating its start, and rank takes
 * positions rank, rank + size, ...  With processed 0 this is rh_sampler_indices.  Writes
 * rh_sampler_shard_size(n - processed, size) indices into out; 0, or -1 when memory ran out. */
int rh_sampler_remaining(long n, long processed, int size, int rank, uint64_t seed, int epoch,
                         int shuffle, long *out);

#endif
