/*
 * world.c: a world of the SimGrid backend as its members share it: who is in it and who died,
 * the messages its members have posted, the rendezvous points they meet at, and abandoning it
 * after a failure.  A world that a member abandons releases everyone blocked in it at once: its
 * rendezvous points are woken, and for every message still posted the complementary operation is
 * posted and cancelled at once, which wakes its waiter (as a closed connection would).  The
 * backend's operations (backend.c), the job's driver (driver.c) and the fault injector
 * (faults.c) all use it, and it uses none of them.
 */
#include "sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sim__member_dead(const sim_world *w, int rank) {
  const sim_worker *m = w->members[rank];
  return w->dead[rank] || !m || m->dead || !sg_host_is_on(m->host);
}

bool sim__world_may_have_dead(const sim_world *w) { return w->job->losses > 0; }

bool sim__world_any_dead(const sim_world *w) {
  if (!sim__world_may_have_dead(w)) return false;
  for (int r = 0; r < w->topo.size; r++)
    if (sim__member_dead(w, r)) return true;
  return false;
}

/* ---- the world's posted messages ---------------------------------------------------------- */

void sim__post_add(sim_world *w, rh_p2p *r) {
  r->world = w;
  r->prev = NULL;
  r->next = w->pending;
  if (w->pending) w->pending->prev = r;
  w->pending = r;
}

void sim__post_remove(rh_p2p *r) {
  if (!r->world) return;
  if (r->prev) r->prev->next = r->next;
  else r->world->pending = r->next;
  if (r->next) r->next->prev = r->prev;
  r->world = NULL;
}

/* Wakes the waiters of the posted messages (all, or the naps and those with rank `dead`): the
 * complementary operation is posted on each mailbox and cancelled at once; a nap's semaphore is
 * released. */
static void sweep(sim_world *w, int dead) {
  size_t n = 0;
#define SWEPT(r) (dead < 0 || (r)->nap_sem || (r)->peer == dead)
  for (rh_p2p *r = w->pending; r; r = r->next) n += SWEPT(r);
  if (!n) return;
  /* copied first: waking a waiter lets it run and unlist its message while this loop goes on */
  struct { char box[64]; bool recv; sg_sem_t nap; } *todo = calloc(n, sizeof *todo);
  if (!todo) return;
  size_t k = 0;
  for (rh_p2p *r = w->pending; r && k < n; r = r->next)
    if (SWEPT(r)) {
      memcpy(todo[k].box, r->box, sizeof r->box);
      todo[k].nap = r->nap_sem; /* a worker's: it lasts as long as the job */
      todo[k++].recv = r->is_recv;
    }
  static char nothing; /* what a cancelled message carries: it is never delivered */
  for (size_t i = 0; i < k; i++) {
    if (todo[i].nap) {
      sg_sem_release(todo[i].nap);
      continue;
    }
    void *ignored = NULL;
    sg_mailbox_t mb = sg_mailbox_by_name(todo[i].box);
    sg_comm_t c = todo[i].recv ? sg_mailbox_put_async(mb, &nothing, 0) : sg_mailbox_get_async(mb, &ignored);
    sg_comm_wait_for(c, 0);
  }
  free(todo);
#undef SWEPT
}

/* Wakes the members blocked on the world's rendezvous points, to look again at why.  Waking
 * lets them run, leave and free their point: what to release is gathered first. */
static void wake_points(sim_world *w) {
  size_t n = 0;
  for (size_t i = 0; i < w->naudits; i++) n += (size_t)w->audits[i]->waiting;
  if (!n) return;
  audit_point **points = calloc(n, sizeof *points);
  if (!points) return;
  size_t k = 0;
  for (size_t i = 0; i < w->naudits; i++)
    for (int j = 0; j < w->audits[i]->waiting; j++) {
      points[k] = w->audits[i];
      points[k++]->pins++;
    }
  for (size_t i = 0; i < k; i++) sim__point_release(w, points[i]);
  free(points);
}

void sim__abort_world(sim_world *w) {
  if (!w || w->aborted) return;
  w->aborted = true;
  wake_points(w);
  sweep(w, -1);
}

/* A sweep posted from a GPU host: the launcher, where the injector runs, has no route. */
typedef struct sweep_job {
  sim_world *w;
  int dead;
} sweep_job;

static void sweeper_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  sweep_job *j = sg_actor_self_get_data();
  sweep(j->w, j->dead);
  free(j);
}

void sim__member_died(sim_world *w, int rank) {
  if (!w || w->dead[rank]) return;
  w->dead[rank] = 1;
  wake_points(w); /* a rendezvous waiting for it fails with RH_ERR_PEER_DEAD */
  /* and so do messages to or from it, and coarse-grain steps sleeping through the ring */
  for (int r = 0; r < w->topo.size; r++) {
    if (r == rank || sim__member_dead(w, r)) continue;
    sweep_job *j = malloc(sizeof *j);
    if (!j) return;
    *j = (sweep_job){w, rank};
    sg_actor_t a = sg_actor_init("sweeper", w->members[r]->host);
    sg_actor_set_data(a, j);
    sg_actor_start(a, sweeper_main, 0, NULL);
    return;
  }
}

