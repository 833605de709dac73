/*
 * loop.c: the training loop of `rehearsal run` (see train.h).  One step: forward, then backward
 * layer by layer (last layer first) with the gradients fused into buckets of up to the fusion
 * threshold and averaged in the background while backward goes on, then the optimizer.  Rank 0
 * broadcasts the initial state (state.c), logs, and writes checkpoints; the checks (checks.c and
 * checks/) gather their evidence through rh_check_allgather, which costs no simulated time.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const rh_mistake_names[] = {
    "no_sharding",           "no_initial_broadcast",     "no_lr_scaling",
    "metric_average_rank0_only", "no_metric_average",    "checkpoint_on_every_rank",
    "mismatched_collective", "missing_collective",       NULL};

rh_status rh_train_result_init(rh_train_result *r, int capacity) {
  *r = (rh_train_result){.error = RH_OK, .error_rank = -1, .capacity = capacity};
  r->epochs_stats = calloc((size_t)(capacity > 0 ? capacity : 1), sizeof *r->epochs_stats);
  return r->epochs_stats ? RH_OK : RH_ERR_NOMEM;
}

void rh_train_result_free(rh_train_result *r) {
  free(r->epochs_stats);
  r->epochs_stats = NULL;
}

/* A run of tensors, in the order backward produced them, reduced as one fused allreduce. */
typedef struct bucket {
  int from, to;  /* positions in the walking order, [from, to) */
  size_t count;  /* elements */
  float *buf;    /* real: the packed gradients, owned; NULL: timing-only */
  rh_request *req; /* NULL when not issued */
} bucket;

/* ---- set-up -------------------------------------------------------------------------------- */

static rh_status setup(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  s->rank = rh_rank(s->ctx);
  s->size = rh_size(s->ctx);
  s->local_size = rh_local_size(s->ctx);
  s->last = s->rank == s->size - 1 && s->size > 1;
  s->recording = true;
  if (cfg->real) {
    s->ntensors = cfg->model.ntensors;
    s->nparams = cfg->model.nparams;
  } else {
    s->ntensors = cfg->nlayers;
  }
  s->tensors = calloc((size_t)s->ntensors, sizeof *s->tensors);
  if (!s->tensors) return RH_ERR_NOMEM;
  size_t off = 0;
  for (int i = 0; i < s->ntensors; i++) {
    if (cfg->real) {
      s->tensors[i] = (train_tensor){cfg->model.tensors[i].name, cfg->model.tensors[i].offset,
                               cfg->model.tensors[i].count, 0};
    } else {
      s->tensors[i] = (train_tensor){cfg->layers[i].name, off, (size_t)cfg->layers[i].parameters, 0};
      off += s->tensors[i].count;
    }
  }
  if (!cfg->real) s->nparams = off;
  /* backward costs twice the forward, spread over the layers by their FLOPs when the scenario
   * gives them, else by their parameters */
  for (int i = 0; i < s->ntensors; i++) {
    double f = cfg->real ? 0 : cfg->layers[i].forward_flops;
    s->tensors[i].share = f > 0 ? f / cfg->forward_flops
                                : (double)s->tensors[i].count / (double)s->nparams;
  }

  double factor = rh_recipe_lr_factor(cfg->lr_scaling, s->size, s->local_size);
  s->recipe_lr = (rh_lr_schedule){.initial_lr = cfg->base_lr * factor, .size = s->size,
                                  .warmup_epochs = cfg->warmup_epochs,
                                  .decay_epochs = cfg->decay_epochs, .ndecay = cfg->ndecay,
                                  .decay_factor = cfg->decay_factor};
  s->used_lr = s->recipe_lr;
  if (cfg->mistakes & RH_MISTAKE_NO_LR_SCALING) s->used_lr.initial_lr = cfg->base_lr;
  s->steps_per_epoch = rh_recipe_steps_per_epoch(cfg->steps_rule, cfg->train_samples, cfg->batch, s->size);
  s->last_batch = rh_recipe_last_batch(cfg->steps_rule, cfg->train_samples, cfg->batch, s->size);
  s->last_step = rh_recipe_last_step(cfg->stop_at_step, s->size);
  s->written = calloc((size_t)rh_recipe_epochs(cfg->epochs, cfg->epochs_divided, s->size) + 2, 1);
  if (!s->written) return RH_ERR_NOMEM;
  if (!cfg->real) return RH_OK;

  long B = cfg->batch;
  int in = cfg->model.inputs;
  s->params = calloc(s->nparams, sizeof(float));
  s->grad = calloc(s->nparams, sizeof(float));
  s->x = calloc((size_t)B * (size_t)in, sizeof(float));
  s->y = calloc((size_t)B, sizeof(int32_t));
  s->shard_n = rh_sampler_shard_size(cfg->train_samples, s->size);
  long whole = cfg->train_samples;
  s->shard = calloc((size_t)(whole > s->shard_n ? whole : s->shard_n), sizeof(long));
  s->used = calloc((size_t)B, sizeof(long));
  s->epoch_used = calloc((size_t)(s->steps_per_epoch * B + 1), sizeof(long));
  s->all_used = calloc((size_t)s->size * (size_t)B, sizeof(long));
  if (!s->params || !s->grad || !s->x || !s->y || !s->shard || !s->used || !s->epoch_used ||
      !s->all_used)
    return RH_ERR_NOMEM;
  rh_status st = rh_optimizer_init(&s->opt, cfg->optimizer, s->nparams, cfg->momentum, cfg->beta1,
                                   cfg->beta2, cfg->eps, cfg->rho);
  if (st == RH_OK && s->rank == 0 && cfg->check[RH_CHECK_SERIAL]) {
    s->sparams = calloc(s->nparams, sizeof(float));
    s->sgrad = calloc(s->nparams, sizeof(float));
    s->sx = calloc((size_t)s->size * (size_t)B * (size_t)in, sizeof(float));
    s->sy = calloc((size_t)s->size * (size_t)B, sizeof(int32_t));
    if (!s->sparams || !s->sgrad || !s->sx || !s->sy) return RH_ERR_NOMEM;
    st = rh_optimizer_init(&s->sopt, cfg->optimizer, s->nparams, cfg->momentum, cfg->beta1,
                           cfg->beta2, cfg->eps, cfg->rho);
  }
  return st;
}

