/*
 * elastic_descent.c: a training loop in Horovod's elastic style on the public header alone.  The
 * "model" is a vector w pulled towards a target by gradient descent; every rank computes the same
 * gradient, the ranks average it, and w moves.  The state (w and the position) is committed every
 * 5 steps and the loop runs in rh_elastic_run, so that when a scenario kills a node the survivors
 * roll back to the last commit, re-form the world and go on.  However many workers finish, w
 * must end where 60 steps of w <- w - lr (w - target) put it: (1 - lr)^60 of the way back.
 *
 *   ./build/examples/elastic_descent --scenario scenarios/failures/host-crash.yaml
 */
#include "rehearsal.h"

#include <math.h>
#include <stdio.h>

enum { N = 256, EPOCHS = 3, STEPS = 20, COMMIT_EVERY = 5 };
static const float LR = 0.05f;

typedef struct job {
  float w[N];
  int32_t position[2]; /* epoch, step: where to go on from */
  int resets;          /* resets this worker went through */
} job;

static void on_reset(rh_ctx *ctx, void *arg) {
  (void)ctx;
  ((job *)arg)->resets++;
}

static rh_status train(rh_ctx *ctx, rh_state *state, void *arg) {
  job *j = arg;
  float grad[N];
  while (j->position[0] < EPOCHS) {
    while (j->position[1] < STEPS) {
      rh_step_begin(ctx, j->position[0], j->position[1]);
      for (int i = 0; i < N; i++) grad[i] = j->w[i] - (float)(i % 7); /* target: i % 7 */
      rh_status st = rh_compute(ctx, 1e9); /* forward and backward */
      if (st == RH_OK) st = rh_allreduce(ctx, grad, grad, N, RH_FLOAT32, RH_AVERAGE, NULL);
      if (st != RH_OK) return st;
      for (int i = 0; i < N; i++) j->w[i] -= LR * grad[i];
      j->position[1]++;
      if (j->position[1] % COMMIT_EVERY == 0 && (st = rh_state_commit(state)) != RH_OK) return st;
    }
    j->position[0]++;
    j->position[1] = 0;
  }
  return RH_OK;
}

static int run(rh_ctx *ctx, void *arg) {
  (void)arg;
  job j = {.position = {0, 0}};
  for (int i = 0; i < N; i++) j.w[i] = 10.0f;
  rh_state *state = rh_state_create(ctx);
  rh_status st = state ? RH_OK : RH_ERR_NOMEM;
  if (st == RH_OK) st = rh_state_register(state, "w", j.w, N, RH_FLOAT32);
  if (st == RH_OK) st = rh_state_register(state, "position", j.position, 2, RH_INT32);
  if (st == RH_OK) st = rh_state_on_reset(state, on_reset, &j);
  if (st == RH_OK) st = rh_elastic_run(ctx, state, train, &j);
  rh_state_free(state);
  if (st == RH_ERR_EXCLUDED) return 0; /* this worker's node left the job: not an error */
  if (st != RH_OK) {
    fprintf(stderr, "rank %d: %s\n", rh_rank(ctx), rh_status_string(st));
    return 1;
  }
  /* w_i - t_i shrinks by (1 - lr) each step, from 10 - t_i */
  double worst = 0, shrink = pow(1.0 - LR, EPOCHS * STEPS);
  for (int i = 0; i < N; i++) {
    double want = (i % 7) + (10.0 - (i % 7)) * shrink;
    worst = fmax(worst, fabs(j.w[i] - want) / want);
  }
  bool ok = worst < 1e-5;
  if (rh_rank(ctx) == 0)
    printf("rank 0 of %d after %d reset%s: w[1] = %.6f, %d steps of descent give %.6f (%s) at "
           "t = %.6f s\n", rh_size(ctx), j.resets, j.resets == 1 ? "" : "s", j.w[1],
           EPOCHS * STEPS, 1 + 9 * shrink, ok ? "right" : "WRONG", rh_time(ctx));
  return ok ? 0 : 1;
}

int main(int argc, char **argv) { return rh_main(argc, argv, run, NULL); }
