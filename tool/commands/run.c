/*
 * run.c: `rehearsal run FILE [--out DIR] [--resume]`.  Its stages: the flags parsed, the scenario
 * and its data loaded and prepared, the training replayed on the simulated cluster (or run on
 * real processes), then reported (run_report.c: the epoch table, the summary, the checks'
 * verdicts, and the same as summary.json under DIR, with the checkpoints in DIR/checkpoints).
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "progress.h"
#include "run.h"
#include "scenario.h"
#include "workload.h"
#include "recompute.h"
#include "train/train.h"

#include <jansson.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
      [RH_CHECK_FITS_MEMORY] = sc->model.kind == 0 && sc->compute.capacity > 0};
  for (int i = RH_CHECK_WORK_LOST; i < RH_CHECK_SHARDED; i++) {
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

void run__data_path(const rh_scenario *sc, const char *p, char *buf, size_t len) {
  data_path(sc, p, buf, len);
}

/* The training configuration the scenario gives, and which checks run (real models: all of
 * them by default; timing models: collectives_match alone). */
static void train_config(const rh_scenario *sc, bool resume, bool real, rh_train_config *c) {
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
      .seed = (uint64_t)sc->recipe.seed, .sampler_seed = (uint64_t)sc->recipe.sampler_seed,
      .shuffle = sc->recipe.shuffle,
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
      /* Horovod negotiates each bucket; DeepSpeed's and FSDP's sharded steps do not */
      .negotiate = !real && sc->recipe.framework == 0 && sc->recipe.state_sharding == 0,
      .input_rate = rh_scenario_input_rate(sc),
      .sharding = sc->recipe.state_sharding, .shard_allreduce = !sc->recipe.reduce_scatter,
      .overlap_comm = sc->recipe.overlap_comm, .reduce_bucket = sc->recipe.reduce_bucket,
      .allgather_bucket = sc->recipe.allgather_bucket,
      .gathers_ahead = sc->recipe.limit_all_gathers ? 2 : 0,
      .wrap_min_params = rh_scenario_wrap_params(sc),
      .shard_group = sc->recipe.shard_group,
      .sharded_checkpoints = sc->recipe.checkpoint_format == 1};
  for (int i = 0; i < RH_CHECK_WORK_LOST; i++) {
    int e = sc->checks.enabled[i];
    bool deflt = real && (i != RH_CHECK_RESUME || sc->checks.resume_from_epoch > 0);
    c->check[i] = e < 0 ? (deflt || i == RH_CHECK_COLLECTIVES) : e == 1;
    if (!real && i != RH_CHECK_COLLECTIVES) c->check[i] = false;
  }
  /* sharded_equivalence: on where a real model's state is sharded and its step is too */
  int e = sc->checks.enabled[RH_CHECK_SHARDED];
  bool sharded = sc->recipe.state_sharding != 0;
  c->check[RH_CHECK_SHARDED] = e < 0 ? real && sharded : e == 1 && real;
}

/* A timing model: its layers, buckets and accumulation; checkpoints only with a restart policy. */
static int prepare_timing(const rh_scenario *sc, const char *out, bool resume, run_inputs *in) {
  rh_train_config *c = &in->cfg;
  in->layers = calloc((size_t)sc->model.nlayers, sizeof *in->layers);
  if (!in->layers) return 1;
  for (int i = 0; i < sc->model.nlayers; i++) {
    const rh_layer *l = &sc->model.layers[i];
    in->layers[i] = (rh_train_layer){l->name, l->parameters, l->forward_flops, l->memory_bytes,
                                     rh_recompute_layer((rh_recompute)sc->recipe.recompute, l)};
  }
  c->layers = in->layers;
  c->nlayers = sc->model.nlayers;
  if (sc->compute.kernels) { /* each step shape priced once, for every rank */
    rh_step_cache_init(&in->steps, &sc->compute.km);
    in->has_steps = true;
    c->priced = &in->steps;
  }
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

/* A real model's data: synthetic, or the files the scenario names (relative to it), checked
 * against the recipe, and normalised.  0, 1, or 2 for bad input. */
static int prepare_data(const rh_scenario *sc, run_inputs *in) {
  rh_train_config *c = &in->cfg;
  char err[1024];
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
  return 0;
}

/* A real model's network for its data's shape and classes, and its initial parameters from
 * model.init_from.  0, 1, or 2 for bad input. */
static int prepare_network(const rh_scenario *sc, run_inputs *in) {
  rh_train_config *c = &in->cfg;
  char err[1024];
  int classes = sc->data.classes > 0 ? sc->data.classes : in->train.classes; /* 0: the labels' */
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
  return 0;
}

static int prepare(const rh_scenario *sc, const char *out, bool resume, run_inputs *in) {
  rh_train_config *c = &in->cfg;
  bool real = sc->model.kind != 0;
  train_config(sc, resume, real, c);
  if (prepare_failures(sc, in) != 0) return 1;
  if (!real) return prepare_timing(sc, out, resume, in);
  int rc = prepare_data(sc, in);
  if (rc == 0) rc = prepare_network(sc, in);
  if (rc != 0) return rc;
  bool need = c->checkpoint_every > 0 || c->checkpoint_every_steps > 0 || c->check[RH_CHECK_RESUME] ||
              resume || in->launch.has_restart;
  return need ? checkpoint_dir(out, in) : 0;
}

static void release(run_inputs *in) {
  if (in->temporary_checkpoints) rh_remove_tree(in->checkpoints);
  rh_dataset_free(&in->train);
  rh_dataset_free(&in->validation);
  rh_net_release();
  free(in->layers);
  if (in->has_steps) rh_step_cache_free(&in->steps);
  free(in->init_params);
  rh_scenario_launch_free(&in->launch);
}

/* The steps the run will take at its starting size (the progress line's total). */
static long res_steps_total(const rh_scenario *sc, int epochs) {
  long total = rh_scenario_steps_per_epoch(sc) * epochs;
  if (sc->recipe.stop_at_step > 0 && total > (long)sc->recipe.stop_at_step + 1)
    total = (long)sc->recipe.stop_at_step + 1;
  if (sc->recipe.steps > 0) total = (long)sc->recipe.steps;
  return total;
}

static int run_scenario(const char *file, const run_flags *fl, const rh_scenario_opts *opts);

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

/* The timeline's folder, made as --out makes its own; a file HOROVOD_TIMELINE names that cannot
 * be written is bad input, checked here on the simulator alone, whose ranks are all this process
 * (a launch would say --timeline).  0, or 2. */
static int timeline_ready(const run_flags *fl) {
  bool ok = true;
  if (fl->timeline && strrchr(fl->timeline, '/')) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(fl->timeline, '/') - fl->timeline), fl->timeline);
    if (*dir && rh_make_dirs(dir) != 0) ok = false;
  }
  char why[1200] = "";
  if (ok && fl->timeline_env && strcmp(rh_cli_target, "simulator") == 0)
    ok = rh__timeline_path_ok(fl->timeline, why, sizeof why);
  if (ok) return 0;
  const char *reason = strncmp(why, "--timeline ", 11) == 0 ? why + 11 : why;
  if (fl->timeline_env)
    fprintf(stderr, "rehearsal: environment variable HOROVOD_TIMELINE: %s\n",
            *reason ? reason : "cannot create its directory");
  return 2;
}

