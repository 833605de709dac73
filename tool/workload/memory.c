/*
 * memory.c: see memory.h.
 */
#include "memory.h"

#include "scenario.h"

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

void rh_memory_units(const rh_layer *layers, int n, double *largest, double *root) {
  *largest = *root = 0;
  double run = 0;
  for (int i = 0; i < n; i++) {
    size_t k = rh_memory_unit_key(layers[i].name);
    if (k == 0) {
      *root += layers[i].parameters;
      continue;
    }
    run = rh_memory_unit_opens(layers, i, k) ? layers[i].parameters : run + layers[i].parameters;
    if (run > *largest) *largest = run;
  }
}
