/*
 * run.c: `rehearsal run FILE [--out DIR] [--resume]`.  Loads the scenario and its data, replays
 * the training on the simulated cluster, prints a per-epoch table (gnuplot reads it as is: `#`
 * header lines, a units row), a summary and the checks' verdicts, and writes the same as
 * summary.json under DIR, with the checkpoints in DIR/checkpoints.
 */
#include "bottleneck.h"
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "failures.h"
#include "interval_replay.h"
#include "progress.h"
#include "trust.h"
#include "scenario.h"
#include "workload.h"
#include "train/train.h"

#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What each gradient bucket of a step runs and costs, by the plan the runtime itself follows
 * (rank 0's view): one line per bucket in the summary, one object per bucket in the JSON.
 * Returns the sum of the buckets' times and the algorithm of the largest. */
static double bucket_plans(const rh_scenario *sc, const rh_train_result *res, json_t *jb,
                           char *largest, size_t len) {
  rh_scenario_view view;
  snprintf(largest, len, "-");
  if (rh_scenario_view_init(sc, &view) != RH_OK) return NAN;
  double total = 0, most = -1, negotiation = rh_negotiation_seconds(sc, &view);
  for (int i = 0; i < res->buckets_per_step && res->bucket_bytes; i++) {
    double bytes = res->bucket_bytes[i];
    rh_plan plan = rh__plan(&view.ctx, RH_NC_ALLREDUCE, (size_t)bytes);
    char name[32];
    rh__plan_name(&plan, name, sizeof name);
    total += negotiation + plan.seconds;
    if (bytes > most) {
      most = bytes;
      snprintf(largest, len, "%s", name);
    }
    /* the realistic network (SimGrid's LV08) has no closed form: its buckets are priced by the
     * exact network's alpha-beta model, and say so */
    const char *by = sc->cluster.net_model == RH_NET_REALISTIC ? "exact"
                                                              : rh_net_model_names[sc->cluster.net_model];
    printf("  bucket %-5d %.4g MB: %s, %.4f ms by the %s model%s", i, bytes / 1e6, name,
           plan.seconds * 1e3, by,
           sc->cluster.net_model == RH_NET_REALISTIC ? " (realistic has no cost formula)" : "");
    if (negotiation > 0) printf(", after Horovod's negotiation %.4f ms", negotiation * 1e3);
    printf("\n");
    json_t *jbk = json_pack("{s:f, s:s, s:f, s:s}", "bytes", bytes, "algorithm", name, "model_ms",
                            plan.seconds * 1e3, "priced_by", by);
    if (negotiation > 0) json_object_set_new(jbk, "negotiation_ms", json_real(negotiation * 1e3));
    json_array_append_new(jb, jbk);
  }
  rh_topology_free(&view.topo);
  return total;
}

static const char usage_text[] =
    "usage: rehearsal run FILE [options]\n"
    "Replays the scenario's training on the simulated cluster (or, as rehearsal-mpi and\n"
    "rehearsal-gpu, on real processes) and checks its recipe.\n"
    "  -o, --out DIR          write summary.json, epochs.txt, steps.csv and the checkpoints\n"
    "                         under DIR (created with its parents)\n"
    "      --resume           go on from the checkpoints in --out DIR\n"
    "      --compare FILE     set this run's steady step beside another run's summary.json\n"
    "      --warmup-steps N   steps left out of the steady step (default 10, at most half the\n"
    "                         run): a real run's first steps pay one-time set-up costs\n"
    "      --timeline FILE    write a Chrome trace (Perfetto, chrome://tracing) of every rank\n"
    "                         (default: HOROVOD_TIMELINE's file, where it is set)\n"
    "      --record-samples   real models: write DIR/samples-rank<R>.csv, the samples each rank\n"
    "                         trained on (epoch,step,rank,sample), beside --out's files\n"
    "      --set KEY=VALUE    override a scenario key (a dotted path: cluster.nodes=4);\n"
    "                         repeatable; the command line wins over the file\n"
    "      --no-what-if       leave out the what-if figure of twice the network\n"
    "      --help, --version\n"
    "Exit status: 0 success, 1 the job failed or a check did not hold, 2 bad input.\n";

typedef struct run_flags {
  const char *out, *compare, *timeline;
  bool timeline_env; /* the timeline's file is HOROVOD_TIMELINE's, --timeline not given */
  bool resume, what_if, samples;
  int warmup; /* steps left out of the steady step */
} run_flags;

static int run_option(int c, const char *v, void *arg) {
  run_flags *f = arg;
  switch (c) {
  case 'o': f->out = v; return 0;
  case 'c': f->compare = v; return 0;
  case 't': f->timeline = v; return 0;
  case 'r': f->resume = true; return 0;
  case 's': f->samples = true; return 0;
  case 'w': f->what_if = false; return 0;
  case 'u': {
    char *end = NULL;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < 0 || n > 1000000) return 2; /* "cannot use ..." */
    f->warmup = (int)n;
    return 0;
  }
  default: return 2;
  }
}

bool rh_summary_step(const char *path, double *step_ms, char *target, size_t len) {
  FILE *f;
  struct stat st;
  int opened = rh_open_regular(path, "r", &f, &st);
  if (opened != 0) {
    fprintf(stderr, "rehearsal: %s: --compare: cannot read: %s%s\n", path,
            opened > 0 ? rh_not_regular(&st) : strerror(errno),
            opened > 0 ? ", not a regular file" : "");
    return false;
  }
  json_error_t jerr;
  json_t *root = json_loadf(f, 0, &jerr);
  fclose(f);
  if (!root) {
    fprintf(stderr, "rehearsal: %s:%d: --compare: %s\n", path, jerr.line, jerr.text);
    return false;
  }
  json_t *sum = json_object_get(root, "summary"), *v = json_object_get(sum, "steady_step_ms");
  if (!json_is_number(v)) v = json_object_get(sum, "step_ms");
  const char *t = json_string_value(json_object_get(root, "target"));
  snprintf(target, len, "%s", t ? t : "simulator");
  bool ok = json_is_number(v);
  if (ok) *step_ms = json_number_value(v);
  else fprintf(stderr, "rehearsal: %s: --compare: no summary.step_ms in it\n", path);
  json_decref(root);
  return ok;
}

/* Everything a run owns besides the scenario. */
typedef struct run_inputs {
  rh_dataset train, validation;
  rh_train_layer *layers;
  float *init_params; /* model.init_from */
  rh_train_config cfg;
  char checkpoints[1024];
  bool temporary_checkpoints;
  rh_scenario_launch launch; /* with the runtime's forms of the failure sections */
} run_inputs;

/* The checkpoint directory: under --out, else a temporary one removed afterwards. */
static int checkpoint_dir(const char *out, run_inputs *in) {
  if (out) {
    if (rh_make_dirs(out) != 0) return 1;
    snprintf(in->checkpoints, sizeof in->checkpoints, "%s/checkpoints", out);
    if (mkdir(in->checkpoints, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "rehearsal: cannot create %s: %s\n", in->checkpoints, strerror(errno));
      return 1;
    }
  } else {
    snprintf(in->checkpoints, sizeof in->checkpoints, "/tmp/rehearsal-checkpoints-XXXXXX");
    if (!mkdtemp(in->checkpoints)) return 1;
    in->temporary_checkpoints = true;
  }
  in->cfg.checkpoint_dir = in->checkpoints;
  return 0;
}