static void teardown(rank_state *s) {
  free(s->written);
  free(s->tensors);
  free(s->params);
  free(s->grad);
  free(s->x);
  free(s->y);
  free(s->shard);
  free(s->used);
  free(s->epoch_used);
  free(s->all_used);
  free(s->sparams);
  free(s->sgrad);
  free(s->sx);
  free(s->sy);
  rh_optimizer_free(&s->opt);
  rh_optimizer_free(&s->sopt);
}

/* ---- one step ------------------------------------------------------------------------------- */

/* Packs a bucket's gradients into its fusion buffer and starts their average. */
static rh_status issue_bucket(rank_state *s, const int *order, bucket *b) {
  if (s->cfg->real) {
    b->buf = malloc(b->count * sizeof(float) + 1);
    if (!b->buf) return RH_ERR_NOMEM;
    size_t off = 0;
    for (int k = b->from; k < b->to; k++) {
      const train_tensor *t = &s->tensors[order[k]];
      memcpy(b->buf + off, s->grad + t->offset, t->count * sizeof(float));
      off += t->count;
    }
  }
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = s->tensors[order[b->from]].name;
  return rh_iallreduce(s->ctx, b->buf, b->buf, b->count, RH_FLOAT32, RH_AVERAGE, &o, &b->req);
}

static void unpack_bucket(rank_state *s, const int *order, const bucket *b) {
  size_t off = 0;
  for (int k = b->from; k < b->to; k++) {
    const train_tensor *t = &s->tensors[order[k]];
    memcpy(s->grad + t->offset, b->buf + off, t->count * sizeof(float));
    off += t->count;
  }
}

/* Loads this step's samples: the shard's positions [step * B, step * B + n). */
static void load_batch(rank_state *s, long step, long n) {
  const rh_train_config *cfg = s->cfg;
  int in = cfg->model.inputs;
  for (long j = 0; j < n; j++) {
    long idx = s->shard[(step * cfg->batch + j) % s->shard_n];
    s->used[j] = idx;
    rh_dataset_get(cfg->train, idx, s->x + (size_t)j * (size_t)in, &s->y[j]);
  }
  s->nused = n;
}

