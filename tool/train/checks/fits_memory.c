/*
 * fits_memory.c: the job fits in the GPU's memory.  What one GPU holds (memory.h: weights, master
 * copy, gradients, optimizer state, activations of a micro-batch, reduction buffers) against its
 * memory_GB.  Judged before the step runs, from the model, not the run; a model without shapes is
 * judged on what is known of it.
 */
#include "../internal.h"
#include "memory.h"

#include <stdio.h>

/* A model given by its parameters alone (no layer shapes) has no activations to count: what is
 * known (weights, gradients, optimizer, buffers) fails the check when it alone is too much, and
 * otherwise the check says it could not judge rather than pass. */
void rh_train_verdict_memory(rh_train_result *r, const rh_memory_use *m, double capacity) {
  rh_check_result *c = &r->checks[RH_CHECK_FITS_MEMORY];
  bool ok = m->total <= capacity;
  if (ok && !m->activations_known) {
    *c = (rh_check_result){.skipped = true};
    snprintf(c->detail, sizeof c->detail,
             "not judged: the model's layers give no shapes, so its activations are not known; "
             "the rest, %.2f GB per GPU of %.4g GB (weights %.2f, master %.2f, gradients %.2f, "
             "optimizer %.2f, buffers %.2f), fits",
             m->total / 1e9, capacity / 1e9, m->weights / 1e9, m->master / 1e9,
             m->gradients / 1e9, m->optimizer / 1e9, m->buffers / 1e9);
    return;
  }
  *c = (rh_check_result){.ran = true, .passed = ok};
  char acts[32] = "not known";
  if (m->activations_known) snprintf(acts, sizeof acts, "%.2f", m->activations / 1e9);
  snprintf(c->detail, sizeof c->detail,
           "%.2f GB per GPU of %.4g GB: weights %.2f, master %.2f, gradients %.2f, optimizer %.2f, "
           "activations %s, buffers %.2f%s",
           m->total / 1e9, capacity / 1e9, m->weights / 1e9, m->master / 1e9, m->gradients / 1e9,
           m->optimizer / 1e9, acts, m->buffers / 1e9,
           ok                     ? ""
           : m->activations_known ? ": it would run out of memory (a smaller batch, gradient "
                                    "accumulation, or activation checkpointing)"
                                  : ": it would run out of memory before any activation (a "
                                    "lower precision, or a lighter optimizer)");
}

const train_check train__check_fits_memory = {.id = RH_CHECK_FITS_MEMORY};
