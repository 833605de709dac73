/*
 * step.c: a step's kernels priced, then played behind the host that issues them.  The host
 * starts the step with its own work (host_step), then issues one kernel every launch_us
 * (backward_launch_us in backward); the GPU runs each kernel once it is issued and the one before
 * has ended:
 *
 *     host   |--work--|k1|k2|k3|k4|k5|k6|...           one kernel issued every launch_us
 *     GPU             [ k1 ][k2]  [k3][k4]  ...         k3 waits for its launch: bound by launch
 *
 * so a large batch keeps the GPU busy while the host runs ahead, and a small one leaves it
 * waiting: the step takes the longer of the kernels' sum and the launches'.  Mixed precision's
 * scaler reads its overflow flag before the update (a synchronisation), and the step ends when
 * the GPU does (the next step's host work does not overlap it).  Each layer's time is what its
 * kernels add to the GPU's timeline, so the simulation sees gradients become ready as they would.
 */
#include "kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const rh_bound_names[] = {"compute", "memory", "launch"};

/* A kernel's arithmetic time: its GEMM tiles (or Winograd's, where cheaper), its attention rate,
 * or its FLOPs at the best rate (a layer without a shape). */
static double compute_seconds(const rh_kernel_gpu *g, const rh_kernel *k) {
  double eff = g->gemm_efficiency > 0 ? g->gemm_efficiency : 1;
  if (k->kind == RH_KERNEL_ATTENTION)
    return rh_attention_seconds(g, k->flops, k->seq, k->causal, k->backward);
  if (k->kind != RH_KERNEL_GEMM) return k->flops > 0 ? k->flops / (g->peak * eff) : 0;
  double t = rh_gemm_seconds(g, k->m, k->n, k->k, k->count);
  if (k->conv && g->conv_efficiency > 0) t /= g->conv_efficiency;
  if (k->winograd && !g->tensor_cores && g->memory_bw > 0) /* kernels.h: Winograd's */
    t = fmin(t, k->flops / 2.25 / (g->peak * eff) + 9 * k->bytes / g->memory_bw);
  return t;
}

void rh_kernels_price(const rh_kernel_gpu *g, rh_kernel_list *l) {
  for (int i = 0; i < l->n; i++) {
    rh_kernel *k = &l->v[i];
    double compute = compute_seconds(g, k);
    double memory = g->memory_bw > 0 ? k->bytes / g->memory_bw : 0;
    k->seconds = fmax(fmax(compute, memory), g->kernel_floor * k->launches);
    k->bound = compute >= memory ? RH_BOUND_COMPUTE : RH_BOUND_MEMORY;
  }
}

static bool times_alloc(rh_step_times *st, int nlayers, double batch) {
  *st = (rh_step_times){.batch = batch};
  size_t n = (size_t)(nlayers > 0 ? nlayers : 1);
  st->forward = calloc(n, sizeof *st->forward);
  st->backward = calloc(n, sizeof *st->backward);
  if (st->forward && st->backward) return true;
  rh_step_times_free(st);
  return false;
}

/* The GPU's timeline behind the host: each kernel's share of it, to its layer and phase. */
static void play(const rh_kernel_model *km, rh_kernel_list *l, rh_step_times *st) {
  const rh_framework *fw = &km->fw;
  double host = fw->host_step, gpu = fw->host_step;
  bool sync = km->scaler;
  for (int i = 0; i < l->n; i++) {
    rh_kernel *k = &l->v[i];
    if (sync && k->phase == RH_STEP_OPTIMIZER && (i == 0 || l->v[i - 1].phase != RH_STEP_OPTIMIZER))
      host = fmax(host, gpu); /* the scaler reads its overflow flag */
    double each = k->phase == RH_STEP_BACKWARD && fw->backward_launch > 0 ? fw->backward_launch
                                                                           : fw->launch;
    double start = fmax(gpu, host + each);
    double end = fmax(start + k->seconds, host + k->launches * each + k->seconds / k->launches);
    if (end - k->seconds > gpu + 1e-12) k->bound = RH_BOUND_LAUNCH; /* the GPU waited for it */
    double share = end - gpu;
    host += k->launches * each;
    gpu = end;
    st->gpu_busy += k->seconds;
    st->kernels++;
    st->launches += k->launches;
    st->by_bound[k->bound]++;
    if (k->phase == RH_STEP_OPTIMIZER || k->layer < 0) st->optimizer += share;
    else if (k->phase == RH_STEP_FORWARD) st->forward[k->layer] += share;
    else st->backward[k->layer] += share;
  }
  st->host = fw->host_step;
  st->total = gpu;
}

bool rh_step_price(const rh_kernel_model *km, double batch, rh_step_times *st,
                   rh_kernel_list *kernels) {
  rh_kernel_list own = {0}, *l = kernels ? kernels : &own;
  *l = (rh_kernel_list){0};
  if (!times_alloc(st, km->nlayers, batch)) return false;
  if (!rh_kernels_expand(km, batch, l)) {
    rh_kernel_list_free(l);
    rh_step_times_free(st);
    return false;
  }
  rh_kernels_price(&km->gpu, l);
  play(km, l, st);
  rh_kernel_list_free(&own);
  return true;
}

void rh_step_times_free(rh_step_times *st) {
  free(st->forward);
  free(st->backward);
  *st = (rh_step_times){0};
}

void rh_step_cache_init(rh_step_cache *c, const rh_kernel_model *km) {
  *c = (rh_step_cache){.km = km};
  pthread_mutex_init(&c->lock, NULL);
}

/* The priced step of `batch`, priced now if no rank has asked for it before. */
static const rh_step_times *lookup_or_price(rh_step_cache *c, double batch) {
  for (int i = 0; i < c->n; i++)
    if (c->entries[i]->batch == batch) return c->entries[i];
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 8;
    rh_step_times **v = realloc(c->entries, (size_t)cap * sizeof *v);
    if (!v) return NULL;
    c->entries = v;
    c->cap = cap;
  }
  rh_step_times *st = malloc(sizeof *st);
  if (!st || !rh_step_price(c->km, batch, st, NULL)) {
    free(st);
    return NULL;
  }
  c->entries[c->n++] = st;
  return st;
}

const rh_step_times *rh_step_cache_get(rh_step_cache *c, double batch) {
  pthread_mutex_lock(&c->lock);
  const rh_step_times *st = lookup_or_price(c, batch);
  pthread_mutex_unlock(&c->lock);
  return st;
}

void rh_step_cache_free(rh_step_cache *c) {
  for (int i = 0; i < c->n; i++) {
    rh_step_times_free(c->entries[i]);
    free(c->entries[i]);
  }
  free(c->entries);
  pthread_mutex_destroy(&c->lock);
  *c = (rh_step_cache){0};
}
