/*
 * state.c: the training state of a replay and where it goes.  The state is the position (epoch,
 * step, samples processed), the parameters, the optimizer, and the evidence of the checks.
 *
 * - Fixed size: rank 0's initial parameters and optimizer state reach every rank (Horovod's
 *   broadcast_parameters and broadcast_optimizer_state); rank 0 writes checkpoints at epoch ends
 *   (checkpoint-E.bin) and every N steps (checkpoint-step-G.bin), and a resumed or relaunched job
 *   starts from the newest one.
 * - Elastic: the same state in an rh_state (Horovod's TorchState with an ElasticSampler): the
 *   buffers are committed every N steps and at each epoch's end, the evidence through a handler
 *   (every rank holds it; a sync hands rank 0's to new workers), and the reset callback takes the
 *   new world's rank and size: the lr is rescaled and the sampler cut again (train__refresh_world).
 * A commit or a checkpoint costs its bytes at the scenario's rates where time is simulated.
 */
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0's parameters, optimizer state and position reach every rank. */
static rh_status broadcast_state(rank_state *s) {
  rh_status st = RH_OK;
  if (s->cfg->real) {
    st = rh_broadcast(s->ctx, s->params, s->nparams, RH_FLOAT32, 0);
    if (st == RH_OK)
      st = rh_broadcast(s->ctx, s->opt.state, rh_optimizer_state_count(&s->opt), RH_FLOAT32, 0);
  }
  double scalars[1 + POSITION_FIELDS];
  scalars[0] = s->opt.steps;
  memcpy(scalars + 1, &s->pos, sizeof s->pos);
  if (st == RH_OK) st = rh_broadcast(s->ctx, scalars, 1 + POSITION_FIELDS, RH_FLOAT64, 0);
  if (st == RH_OK) {
    s->opt.steps = scalars[0];
    memcpy(&s->pos, scalars + 1, sizeof s->pos);
  }
  return st;
}

rh_status train__initialise(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  if (!cfg->real) return RH_OK;
  bool broadcast = !(cfg->mistakes & RH_MISTAKE_NO_INITIAL_BROADCAST);
  rh_model_init_params(&cfg->model, s->params, cfg->seed + (broadcast ? 0 : (uint64_t)s->rank));
  rh_status st = RH_OK;
  if (broadcast) { /* as it always was: the parameters and the optimizer, then the scalars */
    st = rh_broadcast(s->ctx, s->params, s->nparams, RH_FLOAT32, 0);
    if (st == RH_OK)
      st = rh_broadcast(s->ctx, s->opt.state, rh_optimizer_state_count(&s->opt), RH_FLOAT32, 0);
    double scalars[2] = {s->opt.steps, 0};
    if (st == RH_OK) st = rh_broadcast(s->ctx, scalars, 2, RH_FLOAT64, 0);
    if (st == RH_OK) s->opt.steps = scalars[0];
  }
  if (st == RH_OK && s->sparams) memcpy(s->sparams, s->params, s->nparams * sizeof(float));
  return train__failed(s, st, RH_CHECK_COLLECTIVES);
}

/* ---- checkpoints --------------------------------------------------------------------------- */

typedef struct ckpt_header {
  char magic[8];  /* "RHCKPT2\0" */
  int32_t epoch;  /* the epoch in progress (epochs completed, at an epoch's end) */
  int32_t at_end; /* 1: written at the end of an epoch */
  uint64_t nparams, nstate; /* floats that follow (0 for a timing-only model) */
  double opt_steps;
  double position[POSITION_FIELDS];
} ckpt_header;

/* The bytes a checkpoint of this model holds (a timing-only model's, though none are written). */
static double state_bytes(const rank_state *s) {
  double nstate = s->cfg->real ? (double)rh_optimizer_state_count(&s->opt)
                               : (double)s->nparams * s->cfg->optimizer_state;
  return ((double)s->nparams + nstate) * sizeof(float);
}

