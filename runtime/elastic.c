/*
 * elastic.c: Horovod's elastic training (horovod/common/elastic.py) on any target.  A state is a
 * list of registered buffers and handlers, each with a saved copy on every rank.  commit = save +
 * a broadcast of rank 0's view of host changes; rh_elastic_run is the decorator's loop:
 *
 *   sync ── fn ──> done
 *    ^      │ a peer failed (PEER_DEAD, TIMEOUT, ABORTED)     restore, then reset, callbacks
 *    │      │ hosts changed (at a commit)                     reset, callbacks (sync unless
 *    └──────┘                                                  hosts were only removed)
 *
 * The reset itself (leaving the broken world, joining the next one) is the backend's rendezvous:
 * on the simulator its elastic driver, on real processes `rehearsal elastic` and a communicator
 * of the survivors.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct state_entry {
  char name[48];
  void *buf;   /* registered buffer (NULL: timing-only) */
  size_t count;
  rh_dtype dtype;
  void *saved; /* host copy of buf at the last save (NULL for timing-only and handlers) */
  const rh_state_handler *handler;
  void *obj;
} state_entry;

typedef struct reset_callback {
  void (*fn)(rh_ctx *ctx, void *arg);
  void *arg;
} reset_callback;

struct rh_state {
  rh_ctx *ctx;
  state_entry *entries;
  int n, cap;
  reset_callback *callbacks;
  int ncallbacks;
  double last_update; /* the host change this state last acted on (Horovod's timestamp) */
  bool removed_only;  /* the change being acted on only removed hosts: no sync needed */
  double commit_time; /* when the last save finished, for the reports */
  long commit_steps;  /* the steps this rank had begun by then */
};

rh_state *rh_state_create(rh_ctx *ctx) {
  rh_state *s = calloc(1, sizeof *s);
  if (s) s->ctx = ctx;
  return s;
}

void rh_state_free(rh_state *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) free(s->entries[i].saved);
  free(s->entries);
  free(s->callbacks);
  free(s);
}

static state_entry *add_entry(rh_state *s, const char *name) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    state_entry *grown = realloc(s->entries, (size_t)cap * sizeof *grown);
    if (!grown) return NULL;
    s->entries = grown;
    s->cap = cap;
  }
  state_entry *e = &s->entries[s->n++];
  *e = (state_entry){0};
  snprintf(e->name, sizeof e->name, "%s", name ? name : "");
  return e;
}

rh_status rh_state_register(rh_state *s, const char *name, void *buf, size_t count,
                            rh_dtype dtype) {
  if (!s || rh_dtype_size(dtype) == 0) return RH_ERR_INVALID;
  void *saved = NULL;
  if (buf) {
    saved = malloc(count * rh_dtype_size(dtype) + 1);
    if (!saved) return RH_ERR_NOMEM;
    rh_status st = rh_tensor_read(s->ctx, saved, buf, count * rh_dtype_size(dtype));
    if (st != RH_OK) {
      free(saved);
      return st;
    }
  }
  state_entry *e = add_entry(s, name);
  if (!e) {
    free(saved);
    return RH_ERR_NOMEM;
  }
  e->buf = buf;
  e->count = count;
  e->dtype = dtype;
  e->saved = saved;
  return RH_OK;
}

rh_status rh_state_register_handler(rh_state *s, const char *name, const rh_state_handler *h,
                                    void *obj) {
  if (!s || !h || !h->save || !h->restore || !h->sync) return RH_ERR_INVALID;
  state_entry *e = add_entry(s, name);
  if (!e) return RH_ERR_NOMEM;
  e->handler = h;
  e->obj = obj;
  return h->save(s->ctx, obj); /* like Horovod's handlers, which copy the state they are given */
}

rh_status rh_state_on_reset(rh_state *s, void (*fn)(rh_ctx *ctx, void *arg), void *arg) {
  if (!s || !fn) return RH_ERR_INVALID;
  reset_callback *grown = realloc(s->callbacks, (size_t)(s->ncallbacks + 1) * sizeof *grown);
  if (!grown) return RH_ERR_NOMEM;
  s->callbacks = grown;
  s->callbacks[s->ncallbacks++] = (reset_callback){fn, arg};
  return RH_OK;
}

static size_t entry_bytes(const state_entry *e) { return e->count * rh_dtype_size(e->dtype); }

/* ---- save, restore, sync ----------------------------------------------------------------- */

rh_status rh_state_save(rh_state *s) {
  rh_ctx *ctx = s->ctx;
  rh_status st = RH_OK;
  double bytes = 0;
  for (int i = 0; i < s->n && st == RH_OK; i++) {
    state_entry *e = &s->entries[i];
    if (e->handler) st = e->handler->save(ctx, e->obj);
    else if (e->buf) st = rh_tensor_read(ctx, e->saved, e->buf, entry_bytes(e));
    if (!e->handler) bytes += (double)entry_bytes(e);
  }
  /* the copy costs its bytes at the commit bandwidth where time is modelled */
  if (st == RH_OK && ctx->elastic && ctx->elastic->commit_bw > 0 && ctx->ops->charge)
    st = ctx->ops->charge(ctx, bytes / ctx->elastic->commit_bw);
  if (st == RH_OK) {
    s->commit_time = rh_time(ctx);
    s->commit_steps = ctx->steps_begun;
  }
  return st;
}

