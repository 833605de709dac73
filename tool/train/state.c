/*
 * state.c: the training state of a replay and where it goes: rank 0's initial parameters and
 * optimizer state broadcast to every rank (Horovod's broadcast_parameters and
 * broadcast_optimizer_state), rank 0's checkpoints, and a restart from one of them.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Rank 0's parameters and optimizer state reach every rank; with epoch, rank 0's epoch too. */
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

rh_status train__initialise(rank_state *s) {
  const rh_train_config *cfg = s->cfg;
  if (!cfg->real) return RH_OK;
  bool broadcast = !(cfg->mistakes & RH_MISTAKE_NO_INITIAL_BROADCAST);
  rh_model_init_params(&cfg->model, s->params, cfg->seed + (broadcast ? 0 : (uint64_t)s->rank));
  rh_status st = broadcast ? broadcast_state(s, NULL) : RH_OK;
  if (st == RH_OK && s->sparams) memcpy(s->sparams, s->params, s->nparams * sizeof(float));
  return train__failed(s, st, RH_CHECK_COLLECTIVES);
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

rh_status train__write_checkpoint(rank_state *s, int epoch) {
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

rh_status train__restore(rank_state *s, int which, int *start_epoch) {
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
