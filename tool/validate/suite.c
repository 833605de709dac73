/*
 * suite.c: the validation suite's file (see suite.h), read with libyaml's document loader.
 *
 *   series:
 *     - name: dlperf-resnet50-amp
 *       scenario: dlperf-resnet50-amp.yaml      # beside the suite file
 *       source: Oneflow-Inc/DLPerf, reports/dlperf_benchmark_test_report_v1.md
 *       setup: 8x V100-SXM2 per node, one 100G EDR NIC, PyTorch 20.03 DDP, AMP, batch 256
 *       bound: 12                               # points of scaling efficiency
 *       one_gpu: 802.9                          # samples/s on one GPU
 *       samples_per_s: {8: 6154.66, 16: 11991.94, 32: 22551.16}
 *     - name: horovod-vgg16
 *       ...
 *       efficiency: {128: 79, 512: 68}          # % where the source gives no throughputs
 *   points:                                     # one GPU, priced by the kernel model
 *     - name: dle-pt-rn50-a100-amp
 *       scenario: resnet50.yaml
 *       set: {cluster.gpu: a100-sxm4, model.precision: amp_fp16, recipe.batch_per_worker: 256}
 *       source: NVIDIA/DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5
 *       setup: A100-SXM4-80GB, NGC PyTorch 21.03, AMP, batch 256
 *       published: 2470                         # samples/s
 *       bound: 25                               # percent
 *       sweep: s1                               # optional: a batch sweep's points share it
 *       calibration: the reason                 # optional: a preset's figure was set from it
 *   failures:                                   # replays at scale against incident logs
 *     - name: llama3-405b-54days
 *       scenario: failures/llama3-405b-54days.yaml
 *       source: The Llama 3 Herd of Models (2024), section 3.3.4, Table 5
 *       setup: 16,384 H100, 54 days
 *       interruptions: 466                      # published, over the scenario's horizon
 *       causes: {faulty_gpu: 148, ...}          # optional: published counts by cause
 *       effective_percent: 90                   # optional, with effective_bound (points)
 *       effective_bound: 2
 *       counts_calibration: the reason          # optional: the rates are the log's own
 *       effective_calibration: the reason       # optional: a setting was chosen to give it
 */
#include "suite.h"

#include <yaml.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct reader {
  const char *path;
  yaml_document_t *doc;
  char *err;
  size_t errlen;
} reader;

