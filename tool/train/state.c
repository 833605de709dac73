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

/* The initial parameters: model.init_from's, else drawn from seed. */
static void initial_params(const rh_train_config *cfg, float *params, uint64_t seed) {
  if (cfg->init_params)
    memcpy(params, cfg->init_params, cfg->model.nparams * sizeof *params);
  else
    rh_model_init_params(&cfg->model, params, seed);
}

rh_status train__initialise(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  if (!cfg->real) return RH_OK;
  bool broadcast = !(cfg->mistakes & RH_MISTAKE_NO_INITIAL_BROADCAST);
  initial_params(cfg, s->params, cfg->seed + (broadcast ? 0 : (uint64_t)s->rank));
  rh_status st = RH_OK;
  if (broadcast) { /* as it always was: the parameters and the optimizer, then the scalars */
    rh_trace_begin(s->ctx, "setup", "broadcast the initial state");
    st = rh_broadcast(s->ctx, s->params, s->nparams, RH_FLOAT32, 0);
    if (st == RH_OK)
      st = rh_broadcast(s->ctx, s->opt.state, rh_optimizer_state_count(&s->opt), RH_FLOAT32, 0);
    double scalars[2] = {s->opt.steps, 0};
    if (st == RH_OK) st = rh_broadcast(s->ctx, scalars, 2, RH_FLOAT64, 0);
    if (st == RH_OK) s->opt.steps = scalars[0];
    rh_trace_end(s->ctx);
  }
  if (st == RH_OK && s->sparams) memcpy(s->sparams, s->params, s->nparams * sizeof(float));
  return train__failed(s, st, RH_CHECK_COLLECTIVES);
}

/* ---- checkpoints --------------------------------------------------------------------------- */

/* A checkpoint's first bytes: its format, changed whenever what it holds changes. */
#define CKPT_MAGIC "RHCKPT4"

typedef struct ckpt_header {
  char magic[8];  /* CKPT_MAGIC: the format's version (4: the state may be in shard files) */
  int32_t epoch;  /* the epoch in progress (epochs completed, at an epoch's end) */
  int32_t at_end; /* 1: written at the end of an epoch */
  uint64_t nparams, nstate; /* floats that follow (0 for a timing-only model) */
  uint64_t nevidence;       /* bytes of the checks' evidence after them */
  uint64_t nranks;          /* then each rank's sums of its samples' loss, correct, count */
  uint64_t ninvolved;       /* bytes of the writer's rank flags in the evidence (its world) */
  uint64_t nshards;         /* > 0: the floats are in that many shard files beside it (sharded.c),
                             * not in this one: the index of a sharded checkpoint */
  double opt_steps;
  double position[POSITION_FIELDS];
} ckpt_header;

/* The checks' evidence a checkpoint carries, so that a job resumed mid-epoch still sees the
 * samples of the steps before it: what every rank knows, without the times (a resumed job's
 * clock starts again, and its checkpoints must be the same bytes as the uninterrupted run's). */
typedef struct ckpt_evidence {
  train_evidence *ev;
  struct { void *p; size_t bytes; } part[4];
} ckpt_evidence;

/* The evidence's parts; its rank flags as `involved` bytes (< 0: this job's own), so that a job
 * resumed on another number of GPUs reads the flags of the world that wrote them. */
static size_t evidence_parts(rank_state *s, ckpt_evidence *c, long involved) {
  size_t N = s->cfg->real ? (size_t)s->cfg->train_samples : 0;
  int most = s->cfg->max_size > s->size ? s->cfg->max_size : s->size;
  if (involved >= 0 && s->involved) most = (int)involved;
  *c = (ckpt_evidence){.ev = &s->ev};
  c->part[0].p = NULL; /* which epochs wrote checkpoints is this run's own (the resume check) */
  c->part[0].bytes = 0;
  c->part[1].p = s->sample_count;
  c->part[1].bytes = s->sample_count ? N * sizeof(int32_t) : 0;
  c->part[2].p = s->sample_owner;
  c->part[2].bytes = s->sample_owner ? N * sizeof(int32_t) : 0;
  c->part[3].p = s->involved;
  c->part[3].bytes = s->involved ? (size_t)most : 0;
  size_t n = sizeof(train_evidence);
  for (int i = 0; i < 4; i++) n += c->part[i].bytes;
  return n;
}

