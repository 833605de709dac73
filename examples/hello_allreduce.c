/*
 * hello_allreduce.c: the smallest training-shaped program on the rehearsal runtime.  Every rank
 * computes a "gradient", the ranks average it, and rank 0 reports.  It includes nothing but the
 * public header, so the same source runs on the simulator and on real hardware.
 *
 *   ./build/examples/hello_allreduce --scenario scenarios/default.yaml
 */
#include "rehearsal.h"

#include <stdio.h>

static int train(rh_ctx *ctx, void *arg) {
  (void)arg;
  enum { N = 1000 };
  float grad[N];
  for (int i = 0; i < N; i++) grad[i] = (float)(rh_rank(ctx) + i % 10);
  rh_status st = rh_compute(ctx, 1e9); /* forward and backward */
  if (st == RH_OK) st = rh_allreduce(ctx, grad, grad, N, RH_FLOAT32, RH_AVERAGE, NULL);
  if (st != RH_OK) {
    fprintf(stderr, "rank %d: %s\n", rh_rank(ctx), rh_status_string(st));
    return 1;
  }
  /* the mean of rank + i % 10 over ranks 0..size-1 */
  float want = (float)(rh_size(ctx) - 1) / 2 + 3;
  int ok = grad[3] == want;
  if (rh_rank(ctx) == 0)
    printf("rank 0 of %d (local %d of %d, cross %d of %d): averaged gradient[3] = %g (%s) at "
           "t = %.9f s\n",
           rh_size(ctx), rh_local_rank(ctx), rh_local_size(ctx), rh_cross_rank(ctx),
           rh_cross_size(ctx), grad[3], ok ? "right" : "WRONG", rh_time(ctx));
  return ok ? 0 : 1;
}

int main(int argc, char **argv) { return rh_main(argc, argv, train, NULL); }