static int fail(reader *r, const yaml_node_t *n, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(reader *r, const yaml_node_t *n, const char *field, const char *fmt, ...) {
  char why[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  snprintf(r->err, r->errlen, "%s:%lu: %s: %s", r->path,
           n ? (unsigned long)n->start_mark.line + 1 : 1UL, field, why);
  return 2;
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int number(reader *r, const yaml_node_t *n, const char *field, double lo, double hi,
                  double *out) {
  const char *s = scalar(n);
  char *end;
  errno = 0;
  double v = s ? strtod(s, &end) : NAN;
  if (!s || end == s || *end || errno || !isfinite(v) || v <= lo || v > hi) {
    if (isinf(hi))
      return fail(r, n, field, "expected a number above %g, got %s", lo, s ? s : "a collection");
    return fail(r, n, field, "expected a number above %g and at most %g, got %s", lo, hi,
                s ? s : "a collection");
  }
  *out = v;
  return 0;
}

static int text(reader *r, const yaml_node_t *n, const char *field, char **out) {
  const char *s = scalar(n);
  if (!s || !*s) return fail(r, n, field, "expected text");
  free(*out);
  *out = strdup(s);
  return *out ? 0 : fail(r, n, field, "out of memory");
}

/* {GPUS: value, ...}, GPU counts rising */
static int points(reader *r, const yaml_node_t *n, const char *field, rh_suite_series *s) {
  if (!n || n->type != YAML_MAPPING_NODE || n->data.mapping.pairs.top == n->data.mapping.pairs.start)
    return fail(r, n, field, "expected a mapping of GPU counts to figures, {8: 6154.7, ...}");
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
    const char *ks = scalar(k);
    char *end;
    long g = ks ? strtol(ks, &end, 10) : 0;
    if (!ks || end == ks || *end || g < 2 || g > 1 << 24)
      return fail(r, k, field, "a GPU count is a whole number from 2, got %s", ks ? ks : "a collection");
    if (s->ncounts && g <= s->gpus[s->ncounts - 1])
      return fail(r, k, field, "GPU counts go up (%ld after %d)", g, s->gpus[s->ncounts - 1]);
    if (s->ncounts == RH_SUITE_MAX_COUNTS)
      return fail(r, k, field, "at most %d GPU counts a series", RH_SUITE_MAX_COUNTS);
    double x;
    if (number(r, v, field, 0, strcmp(field, "efficiency") ? INFINITY : RH_SUITE_MAX_EFFICIENCY, &x))
      return 2;
    s->gpus[s->ncounts] = (int)g;
    s->published[s->ncounts++] = x;
  }
  return 0;
}

/* scenario: FILE, resolved against the suite's folder `dir` into *out, its line into *line */
static int scenario_path(reader *r, const yaml_node_t *v, const char *dir, char **out, int *line) {
  char *file = NULL;
  int bad = text(r, v, "scenario", &file);
  *line = (int)v->start_mark.line + 1;
  if (!bad) {
    size_t len = strlen(dir) + strlen(file) + 2;
    free(*out);
    *out = malloc(len);
    if (*out) snprintf(*out, len, "%s%s", file[0] == '/' ? "" : dir, file);
    else bad = fail(r, v, "scenario", "out of memory");
  }
  free(file);
  return bad;
}

static int one_series(reader *r, const yaml_node_t *n, const char *dir, rh_suite_series *s) {
  if (n->type != YAML_MAPPING_NODE) return fail(r, n, "series", "each series is a mapping");
  const yaml_node_t *given_at = NULL, *eff_at = NULL;
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
    const char *key = scalar(k);
    int bad = 0;
    if (!key) bad = fail(r, k, "series", "a key is a name");
    else if (!strcmp(key, "name")) bad = text(r, v, "name", &s->name);
    else if (!strcmp(key, "source")) bad = text(r, v, "source", &s->source);
    else if (!strcmp(key, "setup")) bad = text(r, v, "setup", &s->setup);
    else if (!strcmp(key, "bound")) bad = number(r, v, "bound", 0, RH_SUITE_MAX_BOUND, &s->bound);
    else if (!strcmp(key, "one_gpu")) bad = number(r, v, "one_gpu", 0, INFINITY, &s->one_gpu);
    else if (!strcmp(key, "scenario")) bad = scenario_path(r, v, dir, &s->scenario, &s->scenario_line);
    else if (!strcmp(key, "samples_per_s") || !strcmp(key, "efficiency")) {
      if (given_at || eff_at)
        bad = fail(r, k, key, "a series gives samples_per_s or efficiency, once");
      else bad = points(r, v, key, s);
      if (!strcmp(key, "samples_per_s")) given_at = k;
      else eff_at = k;
    } else {
      bad = fail(r, k, key, "unknown key (name, scenario, source, setup, bound, one_gpu, "
                            "samples_per_s, efficiency)");
    }
    if (bad) return 2;
  }
  const char *missing = !s->name ? "name" : !s->scenario ? "scenario" : !s->source ? "source"
                        : !(s->bound > 0) ? "bound" : !given_at && !eff_at ? "samples_per_s" : NULL;
  if (missing) return fail(r, n, missing, "missing");
  if (given_at && !(s->one_gpu > 0))
    return fail(r, given_at, "one_gpu", "samples_per_s needs the one-GPU throughput beside it");
  if (eff_at && s->one_gpu > 0)
    return fail(r, eff_at, "efficiency", "a series with one_gpu gives samples_per_s");
  for (const char *c = s->name; *c; c++)
    if (!(*c == '-' || *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
          (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
      return fail(r, n, "name", "\"%s\": letters, digits, '-', '_' and '.' only (a folder's name)",
                  s->name);
  return 0;
}

/* set: {KEY: VALUE, ...}: the point's overrides */
static int point_sets(reader *r, const yaml_node_t *n, rh_suite_point *pt) {
  if (!n || n->type != YAML_MAPPING_NODE) return fail(r, n, "set", "expected a mapping of keys to values");
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
    const char *k = scalar(yaml_document_get_node(r->doc, p->key));
    const char *v = scalar(yaml_document_get_node(r->doc, p->value));
    if (!k || !v || !*k || !*v) return fail(r, n, "set", "each override is KEY: VALUE");
    if (pt->nsets == RH_SUITE_MAX_SETS) return fail(r, n, "set", "at most %d overrides", RH_SUITE_MAX_SETS);
    size_t len = strlen(k) + strlen(v) + 2;
    char *kv = malloc(len);
    if (!kv) return fail(r, n, "set", "out of memory");
    snprintf(kv, len, "%s=%s", k, v);
    pt->sets[pt->nsets++] = kv;
  }
  return 0;
}


static int one_point(reader *r, const yaml_node_t *n, const char *dir, rh_suite_point *pt) {
  if (n->type != YAML_MAPPING_NODE) return fail(r, n, "points", "each point is a mapping");
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(r->doc, p->value);
    const char *key = scalar(k);
    int bad = 0;
    if (!key) bad = fail(r, k, "points", "a key is a name");
    else if (!strcmp(key, "name")) bad = text(r, v, "name", &pt->name);
    else if (!strcmp(key, "source")) bad = text(r, v, "source", &pt->source);
    else if (!strcmp(key, "setup")) bad = text(r, v, "setup", &pt->setup);
    else if (!strcmp(key, "sweep")) bad = text(r, v, "sweep", &pt->sweep);
    else if (!strcmp(key, "calibration")) bad = text(r, v, "calibration", &pt->calibration);
    else if (!strcmp(key, "published")) bad = number(r, v, "published", 0, INFINITY, &pt->published);
    else if (!strcmp(key, "bound")) bad = number(r, v, "bound", 0, RH_SUITE_MAX_BOUND, &pt->bound);
    else if (!strcmp(key, "set")) bad = point_sets(r, v, pt);
    else if (!strcmp(key, "scenario")) bad = scenario_path(r, v, dir, &pt->scenario, &pt->scenario_line);
    else bad = fail(r, k, key, "unknown key (name, scenario, set, source, setup, published, bound, "
                               "sweep, calibration)");
    if (bad) return 2;
  }
  const char *missing = !pt->name ? "name" : !pt->scenario ? "scenario" : !pt->source ? "source"
                        : !pt->setup ? "setup" : !(pt->published > 0) ? "published"
                        : !(pt->bound > 0) ? "bound" : NULL;
  return missing ? fail(r, n, missing, "missing") : 0;
}

static int load_points(reader *r, yaml_node_t *list, const char *dir, rh_suite *out) {
  if (!list || list->type != YAML_SEQUENCE_NODE || list->data.sequence.items.top == list->data.sequence.items.start)
    return fail(r, list, "points", "expected a list of points");
  int n = (int)(list->data.sequence.items.top - list->data.sequence.items.start);
  out->points = calloc((size_t)n, sizeof *out->points);
  if (!out->points) return fail(r, list, "points", "out of memory");
  for (int i = 0; i < n; i++) {
    yaml_node_t *item = yaml_document_get_node(r->doc, list->data.sequence.items.start[i]);
    out->npoints = i + 1;
    if (one_point(r, item, dir, &out->points[i])) return 2;
    for (int j = 0; j < i; j++)
      if (!strcmp(out->points[j].name, out->points[i].name))
        return fail(r, item, "name", "\"%s\" names two points", out->points[i].name);
  }
  return 0;
}

/* causes: {NAME: count, ...} */
static int failure_causes(reader *r, const yaml_node_t *n, rh_suite_failure *f) {
  if (!n || n->type != YAML_MAPPING_NODE)
    return fail(r, n, "causes", "expected a mapping of causes to published counts");
  f->causes_line = (int)n->start_mark.line + 1;
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    if (f->ncauses == RH_SUITE_MAX_CAUSES)
      return fail(r, k, "causes", "at most %d causes", RH_SUITE_MAX_CAUSES);
    if (text(r, k, "causes", &f->cause[f->ncauses])) return 2;
    f->ncauses++;
    if (number(r, yaml_document_get_node(r->doc, p->value), "causes", 0, INFINITY,
               &f->cause_count[f->ncauses - 1]))
      return 2;
  }
  return 0;
}

static int failure_key(reader *r, const char *key, yaml_node_t *k, yaml_node_t *v, const char *dir,
                       rh_suite_failure *f) {
  if (!strcmp(key, "name")) return text(r, v, "name", &f->name);
  if (!strcmp(key, "source")) return text(r, v, "source", &f->source);
  if (!strcmp(key, "setup")) return text(r, v, "setup", &f->setup);
  if (!strcmp(key, "scenario")) return scenario_path(r, v, dir, &f->scenario, &f->scenario_line);
  if (!strcmp(key, "interruptions")) return number(r, v, key, 0, INFINITY, &f->interruptions);
  if (!strcmp(key, "causes")) return failure_causes(r, v, f);
  if (!strcmp(key, "effective_percent")) return number(r, v, key, 0, 100, &f->effective);
  if (!strcmp(key, "effective_bound")) return number(r, v, key, 0, 100, &f->effective_bound);
  if (!strcmp(key, "counts_calibration")) return text(r, v, key, &f->counts_calibration);
  if (!strcmp(key, "effective_calibration")) return text(r, v, key, &f->effective_calibration);
  return fail(r, k, key, "unknown key (name, scenario, source, setup, interruptions, causes, "
                         "effective_percent, effective_bound, counts_calibration, "
                         "effective_calibration)");
}

static int one_failure(reader *r, const yaml_node_t *n, const char *dir, rh_suite_failure *f) {
  if (n->type != YAML_MAPPING_NODE) return fail(r, n, "failures", "each failure series is a mapping");
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(r->doc, p->key);
    const char *key = scalar(k);
    if (!key) return fail(r, k, "failures", "a key is a name");
    if (failure_key(r, key, k, yaml_document_get_node(r->doc, p->value), dir, f)) return 2;
  }
  const char *missing = !f->name ? "name" : !f->scenario ? "scenario" : !f->source ? "source"
                        : !f->setup ? "setup" : !(f->interruptions > 0) ? "interruptions" : NULL;
  if (missing) return fail(r, n, missing, "missing");
  if ((f->effective > 0) != (f->effective_bound > 0))
    return fail(r, n, f->effective > 0 ? "effective_bound" : "effective_percent",
                "effective_percent and effective_bound go together");
  if (f->effective_calibration && !(f->effective > 0))
    return fail(r, n, "effective_calibration", "there is no effective_percent to calibrate");
  return 0;
}