/* ---- rendezvous points -------------------------------------------------------------------- */

static void point_free(audit_point *a) {
  sg_sem_destroy(a->all_came);
  free(a->first_record);
  free(a->records);
  free(a->arrived);
  free(a);
}

/* A key's bucket: mixed, as a group's id sits in the key's high half. */
static size_t bucket_of(uint64_t key, size_t nbuckets) {
  return (size_t)rh__mix64(key) & (nbuckets - 1);
}

/* Lists a in the world's index, grown to twice as many buckets as points. */
static bool index_add(sim_world *w, audit_point *a) {
  if (2 * (w->naudits + 1) > w->nbuckets) {
    size_t nb = w->nbuckets ? 2 * w->nbuckets : 64;
    audit_point **grown = calloc(nb, sizeof *grown);
    if (!grown) return false;
    for (size_t i = 0; i < w->naudits; i++) {
      audit_point *p = w->audits[i];
      size_t b = bucket_of(p->key, nb);
      p->hnext = grown[b];
      grown[b] = p;
    }
    free(w->index);
    w->index = grown;
    w->nbuckets = nb;
  }
  size_t b = bucket_of(a->key, w->nbuckets);
  a->hnext = w->index[b];
  w->index[b] = a;
  return true;
}

static void index_remove(sim_world *w, audit_point *a) {
  for (audit_point **p = &w->index[bucket_of(a->key, w->nbuckets)]; *p; p = &(*p)->hnext)
    if (*p == a) {
      *p = a->hnext;
      return;
    }
}

static void point_drop(sim_world *w, audit_point *a) {
  if (a->left < a->n || a->pins > 0) return;
  index_remove(w, a);
  w->audits[a->slot] = w->audits[--w->naudits];
  w->audits[a->slot]->slot = a->slot;
  if (a->n == w->topo.size && w->nspare < (int)(sizeof w->spare_arrived / sizeof w->spare_arrived[0])) {
    w->spare_arrived[w->nspare++] = a->arrived;
    a->arrived = NULL;
  }
  point_free(a);
}

void sim__point_leave(sim_world *w, audit_point *a) {
  a->left++;
  point_drop(w, a);
}

/* Releases one waiter of a pinned point, then unpins it: the release is a simcall during which
 * the woken members may run and leave, so the point (and its semaphore) is freed only after. */
void sim__point_release(sim_world *w, audit_point *a) {
  sg_sem_release(a->all_came);
  a->pins--;
  point_drop(w, a);
}

/* The world's point `key`, made on first use for n members bringing `bytes` each. */
audit_point *sim__point_get(sim_world *w, uint64_t key, int n, size_t bytes, const int *ranks) {
  if (w->nbuckets)
    for (audit_point *p = w->index[bucket_of(key, w->nbuckets)]; p; p = p->hnext)
      if (p->key == key) return p;
  if (w->naudits == w->capaudits) {
    size_t cap = w->capaudits ? 2 * w->capaudits : 16;
    audit_point **grown = realloc(w->audits, cap * sizeof *grown);
    if (!grown) return NULL;
    w->audits = grown;
    w->capaudits = cap;
  }
  audit_point *a = calloc(1, sizeof *a);
  if (a && n == w->topo.size && w->nspare > 0) {
    a->arrived = w->spare_arrived[--w->nspare];
    memset(a->arrived, 0, (size_t)n);
  } else if (a) {
    a->arrived = calloc((size_t)n, 1);
  }
  if (a && bytes) a->first_record = malloc(bytes);
  if (!a || !a->arrived || (bytes && !a->first_record)) {
    if (a) {
      free(a->arrived);
      free(a->first_record);
    }
    free(a);
    return NULL;
  }
  a->key = key;
  a->n = n;
  a->bytes = bytes;
  a->ranks = ranks;
  a->max_value = -INFINITY;
  for (int i = 0; i < RH_AUDIT_MAX_VALUES; i++) a->maxima[i] = -INFINITY;
  a->all_ok = true;
  a->first = -1;
  a->all_came = sg_sem_init(0);
  if (!index_add(w, a)) {
    point_free(a);
    return NULL;
  }
  a->slot = w->naudits;
  w->audits[w->naudits++] = a;
  return a;
}

void sim__free_world(sim_world *w) {
  /* what is still listed was posted by actors that died waiting (their payloads are the
   * receivers' or SimGrid's) */
  for (rh_p2p *r = w->pending, *next; r; r = next) {
    next = r->next;
    free(r);
  }
  for (size_t i = 0; i < w->naudits; i++) point_free(w->audits[i]); /* left by absent members */
  for (int i = 0; i < w->nspare; i++) free(w->spare_arrived[i]);
  free(w->audits);
  free(w->index);
  free(w->prices);
  free(w->slots);
  free(w->members);
  free(w->dead);
  rh_topology_free(&w->topo);
  free(w);
}