rh_status train__write_checkpoint(rank_state *s, bool epoch_end) {
  const rh_train_config *cfg = s->cfg;
  bool writer = s->rank == 0 || (cfg->mistakes & RH_MISTAKE_CHECKPOINT_EVERY_RANK);
  if (!writer) return RH_OK;
  char path[1024], tmp[1100];
  if (epoch_end) snprintf(path, sizeof path, "%s/checkpoint-%d.bin", cfg->checkpoint_dir, (int)s->pos.epoch + 1);
  else snprintf(path, sizeof path, "%s/checkpoint-step-%ld.bin", cfg->checkpoint_dir, (long)s->pos.global_step);
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, s->rank);
  ckpt_header h = {.magic = "RHCKPT2", .epoch = (int)s->pos.epoch + (epoch_end ? 1 : 0),
                   .at_end = epoch_end, .opt_steps = s->opt.steps};
  memcpy(h.position, &s->pos, sizeof s->pos);
  if (epoch_end) { /* the position after the epoch: the next one, from its start */
    train_position next = s->pos;
    next.epoch += 1;
    next.step = next.processed = 0;
    next.epoch_start = next.global_step;
    next.epochs_run = next.epoch;
    memcpy(h.position, &next, sizeof next);
  }
  if (cfg->real) {
    h.nparams = s->nparams;
    h.nstate = rh_optimizer_state_count(&s->opt);
  }
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 &&
            (!cfg->real || (fwrite(s->params, sizeof(float), s->nparams, f) == s->nparams &&
                            fwrite(s->opt.state, sizeof(float), h.nstate, f) == h.nstate));
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) {
    remove(tmp);
    fprintf(stderr, "rehearsal: rank %d cannot write %s: %s\n", s->rank, path, strerror(errno));
    return RH_ERR_IO;
  }
  rh_status st = rh_storage_io(s->ctx, state_bytes(s) + sizeof h, true);
  rh_train_result *r = s->res;
  if (st == RH_OK && s->rank == 0 && s->recording) { /* for the failures report */
    if (r->nckpt == r->capckpt) {
      size_t cap = r->capckpt ? 2 * r->capckpt : 16;
      double *t = realloc(r->ckpt_time, cap * sizeof *t);
      if (t) r->ckpt_time = t;
      long *g = realloc(r->ckpt_step, cap * sizeof *g);
      if (g) r->ckpt_step = g;
      if (t && g) r->capckpt = cap;
    }
    if (r->nckpt < r->capckpt) {
      r->ckpt_time[r->nckpt] = rh_time(s->ctx);
      r->ckpt_step[r->nckpt++] = (long)s->pos.global_step;
    }
  }
  return st;
}

/* Reads the checkpoint at `path` into the state; 0, -1 when it is absent, -2 when it is damaged
 * or of another model (the state is then left untouched). */
static int read_file(rank_state *s, const char *path, ckpt_header *out) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  ckpt_header h;
  size_t nstate = s->cfg->real ? rh_optimizer_state_count(&s->opt) : 0;
  size_t np = s->cfg->real ? s->nparams : 0;
  float *p = malloc(np * sizeof(float) + 1), *o = malloc(nstate * sizeof(float) + 1);
  bool ok = p && o && fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, "RHCKPT2", 8) == 0 &&
            h.nparams == np && h.nstate == nstate && fread(p, sizeof(float), np, f) == np &&
            fread(o, sizeof(float), nstate, f) == nstate && fgetc(f) == EOF;
  fclose(f);
  if (ok) { /* only a whole, matching file replaces the state */
    memcpy(s->params, p, np * sizeof(float));
    memcpy(s->opt.state, o, nstate * sizeof(float));
    s->opt.steps = h.opt_steps;
    memcpy(&s->pos, h.position, sizeof s->pos);
    *out = h;
  } else {
    fprintf(stderr, "rehearsal: %s is damaged or not a checkpoint of this model\n", path);
  }
  free(p);
  free(o);
  return ok ? 0 : -2;
}

/* Reads checkpoint-EPOCH, or with epoch < 0 the one of the most steps; returns the epoch it
 * holds, -1 when there is none, -2 when it is damaged. */
static int read_checkpoint(rank_state *s, int epoch) {
  char path[1024], best[1024] = "";
  const char *dir = s->cfg->checkpoint_dir;
  ckpt_header h;
  if (epoch >= 0) {
    snprintf(path, sizeof path, "%s/checkpoint-%d.bin", dir, epoch);
    int rc = read_file(s, path, &h);
    return rc < 0 ? rc : h.epoch;
  }
  /* the newest: the most global steps, an epoch's end before a mid-epoch one of the same step */
  DIR *d = opendir(dir);
  double most = -1;
  for (struct dirent *de; d && (de = readdir(d));) {
    int e;
    long g;
    char tail[8];
    bool at_end = sscanf(de->d_name, "checkpoint-%d.bi%1s", &e, tail) == 2;
    bool mid = sscanf(de->d_name, "checkpoint-step-%ld.bi%1s", &g, tail) == 2;
    if (!at_end && !mid) continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    FILE *f = fopen(path, "rb");
    ckpt_header peek;
    bool got = f && fread(&peek, sizeof peek, 1, f) == 1 && memcmp(peek.magic, "RHCKPT2", 8) == 0;
    if (f) fclose(f);
    double steps = got ? peek.position[3] + (peek.at_end ? 0.5 : 0) : -1; /* global_step */
    if (!got && most < 0) steps = 0; /* a damaged file is only read when it is all there is */
    if (steps > most) {
      most = steps;
      snprintf(best, sizeof best, "%s", path);
    }
  }
  if (d) closedir(d);
  if (!best[0]) return -1;
  int rc = read_file(s, best, &h);
  return rc < 0 ? rc : h.epoch;
}

