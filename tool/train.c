/*
 * train.c: the training loop of `rehearsal run` (see train.h).  One step: forward, then backward
 * layer by layer (last layer first) with the gradients fused into buckets of up to the fusion
 * threshold and averaged in the background while backward goes on, then the optimizer.  Rank 0
 * broadcasts the initial state, logs, and writes checkpoints.  The checks gather their evidence
 * through rh_check_allgather, which costs no simulated time.
 */
#include "train.h"

#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const rh_check_names[RH_CHECK_COUNT + 1] = {
    "serial_equivalence", "identical_parameters", "samples_once",  "lr_schedule",
    "metrics_averaged",   "one_checkpoint_writer", "resume_equivalence", "collectives_match",
    NULL};

const char *const rh_mistake_names[] = {
    "no_sharding",           "no_initial_broadcast",     "no_lr_scaling",
    "metric_average_rank0_only", "no_metric_average",    "checkpoint_on_every_rank",
    "mismatched_collective", "missing_collective",       NULL};

/* One step of the ranks is compared with one serial step from the same parameters, to this
 * tolerance relative to the largest parameter: both sides are fp32, and the distributed side
 * sums size per-rank means in ring order where the serial side sums size x B samples in order,
 * so they differ by a few ulps.  A rank on other parameters, other samples or another lr differs
 * by orders of magnitude more. */
#define SERIAL_TOLERANCE 1e-5
/* With fp16 on the wire each gradient is rounded to 11 bits before the average. */
#define SERIAL_TOLERANCE_FP16 1e-3

rh_status rh_train_result_init(rh_train_result *r, int capacity) {
  *r = (rh_train_result){.error = RH_OK, .error_rank = -1, .capacity = capacity};
  r->epochs_stats = calloc((size_t)(capacity > 0 ? capacity : 1), sizeof *r->epochs_stats);
  return r->epochs_stats ? RH_OK : RH_ERR_NOMEM;
}

void rh_train_result_free(rh_train_result *r) {
  free(r->epochs_stats);
  r->epochs_stats = NULL;
}

/* ---- per-rank state --------------------------------------------------------------------- */

typedef struct tensor {
  const char *name;
  size_t offset, count; /* in the flat gradient (real) or element counts (timing-only) */
  double share;         /* of the backward FLOPs */
} tensor;

/* A run of tensors, in the order backward produced them, reduced as one fused allreduce. */
typedef struct bucket {
  int from, to;  /* positions in the walking order, [from, to) */
  size_t count;  /* elements */
  float *buf;    /* real: the packed gradients, owned; NULL: timing-only */
  rh_request *req; /* NULL when not issued */
} bucket;

typedef struct rank_state {
  rh_ctx *ctx;
  const rh_train_config *cfg;
  rh_train_result *res;
  int rank, size, local_size;
  bool last; /* the last rank: where the mistakes that need one rank happen */
  tensor *tensors;
  int ntensors;
  size_t nparams;
  /* real */
  float *params, *grad, *x;
  int32_t *y;
  rh_optimizer opt;
  long *shard, shard_n, *used, nused, *epoch_used;
  /* serial replica (rank 0 when the check runs) */
  float *sparams, *sgrad, *sx;
  int32_t *sy;
  rh_optimizer sopt;
  long *all_used;
  double serial_max_diff;
  long serial_steps, serial_batch;
  /* schedules: what the recipe says, and what this (perhaps mistaken) program uses */
  rh_lr_schedule recipe_lr, used_lr;
  long steps_per_epoch, last_batch, global_step, last_step;
  bool recording; /* false while the resume check replays epochs */
  bool stopped;
  int epochs_run; /* epochs this rank completed (its own count: the result is rank 0's) */
  uint8_t *written; /* written[e]: this run wrote checkpoint-e (epochs + 2 entries) */
  bool validated;   /* some epoch ran validation */
  /* evidence */
  long identical_steps;
  bool identical_failed, lr_failed;
  int checkpoint_writes;
  double epoch_loss, epoch_correct, epoch_samples;
} rank_state;

