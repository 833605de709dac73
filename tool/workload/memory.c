/*
 * memory.c: see memory.h.
 */
#include "memory.h"

#include "scenario.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const rh_sharding_names[RH_SHARD_COUNT + 1] = {"none", "optimizer", "gradients",
                                                           "hybrid", "full", NULL};
const char *const rh_sharding_titles[RH_SHARD_COUNT] = {
    "DDP", "ZeRO-1", "ZeRO-2, FSDP SHARD_GRAD_OP", "FSDP HYBRID_SHARD", "ZeRO-3, FSDP FULL_SHARD"};

/* Divides what the stage shards by its degree and adds what full sharding gathers: the root unit
 * (FSDP keeps it whole from forward to the end of backward), the unit running and the one
 * prefetched, and one unit's gradients whole before their reduce-scatter. */
static void shard(rh_memory_use *m, const rh_shard_plan *p, double parameters, double grad) {
  if (!p || p->stage == RH_SHARD_NONE || p->degree < 2) return;
  double d = p->degree, w = parameters > 0 ? m->weights / parameters : 0;
  m->sharding = p->stage;
  m->degree = p->degree;
  m->master /= d;
  m->optimizer /= d;
  if (p->stage == RH_SHARD_OPTIMIZER) return;
  m->gradients /= d;
  if (p->stage == RH_SHARD_GRADIENTS) return;
  m->weights /= d;
  m->buffers = 0; /* a unit's gradients are reduce-scattered from where they are */
  m->units_known = !p->units_unknown;
  if (m->units_known) m->units = (p->root + 2 * p->unit) * w + p->unit * grad;
}

void rh_memory_estimate(double parameters, double activations, bool known, double micro_batch,
                        int precision, rh_optimizer_kind optimizer, double momentum, bool ddp,
                        double fusion, const rh_shard_plan *plan, rh_memory_use *m) {
  double grad = rh_precision_grad_bytes(precision), value = rh_precision_value_bytes(precision);
  bool low = grad < 4; /* bf16 / fp8 weights, updated through an fp32 master copy */
  *m = (rh_memory_use){.activations_known = known, .units_known = true, .degree = 1};
  m->weights = parameters * (low ? 2 : 4);
  m->master = low ? parameters * 4 : 0;
  m->gradients = parameters * grad;
  double states = optimizer == RH_OPT_ADAM || optimizer == RH_OPT_ADADELTA ? 2
                  : momentum > 0                                         ? 1
                                                                         : 0;
  m->optimizer = parameters * 4 * states; /* fp32 states */
  m->activations = known ? activations * value * micro_batch : 0;
  bool sharded_grads = plan && plan->degree > 1 && plan->stage >= RH_SHARD_GRADIENTS;
  double bucket = fusion < m->gradients ? fusion : m->gradients;
  m->buffers = ddp && !sharded_grads ? m->gradients : bucket;
  shard(m, plan, parameters, grad);
  m->total = m->weights + m->master + m->gradients + m->optimizer + m->activations + m->buffers +
             m->units;
}

/* "blocks.3.attn.qkv" -> length of "blocks.3"; 0 when the name has fewer than two dots */
size_t rh_memory_unit_key(const char *name) {
  const char *dot = name ? strchr(name, '.') : NULL;
  const char *second = dot ? strchr(dot + 1, '.') : NULL;
  return second ? (size_t)(second - name) : 0;
}

bool rh_memory_unit_opens(const rh_layer *layers, int i, size_t k) {
  const char *prev = i > 0 ? layers[i - 1].name : NULL;
  return !prev || rh_memory_unit_key(prev) != k || strncmp(prev, layers[i].name, k) != 0;
}

/* The number of dotted parts of a name ("blocks.3.attn.qkv": 4). */
static int parts(const char *name) {
  int k = name && *name ? 1 : 0;
  for (const char *c = name; c && *c; c++) k += *c == '.';
  return k;
}

/* The length of the name's first d parts (d <= its parts). */
static size_t prefix(const char *name, int d) {
  size_t k = 0;
  for (int seen = 0; name[k]; k++)
    if (name[k] == '.' && ++seen == d) break;
  return k;
}

