/*
 * model.c: the model section once walked.  A family's figures become its layers; a shaped model
 * (a family's, or layers exported with their traffic) gets the bytes of its precision; and the
 * GPU's model is settled: the roofline at the precision's dense peak for a shaped model on a GPU
 * that has one, else the sustained rate `tflops`, which a GPU preset names the model it was
 * measured on.
 */
#include "schema.h"
#include "tables.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *const rh_precision_names[] = {"fp32", "tf32", "amp_fp16", "bf16", "fp8", NULL};

double rh_precision_value_bytes(int precision) {
  return precision == RH_PREC_FP32 || precision == RH_PREC_TF32 ? 4 : 2;
}

/* fp32, TF32 and PyTorch's autocast keep fp32 parameters and gradients; bf16 and fp8 training
 * reduce bf16 gradients. */
double rh_precision_grad_bytes(int precision) {
  return precision == RH_PREC_BF16 || precision == RH_PREC_FP8 ? 2 : 4;
}

/* the transformer keys a cnn or a hand-written model may not give, and the reverse */
static const char *transformer_key_given(const rh_scenario *sc) {
  const rh_transformer *t = &sc->model.tf;
  if (t->layers) return "model.layers";
  if (t->heads) return "model.heads";
  if (t->kv_heads) return "model.kv_heads";
  if (t->ffn) return "model.ffn";
  if (t->vocab) return "model.vocab";
  if (t->seq_len) return "model.seq_len";
  if (t->positions) return "model.positions";
  if (t->type_vocab) return "model.type_vocab";
  return NULL;
}

static const char *build_transformer(rh_scenario *sc, rh_layers *out, const char **at,
                                     const char **other) {
  static char why[256];
  rh_transformer t = sc->model.tf;
  t.hidden = sc->model.hidden;
  if (sc->model.image_size || sc->model.channels || sc->model.classes) {
    *at = sc->model.image_size ? "model.image_size"
             : sc->model.channels ? "model.channels" : "model.classes";
    *other = "model.family";
    return "is a cnn key; a transformer has vocab and seq_len";
  }
  if (!t.kv_heads) t.kv_heads = t.heads;
  if (!t.ffn) t.ffn = 4 * t.hidden;
  const char *key, *bad = rh_transformer_invalid(&t, &key);
  if (bad) {
    snprintf(why, sizeof why, "%s", bad);
    static char f[64];
    snprintf(f, sizeof f, "model.%s", key);
    *at = f;
    *other = !strcmp(key, "heads") ? "model.hidden" : !strcmp(key, "kv_heads") ? "model.heads"
             : !strcmp(key, "seq_len") && t.seq_len > 0 ? "model.positions" : NULL;
    bool missing = (!strcmp(key, "layers") && !t.layers) || (!strcmp(key, "heads") && !t.heads) ||
                   (!strcmp(key, "vocab") && !t.vocab) || (!strcmp(key, "seq_len") && !t.seq_len);
    if (missing) snprintf(why, sizeof why, "missing (required for family transformer)");
    return why;
  }
  sc->model.tf = t;
  sc->model.tokens_per_sample = t.seq_len;
  if (!rh_family_transformer(&t, out)) return "out of memory";
  return NULL;
}

static const char *build_cnn(rh_scenario *sc, rh_layers *out, const char **at,
                             const char **other) {
  static char why[512];
  const char *given = transformer_key_given(sc);
  if (given) {
    *at = given;
    *other = "model.family";
    return "is a transformer key; a cnn is named (model.name) and sized by image_size";
  }
  int which = -1;
  for (int i = 0; rh_cnn_names[i]; i++)
    if (sc->model.name && !strcmp(sc->model.name, rh_cnn_names[i])) which = i;
  if (which < 0) {
    *at = "model.name";
    int n = sc->model.name
                ? snprintf(why, sizeof why, "\"%s\" is not a network of family cnn (one of",
                           sc->model.name)
                : snprintf(why, sizeof why, "missing: family cnn needs the network's name (one of");
    for (int i = 0; rh_cnn_names[i] && n > 0 && (size_t)n < sizeof why; i++)
      n += snprintf(why + n, sizeof why - (size_t)n, "%s %s", i ? "," : "", rh_cnn_names[i]);
    if (n > 0 && (size_t)n < sizeof why) snprintf(why + n, sizeof why - (size_t)n, ")");
    return why;
  }
  int image = sc->model.image_size ? sc->model.image_size : rh_cnn_default_image(which);
  int channels = sc->model.channels ? sc->model.channels : rh_cnn_default_channels(which);
  int classes = sc->model.classes ? sc->model.classes : rh_cnn_default_classes(which);
  sc->model.image_size = image;
  sc->model.channels = channels;
  sc->model.classes = classes;
  const char *bad;
  if (!rh_family_cnn(which, image, channels, classes, out, &bad)) {
    *at = "model.image_size";
    snprintf(why, sizeof why, "%d x %d: %s", image, image, bad);
    return why;
  }
  return NULL;
}

