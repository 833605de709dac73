/*
 * collective.c: `rehearsal collective FILE`, an nccl-tests-style sweep over message sizes on the
 * scenario's cluster.  Every result carrying real numbers is checked against values computed
 * independently on each rank (#wrong); sizes whose buffers would not fit the memory limit run
 * timing-only and show N/A.  Time is the slowest rank's, from a common start after a barrier.
 */
#include "commands.h"
#include "scenario.h"
#include "internal.h"

#include <jansson.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { COLL_ALLREDUCE, COLL_BROADCAST, COLL_ALLGATHER } coll_kind;
static const char *const coll_names[] = {"allreduce", "broadcast", "allgather", NULL};
static const rh_nccl_coll coll_models[] = {RH_NC_ALLREDUCE, RH_NC_BROADCAST, RH_NC_ALLGATHER};
static const char *const op_names[] = {"sum", "avg", "min", "max", NULL};
static const char *const type_names[] = {"float", "double", "half", "int32", NULL};

typedef struct bench {
  const rh_scenario *sc;
  coll_kind coll;
  rh_dtype dtype;
  rh_op op;
  int root;
  double min_bytes, max_bytes, mem_limit;
  /* rank 0's results, one row per size */
  int rows;
  double *size, *time;
  long *wrong; /* -1: not checked (timing-only) */
  char (*algo)[32]; /* what ran, by the plan the runtime follows ("ring/simple", ...) */
  rh_status error;
} bench;

/* The value rank r contributes at element i, in double; exact in every type for <= 1024 ranks. */
static double value(const bench *b, int r, size_t i, int n) {
  if (b->coll == COLL_ALLREDUCE && (b->op == RH_SUM || b->op == RH_AVERAGE))
    return 1 + (double)((r + (int)(i % 1024)) % 2);
  double v = (double)(r + 1) * (double)(i % 3 + 1);
  return (i % 2) ? v : -v - (double)(n - r);
}

static void store(void *buf, size_t i, rh_dtype t, double v) {
  switch (t) {
  case RH_FLOAT32: ((float *)buf)[i] = (float)v; break;
  case RH_FLOAT64: ((double *)buf)[i] = v; break;
  case RH_FLOAT16: ((uint16_t *)buf)[i] = rh_float_to_half((float)v); break;
  case RH_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
  default: break;
  }
}

static double load(const void *buf, size_t i, rh_dtype t) {
  switch (t) {
  case RH_FLOAT32: return ((const float *)buf)[i];
  case RH_FLOAT64: return ((const double *)buf)[i];
  case RH_FLOAT16: return rh_half_to_float(((const uint16_t *)buf)[i]);
  case RH_INT32: return ((const int32_t *)buf)[i];
  default: return NAN;
  }
}

/* The value as the type holds it (what the rank really sent). */
static double as_type(double v, rh_dtype t) {
  switch (t) {
  case RH_FLOAT32: return (float)v;
  case RH_FLOAT16: return rh_half_to_float(rh_float_to_half((float)v));
  case RH_INT32: return (int32_t)v;
  default: return v;
  }
}

/* Expected allreduce result at element i, folded in double over the values as sent. */
static double expected_reduce(const bench *b, size_t i, int n) {
  double acc = as_type(value(b, 0, i, n), b->dtype);
  for (int r = 1; r < n; r++) {
    double v = as_type(value(b, r, i, n), b->dtype);
    if (b->op == RH_MIN) acc = v < acc ? v : acc;
    else if (b->op == RH_MAX) acc = v > acc ? v : acc;
    else acc += v;
  }
  if (b->op == RH_AVERAGE) acc = b->dtype == RH_INT32 ? trunc(acc / n) : acc / n;
  return acc;
}

/* Tolerance: exact, but an average may differ from acc / n by the rounding of the type. */
static bool matches(const bench *b, double got, double want) {
  if (b->coll == COLL_ALLREDUCE && b->op == RH_AVERAGE && b->dtype != RH_INT32) {
    double ulp = b->dtype == RH_FLOAT16 ? 0x1p-10 : b->dtype == RH_FLOAT32 ? 0x1p-23 : 0x1p-52;
    return fabs(got - want) <= 2 * ulp * fabs(want);
  }
  return got == want;
}

