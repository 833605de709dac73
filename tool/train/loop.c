/*
 * loop.c: the training loop of `rehearsal run` (see train.h).  One step: forward, then backward
 * layer by layer (last layer first) with the gradients fused into buckets of up to the fusion
 * threshold and averaged in the background while backward goes on, then the optimizer.  The loop
 * runs from a position (epoch, step, samples processed) that the training state (state.c)
 * commits, restores and sends to new workers, so the same loop serves a fixed-size job, a job
 * resumed from its checkpoint, and an elastic job whose world changes mid-epoch: each time it
 * starts, the samples of the epoch not yet trained on are cut among the ranks of the current
 * world (Horovod's ElasticSampler).  The checks (checks.c, checks/) gather their evidence through
 * rh_check_allgather, which costs no simulated time.
 */
#include "internal.h"
#include "output.h"
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const rh_mistake_names[] = {
    "no_sharding",           "no_initial_broadcast",     "no_lr_scaling",
    "metric_average_rank0_only", "no_metric_average",    "checkpoint_on_every_rank",
    "mismatched_collective", "missing_collective",       "no_commit",
    "lr_not_rescaled_on_reset", "sampler_not_reset",     NULL};

rh_status rh_train_result_init(rh_train_result *r, int capacity) {
  *r = (rh_train_result){.error = RH_OK, .error_rank = -1, .capacity = capacity, .ended = RH_OK,
                         .resumed_step = -1};
  r->epochs_stats = calloc((size_t)(capacity > 0 ? capacity : 1), sizeof *r->epochs_stats);
  return r->epochs_stats ? RH_OK : RH_ERR_NOMEM;
}

void rh_train_result_free(rh_train_result *r) {
  free(r->epochs_stats);
  free(r->runs);
  free(r->ckpt_time);
  free(r->ckpt_step);
  free(r->bucket_bytes);
  free(r->bucket_wait);
  free(r->bucket_ready);
  free(r->steps);
  free(r->final_params);
  *r = (rh_train_result){0};
}

/* A run of tensors, in the order backward produced them, reduced as one fused allreduce. */
typedef struct bucket {
  int from, to;  /* positions in the walking order, [from, to) */
  size_t count;  /* elements */
  float *buf;    /* real: the packed gradients, owned; NULL: timing-only */
  rh_request *req; /* NULL when not issued */
  rh_request *neg; /* Horovod's negotiation before it (NULL: none) */
  double issued;   /* when backward closed it (simulated or wall seconds) */
  bool deferred;   /* ZeRO without overlap_comm: issued once backward is done */
  double waited;   /* seconds the step waited for it after backward */
} bucket;

/* ---- set-up -------------------------------------------------------------------------------- */


static rh_status setup(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  memset(&s->ev, 0, sizeof s->ev); /* padding too: the evidence is written as bytes */
  s->recording = true;
  s->shard_epoch = -1;
  s->failed_at = -1;
  train__refresh_world(s, false);
  s->epochs = rh_recipe_epochs(cfg->epochs, cfg->epochs_divided, s->size);
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
    if (cfg->real && cfg->model.kind == RH_MODEL_NET) /* a network's tensors by their ops' FLOPs */
      s->tensors[i].share = rh_net_tensor_flops(&cfg->model.net, i) /
                            rh_net_forward_flops(&cfg->model.net);
    else
      s->tensors[i].share = f > 0 || (cfg->layer_flops && !cfg->real)
                                ? f / cfg->forward_flops
                                : (double)s->tensors[i].count / (double)s->nparams;
  }
  s->written = calloc((size_t)s->epochs + 2, 1);
  s->epoch_stats = calloc((size_t)s->epochs + 1, sizeof *s->epoch_stats);
  if (!s->written || !s->epoch_stats) return RH_ERR_NOMEM;
  if (!cfg->real) return train__shard_setup(s);

  /* buffers for the largest world the job may have */
  long B = cfg->batch, N = cfg->train_samples;
  int in = cfg->model.inputs, most = cfg->max_size > s->size ? cfg->max_size : s->size;
  s->params = calloc(s->nparams, sizeof(float));
  s->grad = calloc(s->nparams, sizeof(float));
  s->x = calloc((size_t)B * (size_t)in, sizeof(float));
  s->y = calloc((size_t)B, sizeof(int32_t));
  s->shard = calloc((size_t)N + 1, sizeof(long));
  s->used = calloc((size_t)B, sizeof(long));
  s->all_used = calloc((size_t)most * (size_t)B, sizeof(long));
  s->sample_count = calloc((size_t)N, sizeof(int32_t));
  s->sample_owner = calloc((size_t)N, sizeof(int32_t));
  s->involved = calloc((size_t)most, 1);
  if (!s->params || !s->grad || !s->x || !s->y || !s->shard || !s->used || !s->all_used ||
      !s->sample_count || !s->sample_owner || !s->involved)
    return RH_ERR_NOMEM;
  rh_status st = rh_optimizer_init(&s->opt, cfg->optimizer, s->nparams, cfg->momentum, cfg->beta1,
                                   cfg->beta2, cfg->eps, cfg->rho);
  if (st == RH_OK) st = train__shard_setup(s);
  /* the serial replica: any rank may become rank 0 in an elastic job */
  if (st == RH_OK && cfg->check[RH_CHECK_SERIAL] && (s->rank == 0 || cfg->elastic)) {
    s->sparams = calloc(s->nparams, sizeof(float));
    s->sgrad = calloc(s->nparams, sizeof(float));
    s->sx = calloc((size_t)most * (size_t)B * (size_t)in, sizeof(float));
    s->sy = calloc((size_t)most * (size_t)B, sizeof(int32_t));
    if (!s->sparams || !s->sgrad || !s->sx || !s->sy) return RH_ERR_NOMEM;
    st = rh_optimizer_init(&s->sopt, cfg->optimizer, s->nparams, cfg->momentum, cfg->beta1,
                           cfg->beta2, cfg->eps, cfg->rho);
  }
  return st;
}

static void teardown(rank_state *s) {
  rh_state_free(s->state);
  free(s->written);
  free(s->epoch_stats);
  free(s->tensors);
  free(s->params);
  free(s->grad);
  free(s->x);
  free(s->y);
  free(s->shard);
  free(s->used);
  free(s->all_used);
  free(s->sample_count);
  free(s->sample_owner);
  free(s->involved);
  free(s->sparams);
  free(s->sgrad);
  free(s->sx);
  free(s->sy);
  rh_optimizer_free(&s->opt);
  rh_optimizer_free(&s->sopt);
  train__shard_free(s);
  free(s->raw_grads);
}

/* ---- the samples of a segment ------------------------------------------------------------ */

/* Cuts this rank's samples of epoch e from the position on: distributed, the samples the epoch
 * has not trained on yet, shared among the current world (Horovod's ElasticSampler; with nothing
 * processed, PyTorch's DistributedSampler); replicated, the whole set in an order of this rank's
 * own; not sharded (the mistake), the whole set in the same order everywhere.  A program whose
 * sampler is not reset keeps the shard it cut for the world the epoch began in. */
