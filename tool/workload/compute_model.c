/*
 * compute_model.c: see compute_model.h.  The simulated GPU runs at the sustained rate; a kernel
 * the roofline times is charged as the FLOPs that rate spends in that time, so stragglers and
 * NCCL's share of the GPU slow it as they slow any other compute.
 */
#include "compute_model.h"

#include <math.h>

bool rh_compute_roofline(const rh_gpu_model *g) { return g->peak > 0; }

double rh_compute_seconds(const rh_gpu_model *g, double flops, double bytes) {
  if (!rh_compute_roofline(g)) return g->sustained > 0 ? flops / g->sustained : 0;
  double eff = g->gemm_efficiency > 0 ? g->gemm_efficiency : 1;
  if (g->gemm_half > 0 && flops > 0) eff *= flops / (flops + g->gemm_half);
  double t = flops > 0 ? flops / (g->peak * eff) : 0;
  if (g->memory_bw > 0 && bytes > 0) t = fmax(t, bytes / g->memory_bw);
  return t;
}