static long check(const bench *b, const rh_ctx *ctx, const void *out, size_t count) {
  int n = rh_size(ctx);
  long wrong = 0;
  if (b->coll == COLL_ALLREDUCE) {
    for (size_t i = 0; i < count; i++)
      if (!matches(b, load(out, i, b->dtype), expected_reduce(b, i, n))) wrong++;
  } else if (b->coll == COLL_BROADCAST) {
    for (size_t i = 0; i < count; i++)
      if (load(out, i, b->dtype) != as_type(value(b, b->root, i, n), b->dtype)) wrong++;
  } else {
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++)
        if (load(out, (size_t)r * count + i, b->dtype) != as_type(value(b, r, i, n), b->dtype))
          wrong++;
  }
  return wrong;
}

static int bench_rank(rh_ctx *ctx, void *arg) {
  bench *b = arg;
  int n = rh_size(ctx), me = rh_rank(ctx);
  size_t esz = rh_dtype_size(b->dtype);
  rh_status st = RH_OK;
  int row = 0;
  for (double bytes = b->min_bytes; bytes <= b->max_bytes && st == RH_OK; bytes *= 2, row++) {
    /* count: elements per rank (allgather: the output holds n of them) */
    size_t count = (size_t)(bytes / esz);
    if (b->coll == COLL_ALLGATHER) count /= (size_t)n;
    size_t out_count = b->coll == COLL_ALLGATHER ? count * (size_t)n : count;
    bool real = (double)(count + out_count) * esz * n <= b->mem_limit;
    double elapsed = 0;
    /* the numbers are made on the host and run from tensor memory (the GPU's, on the GPU
     * target), so what is timed is the collective alone */
    void *in = NULL, *out = NULL, *tin = NULL, *tout = NULL;
    if (real) {
      in = malloc(count * esz + 1);
      out = malloc(out_count * esz + 1);
      tin = rh_tensor_alloc(ctx, count * esz + 1);
      tout = rh_tensor_alloc(ctx, out_count * esz + 1);
      if (!in || !out || !tin || !tout) st = RH_ERR_NOMEM;
      for (size_t i = 0; st == RH_OK && i < count; i++) store(in, i, b->dtype, value(b, me, i, n));
      if (st == RH_OK && b->coll == COLL_BROADCAST && me != b->root)
        for (size_t i = 0; i < count; i++) store(in, i, b->dtype, -7);
    }
    /* on real GPUs one untimed run first, as nccl-tests warm up, so that NCCL's setup of a size
     * is not counted */
    for (int pass = rh_on_device(ctx) ? 0 : 1; pass < 2 && st == RH_OK; pass++) {
      if (real) st = rh_tensor_write(ctx, tin, in, count * esz);
      if (st == RH_OK) st = rh_barrier(ctx);
      double t0 = rh_time(ctx);
      if (st == RH_OK) {
        if (b->coll == COLL_ALLREDUCE) st = rh_allreduce(ctx, tin, tout, count, b->dtype, b->op, NULL);
        else if (b->coll == COLL_BROADCAST) st = rh_broadcast(ctx, tin, count, b->dtype, b->root);
        else st = rh_allgather(ctx, tin, count, tout, b->dtype);
      }
      elapsed = rh_time(ctx) - t0;
    }
    long wrong = -1;
    if (st == RH_OK && real) {
      bool bcast = b->coll == COLL_BROADCAST;
      st = rh_tensor_read(ctx, bcast ? in : out, bcast ? tin : tout, (bcast ? count : out_count) * esz);
      if (st == RH_OK) wrong = check(b, ctx, bcast ? in : out, count);
    }
    rh_tensor_free(ctx, tin);
    rh_tensor_free(ctx, tout);
    free(in);
    free(out);
    /* the slowest rank's time, and the wrong results of all ranks */
    int32_t w = (int32_t)(wrong < 0 ? 0 : wrong);
    if (st == RH_OK) st = rh_allreduce(ctx, &elapsed, &elapsed, 1, RH_FLOAT64, RH_MAX, NULL);
    if (st == RH_OK) st = rh_allreduce(ctx, &w, &w, 1, RH_INT32, RH_SUM, NULL);
    if (me == 0 && st == RH_OK) {
      rh_plan plan = rh__plan(ctx, coll_models[b->coll], out_count * esz);
      rh__plan_name(&plan, b->algo[row], sizeof b->algo[row]);
      b->size[row] = (double)(out_count * esz);
      b->time[row] = elapsed;
      b->wrong[row] = real ? w : -1;
      b->rows = row + 1;
    }
  }
  if (st != RH_OK && b->error == RH_OK) b->error = st;
  return st == RH_OK ? 0 : 1;
}