static rh_status cut_shard(rank_state *s, int e) {
  const rh_train_config *cfg = s->cfg;
  long N = cfg->train_samples, B = cfg->batch, done = (long)s->pos.processed;
  long step = (long)s->pos.step;
  bool keep = s->shard_epoch == e && (cfg->mistakes & RH_MISTAKE_SAMPLER_NOT_RESET);
  if (!keep) {
    bool unsharded = cfg->mistakes & RH_MISTAKE_NO_SHARDING;
    int rc = 0;
    if (!cfg->real) {
    } else if (unsharded || cfg->replicated) {
      uint64_t seed = cfg->sampler_seed + (unsharded ? 0 : 1000003ull * (uint64_t)(s->rank + 1));
      rc = rh_sampler_indices(N, 1, 0, seed, e + cfg->first_epoch, cfg->shuffle, s->shard);
      s->shard_n = N;
    } else {
      rc = rh_sampler_remaining(N, done, s->size, s->rank, cfg->sampler_seed, e + cfg->first_epoch,
                                cfg->shuffle, s->shard);
      s->shard_n = rh_sampler_shard_size(N - done, s->size);
    }
    if (rc) return RH_ERR_NOMEM;
    s->shard_epoch = e;
    s->shard_step = step;
    /* the steps left: the recipe's rule on what remains (its whole count for the `full` rule,
     * where every rank runs train / batch steps) */
    long left = N - done > 0 ? N - done : 0;
    if (cfg->steps_rule == RH_STEPS_FULL || cfg->replicated || unsharded) {
      s->seg_steps = s->steps_per_epoch - step;
      s->seg_last_batch = s->last_batch;
    } else {
      s->seg_steps = rh_recipe_steps_per_epoch(cfg->steps_rule, left, B, s->size);
      s->seg_last_batch = rh_recipe_last_batch(cfg->steps_rule, left, B, s->size);
    }
    if (s->seg_steps < 0) s->seg_steps = 0;
    /* a sampler pads only the segment that reaches the end of the epoch */
    s->ev.seg_left = left;
    s->ev.seg_draws = 0;
  }
  return RH_OK;
}

/* ---- one step ------------------------------------------------------------------------------- */

/* Bytes of a gradient value as the allreduce moves it. */
static double grad_bytes(const rh_train_config *cfg) {
  return cfg->real || !(cfg->grad_bytes > 0) ? sizeof(float) : cfg->grad_bytes;
}

/* Packs a bucket's gradients into its fusion buffer and starts their average. */
static rh_status issue_bucket(rank_state *s, const int *order, bucket *b) {
  /* one GPU waits for no one: its timing runs no allreduce (a real run still reduces its
   * numbers, which stay what they are) */
  if (s->size == 1 && !s->cfg->real) return RH_OK;
  /* sharded real numbers are reduce-scattered whole after backward (sharded.c), unless they are
   * allreduced as DDP's */
  if (s->cfg->real && train__shard_degree(s) > 1 && !s->cfg->shard_allreduce) return RH_OK;
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
  if (s->cfg->negotiate && s->size > 1) {
    /* Horovod's coordinator: before a fused allreduce the ranks agree on what is ready, a word
     * of each rank's (workload/losses.h), on the same queue */
    rh_reduce_opts no = RH_REDUCE_OPTS_INIT;
    no.name = "negotiation";
    rh_status ns = rh_iallreduce(s->ctx, NULL, NULL, (size_t)s->size, RH_FLOAT32, RH_SUM, &no,
                                 &b->neg);
    if (ns != RH_OK) return ns;
  }
  o.name = s->tensors[order[b->from]].name;
  bool sharded = train__shard_degree(s) > 1;
  if (!s->cfg->real && sharded && !s->cfg->shard_allreduce) /* ZeRO-1/2 */
    return train__shard_scatter(s, b->count, grad_bytes(s->cfg), o.name, &b->req);
  if (sharded) { /* ZeRO with reduce_scatter: false: DDP's allreduce of the bucket */
    s->sharded.scatters++;
    s->sharded.scatter_bytes += (double)b->count * grad_bytes(s->cfg);
  }
  /* timing-only bf16 gradients move as 2-byte values */
  rh_dtype t = !s->cfg->real && grad_bytes(s->cfg) == 2 ? RH_FLOAT16 : RH_FLOAT32;
  return rh_iallreduce(s->ctx, b->buf, b->buf, b->count, t, RH_AVERAGE, &o, &b->req);
}

static void unpack_bucket(rank_state *s, const int *order, const bucket *b) {
  size_t off = 0;
  for (int k = b->from; k < b->to; k++) {
    const train_tensor *t = &s->tensors[order[k]];
    memcpy(s->grad + t->offset, b->buf + off, t->count * sizeof(float));
    off += t->count;
  }
}

/* Loads the samples of the segment's step k: the shard's positions [k * B, k * B + n). */
static void load_batch(rank_state *s, long k, long n) {
  const rh_train_config *cfg = s->cfg;
  int in = cfg->model.inputs;
  for (long j = 0; j < n; j++) {
    long idx = s->shard[(k * cfg->batch + j) % s->shard_n];
    s->used[j] = idx;
    rh_dataset_get(cfg->train, idx, s->x + (size_t)j * (size_t)in, &s->y[j]);
  }
  s->nused = n;
}

/* --record-samples: the step's samples as lines "epoch,step,rank,sample" (the epoch from 1, the
 * job's global step from 1, as steps.csv counts them); a log that cannot grow stops growing, and
 * the file says so at its end. */
static void record_samples(rank_state *s, int epoch) {
  if (s->samples_cap == (size_t)-1) return;
  for (long j = 0; j < s->nused; j++) {
    if (s->samples_cap - s->samples_len < 96) {
      size_t cap = s->samples_cap ? 2 * s->samples_cap : 1 << 16;
      char *grown = realloc(s->samples_log, cap);
      if (!grown) {
        s->samples_cap = (size_t)-1;
        return;
      }
      s->samples_log = grown;
      s->samples_cap = cap;
    }
    s->samples_len += (size_t)snprintf(s->samples_log + s->samples_len, 96, "%d,%ld,%d,%ld\n",
                                       epoch + 1, (long)s->pos.global_step + 1, s->rank,
                                       s->used[j]);
  }
}

static void write_samples(rank_state *s) {
  if (!s->cfg->samples_dir) return;
  char name[64];
  snprintf(name, sizeof name, "samples-rank%d.csv", s->rank);
  static const char head[] = "epoch,step,rank,sample\n";
  static const char short_of_memory[] = "# out of memory: the record stops here\n";
  bool cut = s->samples_cap == (size_t)-1;
  size_t len = sizeof head - 1 + s->samples_len + (cut ? sizeof short_of_memory - 1 : 0);
  char *text = malloc(len + 1);
  if (text) {
    memcpy(text, head, sizeof head - 1);
    if (s->samples_len) memcpy(text + sizeof head - 1, s->samples_log, s->samples_len);
    if (cut) memcpy(text + sizeof head - 1 + s->samples_len, short_of_memory, sizeof short_of_memory - 1);
    const char *names[] = {name}, *texts[] = {text};
    rh_write_outputs_sized(s->cfg->samples_dir, 1, names, texts, &len);
  }
  free(text);
  free(s->samples_log);
  s->samples_log = NULL;
}