/* Forward and backward with the gradient buckets reduced as backward goes, then the update. */
static rh_status train_step(rank_state *s, int epoch, long step, double *t_compute, double *lr_out) {
  const rh_train_config *cfg = s->cfg;
  rh_ctx *ctx = s->ctx;
  long n = step == s->steps_per_epoch - 1 ? s->last_batch : cfg->batch;
  double loss = 0;
  int correct = 0;
  if (cfg->real) {
    load_batch(s, step, n);
    loss = rh_model_loss_grad(&cfg->model, s->params, s->x, s->y, (int)n, s->grad, &correct);
  }
  rh_status st = rh_compute(ctx, cfg->forward_flops * (double)n);

  /* backward, last layer first; a bucket closes when the next tensor would pass the threshold */
  int nt = s->ntensors;
  double threshold = rh_setting(ctx, RH_SETTING_FUSION_THRESHOLD) / sizeof(float);
  bucket *buckets = calloc((size_t)nt, sizeof *buckets);
  int *order = malloc((size_t)nt * sizeof *order);
  if (!buckets || !order) {
    free(buckets);
    free(order);
    return RH_ERR_NOMEM;
  }
  /* the mistaken rank walks its tensors in forward order; the other one skips a bucket */
  bool mismatch = s->last && step == 1 && (cfg->mistakes & RH_MISTAKE_MISMATCHED_COLLECTIVE);
  bool skip = s->last && step == 1 && (cfg->mistakes & RH_MISTAKE_MISSING_COLLECTIVE);
  for (int k = 0; k < nt; k++) order[k] = mismatch ? k : nt - 1 - k;
  int nb = 0;
  bucket cur = {0};
  for (int k = 0; k < nt && st == RH_OK; k++) {
    const train_tensor *t = &s->tensors[order[k]];
    st = rh_compute(ctx, 2 * cfg->forward_flops * (double)n * t->share);
    if (st == RH_OK && cur.to > cur.from && (double)(cur.count + t->count) > threshold) {
      buckets[nb] = cur;
      if (!(skip && nb == 0)) st = issue_bucket(s, order, &buckets[nb]);
      nb++;
      cur = (bucket){.from = k, .to = k};
    }
    cur.to = k + 1;
    cur.count += t->count;
    if (st == RH_OK && (double)cur.count >= threshold) {
      buckets[nb] = cur;
      if (!(skip && nb == 0)) st = issue_bucket(s, order, &buckets[nb]);
      nb++;
      cur = (bucket){.from = k + 1, .to = k + 1};
    }
  }
  *t_compute = rh_time(ctx);
  if (st == RH_OK && cur.to > cur.from) {
    buckets[nb] = cur;
    if (!(skip && nb == 0)) st = issue_bucket(s, order, &buckets[nb]);
    nb++;
  }
  rh_status first = st;
  for (int i = 0; i < nb; i++) {
    if (buckets[i].req) {
      rh_status w = rh_wait(buckets[i].req);
      if (first == RH_OK) first = w;
      if (w == RH_OK && buckets[i].buf) unpack_bucket(s, order, &buckets[i]);
    }
    free(buckets[i].buf);
  }
  if (first == RH_OK && s->rank == 0) {
    s->res->buckets_per_step = nb;
    for (int i = 0; i < nb; i++)
      if (buckets[i].count * 4.0 > s->res->bucket_bytes_max)
        s->res->bucket_bytes_max = buckets[i].count * 4.0;
  }
  free(buckets);
  free(order);
  if (first != RH_OK) return train__failed(s, first, RH_CHECK_COLLECTIVES);

  double lr = rh_recipe_lr(&s->used_lr, epoch, step, s->steps_per_epoch);
  *lr_out = lr;
  if (!cfg->real) return RH_OK;
  rh_optimizer_step(&s->opt, s->params, s->grad, lr);
  s->epoch_loss += loss * (double)n;
  s->epoch_correct += correct;
  s->epoch_samples += (double)n;
  return RH_OK;
}

/* ---- end of epoch ------------------------------------------------------------------------------ */

/* Averages a metric the way the program at hand does (or fails to). */
static rh_status average_metric(rank_state *s, double *value, const char *name) {
  unsigned m = s->cfg->mistakes;
  if (m & RH_MISTAKE_NO_METRIC_AVERAGE) return RH_OK;
  if ((m & RH_MISTAKE_METRIC_RANK0_ONLY) && s->rank != 0) return RH_OK;
  rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
  o.name = name;
  o.compression = RH_COMPRESS_NONE; /* compression is the optimizer's, for gradients (Horovod) */
  return rh_allreduce(s->ctx, value, value, 1, RH_FLOAT64, RH_AVERAGE, &o);
}