const char *rh__scenario_model_finish(rh_scenario *sc, const char **at, const char **other) {
  *other = NULL;
  if (sc->model.family == RH_FAMILY_CUSTOM) {
    const char *given = transformer_key_given(sc);
    if (given && !strcmp(given, "model.layers") && sc->model.nlayers == 0) {
      *at = given;
      *other = "model.family";
      return "a number of blocks is for family transformer; a custom model lists its layers";
    }
    if (given && strcmp(given, "model.layers") != 0) {
      *at = given;
      *other = "model.family";
      return "is a key of family transformer (model.family: transformer)";
    }
    bool traffic = false;
    for (int i = 0; i < sc->model.nlayers; i++)
      traffic |= sc->model.layers[i].traffic > 0 || sc->model.layers[i].activations > 0;
    sc->model.shaped = traffic;
  } else {
    *other = "model.family";
    if (sc->model.nlayers > 0) {
      *at = "model.layers";
      return "a family builds its own layers (a transformer's layers is its number of blocks)";
    }
    if (sc->model.parameters > 0 || sc->model.forward_flops > 0) {
      *at = sc->model.parameters > 0 ? "model.parameters" : "model.forward_gflops_per_sample";
      return "a family derives it from its layers";
    }
    rh_layers out = {0};
    *other = NULL;
    const char *why = sc->model.family == RH_FAMILY_TRANSFORMER
                          ? build_transformer(sc, &out, at, other)
                          : build_cnn(sc, &out, at, other);
    if (why || out.failed) {
      rh_layers_free(&out);
      if (!why) *at = "model";
      return why ? why : "out of memory";
    }
    sc->model.layers = out.v; /* the list's names and array are the scenario's now */
    sc->model.nlayers = out.n;
    sc->model.shaped = true;
  }
  if (sc->model.shaped) {
    double bytes = rh_precision_value_bytes(sc->model.precision);
    for (int i = 0; i < sc->model.nlayers; i++)
      sc->model.layers[i].memory_bytes += sc->model.layers[i].traffic * bytes;
  }
  return NULL;
}

/* The kernel model, for a family's layers (each knows what it computes) on a GPU at its preset's
 * peak: the layers, the GPU, the framework, the precision and the optimizer's state. */
static void kernel_model(rh_scenario *sc) {
  bool shapes = false;
  for (int i = 0; i < sc->model.nlayers; i++) shapes |= sc->model.layers[i].op.kind != RH_LAYER_OTHER;
  if (!shapes) return;
  int p = sc->model.precision;
  int opt = sc->recipe.optimizer == RH_OPT_SGD ? (sc->recipe.momentum > 0 ? RH_KOPT_MOMENTUM : RH_KOPT_SGD)
                                               : RH_KOPT_ADAM;
  sc->compute.kernels = true;
  double best = sc->compute.gemm_best > 0 ? sc->compute.gemm_best : sc->compute.gemm_efficiency;
  double simt = sc->compute.gemm_best_fp32 > 0 ? sc->compute.gemm_best_fp32 : best;
  if (p == RH_PREC_FP32) best = simt;
  sc->compute.km = (rh_kernel_model){
      .layers = sc->model.layers, .nlayers = sc->model.nlayers, .fw = sc->framework,
      .gpu = {.peak = sc->compute.peak, .gemm_efficiency = best, .simt_efficiency = simt,
              .memory_bw = sc->compute.memory_bw, .simt_peak = sc->compute.peaks[RH_PREC_FP32],
              .sms = sc->compute.sms, .kernel_floor = sc->compute.kernel_floor,
              .conv_efficiency = p == RH_PREC_TF32 ? sc->compute.conv_eff_tf32 : 0,
              .attn_fwd = sc->compute.attn_fwd, .attn_bwd = sc->compute.attn_bwd,
              .attn_seq_half = sc->compute.attn_seq_half, .tensor_cores = p != RH_PREC_FP32},
      .value_bytes = rh_precision_value_bytes(p),
      .mixed = p == RH_PREC_AMP_FP16 || p == RH_PREC_BF16, .scaler = p == RH_PREC_AMP_FP16,
      .dropout = sc->model.tf.dropout, .optimizer = (rh_kernel_optimizer)opt,
      .flash = sc->model.tf.attention == RH_ATTN_FLASH};
  /* FlashAttention has no published rate on this GPU (none runs on Volta) or runs in fp16 and
   * bf16 alone: the scores go through memory, as eager attention's do, and the summary says so */
  bool half = p == RH_PREC_AMP_FP16 || p == RH_PREC_BF16 || p == RH_PREC_FP8;
  if (sc->compute.km.flash && (!half || !(sc->compute.attn_fwd > 0 && sc->compute.attn_bwd > 0)))
    sc->compute.km.flash = false;
}

/* Images a second one CPU thread decodes and augments for ImageNet-style training (random
 * resized crop, flip), at 12 threads of an AWS p3dn.24xlarge (FFCV's benchmark,
 * libffcv/ffcv docs/benchmarks.rst and its figure): PyTorch's DataLoader 2,211 images/s (184 a
 * thread), DALI on the CPU 4,880 (407 a thread). */