static int find(const char *const *names, const char *s) {
  for (int i = 0; names[i]; i++)
    if (strcasecmp(names[i], s) == 0) return i;
  return -1;
}

static int usage(void) {
  fprintf(stderr,
          "usage: rehearsal collective FILE [--coll allreduce|broadcast|allgather]\n"
          "         [--op sum|avg|min|max] [--dtype float|double|half|int32] [--root R]\n"
          "         [--min SIZE] [--max SIZE] [--mem-limit SIZE] [--out DIR]\n"
          "SIZE takes a unit: B, KiB, MiB, GiB (default 8 B to 64 MiB; mem-limit 2 GiB)\n");
  return 2;
}

static bool parse_size(const char *s, double *out) {
  return rh_settings_parse(RH_SETTING_FUSION_THRESHOLD, s, out) == RH_OK && *out >= 1;
}

int rh_cmd_collective(int argc, char **argv) {
  bench b = {.coll = COLL_ALLREDUCE, .dtype = RH_FLOAT32, .op = RH_SUM, .min_bytes = 8,
             .max_bytes = 64.0 * 1048576, .mem_limit = 2.0 * 1073741824, .error = RH_OK};
  const char *file = NULL, *out = NULL;
  static const struct option options[] = {
      {"coll", required_argument, NULL, 'c'}, {"op", required_argument, NULL, 'o'},
      {"dtype", required_argument, NULL, 't'}, {"root", required_argument, NULL, 'r'},
      {"min", required_argument, NULL, 'a'},  {"max", required_argument, NULL, 'b'},
      {"mem-limit", required_argument, NULL, 'm'}, {"out", required_argument, NULL, 'O'},
      {NULL, 0, NULL, 0}};
  char **args = calloc((size_t)argc + 2, sizeof *args); /* getopt wants the program name first */
  if (!args) return 1;
  args[0] = "rehearsal collective";
  memcpy(args + 1, argv, (size_t)argc * sizeof *args);
  optind = 1;
  opterr = 0;
  bool ok = true;
  int which = 0;
  for (int c, k; ok && (c = getopt_long(argc + 1, args, "", options, &which)) != -1;) {
    char *end = NULL;
    switch (c) {
    case 'c': ok = (k = find(coll_names, optarg)) >= 0 && (b.coll = (coll_kind)k, true); break;
    case 'o': ok = (k = find(op_names, optarg)) >= 0 && (b.op = (rh_op)k, true); break;
    case 't': ok = (k = find(type_names, optarg)) >= 0 && (b.dtype = (rh_dtype)k, true); break;
    case 'r': b.root = (int)strtol(optarg, &end, 10); ok = *optarg && !*end; break;
    case 'a': ok = parse_size(optarg, &b.min_bytes); break;
    case 'b': ok = parse_size(optarg, &b.max_bytes); break;
    case 'm': ok = parse_size(optarg, &b.mem_limit); break;
    case 'O': out = optarg; break;
    default: ok = false;
    }
    if (!ok && c != '?' && c != ':')
      fprintf(stderr, "rehearsal collective: cannot use --%s %s\n", options[which].name, optarg);
  }
  if (ok && optind == argc) file = args[optind];
  free(args);
  if (!ok) return usage();
  if (!file || b.min_bytes > b.max_bytes) return usage();
  rh_scenario sc;
  char err[1024];
  if (rh_scenario_load(file, &sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  int n = rh_scenario_size(&sc);
  if (b.root < 0 || b.root >= n) {
    fprintf(stderr, "rehearsal collective: --root %d is not a rank of %d\n", b.root, n);
    rh_scenario_free(&sc);
    return 2;
  }
  b.sc = &sc;
  int rows = (int)floor(log2(b.max_bytes / b.min_bytes)) + 1;
  b.size = calloc((size_t)rows, sizeof(double));
  b.time = calloc((size_t)rows, sizeof(double));
  b.wrong = calloc((size_t)rows, sizeof(long));
  b.algo = calloc((size_t)rows, sizeof *b.algo);
  rh_launch_config cfg = {.cluster = &sc.cluster, .settings = &sc.settings};
  rh_launch_result lres = {0};
  int rc = rh__launch(&cfg, bench_rank, &b, &lres);
  if (lres.rank > 0 || rc == 2 || rc == 77) { /* under a launcher rank 0 reports */
    free(b.size);
    free(b.time);
    free(b.wrong);
    free(b.algo);
    rh_scenario_free(&sc);
    return rc;
  }

  double factor = rh__nccl_bus_factor(coll_models[b.coll], n);
  size_t cap = 4096 + (size_t)b.rows * 128;
  char *table = malloc(cap);
  size_t len = 0;
#define EMIT(...) len += (size_t)snprintf(table + len, cap - len, __VA_ARGS__)
  EMIT("# rehearsal collective: %s on %s: %d ranks on %d node%s, network model %s\n",
       coll_names[b.coll], sc.name, n, sc.cluster.nodes, sc.cluster.nodes > 1 ? "s" : "",
       rh_net_model_names[sc.cluster.net_model]);
  EMIT("#%14s %12s %7s %6s %5s %12s %9s %9s %7s  %s\n", "size", "count", "type", "redop", "root",
       "time", "algbw", "busbw", "#wrong", "algorithm");
  EMIT("#%14s %12s %7s %6s %5s %12s %9s %9s %7s\n", "(B)", "(elements)", "", "", "", "(us)",
       "(GB/s)", "(GB/s)", "");
  long total_wrong = 0;
  double busbw_sum = 0;
  json_t *jrows = json_array();
  for (int r = 0; r < b.rows; r++) {
    double algbw = b.size[r] / b.time[r] / 1e9, busbw = algbw * factor;
    char wrong[24];
    if (b.wrong[r] < 0) snprintf(wrong, sizeof wrong, "N/A");
    else snprintf(wrong, sizeof wrong, "%ld", b.wrong[r]);
    if (b.wrong[r] > 0) total_wrong += b.wrong[r];
    busbw_sum += busbw;
    EMIT("%15.0f %12.0f %7s %6s %5d %12.3f %9.3f %9.3f %7s  %s\n", b.size[r],
         b.size[r] / rh_dtype_size(b.dtype), rh_dtype_name(b.dtype),
         b.coll == COLL_ALLREDUCE ? rh_op_name(b.op) : "none",
         b.coll == COLL_BROADCAST ? b.root : -1, b.time[r] * 1e6, algbw, busbw, wrong, b.algo[r]);
    json_array_append_new(jrows, json_pack("{s:f, s:f, s:f, s:f, s:I, s:s}", "bytes", b.size[r],
                                           "time_us", b.time[r] * 1e6, "algbw_GBps", algbw,
                                           "busbw_GBps", busbw, "wrong",
                                           (json_int_t)b.wrong[r], "algorithm", b.algo[r]));
  }
  EMIT("# Out of bounds values : %ld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
  EMIT("# Avg bus bandwidth    : %.3f\n", b.rows ? busbw_sum / b.rows : 0);
#undef EMIT
  fputs(table, stdout);
  if (rc != 0 || b.error != RH_OK) {
    fprintf(stderr, "rehearsal collective: failed: %s\n",
            rh_status_string(b.error != RH_OK ? b.error : RH_ERR_BACKEND));
    rc = 1;
  } else if (total_wrong) {
    rc = 1;
  }
  if (out && rc == 0) {
    json_t *root = json_pack("{s:s, s:s, s:s, s:s, s:i, s:o}", "scenario", sc.name, "collective",
                             coll_names[b.coll], "type", rh_dtype_name(b.dtype), "op",
                             rh_op_name(b.op), "ranks", n, "rows", jrows);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text || rh_write_output(out, "collective.txt", table) ||
        rh_write_output(out, "collective.json", text))
      rc = 1;
    free(text);
    json_decref(root);
  } else {
    json_decref(jrows);
  }
  free(table);
  free(b.size);
  free(b.time);
  free(b.wrong);
  free(b.algo);
  rh_scenario_free(&sc);
  return rc;
}