static rh_status validate(rank_state *s, rh_epoch_stats *es, int epoch) {
  const rh_train_config *cfg = s->cfg;
  es->val_loss = es->val_accuracy = NAN;
  long steps = rh_recipe_validation_steps(cfg->val_rule, cfg->validation_samples, cfg->val_batch,
                                          s->size);
  es->val_steps = steps;
  if (!cfg->real || steps == 0 || !cfg->validation || cfg->validation_samples == 0) return RH_OK;
  long n = cfg->validation_samples, shard = rh_sampler_shard_size(n, s->size);
  long *idx = malloc((size_t)shard * sizeof *idx);
  if (!idx || rh_sampler_indices(n, s->size, s->rank, cfg->seed, epoch, false, idx)) {
    free(idx);
    return RH_ERR_NOMEM;
  }
  double loss = 0, correct = 0, seen = 0;
  int in = cfg->model.inputs;
  long vb = cfg->val_batch;
  float *x = malloc((size_t)vb * (size_t)in * sizeof *x);
  int32_t *y = malloc((size_t)vb * sizeof *y);
  for (long k = 0; k < steps && x && y; k++) {
    /* the last batch of a shard may be short (a PyTorch loader without drop_last) */
    long first = k * vb, take = vb;
    if (cfg->val_rule == RH_VAL_FULL && first + take > shard) take = shard - first;
    if (take <= 0) break;
    for (long j = 0; j < take; j++)
      rh_dataset_get(cfg->validation, cfg->validation_offset + idx[(first + j) % shard],
                     x + (size_t)j * (size_t)in, &y[j]);
    int c;
    loss += rh_model_evaluate(&cfg->model, s->params, x, y, (int)take, &c) * (double)take;
    correct += c;
    seen += (double)take;
  }
  bool nomem = !x || !y;
  free(x);
  free(y);
  free(idx);
  if (nomem) return RH_ERR_NOMEM;
  rh_status st = rh_compute(s->ctx, cfg->forward_flops * seen);
  double vl = loss / seen, va = correct / seen, local_vl = vl, local_va = va;
  if (st == RH_OK) st = average_metric(s, &vl, "avg_loss");
  if (st == RH_OK) st = average_metric(s, &va, "avg_accuracy");
  if (st != RH_OK) return train__failed(s, st, RH_CHECK_METRICS);
  st = train__checks_after_metric(s, local_vl, vl, "avg_loss");
  if (st == RH_OK) st = train__checks_after_metric(s, local_va, va, "avg_accuracy");
  es->val_loss = vl;
  es->val_accuracy = va;
  s->ev.validated = true;
  return train__failed(s, st, RH_CHECK_COLLECTIVES);
}

static rh_status end_epoch(rank_state *s, rh_epoch_stats *es, int epoch, bool complete) {
  const rh_train_config *cfg = s->cfg;
  rh_status st = RH_OK;
  if (cfg->real) {
    double m[2] = {s->epoch_loss / s->epoch_samples, s->epoch_correct / s->epoch_samples};
    rh_reduce_opts o = RH_REDUCE_OPTS_INIT;
    o.name = "train_metrics";
    o.compression = RH_COMPRESS_NONE;
    st = rh_allreduce(s->ctx, m, m, 2, RH_FLOAT64, RH_AVERAGE, &o);
    if (st != RH_OK) return train__failed(s, st, RH_CHECK_COLLECTIVES);
    es->train_loss = m[0];
    es->train_accuracy = m[1];
  }
  st = validate(s, es, epoch);
  /* a checkpoint holds whole epochs only (one cut short by the stop step is not one) */
  bool due = cfg->real && cfg->checkpoint_dir && cfg->checkpoint_every > 0 && complete &&
             (epoch + 1) % cfg->checkpoint_every == 0 && s->recording;
  if (st == RH_OK && due) {
    bool writer = s->rank == 0 || (cfg->mistakes & RH_MISTAKE_CHECKPOINT_EVERY_RANK);
    uint8_t wrote = 0;
    if (writer) {
      st = train__write_checkpoint(s, epoch + 1);
      wrote = st == RH_OK;
    }
    if (st == RH_OK) {
      s->written[epoch + 1] = 1;
      st = train__checks_after_checkpoint(s, epoch, wrote);
    }
  }
  return train__failed(s, st, RH_CHECK_COLLECTIVES);
}

/* ---- the loop ------------------------------------------------------------------------------ */

