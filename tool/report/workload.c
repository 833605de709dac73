/*
 * workload.c: see workload.h.  MFU is the model's FLOPs (3 x the forward's: backward is twice the
 * forward, as PaLM's appendix B and Megatron count it; no recomputation) per second per GPU over
 * the dense peak of the run's precision.
 */
#include "workload.h"
#include "trust.h"
#include "kernels.h"

#include "compute_model.h"
#include "recompute.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double rh_workload_peak(const rh_scenario *sc) {
  if (sc->compute.peak > 0) return sc->compute.peak;
  return sc->compute.peaks[sc->model.precision];
}

/* The ranks a stage shards over, and FSDP's units of the model's layers (hybrid, full). */
static rh_shard_plan shard_plan(const rh_scenario *sc, rh_sharding stage) {
  rh_shard_plan p = {.stage = stage, .degree = rh_scenario_size(sc)};
  if (stage == RH_SHARD_HYBRID && sc->recipe.shard_group > 0)
    p.degree = sc->recipe.shard_group;
  else if (stage == RH_SHARD_HYBRID)
    p.degree = sc->cluster.gpus_per_node ? sc->cluster.gpus_per_node[0] : 1;
  if (stage >= RH_SHARD_HYBRID)
    rh_memory_units(sc->model.layers, sc->model.nlayers, rh_scenario_wrap_params(sc), &p.unit,
                    &p.root);
  /* no layer in a unit (a model of parameters alone): what FSDP would wrap is not known */
  p.units_unknown = stage >= RH_SHARD_HYBRID && p.unit == 0;
  return p;
}

void rh_workload_memory_as(const rh_scenario *sc, rh_sharding stage, rh_memory_use *m) {
  double acts = rh_recompute_activations((rh_recompute)sc->recipe.recompute, sc->model.layers,
                                         sc->model.nlayers);
  rh_shard_plan plan = shard_plan(sc, stage);
  rh_memory_estimate(sc->model.parameters, acts, sc->model.shaped, sc->recipe.micro_batch,
                     sc->model.precision, (rh_optimizer_kind)sc->recipe.optimizer,
                     sc->recipe.momentum, sc->recipe.framework == 1,
                     sc->settings.value[RH_SETTING_FUSION_THRESHOLD], &plan, m);
}

void rh_workload_memory(const rh_scenario *sc, rh_memory_use *m) {
  rh_workload_memory_as(sc, (rh_sharding)sc->recipe.state_sharding, m);
}

/* The least sharding from `from` on that fits, or -1. */
static int least_fitting(const rh_scenario *sc, int from, double capacity, rh_memory_use *m) {
  for (int s = from; s < RH_SHARD_COUNT; s++) {
    if (s == RH_SHARD_HYBRID && sc->cluster.nodes < 2) continue; /* one node: full's own */
    rh_workload_memory_as(sc, (rh_sharding)s, m);
    if (m->total <= capacity) return s;
  }
  return -1;
}

int rh_workload_sharding_that_fits(const rh_scenario *sc, double capacity, rh_memory_use *m,
                                   bool *checkpointing) {
  *checkpointing = false;
  int s = least_fitting(sc, sc->recipe.state_sharding + 1, capacity, m);
  if (s >= 0 || sc->recipe.recompute == RH_RECOMPUTE_FULL || !sc->model.shaped ||
      !rh_recompute_has_blocks(sc->model.layers, sc->model.nlayers))
    return s;
  rh_scenario wrapped = *sc; /* read only: the same model, its blocks checkpointed */
  wrapped.recipe.recompute = RH_RECOMPUTE_FULL;
  s = least_fitting(&wrapped, sc->recipe.state_sharding, capacity, m);
  *checkpointing = s >= 0;
  return s;
}

/* The seconds of layer i on `n` samples, forward or backward, as the loop prices it. */
static double layer_seconds(const rh_scenario *sc, const rh_gpu_model *g, int i, double n,
                            bool backward) {
  const rh_layer *l = &sc->model.layers[i];
  double f = l->flops_given ? l->forward_flops
                            : sc->model.forward_flops * l->parameters / sc->model.parameters;
  f *= n * (backward ? 2 : 1);
  return rh_compute_seconds(g, f, l->memory_bytes * n * (backward ? 2 : 1));
}