static void verdict(rank_state *s, rh_check_id id, bool passed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void verdict(rank_state *s, rh_check_id id, bool passed, const char *fmt, ...) {
  rh_check_result *c = &s->res->checks[id];
  if (s->rank != 0 || (c->ran && !c->passed)) return; /* rank 0 reports; the first failure stays */
  c->ran = true;
  c->passed = passed;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->detail, sizeof c->detail, fmt, ap);
  va_end(ap);
}

/* The check does not apply to this recipe or run; says why (rank 0). */
static void skip(rank_state *s, rh_check_id id, const char *why) {
  rh_check_result *c = &s->res->checks[id];
  if (s->rank != 0 || c->ran) return;
  c->skipped = true;
  snprintf(c->detail, sizeof c->detail, "%s", why);
}

static bool checking(const rank_state *s, rh_check_id id) {
  return s->cfg->real && s->cfg->check[id] && s->recording;
}

/* Remembers the first failure of the job, with the runtime's explanation. */
static rh_status failed(rank_state *s, rh_status st, rh_check_id blame) {
  if (st == RH_OK) return st;
  rh_train_result *r = s->res;
  if (r->error == RH_OK) {
    r->error = st;
    r->error_rank = s->rank;
    if (rh_last_error(s->ctx)[0] || !r->error_detail[0])
      snprintf(r->error_detail, sizeof r->error_detail, "%s", rh_last_error(s->ctx));
  }
  /* a collective's failure is the check's verdict; I/O or memory errors are the job's alone */
  bool collective = st == RH_ERR_TIMEOUT || st == RH_ERR_MISMATCH || st == RH_ERR_PEER_DEAD ||
                    st == RH_ERR_ABORTED;
  if (!collective) return st;
  rh_check_result *c = &r->checks[blame];
  if (!c->ran || c->passed) {
    c->ran = true;
    c->passed = false;
    snprintf(c->detail, sizeof c->detail, "rank %d: %s", s->rank,
             rh_last_error(s->ctx)[0] ? rh_last_error(s->ctx) : rh_status_string(st));
  }
  return st;
}