/* The FLOPs of a timing model's layer i on n samples (forward; backward twice). */
double train__layer_flops(const rank_state *s, int i, long n, bool backward) {
  return s->cfg->forward_flops * (double)n * s->tensors[i].share * (backward ? 2 : 1);
}

/* The kernel model's step of n samples (priced once for the run, kept by the rank), or NULL. */
const rh_step_times *train__priced(rank_state *s, long n) {
  if (!s->cfg->priced || s->cfg->real) return NULL;
  if (!s->priced || s->priced_n != n) {
    s->priced = rh_step_cache_get(s->cfg->priced, (double)n);
    s->priced_n = n;
  }
  return s->priced;
}

/* The seconds of layer i by the GPU's model: its kernels (the kernel model), the roofline when
 * it has a peak rate, else its FLOPs at the sustained rate. */
double train__layer_seconds(rank_state *s, int i, long n, bool backward) {
  const rh_train_config *cfg = s->cfg;
  const rh_step_times *t = train__priced(s, n);
  if (t) return backward ? t->backward[i] : t->forward[i];
  double f = train__layer_flops(s, i, n, backward);
  if (cfg->real || !rh_compute_roofline(&cfg->gpu)) return f / cfg->gpu.sustained;
  double bytes = cfg->layers[i].memory_bytes * (double)n * (backward ? 2 : 1);
  return rh_compute_seconds(&cfg->gpu, f, bytes);
}

/* Layer i's kernel: priced by the roofline (a GPU runs its FLOPs and takes what they take).  A
 * checkpointed layer runs its forward again before its backward. */
static rh_status layer_compute(rank_state *s, int i, long n, bool backward) {
  const rh_train_config *cfg = s->cfg;
  double f = train__layer_flops(s, i, n, backward), seconds = train__layer_seconds(s, i, n, backward);
  if (backward && !cfg->real && cfg->layers && cfg->layers[i].recompute) {
    f += train__layer_flops(s, i, n, false);
    seconds += train__layer_seconds(s, i, n, false);
  }
  s->alone += seconds;
  if (cfg->real || !rh_compute_roofline(&cfg->gpu)) return rh_compute(s->ctx, f);
  return rh_compute_priced(s->ctx, f, seconds);
}

/* `seconds` of the step's own GPU time (the host's work, the optimizer), traced as `what`. */
rh_status train__step_work(rank_state *s, const char *what, double seconds) {
  if (!(seconds > 0)) return RH_OK;
  s->alone += seconds;
  rh_trace_begin(s->ctx, "layer", what);
  rh_status st = rh_compute_priced(s->ctx, 0, seconds);
  rh_trace_end(s->ctx);
  return st;
}

/* The input pipeline: the next step's `samples` take samples / input_rate to decode, while this
 * step runs; what it has not covered by the step's end, the GPU waits (not in `alone`: one GPU,
 * fed by the whole node, does not wait).  Rank 0 keeps the wait for the report. */
static rh_status wait_for_input(rank_state *s, long samples, double step_from, double *waited) {
  *waited = 0;
  if (!(s->cfg->input_rate > 0) || s->cfg->real) return RH_OK;
  double need = (double)samples / s->cfg->input_rate, spent = rh_time(s->ctx) - step_from;
  double wait = need > spent ? need - spent : 0;
  if (s->rank == 0) s->res->input_step = wait;
  if (!(wait > 0)) return RH_OK;
  *waited = wait;
  rh_trace_begin(s->ctx, "layer", "waiting for input");
  rh_status st = rh_compute_priced(s->ctx, 0, wait);
  rh_trace_end(s->ctx);
  return st;
}

/* The framework's own work of a step, then the forward pass: one kernel per layer under the
 * roofline, else the model's FLOPs at once.  The overhead is the model's: a real target has
 * its own, which it measures. */
static rh_status forward(rank_state *s, long n) {
  const rh_train_config *cfg = s->cfg;
  rh_status st = train__step_work(s, "framework overhead", cfg->gpu.overhead);
  const rh_step_times *t = train__priced(s, n);
  if (t && st == RH_OK) st = train__step_work(s, "host", t->host);
  if (cfg->real || !rh_compute_roofline(&cfg->gpu)) {
    s->alone += cfg->forward_flops * (double)n / cfg->gpu.sustained;
    return st == RH_OK ? rh_compute(s->ctx, cfg->forward_flops * (double)n) : st;
  }
  if (!rh_trace_on(s->ctx)) { /* no timeline to draw: the layers as one priced kernel (a large
                                * job simulates a third fewer calls; nothing waits on a layer) */
    double f = 0, seconds = 0;
    for (int i = 0; i < s->ntensors; i++) {
      f += train__layer_flops(s, i, n, false);
      seconds += train__layer_seconds(s, i, n, false);
    }
    s->alone += seconds;
    return st == RH_OK ? rh_compute_priced(s->ctx, f, seconds) : st;
  }
  for (int i = 0; i < s->ntensors && st == RH_OK; i++) {
    rh_trace_begin(s->ctx, "layer", s->tensors[i].name);
    st = layer_compute(s, i, n, false);
    rh_trace_end(s->ctx);
  }
  return st;
}

/* A loss beside the network (losses.h): `seconds` of the GPU spent on it, traced under `what`
 * and added to *spent. */
static rh_status charge_loss(rank_state *s, const char *what, double seconds, double *spent) {
  if (!(seconds > 0)) return RH_OK;
  *spent += seconds;
  rh_trace_begin(s->ctx, "layer", what);
  rh_status st = rh_compute_priced(s->ctx, 0, seconds);
  rh_trace_end(s->ctx);
  return st;
}

/* A copy of `bytes` of gradients into or out of a fusion buffer, in a step of two ranks or more. */
static rh_status buffer_copy(rank_state *s, double bytes, double *spent) {
  return charge_loss(s, "fusion buffer copy", rh_loss_copy(&s->cfg->losses, s->size, bytes), spent);
}

/* The framework's own work on a gradient of `bytes` once it is ready, in a step of two ranks or
 * more, the GPU idle. */
static rh_status reducer_work(rank_state *s, double bytes, double *spent) {
  return charge_loss(s, "framework", rh_loss_framework(&s->cfg->losses, s->size, bytes), spent);
}

/* The wait for the slowest of the step's ranks, whose compute (forward and backward, `compute`
 * seconds on this one) varies from rank to rank; before the last bucket goes, as the slowest
 * rank's would. */
rh_status train__slowest_rank(rank_state *s, double compute, double *spent) {
  if (!(s->cfg->losses.step_spread > 0) || s->size <= 1) return RH_OK;
  if (s->emax_size != s->size) {
    s->emax = rh_expected_max_normal(s->size);
    s->emax_size = s->size;
  }
  return charge_loss(s, "waiting for the slowest rank", s->cfg->losses.step_spread * s->emax * compute,
                     spent);
}