static const char *gpu_name(const rh_scenario *sc) {
  return sc->compute.gpu_name ? sc->compute.gpu_name : "the GPU";
}

/* The kernel model's line: the GPU, the framework, the step's kernels and what bounds them. */
static void kernels_line(FILE *f, json_t *jc, const rh_scenario *sc, const char *prec,
                         const rh_step_times *st) {
  const char *fw = sc->framework.name ? sc->framework.name : "PyTorch 2 (eager)";
  fprintf(f, "  compute      kernels of %s under %s: %d a step (%d launches), %d compute-, %d memory-, "
          "%d launch-bound; GEMMs up to %.3g%% of the %s peak %.4g TFLOP/s, memory %.4g GB/s\n",
          gpu_name(sc), fw, st->kernels, st->launches, st->by_bound[RH_BOUND_COMPUTE],
          st->by_bound[RH_BOUND_MEMORY], st->by_bound[RH_BOUND_LAUNCH],
          100 * sc->compute.km.gpu.gemm_efficiency, prec, sc->compute.peak / 1e12,
          sc->compute.memory_bw / 1e9);
  if (sc->model.family == RH_FAMILY_TRANSFORMER && sc->model.tf.attention == RH_ATTN_FLASH &&
      !sc->compute.km.flash)
    fprintf(f, "  attention    eager: FlashAttention runs in fp16 and bf16 on a GPU with its rate "
            "(attention_fwd_tflops; %s, %s), so the scores go through memory\n", gpu_name(sc), prec);
  json_object_set_new(jc, "model", json_string("kernels"));
  json_object_set_new(jc, "attention", json_string(sc->compute.km.flash ? "flash" : "eager"));
  json_object_set_new(jc, "framework", json_string(fw));
  json_object_set_new(jc, "peak_tflops", json_real(sc->compute.peak / 1e12));
  json_object_set_new(jc, "memory_GBps", json_real(sc->compute.memory_bw / 1e9));
}

static void roofline_line(FILE *f, json_t *jc, const rh_scenario *sc, const char *prec) {
  fprintf(f, "  compute      roofline of %s: %s dense peak %.4g TFLOP/s%s, large GEMMs at %.3g%%, "
          "memory %.4g GB/s; each layer from its FLOPs and bytes\n", gpu_name(sc),
          sc->compute.peak_from >= 0 ? prec : "given", sc->compute.peak / 1e12,
          sc->compute.peak_from >= 0 ? "" : " (peak_tflops)",
          100 * (sc->compute.gemm_efficiency > 0 ? sc->compute.gemm_efficiency : 1),
          sc->compute.memory_bw / 1e9);
  json_object_set_new(jc, "model", json_string("roofline"));
  json_object_set_new(jc, "peak_tflops", json_real(sc->compute.peak / 1e12));
  json_object_set_new(jc, "memory_GBps", json_real(sc->compute.memory_bw / 1e9));
}

static void sustained_line(FILE *f, json_t *jc, const rh_scenario *sc) {
  const char *on = sc->compute.tflops_written ? NULL : sc->compute.tflops_model;
  bool other = on && (!sc->model.name || strcmp(on, sc->model.name) != 0);
  fprintf(f, "  compute      sustained %.4g TFLOP/s of %s%s%s%s\n", sc->cluster.gpu_flops / 1e12,
          gpu_name(sc), on ? ", measured on " : "", on ? on : "",
          other ? ": not this model's rate; a model family (model.family) or layers with "
                  "their traffic (tools/torch_export.py) are timed on the GPU's roofline"
                : "");
  json_object_set_new(jc, "model", json_string("sustained"));
  json_object_set_new(jc, "tflops", json_real(sc->cluster.gpu_flops / 1e12));
  if (on) json_object_set_new(jc, "tflops_measured_on", json_string(on));
  json_object_set_new(jc, "other_model", json_boolean(other));
}

