/*
 * recompute.c: see recompute.h.
 */
#include "recompute.h"
#include "memory.h"

#include <string.h>

const char *const rh_recompute_names[] = {"none", "selective", "full", NULL};

/* "blocks.3.attn.qkv" -> length of "blocks.3" (its FSDP unit); 0 when the layer is in no block */
static size_t block_of(const char *name) {
  return name && strncmp(name, "blocks.", 7) == 0 ? rh_memory_unit_key(name) : 0;
}

static bool attention(const rh_layer *l) { return l->op.kind == RH_LAYER_ATTENTION; }

bool rh_recompute_layer(rh_recompute mode, const rh_layer *l) {
  if (mode == RH_RECOMPUTE_NONE || block_of(l->name) == 0) return false;
  return mode == RH_RECOMPUTE_FULL || attention(l);
}

bool rh_recompute_has_blocks(const rh_layer *layers, int n) {
  for (int i = 0; i < n; i++)
    if (block_of(layers[i].name)) return true;
  return false;
}

double rh_recompute_activations(rh_recompute mode, const rh_layer *layers, int n) {
  double kept = 0, largest = 0, run = 0;
  for (int i = 0; i < n; i++) {
    double acts = layers[i].activations;
    size_t k = block_of(layers[i].name);
    if (mode == RH_RECOMPUTE_NONE || k == 0) {
      kept += acts;
      continue;
    }
    if (mode == RH_RECOMPUTE_SELECTIVE) {
      if (attention(&layers[i]) && acts > largest) largest = acts;
      if (!attention(&layers[i])) kept += acts;
      continue;
    }
    bool opens = rh_memory_unit_opens(layers, i, k);
    if (opens) kept += acts; /* the block's input, kept at its first layer */
    run = opens ? acts : run + acts;
    if (run > largest) largest = run;
  }
  return kept + largest;
}