/* Horovod's background loop over one backward pass, played on nominal times so that every rank
 * finds the same buckets: a round every `cycle` seconds takes the gradients ready by then, fused
 * up to the threshold, and the next round comes when the cycle has passed and this round's
 * allreduces (the cost model's time) are done, so what became ready meanwhile goes together.
 * Returns, per position of the walking order, whether a bucket ends there (caller frees). */
static int *plan_rounds(rank_state *s, const int *order, long n, double threshold,
                        double cycle) {
  int nt = s->ntensors;
  int *ends = calloc((size_t)(nt ? nt : 1), sizeof *ends);
  double *ready = malloc((size_t)(nt ? nt : 1) * sizeof *ready);
  if (!ends || !ready) {
    free(ends);
    free(ready);
    return NULL;
  }
  double t = 0;
  for (int i = 0; i < nt; i++) {
    t += train__layer_seconds(s, order[i], n, true);
    ready[i] = t;
  }
  double round = 0;
  for (int next = 0; next < nt;) {
    double busy = 0, count = 0;
    int i = next;
    for (; i < nt && ready[i] <= round; i++) {
      double c = (double)s->tensors[order[i]].count;
      if (count > 0 && count + c > threshold) { /* full: a bucket of this round ends before i */
        ends[i - 1] = 1;
        double b = rh_predict_allreduce(s->ctx, (size_t)(count * grad_bytes(s->cfg)));
        busy += b > 0 ? b : 0;
        count = 0;
      }
      count += c;
    }
    if (i == next) { /* nothing ready: the idle rounds until something is */
      round += cycle * fmax(1, ceil((ready[next] - round) / cycle));
      continue;
    }
    ends[i - 1] = 1;
    double b = rh_predict_allreduce(s->ctx, (size_t)(count * grad_bytes(s->cfg)));
    busy += b > 0 ? b : 0;
    next = i;
    round = fmax(round + cycle, round + busy);
  }
  free(ready);
  return ends;
}

/* Issues the bucket being filled (the skipping mistake leaves out the first) and starts the next
 * at tensor `next` of the walking order.  A bucket of no gradients (layers without parameters)
 * is no bucket: no collective runs for nothing. */
static rh_status close_bucket(rank_state *s, const int *order, bucket *buckets, int *nb,
                              bucket *cur, int next, bool skip, double *copies) {
  if (cur->count == 0) {
    *cur = (bucket){.from = next, .to = next};
    return RH_OK;
  }
  /* the bucket's gradients are copied into its buffer before its allreduce reads them */
  rh_status st = buffer_copy(s, (double)cur->count * grad_bytes(s->cfg), copies);
  if (st != RH_OK) return st;
  buckets[*nb] = *cur;
  buckets[*nb].issued = rh_time(s->ctx);
  buckets[*nb].deferred = !s->cfg->real && train__shard_degree(s) > 1 && !s->cfg->overlap_comm;
  if (!(skip && *nb == 0) && !buckets[*nb].deferred) st = issue_bucket(s, order, &buckets[*nb]);
  ++*nb;
  *cur = (bucket){.from = next, .to = next};
  return st;
}

/* Forward and backward with the gradient buckets reduced as backward goes, then the update.
 * `step` is the epoch's, k the segment's, n the batch. */