/* Each layer's forward and backward seconds of `micro` samples, as the run prices them: its
 * kernels (the kernel model's priced step, st), else the roofline or the sustained rate. */
static void layer_times(const rh_scenario *sc, const rh_step_times *st, double micro, double *fw,
                        double *bw) {
  if (st) {
    for (int i = 0; i < sc->model.nlayers; i++) {
      fw[i] = st->forward[i];
      bw[i] = st->backward[i];
    }
    return;
  }
  rh_gpu_model g = {.sustained = sc->cluster.gpu_flops, .peak = sc->compute.peak,
                    .memory_bw = sc->compute.memory_bw,
                    .gemm_efficiency = sc->compute.gemm_efficiency,
                    .gemm_half = sc->compute.gemm_half};
  for (int i = 0; i < sc->model.nlayers; i++) {
    fw[i] = layer_seconds(sc, &g, i, micro, false);
    bw[i] = layer_seconds(sc, &g, i, micro, true);
  }
}

/* The slowest layers on `f`, and every layer's times in summary.json. */
static void layers_report(FILE *f, json_t *root, const rh_scenario *sc, const rh_step_times *st) {
  double micro = sc->recipe.micro_batch;
  int n = sc->model.nlayers;
  json_t *jl = json_array();
  double *fw = calloc((size_t)(n > 0 ? n : 1), sizeof *fw);
  double *bw = calloc((size_t)(n > 0 ? n : 1), sizeof *bw);
  int top[3] = {-1, -1, -1};
  double total = 0;
  bool ok = fw && bw;
  if (ok) layer_times(sc, st, micro, fw, bw);
  for (int i = 0; i < n && ok; i++) {
    double t = fw[i] + bw[i];
    total += t;
    const rh_layer *l = &sc->model.layers[i];
    json_array_append_new(jl, json_pack("{s:s, s:f, s:f, s:f, s:f}", "name", l->name, "parameters",
                                        l->parameters, "forward_gflop",
                                        (l->flops_given ? l->forward_flops
                                                        : sc->model.forward_flops * l->parameters /
                                                              sc->model.parameters) * micro / 1e9,
                                        "forward_ms", fw[i] * 1e3, "backward_ms", bw[i] * 1e3));
    for (int k = 0; k < 3; k++)
      if (top[k] < 0 || t > fw[top[k]] + bw[top[k]]) {
        for (int j = 2; j > k; j--) top[j] = top[j - 1];
        top[k] = i;
        break;
      }
  }
  json_object_set_new(root, "layers", jl);
  if (n > 1 && total > 0 && ok) {
    fprintf(f, "  layers       %d; slowest (forward + backward of %.0f samples):", n, micro);
    for (int k = 0; k < 3 && top[k] >= 0; k++)
      fprintf(f, "%s %s %.3f ms", k ? "," : "", sc->model.layers[top[k]].name,
              (fw[top[k]] + bw[top[k]]) * 1e3);
    fprintf(f, " (all in summary.json)\n");
  }
  free(fw);
  free(bw);
}