/* The flags that go together, --compare's file, --out's folder, the scenario, its data and the
 * timeline's folder: 0, or the exit status (2: bad input); j->sc is loaded when it returns 0 or
 * anything past the scenario's own errors (j->in is then the caller's to release). */
static int run_load(run_job *j, bool *loaded) {
  const run_flags *fl = j->fl;
  *loaded = false;
  if (fl->resume && !fl->out) {
    fprintf(stderr, "rehearsal: --resume reads the checkpoints of --out DIR\n");
    return 2;
  }
  if (fl->samples && !fl->out) {
    fprintf(stderr, "rehearsal: --record-samples writes beside --out DIR's files: give --out\n");
    return 2;
  }
  if (fl->compare && !rh_summary_step(fl->compare, &j->other_step, j->other_target,
                                      sizeof j->other_target))
    return 2;
  if (fl->out && rh_output_dir_ok(fl->out) != 0) return 2;
  char err[1024];
  if (rh_scenario_load_opts(j->file, j->opts, &j->sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  *loaded = true;
  int rc = prepare(&j->sc, fl->out, fl->resume, &j->in);
  if (rc == 0 && fl->samples) j->in.cfg.samples_dir = fl->out;
  return rc != 0 ? rc : timeline_ready(fl);
}

/* Runs the job on its target, with a progress line; j->res and j->lres hold what it did. */
static void run_launch(run_job *j) {
  rh_cli_platform_note(&j->sc);
  j->in.cfg.progress = rh_progress_start("run", (double)res_steps_total(&j->sc, j->epochs_cap),
                                         "steps");
  j->in.launch.config.timeline = j->fl->timeline;
  rh_train_job job = {.cfg = &j->in.cfg, .result = &j->res};
  j->launch_rc = rh__launch(&j->in.launch.config, rh_train_rank, &job, &j->lres);
  rh_progress_end(j->in.cfg.progress);
  j->in.cfg.progress = NULL;
}

static int run_scenario(const char *file, const run_flags *fl, const rh_scenario_opts *opts) {
  run_job j = {.file = file, .fl = fl, .opts = opts};
  bool loaded;
  int rc = run_load(&j, &loaded);
  if (!loaded) return rc;
  j.epochs_cap = rh_recipe_epochs((int)j.sc.recipe.epochs, j.in.cfg.epochs_divided,
                                  rh_scenario_size(&j.sc));
  if (rc == 0 && rh_train_result_init(&j.res, j.epochs_cap) != RH_OK) rc = 1;
  if (rc != 0) {
    release(&j.in);
    rh_scenario_free(&j.sc);
    return rc;
  }
  run_launch(&j);
  /* under a launcher rank 0 reports; 2: bad input; 77: no GPU for the GPU target */
  int lrc = j.launch_rc;
  if (j.lres.rank > 0 || lrc == 2 || lrc == 77)
    rc = lrc == 2 || lrc == 77 ? lrc : j.lres.rank > 0 ? (lrc ? 1 : 0) : lrc;
  else
    rc = run__report(&j);
  rh__joblog_free(j.lres.log);
  free(j.lres.log);
  rh_train_result_free(&j.res);
  release(&j.in);
  rh_scenario_free(&j.sc);
  return rc;
}