rh_status train__restore(rank_state *s, int which, int *found) {
  train_position start = {0};
  int32_t epoch = s->rank == 0 ? read_checkpoint(s, which) : 0;
  /* every rank learns first whether rank 0 could read it */
  rh_status st = rh_broadcast(s->ctx, &epoch, 1, RH_INT32, 0);
  if (st != RH_OK) return st;
  if (epoch == -2) {
    snprintf(s->res->error_detail, sizeof s->res->error_detail,
             "the newest checkpoint in %s is damaged", s->cfg->checkpoint_dir);
    return RH_ERR_IO;
  }
  if (epoch < 0 && s->rank == 0) s->pos = start; /* none: from the start */
  if (epoch >= 0 && s->rank == 0) st = rh_storage_io(s->ctx, state_bytes(s), false);
  if (st == RH_OK) st = broadcast_state(s);
  *found = epoch < 0 ? 0 : epoch;
  s->shard_epoch = -1;
  return st;
}

/* ---- the elastic state --------------------------------------------------------------------- */

/* The evidence as regions of memory, each with a saved copy. */
typedef struct evidence {
  rank_state *s;
  struct { void *live, *saved; size_t bytes; } region[6];
  int n;
} evidence;

static rh_status evidence_init(evidence *ev, rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  size_t N = cfg->real ? (size_t)cfg->train_samples : 0;
  int most = cfg->max_size > s->size ? cfg->max_size : s->size;
  void *live[] = {&s->ev, s->epoch_stats, s->written, s->sample_count, s->sample_owner,
                  s->involved};
  size_t bytes[] = {sizeof s->ev, ((size_t)s->epochs + 1) * sizeof *s->epoch_stats,
                    (size_t)s->epochs + 2, N * sizeof(int32_t), N * sizeof(int32_t),
                    cfg->real ? (size_t)most : 0};
  *ev = (evidence){.s = s};
  for (int i = 0; i < 6; i++) {
    if (!live[i] || !bytes[i]) continue;
    void *saved = calloc(1, bytes[i]);
    if (!saved) return RH_ERR_NOMEM;
    ev->region[ev->n].live = live[i];
    ev->region[ev->n].saved = saved;
    ev->region[ev->n++].bytes = bytes[i];
  }
  return RH_OK;
}

static void evidence_free(evidence *ev) {
  for (int i = 0; i < ev->n; i++) free(ev->region[i].saved);
}

static rh_status evidence_save(rh_ctx *ctx, void *obj) {
  (void)ctx;
  evidence *ev = obj;
  for (int i = 0; i < ev->n; i++) memcpy(ev->region[i].saved, ev->region[i].live, ev->region[i].bytes);
  return RH_OK;
}

static rh_status evidence_restore(rh_ctx *ctx, void *obj) {
  (void)ctx;
  evidence *ev = obj;
  for (int i = 0; i < ev->n; i++) memcpy(ev->region[i].live, ev->region[i].saved, ev->region[i].bytes);
  return RH_OK;
}

static size_t evidence_size(void *obj) {
  evidence *ev = obj;
  size_t n = 0;
  for (int i = 0; i < ev->n; i++) n += ev->region[i].bytes;
  return n;
}

/* Every rank takes rank 0's evidence: the checks' channel, which costs no simulated time. */
static rh_status evidence_sync(rh_ctx *ctx, void *obj) {
  evidence *ev = obj;
  size_t n = evidence_size(ev), off = 0;
  unsigned char *mine = malloc(n + 1), *all = malloc(n * (size_t)rh_size(ctx) + 1);
  rh_status st = mine && all ? RH_OK : RH_ERR_NOMEM;
  for (int i = 0; st == RH_OK && i < ev->n; i++) {
    memcpy(mine + off, ev->region[i].live, ev->region[i].bytes);
    off += ev->region[i].bytes;
  }
  if (st == RH_OK) st = rh_check_allgather(ctx, mine, n, all);
  off = 0;
  for (int i = 0; st == RH_OK && i < ev->n; i++) {
    memcpy(ev->region[i].live, all + off, ev->region[i].bytes);
    off += ev->region[i].bytes;
  }
  free(mine);
  free(all);
  return st;
}

static rh_status evidence_store(void *obj, void *out) {
  evidence *ev = obj;
  unsigned char *p = out;
  for (int i = 0; i < ev->n; i++) {
    memcpy(p, ev->region[i].saved, ev->region[i].bytes);
    p += ev->region[i].bytes;
  }
  return RH_OK;
}

static rh_status evidence_load(void *obj, const void *in, size_t bytes) {
  evidence *ev = obj;
  if (bytes != evidence_size(ev)) return RH_ERR_IO;
  const unsigned char *p = in;
  for (int i = 0; i < ev->n; i++) {
    memcpy(ev->region[i].saved, p, ev->region[i].bytes);
    p += ev->region[i].bytes;
  }
  return RH_OK;
}