/* The failure, elastic and restart settings of the run; the checks that go with them. */
static int prepare_failures(const rh_scenario *sc, run_inputs *in) {
  rh_train_config *c = &in->cfg;
  if (rh_scenario_launch_init(sc, &in->launch) != RH_OK) return 1;
  const rh_elastic_config *el = in->launch.config.elastic;
  c->faults = in->launch.has_plan;
  c->elastic = in->launch.has_elastic;
  c->min_np = el ? el->min_np : rh_scenario_size(sc);
  c->commit_every = (long)sc->elastic.commit_every;
  c->checkpoint_every_steps = (long)sc->recipe.checkpoint_every_steps;
  int slots = rh_cluster_first_slot(&sc->cluster, sc->cluster.nodes + sc->cluster.spares);
  c->max_size = el && el->max_np > 0 && el->max_np < slots ? el->max_np : slots;
  c->optimizer_state = c->optimizer == RH_OPT_SGD ? 1 : 2;
  bool judged = false;
  for (int i = 0; i < in->launch.plan.nfaults; i++) {
    const rh_fault *f = &in->launch.plan.faults[i];
    judged = judged || f->kind == RH_FAULT_HOST_CRASH || f->kind == RH_FAULT_GPU_CRASH ||
             f->kind == RH_FAULT_HANG || (f->kind == RH_FAULT_LINK_DOWN && isinf(f->duration));
  }
  /* the checks of failures apply to timing-only models too: they are about steps and commits */
  bool on[RH_CHECK_COUNT] = {
      [RH_CHECK_WORK_LOST] = in->launch.has_elastic,
      [RH_CHECK_STATE_RESET] = in->launch.has_elastic,
      [RH_CHECK_MIN_NP] = in->launch.has_elastic,
      [RH_CHECK_NOTICED] = judged,
      [RH_CHECK_INTERVAL] = (in->launch.plan.gpu_mtbf > 0 || in->launch.plan.node_mtbf > 0) &&
                            (in->launch.has_elastic || in->launch.has_restart),
      [RH_CHECK_FITS_MEMORY] = sc->model.kind == 0 && sc->compute.capacity > 0 && sc->model.shaped};
  for (int i = RH_CHECK_WORK_LOST; i < RH_CHECK_COUNT; i++) {
    int e = sc->checks.enabled[i];
    c->check[i] = e < 0 ? on[i] : e == 1;
  }
  return 0;
}

/* Resolves a data path relative to the scenario file's directory. */
static void data_path(const rh_scenario *sc, const char *p, char *buf, size_t len) {
  const char *slash = strrchr(sc->path, '/');
  if (p[0] == '/' || !slash) snprintf(buf, len, "%s", p);
  else snprintf(buf, len, "%.*s/%s", (int)(slash - sc->path), sc->path, p);
}