static const double decode_default[] = {0, 184, 407, 0};

double rh_scenario_input_rate(const rh_scenario *sc) {
  int l = sc->data.loader;
  if (l != 1 && l != 2) return 0;
  double per = sc->data.decode_per_thread > 0 ? sc->data.decode_per_thread : decode_default[l];
  int gpus = sc->cluster.gpus_per_node && sc->cluster.gpus_per_node[0] > 0 ? sc->cluster.gpus_per_node[0] : 1;
  return sc->compute.cpu_threads > 0 ? per * sc->compute.cpu_threads / gpus : 0;
}

/* The measured kernel table (cluster.gpu.kernel_table) in place of the preset's figures: each
 * precision's best GEMM over its peak, the copy rate, the launch floor.  NULL, or why not. */
static const char *measured_kernels(rh_scenario *sc, const char **at) {
  static char why[3200];
  char path[1024], root[800];
  const char *t = sc->compute.kernel_table, *slash = strrchr(sc->path, '/');
  if (t[0] == '/' || !slash) snprintf(path, sizeof path, "%s", t);
  else snprintf(path, sizeof path, "%.*s/%s", (int)(slash - sc->path), sc->path, t);
  char beside[1024];
  snprintf(beside, sizeof beside, "%s", path);
  if (t[0] != '/' && access(path, F_OK) != 0) {
    snprintf(path, sizeof path, "%s/%s", rh_presets_root(root, sizeof root, NULL), t);
    if (access(path, F_OK) != 0) {
      *at = "cluster.gpu.kernel_table";
      snprintf(why, sizeof why, "%s is neither beside the scenario (%s) nor in the presets (%s)", t,
               beside, path);
      return why;
    }
  }
  rh_kernel_table k;
  char err[1200];
  if (rh_read_kernel_table(path, &k, err, sizeof err) != 0) {
    *at = "cluster.gpu.kernel_table";
    snprintf(why, sizeof why, "%s", err);
    return why;
  }
  rh_kernel_gpu *g = &sc->compute.km.gpu;
  int p = sc->model.precision;
  if (k.best[p] > 0 && g->peak > 0) g->gemm_efficiency = fmin(1, k.best[p] * 1e12 / g->peak);
  if (k.best[RH_PREC_FP32] > 0 && g->simt_peak > 0)
    g->simt_efficiency = fmin(1, k.best[RH_PREC_FP32] * 1e12 / g->simt_peak);
  if (k.copy_GBps > 0) g->memory_bw = sc->compute.memory_bw = k.copy_GBps * 1e9;
  if (k.launch_us > 0) g->kernel_floor = k.launch_us * 1e-6;
  return NULL;
}

const char *rh__scenario_compute_finish(rh_scenario *sc, const char **at) {
  static char why[256];
  int p = sc->model.precision;
  bool written_peak = sc->compute.peak > 0;
  if (sc->model.shaped && !written_peak && !sc->compute.tflops_written) {
    double peak = sc->compute.peaks[p];
    if (!(peak > 0)) {
      *at = "cluster.gpu";
      snprintf(why, sizeof why, "the GPU has no dense %s peak (peak_tflops_%s) for model.precision "
               "%s; give it, or tflops for a sustained rate", p == RH_PREC_AMP_FP16 ? "fp16"
               : rh_precision_names[p], p == RH_PREC_AMP_FP16 ? "fp16" : rh_precision_names[p],
               rh_precision_names[p]);
      return why;
    }
    /* the GEMM curve's half point is given at the fp16/bf16 peak: it is a fixed time's FLOPs */
    double ref = sc->compute.peaks[RH_PREC_BF16] > 0 ? sc->compute.peaks[RH_PREC_BF16]
                                                      : sc->compute.peaks[RH_PREC_AMP_FP16];
    if (ref > 0) sc->compute.gemm_half *= peak / ref;
    sc->compute.peak = peak;
    sc->compute.peak_from = p;
  }
  if ((sc->data.loader == 1 || sc->data.loader == 2) && !(sc->compute.cpu_threads > 0)) {
    *at = "data.loader";
    return "a loader on the CPUs needs the node's cluster.cpu_threads (a node preset gives them)";
  }
  sc->compute.roofline = sc->compute.peak > 0;
  if (sc->compute.roofline && !written_peak && !sc->compute.tflops_written) kernel_model(sc);
  if (sc->compute.kernels && sc->compute.kernel_table) {
    const char *bad = measured_kernels(sc, at);
    if (bad) return bad;
  }
  if (!(sc->cluster.gpu_flops > 0)) {
    if (!sc->compute.roofline) {
      *at = "cluster.gpu.tflops";
      return "missing (required unless the model is timed on the roofline: a family, or layers "
             "with their traffic, on a GPU with a peak for the precision)";
    }
    /* the simulated GPU's rate: what the roofline's times are charged at */
    double eff = sc->compute.gemm_efficiency > 0 ? sc->compute.gemm_efficiency : 1;
    sc->cluster.gpu_flops = sc->compute.peak * eff;
  }
  return NULL;
}