static const rh_state_handler evidence_handler = {
    .save = evidence_save, .restore = evidence_restore, .sync = evidence_sync,
    .size = evidence_size, .store = evidence_store, .load = evidence_load};

rh_status train__commit(rank_state *s) {
  /* the mistake commits nothing; a replay after the run (the resume check) has no state */
  if ((s->cfg->mistakes & RH_MISTAKE_NO_COMMIT) || !s->state) return RH_OK;
  double t0 = rh_time(s->ctx);
  if (s->cfg->real) s->commit_hash = train__fnv(s->params, s->nparams * sizeof(float));
  rh_status st = rh_state_commit(s->state);
  s->ev.now.commit += rh_time(s->ctx) - t0;
  if (s->rank == 0) s->res->commits++;
  return st;
}

/* Horovod's reset callback: the new world's rank and size, the lr rescaled for it (unless the
 * program forgets to), the sampler cut again (unless it is not reset). */
static void on_reset(rh_ctx *ctx, void *arg) {
  (void)ctx;
  rank_state *s = arg;
  s->resets++;
  s->ev.world_resets++;
  train__refresh_world(s, true);
}

/* One pass of Horovod's elastic loop: after a reset (and the sync), the elastic checks look at
 * the new world; then the epochs go on from the position. */
static rh_status train_fn(rh_ctx *ctx, rh_state *state, void *arg) {
  (void)state;
  rank_state *s = arg;
  (void)ctx;
  rh_status st = RH_OK;
  if (s->rank == 0) s->res->resets = s->ev.world_resets;
  if (s->ev.world_resets > s->ev.resets_checked) {
    st = train__checks_after_reset(s);
    s->ev.resets_checked = s->ev.world_resets;
  }
  if (st != RH_OK) return st;
  s->failed_at = -1;
  return train__run_epochs(s, s->epochs);
}

rh_status train__elastic(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  rh_ctx *ctx = s->ctx;
  evidence ev;
  rh_status st = evidence_init(&ev, s);
  s->state = st == RH_OK ? rh_state_create(ctx) : NULL;
  if (!s->state) {
    evidence_free(&ev);
    return RH_ERR_NOMEM;
  }
  size_t nstate = cfg->real ? rh_optimizer_state_count(&s->opt)
                            : (size_t)((double)s->nparams * cfg->optimizer_state);
  /* the order of a sync: the position first, then the model and the optimizer (Horovod's
   * TorchState syncs its handlers, then its attributes; the cost is the same) */
  rh_state_register(s->state, "position", &s->pos, POSITION_FIELDS, RH_FLOAT64);
  rh_state_register(s->state, "commit.hash", &s->commit_hash, 2, RH_INT32);
  rh_state_register(s->state, "optimizer.steps", &s->opt.steps, 1, RH_FLOAT64);
  rh_state_register(s->state, "parameters", cfg->real ? s->params : NULL, s->nparams, RH_FLOAT32);
  rh_state_register(s->state, "optimizer", cfg->real ? s->opt.state : NULL, nstate, RH_FLOAT32);
  st = rh_state_register_handler(s->state, "evidence", &evidence_handler, &ev);
  if (st == RH_OK) st = rh_state_on_reset(s->state, on_reset, s);
  if (s->rank == 0) s->res->state_bytes = state_bytes(s);
  /* every rank starts from the same seed; the first sync hands rank 0's state to all */
  if (st == RH_OK && cfg->real) rh_model_init_params(&cfg->model, s->params, cfg->seed);
  int start = 0;
  if (st == RH_OK && cfg->resume && cfg->checkpoint_dir) {
    st = train__restore(s, -1, &start);
    if (s->rank == 0) s->res->start_epoch = start;
  }
  if (st == RH_OK) st = rh_elastic_run(ctx, s->state, train_fn, s);
  if (st == RH_ERR_TOO_FEW) {
    s->res->ended = st;
    if (s->cfg->check[RH_CHECK_MIN_NP])
      train__verdict(s, RH_CHECK_MIN_NP, true,
                     "the job ended cleanly when fewer than min_np %d workers remained; its last "
                     "commit was at epoch %d step %ld", cfg->min_np, (int)s->pos.epoch + 1,
                     (long)s->pos.step);
  }
  if (st != RH_OK && st != RH_ERR_EXCLUDED && st != RH_ERR_TOO_FEW && !train__peer_failure(st))
    train__failed(s, st, RH_CHECK_COLLECTIVES);
  /* the evidence lives on the stack of this call: the state must not use it afterwards */
  rh_state_free(s->state);
  s->state = NULL;
  evidence_free(&ev);
  return st;
}
