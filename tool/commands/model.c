/*
 * model.c: `rehearsal model`: what a model expands to.  FILE is a scenario (its model section,
 * with --set overrides), a model preset's file, or a preset's name (presets/model/NAME.yaml); the
 * output is a table, one row a layer in forward order (backward makes gradients ready in the
 * reverse order), or the same as JSON with --json, in the shape tools/torch_export.py writes, so
 * that the two can be compared.
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "kernels.h"

#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: rehearsal model FILE|NAME [--json] [--kernels [--batch N]] [--set KEY=VALUE]...\n"
    "Expands a model into its layers: parameters, forward GFLOP, values read and written and\n"
    "values kept for backward, per sample, in forward order.  FILE is a scenario (its model\n"
    "section), or a model preset's file; NAME a preset of presets/model/ (gpt2, resnet50, ...).\n"
    "  --json         the expansion as JSON (the shape tools/torch_export.py --json writes)\n"
    "  --kernels      FILE a scenario: the kernels of one step on its GPU and framework, each\n"
    "                 with its shape, time and what bounds it (compute, memory, launch)\n"
    "  --batch N      --kernels: the step's samples (default: recipe.batch_per_worker)\n"
    "                 (with --json: summary.json's `kernels` object)\n"
    "  --set K=V      override a scenario key (model.seq_len=2048)\n"
    "      --help, --version\n"
    "Exit status: 0 printed, 2 bad input.\n";

typedef struct model_flags {
  bool json, kernels;
  double batch;
} model_flags;

static int model_option(int c, const char *value, void *arg) {
  model_flags *fl = arg;
  if (c == 'j') fl->json = true;
  if (c == 'k') fl->kernels = true;
  if (c == 'b') {
    char *end;
    fl->batch = strtod(value, &end);
    if (*end || !(fl->batch >= 1 && fl->batch <= 1e8)) {
      rh_cli_why("a number of samples from 1 to 1e8");
      return 2;
    }
  }
  return 0;
}

/* Whether a YAML file is a scenario (a top-level `model:` key beside others) rather than a
 * model's mapping or its section alone (`model:` its one key, as tools/torch_export.py writes). */
static bool is_scenario(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return true; /* the loader says why it cannot be read */
  char line[512];
  bool model = false, other = false; /* top-level keys: a lone `model:` is a model's section */
  while (fgets(line, sizeof line, f)) {
    bool key = (line[0] >= 'a' && line[0] <= 'z') || (line[0] >= 'A' && line[0] <= 'Z');
    if (!strncmp(line, "model:", 6)) model = true;
    else other = other || key;
  }
  fclose(f);
  return model && other;
}

static json_t *layers_json(const rh_scenario *sc) {
  json_t *a = json_array();
  for (int i = 0; i < sc->model.nlayers; i++) {
    const rh_layer *l = &sc->model.layers[i];
    json_array_append_new(a, json_pack("{s:s, s:f, s:f, s:f, s:f}", "name", l->name, "parameters",
                                       l->parameters, "forward_flops_per_sample", l->forward_flops,
                                       "traffic_per_sample", l->traffic, "activations_per_sample",
                                       l->activations));
  }
  return a;
}

static void print_table(const rh_scenario *sc, const char *file) {
  printf("# rehearsal model: %s (%s)\n", sc->model.name ? sc->model.name : "(unnamed)", file);
  printf("# %.0f parameters, %.6g GFLOP forward per sample", sc->model.parameters,
         sc->model.forward_flops / 1e9);
  if (sc->model.tokens_per_sample > 0) printf(", %.0f tokens per sample", sc->model.tokens_per_sample);
  printf("; %d layer%s in forward order\n", sc->model.nlayers, sc->model.nlayers == 1 ? "" : "s");
  printf("#%-39s %14s %14s %16s %16s\n", "layer", "parameters", "fwd_gflop", "traffic", "activations");
  printf("#%-39s %14s %14s %16s %16s\n", "", "", "(/sample)", "(values/sample)", "(values/sample)");
  for (int i = 0; i < sc->model.nlayers; i++) {
    const rh_layer *l = &sc->model.layers[i];
    printf("%-40s %14.0f %14.9g %16.0f %16.0f\n", l->name, l->parameters, l->forward_flops / 1e9,
           l->traffic, l->activations);
  }
}