static int prepare(const rh_scenario *sc, const char *out, bool resume, run_inputs *in) {
  rh_train_config *c = &in->cfg;
  bool real = sc->model.kind != 0;
  char err[1024];
  *c = (rh_train_config){
      .real = real, .parameters = sc->model.parameters, .forward_flops = sc->model.forward_flops,
      .train_samples = (long)sc->data.train, .validation_samples = (long)sc->data.validation,
      .batch = (long)sc->recipe.batch, .base_lr = sc->recipe.base_lr,
      .lr_scaling = (rh_lr_scaling)sc->recipe.lr_scaling, .warmup_epochs = sc->recipe.warmup_epochs,
      .decay_epochs = sc->recipe.decay_epochs, .ndecay = sc->recipe.ndecay,
      .decay_factor = sc->recipe.decay_factor, .optimizer = (rh_optimizer_kind)sc->recipe.optimizer,
      .momentum = sc->recipe.momentum, .beta1 = sc->recipe.beta1, .beta2 = sc->recipe.beta2,
      .eps = sc->recipe.eps, .rho = sc->recipe.rho, .epochs = (int)sc->recipe.epochs,
      .epochs_divided = sc->recipe.epochs_rule == 1, .steps_rule = (rh_steps_rule)sc->recipe.steps_rule,
      .val_rule = (rh_val_rule)sc->recipe.val_rule, .stop_at_step = (long)sc->recipe.stop_at_step,
      .steps = (long)sc->recipe.steps, .duration = sc->recipe.duration,
      .seed = (uint64_t)sc->recipe.seed, .shuffle = sc->recipe.shuffle,
      .first_epoch = (int)sc->recipe.first_epoch,
      .replicated = sc->recipe.sharding == 1,
      .val_batch = sc->recipe.val_batch > 0 ? (long)sc->recipe.val_batch : (long)sc->recipe.batch,
      .checkpoint_every = sc->recipe.checkpoint_every, .resume = resume,
      .serial_check_steps = (long)sc->checks.serial_steps,
      .resume_from_epoch = sc->checks.resume_from_epoch, .mistakes = sc->mistakes,
      .gpu = {.sustained = sc->cluster.gpu_flops, .peak = sc->compute.peak,
              .memory_bw = sc->compute.memory_bw, .gemm_efficiency = sc->compute.gemm_efficiency,
              .gemm_half = sc->compute.gemm_half, .overhead = sc->compute.overhead},
      .losses = {.reducer_per_byte = sc->recipe.reducer_per_byte,
                 .step_spread = sc->compute.step_spread, .copy_bw = sc->compute.memory_bw},
      .negotiate = !real && sc->recipe.framework == 0};
  for (int i = 0; i < RH_CHECK_WORK_LOST; i++) {
    int e = sc->checks.enabled[i];
    bool deflt = real && (i != RH_CHECK_RESUME || sc->checks.resume_from_epoch > 0);
    c->check[i] = e < 0 ? (deflt || i == RH_CHECK_COLLECTIVES) : e == 1;
    if (!real && i != RH_CHECK_COLLECTIVES) c->check[i] = false;
  }
  if (prepare_failures(sc, in) != 0) return 1;
  if (!real) {
    in->layers = calloc((size_t)sc->model.nlayers, sizeof *in->layers);
    if (!in->layers) return 1;
    for (int i = 0; i < sc->model.nlayers; i++)
      in->layers[i] = (rh_train_layer){sc->model.layers[i].name, sc->model.layers[i].parameters,
                                       sc->model.layers[i].forward_flops,
                                       sc->model.layers[i].memory_bytes};
    c->layers = in->layers;
    c->nlayers = sc->model.nlayers;
    c->layer_flops = sc->model.layers[0].flops_given;
    c->grad_bytes = rh_precision_grad_bytes(sc->model.precision);
    c->ddp = sc->recipe.framework == 1;
    c->bucket_cap = sc->recipe.bucket_cap;
    c->first_bucket = sc->recipe.first_bucket;
    c->accumulation = (int)sc->recipe.accumulation;
    /* a timing-only model checkpoints its position, for a relaunch to resume from; without a
     * restart policy it keeps nothing, and a run is as quick to simulate again as to resume */
    if (resume && !in->launch.has_restart)
      fprintf(stderr, "rehearsal: --resume: %s is timing-only (no model data) and keeps no "
                      "checkpoints without a restart: section; the run starts from its first "
                      "step\n", sc->path);
    return in->launch.has_restart ? checkpoint_dir(out, in) : 0;
  }

  /* data */
  if (sc->data.source == 0) {
    long n = (long)sc->data.train + (long)sc->data.validation;
    double noise = sc->data.noise >= 0 ? sc->data.noise : 0.28 * sqrt(sc->data.inputs);
    if (rh_dataset_synthetic(&in->train, n, sc->data.inputs, sc->data.classes,
                             (uint64_t)sc->data.seed, noise) != RH_OK) {
      fprintf(stderr, "rehearsal: %s: cannot make the synthetic data set\n", sc->path);
      return 1;
    }
    /* computed once and kept when it fits in 1 GiB: epochs then read copies */
    if ((double)n * sc->data.inputs * 4 <= 1073741824.0) rh_dataset_materialize(&in->train);
    c->train = &in->train;
    c->validation = &in->train;
    c->validation_offset = (long)sc->data.train; /* the samples after the training set */
  } else {
    char im[1024], lb[1024];
    data_path(sc, sc->data.train_images, im, sizeof im);
    if (sc->data.source == RH_DATA_CIFAR10) {
      if (rh_dataset_load_cifar10(&in->train, im, err, sizeof err) != RH_OK) {
        fprintf(stderr, "rehearsal: %s: data.train_images: %s\n", sc->path, err);
        return 2;
      }
    } else {
      data_path(sc, sc->data.train_labels, lb, sizeof lb);
      if (rh_dataset_load_idx(&in->train, im, lb, err, sizeof err) != RH_OK) {
        fprintf(stderr, "rehearsal: %s: data.train_images: %s\n", sc->path, err);
        return 2;
      }
    }
    if (sc->data.train > in->train.n) {
      fprintf(stderr, "rehearsal: %s: data.train_samples: %.0f is more than the %ld images in %s\n",
              sc->path, sc->data.train, in->train.n, im);
      return 2;
    }
    c->train_samples = sc->data.train > 0 ? (long)sc->data.train : in->train.n;
    c->train = &in->train;
    if (sc->data.validation_images) {
      data_path(sc, sc->data.validation_images, im, sizeof im);
      if (sc->data.source != RH_DATA_CIFAR10) data_path(sc, sc->data.validation_labels, lb, sizeof lb);
      if ((sc->data.source == RH_DATA_CIFAR10
               ? rh_dataset_load_cifar10(&in->validation, im, err, sizeof err)
               : rh_dataset_load_idx(&in->validation, im, lb, err, sizeof err)) != RH_OK) {
        fprintf(stderr, "rehearsal: %s: data.validation_images: %s\n", sc->path, err);
        return 2;
      }
      if (in->validation.inputs != in->train.inputs) {
        fprintf(stderr, "rehearsal: %s: data.validation_images: %d inputs per image, the "
                        "training images have %d\n", sc->path, in->validation.inputs, in->train.inputs);
        return 2;
      }
      long have = in->validation.n;
      c->validation_samples = sc->data.validation > 0 && sc->data.validation < have
                                  ? (long)sc->data.validation : have;
      c->validation = &in->validation;
    } else {
      c->validation_samples = 0;
    }
    if (rh_recipe_steps_per_epoch(c->steps_rule, c->train_samples, c->batch,
                                  rh_scenario_size(sc)) < 1) {
      fprintf(stderr, "rehearsal: %s: data.train_samples: %ld images give no full step of %ld x %d\n",
              sc->path, c->train_samples, c->batch, rh_scenario_size(sc));
      return 2;
    }
  }
  if (sc->recipe.shuffle == RH_SHUFFLE_TORCH && c->train_samples >= (1L << 24)) {
    fprintf(stderr, "rehearsal: %s: recipe.shuffle: torch draws torch.randperm's order for up to "
                    "16777215 samples; %ld here (give shuffle: true)\n", sc->path, c->train_samples);
    return 2;
  }
  if (sc->data.source != RH_DATA_SYNTHETIC && sc->data.norm_std > 0) {
    rh_dataset_normalize(&in->train, sc->data.norm_mean, sc->data.norm_std);
    rh_dataset_normalize(&in->validation, sc->data.norm_mean, sc->data.norm_std);
  }
  int classes = sc->data.source == 0 ? sc->data.classes : in->train.classes;
  if (in->validation.classes > classes) classes = in->validation.classes;
  if (sc->model.kind == RH_KIND_NET) {
    /* images as the data give them; synthetic features as the network's channels of a square */
    const rh_net_spec *spec = rh_nets[sc->model.network];
    int ch = in->train.channels, rows = in->train.rows, cols = in->train.cols;
    if (sc->data.source == RH_DATA_SYNTHETIC) {
      ch = spec->channels;
      rows = cols = (int)lround(sqrt((double)in->train.inputs / ch));
      if ((long)ch * rows * cols != in->train.inputs) {
        fprintf(stderr, "rehearsal: %s: data.inputs: %d features are not %d channel%s of a square "
                        "image, as model.network %s takes\n", sc->path, in->train.inputs, ch,
                ch == 1 ? "" : "s", spec->name);
        return 2;
      }
    }
    const char *why = rh_model_init_net(&c->model, spec, ch, rows, cols, classes);
    if (why) {
      fprintf(stderr, "rehearsal: %s: model.network: %s on %dx%dx%d inputs: %s\n", sc->path,
              spec->name, ch, rows, cols, why);
      return 2;
    }
  } else if (rh_model_init(&c->model, sc->model.kind == 1 ? RH_MODEL_SOFTMAX : RH_MODEL_MLP,
                           in->train.inputs, sc->model.hidden, classes) != RH_OK) {
    fprintf(stderr, "rehearsal: %s: model: cannot build it\n", sc->path);
    return 2;
  }
  c->parameters = (double)c->model.nparams;
  if (c->forward_flops <= 0) c->forward_flops = rh_model_forward_flops(&c->model);
  if (sc->model.init_from) {
    char path[1024];
    data_path(sc, sc->model.init_from, path, sizeof path);
    in->init_params = malloc(c->model.nparams * sizeof(float));
    if (!in->init_params) return 1;
    if (rh_model_read_params(&c->model, path, in->init_params, err, sizeof err) != 0) {
      fprintf(stderr, "rehearsal: %s: model.init_from: %s\n", sc->path, err);
      return 2;
    }
    c->init_params = in->init_params;
  }

  bool need = c->checkpoint_every > 0 || c->checkpoint_every_steps > 0 || c->check[RH_CHECK_RESUME] ||
              resume || in->launch.has_restart;
  return need ? checkpoint_dir(out, in) : 0;
}

static void release(run_inputs *in) {
  if (in->temporary_checkpoints) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", in->checkpoints);
    if (system(cmd) != 0) fprintf(stderr, "rehearsal: could not remove %s\n", in->checkpoints);
  }
  rh_dataset_free(&in->train);
  rh_dataset_free(&in->validation);
  rh_net_release();
  free(in->layers);
  free(in->init_params);
  rh_scenario_launch_free(&in->launch);
}

/* Samples an epoch's steps processed, each step at its world's size (from the record of the
 * runs of steps, which leaves out steps a failure cut short; the epoch's last size where there
 * is no record). */
static double epoch_samples(const rh_train_result *res, int e, double batch, int size) {
  const rh_epoch_stats *s = &res->epochs_stats[e];
  double samples = 0;
  long steps = 0;
  for (size_t i = 0; i < res->nruns; i++)
    if (res->runs[i].epoch == e) {
      samples += (double)res->runs[i].steps * res->runs[i].size * batch;
      steps += res->runs[i].steps;
    }
  return steps > 0 ? samples : (double)s->steps * batch * (s->size ? s->size : size);
}

