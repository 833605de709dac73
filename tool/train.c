/*
 * train.c: the timing replay of data-parallel training (see train.h).  Gradients are fp32 (or fp16
 * on the wire with compression); buckets close when adding the next layer would pass the fusion
 * threshold, as Horovod's fusion buffer does, and a tensor larger than the threshold goes alone.
 */
#include "train.h"

#include <stdlib.h>

rh_status rh_run_init(rh_run *run, const rh_scenario *sc) {
  *run = (rh_run){.sc = sc, .error = RH_OK, .error_rank = -1};
  run->epochs = calloc((size_t)sc->recipe.epochs, sizeof(rh_epoch_stats));
  return run->epochs ? RH_OK : RH_ERR_NOMEM;
}

void rh_run_free(rh_run *run) {
  free(run->epochs);
  run->epochs = NULL;
}

typedef struct pending {
  rh_request **reqs;
  int n, cap;
} pending;

static rh_status issue(rh_ctx *ctx, pending *p, double elems, double *max_bytes) {
  if (elems <= 0) return RH_OK;
  if (p->n == p->cap) {
    int cap = p->cap ? 2 * p->cap : 16;
    rh_request **grown = realloc(p->reqs, (size_t)cap * sizeof *grown);
    if (!grown) return RH_ERR_NOMEM;
    p->reqs = grown;
    p->cap = cap;
  }
  if (elems * 4 > *max_bytes) *max_bytes = elems * 4;
  rh_reduce_opts opts = RH_REDUCE_OPTS_INIT;
  opts.name = "gradients";
  return rh_iallreduce(ctx, NULL, NULL, (size_t)elems, RH_FLOAT32, RH_AVERAGE, &opts,
                       &p->reqs[p->n++]);
}

static rh_status wait_all(pending *p) {
  rh_status first = RH_OK;
  for (int i = 0; i < p->n; i++) {
    rh_status st = rh_wait(p->reqs[i]);
    if (first == RH_OK) first = st;
  }
  p->n = 0;
  return first;
}

/* One training step: forward, backward with bucketed background allreduces, then the wait. */
static rh_status step(rh_ctx *ctx, rh_run *run, pending *p, double *t_compute, int *buckets,
                      double *max_bytes) {
  const rh_scenario *sc = run->sc;
  double batch = sc->recipe.batch, threshold = rh_setting(ctx, RH_SETTING_FUSION_THRESHOLD) / 4;
  rh_status st = rh_compute(ctx, sc->model.forward_flops * batch);
  double bucket = 0;
  *buckets = 0;
  for (int l = sc->model.nlayers - 1; l >= 0 && st == RH_OK; l--) {
    double params = sc->model.layers[l].parameters;
    st = rh_compute(ctx, 2 * sc->model.forward_flops * batch * params / sc->model.parameters);
    if (st == RH_OK && bucket > 0 && bucket + params > threshold) {
      st = issue(ctx, p, bucket, max_bytes);
      bucket = 0;
      ++*buckets;
    }
    bucket += params;
  }
  *t_compute = rh_time(ctx);
  if (st == RH_OK && bucket > 0) {
    st = issue(ctx, p, bucket, max_bytes);
    ++*buckets;
  }
  rh_status w = wait_all(p);
  return st != RH_OK ? st : w;
}

int rh_train_rank(rh_ctx *ctx, void *arg) {
  rh_run *run = arg;
  const rh_scenario *sc = run->sc;
  long steps = rh_scenario_steps_per_epoch(sc);
  pending p = {0};
  rh_status st = RH_OK;
  double max_bytes = 0;
  int buckets = 0;
  for (int e = 0; e < (int)sc->recipe.epochs && st == RH_OK; e++) {
    rh_epoch_stats es = {.steps = steps, .start = rh_time(ctx)};
    for (long s = 0; s < steps && st == RH_OK; s++) {
      double t0 = rh_time(ctx), tc = t0;
      st = step(ctx, run, &p, &tc, &buckets, &max_bytes);
      es.compute += tc - t0;
      es.exposed_comm += rh_time(ctx) - tc;
    }
    es.end = rh_time(ctx);
    if (rh_rank(ctx) == 0) run->epochs[e] = es;
  }
  free(p.reqs);
  if (st != RH_OK) {
    if (run->error == RH_OK) {
      run->error = st;
      run->error_rank = rh_rank(ctx);
    }
    return 1;
  }
  if (rh_rank(ctx) == 0) {
    run->buckets_per_step = buckets;
    run->bucket_bytes_max = max_bytes;
    run->gradient_bytes = sc->model.parameters * 4;
  }
  return 0;
}