rh_status train__run_epochs(rank_state *s, int from, int to) {
  rh_status st = RH_OK;
  for (int e = from; e < to && st == RH_OK && !s->stopped; e++) {
    rh_epoch_stats es = {.start = rh_time(s->ctx)};
    s->epoch_loss = s->epoch_correct = s->epoch_samples = 0;
    if (s->cfg->real) {
      /* distributed: this rank's shard; replicated (the recipe): the whole set in an order of
       * this rank's own; not sharded (the mistake): the whole set in the same order everywhere */
      long N = s->cfg->train_samples;
      bool unsharded = s->cfg->mistakes & RH_MISTAKE_NO_SHARDING;
      int rc;
      if (unsharded || s->cfg->replicated) {
        uint64_t seed = s->cfg->seed + (unsharded ? 0 : 1000003ull * (uint64_t)(s->rank + 1));
        rc = rh_sampler_indices(N, 1, 0, seed, e, s->cfg->shuffle, s->shard);
        s->shard_n = N;
      } else {
        rc = rh_sampler_indices(N, s->size, s->rank, s->cfg->seed, e, s->cfg->shuffle, s->shard);
        s->shard_n = rh_sampler_shard_size(N, s->size);
      }
      if (rc) return RH_ERR_NOMEM;
    }
    long step;
    for (step = 0; step < s->steps_per_epoch && st == RH_OK && !s->stopped; step++) {
      double t0 = rh_time(s->ctx), tc = t0, lr = 0;
      st = train__checks_before_step(s);
      if (st == RH_OK) st = train_step(s, e, step, &tc, &lr);
      es.compute += tc - t0;
      es.exposed_comm += rh_time(s->ctx) - tc;
      if (step == 0) es.lr_first = lr;
      es.lr_last = lr;
      if (st == RH_OK) st = train__failed(s, train__checks_after_step(s, e, step, lr), RH_CHECK_COLLECTIVES);
      s->global_step++;
      /* StopAtStepHook(last_step): checked after each step, so last_step 0 still runs one */
      if (s->cfg->stop_at_step > 0 && s->global_step >= s->last_step) s->stopped = true;
    }
    es.steps = step;
    if (st == RH_OK) st = train__failed(s, train__checks_after_epoch(s, e, step), RH_CHECK_COLLECTIVES);
    if (st == RH_OK && step > 0) st = end_epoch(s, &es, e, step == s->steps_per_epoch);
    es.end = rh_time(s->ctx);
    if (st == RH_OK && step > 0) s->epochs_run = e + 1;
    if (s->rank == 0 && s->recording && e < s->res->capacity && step > 0) {
      s->res->epochs_stats[e] = es;
      s->res->epochs = e + 1;
    }
  }
  return st;
}

int rh_train_rank(rh_ctx *ctx, void *arg) {
  rh_train_job *job = arg;
  rank_state s = {.ctx = ctx, .cfg = job->cfg, .res = job->result};
  const rh_train_config *cfg = job->cfg;
  rh_status st = setup(&s);
  if (st != RH_OK) {
    teardown(&s);
    train__failed(&s, st, RH_CHECK_COLLECTIVES);
    return 1;
  }
  int epochs = rh_recipe_epochs(cfg->epochs, cfg->epochs_divided, s.size), start = 0;
  if (s.rank == 0) {
    s.res->steps_per_epoch = s.steps_per_epoch;
    s.res->gradient_bytes = (double)s.nparams * 4;
  }
  st = train__initialise(&s);
  if (st == RH_OK && cfg->resume && cfg->real && cfg->checkpoint_dir) {
    st = train__failed(&s, train__restore(&s, -1, &start), RH_CHECK_COLLECTIVES);
    s.global_step = (long)start * s.steps_per_epoch;
    if (s.sparams) { /* the serial replica starts from the checkpoint too, momentum and all */
      memcpy(s.sparams, s.params, s.nparams * sizeof(float));
      memcpy(s.sopt.state, s.opt.state, rh_optimizer_state_count(&s.opt) * sizeof(float));
      s.sopt.steps = s.opt.steps;
    }
    if (s.rank == 0) s.res->start_epoch = start;
  }
  if (st == RH_OK) st = train__run_epochs(&s, start, epochs);
  if (st == RH_OK && cfg->real && s.rank == 0) /* before the resume replay */
    s.res->params_hash = train__fnv(s.params, s.nparams * sizeof(float));
  if (st == RH_OK)
    st = train__failed(&s, train__checks_after_run(&s, s.epochs_run), RH_CHECK_COLLECTIVES);

  /* verdicts of the checks that held (failures were written when seen) */
  if (st == RH_OK && s.global_step == (long)start * s.steps_per_epoch)
    for (int i = 0; i < RH_CHECK_COUNT; i++) /* resumed with nothing left to run */
      train__skip(&s, (rh_check_id)i, "no step was left to run");
  if (st == RH_OK) train__checks_finish(&s);
  train__report(&s);
  teardown(&s);
  return st == RH_OK ? 0 : 1;
}