static void evidence_pack(rank_state *s, unsigned char *out) {
  ckpt_evidence c;
  evidence_parts(s, &c, -1);
  train_evidence ev = s->ev;
  memset(&ev.now, 0, sizeof ev.now);
  memcpy(out, &ev, sizeof ev);
  out += sizeof ev;
  for (int i = 0; i < 4; i++) {
    if (c.part[i].bytes) memcpy(out, c.part[i].p, c.part[i].bytes);
    out += c.part[i].bytes;
  }
}

/* `involved`: the bytes of rank flags in `in` (< 0: this job's own); the flags of ranks this job
 * does not have are dropped. */
static void evidence_unpack(rank_state *s, const unsigned char *in, long involved) {
  ckpt_evidence c;
  evidence_parts(s, &c, -1);
  rh_epoch_stats now = s->ev.now;
  memcpy(&s->ev, in, sizeof s->ev);
  s->ev.now = now;
  in += sizeof s->ev;
  for (int i = 0; i < 4; i++) {
    size_t stored = i == 3 && involved >= 0 && s->involved ? (size_t)involved : c.part[i].bytes;
    if (c.part[i].bytes) {
      memset(c.part[i].p, 0, c.part[i].bytes);
      memcpy(c.part[i].p, in, stored < c.part[i].bytes ? stored : c.part[i].bytes);
    }
    in += stored;
  }
}

/* Every rank takes rank 0's checkpointed evidence (through the checks' channel: no time), and
 * its own row of metric sums (rows: rank 0's copy of the file's, `nrows` of them). */
static rh_status share_evidence(rank_state *s, const double *rows, int nrows) {
  ckpt_evidence c;
  size_t n = evidence_parts(s, &c, -1), m = n + 3 * sizeof(double) * (size_t)s->size;
  unsigned char *mine = calloc(1, m), *all = malloc(m * (size_t)s->size);
  rh_status st = mine && all ? RH_OK : RH_ERR_NOMEM;
  if (st == RH_OK) {
    evidence_pack(s, mine);
    if (rows) memcpy(mine + n, rows, 3 * sizeof(double) * (size_t)(nrows < s->size ? nrows : s->size));
    st = rh_check_allgather(s->ctx, mine, m, all);
  }
  if (st == RH_OK) {
    evidence_unpack(s, all, -1);
    double row[3]; /* the evidence's bytes need not leave the rows aligned for doubles */
    memcpy(row, all + n + 3 * sizeof(double) * (size_t)s->rank, sizeof row);
    s->ev.epoch_loss = row[0];
    s->ev.epoch_correct = row[1];
    s->ev.epoch_samples = row[2];
  }
  free(mine);
  free(all);
  return st;
}

/* Every rank's metric sums, gathered for rank 0's checkpoint. */
static double *gather_rows(rank_state *s) {
  double mine[3] = {s->ev.epoch_loss, s->ev.epoch_correct, s->ev.epoch_samples};
  double *rows = malloc(3 * sizeof(double) * (size_t)s->size);
  if (rows && rh_check_allgather(s->ctx, mine, sizeof mine, rows) != RH_OK) {
    free(rows);
    return NULL;
  }
  return rows;
}

/* The bytes a checkpoint of this model holds (a timing-only model's, though none are written). */
double train__state_bytes(const rank_state *s) {
  double nstate = s->cfg->real ? (double)rh_optimizer_state_count(&s->opt)
                               : (double)s->nparams * s->cfg->optimizer_state;
  return ((double)s->nparams + nstate) * sizeof(float);
}

