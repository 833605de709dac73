/*
 * recipe.c: see recipe.h.  Every formula is written as the recipes write it, in integer
 * arithmetic where they use integer division.
 */
#include "recipe.h"

#include <stdlib.h>

double rh_recipe_lr_factor(rh_lr_scaling scaling, int size, int local_size) {
  switch (scaling) {
  case RH_LR_SIZE: return size;
  case RH_LR_LOCAL_SIZE: return local_size;
  default: return 1;
  }
}

double rh_recipe_warmup_lr(double initial_lr, int size, int epoch, long batch,
                           long steps_per_epoch, double warmup_epochs) {
  double e = epoch + (double)(batch + 1) / (double)steps_per_epoch;
  return initial_lr / size * (e * (size - 1) / warmup_epochs + 1);
}

double rh_recipe_lr(const rh_lr_schedule *s, int epoch, long batch, long steps_per_epoch) {
  if (s->warmup_epochs > 0 && epoch < s->warmup_epochs)
    return rh_recipe_warmup_lr(s->initial_lr, s->size, epoch, batch, steps_per_epoch,
                               s->warmup_epochs);
  double lr = s->initial_lr;
  for (int i = 0; i < s->ndecay; i++)
    if (epoch >= s->decay_epochs[i]) lr *= s->decay_factor;
  return lr;
}

long rh_recipe_steps_per_epoch(rh_steps_rule rule, long train, long batch, int size) {
  switch (rule) {
  case RH_STEPS_DIVIDED: return (train / batch) / size;
  case RH_STEPS_FULL: return train / batch;
  case RH_STEPS_LOADER: return (rh_sampler_shard_size(train, size) + batch - 1) / batch;
  }
  return 0;
}

long rh_recipe_last_batch(rh_steps_rule rule, long train, long batch, int size) {
  if (rule != RH_STEPS_LOADER) return batch;
  long shard = rh_sampler_shard_size(train, size), rest = shard % batch;
  return rest ? rest : batch;
}

long rh_recipe_validation_steps(rh_val_rule rule, long val, long batch, int size) {
  switch (rule) {
  case RH_VAL_DIVIDED: return (val / batch) / size;
  case RH_VAL_OVERSAMPLED: return 3 * val / (batch * size);
  case RH_VAL_FULL: return (rh_sampler_shard_size(val, size) + batch - 1) / batch;
  case RH_VAL_NONE: return 0;
  }
  return 0;
}

int rh_recipe_epochs(int epochs, bool divided, int size) {
  return divided ? (epochs + size - 1) / size : epochs;
}

long rh_recipe_last_step(long stop_at_step, int size) { return stop_at_step / size; }

long rh_sampler_shard_size(long n, int size) { return (n + size - 1) / size; }

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* MT19937 (Matsumoto and Nishimura 1998), as torch's CPU generator runs it: seeded by
 * init_genrand with the low 32 bits, one tempered 32-bit word a call. */
typedef struct mt19937 {
  uint32_t s[624];
  int i;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
  m->s[0] = seed;
  for (int i = 1; i < 624; i++)
    m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
  m->i = 624;
}

static uint32_t mt_next(mt19937 *m) {
  if (m->i >= 624) {
    for (int k = 0; k < 624; k++) {
      uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
      m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    m->i = 0;
  }
  uint32_t y = m->s[m->i++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

int rh_torch_randperm(long n, uint64_t seed, long *out) {
  if (n < 0 || n >= (1L << 24)) return -1; /* torch draws 64-bit words past 2^24: not here */
  mt19937 *m = malloc(sizeof *m);
  if (!m) return -1;
  mt_seed(m, (uint32_t)seed);
  for (long i = 0; i < n; i++) out[i] = i;
  for (long i = 0; i + 1 < n; i++) { /* torch's randperm_cpu: swap i with i + random() % (n - i) */
    long z = (long)(mt_next(m) % (uint32_t)(n - i));
    long t = out[i];
    out[i] = out[z + i];
    out[z + i] = t;
  }
  free(m);
  return 0;
}

int rh_sampler_remaining(long n, long processed, int size, int rank, uint64_t seed, int epoch,
                         int shuffle, long *out) {
  if (processed < 0) processed = 0;
  if (processed >= n) return 0;
  long left = n - processed, shard = rh_sampler_shard_size(left, size);
  /* position p of the padded order is element processed + p % left of the (shuffled) order */
  long *perm = NULL;
  if (shuffle == RH_SHUFFLE_TORCH) {
    perm = malloc((size_t)n * sizeof *perm);
    if (!perm || rh_torch_randperm(n, seed + (uint64_t)epoch, perm) != 0) {
      free(perm);
      return -1;
    }
  } else if (shuffle) {
    perm = malloc((size_t)n * sizeof *perm);
    if (!perm) return -1;
    uint64_t s = seed + (uint64_t)epoch;
    for (long i = 0; i < n; i++) perm[i] = i;
    for (long i = n - 1; i > 0; i--) { /* Fisher-Yates */
      long j = (long)(splitmix64(&s) % (uint64_t)(i + 1));
      long t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
  }
  for (long k = 0; k < shard; k++) {
    long p = processed + ((long)rank + k * size) % left;
    out[k] = perm ? perm[p] : p;
  }
  free(perm);
  return 0;
}

int rh_sampler_indices(long n, int size, int rank, uint64_t seed, int epoch, int shuffle,
                       long *out) {
  return rh_sampler_remaining(n, 0, size, rank, seed, epoch, shuffle, out);
}