/* commit_interval's verdict, and the replay of the job's failures for other intervals: the
 * goodput of the recipe's interval and of the best, beside Young's and Daly's. */
static void interval_study(const rh_scenario_launch *launch, const rh_train_config *cfg,
                           rh_train_result *res, const rh_failure_totals *ft, int size, int nodes,
                           double tolerance, double end, json_t *root) {
  const rh_fault_plan *plan = &launch->plan;
  /* the job's failure rate over the GPUs (size) and nodes it starts on, as the scenario gives */
  double rate = (plan->gpu_mtbf > 0 ? size / plan->gpu_mtbf : 0) +
                (plan->node_mtbf > 0 ? nodes / plan->node_mtbf : 0);
  long every = launch->has_elastic                 ? cfg->commit_every
               : cfg->checkpoint_every_steps > 0 ? cfg->checkpoint_every_steps
                                                 : cfg->checkpoint_every * res->steps_per_epoch;
  if (res->steps_per_epoch > 0 && (every <= 0 || every > res->steps_per_epoch) &&
      (launch->has_elastic || cfg->checkpoint_every > 0))
    every = res->steps_per_epoch; /* the end of each epoch commits (checkpoints) too */
  double count = launch->has_elastic ? (double)res->commits : (double)res->nckpt;
  double cost = count > 0 ? (launch->has_elastic ? ft->commit : ft->checkpoint) / count : 0;
  rh_interval_figures fig = {.elastic = launch->has_elastic, .steps = every,
                             .interval = (double)every * ft->step + cost, .cost = cost,
                             .mtbf = rate > 0 ? 1 / rate : 0};
  if (cfg->check[RH_CHECK_INTERVAL]) rh_train_verdict_interval(res, &fig, tolerance);
  if (!(rate > 0) || !(cost > 0) || !(ft->step > 0) || every <= 0) return;
  json_t *failures = root ? json_object_get(root, "failures") : NULL;
  const char *what = launch->has_elastic ? "commit" : "checkpoint";
  if (isnan(ft->recovery)) {
    printf("  interval     no failure was recovered from: no recovery time to replay other "
           "%s intervals with\n", what);
    return;
  }
  rh_replay_job job = {.steps = (double)res->steps_per_epoch * res->epochs, .step = ft->step,
                       .cost = cost, .recovery = ft->recovery, .failures = ft->struck,
                       .nfailures = ft->nstruck,
                       .horizon = end, .rate = rate, .seed = plan->seed};
  rh_interval_study study;
  rh_interval_study_run(&job, every, &study);
  rh_interval_study_report(stdout, failures, &job, &study, what, ft->time_goodput);
}

static int run_scenario(const char *file, const run_flags *fl, const rh_scenario_opts *opts);

/* params.bin's index: its layout and each tensor's name, shape and offset, so that
 * numpy.fromfile(..., "<f4") and the shapes give the state_dict (and model.init_from reads it). */
static json_t *params_index(const rh_model *m) {
  json_t *tensors = json_array();
  for (int t = 0; t < m->ntensors; t++) {
    json_t *shape = json_array();
    for (int d = 0; d < m->tensors[t].ndim; d++)
      json_array_append_new(shape, json_integer(m->tensors[t].dims[d]));
    json_array_append_new(tensors, json_pack("{s:s, s:o, s:I}", "name", m->tensors[t].name,
                                             "shape", shape, "offset",
                                             (json_int_t)m->tensors[t].offset));
  }
  return json_pack("{s:s, s:s, s:I, s:o}", "file", "params.bin", "dtype", "float32 little-endian",
                   "count", (json_int_t)m->nparams, "tensors", tensors);
}

/* The steps the run will take at its starting size (the progress line's total). */
static long res_steps_total(const rh_scenario *sc, int epochs) {
  long total = rh_scenario_steps_per_epoch(sc) * epochs;
  if (sc->recipe.stop_at_step > 0 && total > (long)sc->recipe.stop_at_step + 1)
    total = (long)sc->recipe.stop_at_step + 1;
  if (sc->recipe.steps > 0) total = (long)sc->recipe.steps;
  return total;
}

/* The steady step: the mean of rank 0's steps after the first `warmup` ones, at most half of
 * them.  A real run's first steps pay for set-up (cuBLAS's handle, NCCL's connections, the
 * allocator's first blocks: 130 ms on an H100 against 16 ms a step after), which Horovod's and
 * tf_cnn_benchmarks' synthetic benchmarks leave out the same way (num_warmup_batches, 10). */
/* A run's steps are added one by one, as they were when each had its record, up to this many
 * (the same sum to the last bit); a longer run adds its count times its step. */
#define STEADY_ONE_BY_ONE (1L << 20)

static double steady_step(const rh_train_result *res, int warmup, long *left_out, long *first,
                          long *last) {
  long skip = warmup < res->recorded / 2 ? warmup : res->recorded / 2, seen = 0;
  double sum = 0;
  *first = *last = 0;
  for (size_t i = 0; i < res->nsteps; i++) {
    const rh_step_record *r = &res->steps[i];
    long from = skip > seen ? skip - seen : 0, n = r->count - from; /* its steps past the skip */
    seen += r->count;
    if (n <= 0) continue;
    if (*first == 0) *first = r->global_step + from;
    *last = r->global_step + r->count - 1;
    double step = r->compute + r->wait;
    if (n > STEADY_ONE_BY_ONE) sum += (double)n * step;
    else
      for (long k = 0; k < n; k++) sum += step;
  }
  *left_out = skip;
  return res->recorded > skip ? sum / (double)(res->recorded - skip) : NAN;
}

/* steps.csv's rows at most: a row is some 55 bytes, so 55 MB; a longer run's steps.csv holds its
 * first steps and the run says so. */
#define STEPS_CSV_ROWS 1000000L

/* DIR/steps.csv: one row per step rank 0 took, with the lr the recipe gave it (the first
 * STEPS_CSV_ROWS); *rows: the rows written. */
static char *steps_csv(const rh_train_result *res, long *rows) {
  char *text = NULL;
  size_t len = 0;
  *rows = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return NULL;
  fprintf(f, "step,epoch,lr,loss,step_ms,compute_ms,wait_ms,ranks,start_s\n");
  for (size_t i = 0; i < res->nsteps && *rows < STEPS_CSV_ROWS; i++) {
    const rh_step_record *r = &res->steps[i];
    char loss[32] = "";
    if (!isnan(r->loss) && r->count == 1) snprintf(loss, sizeof loss, "%.9g", r->loss);
    for (long k = 0; k < r->count && *rows < STEPS_CSV_ROWS; k++, ++*rows) {
      double lr = k == 0 ? r->lr : rh_recipe_lr(&r->schedule, r->epoch, r->step + k,
                                                r->steps_per_epoch);
      fprintf(f, "%ld,%d,%.9g,%s,%.9g,%.9g,%.9g,%d,%.9f\n", r->global_step + k, r->epoch + 1, lr,
              loss, 1e3 * (r->compute + r->wait), 1e3 * r->compute, 1e3 * r->wait, r->size,
              r->start + (double)k * (r->compute + r->wait));
    }
  }
  if (fclose(f) != 0) {
    free(text);
    return NULL;
  }
  return text;
}