static int load_failures(reader *r, yaml_node_t *list, const char *dir, rh_suite *out) {
  if (!list || list->type != YAML_SEQUENCE_NODE || list->data.sequence.items.top == list->data.sequence.items.start)
    return fail(r, list, "failures", "expected a list of failure series");
  int n = (int)(list->data.sequence.items.top - list->data.sequence.items.start);
  out->failures = calloc((size_t)n, sizeof *out->failures);
  if (!out->failures) return fail(r, list, "failures", "out of memory");
  for (int i = 0; i < n; i++) {
    yaml_node_t *item = yaml_document_get_node(r->doc, list->data.sequence.items.start[i]);
    out->nfailures = i + 1;
    if (one_failure(r, item, dir, &out->failures[i])) return 2;
    for (int j = 0; j < i; j++)
      if (!strcmp(out->failures[j].name, out->failures[i].name))
        return fail(r, item, "name", "\"%s\" names two failure series", out->failures[i].name);
  }
  return 0;
}

/* A series' scenario is a file that opens, checked once the whole suite reads well: a series
 * whose sweep could not start would otherwise be found only after the others ran. */
static int readable(reader *r, const char *scenario, int line, const char *what, const char *name) {
  struct stat st;
  errno = 0;
  FILE *f = stat(scenario, &st) == 0 && S_ISREG(st.st_mode) ? fopen(scenario, "rb") : NULL;
  if (f) {
    fclose(f);
    return 0;
  }
  const char *why = errno == 0 || (errno != ENOENT && errno != EACCES) ? "not a readable file"
                                                                       : strerror(errno);
  snprintf(r->err, r->errlen, "%s:%d: scenario: %s: %s (%s %s)", r->path, line, scenario, why,
           what, name);
  return 2;
}