/* Writes the checkpoint to path through a temporary file and a rename; 0, or the errno. */
static int write_file(rank_state *s, bool epoch_end, const char *path, const double *rows) {
  const rh_train_config *cfg = s->cfg;
  char tmp[1100];
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, s->rank);
  ckpt_header h = {.magic = CKPT_MAGIC, .epoch = (int)s->pos.epoch + (epoch_end ? 1 : 0),
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
  h.nshards = train__shard_checkpoints(s) ? (uint64_t)train__shard_degree(s) : 0;
  bool floats = cfg->real && h.nshards == 0;
  ckpt_evidence parts;
  h.nevidence = evidence_parts(s, &parts, -1);
  h.ninvolved = parts.part[3].bytes;
  h.nranks = rows ? (uint64_t)s->size : 0;
  unsigned char *evidence = malloc(h.nevidence);
  if (!evidence) return ENOMEM;
  evidence_pack(s, evidence);
  FILE *f = fopen(tmp, "wb");
  bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 &&
            (!floats || (fwrite(s->params, sizeof(float), s->nparams, f) == s->nparams &&
                         fwrite(s->opt.state, sizeof(float), h.nstate, f) == h.nstate)) &&
            fwrite(evidence, 1, h.nevidence, f) == h.nevidence &&
            fwrite(rows, 3 * sizeof(double), h.nranks, f) == h.nranks;
  free(evidence);
  if (f && fclose(f) != 0) ok = false;
  if (ok && rename(tmp, path) != 0) ok = false;
  if (!ok) {
    int e = errno ? errno : EIO;
    remove(tmp);
    fprintf(stderr, "rehearsal: rank %d cannot write %s: %s\n", s->rank, path, strerror(e));
    return e;
  }
  return 0;
}

rh_status train__write_checkpoint(rank_state *s, bool epoch_end) {
  const rh_train_config *cfg = s->cfg;
  bool writer = s->rank == 0 || (cfg->mistakes & RH_MISTAKE_CHECKPOINT_EVERY_RANK);
  bool shards = train__shard_checkpoints(s);
  /* FULL_STATE_DICT: the optimizer's blocks gathered for the writer (every rank takes part);
   * SHARDED_STATE_DICT: each rank writes its own block, rank 0 the index */
  rh_status gathered = shards ? RH_OK : train__shard_whole_state(s, true);
  if (gathered != RH_OK) return gathered;
  double *rows = cfg->real ? gather_rows(s) : NULL; /* every rank takes part */
  if (cfg->real && !rows) return RH_ERR_NOMEM;
  char path[1024];
  if (epoch_end) snprintf(path, sizeof path, "%s/checkpoint-%d.bin", cfg->checkpoint_dir, (int)s->pos.epoch + 1);
  else snprintf(path, sizeof path, "%s/checkpoint-step-%ld.bin", cfg->checkpoint_dir, (long)s->pos.global_step);
  int err = shards ? train__shard_write(s, path) : 0;
  if (!err && writer) err = write_file(s, epoch_end, path, rows);
  free(rows);
  /* a writer's I/O error is the job's: every rank learns it at once (at no simulated cost), and
   * none waits for the next collective to time out */
  int *errs = calloc((size_t)s->size, sizeof(int));
  rh_status st = errs ? rh_check_allgather(s->ctx, &err, sizeof err, errs) : RH_ERR_NOMEM;
  for (int r = 0; st == RH_OK && r < s->size; r++) {
    if (!errs[r]) continue;
    rh_train_result *res = s->res;
    if (res->error == RH_OK) {
      res->error = RH_ERR_IO;
      res->error_rank = r;
      snprintf(res->error_detail, sizeof res->error_detail, "rank %d cannot write the checkpoint %.900s: %s",
               r, path, strerror(errs[r]));
    }
    st = RH_ERR_IO;
  }
  free(errs);
  if (st == RH_OK && shards) /* every rank writes its block at once (hybrid: one node's ranks) */
    st = rh_storage_io(s->ctx, (train__shard_writer(s) ? train__state_bytes(s) / train__shard_degree(s) : 0) +
                                   (writer ? sizeof(ckpt_header) : 0), true);
  if (st != RH_OK || !writer) return st;
  if (!shards) st = rh_storage_io(s->ctx, train__state_bytes(s) + sizeof(ckpt_header), true);
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

/* Reads the checkpoint at `path` into the state (its ranks' metric sums into *rows, the caller
 * frees); 0, -1 when it is absent, -2 when it is damaged or of another model (the state is then
 * left untouched). */
static int read_file(rank_state *s, const char *path, ckpt_header *out, double **rows) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  ckpt_header h = {0};
  ckpt_evidence parts;
  size_t nstate = s->cfg->real ? rh_optimizer_state_count(&s->opt) : 0;
  size_t np = s->cfg->real ? s->nparams : 0, ne = 0;
  float *p = malloc(np * sizeof(float) + 1), *o = malloc(nstate * sizeof(float) + 1);
  unsigned char *ev = NULL;
  bool ok = p && o && fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, CKPT_MAGIC, 8) == 0 &&
            h.nparams == np && h.nstate == nstate && h.nranks < (1u << 24) &&
            h.nshards < (1u << 24) &&
            h.ninvolved < (1u << 24) && (s->involved || h.ninvolved == 0);
  if (ok) {
    ne = evidence_parts(s, &parts, (long)h.ninvolved);
    ev = malloc(ne);
  }
  bool here = ok && h.nshards == 0; /* the floats in this file, not in shards beside it */
  ok = ok && ev && h.nevidence == ne && (!here || (fread(p, sizeof(float), np, f) == np &&
                                                  fread(o, sizeof(float), nstate, f) == nstate)) &&
       fread(ev, 1, ne, f) == ne;
  double *r = ok ? calloc(3 * h.nranks + 1, sizeof(double)) : NULL;
  ok = ok && r && fread(r, 3 * sizeof(double), h.nranks, f) == h.nranks && fgetc(f) == EOF;
  fclose(f);
  ok = ok && (h.nshards == 0 || train__shard_read(s, path, h.nshards, p, o));
  if (ok) {
    free(*rows);
    *rows = r;
  } else {
    free(r);
  }
  if (ok) { /* only a whole, matching file replaces the state */
    if (np) memcpy(s->params, p, np * sizeof(float)); /* a timing model has neither */
    if (nstate) memcpy(s->opt.state, o, nstate * sizeof(float));
    s->opt.steps = h.opt_steps;
    memcpy(&s->pos, h.position, sizeof s->pos);
    if (s->recording) evidence_unpack(s, ev, (long)h.ninvolved); /* a replay for the resume check keeps its own */
    *out = h;
  } else if (memcmp(h.magic, "RHCKPT", 6) == 0 && memcmp(h.magic, CKPT_MAGIC, 8) != 0) {
    fprintf(stderr, "rehearsal: %s was written by another version of rehearsal (%.7s, this one "
                    "reads %s): run the job again without --resume\n", path, h.magic, CKPT_MAGIC);
  } else {
    fprintf(stderr, "rehearsal: %s is damaged or not a checkpoint of this model\n", path);
  }
  free(p);
  free(o);
  free(ev);
  return ok ? 0 : -2;
}