void rh_workload_report(FILE *f, json_t *root, const rh_scenario *sc, double samples_per_s,
                        int size) {
  const char *prec = rh_precision_names[sc->model.precision];
  /* the kernel model's step, priced once for the compute line, the kernels and the layers */
  rh_step_times st;
  rh_kernel_list kl;
  bool priced = sc->compute.kernels && rh_step_price(&sc->compute.km, sc->recipe.micro_batch, &st, &kl);
  json_t *jc = json_object();
  if (priced) kernels_line(f, jc, sc, prec, &st);
  else if (sc->compute.roofline) roofline_line(f, jc, sc, prec);
  else sustained_line(f, jc, sc);
  json_object_set_new(jc, "precision", json_string(prec));
  json_object_set_new(root, "compute", jc);
  if (priced) json_object_set_new(root, "kernels", rh_report_kernels_json_of(sc, &st, &kl));
  layers_report(f, root, sc, priced ? &st : NULL);
  if (priced) {
    rh_kernel_list_free(&kl);
    rh_step_times_free(&st);
  }

  json_t *js = json_object(); /* the summary's rates, which the caller merges into it */
  json_object_set_new(root, "rates", js);
  double per_gpu = samples_per_s / (size > 0 ? size : 1);
  if (sc->model.tokens_per_sample > 0) {
    double tps = samples_per_s * sc->model.tokens_per_sample;
    fprintf(f, "  tokens       %.6g tokens/s, %.6g per GPU (%.0f tokens a sample)\n", tps,
            tps / (size > 0 ? size : 1), sc->model.tokens_per_sample);
    if (js) json_object_set_new(js, "tokens_per_s", json_real(tps));
  }
  double peak = rh_workload_peak(sc);
  if (peak > 0 && sc->model.forward_flops > 0) {
    double mfu = 3 * sc->model.forward_flops * per_gpu / peak;
    char trust[400];
    fprintf(f, "  mfu          %.1f%%: 3 x %.4g GFLOP a sample x %.6g samples/s a GPU over the %s "
            "peak %.4g TFLOP/s %s\n", 100 * mfu, sc->model.forward_flops / 1e9, per_gpu,
            sc->compute.peak_from >= 0 || !(sc->compute.peak > 0) ? prec : "given", peak / 1e12,
            rh_trust_note(sc, RH_TRUST_MFU, trust, sizeof trust));
    if (js) json_object_set_new(js, "mfu", json_real(mfu));
  }

  rh_memory_use m;
  rh_workload_memory(sc, &m);
  double cap = sc->compute.capacity;
  char acts[64];
  if (m.activations_known) snprintf(acts, sizeof acts, "%.2f", m.activations / 1e9);
  else snprintf(acts, sizeof acts, "not known (layers without them)");
  char of[48] = "", units[64] = "", master[48] = "";
  if (cap > 0) snprintf(of, sizeof of, " of %.4g GB", cap / 1e9);
  if (m.units > 0) snprintf(units, sizeof units, ", gathered units %.2f", m.units / 1e9);
  else if (!m.units_known) snprintf(units, sizeof units, ", gathered units not known (no blocks)");
  if (m.master > 0) snprintf(master, sizeof master, " + fp32 copy %.2f", m.master / 1e9);
  fprintf(f, "  memory       %.2f GB per GPU%s: weights %.2f%s, gradients %.2f, optimizer %.2f, "
          "activations %s, buffers %.2f%s (GB)\n", m.total / 1e9, of, m.weights / 1e9, master,
          m.gradients / 1e9, m.optimizer / 1e9, acts, m.buffers / 1e9, units);
  if (m.degree > 1 && m.sharding == RH_SHARD_HYBRID)
    fprintf(f, "  sharding     %s (%s) over shard groups of %d GPUs, replicated across the groups: "
            "the state above is this GPU's shard; the step runs its allgathers and reduce-scatters "
            "inside the group and allreduces its shards across groups (bottleneck: sharded)\n",
            rh_sharding_names[m.sharding], rh_sharding_titles[m.sharding], m.degree);
  else if (m.degree > 1)
    fprintf(f, "  sharding     %s (%s) over %d ranks: the state above is this GPU's shard; the step "
            "runs its allgathers and reduce-scatters (bottleneck: sharded)\n",
            rh_sharding_names[m.sharding], rh_sharding_titles[m.sharding], m.degree);
  json_t *jm = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:b, s:s, s:i}", "total_GB",
                         m.total / 1e9, "weights_GB", m.weights / 1e9, "master_GB", m.master / 1e9,
                         "gradients_GB", m.gradients / 1e9, "optimizer_GB", m.optimizer / 1e9,
                         "activations_GB", m.activations / 1e9, "buffers_GB", m.buffers / 1e9,
                         "units_GB", m.units / 1e9, "activations_known", m.activations_known,
                         "sharding", rh_sharding_names[m.degree > 1 ? m.sharding : 0],
                         "shard_degree", m.degree);
  if (cap > 0) json_object_set_new(jm, "gpu_GB", json_real(cap / 1e9));
  json_object_set_new(root, "memory", jm);
}