int rh_suite_load(const char *path, rh_suite *out, char *err, size_t errlen) {
  *out = (rh_suite){0};
  reader r = {.path = path, .err = err, .errlen = errlen};
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return 2;
  }
  yaml_parser_t parser;
  yaml_document_t doc;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  if (!yaml_parser_load(&parser, &doc)) {
    snprintf(err, errlen, "%s:%lu: not YAML: %s", path, (unsigned long)parser.problem_mark.line + 1,
             parser.problem ? parser.problem : "unreadable");
    yaml_parser_delete(&parser);
    fclose(f);
    return 2;
  }
  yaml_parser_delete(&parser);
  fclose(f);
  r.doc = &doc;
  /* the suite file's folder, with its slash: scenarios are named beside it */
  char dir[4096] = "";
  const char *slash = strrchr(path, '/');
  if (slash && (size_t)(slash - path) + 2 < sizeof dir) {
    memcpy(dir, path, (size_t)(slash - path) + 1);
    dir[slash - path + 1] = 0;
  }
  int rc = 0;
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  yaml_node_t *list = NULL, *pts = NULL, *fails = NULL;
  if (!root || root->type != YAML_MAPPING_NODE)
    rc = fail(&r, root, "series", "expected a mapping with series: [...], points: [...] or "
              "failures: [...]");
  for (yaml_node_pair_t *p = rc ? NULL : root->data.mapping.pairs.start;
       p && p < root->data.mapping.pairs.top && !rc; p++) {
    yaml_node_t *k = yaml_document_get_node(&doc, p->key);
    if (scalar(k) && !strcmp(scalar(k), "series")) list = yaml_document_get_node(&doc, p->value);
    else if (scalar(k) && !strcmp(scalar(k), "points")) pts = yaml_document_get_node(&doc, p->value);
    else if (scalar(k) && !strcmp(scalar(k), "failures")) fails = yaml_document_get_node(&doc, p->value);
    else rc = fail(&r, k, scalar(k) ? scalar(k) : "?", "unknown key (series, points, failures)");
  }
  if (!rc && !list && !pts && !fails)
    rc = fail(&r, root, "series", "expected a list of series, of points or of failures");
  if (!rc && pts) rc = load_points(&r, pts, dir, out);
  if (!rc && fails) rc = load_failures(&r, fails, dir, out);
  if (!rc && list && (list->type != YAML_SEQUENCE_NODE || list->data.sequence.items.top ==
                                                              list->data.sequence.items.start))
    rc = fail(&r, list, "series", "expected a list of series");
  if (!rc && list) {
    int n = (int)(list->data.sequence.items.top - list->data.sequence.items.start);
    out->series = calloc((size_t)n, sizeof *out->series);
    if (!out->series) rc = fail(&r, list, "series", "out of memory");
    for (int i = 0; i < n && !rc; i++) {
      yaml_node_t *item = yaml_document_get_node(&doc, list->data.sequence.items.start[i]);
      out->nseries = i + 1;
      rc = one_series(&r, item, dir, &out->series[i]);
      for (int j = 0; j < i && !rc; j++)
        if (!strcmp(out->series[j].name, out->series[i].name))
          rc = fail(&r, item, "name", "\"%s\" names two series", out->series[i].name);
    }
  }
  yaml_document_delete(&doc);
  for (int i = 0; i < out->nseries && !rc; i++)
    rc = readable(&r, out->series[i].scenario, out->series[i].scenario_line, "series", out->series[i].name);
  for (int i = 0; i < out->npoints && !rc; i++)
    rc = readable(&r, out->points[i].scenario, out->points[i].scenario_line, "point", out->points[i].name);
  for (int i = 0; i < out->nfailures && !rc; i++)
    rc = readable(&r, out->failures[i].scenario, out->failures[i].scenario_line, "failure series",
                  out->failures[i].name);
  if (rc) rh_suite_free(out);
  return rc;
}

void rh_suite_free(rh_suite *s) {
  for (int i = 0; i < s->nseries; i++) {
    free(s->series[i].name);
    free(s->series[i].scenario);
    free(s->series[i].source);
    free(s->series[i].setup);
  }
  free(s->series);
  for (int i = 0; i < s->npoints; i++) {
    rh_suite_point *p = &s->points[i];
    free(p->name);
    free(p->scenario);
    free(p->source);
    free(p->setup);
    free(p->calibration);
    free(p->sweep);
    for (int j = 0; j < p->nsets; j++) free(p->sets[j]);
  }
  free(s->points);
  for (int i = 0; i < s->nfailures; i++) {
    rh_suite_failure *f = &s->failures[i];
    free(f->name);
    free(f->scenario);
    free(f->source);
    free(f->setup);
    free(f->counts_calibration);
    free(f->effective_calibration);
    for (int j = 0; j < f->ncauses; j++) free(f->cause[j]);
  }
  free(s->failures);
  *s = (rh_suite){0};
}

double rh_suite_published_efficiency(const rh_suite_series *s, int k) {
  if (!(s->one_gpu > 0)) return s->published[k];
  return 100 * s->published[k] / (s->gpus[k] * s->one_gpu);
}