/* --kernels: the scenario's step as its kernels, a table or JSON (frees the scenario). */
static int kernels(rh_scenario *sc, const char *arg, double batch, bool json) {
  int rc = 0;
  json_t *j = json && sc->compute.kernels ? rh_report_kernels_json(sc, batch) : NULL;
  if (j) {
    json_dumpf(j, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    printf("\n");
    json_decref(j);
  } else if (!sc->compute.kernels) {
    fprintf(stderr, "rehearsal model: %s: --kernels: the model is not timed by its kernels (it needs "
            "a family's layers on a GPU preset's peak, without cluster.gpu.tflops or peak_tflops)\n",
            arg);
    rc = 2;
  } else if (json || rh_report_kernels(stdout, sc, batch) != 0) {
    fprintf(stderr, "rehearsal model: out of memory\n");
    rc = 1;
  }
  rh_scenario_free(sc);
  return rc == 0 && fflush(stdout) != 0 ? 1 : rc;
}

int rh_cmd_model(int argc, char **argv) {
  static const struct option longopts[] = {{"json", no_argument, NULL, 'j'},
                                           {"kernels", no_argument, NULL, 'k'},
                                           {"batch", required_argument, NULL, 'b'},
                                           RH_CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};
  model_flags fl = {0};
  rh_scenario_opts opts = {.model_only = true};
  int first = argc;
  int rc = rh_cli_parse("model", usage_text, argc, argv, "", longopts, model_option, &fl, &opts,
                        &first);
  if (rc >= 0) return rc;
  opts.model_only = !fl.kernels; /* the kernels need the cluster's GPU and the recipe */
  if (first != argc - 1) {
    rh_cli_opts_free(&opts);
    return rh_cli_error("model", first < argc ? "takes one FILE or NAME" : "missing FILE or NAME");
  }
  const char *arg = argv[first];
  size_t n = strlen(arg);
  bool yaml = n > 5 && !strcmp(arg + n - 5, ".yaml");
  char tmp[] = "/tmp/rehearsal-model-XXXXXX";
  const char *path = arg;
  int fd = -1;
  if (fl.kernels && (!yaml || !is_scenario(arg))) {
    rh_cli_opts_free(&opts);
    return rh_cli_error("model", "--kernels needs a scenario (its GPU, framework and batch)");
  }
  if (!yaml || !is_scenario(arg)) { /* a preset: a scenario of one model, written for the loader */
    char *abs = yaml ? realpath(arg, NULL) : NULL;
    if (yaml && !abs) {
      rh_cli_opts_free(&opts);
      fprintf(stderr, "rehearsal model: %s: cannot open\n", arg);
      return 2;
    }
    fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
      free(abs);
      rh_cli_opts_free(&opts);
      perror("rehearsal model: a temporary file");
      return 2;
    }
    fprintf(f, "name: %s\nmodel: {preset: \"%s\"}\n", "model", yaml ? abs : arg);
    fclose(f);
    free(abs);
    path = tmp;
  }
  rh_scenario sc;
  char err[2048];
  rh_status st = rh_scenario_load_opts(path, &opts, &sc, err, sizeof err);
  if (path == tmp) unlink(tmp);
  rh_cli_opts_free(&opts);
  if (st != RH_OK) {
    /* a preset's errors name the preset's file; the scenario written here is no one's to fix */
    const char *shown = err;
    bool ours = path == tmp && !strncmp(err, tmp, strlen(tmp));
    if (ours) shown = strchr(err + strlen(tmp) + 1, ' ');
    fprintf(stderr, "rehearsal model: %s%s%s\n", ours ? arg : "", ours ? ":" : "",
            shown ? shown : err);
    return 2;
  }
  if (sc.model.kind != 0) {
    fprintf(stderr, "rehearsal model: %s: model.kind: %s is a small C model that trains on real "
            "numbers; a timing model has layers\n", arg, sc.model.kind == 1 ? "softmax" : "mlp");
    rh_scenario_free(&sc);
    return 2;
  }
  if (fl.kernels) return kernels(&sc, arg, fl.batch > 0 ? fl.batch : sc.recipe.micro_batch, fl.json);
  if (fl.json) {
    json_t *root = json_pack("{s:s, s:s, s:s, s:f, s:f, s:f, s:o}", "name",
                             sc.model.name ? sc.model.name : "", "source", arg, "precision",
                             rh_precision_names[sc.model.precision], "parameters",
                             sc.model.parameters, "forward_flops_per_sample",
                             sc.model.forward_flops, "tokens_per_sample",
                             sc.model.tokens_per_sample, "layers", layers_json(&sc));
    json_dumpf(root, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    printf("\n");
    json_decref(root);
  } else {
    print_table(&sc, arg);
  }
  rh_scenario_free(&sc);
  return fflush(stdout) == 0 ? 0 : 1;
}