static uint64_t fnv(const void *data, size_t bytes) {
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Writes "a,b-d" for the ranks whose flag is set. */
static void rank_list(const uint8_t *flags, int n, char *buf, size_t len) {
  size_t k = 0;
  buf[0] = 0;
  for (int r = 0; r < n && k < len; r++) {
    if (!flags[r]) continue;
    int end = r;
    while (end + 1 < n && flags[end + 1]) end++;
    if (end >= r + 2) k += (size_t)snprintf(buf + k, len - k, "%s%d-%d", k ? "," : "", r, end);
    else for (int q = r; q <= end && k < len; q++)
      k += (size_t)snprintf(buf + k, len - k, "%s%d", k ? "," : "", q);
    r = end;
  }
}

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
      s->tensors[i] = (tensor){cfg->model.tensors[i].name, cfg->model.tensors[i].offset,
                               cfg->model.tensors[i].count, 0};
    } else {
      s->tensors[i] = (tensor){cfg->layers[i].name, off, (size_t)cfg->layers[i].parameters, 0};
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

/* Rank 0's initial parameters and optimizer state reach every rank (Horovod's
 * BroadcastGlobalVariablesCallback, broadcast_parameters and broadcast_optimizer_state). */
static rh_status broadcast_state(rank_state *s, int *epoch) {
  rh_status st = rh_broadcast(s->ctx, s->params, s->nparams, RH_FLOAT32, 0);
  if (st == RH_OK)
    st = rh_broadcast(s->ctx, s->opt.state, rh_optimizer_state_count(&s->opt), RH_FLOAT32, 0);
  double scalars[2] = {s->opt.steps, epoch ? *epoch : 0};
  if (st == RH_OK) st = rh_broadcast(s->ctx, scalars, 2, RH_FLOAT64, 0);
  if (st == RH_OK) {
    s->opt.steps = scalars[0];
    if (epoch) *epoch = (int)scalars[1];
  }
  return st;
}

static rh_status initialise(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  if (!cfg->real) return RH_OK;
  bool broadcast = !(cfg->mistakes & RH_MISTAKE_NO_INITIAL_BROADCAST);
  rh_model_init_params(&cfg->model, s->params, cfg->seed + (broadcast ? 0 : (uint64_t)s->rank));
  rh_status st = broadcast ? broadcast_state(s, NULL) : RH_OK;
  if (st == RH_OK && s->sparams) memcpy(s->sparams, s->params, s->nparams * sizeof(float));
  return failed(s, st, RH_CHECK_COLLECTIVES);
}

/* ---- checkpoints --------------------------------------------------------------------------- */

typedef struct ckpt_header {
  char magic[8]; /* "RHCKPT1\0" */
  int32_t epoch; /* epochs completed */
  int32_t pad;
  uint64_t nparams, nstate;
  double opt_steps;
} ckpt_header;

static void ckpt_path(const rank_state *s, int epoch, char *buf, size_t len) {
  snprintf(buf, len, "%s/checkpoint-%d.bin", s->cfg->checkpoint_dir, epoch);
}

static rh_status write_checkpoint(rank_state *s, int epoch) {
  char path[1024], tmp[1100];
  ckpt_path(s, epoch, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, s->rank);
  ckpt_header h = {.magic = "RHCKPT1", .epoch = epoch, .nparams = s->nparams,
                   .nstate = rh_optimizer_state_count(&s->opt), .opt_steps = s->opt.steps};
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 &&
            fwrite(s->params, sizeof(float), s->nparams, f) == s->nparams &&
            fwrite(s->opt.state, sizeof(float), h.nstate, f) == h.nstate;
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) {
    remove(tmp);
    fprintf(stderr, "rehearsal: rank %d cannot write %s: %s\n", s->rank, path, strerror(errno));
    return RH_ERR_IO;
  }
  return RH_OK;
}

/* Reads checkpoint-EPOCH, or with epoch < 0 the newest one; returns its epoch, -1 when there is
 * none, -2 when the file is damaged or of another model (the state is then left untouched). */
static int read_checkpoint(rank_state *s, int epoch) {
  int newest = rh_recipe_epochs(s->cfg->epochs, s->cfg->epochs_divided, s->size);
  for (int e = epoch >= 0 ? epoch : newest; e >= (epoch >= 0 ? epoch : 1); e--) {
    char path[1024];
    ckpt_path(s, e, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    ckpt_header h;
    size_t nstate = rh_optimizer_state_count(&s->opt);
    float *p = malloc(s->nparams * sizeof(float)), *o = malloc(nstate * sizeof(float) + 1);
    bool ok = p && o && fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, "RHCKPT1", 8) == 0 &&
              h.nparams == s->nparams && h.nstate == nstate &&
              fread(p, sizeof(float), s->nparams, f) == s->nparams &&
              fread(o, sizeof(float), nstate, f) == nstate && fgetc(f) == EOF;
    fclose(f);
    if (ok) { /* only a whole, matching file replaces the state */
      memcpy(s->params, p, s->nparams * sizeof(float));
      memcpy(s->opt.state, o, nstate * sizeof(float));
      s->opt.steps = h.opt_steps;
    } else {
      fprintf(stderr, "rehearsal: %s is damaged or not a checkpoint of this model\n", path);
    }
    free(p);
    free(o);
    return ok ? h.epoch : -2;
  }
  return -1;
}

/* Rank 0 finds the checkpoint and broadcasts the epoch and the state; returns the epoch to start
 * from (0 when there is none). */
