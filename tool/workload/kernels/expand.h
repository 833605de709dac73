/*
 * expand.h: the walk that turns layers into kernels (expand.c), shared with the files that add
 * the attention core's kernels (attention.c) and the step's own (optimizer.c).
 */
#ifndef RH_KERNELS_EXPAND_H
#define RH_KERNELS_EXPAND_H

#include "kernels.h"

typedef struct expansion {
  const rh_kernel_model *km;
  double batch;
  rh_kernel_list *out;
  int layer;           /* the layer the kernels belong to (-1: the step's) */
  rh_step_phase phase;
  bool fuse_next_norm; /* the residual add goes into the norm that follows */
  bool add_into_norm;  /* this norm takes the residual add before it */
  bool winograd;       /* the GEMMs being added may run as Winograd's (a 3x3 convolution) */
  bool conv;           /* the GEMMs being added are a convolution's */
} expansion;

/* Appends a kernel (its layer and phase the walk's); false when out of memory. */
bool rh__kernel_emit(expansion *x, rh_kernel k);
/* Appends a memory-bound kernel of `bytes`, standing for `launches` launches. */
void rh__kernel_memory(expansion *x, const char *what, double bytes, int launches);

/* The attention core's kernels, eager or fused (attention.c). */
void rh__kernels_attention(expansion *x, const rh_layer *l, bool backward);
/* Mixed precision's loss scaling at the end of forward (optimizer.c). */
void rh__kernels_scale_loss(expansion *x);
/* The optimizer's kernels, gradient zeroing and mixed precision's unscaling (optimizer.c). */
void rh__kernels_optimizer(expansion *x);

#endif
