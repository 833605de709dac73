/*
 * losses.h: what a data-parallel step loses beside the network, each a mechanism with its own
 * parameter (docs/validation.md gives each one's source):
 * - the framework's own work on each gradient in a distributed step, in proportion to its bytes:
 *   DDP's autograd hooks and bucketing (recipe.reducer_ms_per_GB).  One GPU without the framework
 *   pays none of it, so a single-GPU run is unchanged;
 * - the copies of the gradients into the fusion or bucket buffers before their allreduce and
 *   back out after it: each byte read and written twice, at the GPU's copy rate (memory_GBps);
 * - the wait for the slowest rank: each rank's step time varies (relative standard deviation
 *   `step_spread`), and a synchronous allreduce waits for the slowest of N, whose expected excess
 *   over the mean is step_spread x E[max of N standard normals] of the step's compute.
 * Two more live elsewhere: NCCL's kernels sharing the GPU with compute are the cluster's
 * nccl_slowdown (the simulator's CPU model); Horovod's negotiation before each fused allreduce
 * (timing-only runs of framework horovod, two ranks or more) is a collective of its own, an
 * allreduce of one 4-byte word per rank ahead of each bucket on the same queue (the coordinator
 * gathers every rank's ready list and answers them all), priced by the network model like any
 * other (train/loop.c, report/bottleneck.c).
 */
#ifndef RH_LOSSES_H
#define RH_LOSSES_H

typedef struct rh_losses {
  double reducer_per_byte;  /* seconds per gradient byte, in a step of 2 ranks or more */
  double step_spread;       /* relative standard deviation of a GPU's step time */
  double copy_bw;           /* the GPU's copy rate, bytes read and written a second; 0: free */
} rh_losses;

/* E[max of n independent standard normal draws] (0 for n = 1), by quadrature. */
double rh_expected_max_normal(int n);
/* The seconds of one copy of `bytes` of gradients into or out of a buffer (read and written), in
 * a step of `size` ranks. */
double rh_loss_copy(const rh_losses *l, int size, double bytes);
/* The framework's seconds, in a step of `size` ranks, for a gradient of `bytes`. */
double rh_loss_framework(const rh_losses *l, int size, double bytes);

#endif