/* Whether the leaves [a, b), all under a module of d parts, sit under children named by numbers:
 * a ModuleList (or ModuleDict of indices), which size_based_auto_wrap_policy never wraps. */
static bool container(const char *const *names, int a, int b, int d) {
  for (int i = a; i < b; i++) {
    size_t from = prefix(names[i], d) + 1, to = prefix(names[i], d + 1);
    if (parts(names[i]) <= d || to <= from) return false;
    for (size_t c = from; c < to; c++)
      if (names[i][c] < '0' || names[i][c] > '9') return false;
  }
  return true;
}

/* size_based_auto_wrap_policy: the modules the dotted names imply, deepest first; a module is a
 * unit when the parameters under it that no deeper unit took reach min_params. */
static int wrap_by_size(int n, const char *const *names, const double *params, double min_params,
                        int *unit_of) {
  int deepest = 0, units = 0;
  for (int i = 0; i < n; i++) {
    unit_of[i] = -1;
    if (parts(names[i]) > deepest) deepest = parts(names[i]);
  }
  for (int d = deepest; d >= 1; d--)
    for (int a = 0; a < n;) { /* a module of d parts: the run of leaves sharing its name */
      if (parts(names[a]) < d) {
        a++;
        continue;
      }
      size_t k = prefix(names[a], d);
      int b = a + 1;
      while (b < n && parts(names[b]) >= d && prefix(names[b], d) == k &&
             strncmp(names[a], names[b], k) == 0)
        b++;
      double free_params = 0;
      for (int i = a; i < b; i++) free_params += unit_of[i] < 0 ? params[i] : 0;
      if (free_params >= min_params && free_params > 0 && !container(names, a, b, d)) {
        for (int i = a; i < b; i++)
          if (unit_of[i] < 0) unit_of[i] = units;
        units++;
      }
      a = b;
    }
  return units;
}

int rh_memory_wrap(int n, const char *const *names, const double *params, double min_params,
                   int *unit_of) {
  if (min_params > 0) {
    int units = wrap_by_size(n, names, params, min_params, unit_of);
    /* numbered as forward meets them */
    int *renumber = malloc((size_t)(units ? units : 1) * sizeof *renumber), next = 0;
    if (!renumber) return -1;
    for (int u = 0; u < units; u++) renumber[u] = -1;
    for (int i = 0; i < n; i++)
      if (unit_of[i] >= 0 && renumber[unit_of[i]] < 0) renumber[unit_of[i]] = next++;
    for (int i = 0; i < n; i++)
      if (unit_of[i] >= 0) unit_of[i] = renumber[unit_of[i]];
    free(renumber);
    return units;
  }
  int u = -1; /* transformer_auto_wrap_policy: each block a unit */
  for (int i = 0; i < n; i++) {
    size_t k = rh_memory_unit_key(names[i]);
    const char *prev = i > 0 ? names[i - 1] : NULL;
    if (k && (!prev || rh_memory_unit_key(prev) != k || strncmp(prev, names[i], k) != 0)) u++;
    unit_of[i] = k ? u : -1;
  }
  return u + 1;
}

int rh_memory_units(const rh_layer *layers, int n, double min_params, double *largest,
                    double *root) {
  *largest = *root = 0;
  const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
  double *params = malloc((size_t)(n ? n : 1) * sizeof *params), *sums = NULL;
  int *unit_of = malloc((size_t)(n ? n : 1) * sizeof *unit_of), units = -1;
  if (names && params && unit_of) {
    for (int i = 0; i < n; i++) {
      names[i] = layers[i].name ? layers[i].name : "";
      params[i] = layers[i].parameters;
    }
    units = rh_memory_wrap(n, names, params, min_params, unit_of);
  }
  if (units >= 0 && (sums = calloc((size_t)units + 1, sizeof *sums))) {
    for (int i = 0; i < n; i++) sums[unit_of[i] >= 0 ? unit_of[i] : units] += params[i];
    for (int u = 0; u < units; u++) *largest = fmax(*largest, sums[u]);
    *root = sums[units];
  }
  free(sums);
  free(names);
  free(params);
  free(unit_of);
  return units;
}
