/*
 * memory.h: what one GPU holds while it trains, by part: the weights (and, training in bf16 or
 * fp8, their fp32 master copy), the gradients, the optimizer's state, the activations kept for
 * backward, and the buffers the gradients are reduced in.  The parts follow the accounting of
 * Rajbhandari et al. 2020 (ZeRO, section 3: 16 bytes a parameter for mixed-precision Adam).  The
 * CUDA context, the framework's workspaces and the allocator's fragmentation are not counted.
 */
#ifndef RH_MEMORY_H
#define RH_MEMORY_H

#include "optim.h"

#include <stdbool.h>

typedef struct rh_memory_use {
  double weights, master, gradients, optimizer, activations, buffers; /* bytes */
  double total;
  bool activations_known; /* the model's layers give their activations */
} rh_memory_use;

/* The memory of one GPU training `parameters` in precision (rh_precision) with micro-batches of
 * `micro_batch` samples that keep `activations` values each (0 with !known); the optimizer's
 * state; ddp: the buckets' copy of the gradients, else Horovod's fusion buffer of `fusion` bytes. */
void rh_memory_estimate(double parameters, double activations, bool known, double micro_batch,
                        int precision, rh_optimizer_kind optimizer, double momentum, bool ddp,
                        double fusion, rh_memory_use *m);

#endif