int rh_cmd_run(int argc, char **argv) {
  static const struct option options[] = {
      {"out", required_argument, NULL, 'o'},      {"compare", required_argument, NULL, 'c'},
      {"timeline", required_argument, NULL, 't'}, {"resume", no_argument, NULL, 'r'},
      {"no-what-if", no_argument, NULL, 'w'},     {"warmup-steps", required_argument, NULL, 'u'},
      {"record-samples", no_argument, NULL, 's'}, {NULL, 0, NULL, 0}};
  run_flags fl = {.what_if = true, .warmup = 10};
  rh_scenario_opts opts = {0};
  int first = 0;
  int prc = rh_cli_parse("run", usage_text, argc, argv, "o:", options, run_option, &fl, &opts, &first);
  if (prc < 0 && argc - first != 1)
    prc = rh_cli_error("run", argc - first < 1 ? "which scenario? (rehearsal run FILE)"
                                               : "one scenario at a time (got %d files)", argc - first);
  if (prc >= 0) {
    rh_cli_opts_free(&opts);
    return prc;
  }
  if (!fl.timeline) { /* Horovod's variable, where the command line does not say */
    fl.timeline = rh_cli_timeline_env();
    fl.timeline_env = fl.timeline != NULL;
  }
  int rc = run_scenario(argv[first], &fl, &opts);
  rh_cli_opts_free(&opts);
  return rc;
}

