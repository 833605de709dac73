/*
 * fits_memory.c: the job fits in the GPU's memory.  What one GPU holds (memory.h: weights, master
 * copy, gradients, optimizer state, activations of a micro-batch, reduction buffers) against its
 * memory_GB.  Judged before the step runs: the estimate needs the model's shapes, not the run.
 */
#include "../internal.h"
#include "memory.h"

#include <stdio.h>

void rh_train_verdict_memory(rh_train_result *r, const rh_memory_use *m, double capacity) {
  rh_check_result *c = &r->checks[RH_CHECK_FITS_MEMORY];
  bool ok = m->total <= capacity;
  *c = (rh_check_result){.ran = true, .passed = ok};
  snprintf(c->detail, sizeof c->detail,
           "%.2f GB per GPU of %.4g GB: weights %.2f, master %.2f, gradients %.2f, optimizer %.2f, "
           "activations %.2f, buffers %.2f%s",
           m->total / 1e9, capacity / 1e9, m->weights / 1e9, m->master / 1e9, m->gradients / 1e9,
           m->optimizer / 1e9, m->activations / 1e9, m->buffers / 1e9,
           ok ? "" : ": it would run out of memory (a smaller batch, gradient accumulation, or "
                     "activation checkpointing)");
}

const train_check train__check_fits_memory = {.id = RH_CHECK_FITS_MEMORY};