static rh_status train_step(rank_state *s, int epoch, long step, long k, long n,
                            double *t_compute, double *lr_out) {
  const rh_train_config *cfg = s->cfg;
  rh_ctx *ctx = s->ctx;
  double loss = 0;
  int correct = 0;
  if (cfg->real) {
    load_batch(s, k, n);
    if (cfg->samples_dir && s->recording) record_samples(s, epoch); /* not the resume replay */
    /* dropout's masks: the step's key, this rank's samples at rank x n of the step's global batch */
    s->dropout_key = rh_net_dropout_key(cfg->seed, (long)s->pos.global_step);
    loss = rh_model_loss_grad_at(&cfg->model, s->params, s->x, s->y, (int)n, s->grad, &correct,
                                 s->dropout_key, (long)s->rank * n);
  }
  /* gradient accumulation: the micro-batches before the last run forward and backward with no
   * allreduce (DDP's no_sync); the last one's backward reduces the summed gradients */
  int acc = cfg->accumulation > 1 && !cfg->real ? cfg->accumulation : 1;
  long micro = acc > 1 ? (n + acc - 1) / acc : n;
  s->sharded = (struct train_shard_step){0};
  rh_status st = cfg->real ? train__shard_note(s) : RH_OK;
  double step_from = rh_time(ctx), framework = 0;
  long samples = n;
  s->alone = 0;
  if (st == RH_OK && train__shards_units(s)) { /* full sharding: unit by unit (sharded.c) */
    st = train__sharded_passes(s, n, acc, step_from, t_compute);
    if (st != RH_OK) return train__failed(s, st, RH_CHECK_COLLECTIVES);
    return train__end_step(s, epoch, step, n - micro * (acc - 1), samples, step_from, t_compute,
                           lr_out, loss, correct);
  }
  for (int m = 0; m + 1 < acc && st == RH_OK; m++) {
    st = forward(s, micro);
    for (int i = s->ntensors - 1; i >= 0 && st == RH_OK; i--) {
      rh_trace_begin(ctx, "layer", s->tensors[i].name);
      st = layer_compute(s, i, micro, true);
      rh_trace_end(ctx);
    }
  }
  n = acc > 1 ? n - micro * (acc - 1) : n;
  if (st == RH_OK) st = forward(s, n);
  double backward_from = rh_time(ctx);
  if (rh_trace_on(ctx)) { /* the step's compute goes on: backward */
    double tf = rh_time(ctx);
    rh_trace_end_at(ctx, tf);
    rh_trace_begin_at(ctx, "compute", "backward", tf);
  }

  /* backward, last layer first; a bucket closes when the next tensor would pass the threshold */
  int nt = s->ntensors;
  double gb = grad_bytes(cfg);
  double threshold = rh_setting(ctx, RH_SETTING_FUSION_THRESHOLD) / gb;
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
  for (int i = 0; i < nt; i++) order[i] = mismatch ? i : nt - 1 - i;
  int nb = 0;
  bucket cur = {0};
  /* ZeRO-1/2 timing: DeepSpeed's buckets of reduce_bucket_size gradients */
  bool zero = !cfg->real && train__shard_degree(s) > 1;
  double cycle = cfg->ddp || zero ? 0 : rh_setting(ctx, RH_SETTING_CYCLE_TIME);
  int *ends = cycle > 0 ? plan_rounds(s, order, n, threshold, cycle) : NULL;
  for (int i = 0; i < nt && st == RH_OK; i++) {
    const train_tensor *t = &s->tensors[order[i]];
    rh_trace_begin(ctx, "layer", t->name);
    st = layer_compute(s, order[i], n, true);
    rh_trace_end(ctx);
    if (st == RH_OK && t->count > 0) st = reducer_work(s, (double)t->count * gb, &framework);
    if (cfg->ddp || zero) { /* DDP: fixed buckets in reverse order, each reduced once full */
      cur.to = i + 1;
      cur.count += t->count;
      double cap = zero ? cfg->reduce_bucket * gb : nb == 0 ? cfg->first_bucket : cfg->bucket_cap;
      if (st == RH_OK && (double)cur.count * gb >= cap)
        st = close_bucket(s, order, buckets, &nb, &cur, i + 1, skip, &framework);
      continue;
    }
    if (ends) { /* Horovod's rounds decided where buckets end */
      cur.to = i + 1;
      cur.count += t->count;
      if (st == RH_OK && ends[i]) st = close_bucket(s, order, buckets, &nb, &cur, i + 1, skip, &framework);
      continue;
    }
    if (st == RH_OK && cur.to > cur.from && (double)(cur.count + t->count) > threshold)
      st = close_bucket(s, order, buckets, &nb, &cur, i, skip, &framework);
    cur.to = i + 1;
    cur.count += t->count;
    if (st == RH_OK && (double)cur.count >= threshold)
      st = close_bucket(s, order, buckets, &nb, &cur, i + 1, skip, &framework);
  }
  free(ends);
  double straggler = 0;
  if (st == RH_OK) st = train__slowest_rank(s, rh_time(ctx) - step_from - framework, &straggler);
  *t_compute = rh_time(ctx);
  /* the framework's work after backward: the last bucket's copy in, every bucket's copy out */
  double after = 0;
  if (st == RH_OK && cur.to > cur.from) st = close_bucket(s, order, buckets, &nb, &cur, nt, skip, &after);
  for (int i = 0; i < nb && st == RH_OK; i++) /* ZeRO without overlap_comm: now */
    if (buckets[i].deferred && !(skip && i == 0)) st = issue_bucket(s, order, &buckets[i]);
  rh_status first = st;
  for (int i = 0; i < nb; i++) {
    buckets[i].waited = rh_time(ctx);
    if (buckets[i].neg) {
      rh_status w = rh_wait(buckets[i].neg);
      if (first == RH_OK) first = w;
    }
    if (buckets[i].req) {
      rh_status w = rh_wait(buckets[i].req);
      if (first == RH_OK) first = w;
      if (w == RH_OK && buckets[i].buf) unpack_bucket(s, order, &buckets[i]);
    }
    free(buckets[i].buf);
    buckets[i].waited = rh_time(ctx) - buckets[i].waited; /* what this bucket kept the step */
  }
  double copied = 0;
  for (int i = 0; i < nb; i++) copied += (double)buckets[i].count * gb;
  for (int i = 0; zero && i < nb; i++) s->sharded.scatter_wait += buckets[i].waited;
  if (first == RH_OK) first = buffer_copy(s, copied, &after);
  if (s->rank == 0) {
    s->res->framework_step = framework + after;
    s->res->framework_after = after;
    s->res->straggler_step = straggler;
  }
  if (first == RH_OK && s->rank == 0) {
    rh_train_result *r = s->res;
    if (nb != r->buckets_per_step || !r->bucket_bytes || !r->bucket_wait || !r->bucket_ready) {
      /* resized only when the step's buckets change, not every step */
      double *sizes = realloc(r->bucket_bytes, (size_t)(nb ? nb : 1) * sizeof(double));
      if (sizes) r->bucket_bytes = sizes;
      double *waits = realloc(r->bucket_wait, (size_t)(nb ? nb : 1) * sizeof(double));
      if (waits) r->bucket_wait = waits;
      double *ready = realloc(r->bucket_ready, (size_t)(nb ? nb : 1) * sizeof(double));
      if (ready) r->bucket_ready = ready;
      r->buckets_per_step = sizes && waits && ready ? nb : 0;
    }
    for (int i = 0; i < r->buckets_per_step; i++) {
      r->bucket_bytes[i] = (double)buckets[i].count * gb;
      r->bucket_wait[i] = buckets[i].waited;
      r->bucket_ready[i] = buckets[i].issued - backward_from;
    }
    r->backward = *t_compute - backward_from;
    for (int i = 0; i < nb; i++)
      if ((double)buckets[i].count * gb > s->res->bucket_bytes_max)
        s->res->bucket_bytes_max = (double)buckets[i].count * gb;
  }
  free(buckets);
  free(order);
  if (first != RH_OK) return train__failed(s, first, RH_CHECK_COLLECTIVES);

  return train__end_step(s, epoch, step, n, samples, step_from, t_compute, lr_out, loss, correct);
}

/* Rank 0 keeps the sharded step's collectives for the report. */
static void record_shard_step(rank_state *s) {
  if (s->rank != 0 || train__shard_degree(s) < 2) return;
  const struct train_shard_step *k = &s->sharded;
  rh_train_result *r = s->res;
  r->shard_gathers = k->gathers;
  r->shard_scatters = k->scatters;
  r->shard_gather_bytes = k->gather_bytes;
  r->shard_scatter_bytes = k->scatter_bytes;
  r->shard_allreduces = k->allreduces;
  r->shard_allreduce_bytes = k->allreduce_bytes;
  r->shard_gather_wait = k->gather_wait;
  r->shard_scatter_wait = k->scatter_wait;
  r->shard_worked_out += k->worked_out && s->recording;
}

rh_status train__end_step(rank_state *s, int epoch, long step, long n, long samples,
                          double step_from, double *t_compute, double *lr_out, double loss,
                          int correct) {
  const rh_train_config *cfg = s->cfg;
  /* the optimizer's kernels once the gradients are in, on this rank's shard: compute, not
   * waiting (the step's compute is counted up to *t_compute, its wait after it) */
  const rh_step_times *t = train__priced(s, n);
  double optimizer = t ? t->optimizer / train__shard_degree(s) : 0;
  rh_status first = train__step_work(s, "optimizer", optimizer);
  *t_compute += optimizer;
  if (first == RH_OK) first = train__shard_gather_params(s); /* ZeRO-1/2: before the next step */
  double starved = 0;
  if (first == RH_OK) first = wait_for_input(s, samples, step_from, &starved);
  if (first != RH_OK) return train__failed(s, first, RH_CHECK_COLLECTIVES);
  *t_compute += starved;
  double lr = rh_recipe_lr(&s->used_lr, epoch, step, s->steps_per_epoch);
  *lr_out = lr;
  s->step_loss = cfg->real ? loss : NAN;
  if (cfg->real && train__shard_degree(s) > 1) {
    first = train__sharded_update(s, lr);
    if (first != RH_OK) return train__failed(s, first, RH_CHECK_COLLECTIVES);
  } else if (cfg->real) {
    rh_optimizer_step(&s->opt, s->params, s->grad, lr);
  }
  record_shard_step(s);
  if (!cfg->real) return RH_OK;
  s->ev.epoch_loss += loss * (double)n;
  s->ev.epoch_correct += correct;
  s->ev.epoch_samples += (double)n;
  return RH_OK;
}

