/*
 * recompute.h: activation checkpointing (recipe.activation_checkpointing), as PyTorch's
 * checkpoint_wrapper around each transformer block (full) or Megatron-LM's selective
 * recomputation of the attention core (selective; Korthikanti et al. 2022): what a layer keeps for
 * backward, and which layers run their forward again in backward.  A block is the layers named
 * `blocks.N.…`, FSDP's unit (memory.h).
 */
#ifndef RH_RECOMPUTE_H
#define RH_RECOMPUTE_H

#include "family.h"

#include <stdbool.h>

typedef enum rh_recompute { RH_RECOMPUTE_NONE, RH_RECOMPUTE_SELECTIVE, RH_RECOMPUTE_FULL } rh_recompute;
extern const char *const rh_recompute_names[]; /* "none", "selective", "full", NULL */

/* Whether the layer runs its forward again in backward: full, every layer of a block; selective,
 * a block's attention cores. */
bool rh_recompute_layer(rh_recompute mode, const rh_layer *l);

/* Values a sample keeps for backward over the n layers (forward order): full, each block its
 * input (its first layer's kept values) and, while one block is recomputed, that block's all (the
 * largest); selective, every layer's but the attention cores', and the largest of those (the one
 * recomputed).  Layers outside blocks keep theirs. */
double rh_recompute_activations(rh_recompute mode, const rh_layer *layers, int n);

/* Whether any layer is in a block (checkpointing has something to wrap). */
bool rh_recompute_has_blocks(const rh_layer *layers, int n);

#endif
