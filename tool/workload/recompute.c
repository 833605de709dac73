/*
 * recompute.c: see recompute.h.
 */
#include "recompute.h"

#include <string.h>

const char *const rh_recompute_names[] = {"none", "selective", "full", NULL};

/* "blocks.3.attn.qkv" -> length of "blocks.3"; 0 when the layer is in no block */
static size_t block_of(const char *name) {
  if (!name || strncmp(name, "blocks.", 7) != 0) return 0;
  const char *dot = strchr(name + 7, '.');
  return dot ? (size_t)(dot - name) : 0;
}

bool rh_recompute_layer(rh_recompute mode, const char *name, bool attention) {
  if (mode == RH_RECOMPUTE_NONE || block_of(name) == 0) return false;
  return mode == RH_RECOMPUTE_FULL || attention;
}

bool rh_recompute_has_blocks(const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (block_of(names[i])) return true;
  return false;
}

double rh_recompute_activations(rh_recompute mode, const char *const *names, const bool *attention,
                                const double *acts, int n) {
  double kept = 0, largest = 0, run = 0;
  for (int i = 0; i < n; i++) {
    size_t k = block_of(names[i]);
    if (mode == RH_RECOMPUTE_NONE || k == 0) {
      kept += acts[i];
      continue;
    }
    if (mode == RH_RECOMPUTE_SELECTIVE) {
      if (attention[i] && acts[i] > largest) largest = acts[i];
      if (!attention[i]) kept += acts[i];
      continue;
    }
    bool same = i > 0 && block_of(names[i - 1]) == k && strncmp(names[i - 1], names[i], k) == 0;
    if (!same) kept += acts[i]; /* the block's input, kept at its first layer */
    run = same ? run + acts[i] : acts[i];
    if (run > largest) largest = run;
  }
  return kept + largest;
}