int train__checkpoint_read(rank_state *s, const char *path, int *epoch, double **rows, int *nrows) {
  ckpt_header h;
  int rc = read_file(s, path, &h, rows);
  *nrows = rc < 0 ? 0 : (int)h.nranks;
  *epoch = rc < 0 ? -1 : h.epoch;
  return rc;
}

/* Reads checkpoint-EPOCH, or with epoch < 0 the one of the most steps; returns the epoch it
 * holds, -1 when there is none, -2 when it is damaged. */
static int read_checkpoint(rank_state *s, int epoch, double **rows, int *nrows) {
  char path[1024], best[1024] = "";
  const char *dir = s->cfg->checkpoint_dir;
  if (epoch >= 0) {
    snprintf(path, sizeof path, "%s/checkpoint-%d.bin", dir, epoch);
    int e, rc = train__checkpoint_read(s, path, &e, rows, nrows);
    return rc < 0 ? rc : e;
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
    size_t len = strlen(de->d_name); /* a shard beside its index, or a write's temporary: not one */
    if ((!at_end && !mid) || len < 4 || strcmp(de->d_name + len - 4, ".bin") != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    FILE *f = fopen(path, "rb");
    ckpt_header peek;
    bool got = f && fread(&peek, sizeof peek, 1, f) == 1 && memcmp(peek.magic, CKPT_MAGIC, 8) == 0;
    if (f) fclose(f);
    /* global steps; a damaged file goes by its name, so that a damaged newest one is an error
     * and not a silent start from an older one */
    double steps = got ? peek.position[3] + (peek.at_end ? 0.5 : 0)
                       : at_end ? (double)e * (double)s->steps_per_epoch + 0.5 : (double)g;
    if (steps > most) {
      most = steps;
      snprintf(best, sizeof best, "%s", path);
    }
  }
  if (d) closedir(d);
  if (!best[0]) return -1;
  int e, rc = train__checkpoint_read(s, best, &e, rows, nrows);
  return rc < 0 ? rc : e;
}

static rh_status restore(rank_state *s, int which, int *found);

rh_status train__restore(rank_state *s, int which, int *found) {
  rh_trace_begin(s->ctx, "checkpoint", "restore from the checkpoint");
  rh_status st = restore(s, which, found);
  rh_trace_end(s->ctx);
  return st;
}

static rh_status restore(rank_state *s, int which, int *found) {
  train_position start = {0};
  double *rows = NULL;
  int nrows = 0;
  int32_t epoch = s->rank == 0 ? read_checkpoint(s, which, &rows, &nrows) : 0;
  /* every rank learns first whether rank 0 could read it */
  rh_status st = rh_broadcast(s->ctx, &epoch, 1, RH_INT32, 0);
  if (st != RH_OK || epoch == -2) free(rows);
  if (st != RH_OK) return st;
  if (epoch == -2) {
    snprintf(s->res->error_detail, sizeof s->res->error_detail,
             "the newest checkpoint in %s is damaged", s->cfg->checkpoint_dir);
    return RH_ERR_IO;
  }
  if (epoch < 0 && s->rank == 0) s->pos = start; /* none: from the start */
  if (epoch >= 0 && s->rank == 0) st = rh_storage_io(s->ctx, train__state_bytes(s), false);
  if (st == RH_OK) st = broadcast_state(s);
  if (st == RH_OK && epoch >= 0 && s->recording) st = share_evidence(s, rows, nrows);
  free(rows);
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

static void count_commit(rank_state *s, double dt, int epoch, bool result);

static rh_status evidence_restore(rh_ctx *ctx, void *obj) {
  evidence *ev = obj;
  rh_trace_instant(ctx, "elastic", "restored the last commit");
  for (int i = 0; i < ev->n; i++) memcpy(ev->region[i].live, ev->region[i].saved, ev->region[i].bytes);
  /* the commit restored to took its time (rank 0's result kept it: it is not restored) */
  count_commit(ev->s, ev->s->commit_dt, ev->s->commit_epoch, false);
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
  unsigned char *all = malloc(n + 1);
  rh_status st = all ? RH_OK : RH_ERR_NOMEM;
  for (int i = 0; st == RH_OK && i < ev->n; i++) {
    memcpy(all + off, ev->region[i].live, ev->region[i].bytes);
    off += ev->region[i].bytes;
  }
  if (st == RH_OK) st = rh_check_broadcast(ctx, all, n);
  off = 0;
  train_evidence *live = &ev->s->ev;
  double own[3] = {live->epoch_loss, live->epoch_correct, live->epoch_samples};
  for (int i = 0; st == RH_OK && i < ev->n; i++) {
    memcpy(ev->region[i].live, all + off, ev->region[i].bytes);
    off += ev->region[i].bytes;
  }
  /* a rank's sums of its own samples' loss stay its own */
  live->epoch_loss = own[0];
  live->epoch_correct = own[1];
  live->epoch_samples = own[2];
  free(all);
  return st;
}

static const rh_state_handler evidence_handler = {
    .save = evidence_save, .restore = evidence_restore, .sync = evidence_sync};

/* A commit's time where it belongs: the epoch in progress, or the row of the epoch it ended
 * (and rank 0's copy of the row in the result). */
static void count_commit(rank_state *s, double dt, int epoch, bool result) {
  if (epoch < 0) {
    s->ev.now.commit += dt;
    return;
  }
  if (!s->recording || epoch > s->epochs) return;
  s->epoch_stats[epoch].commit += dt;
  if (result && s->rank == 0 && epoch < s->res->capacity) s->res->epochs_stats[epoch].commit += dt;
}

rh_status train__commit(rank_state *s, int epoch) {
  /* the mistake commits nothing; a replay after the run (the resume check) has no state */
  if ((s->cfg->mistakes & RH_MISTAKE_NO_COMMIT) || !s->state) return RH_OK;
  double t0 = rh_time(s->ctx);
  rh_trace_begin_at(s->ctx, "commit", "commit", t0);
  if (s->cfg->real) s->commit_hash = train__fnv(s->params, s->nparams * sizeof(float));
  rh_status st = train__shard_whole_state(s, true);
  if (st == RH_OK) st = rh_state_commit(s->state);
  /* the saved state cannot hold its own commit's time: a restore adds it back */
  s->commit_dt = rh_time(s->ctx) - t0;
  rh_trace_end_at(s->ctx, t0 + s->commit_dt);
  s->commit_epoch = epoch;
  count_commit(s, s->commit_dt, epoch, true);
  if (s->rank == 0) s->res->commits++;
  return st;
}

void train__commit_charged(rank_state *s) {
  count_commit(s, s->commit_dt, -1, true);
  if (s->rank == 0) s->res->commits++;
}

/* The world's rank and size, and what depends on them: the lr schedule (rescaled, or not by
 * mistake), the steps per epoch, the stop step, the sampler's shard after a reset. */
void train__refresh_world(rank_state *s, bool reset) {
  const rh_train_config *cfg = s->cfg;
  s->rank = rh_rank(s->ctx);
  s->size = rh_size(s->ctx);
  s->local_size = rh_local_size(s->ctx);
  s->last = s->rank == s->size - 1 && s->size > 1;
  double factor = rh_recipe_lr_factor(cfg->lr_scaling, s->size, s->local_size);
  s->recipe_lr = (rh_lr_schedule){.initial_lr = cfg->base_lr * factor, .size = s->size,
                                  .warmup_epochs = cfg->warmup_epochs,
                                  .decay_epochs = cfg->decay_epochs, .ndecay = cfg->ndecay,
                                  .decay_factor = cfg->decay_factor};
  /* the program's own lr: the recipe's, unless it forgot to scale it, or (the reset callback
   * missing) it keeps the lr of the world it started in */
  if (!reset || !(cfg->mistakes & RH_MISTAKE_LR_NOT_RESCALED)) s->used_lr = s->recipe_lr;
  if (cfg->mistakes & RH_MISTAKE_NO_LR_SCALING) s->used_lr.initial_lr = cfg->base_lr;
  s->steps_per_epoch = rh_recipe_steps_per_epoch(cfg->steps_rule, cfg->train_samples, cfg->batch, s->size);
  s->last_batch = rh_recipe_last_batch(cfg->steps_rule, cfg->train_samples, cfg->batch, s->size);
  /* recipe.steps are the job's global steps; StopAtStepHook's are divided by the workers */
  s->last_step = cfg->steps > 0 ? cfg->steps : rh_recipe_last_step(cfg->stop_at_step, s->size);
  /* Horovod's ElasticSampler.reset: the shard is cut again for the new world */
  if (reset && !(cfg->mistakes & RH_MISTAKE_SAMPLER_NOT_RESET)) s->shard_epoch = -1;
  if (s->size < s->ev.smallest || s->ev.smallest == 0) s->ev.smallest = s->size;
  if (s->size > s->ev.largest) s->ev.largest = s->size;
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
  return s->run_epochs(s, s->epochs);
}

rh_status train__elastic(rank_state *s, train_epochs_fn run) {
  s->run_epochs = run;
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
  if (s->rank == 0) s->res->state_bytes = train__state_bytes(s);
  /* every rank starts from the same seed; the first sync hands rank 0's state to all */
  if (st == RH_OK && cfg->real) {
    initial_params(cfg, s->params, cfg->seed);
    s->commit_hash = train__fnv(s->params, s->nparams * sizeof(float)); /* what the first sync saves */
  }
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
  /* a peer's failure comes out of the elastic loop only when the reset itself failed (on real
   * processes, no driver formed a new world): nothing mends that, and the job stops here */
  if (train__peer_failure(st) && s->res->error == RH_OK) {
    s->res->error = st;
    s->res->error_rank = s->rank;
    snprintf(s->res->error_detail, sizeof s->res->error_detail, "%s",
             rh_last_error(ctx)[0] ? rh_last_error(ctx) : rh_status_string(st));
  }
  /* the evidence lives on the stack of this call: the state must not use it afterwards */
  rh_state_free(s->state);
  s->state = NULL;
  evidence_free(&ev);
  return st;
}