rh_status rh_state_restore(rh_state *s) {
  rh_status st = RH_OK;
  for (int i = 0; i < s->n && st == RH_OK; i++) {
    state_entry *e = &s->entries[i];
    if (e->handler) st = e->handler->restore(s->ctx, e->obj);
    else if (e->buf) st = rh_tensor_write(s->ctx, e->buf, e->saved, entry_bytes(e));
  }
  return st;
}

rh_status rh_state_sync(rh_state *s) {
  rh_ctx *ctx = s->ctx;
  if (ctx->ops->progress) ctx->ops->progress(ctx, RH_PHASE_SYNC);
  double began = rh_time(ctx);
  rh_status st = RH_OK;
  for (int i = 0; i < s->n && st == RH_OK; i++) {
    state_entry *e = &s->entries[i];
    if (e->handler) st = e->handler->sync(ctx, e->obj);
    else st = rh_broadcast(ctx, e->buf, e->count, e->dtype, 0);
  }
  if (st == RH_OK) st = rh_state_save(s);
  if (st == RH_OK && ctx->rank == 0) rh__log_rank(ctx, RH_EV_SYNCED, RH_OK, began, 0, NULL);
  return st;
}

/* ---- commit ------------------------------------------------------------------------------- */

rh_status rh_state_commit(rh_state *s) {
  rh_ctx *ctx = s->ctx;
  if (ctx->ops->progress) ctx->ops->progress(ctx, RH_PHASE_COMMIT);
  rh_status st = rh_state_save(s);
  if (st != RH_OK) return st;
  /* Horovod's check_host_updates: rank 0's view of host changes reaches every rank, so that
   * every rank raises the interrupt at the same commit */
  double view[3] = {s->last_update, s->last_update, 0};
  if (ctx->rank == 0 && ctx->ops->host_updates) {
    double stamp = 0;
    int kind = 0;
    ctx->ops->host_updates(ctx, &stamp, &kind);
    if (stamp > s->last_update) {
      view[1] = stamp;
      view[2] = kind;
    }
  }
  st = rh_broadcast(ctx, view, 3, RH_FLOAT64, 0);
  if (st != RH_OK) return st;
  s->last_update = view[1];
  if (view[1] > view[0]) {
    s->removed_only = (int)view[2] == RH_HOSTS_REMOVED;
    snprintf(ctx->last_error, sizeof ctx->last_error, "hosts were %s",
             (int)view[2] == RH_HOSTS_REMOVED ? "removed"
             : (int)view[2] == RH_HOSTS_ADDED ? "added" : "added and removed");
    return RH_ERR_HOSTS_CHANGED;
  }
  return RH_OK;
}

/* ---- the run loop ----------------------------------------------------------------------- */

static bool peer_failure(rh_status st) {
  return st == RH_ERR_PEER_DEAD || st == RH_ERR_TIMEOUT || st == RH_ERR_ABORTED;
}

rh_status rh_elastic_run(rh_ctx *ctx, rh_state *s, rh_elastic_fn fn, void *arg) {
  if (!s || !fn || s->ctx != ctx) return RH_ERR_INVALID;
  bool skip_sync = false;
  for (;;) {
    rh_status st = skip_sync ? RH_OK : rh_state_sync(s);
    if (st == RH_OK) st = fn(ctx, s, arg);
    if (st == RH_OK) return RH_OK;
    if (ctx->inflight > 0) {
      snprintf(ctx->last_error, sizeof ctx->last_error,
               "the training function returned with %u requests not waited", ctx->inflight);
      return RH_ERR_INVALID;
    }
    bool failure = peer_failure(st);
    if (failure && ctx->elastic) {
      double rolled = (double)(ctx->steps_begun - s->commit_steps);
      st = rh_state_restore(s);
      if (st != RH_OK) return st;
      rh__log_rank(ctx, RH_EV_RESTORED, RH_OK, s->commit_time, rolled, NULL);
      skip_sync = false;
    } else if (st == RH_ERR_HOSTS_CHANGED && ctx->elastic) {
      skip_sync = s->removed_only;
    } else {
      return st; /* a fixed-size job, or a failure no reset can mend */
    }
    if (!ctx->ops->rendezvous) return RH_ERR_UNSUPPORTED;
    if (ctx->rank == 0) rh__log_rank(ctx, RH_EV_RESET, RH_OK, failure ? 1 : 2, skip_sync, NULL);
    if (ctx->ops->progress) ctx->ops->progress(ctx, RH_PHASE_RENDEZVOUS);
    st = ctx->ops->rendezvous(ctx);
    if (st != RH_OK) return st;
    for (int i = 0; i < s->ncallbacks; i++) s->callbacks[i].fn(ctx, s->callbacks[i].arg);
  }
}