static rh_status restore(rank_state *s, int which, int *start_epoch) {
  int32_t epoch = s->rank == 0 ? read_checkpoint(s, which) : 0;
  /* every rank learns first whether rank 0 could read it */
  rh_status st = rh_broadcast(s->ctx, &epoch, 1, RH_INT32, 0);
  if (st != RH_OK) return st;
  if (epoch == -2) {
    snprintf(s->res->error_detail, sizeof s->res->error_detail,
             "the newest checkpoint in %s is damaged", s->cfg->checkpoint_dir);
    return RH_ERR_IO;
  }
  int e = epoch < 0 ? 0 : epoch;
  st = broadcast_state(s, &e);
  *start_epoch = e;
  return st;
}

/* ---- one step ------------------------------------------------------------------------------- */

/* Packs a bucket's gradients into its fusion buffer and starts their average. */
static rh_status issue_bucket(rank_state *s, const int *order, bucket *b) {
  if (s->cfg->real) {
    b->buf = malloc(b->count * sizeof(float) + 1);
    if (!b->buf) return RH_ERR_NOMEM;
    size_t off = 0;
    for (int k = b->from; k < b->to; k++) {
      const tensor *t = &s->tensors[order[k]];
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
    const tensor *t = &s->tensors[order[k]];
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
    const tensor *t = &s->tensors[order[k]];
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
  if (first != RH_OK) return failed(s, first, RH_CHECK_COLLECTIVES);

  double lr = rh_recipe_lr(&s->used_lr, epoch, step, s->steps_per_epoch);
  *lr_out = lr;
  if (!cfg->real) return RH_OK;
  rh_optimizer_step(&s->opt, s->params, s->grad, lr);
  s->epoch_loss += loss * (double)n;
  s->epoch_correct += correct;
  s->epoch_samples += (double)n;
  return RH_OK;
}

/* ---- checks after a step ------------------------------------------------------------------- */

static rh_status check_step(rank_state *s, int epoch, long step, double lr) {
  const rh_train_config *cfg = s->cfg;
  rh_status st = RH_OK;
  int n = s->size;
  if (checking(s, RH_CHECK_IDENTICAL) && !s->identical_failed) {
    uint64_t mine = fnv(s->params, s->nparams * sizeof(float));
    uint64_t *all = calloc((size_t)n, sizeof *all);
    uint8_t *differ = calloc((size_t)n, 1);
    if (!all || !differ) st = RH_ERR_NOMEM;
    if (st == RH_OK) st = rh_check_allgather(s->ctx, &mine, sizeof mine, all);
    int bad = 0;
    for (int r = 0; st == RH_OK && r < n; r++) bad += differ[r] = all[r] != all[0];
    if (st == RH_OK && bad) {
      char ranks[256];
      rank_list(differ, n, ranks, sizeof ranks);
      s->identical_failed = true;
      verdict(s, RH_CHECK_IDENTICAL, false,
              "after epoch %d step %ld the parameters of ranks %s differ from rank 0's", epoch + 1,
              step + 1, ranks);
    }
    s->identical_steps++;
    free(all);
    free(differ);
  }
  if (st == RH_OK && checking(s, RH_CHECK_LR) && !s->lr_failed) {
    double want = rh_recipe_lr(&s->recipe_lr, epoch, step, s->steps_per_epoch);
    double mine[2] = {lr, want}, *all = calloc((size_t)n * 2, sizeof(double));
    uint8_t *wrong = calloc((size_t)n, 1);
    if (!all || !wrong) st = RH_ERR_NOMEM;
    if (st == RH_OK) st = rh_check_allgather(s->ctx, mine, sizeof mine, all);
    int bad = 0;
    for (int r = 0; st == RH_OK && r < n; r++) bad += wrong[r] = all[2 * r] != all[2 * r + 1];
    if (st == RH_OK && bad) {
      char ranks[256];
      rank_list(wrong, n, ranks, sizeof ranks);
      int r0 = 0;
      while (!wrong[r0]) r0++;
      s->lr_failed = true;
      verdict(s, RH_CHECK_LR, false,
              "epoch %d step %ld: ranks %s used lr %.9g where the recipe gives %.9g (base %.9g "
              "x %s factor %.9g)",
              epoch + 1, step + 1, ranks, all[2 * r0], all[2 * r0 + 1], cfg->base_lr,
              cfg->lr_scaling == RH_LR_SIZE ? "size" : cfg->lr_scaling == RH_LR_LOCAL_SIZE ? "local_size" : "no",
              rh_recipe_lr_factor(cfg->lr_scaling, s->size, s->local_size));
    }
    free(all);
    free(wrong);
  }
  if (checking(s, RH_CHECK_SAMPLES)) {
    long base = step * cfg->batch;
    for (long j = 0; j < s->nused; j++) s->epoch_used[base + j] = s->used[j];
  }
  bool serial = checking(s, RH_CHECK_SERIAL) &&
                (cfg->serial_check_steps == 0 || s->global_step < cfg->serial_check_steps);
  if (st == RH_OK && serial) {
    /* the samples every rank used this step, in rank order: the serial batch */
    st = rh_check_allgather(s->ctx, s->used, (size_t)cfg->batch * sizeof(long), s->all_used);
    if (st == RH_OK && s->rank == 0) {
      int in = cfg->model.inputs;
      long m = 0;
      for (int r = 0; r < n; r++)
        for (long j = 0; j < s->nused; j++, m++)
          rh_dataset_get(cfg->train, s->all_used[(size_t)r * (size_t)cfg->batch + (size_t)j],
                         s->sx + (size_t)m * (size_t)in, &s->sy[m]);
      int c;
      rh_model_loss_grad(&cfg->model, s->sparams, s->sx, s->sy, (int)m, s->sgrad, &c);
      rh_optimizer_step(&s->sopt, s->sparams, s->sgrad, lr);
      double diff = 0, big = 0;
      for (size_t i = 0; i < s->nparams; i++) {
        double d = fabs((double)s->params[i] - (double)s->sparams[i]);
        if (d > diff) diff = d;
        if (fabs(s->sparams[i]) > big) big = fabs(s->sparams[i]);
      }
      if (diff / (big > 1 ? big : 1) > s->serial_max_diff) s->serial_max_diff = diff / (big > 1 ? big : 1);
      s->serial_steps++;
      if (m > s->serial_batch) s->serial_batch = m;
    }
  }
  return failed(s, st, RH_CHECK_COLLECTIVES);
}

/* Every sample at most once per epoch (beyond the sampler's padding), across all ranks. */
static rh_status check_samples(rank_state *s, int epoch, long steps_run) {
  const rh_train_config *cfg = s->cfg;
  int n = s->size;
  long per_rank = (steps_run - 1) * cfg->batch + s->nused;
  if (steps_run == 0) return RH_OK;
  long *all = calloc((size_t)n * (size_t)per_rank, sizeof *all);
  if (!all) return RH_ERR_NOMEM;
  rh_status st = rh_check_allgather(s->ctx, s->epoch_used, (size_t)per_rank * sizeof(long), all);
  if (st == RH_OK && s->rank == 0) {
    long N = cfg->train_samples, total = (long)n * per_rank;
    int *owner = malloc((size_t)N * sizeof *owner);
    int *count = calloc((size_t)N, sizeof *count);
    uint8_t *involved = calloc((size_t)n, 1);
    if (!owner || !count || !involved) {
      st = RH_ERR_NOMEM;
    } else {
      long repeats = 0, distinct = 0;
      for (int r = 0; r < n; r++)
        for (long k = 0; k < per_rank; k++) {
          long idx = all[(size_t)r * (size_t)per_rank + (size_t)k];
          if (count[idx]++ == 0) {
            owner[idx] = r;
            distinct++;
          } else {
            repeats++;
            involved[r] = 1;
            involved[owner[idx]] = 1;
          }
        }
      /* only the recipe's own padding may repeat a sample: each rank covers at most its shard of
       * ceil(N / size) positions, of which size * shard - N repeat the start of the order */
      long shard = rh_sampler_shard_size(N, n), covered = per_rank < shard ? per_rank : shard;
      long allowed = (long)n * covered > N ? (long)n * covered - N : 0;
      char ranks[256];
      rank_list(involved, n, ranks, sizeof ranks);
      if (repeats > allowed)
        verdict(s, RH_CHECK_SAMPLES, false,
                "epoch %d: %ld of %ld sample draws repeated a sample already used that epoch "
                "(%ld distinct of %ld); ranks %s used the same samples",
                epoch + 1, repeats, total, distinct, N, ranks);
      else
        verdict(s, RH_CHECK_SAMPLES, true,
                "each epoch (the last: %ld draws over %d ranks, %ld distinct samples of %ld, %ld "
                "repeated by the sampler's padding)",
                total, n, distinct, N, repeats);
    }
    free(owner);
    free(count);
    free(involved);
  }
  free(all);
  return failed(s, st, RH_CHECK_COLLECTIVES);
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

/* The logged value against the mean over ranks of their own values. */
static rh_status check_metric(rank_state *s, double local, double logged, const char *name) {
  if (!checking(s, RH_CHECK_METRICS)) return RH_OK;
  int n = s->size;
  double mine[2] = {local, logged}, *all = calloc((size_t)n * 2, sizeof(double));
  uint8_t *off = calloc((size_t)n, 1);
  rh_status st = all && off ? rh_check_allgather(s->ctx, mine, sizeof mine, all) : RH_ERR_NOMEM;
  if (st == RH_OK) {
    double mean = 0;
    for (int r = 0; r < n; r++) mean += all[2 * r];
    mean /= n;
    int bad = 0;
    for (int r = 0; r < n; r++) bad += off[r] = fabs(all[2 * r + 1] - mean) > 1e-12 * (1 + fabs(mean));
    if (bad) {
      char ranks[256];
      rank_list(off, n, ranks, sizeof ranks);
      verdict(s, RH_CHECK_METRICS, false,
              "%s: ranks %s logged a value that is not the mean over ranks (rank 0 logged %.9g, "
              "the mean is %.9g)",
              name, ranks, all[1], mean);
    }
  }
  free(all);
  free(off);
  return st;
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
  if (st != RH_OK) return failed(s, st, RH_CHECK_METRICS);
  st = check_metric(s, local_vl, vl, "avg_loss");
  if (st == RH_OK) st = check_metric(s, local_va, va, "avg_accuracy");
  es->val_loss = vl;
  es->val_accuracy = va;
  s->validated = true;
  return failed(s, st, RH_CHECK_COLLECTIVES);
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
    if (st != RH_OK) return failed(s, st, RH_CHECK_COLLECTIVES);
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
      st = write_checkpoint(s, epoch + 1);
      wrote = st == RH_OK;
    }
    if (st == RH_OK && cfg->check[RH_CHECK_CHECKPOINT]) {
      uint8_t *all = calloc((size_t)s->size, 1);
      st = all ? rh_check_allgather(s->ctx, &wrote, 1, all) : RH_ERR_NOMEM;
      int writers = 0;
      for (int r = 0; st == RH_OK && r < s->size; r++) writers += all[r];
      s->checkpoint_writes++;
      s->written[epoch + 1] = 1;
      if (st == RH_OK && (writers != 1 || !all[0])) {
        char ranks[256];
        rank_list(all, s->size, ranks, sizeof ranks);
        verdict(s, RH_CHECK_CHECKPOINT, false, "checkpoint-%d.bin was written by %d ranks (%s)",
                epoch + 1, writers, ranks);
      }
      free(all);
    }
  }
  return failed(s, st, RH_CHECK_COLLECTIVES);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static rh_status run_epochs(rank_state *s, int from, int to) {
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
      if (s->sparams && checking(s, RH_CHECK_SERIAL)) {
        /* the replica starts each step from rank 0's state: the check compares one step at a
         * time, so fp32 sums in another order cannot add up over a long run */
        memcpy(s->sparams, s->params, s->nparams * sizeof(float));
        memcpy(s->sopt.state, s->opt.state, rh_optimizer_state_count(&s->opt) * sizeof(float));
        s->sopt.steps = s->opt.steps;
      }
      st = train_step(s, e, step, &tc, &lr);
      es.compute += tc - t0;
      es.exposed_comm += rh_time(s->ctx) - tc;
      if (step == 0) es.lr_first = lr;
      es.lr_last = lr;
      if (st == RH_OK) st = check_step(s, e, step, lr);
      s->global_step++;
      /* StopAtStepHook(last_step): checked after each step, so last_step 0 still runs one */
      if (s->cfg->stop_at_step > 0 && s->global_step >= s->last_step) s->stopped = true;
    }
    es.steps = step;
    if (st == RH_OK && checking(s, RH_CHECK_SAMPLES)) st = check_samples(s, e, step);
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

/* Restarts from the checkpoint of epoch k and replays to the end: the same parameters, bit for
 * bit, as the run that never stopped. */
static rh_status check_resume(rank_state *s, int epochs) {
  const rh_train_config *cfg = s->cfg;
  int k = cfg->resume_from_epoch;
  if (!checking(s, RH_CHECK_RESUME)) return RH_OK;
  if (k < 1 || k >= epochs) {
    char why[160];
    snprintf(why, sizeof why, "resume_from_epoch %d leaves nothing to replay: %d epochs ran", k,
             epochs);
    skip(s, RH_CHECK_RESUME, why);
    return RH_OK;
  }
  if (!s->written[k]) {
    char why[160];
    snprintf(why, sizeof why, "this run wrote no checkpoint after epoch %d", k);
    skip(s, RH_CHECK_RESUME, why);
    return RH_OK;
  }
  float *whole = malloc(s->nparams * sizeof(float));
  if (!whole) return RH_ERR_NOMEM;
  memcpy(whole, s->params, s->nparams * sizeof(float));
  s->recording = false;
  s->stopped = false;
  int start = 0;
  rh_status st = restore(s, k, &start);
  if (st == RH_OK && start != k) {
    verdict(s, RH_CHECK_RESUME, false, "checkpoint-%d.bin was not found in %s", k,
            cfg->checkpoint_dir);
  } else if (st == RH_OK) {
    s->global_step = (long)start * s->steps_per_epoch;
    st = run_epochs(s, start, epochs);
  }
  if (st == RH_OK && start == k) {
    uint8_t same = memcmp(whole, s->params, s->nparams * sizeof(float)) == 0;
    uint8_t *all = calloc((size_t)s->size, 1);
    st = all ? rh_check_allgather(s->ctx, &same, 1, all) : RH_ERR_NOMEM;
    uint8_t *differ = calloc((size_t)s->size, 1);
    int bad = 0;
    for (int r = 0; st == RH_OK && differ && r < s->size; r++) bad += differ[r] = !all[r];
    char ranks[256] = "";
    if (bad && differ) rank_list(differ, s->size, ranks, sizeof ranks);
    if (st == RH_OK && bad)
      verdict(s, RH_CHECK_RESUME, false,
              "resumed after epoch %d, ranks %s ended with other parameters than the run that "
              "never stopped", k, ranks);
    else if (st == RH_OK)
      verdict(s, RH_CHECK_RESUME, true,
              "resumed after epoch %d from checkpoint-%d.bin: the same parameters, bit for bit, "
              "on every rank", k, k);
    free(all);
    free(differ);
  }
  free(whole);
  s->recording = true;
  return failed(s, st, RH_CHECK_COLLECTIVES);
}

int rh_train_rank(rh_ctx *ctx, void *arg) {
  rh_train_job *job = arg;
  rank_state s = {.ctx = ctx, .cfg = job->cfg, .res = job->result};
  const rh_train_config *cfg = job->cfg;
  rh_status st = setup(&s);
  if (st != RH_OK) {
    teardown(&s);
    failed(&s, st, RH_CHECK_COLLECTIVES);
    return 1;
  }
  int epochs = rh_recipe_epochs(cfg->epochs, cfg->epochs_divided, s.size), start = 0;
  if (s.rank == 0) {
    s.res->steps_per_epoch = s.steps_per_epoch;
    s.res->gradient_bytes = (double)s.nparams * 4;
  }
  st = initialise(&s);
  if (st == RH_OK && cfg->resume && cfg->real && cfg->checkpoint_dir) {
    st = failed(&s, restore(&s, -1, &start), RH_CHECK_COLLECTIVES);
    s.global_step = (long)start * s.steps_per_epoch;
    if (s.sparams) { /* the serial replica starts from the checkpoint too, momentum and all */
      memcpy(s.sparams, s.params, s.nparams * sizeof(float));
      memcpy(s.sopt.state, s.opt.state, rh_optimizer_state_count(&s.opt) * sizeof(float));
      s.sopt.steps = s.opt.steps;
    }
    if (s.rank == 0) s.res->start_epoch = start;
  }
  if (st == RH_OK) st = run_epochs(&s, start, epochs);
  if (st == RH_OK && cfg->real && s.rank == 0)
    s.res->params_hash = fnv(s.params, s.nparams * sizeof(float)); /* before the resume replay */
  if (st == RH_OK) st = check_resume(&s, s.epochs_run);

  /* verdicts of the checks that passed (failures were written when seen) */
  if (st == RH_OK && s.rank == 0 && s.global_step == (long)start * s.steps_per_epoch)
    for (int i = 0; i < RH_CHECK_COUNT; i++) /* resumed with nothing left to run */
      skip(&s, (rh_check_id)i, "no step was left to run");
  if (st == RH_OK && cfg->real && s.rank == 0) {
    bool fp16 = (int)rh_setting(ctx, RH_SETTING_COMPRESSION) == 1;
    double tolerance = fp16 ? SERIAL_TOLERANCE_FP16 : SERIAL_TOLERANCE;
    if (cfg->check[RH_CHECK_IDENTICAL] && !s.identical_failed)
      verdict(&s, RH_CHECK_IDENTICAL, true,
              "parameters identical, bit for bit, on all %d ranks after each of %ld steps", s.size,
              s.identical_steps);
    if (cfg->check[RH_CHECK_LR] && !s.lr_failed)
      verdict(&s, RH_CHECK_LR, true, "every step's lr equals the recipe (base %.9g x %.9g%s%s)",
              cfg->base_lr, rh_recipe_lr_factor(cfg->lr_scaling, s.size, s.local_size),
              cfg->warmup_epochs > 0 ? ", warmup" : "", cfg->ndecay ? ", step decay" : "");
    if (cfg->check[RH_CHECK_SERIAL])
      verdict(&s, RH_CHECK_SERIAL, s.serial_max_diff <= tolerance,
              "%ld steps, each against serial SGD with batch %ld from the same parameters: "
              "largest difference %.3g of the largest parameter (tolerance %g: %s)",
              s.serial_steps, s.serial_batch, s.serial_max_diff, tolerance,
              fp16 ? "gradients travel as fp16" : "fp32 sums in another order");
    if (cfg->check[RH_CHECK_METRICS] && s.validated)
      verdict(&s, RH_CHECK_METRICS, true, "validation loss and accuracy are the mean over %d ranks",
              s.size);
    else if (cfg->check[RH_CHECK_METRICS])
      skip(&s, RH_CHECK_METRICS, "no validation ran: no metric to average");
    if (cfg->check[RH_CHECK_CHECKPOINT] && s.checkpoint_writes > 0)
      verdict(&s, RH_CHECK_CHECKPOINT, true, "%d checkpoints, each written by rank 0 alone",
              s.checkpoint_writes);
    else if (cfg->check[RH_CHECK_CHECKPOINT])
      skip(&s, RH_CHECK_CHECKPOINT, "no checkpoint was due in the epochs that ran");

  }
  if (st == RH_OK && cfg->check[RH_CHECK_COLLECTIVES])
    verdict(&s, RH_CHECK_COLLECTIVES, true,
            "every rank issued the same collectives in the same order");
  teardown(&s);
  return st == RH_OK ? 0 : 1;
}