/* Rank 0 keeps the pace of the steps: runs of steps of one world that took the same time. */
static void record_pace(rank_state *s, int epoch, double start, double seconds, long steps) {
  rh_train_result *r = s->res;
  if (s->rank != 0 || !s->recording) return;
  rh_step_run *last = r->nruns ? &r->runs[r->nruns - 1] : NULL;
  if (last && last->size == s->size && last->epoch == epoch &&
      fabs(last->step - seconds) <= 1e-12 * seconds &&
      fabs(last->start + last->step * (double)last->steps - start) <= 1e-9 * (1 + start)) {
    last->steps += steps;
    return;
  }
  if (r->nruns == r->capruns) {
    size_t cap = r->capruns ? 2 * r->capruns : 64;
    rh_step_run *grown = realloc(r->runs, cap * sizeof *grown);
    if (!grown) return; /* a report: losing an entry must not stop the run */
    r->runs = grown;
    r->capruns = cap;
  }
  r->runs[r->nruns++] = (rh_step_run){.start = start, .step = seconds, .steps = steps,
                                      .size = s->size, .epoch = epoch};
}

/* ---- the timeline ------------------------------------------------------------------------------ */

/* A step on the rank's timeline, cut where the epoch's figures cut it: compute from t0 (the
 * checks before the step included, as the compute figure counts them) to tc, forward then
 * backward (train_step moves from one to the other); the wait for gradients from tc to t1. */
static void trace_step_begin(rank_state *s, int epoch, long step, double t0) {
  if (!rh_trace_on(s->ctx)) return;
  char name[64];
  snprintf(name, sizeof name, "epoch %d step %ld", epoch + 1, step + 1);
  rh_trace_begin_at(s->ctx, "step", name, t0);
  rh_trace_begin_at(s->ctx, "compute", "forward", t0);
}

static void trace_step_end(rank_state *s, double tc, double t1) {
  if (!rh_trace_on(s->ctx)) return;
  rh_trace_end_at(s->ctx, tc); /* forward, or backward once it began */
  rh_trace_begin_at(s->ctx, "wait", "wait for gradients", tc);
  rh_trace_end_at(s->ctx, t1);
  rh_trace_end_at(s->ctx, t1);
}

/* Steps charged without running them (rh_repeat_steps), from `from` to now: one slice, with what
 * they spent inside it, summed back to back: `done` times this rank's compute c and wait w of the
 * step they repeat, and the commits charged among them. */
static void trace_repeated(rank_state *s, int epoch, long first, long done, double from, double c,
                           double w, long commits) {
  rh_ctx *ctx = s->ctx;
  if (!rh_trace_on(ctx)) return;
  char name[96];
  snprintf(name, sizeof name, "epoch %d steps %ld-%ld, repeated", epoch + 1, first + 1, first + done);
  rh_trace_begin_at(ctx, "step", name, from);
  rh_trace_arg(ctx, "steps", (double)done);
  double at = from;
  rh_trace_begin_at(ctx, "compute", "compute", at);
  at += (double)done * c;
  rh_trace_end_at(ctx, at);
  rh_trace_begin_at(ctx, "wait", "wait for gradients", at);
  at += (double)done * w;
  rh_trace_end_at(ctx, at);
  if (commits > 0) {
    rh_trace_begin_at(ctx, "commit", "commits", at);
    rh_trace_arg(ctx, "commits", (double)commits);
    at += (double)commits * s->commit_dt;
    rh_trace_end_at(ctx, at);
  }
  rh_trace_end_at(ctx, rh_time(ctx));
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
  rh_trace_begin(s->ctx, "validation", "validation");
  rh_status st = rh_compute(s->ctx, cfg->forward_flops * seen);
  double vl = loss / seen, va = correct / seen, local_vl = vl, local_va = va;
  if (st == RH_OK) st = average_metric(s, &vl, "avg_loss");
  if (st == RH_OK) st = average_metric(s, &va, "avg_accuracy");
  rh_trace_end(s->ctx);
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
    double m[2] = {s->ev.epoch_loss / s->ev.epoch_samples, s->ev.epoch_correct / s->ev.epoch_samples};
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
  bool due = cfg->checkpoint_dir && cfg->checkpoint_every > 0 && complete &&
             (epoch + 1) % cfg->checkpoint_every == 0 && s->recording;
  if (st == RH_OK && due) {
    double t0 = rh_time(s->ctx);
    rh_trace_begin_at(s->ctx, "checkpoint", "checkpoint", t0);
    s->ev.checkpoint_writes++; /* counted first: the checkpoint holds its own count */
    st = train__write_checkpoint(s, true);
    es->checkpoint += rh_time(s->ctx) - t0;
    rh_trace_end(s->ctx);
    if (st == RH_OK && cfg->real) {
      bool writer = s->rank == 0 || (cfg->mistakes & RH_MISTAKE_CHECKPOINT_EVERY_RANK);
      s->written[epoch + 1] = 1;
      st = train__checks_after_checkpoint(s, epoch, writer);
    }
  }
  return train__failed(s, st, RH_CHECK_COLLECTIVES);
}

/* ---- the loop ------------------------------------------------------------------------------ */

/* Where a failure left the position, for the elastic checks (the restore moves it back). */
static rh_status note_failure(rank_state *s, rh_status st) {
  if (st != RH_OK && s->cfg->progress && s->res->notes < 3) /* the first few, as they happen */
    rh_progress_note(s->cfg->progress, "rank %d, epoch %d step %ld: %s%s", s->rank,
                     (int)s->pos.epoch + 1, (long)s->pos.step + 1,
                     *rh_last_error(s->ctx) ? rh_last_error(s->ctx) : rh_status_string(st),
                     ++s->res->notes == 3 ? " (more in the report at the end)" : "");
  if (train__peer_failure(st)) {
    s->failed_at = (long)s->pos.global_step;
    s->failed_epoch_start = (long)s->pos.epoch_start;
  }
  return st;
}

/* The steps a timing-only model may charge without running them, after one that took the same
 * time as the two before it on every rank: up to the step before the segment's last (its batch may differ),
 * the next commit, the next checkpoint and the stop step; the runtime stops them before a
 * scheduled fault or host change. */