static int run_scenario(const char *file, const run_flags *fl, const rh_scenario_opts *opts) {
  const char *out = fl->out, *compare = fl->compare;
  bool resume = fl->resume;
  if (resume && !out) {
    fprintf(stderr, "rehearsal: --resume reads the checkpoints of --out DIR\n");
    return 2;
  }
  if (fl->samples && !out) {
    fprintf(stderr, "rehearsal: --record-samples writes beside --out DIR's files: give --out\n");
    return 2;
  }

  double other_step = 0;
  char other_target[32] = "";
  if (compare && !rh_summary_step(compare, &other_step, other_target, sizeof other_target)) return 2;
  if (out && rh_output_dir_ok(out) != 0) return 2;
  rh_scenario sc;
  char err[1024];
  if (rh_scenario_load_opts(file, opts, &sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  run_inputs in = {0};
  int rc = prepare(&sc, out, resume, &in);
  if (rc == 0 && fl->samples) in.cfg.samples_dir = out;
  const rh_train_config *cfg = &in.cfg;
  int size = rh_scenario_size(&sc);
  int epochs_cap = rh_recipe_epochs((int)sc.recipe.epochs, cfg->epochs_divided, size);
  bool timeline_ok = true;
  if (rc == 0 && fl->timeline && strrchr(fl->timeline, '/')) { /* its directory, as --out makes its own */
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(fl->timeline, '/') - fl->timeline), fl->timeline);
    if (*dir && rh_make_dirs(dir) != 0) timeline_ok = false;
  }
  /* a file it cannot write, named by the variable that gave it (the launch would say
   * --timeline); checked here on the simulator alone, whose ranks are all this process */
  char why[1200] = "";
  if (rc == 0 && timeline_ok && fl->timeline_env && strcmp(rh_cli_target, "simulator") == 0)
    timeline_ok = rh__timeline_path_ok(fl->timeline, why, sizeof why);
  if (!timeline_ok) {
    const char *reason = strncmp(why, "--timeline ", 11) == 0 ? why + 11 : why;
    if (fl->timeline_env)
      fprintf(stderr, "rehearsal: environment variable HOROVOD_TIMELINE: %s\n",
              *reason ? reason : "cannot create its directory");
    rc = 2;
  }
  rh_train_result res;
  if (rc == 0 && rh_train_result_init(&res, epochs_cap) != RH_OK) rc = 1;
  if (rc != 0) {
    release(&in);
    rh_scenario_free(&sc);
    return rc;
  }
  rh_cli_platform_note(&sc);
  in.cfg.progress = rh_progress_start("run", (double)res_steps_total(&sc, epochs_cap), "steps");
  in.launch.config.timeline = fl->timeline;
  rh_train_job job = {.cfg = cfg, .result = &res};
  rh_launch_result lres = {0};
  int launch_rc = rh__launch(&in.launch.config, rh_train_rank, &job, &lres);
  rh_progress_end(in.cfg.progress);
  in.cfg.progress = NULL;
  /* under a launcher rank 0 reports; 2: bad input; 77: no GPU for the GPU target */
  if (lres.rank > 0 || launch_rc == 2 || launch_rc == 77) {
    rh_train_result_free(&res);
    release(&in);
    rh_scenario_free(&sc);
    if (launch_rc == 2 || launch_rc == 77) return launch_rc;
    return lres.rank > 0 ? (launch_rc ? 1 : 0) : launch_rc;
  }

  double batch = (double)cfg->batch, global = batch * size;

  char header[1024];
  char rate[96];
  if (!cfg->real && sc.compute.roofline)
    snprintf(rate, sizeof rate, "a roofline of %.4g TFLOP/s (%s)", sc.compute.peak / 1e12,
             sc.compute.peak_from >= 0 ? rh_precision_names[sc.compute.peak_from] : "peak_tflops");
  else
    snprintf(rate, sizeof rate, "%.4g TFLOP/s", sc.cluster.gpu_flops / 1e12);
  snprintf(header, sizeof header, "# rehearsal run: %s (%s)\n# %d GPUs on %d node%s, %s "
           "each; batch %.0f per worker, %.0f global; %ld steps per epoch\n", sc.name, sc.path, size,
           sc.cluster.nodes, sc.cluster.nodes > 1 ? "s" : "", rate, batch, global,
           res.steps_per_epoch);
  fputs(header, stdout);
  if (res.start_epoch > 0) printf("# resumed after epoch %d from %s\n", res.start_epoch, cfg->checkpoint_dir);
  if (resume && res.error == RH_OK && res.start_epoch >= epochs_cap) {
    printf("nothing to resume: the checkpoints in %s already hold all %d epochs\n",
           cfg->checkpoint_dir, epochs_cap);
    rh_train_result_free(&res);
    release(&in);
    rh_scenario_free(&sc);
    return 0; /* the finished run's summary.json stays as it was */
  }
  /* the epoch table: printed, and written to DIR/epochs.txt as it is */
  char *table = NULL;
  size_t table_len = 0;
  FILE *tab = open_memstream(&table, &table_len);
  if (!tab) return 1;
  /* with failures, two more columns: the time the epoch lost to them, and its ranks */
  bool failures = in.launch.has_plan || in.launch.has_elastic || in.launch.has_restart;
  bool simulated = lres.rank < 0;
  if (cfg->real)
    fprintf(tab, "#%5s %6s %11s %10s %10s %9s %11s %10s %9s %9s %9s %9s", "epoch", "steps", "time",
           "compute", "comm_wait", "step", "throughput", "lr", "loss", "accuracy", "val_loss",
           "val_acc");
  else
    fprintf(tab, "#%5s %6s %11s %10s %10s %9s %11s %10s", "epoch", "steps", "time", "compute",
           "comm_wait", "step", "throughput", "lr");
  if (failures) fprintf(tab, " %10s %6s", "lost", "ranks");
  fprintf(tab, "\n#%5s %6s %11s %10s %10s %9s %11s %10s", "", "", "(s)", "(s)", "(s)", "(ms)",
         "(samples/s)", "(last)");
  if (failures && cfg->real) fprintf(tab, " %9s %9s %9s %9s %10s", "", "", "", "", "(s)");
  else if (failures) fprintf(tab, " %10s", "(s)");
  fprintf(tab, "\n");
  json_t *root = json_object();
  json_object_set_new(root, "scenario", json_string(sc.name));
  json_object_set_new(root, "file", rh_json_text(sc.path));
  json_t *slots = json_array();
  for (int n = 0; n < sc.cluster.nodes; n++)
    json_array_append_new(slots, json_integer(sc.cluster.gpus_per_node[n]));
  json_object_set_new(root, "cluster",
                      json_pack("{s:i, s:i, s:o, s:f, s:f, s:f, s:i, s:f, s:f, s:s}", "ranks", size,
                                "nodes", sc.cluster.nodes, "gpus_per_node", slots, "gpu_tflops",
                                sc.cluster.gpu_flops / 1e12, "intra_GBps", sc.cluster.intra_bw / 1e9,
                                "intra_latency_us", sc.cluster.intra_lat * 1e6, "nics_per_node",
                                sc.cluster.nics_per_node, "nic_Gbps", sc.cluster.nic_bw * 8 / 1e9,
                                "nic_latency_us", sc.cluster.nic_lat * 1e6, "network_model",
                                rh_net_model_names[sc.cluster.net_model]));
  json_t *je = json_array();
  bool show_lr = cfg->real || sc.recipe.lr_written;
  double total = 0, compute = 0, exposed = 0;
  long all_steps = 0;
  double all_samples = 0;
  for (int e = res.start_epoch; e < res.epochs; e++) {
    rh_epoch_stats *s = &res.epochs_stats[e];
    double t = s->end - s->start, samples = epoch_samples(&res, e, batch, size);
    double thr = samples / t;
    fprintf(tab, "%6d %6ld %11.6f %10.6f %10.6f %9.4f %11.1f", e + 1, s->steps, t, s->compute,
           s->exposed_comm, 1e3 * t / (double)s->steps, thr);
    /* a timing run without a base_lr of its own has no learning rate to show */
    if (show_lr) fprintf(tab, " %10.6g", s->lr_last);
    else fprintf(tab, " %10s", "-");
    /* no metric (an epoch the job's end cut short, or no validation): gnuplot's missing-value
     * mark */
    if (cfg->real && isnan(s->train_loss))
      fprintf(tab, " %9s %9s %9s %9s", "-", "-", "-", "-");
    else if (cfg->real && !isnan(s->val_loss))
      fprintf(tab, " %9.5f %9.5f %9.5f %9.5f", s->train_loss, s->train_accuracy, s->val_loss,
             s->val_accuracy);
    else if (cfg->real)
      fprintf(tab, " %9.5f %9.5f %9s %9s", s->train_loss, s->train_accuracy, "-", "-");
    /* lost time comes from the simulator's job log; real processes have none ("-") */
    double lost = failures && simulated
                      ? rh_failure_lost_within(in.launch.config.faults, lres.log, &res,
                                               lres.end_time, s->start, s->end)
                      : NAN;
    if (failures && simulated) fprintf(tab, " %10.6f %6d", lost, s->size);
    else if (failures) fprintf(tab, " %10s %6d", "-", s->size);
    fprintf(tab, "\n");
    json_t *jep = json_pack("{s:i, s:I, s:f, s:f, s:f, s:f, s:f}", "epoch", e + 1,
                            "steps", (json_int_t)s->steps, "time_s", t, "compute_s", s->compute,
                            "comm_wait_s", s->exposed_comm, "step_ms", 1e3 * t / (double)s->steps,
                            "samples_per_s", thr);
    if (show_lr) {
      json_object_set_new(jep, "lr_first", json_real(s->lr_first));
      json_object_set_new(jep, "lr_last", json_real(s->lr_last));
    }
    if (cfg->real && !isnan(s->train_loss)) {
      json_object_set_new(jep, "train_loss", json_real(s->train_loss));
      json_object_set_new(jep, "train_accuracy", json_real(s->train_accuracy));
    }
    if (cfg->real) {
      json_object_set_new(jep, "validation_steps", json_integer(s->val_steps));
      if (!isnan(s->val_loss)) {
        json_object_set_new(jep, "val_loss", json_real(s->val_loss));
        json_object_set_new(jep, "val_accuracy", json_real(s->val_accuracy));
      }
    }
    if (failures) {
      if (simulated) json_object_set_new(jep, "lost_s", json_real(lost));
      json_object_set_new(jep, "ranks", json_integer(s->size));
      json_object_set_new(jep, "commit_s", json_real(s->commit));
      json_object_set_new(jep, "checkpoint_s", json_real(s->checkpoint));
    }
    json_array_append_new(je, jep);
    total += t;
    compute += s->compute;
    exposed += s->exposed_comm;
    all_steps += s->steps;
    all_samples += samples;
  }
  json_object_set_new(root, "epochs", je);
  fclose(tab);
  fputs(table, stdout);

  double predicted_all = 0;
  /* the losses beside the network (losses.h) run inside the step's compute; rank 0's last
   * step's stand for every step (they change only with the world's size) */
  double fw = simulated ? res.framework_step : 0, slow = simulated ? res.straggler_step : 0;
  double fw_after = simulated ? res.framework_after : 0;
  if (!(all_steps > 0 && fw - fw_after + slow <= compute / (double)all_steps &&
        fw_after <= exposed / (double)all_steps))
    fw = slow = fw_after = 0;
  double lost_step = fw + slow;
  compute -= (fw - fw_after + slow) * (double)all_steps;
  exposed -= fw_after * (double)all_steps;
  if (all_steps > 0) {
    double step_s = total / (double)all_steps, compute_step = compute / (double)all_steps;
    double thr = all_samples / total, ideal = size * batch / compute_step;
    printf("\nsummary\n");
    const char *kind = !cfg->real                       ? ""
                       : sc.model.kind == RH_KIND_SOFTMAX ? "softmax regression"
                       : sc.model.kind == RH_KIND_MLP     ? "MLP"
                                                          : rh_net_names[sc.model.network];
    const char *mname = sc.model.name ? sc.model.name : "";
    double gbytes = cfg->real ? 4 : rh_precision_grad_bytes(sc.model.precision);
    printf("  model        %s%s%s%s%s: %.0f parameters, %.1f MB of %s gradients, %.4g "
           "GFLOP/sample forward%s%s\n",
           kind, *kind && *mname ? " (" : "", mname, *kind && *mname ? ")" : "",
           !*kind && !*mname ? "(unnamed)" : "", cfg->parameters, cfg->parameters * gbytes / 1e6,
           gbytes == 2 ? "bf16" : "fp32", cfg->forward_flops / 1e9,
           cfg->real ? "" : ", ", cfg->real ? "" : rh_precision_names[sc.model.precision]);
    if (!cfg->real && sc.recipe.accumulation > 1)
      printf("  accumulate   %d micro-batches of %.0f a step; the allreduce runs in the last one's "
             "backward\n", (int)sc.recipe.accumulation, sc.recipe.micro_batch);
    if (!cfg->real && sc.recipe.framework == 1)
      printf("  buckets      PyTorch DDP: first %.4g MiB, then %.4g MiB (bucket_cap_mb), in reverse "
             "order of the layers\n", sc.recipe.first_bucket / 1048576, sc.recipe.bucket_cap / 1048576);
    printf("  fusion       %s %.4g MiB: %d bucket%s per step, largest %.4g MB; network "
           "model %s\n", !cfg->real && sc.recipe.framework == 1 ? "ddp, cap" : "threshold",
           !cfg->real && sc.recipe.framework == 1 ? sc.recipe.bucket_cap / 1048576
                                                   : sc.settings.value[RH_SETTING_FUSION_THRESHOLD] / 1048576,
           res.buckets_per_step,
           res.buckets_per_step == 1 ? "" : "s", res.bucket_bytes_max / 1e6,
           rh_net_model_names[sc.cluster.net_model]);
    json_t *jbuckets = json_array();
    char algo[32];
    double predicted = bucket_plans(&sc, &res, jbuckets, algo, sizeof algo);
    predicted_all = predicted;
    printf("  buckets      %.4f ms back to back; what a step waits is what backward does not hide\n",
           predicted * 1e3);
    json_object_set_new(root, "buckets", jbuckets);
    printf("  time         %.6f s %s over %ld steps: step %.4f ms = compute %.4f ms + ",
           total, lres.rank < 0 ? "simulated" : "measured", all_steps, 1e3 * step_s,
           1e3 * compute_step);
    if (fw > 0) printf("framework %.4f ms + ", 1e3 * fw);
    if (slow > 0) printf("waiting for the slowest rank %.4f ms + ", 1e3 * slow);
    printf("waiting for gradients %.4f ms", 1e3 * exposed / (double)all_steps);
    /* the rest of a step's share: failures (detection, recovery), commits, checkpoints */
    double rest = (total - compute - exposed) / (double)all_steps - lost_step;
    if (failures)
      printf(" + failures, commits and checkpoints %.4f ms", 1e3 * rest);
    else if (rest > 1e-9 * step_s) /* real models: validation and checkpoints between steps */
      printf(" + validation and checkpoints %.4f ms", 1e3 * rest);
    printf("\n");
    char trust[400];
    printf("  throughput   %.1f samples/s; %d GPUs without communication: %.1f; scaling "
           "efficiency %.2f%% %s\n",
           thr, size, ideal, 100 * thr / ideal,
           rh_trust_note(&sc, RH_TRUST_THROUGHPUT, trust, sizeof trust));
    json_object_set_new(root, "trust", rh_trust_json(&sc));
    if (!cfg->real) rh_workload_report(stdout, root, &sc, thr, size);
    rh_cli_print_settings(stdout, &sc, fl->timeline, fl->timeline_env);
    for (int i = 0; i < opts->nsets; i++) printf("  --set        %s\n", opts->sets[i]);
    long warm = 0, steady_first, steady_last;
    double steady = steady_step(&res, fl->warmup, &warm, &steady_first, &steady_last);
    if (isfinite(steady))
      printf("  steady       step %.4f ms, the mean of steps %ld to %ld (warm-up left out)\n",
             1e3 * steady, steady_first, steady_last);
    if (compare && isfinite(steady)) {
      double here = 1e3 * steady, err_pct = 100 * (here - other_step) / other_step;
      printf("  compared     steady step %.4f ms here (%s) against %.4f ms in %s (%s): %+.2f%%\n",
             here, lres.rank < 0 ? "simulator" : "measured", other_step, compare, other_target,
             err_pct);
      json_object_set_new(root, "compared",
                          json_pack("{s:o, s:s, s:f, s:f, s:f}", "file", rh_json_text(compare), "target",
                                    other_target, "step_ms", other_step, "this_step_ms", here,
                                    "error_percent", err_pct));
    }
    json_object_set_new(
        root, "summary",
        json_pack("{s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:f, s:s, s:f}", "time_s", total,
                  "steps", (json_int_t)all_steps, "step_ms", 1e3 * step_s, "compute_ms",
                  1e3 * compute_step, "comm_wait_ms", 1e3 * exposed / (double)all_steps,
                  "samples_per_s", thr, "ideal_samples_per_s", ideal, "scaling_efficiency",
                  thr / ideal, "buckets_per_step", res.buckets_per_step, "gradient_bytes",
                  cfg->parameters * (cfg->real ? 4 : rh_precision_grad_bytes(sc.model.precision)), "algorithm", algo, "predicted_allreduce_ms", predicted * 1e3));
    json_t *js = json_object_get(root, "summary");
    json_t *rates = json_object_get(root, "rates");
    if (rates) {
      json_object_update(js, rates);
      json_object_del(root, "rates");
    }
    if (lost_step > 0) {
      json_object_set_new(js, "framework_ms", json_real(1e3 * fw));
      json_object_set_new(js, "slowest_rank_ms", json_real(1e3 * slow));
    }
    if (isfinite(steady)) {
      json_object_set_new(js, "steady_step_ms", json_real(1e3 * steady));
      json_object_set_new(js, "warmup_steps", json_integer(warm));
    }
  }

  json_object_set_new(root, "settings", rh_cli_settings_json(&sc, fl->timeline, fl->timeline_env));
  json_object_set_new(root, "ignored_variables", rh_cli_ignored_json(&sc));
  json_t *jsets = json_array();
  for (int i = 0; i < opts->nsets; i++) json_array_append_new(jsets, rh_json_text(opts->sets[i]));
  json_object_set_new(root, "overrides", jsets);
  if (all_steps > 0 && simulated) {
    double per = (double)all_steps;
    rh_step_split split = {.step = (compute + exposed) / per + lost_step, .compute = compute / per,
                           .framework = fw, .slowest = slow, .wait = exposed / per,
                           .buckets = predicted_all};
    rh_bottleneck_report(stdout, root, &sc, &res, &split, fl->what_if && !failures);
  }

  if (cfg->check[RH_CHECK_ACCURACY] && cfg->real && res.error == RH_OK) {
    /* the last epoch's validation accuracy against one worker's of the same recipe */
    double acc = res.epochs > 0 ? res.epochs_stats[res.epochs - 1].val_accuracy : NAN;
    char given[1024], source[1200];
    if (sc.checks.accuracy_baseline) data_path(&sc, sc.checks.accuracy_baseline, given, sizeof given);
    double base = isnan(acc) ? NAN
                             : rh_accuracy_baseline(file, opts, sc.checks.accuracy_baseline ? given : NULL,
                                                    out, source, sizeof source);
    rh_train_verdict_accuracy(&res, acc, base, sc.checks.accuracy_within, source);
  }
  if (cfg->check[RH_CHECK_FITS_MEMORY]) {
    rh_memory_use mem;
    rh_workload_memory(&sc, &mem);
    if (sc.compute.capacity > 0) rh_train_verdict_memory(&res, &mem, sc.compute.capacity);
  }

  /* the failures: what each cost, and the verdicts that need the whole job */
  rh_failure_totals ft = {0};
  if (failures && !simulated) {
    /* the job log is the simulator's: on real processes the elastic driver reports the failures,
     * and the verdicts that need the log are left to the simulator */
    double commit = 0, checkpoint = 0;
    for (int e = 0; e < res.epochs; e++) {
      commit += res.epochs_stats[e].commit;
      checkpoint += res.epochs_stats[e].checkpoint;
    }
    printf("\nfailures\n  on real processes `rehearsal elastic` reports each failure and reset "
           "(its stderr); commits %.6f s, checkpoints %.6f s\n", commit, checkpoint);
    if (res.error != RH_OK) /* what ended the job where no driver could say it */
      printf("  the job ended on rank %d: %s\n", res.error_rank, res.error_detail);
    const rh_check_id log_checks[] = {RH_CHECK_NOTICED, RH_CHECK_INTERVAL};
    for (size_t i = 0; i < sizeof log_checks / sizeof log_checks[0]; i++)
      if (cfg->check[log_checks[i]]) {
        res.checks[log_checks[i]] = (rh_check_result){.skipped = true};
        snprintf(res.checks[log_checks[i]].detail, sizeof res.checks[0].detail,
                 "judged on the simulator, from its job log");
      }
  } else if (failures) {
    rh_failure_report(stdout, root, in.launch.config.faults, in.launch.config.elastic, lres.log,
                      &res, lres.end_time, &ft);
    if (cfg->check[RH_CHECK_NOTICED])
      rh_train_verdict_noticed(&res, &in.launch.plan, lres.log, lres.end_time);
    interval_study(&in.launch, cfg, &res, &ft, size, sc.cluster.nodes,
                   sc.checks.interval_tolerance, ft.end, root);
    rh_failure_totals_free(&ft);
  }

  /* a failed run is fine when the scenario expected the failure that stopped it */
  bool explained = res.error != RH_OK &&
                   ((res.checks[RH_CHECK_COLLECTIVES].ran && !res.checks[RH_CHECK_COLLECTIVES].passed &&
                     (sc.checks.expect_fail & (1u << RH_CHECK_COLLECTIVES))) ||
                    (res.checks[RH_CHECK_METRICS].ran && !res.checks[RH_CHECK_METRICS].passed &&
                     (sc.checks.expect_fail & (1u << RH_CHECK_METRICS))));

  /* verdicts: a check fails the run unless the scenario expects it to fail; checks that an
   * expected failure kept from running do not count */
  int unexpected = 0;
  json_t *jchecks = json_object();
  bool any = false;
  for (int i = 0; i < RH_CHECK_COUNT; i++) any = any || cfg->check[i];
  any = any || sc.checks.expect_fail;
  if (any) printf("\nchecks\n");
  for (int i = 0; i < RH_CHECK_COUNT; i++) {
    bool expect_fail = sc.checks.expect_fail & (1u << i);
    if (!cfg->check[i] && !expect_fail) continue;
    rh_check_result *c = &res.checks[i];
    bool passed = cfg->check[i] && c->ran && c->passed;
    const char *word = !cfg->check[i] ? "OFF " : c->skipped ? "SKIP" : !c->ran ? "----" : passed ? "PASS" : "FAIL";
    const char *detail = !cfg->check[i] ? "switched off in the scenario"
                         : c->ran || c->skipped ? c->detail : "did not run";
    /* an expected failure must really happen; otherwise a check must pass, or not apply, or not
     * have run because an expected failure stopped the run first */
    bool ok = expect_fail ? cfg->check[i] && c->ran && !c->passed
                          : passed || c->skipped || (!c->ran && explained);
    if (!ok) unexpected++;
    printf("  %s  %-22s %s%s\n", word, rh_check_names[i], detail,
           expect_fail ? (ok ? "  [expected]" : "  [expected to fail: UNEXPECTED]") : "");
    json_object_set_new(jchecks, rh_check_names[i],
                        json_pack("{s:b, s:b, s:b, s:b, s:s}", "ran", c->ran, "passed", passed,
                                  "applicable", !c->skipped && cfg->check[i], "expected_to_fail",
                                  expect_fail, "detail", detail));
  }
  json_object_set_new(root, "checks", jchecks);
  if (res.ended != RH_OK) {
    printf("\nthe elastic job ended before its last step: %s\n", rh_status_string(res.ended));
    json_object_set_new(root, "ended", json_string(rh_status_string(res.ended)));
  } else if (ft.none_left) {
    printf("\nthe job ended before its last step: no node was left, every worker died\n");
    json_object_set_new(root, "ended", json_string("no node was left"));
  }
  if (res.error != RH_OK) {
    printf("\nthe run stopped on rank %d: %s\n", res.error_rank, rh_status_string(res.error));
    if (res.error_detail[0]) printf("  %s\n", res.error_detail);
    json_object_set_new(root, "error",
                        json_pack("{s:i, s:s, s:s}", "rank", res.error_rank, "status",
                                  rh_status_string(res.error), "detail", res.error_detail));
  }
  json_object_set_new(root, "end_time_s", json_real(ft.none_left ? ft.end : lres.end_time));
  json_object_set_new(root, "target", json_string(lres.target ? lres.target : "simulator"));
  if (cfg->real && res.error == RH_OK && res.ended != RH_OK) /* no world holds parameters */
    printf("\nfinal parameters: none, the job ended below min_np\n");
  else if (cfg->real && res.error == RH_OK) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)res.params_hash);
    json_object_set_new(root, "final_parameters_fnv1a", json_string(hex));
    printf("\nfinal parameters: FNV-1a %s\n", hex);
  }

  rc = (unexpected || (launch_rc != 0 && !explained)) ? 1 : 0;
  if (out) {
    /* steps.csv: every step, up to its cap (said); none when steps went unrecorded (said) */
    long rows = 0;
    char *steps = res.unrecorded ? NULL : steps_csv(&res, &rows);
    /* params.bin: the final parameters, when the run ended with them (its index in summary.json);
     * an earlier run's is removed where this one writes none */
    bool params = steps && cfg->real && res.final_params && res.error == RH_OK;
    if (params) json_object_set_new(root, "parameters_file", params_index(&cfg->model));
    else {
      char stale[4200];
      snprintf(stale, sizeof stale, "%s/params.bin", out);
      unlink(stale);
    }
    if (steps && rows < res.recorded)
      json_object_set_new(root, "steps_csv", json_pack("{s:I, s:I}", "rows", (json_int_t)rows,
                                                       "steps", (json_int_t)res.recorded));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    char *epochs = malloc(strlen(header) + table_len + 1);
    if (epochs) sprintf(epochs, "%s%s", header, table);
    const char *names[] = {"summary.json", "epochs.txt", "steps.csv", "params.bin"},
               *texts[] = {text, epochs, steps, (const char *)res.final_params};
    size_t sizes[] = {(size_t)-1, (size_t)-1, (size_t)-1,
                      cfg->real ? cfg->model.nparams * sizeof(float) : 0};
    if (res.unrecorded) {
      printf("\nsteps.csv not written: no memory was left to record %ld of the steps\n",
             res.unrecorded);
      rc = 1;
    }
    if (!text || !epochs || (!steps && !res.unrecorded) ||
        rh_write_outputs_sized(out, steps ? (params ? 4 : 3) : 2, names, texts, sizes) != 0)
      rc = 1;
    else if (!steps)
      printf("\nwrote %s/summary.json and epochs.txt\n", out);
    else if (rows < res.recorded)
      printf("\nwrote %s/summary.json, epochs.txt and steps.csv (its first %ld steps of %ld: a "
             "row each up to %ld)\n", out, rows, res.recorded, STEPS_CSV_ROWS);
    else printf("\nwrote %s/summary.json, epochs.txt%s steps.csv%s\n", out,
                params ? "," : " and", params ? " and params.bin" : "");
    free(text);
    free(epochs);
    free(steps);
  }
  free(table);
  if (fl->timeline && lres.rank <= 0 && access(fl->timeline, F_OK) == 0)
    printf("%swrote the timeline %s (open it in ui.perfetto.dev)\n", out ? "" : "\n", fl->timeline);
  json_decref(root);
  rh__joblog_free(lres.log);
  free(lres.log);
  rh_train_result_free(&res);
  release(&in);
  rh_scenario_free(&sc);
  return rc;
}
