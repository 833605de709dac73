/*
 * kernels.c: see kernels.h.  The kernels come from the scenario's kernel model
 * (workload/kernels/), priced as a run prices them.
 */
#include "kernels.h"

#include <stdlib.h>

static const char *const phase_names[] = {"fwd", "bwd", "opt"};

static const char *layer_name(const rh_scenario *sc, int layer) {
  return layer >= 0 && layer < sc->model.nlayers ? sc->model.layers[layer].name : "(step)";
}

static void print_kernel(FILE *f, const rh_scenario *sc, const rh_kernel *k) {
  char shape[64] = "-";
  if (k->kind == RH_KERNEL_GEMM)
    snprintf(shape, sizeof shape, "%.0fx%.0fx%.0f", k->m, k->n, k->k);
  fprintf(f, "%-34s %-4s %-20s %-20s %8.0f %10.4f %10.3f %10.2f %-8s\n", layer_name(sc, k->layer),
          phase_names[k->phase], k->what, shape, k->count, k->flops / 1e9, k->bytes / 1e6,
          k->seconds * 1e6, rh_bound_names[k->bound]);
}

static void print_totals(FILE *f, const rh_scenario *sc, const rh_step_times *st) {
  fprintf(f, "# step %.4f ms for %.0f samples (%.1f samples/s): host %.3f ms, the GPU busy %.3f ms; "
          "optimizer %.3f ms\n", st->total * 1e3, st->batch, st->batch / st->total, st->host * 1e3,
          st->gpu_busy * 1e3, st->optimizer * 1e3);
  fprintf(f, "# %d kernels (%d launches): %d compute-bound, %d memory-bound, %d launch-bound; "
          "framework %s\n", st->kernels, st->launches, st->by_bound[RH_BOUND_COMPUTE],
          st->by_bound[RH_BOUND_MEMORY], st->by_bound[RH_BOUND_LAUNCH],
          sc->framework.name ? sc->framework.name : "pytorch (default)");
}

int rh_report_kernels(FILE *f, const rh_scenario *sc, double batch) {
  rh_step_times st;
  rh_kernel_list l;
  if (!rh_step_price(&sc->compute.km, batch, &st, &l)) return 1;
  fprintf(f, "# kernels of one step: %s, batch %.0f\n", sc->model.name ? sc->model.name : "model",
          batch);
  fprintf(f, "#%-33s %-4s %-20s %-20s %8s %10s %10s %10s %-8s\n", "layer", "pass", "kernel",
          "m x n x k", "count", "GFLOP", "MB", "us", "bound");
  for (int i = 0; i < l.n; i++) print_kernel(f, sc, &l.v[i]);
  print_totals(f, sc, &st);
  rh_kernel_list_free(&l);
  rh_step_times_free(&st);
  return 0;
}

/* One layer's kernels: how many, and what bounds them. */
static json_t *layer_json(const rh_scenario *sc, const rh_step_times *st, const rh_kernel_list *l,
                          int layer) {
  int bound[3] = {0};
  json_t *names = json_array();
  for (int i = 0; i < l->n; i++) {
    if (l->v[i].layer != layer) continue;
    bound[l->v[i].bound]++;
    json_array_append_new(names, json_pack("{s:s, s:s, s:f, s:s}", "kernel", l->v[i].what, "pass",
                                           phase_names[l->v[i].phase], "us",
                                           l->v[i].seconds * 1e6, "bound",
                                           rh_bound_names[l->v[i].bound]));
  }
  return json_pack("{s:s, s:f, s:f, s:{s:i, s:i, s:i}, s:o}", "layer", layer_name(sc, layer),
                   "forward_ms", st->forward[layer] * 1e3, "backward_ms", st->backward[layer] * 1e3,
                   "bound", "compute", bound[0], "memory", bound[1], "launch", bound[2], "kernels",
                   names);
}

json_t *rh_report_kernels_json_of(const rh_scenario *sc, const rh_step_times *st,
                                  const rh_kernel_list *l) {
  json_t *layers = json_array();
  for (int i = 0; i < sc->model.nlayers; i++) json_array_append_new(layers, layer_json(sc, st, l, i));
  return json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:{s:i, s:i, s:i}, s:o}",
                   "framework", sc->framework.name ? sc->framework.name : "pytorch",
                   "batch", st->batch, "step_ms", st->total * 1e3, "host_ms", st->host * 1e3,
                   "gpu_busy_ms", st->gpu_busy * 1e3, "optimizer_ms", st->optimizer * 1e3,
                   "kernels", st->kernels, "launches", st->launches, "bound", "compute",
                   st->by_bound[0], "memory", st->by_bound[1], "launch", st->by_bound[2],
                   "layers", layers);
}

json_t *rh_report_kernels_json(const rh_scenario *sc, double batch) {
  if (!sc->compute.kernels) return NULL;
  rh_step_times st;
  rh_kernel_list l;
  if (!rh_step_price(&sc->compute.km, batch, &st, &l)) return NULL;
  json_t *o = rh_report_kernels_json_of(sc, &st, &l);
  rh_kernel_list_free(&l);
  rh_step_times_free(&st);
  return o;
}
