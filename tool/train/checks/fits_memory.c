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
 * otherwise the check says it could not judge rather than pass.  A job that does not fit is told
 * the least sharding that would (`fits`, the caller's). */
/* "weights 13.48, master 26.95, ..." (GB), with the units full sharding gathers */
static void parts(const rh_memory_use *m, const char *acts, char *buf, size_t len) {
  int k = snprintf(buf, len, "weights %.2f, master %.2f, gradients %.2f, optimizer %.2f, "
                   "activations %s, buffers %.2f", m->weights / 1e9, m->master / 1e9,
                   m->gradients / 1e9, m->optimizer / 1e9, acts, m->buffers / 1e9);
  if (k <= 0 || (size_t)k >= len) return;
  if (m->units > 0)
    snprintf(buf + k, len - (size_t)k, ", gathered units %.2f", m->units / 1e9);
  else if (!m->units_known)
    snprintf(buf + k, len - (size_t)k, ", gathered units not known");
}

void rh_train_verdict_memory(rh_train_result *r, const rh_memory_use *m, double capacity,
                             const char *fits) {
  rh_check_result *c = &r->checks[RH_CHECK_FITS_MEMORY];
  bool ok = m->total <= capacity;
  char what[240], sharded[64] = "";
  if (m->degree > 1)
    snprintf(sharded, sizeof sharded, ", sharded (%s) over %d ranks",
             rh_sharding_names[m->sharding], m->degree);
  if (ok && !m->activations_known) {
    *c = (rh_check_result){.skipped = true};
    parts(m, "not known", what, sizeof what);
    snprintf(c->detail, sizeof c->detail,
             "not judged: the model's layers give no shapes, so its activations are not known; "
             "the rest, %.2f GB per GPU of %.4g GB%s (%s), fits", m->total / 1e9, capacity / 1e9,
             sharded, what);
    return;
  }
  *c = (rh_check_result){.ran = true, .passed = ok};
  char acts[32] = "not known", advice[160];
  if (m->activations_known) snprintf(acts, sizeof acts, "%.2f", m->activations / 1e9);
  parts(m, acts, what, sizeof what);
  if (fits && *fits)
    snprintf(advice, sizeof advice, ": it would run out of memory; %s", fits);
  else if (m->activations_known)
    snprintf(advice, sizeof advice, ": it would run out of memory (a smaller batch, gradient "
             "accumulation, or activation checkpointing)");
  else
    snprintf(advice, sizeof advice, ": it would run out of memory before any activation (a "
             "lower precision, or a lighter optimizer)");
  snprintf(c->detail, sizeof c->detail, "%.2f GB per GPU of %.4g GB%s: %s%s", m->total / 1e9,
           capacity / 1e9, sharded, what, ok ? "" : advice);
}

const train_check train__check_fits_memory = {.id = RH_CHECK_FITS_MEMORY};
