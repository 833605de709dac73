/*
 * compute_model.h: how long a GPU takes for one layer's kernels.  Without a peak rate the GPU runs
 * every FLOP at its sustained training rate (gpu.tflops); with one, a layer takes the longer of
 * its GEMM time and its memory time (a roofline), and a GEMM reaches a fraction of the peak that
 * falls for small matrices: efficiency(W) = gemm_efficiency x W / (W + gemm_half), W its FLOPs.
 */
#ifndef RH_COMPUTE_MODEL_H
#define RH_COMPUTE_MODEL_H

#include <stdbool.h>

typedef struct rh_gpu_model {
  double sustained;       /* FLOP/s: gpu.tflops, the rate the simulated GPU runs at */
  double peak;            /* FLOP/s, dense, at the training precision; 0: no roofline */
  double memory_bw;       /* bytes/s of the GPU's memory; 0: not a limit */
  double gemm_efficiency; /* fraction of the peak large GEMMs reach (0: 1) */
  double gemm_half;       /* FLOPs of the GEMM that reaches half of that (0: no fall-off) */
  double overhead;        /* seconds of framework work per step, the GPU idle */
} rh_gpu_model;

/* Whether layers are timed by the roofline (a peak rate is given). */
bool rh_compute_roofline(const rh_gpu_model *g);
/* Seconds of one kernel of `flops` FLOPs moving `bytes` of memory. */
double rh_compute_seconds(const rh_gpu_model *g, double flops, double bytes);

#endif