static rh_status repeat(rank_state *s, int e, long *k, double t0, double tc, double t1) {
  const rh_train_config *cfg = s->cfg;
  double d = t1 - t0;
  bool steady = fabs(d - s->paces[0]) <= 1e-9 * d && fabs(d - s->paces[1]) <= 1e-9 * d;
  s->paces[1] = s->paces[0];
  s->paces[0] = d;
  if (!s->recording) return RH_OK;
  long g = (long)s->pos.global_step, n = s->seg_steps - (*k + 1) - 1;
  /* commits repeat too, once one was measured: the runtime charges whole cycles of steps and a
   * commit, and ends at a commit's step, whose commit is then a real one (it saves the state) */
  bool commits = cfg->elastic && !(cfg->mistakes & RH_MISTAKE_NO_COMMIT) && s->state;
  rh_repeat_cycle cycle = {.every = cfg->commit_every, .done = g, .seconds = s->commit_dt};
  if (commits && !(s->commit_dt > 0)) {
    long c = cfg->commit_every - g % cfg->commit_every - 1;
    if (c < n) n = c;
  }
  if (cfg->checkpoint_every_steps > 0 && cfg->checkpoint_dir) {
    long c = cfg->checkpoint_every_steps - g % cfg->checkpoint_every_steps - 1;
    if (c < n) n = c;
  }
  if ((cfg->stop_at_step > 0 || cfg->steps > 0) && s->last_step - g - 1 < n) n = s->last_step - g - 1;
  if (cfg->duration > 0) { /* the step that reaches the duration runs on its own */
    double left = floor((cfg->duration - t1) / d) - 1;
    if (left < (double)n) n = left > 0 ? (long)left : 0;
  }
  if (n <= 0) return RH_OK;
  /* steadiness is this rank's own: every rank asks, and none charges unless all are steady */
  rh_status st;
  double charged_from = rh_time(s->ctx);
  long done = rh_repeat_steps(s->ctx, e, (long)s->pos.step, steady ? n : 0, d,
                              commits && s->commit_dt > 0 ? &cycle : NULL, &st);
  if (done <= 0) return done < 0 ? st : RH_OK;
  rh_epoch_stats *es = &s->ev.now;
  es->compute += (double)done * (tc - t0);
  es->alone += (double)done * s->alone;
  es->exposed_comm += (double)done * (t1 - tc);
  es->steps += done;
  /* the commits among them: their time, and the pace in runs between them */
  long every = cfg->commit_every;
  long ends = commits && s->commit_dt > 0 ? (g + done) / every - g / every : 0;
  trace_repeated(s, e, (long)s->pos.step, done, charged_from, tc - t0, t1 - tc, ends > 1 ? ends - 1 : 0);
  double start = t1;
  for (long i = 0, left = done; left > 0; i++) {
    long run = i == 0 ? every - g % every : every;
    if (run > left || i >= ends) run = left;
    record_pace(s, e, start, d, run);
    train__record_steps(s, e, (long)s->pos.step + (done - left), run, start, tc - t0, t1 - tc);
    start += (double)run * d;
    left -= run;
    if (i < ends - 1) {
      start += s->commit_dt;
      train__commit_charged(s);
    }
  }
  *k += done;
  s->pos.step += (double)done;
  s->pos.global_step += (double)done;
  s->pos.processed += (double)done * (double)cfg->batch * s->size;
  /* the charge ended at a commit's step: that commit runs */
  return ends > 0 ? train__commit(s, -1) : RH_OK;
}

/* recipe.duration: whether this rank stops after the step it just ran.  Rank 0, the first time
 * its clock reaches the duration after step g, names step g + 1 for every rank: no rank can have
 * finished step g + 1 before rank 0 began it, so all stop after the same step. */
static bool past_duration(rank_state *s) {
  if (!(s->cfg->duration > 0)) return false;
  long g = (long)s->pos.global_step;
  if (s->rank == 0 && s->res->duration_step == 0 && rh_time(s->ctx) >= s->cfg->duration)
    s->res->duration_step = g + 1;
  return s->res->duration_step > 0 && g >= s->res->duration_step;
}

/* The epoch so far, as the table shows a run that stopped in it. */
static rh_status stopped(rank_state *s, rh_epoch_stats *es, int e, rh_status st) {
  es->end = rh_time(s->ctx);
  es->size = s->size;
  if (s->rank == 0 && s->recording && e < s->res->capacity) {
    s->res->epochs_stats[e] = *es;
    s->res->epochs = e + 1;
  }
  return note_failure(s, st);
}

rh_status train__run_epochs(rank_state *s, int to) {
  const rh_train_config *cfg = s->cfg;
  rh_status st = RH_OK;
  while (st == RH_OK && s->pos.epoch < to && !s->pos.stopped) {
    int e = (int)s->pos.epoch;
    rh_epoch_stats *es = &s->ev.now;
    if (s->pos.step == 0 && s->pos.processed == 0 && s->shard_epoch != e) {
      /* a new epoch: nothing of it is recorded yet, and its metrics are none until its end */
      *es = (rh_epoch_stats){.start = rh_time(s->ctx), .train_loss = NAN, .train_accuracy = NAN,
                             .val_loss = NAN, .val_accuracy = NAN};
      s->ev.epoch_loss = s->ev.epoch_correct = s->ev.epoch_samples = 0;
      s->ev.draws = s->ev.own_repeats = 0;
      if (s->sample_count) {
        memset(s->sample_count, 0, (size_t)cfg->train_samples * sizeof(int32_t));
        memset(s->involved, 0, (size_t)(cfg->max_size > s->size ? cfg->max_size : s->size));
      }
    }
    if (es->steps == 0 && s->pos.step > 0 && s->recording) {
      /* resumed in the middle of the epoch (a relaunch): its row goes on from where it began */
      es->steps = (long)s->pos.step;
      es->start = e < s->res->capacity && s->res->epochs > e ? s->res->epochs_stats[e].start : 0;
    }
    st = cut_shard(s, e);
    long k = (long)s->pos.step - s->shard_step;
    for (; st == RH_OK && k < s->seg_steps && !s->pos.stopped; k++) {
      long step = (long)s->pos.step, n = k == s->seg_steps - 1 ? s->seg_last_batch : cfg->batch;
      rh_step_begin(s->ctx, e, step);
      double t0 = rh_time(s->ctx), tc = t0, lr = 0;
      trace_step_begin(s, e, step, t0);
      s->alone = 0; /* a step that stops in its checks did no work */
      st = train__checks_before_step(s);
      if (st == RH_OK) st = train_step(s, e, step, k, n, &tc, &lr);
      double t1 = rh_time(s->ctx);
      trace_step_end(s, tc, t1);
      es->compute += tc - t0;
      es->alone += s->alone;
      es->exposed_comm += t1 - tc;
      if (es->steps == 0) es->lr_first = lr;
      es->lr_last = lr;
      es->steps++; /* a step that failed counts: the table shows where the run stopped */
      if (st != RH_OK) break;
      record_pace(s, e, t0, t1 - t0, 1);
      train__record_steps(s, e, step, 1, t0, tc - t0, t1 - tc);
      st = train__failed(s, train__checks_after_step(s, e, step, lr), RH_CHECK_COLLECTIVES);
      /* Horovod's ElasticSampler.record_batch: the batch, times the ranks */
      s->pos.step++;
      s->pos.global_step++;
      s->pos.processed += (double)n * s->size;
      /* StopAtStepHook(last_step): checked after each step, so last_step 0 still runs one */
      if ((cfg->stop_at_step > 0 || cfg->steps > 0) && s->pos.global_step >= s->last_step)
        s->pos.stopped = 1;
      if (past_duration(s)) s->pos.stopped = 1;
      long g = (long)s->pos.global_step;
      if (st == RH_OK && cfg->elastic && g % cfg->commit_every == 0) st = train__commit(s, -1);
      if (st == RH_OK && cfg->checkpoint_every_steps > 0 && g % cfg->checkpoint_every_steps == 0 &&
          cfg->checkpoint_dir && s->recording) {
        double w0 = rh_time(s->ctx);
        rh_trace_begin_at(s->ctx, "checkpoint", "checkpoint", w0);
        st = train__write_checkpoint(s, false);
        es->checkpoint += rh_time(s->ctx) - w0;
        rh_trace_end(s->ctx);
      }
      if (st == RH_OK && !cfg->real) st = repeat(s, e, &k, t0, tc, t1);
    }
    if (st != RH_OK) return stopped(s, es, e, st);
    bool complete = !s->pos.stopped || k == s->seg_steps;
    long steps = (long)s->pos.step;
    st = train__failed(s, train__checks_after_epoch(s, e, steps), RH_CHECK_COLLECTIVES);
    if (st == RH_OK && steps > 0) st = end_epoch(s, es, e, complete && steps == (long)s->pos.step);
    if (st != RH_OK) return stopped(s, es, e, st);
    es->end = rh_time(s->ctx);
    es->size = s->size;
    if (steps > 0 && s->recording && e <= s->epochs) {
      s->epoch_stats[e] = *es;
      if (s->rank == 0 && e < s->res->capacity) { /* as it goes: rank 0 may not see the end */
        s->res->epochs_stats[e] = *es;
        s->res->epochs = e + 1;
      }
    }
    if (steps > 0) s->pos.epochs_run = e + 1;
    s->pos.epoch = e + 1;
    s->pos.step = 0;
    s->pos.processed = 0;
    s->pos.epoch_start = s->pos.global_step;
    s->shard_epoch = -1;
    /* the end of an epoch commits; its time belongs to the epoch's row (if it ran a step) */
    if (cfg->elastic) st = note_failure(s, train__commit(s, steps > 0 ? e : s->epochs + 1));
  }
  return st;
}

