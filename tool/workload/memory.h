/*
 * memory.h: what one GPU holds while it trains, by part: the weights (and, training in bf16 or
 * fp8, their fp32 master copy), the gradients, the optimizer's state, the activations kept for
 * backward, the buffers the gradients are reduced in, and under full sharding the units gathered
 * whole for the layer running.  The parts follow the accounting of Rajbhandari et al. 2020 (ZeRO,
 * section 3 and 5: 16 bytes a parameter for mixed-precision Adam; stage 1 shards the optimizer's
 * state and master copy over the data-parallel ranks, stage 2 the gradients too, stage 3 the
 * weights too).  The CUDA context, the framework's workspaces and the allocator's fragmentation
 * are not counted.
 */
#ifndef RH_MEMORY_H
#define RH_MEMORY_H

#include "family.h"
#include "optim.h"

#include <stdbool.h>

/* recipe.sharding: ZeRO's stages and FSDP's strategies, the order sharding grows in */
typedef enum rh_sharding {
  RH_SHARD_NONE,      /* DDP, Horovod: every rank the whole state (FSDP NO_SHARD) */
  RH_SHARD_OPTIMIZER, /* ZeRO-1: the optimizer's state and the fp32 master copy */
  RH_SHARD_GRADIENTS, /* ZeRO-2, FSDP SHARD_GRAD_OP: and the gradients */
  RH_SHARD_HYBRID,    /* FSDP HYBRID_SHARD (HSDP): everything, over the GPUs of a node */
  RH_SHARD_FULL,      /* ZeRO-3, FSDP FULL_SHARD: everything, over every rank */
  RH_SHARD_COUNT
} rh_sharding;

extern const char *const rh_sharding_names[RH_SHARD_COUNT + 1]; /* "none", ...; NULL-ended */
/* What each is called where people set it: "ZeRO-1", "ZeRO-3, FSDP FULL_SHARD" ... */
extern const char *const rh_sharding_titles[RH_SHARD_COUNT];

/* How the state is sharded: over `degree` ranks; under hybrid and full sharding the largest
 * unit's and the root unit's parameters (a unit is gathered whole while its layers run), unless
 * units_unknown (no layer falls in a unit, as a model given by its parameters alone). */
typedef struct rh_shard_plan {
  rh_sharding stage;
  int degree;
  double unit, root;
  bool units_unknown;
} rh_shard_plan;

typedef struct rh_memory_use {
  double weights, master, gradients, optimizer, activations, buffers; /* bytes */
  double units; /* full sharding: the root unit and two units gathered whole, one unit's gradients */
  double total;
  bool activations_known; /* the model's layers give their activations */
  bool units_known;       /* false: full sharding of a model without layers (its units unknown) */
  rh_sharding sharding;
  int degree;             /* the ranks the state is sharded over (1: none) */
} rh_memory_use;

/* The memory of one GPU training `parameters` in precision (rh_precision) with micro-batches of
 * `micro_batch` samples that keep `activations` values each (0 with !known); the optimizer's
 * state; ddp: the buckets' copy of the gradients, else Horovod's fusion buffer of `fusion` bytes
 * (ZeRO-2: one bucket of `fusion` bytes before its reduce-scatter; hybrid and full: none apart
 * from the unit's gradients).  shard NULL: none. */
void rh_memory_estimate(double parameters, double activations, bool known, double micro_batch,
                        int precision, rh_optimizer_kind optimizer, double momentum, bool ddp,
                        double fusion, const rh_shard_plan *shard, rh_memory_use *m);

/* FSDP's units of n layers in forward order (names[i], params[i] parameters): unit_of[i] is
 * layer i's unit, numbered as forward meets them, -1 the root unit; returns the number of units
 * (-1: out of memory).  min_params 0: transformer_auto_wrap_policy, the layers whose names share
 * their first two parts ("blocks.3.attn.qkv" is in "blocks.3") one unit; what no unit takes
 * (embeddings, the last norm, the head) is the root unit.  min_params > 0:
 * size_based_auto_wrap_policy(min_num_params), on the modules the dotted names imply, deepest
 * first: a module is a unit when the parameters under it that no deeper unit took reach
 * min_params; lists of numbered children (ModuleList) and the model itself are never wrapped. */
int rh_memory_wrap(int n, const char *const *names, const double *params, double min_params,
                   int *unit_of);
/* The same over the model's layers: *largest, the parameters of the largest unit; *root, the
 * root unit's.  Returns the number of units (-1: out of memory). */
int rh_memory_units(const rh_layer *layers, int n, double min_params, double *largest,
                    double *root);

/* The length of a layer name's unit ("blocks.3" of "blocks.3.attn.qkv"); 0: in the root unit. */
size_t rh_memory_unit_key(const char *name);
/* Whether layer i opens a unit other than layer i - 1's (k: its unit key, not 0). */
bool rh_memory_unit_opens(const rh_layer *layers, int i, size_t k);

#endif
