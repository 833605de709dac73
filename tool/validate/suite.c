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
    else if (!strcmp(key, "scenario")) {
      char *file = NULL;
      bad = text(r, v, "scenario", &file);
      s->scenario_line = (int)v->start_mark.line + 1;
      if (!bad) {
        size_t len = strlen(dir) + strlen(file) + 2;
        free(s->scenario);
        s->scenario = malloc(len);
        if (s->scenario) snprintf(s->scenario, len, "%s%s", file[0] == '/' ? "" : dir, file);
        else bad = fail(r, v, "scenario", "out of memory");
      }
      free(file);
    } else if (!strcmp(key, "samples_per_s") || !strcmp(key, "efficiency")) {
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

/* A series' scenario is a file that opens, checked once the whole suite reads well: a series
 * whose sweep could not start would otherwise be found only after the others ran. */
static int scenario_readable(reader *r, const rh_suite_series *s) {
  struct stat st;
  errno = 0;
  FILE *f = stat(s->scenario, &st) == 0 && S_ISREG(st.st_mode) ? fopen(s->scenario, "rb") : NULL;
  if (f) {
    fclose(f);
    return 0;
  }
  const char *why = errno == 0 || (errno != ENOENT && errno != EACCES) ? "not a readable file"
                                                                       : strerror(errno);
  snprintf(r->err, r->errlen, "%s:%d: scenario: %s: %s (series %s)", r->path, s->scenario_line,
           s->scenario, why, s->name);
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
  yaml_node_t *list = NULL;
  if (!root || root->type != YAML_MAPPING_NODE) rc = fail(&r, root, "series", "expected a mapping with series: [...]");
  for (yaml_node_pair_t *p = rc ? NULL : root->data.mapping.pairs.start;
       p && p < root->data.mapping.pairs.top && !rc; p++) {
    yaml_node_t *k = yaml_document_get_node(&doc, p->key);
    if (scalar(k) && !strcmp(scalar(k), "series")) list = yaml_document_get_node(&doc, p->value);
    else rc = fail(&r, k, scalar(k) ? scalar(k) : "?", "unknown key (series)");
  }
  if (!rc && (!list || list->type != YAML_SEQUENCE_NODE || list->data.sequence.items.top ==
                                                              list->data.sequence.items.start))
    rc = fail(&r, list ? list : root, "series", "expected a list of series");
  if (!rc) {
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
  for (int i = 0; i < out->nseries && !rc; i++) rc = scenario_readable(&r, &out->series[i]);
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
  *s = (rh_suite){0};
}

double rh_suite_published_efficiency(const rh_suite_series *s, int k) {
  if (!(s->one_gpu > 0)) return s->published[k];
  return 100 * s->published[k] / (s->gpus[k] * s->one_gpu);
}