/* ---- a rank's run --------------------------------------------------------------------------- */

/* Rank 0 writes what every rank knows into the result: the epochs, and the verdicts. */
static void report(rank_state *s) {
  rh_train_result *r = s->res;
  if (s->rank != 0) return;
  for (int e = 0; e < s->epochs && e < r->capacity; e++)
    if (s->epoch_stats[e].steps > 0) {
      r->epochs_stats[e] = s->epoch_stats[e];
      r->epochs = e + 1;
    }
  train__report(s);
}

/* Bytes in kB, MB or GB, three digits (a static buffer). */
static const char *size_text(double bytes) {
  static char buf[32];
  if (bytes < 1e6) snprintf(buf, sizeof buf, "%.3g kB", bytes / 1e3);
  else if (bytes < 1e9) snprintf(buf, sizeof buf, "%.3g MB", bytes / 1e6);
  else snprintf(buf, sizeof buf, "%.3g GB", bytes / 1e9);
  return buf;
}

/* What a rank that could not set up had to allocate, as the stop's detail (the first failure's
 * alone: the job reports one). */
static void no_memory(rank_state *s) {
  rh_train_result *r = s->res;
  if (r->error != RH_OK || r->error_detail[0]) return;
  const rh_train_config *cfg = s->cfg;
  if (!cfg->real) {
    snprintf(r->error_detail, sizeof r->error_detail,
             "rank %d could not allocate its bookkeeping for %d layers and %d epochs", s->rank,
             s->ntensors, s->epochs);
    return;
  }
  /* parameters and gradients, and the sampler's three words per training sample */
  char params[32], samples[32];
  snprintf(params, sizeof params, "%s", size_text((double)s->nparams * sizeof(float)));
  snprintf(samples, sizeof samples, "%s",
           size_text((double)cfg->train_samples * (sizeof(long) + 2 * sizeof(int32_t))));
  snprintf(r->error_detail, sizeof r->error_detail,
           "rank %d could not allocate its buffers: %zu parameters (%s each of parameters and "
           "gradients), %ld training samples (%s of sampler state)", s->rank, s->nparams, params,
           cfg->train_samples, samples);
}

int rh_train_rank(rh_ctx *ctx, void *arg) {
  rh_train_job *job = arg;
  rank_state s = {.ctx = ctx, .cfg = job->cfg, .res = job->result};
  const rh_train_config *cfg = job->cfg;
  rh_status st = setup(&s);
  if (st != RH_OK) {
    /* the header gives the epoch's steps even when none could run */
    if (s.rank == 0) s.res->steps_per_epoch = s.steps_per_epoch;
    if (st == RH_ERR_NOMEM) no_memory(&s);
    teardown(&s);
    train__failed(&s, st, RH_CHECK_COLLECTIVES);
    return 1;
  }
  if (s.rank == 0) {
    if (rh_restarts(ctx) > 0) { /* a relaunched job: the failure that ended the last launch is in the log */
      s.res->error = RH_OK;
      s.res->error_rank = -1;
      s.res->error_detail[0] = 0;
    }
    s.res->steps_per_epoch = s.steps_per_epoch;
    s.res->gradient_bytes = (double)s.nparams * 4;
  }
  int start = 0;
  if (cfg->elastic) {
    st = train__elastic(&s, train__run_epochs);
    start = s.res->start_epoch;
  } else {
    st = train__initialise(&s);
    if (s.rank == 0) s.res->state_bytes = train__state_bytes(&s);
    bool resume = cfg->resume || rh_restarts(ctx) > 0;
    if (st == RH_OK && resume && cfg->checkpoint_dir) {
      st = train__failed(&s, train__restore(&s, -1, &start), RH_CHECK_COLLECTIVES);
      if (s.sparams) { /* the serial replica starts from the checkpoint too, momentum and all */
        memcpy(s.sparams, s.params, s.nparams * sizeof(float));
        memcpy(s.sopt.state, s.opt.state, rh_optimizer_state_count(&s.opt) * sizeof(float));
        s.sopt.steps = s.opt.steps;
      }
      if (s.rank == 0) { /* --resume shows the epochs it ran; a relaunch, the whole job */
        if (cfg->resume) s.res->start_epoch = start;
        s.res->resumed_step = (long)s.pos.global_step;
      }
    }
    long begun = (long)s.pos.global_step;
    if (st == RH_OK) st = train__run_epochs(&s, s.epochs);
    if (st == RH_OK && (long)s.pos.global_step == begun && begun > 0)
      for (int i = 0; i < RH_CHECK_COUNT; i++) /* resumed with nothing left to run */
        train__skip(&s, (rh_check_id)i, "no step was left to run");
  }
  if (st == RH_OK && cfg->real && s.rank == 0) { /* before the resume replay */
    s.res->params_hash = train__fnv(s.params, s.nparams * sizeof(float));
    free(s.res->final_params);
    s.res->final_params = malloc(s.nparams * sizeof(float));
    if (s.res->final_params) memcpy(s.res->final_params, s.params, s.nparams * sizeof(float));
  }
  if (st == RH_OK)
    st = train__failed(&s, train__checks_after_run(&s, (int)s.pos.epochs_run), RH_CHECK_COLLECTIVES);

  /* verdicts of the checks that held (failures were written when seen) */
  if (st == RH_OK) train__checks_finish(&s);
  report(&s);
  write_samples(&s);
  teardown(&s);
  /* a worker whose host left an elastic job, or that the job no longer needed, is not a failure */
  return st == RH_OK || st == RH_ERR_EXCLUDED ? 0 : 1;
}
