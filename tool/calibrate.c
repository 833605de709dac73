/*
 * calibrate.c: `rehearsal calibrate FILE`, the scenario's cluster fitted to measurements, written
 * as a node preset a scenario can name (`node: calibrated.yaml`).
 *   --nccl-tests OUT  an nccl-tests output (its standard table) measured on the scenario's
 *                     cluster: the bottleneck the model prices at large sizes (NVLink, NVLS, or
 *                     the NICs' achievable share of line rate) is scaled until the model's busbw
 *                     meets the measured one;
 *   --gemm TABLE      rows of "M N K TFLOPS" (a GEMM sweep on one GPU): the roofline's GEMM
 *                     efficiency curve, fitted by least squares on 1/efficiency against 1/FLOPs;
 *   --step-ms MS      a measured training step: the GPU's rate is scaled until the simulated
 *                     step's compute, plus the communication it leaves exposed, takes MS.
 * Each fit prints the residuals before and after, by size.
 */
#include "commands.h"
#include "compute_model.h"
#include "internal.h"
#include "scenario.h"

#include <jansson.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int usage(void) {
  fprintf(stderr,
          "usage: rehearsal calibrate FILE [--nccl-tests OUT] [--coll allreduce|allgather|broadcast]\n"
          "         [--gemm TABLE] [--step-ms MS] [--out PRESET.yaml]\n"
          "  FILE              the scenario whose cluster the measurements were taken on\n"
          "  --nccl-tests OUT  nccl-tests output (all_reduce_perf by default, see --coll)\n"
          "  --gemm TABLE      rows \"M N K TFLOPS\" of a GEMM sweep on one GPU\n"
          "  --step-ms MS      a measured training step of the scenario, in milliseconds\n"
          "  --out PRESET      where the fitted node preset goes (default: standard output)\n");
  return 2;
}

/* ---- nccl-tests output ------------------------------------------------------------------------ */

typedef struct measured {
  double bytes, seconds, busbw; /* out of place */
} measured;

/* Reads the rows of an nccl-tests table: lines whose first word is a number; the rest (the
 * `#` header and footer, NCCL's INFO lines) are not rows.  *ranks: the "#  Rank" lines seen. */
static int read_nccl_tests(const char *path, measured **out, int *nrows, int *ranks, char *coll) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "rehearsal calibrate: %s: cannot open: %s\n", path, strerror(errno));
    return 2;
  }
  char line[4096];
  int n = 0, cap = 0, lineno = 0;
  measured *rows = NULL;
  *ranks = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#') {
      if (strstr(p, "Rank") && strstr(p, "Pid")) ++*ranks;
      const char *start = strstr(p, "Collective test starting:");
      if (start) sscanf(start + strlen("Collective test starting:"), " %63s", coll);
      continue;
    }
    char *end;
    double size = strtod(p, &end);
    if (end == p || (*end != ' ' && *end != '\t')) continue; /* not a row */
    double v[4];
    char type[32], redop[32];
    long count, root;
    if (sscanf(p, "%lf %ld %31s %31s %ld %lf %lf %lf", &v[0], &count, type, redop, &root, &v[1],
               &v[2], &v[3]) != 8) {
      fprintf(stderr,
              "rehearsal calibrate: %s:%d: expected an nccl-tests row \"size count type redop "
              "root time algbw busbw #wrong ...\", got: %s",
              path, lineno, line);
      fclose(f);
      free(rows);
      return 2;
    }
    if (!(size > 0) || !(v[1] > 0) || !(v[3] >= 0)) {
      fprintf(stderr, "rehearsal calibrate: %s:%d: size and time must be positive, got: %s", path,
              lineno, line);
      fclose(f);
      free(rows);
      return 2;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      measured *grown = realloc(rows, (size_t)cap * sizeof *rows);
      if (!grown) {
        fclose(f);
        free(rows);
        return 1;
      }
      rows = grown;
    }
    rows[n++] = (measured){size, v[1] * 1e-6, v[3] * 1e9};
  }
  fclose(f);
  if (n == 0) {
    fprintf(stderr, "rehearsal calibrate: %s: no nccl-tests rows (size count type redop root "
                    "time algbw busbw ...)\n", path);
    free(rows);
    return 2;
  }
  *out = rows;
  *nrows = n;
  return 0;
}

/* ---- the model's view ------------------------------------------------------------------------- */

typedef struct view {
  rh_topology topo;
  rh_ctx ctx;
} view;

static int view_init(view *v, const rh_scenario *sc) {
  if (rh_topology_init(&v->topo, sc->cluster.gpus_per_node, sc->cluster.nodes) != RH_OK) return 1;
  rh_ctx_init(&v->ctx, 0, &v->topo, &sc->settings, &sc->cluster, NULL, NULL);
  return 0;
}

static double bus_factor(rh_nccl_coll coll, int p) {
  return coll == RH_NC_ALLREDUCE   ? 2.0 * (p - 1) / p
         : coll == RH_NC_ALLGATHER ? (double)(p - 1) / p
                                   : 1.0;
}

/* The model's busbw for each measured size, and the plan at the largest. */
static void predict(view *v, rh_nccl_coll coll, const measured *m, int n, double *busbw,
                    rh_plan *largest) {
  int p = v->ctx.world.n;
  for (int i = 0; i < n; i++) {
    rh_plan plan = rh__plan(&v->ctx, coll, (size_t)m[i].bytes);
    busbw[i] = m[i].bytes / plan.seconds * bus_factor(coll, p);
    if (i == 0 || m[i].bytes >= m[n - 1].bytes) *largest = plan;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of measured / model busbw over the large sizes: within 64x of the largest. */
static double large_ratio(const measured *m, const double *model, int n) {
  double big = 0;
  for (int i = 0; i < n; i++) big = fmax(big, m[i].bytes);
  double *r = malloc((size_t)n * sizeof *r);
  int k = 0;
  for (int i = 0; i < n && r; i++)
    if (m[i].bytes >= big / 64) r[k++] = m[i].busbw / model[i];
  if (!r || k == 0) {
    free(r);
    return 1;
  }
  qsort(r, (size_t)k, sizeof *r, cmp_double);
  double med = k % 2 ? r[k / 2] : 0.5 * (r[k / 2 - 1] + r[k / 2]);
  free(r);
  return med;
}

/* Scales what bounds the plan's bandwidth on this cluster by `ratio`; says what it scaled. */
static const char *scale_bottleneck(rh_cluster *cl, const rh_plan *plan, int ranks, double ratio) {
  rh_fabric *f = &cl->fabric;
  if (plan->nalgo == RH_NA_NVLS) {
    f->nvls_efficiency *= ratio;
    return "intra.nvls_efficiency";
  }
  double ppn = (double)ranks / cl->nodes;
  double intra = rh__nccl_bus_bound(cl, (int)ppn, 1, RH_NA_RING);
  double whole = rh__nccl_bus_bound(cl, ranks, cl->nodes, RH_NA_RING);
  if (cl->nodes > 1 && whole < intra) {
    double nic = cl->nic_bw * f->nic_efficiency;
    if (f->pcie_bw > 0 && (f->pcie_bw < nic || (f->pcie_bw == nic && ratio > 1))) {
      f->pcie_bw *= ratio; /* the NICs' PCIe slots are what binds */
      return "intra.pcie_GBps";
    }
    double eff = f->nic_efficiency * ratio;
    if (eff <= 1) {
      f->nic_efficiency = eff;
    } else { /* past line rate: the NICs are faster than written */
      cl->nic_bw *= eff;
      f->nic_efficiency = 1;
    }
    return "network.efficiency";
  }
  if (!f->nvlink && f->pcie_bw > 0 && f->pcie_bw <= cl->intra_bw) {
    f->pcie_bw *= ratio; /* GPUs on PCIe: the slot binds */
    return "intra.pcie_GBps";
  }
  cl->intra_bw *= ratio;
  if (f->intra_cap > 0) f->intra_cap *= ratio;
  return "intra.bandwidth_GBps";
}

static int fit_nccl_tests(rh_scenario *sc, const char *path, const char *coll_name) {
  measured *m = NULL;
  int n = 0, ranks = 0;
  char coll_seen[64] = "";
  int rc = read_nccl_tests(path, &m, &n, &ranks, coll_seen);
  if (rc) return rc;
  static const char *const names[] = {"allreduce", "broadcast", "allgather"};
  static const rh_nccl_coll kinds[] = {RH_NC_ALLREDUCE, RH_NC_BROADCAST, RH_NC_ALLGATHER};
  int which = 0;
  for (int i = 0; i < 3; i++)
    if (strcmp(coll_name, names[i]) == 0) which = i;
  if (*coll_seen && !strstr(coll_seen, which == 0 ? "all_reduce" : which == 1 ? "broadcast" : "all_gather")) {
    fprintf(stderr, "rehearsal calibrate: %s: the file is %s, not %s (say --coll)\n", path,
            coll_seen, coll_name);
    free(m);
    return 2;
  }
  int size = rh_scenario_size(sc);
  if (ranks > 0 && ranks != size) {
    fprintf(stderr, "rehearsal calibrate: %s: measured on %d ranks, but %s has %d GPUs\n", path,
            ranks, sc->path, size);
    free(m);
    return 2;
  }
  if (sc->cluster.net_model != RH_NET_NCCL) {
    fprintf(stderr, "rehearsal calibrate: %s: fits the NCCL model: set cluster.network_model: "
                    "nccl\n", sc->path);
    free(m);
    return 2;
  }
  view v;
  double *before = malloc((size_t)n * sizeof *before), *after = malloc((size_t)n * sizeof *after);
  if (!before || !after || view_init(&v, sc)) {
    free(m);
    free(before);
    free(after);
    return 1;
  }
  rh_plan plan;
  predict(&v, kinds[which], m, n, before, &plan);
  const char *what = "";
  for (int iter = 0; iter < 4; iter++) { /* the choice may change with the figures */
    predict(&v, kinds[which], m, n, after, &plan);
    double ratio = large_ratio(m, after, n);
    if (fabs(ratio - 1) < 1e-6) break;
    what = scale_bottleneck(&sc->cluster, &plan, size, ratio);
  }
  predict(&v, kinds[which], m, n, after, &plan);
  printf("# rehearsal calibrate: %s busbw from %s on %s (%d ranks); fitted %s\n", names[which],
         path, sc->name, size, *what ? what : "nothing (the model already meets it)");
  printf("#%14s %12s %12s %9s %12s %9s  %s\n", "size", "measured", "before", "error", "after",
         "error", "algorithm");
  printf("#%14s %12s %12s %9s %12s %9s\n", "(B)", "(GB/s)", "(GB/s)", "(%)", "(GB/s)", "(%)");
  for (int i = 0; i < n; i++) {
    rh_plan p = rh__plan(&v.ctx, kinds[which], (size_t)m[i].bytes);
    char name[32];
    printf("%15.0f %12.3f %12.3f %+9.2f %12.3f %+9.2f  %s\n", m[i].bytes, m[i].busbw / 1e9,
           before[i] / 1e9, 100 * (before[i] - m[i].busbw) / m[i].busbw, after[i] / 1e9,
           100 * (after[i] - m[i].busbw) / m[i].busbw, rh__plan_name(&p, name, sizeof name));
  }
  rh_topology_free(&v.topo);
  free(m);
  free(before);
  free(after);
  return 0;
}

/* ---- GEMM sweep -------------------------------------------------------------------------------- */

static int fit_gemm(rh_scenario *sc, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "rehearsal calibrate: %s: cannot open: %s\n", path, strerror(errno));
    return 2;
  }
  if (!(sc->compute.peak > 0)) {
    fprintf(stderr, "rehearsal calibrate: %s: a GEMM fit needs the GPU's cluster.gpu.peak_tflops\n",
            sc->path);
    fclose(f);
    return 2;
  }
  /* 1/eff = 1/e + (h/e) (1/W): a line in 1/W */
  double sx = 0, sy = 0, sxx = 0, sxy = 0, w[256], eff[256];
  int n = 0, lineno = 0;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || !*p) continue;
    double M, N, K, tf;
    if (sscanf(p, "%lf %lf %lf %lf", &M, &N, &K, &tf) != 4 || M <= 0 || N <= 0 || K <= 0 || tf <= 0) {
      fprintf(stderr, "rehearsal calibrate: %s:%d: expected \"M N K TFLOPS\", got: %s", path, lineno,
              line);
      fclose(f);
      return 2;
    }
    if (n == 256) break;
    w[n] = 2 * M * N * K;
    eff[n] = tf * 1e12 / sc->compute.peak;
    double x = 1 / w[n], y = 1 / eff[n];
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    n++;
  }
  fclose(f);
  if (n < 2) {
    fprintf(stderr, "rehearsal calibrate: %s: a fit needs two GEMM sizes or more\n", path);
    return 2;
  }
  double den = n * sxx - sx * sx;
  double slope = den != 0 ? (n * sxy - sx * sy) / den : 0, icept = (sy - slope * sx) / n;
  if (!(icept > 0)) icept = 1;
  sc->compute.gemm_efficiency = fmin(1, 1 / icept);
  sc->compute.gemm_half = slope > 0 ? slope / icept : 0;
  rh_gpu_model g = {.sustained = sc->cluster.gpu_flops, .peak = sc->compute.peak,
                    .gemm_efficiency = sc->compute.gemm_efficiency, .gemm_half = sc->compute.gemm_half};
  printf("# rehearsal calibrate: GEMM efficiency from %s: %.4f of the peak for large GEMMs, half "
         "of that at %.4g GFLOP\n", path, sc->compute.gemm_efficiency, sc->compute.gemm_half / 1e9);
  printf("#%14s %12s %12s %9s\n", "GEMM (GFLOP)", "measured", "fitted", "error");
  printf("#%14s %12s %12s %9s\n", "", "(TFLOP/s)", "(TFLOP/s)", "(%)");
  for (int i = 0; i < n; i++) {
    double got = w[i] / rh_compute_seconds(&g, w[i], 0);
    printf("%15.4g %12.3f %12.3f %+9.2f\n", w[i] / 1e9, eff[i] * sc->compute.peak / 1e12, got / 1e12,
           100 * (got - eff[i] * sc->compute.peak) / (eff[i] * sc->compute.peak));
  }
  return 0;
}

/* ---- a measured step ------------------------------------------------------------------------- */

/* Runs the scenario (the fitted preset in its place) in a child and reads its summary. */
static int simulate_step(const char *scenario, double *step_ms, double *compute_ms) {
  char dir[] = "/tmp/rehearsal-calibrate-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char out[64], cmd[2048], summary[128];
  snprintf(out, sizeof out, "%s/run", dir);
  snprintf(cmd, sizeof cmd, "'/proc/%d/exe' run '%s' --out '%s' > /dev/null", (int)getpid(),
           scenario, out);
  int rc = system(cmd);
  snprintf(summary, sizeof summary, "%s/summary.json", out);
  json_error_t err;
  json_t *root = rc == 0 ? json_load_file(summary, 0, &err) : NULL;
  json_t *s = root ? json_object_get(root, "summary") : NULL;
  if (s) {
    *step_ms = json_real_value(json_object_get(s, "step_ms"));
    *compute_ms = json_real_value(json_object_get(s, "compute_ms"));
  }
  json_decref(root);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) return 1;
  return s ? 0 : 1;
}

static int fit_step(rh_scenario *sc, double measured_ms) {
  double step, compute;
  if (simulate_step(sc->path, &step, &compute)) {
    fprintf(stderr, "rehearsal calibrate: %s: the scenario did not run\n", sc->path);
    return 1;
  }
  /* the framework's overhead is in compute but does not scale with the GPU's rate */
  double overhead = sc->compute.overhead * 1e3;
  double exposed = step - compute, want = measured_ms - exposed - overhead;
  if (!(want > 0)) {
    fprintf(stderr, "rehearsal calibrate: --step-ms %.6g: below the %.6g ms the simulated step "
                    "waits for communication and framework alone\n", measured_ms, exposed + overhead);
    return 2;
  }
  double ratio = (compute - overhead) / want; /* > 1: the GPU is faster than written */
  sc->cluster.gpu_flops *= ratio;
  if (sc->compute.peak > 0) {
    sc->compute.peak *= ratio;
    sc->compute.memory_bw *= ratio;
  }
  printf("# rehearsal calibrate: step %.6g ms measured, %.6g ms simulated (compute %.6g ms + "
         "waiting %.6g ms): the GPU's rate x %.6f\n", measured_ms, step, compute, exposed, ratio);
  return 0;
}

/* ---- the preset ---------------------------------------------------------------------------- */

static char *preset_text(const rh_scenario *sc, const char *sources) {
  const rh_cluster *cl = &sc->cluster;
  const rh_fabric *f = &cl->fabric;
  size_t cap = 8192, len = 0;
  char *t = malloc(cap);
  if (!t) return NULL;
  time_t now = time(NULL);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%d", gmtime(&now));
#define PUT(...) len += (size_t)snprintf(t + len, cap - len, __VA_ARGS__)
  PUT("# Node preset fitted by `rehearsal calibrate` on %s from %s\n# to the cluster of %s.\n",
      when, sources, sc->path);
  PUT("# Name it in a scenario as node: <this file>.yaml (a path relative to the scenario).\n");
  PUT("gpus_per_node: %d\n", cl->gpus_per_node[0]);
  PUT("gpu:\n  tflops: %.6g\n  arch: %s\n", cl->gpu_flops / 1e12, rh_arch_names[f->arch]);
  if (cl->reduce_bw > 0) PUT("  reduce_GBps: %.6g\n", cl->reduce_bw / 1e9);
  if (cl->nccl_slowdown > 0) PUT("  nccl_slowdown: %.6g\n", cl->nccl_slowdown);
  if (sc->compute.peak > 0) {
    PUT("  peak_tflops: %.6g\n", sc->compute.peak / 1e12);
    if (sc->compute.memory_bw > 0) PUT("  memory_GBps: %.6g\n", sc->compute.memory_bw / 1e9);
    if (sc->compute.gemm_efficiency > 0) PUT("  gemm_efficiency: %.6g\n", sc->compute.gemm_efficiency);
    if (sc->compute.gemm_half > 0) PUT("  gemm_half_gflop: %.6g\n", sc->compute.gemm_half / 1e9);
  }
  PUT("intra:\n  bandwidth_GBps: %.6g\n  latency_us: %.6g\n", cl->intra_bw / 1e9, cl->intra_lat * 1e6);
  if (cl->intra_backbone_bw > 0) PUT("  backbone_GBps: %.6g\n", cl->intra_backbone_bw / 1e9);
  PUT("  nvlink: %s\n  nvswitch: %s\n", f->nvlink ? "true" : "false", f->nvswitch ? "true" : "false");
  if (f->intra_cap > 0) PUT("  nccl_cap_GBps: %.6g\n", f->intra_cap / 1e9);
  if (f->nvls_efficiency > 0) PUT("  nvls_efficiency: %.6g\n", f->nvls_efficiency);
  if (f->pcie_bw > 0) PUT("  pcie_GBps: %.6g\n", f->pcie_bw / 1e9);
  PUT("  nccl_channels: %d\n", f->channels);
  if (cl->nic_bw > 0) {
    PUT("network:\n  nics_per_node: %d\n  nic_Gbps: %.6g\n  latency_us: %.6g\n  efficiency: %.6g\n",
        cl->nics_per_node, cl->nic_bw * 8 / 1e9, cl->nic_lat * 1e6, f->nic_efficiency);
    if (f->nodes_per_leaf > 0)
      PUT("  nodes_per_leaf: %d\n  oversubscription: %.6g\n", f->nodes_per_leaf, f->oversubscription);
  }
#undef PUT
  return t;
}

int rh_cmd_calibrate(int argc, char **argv) {
  static const struct option options[] = {
      {"nccl-tests", required_argument, NULL, 'n'}, {"coll", required_argument, NULL, 'c'},
      {"gemm", required_argument, NULL, 'g'},       {"step-ms", required_argument, NULL, 's'},
      {"out", required_argument, NULL, 'o'},        {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *nccl = NULL, *gemm = NULL, *out = NULL, *coll = "allreduce";
  double step_ms = 0;
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (!args) return 1;
  args[0] = "rehearsal calibrate";
  memcpy(args + 1, argv, (size_t)argc * sizeof *args);
  optind = 1;
  int c;
  while ((c = getopt_long(argc + 1, args, "", options, NULL)) != -1) {
    switch (c) {
    case 'n': nccl = optarg; break;
    case 'g': gemm = optarg; break;
    case 'o': out = optarg; break;
    case 'c':
      if (strcmp(optarg, "allreduce") && strcmp(optarg, "broadcast") && strcmp(optarg, "allgather")) {
        free(args);
        return usage();
      }
      coll = optarg;
      break;
    case 's': {
      char *end;
      step_ms = strtod(optarg, &end);
      if (*end || !(step_ms > 0)) {
        fprintf(stderr, "rehearsal calibrate: --step-ms: expected milliseconds > 0, got \"%s\"\n",
                optarg);
        free(args);
        return 2;
      }
      break;
    }
    default: free(args); return usage();
    }
  }
  const char *file = optind == argc ? args[optind] : NULL;
  free(args);
  if (!file || (!nccl && !gemm && step_ms <= 0)) return usage();
  rh_scenario sc;
  char err[1024];
  if (rh_scenario_load(file, &sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  int rc = 0;
  for (int i = 1; i < sc.cluster.nodes && !rc; i++)
    if (sc.cluster.gpus_per_node[i] != sc.cluster.gpus_per_node[0]) {
      fprintf(stderr, "rehearsal calibrate: %s: a node preset needs the same GPUs on every node\n",
              file);
      rc = 2;
    }
  char sources[1024] = "";
  if (!rc && nccl) {
    rc = fit_nccl_tests(&sc, nccl, coll);
    snprintf(sources + strlen(sources), sizeof sources - strlen(sources), "%s", nccl);
  }
  if (!rc && gemm) {
    rc = fit_gemm(&sc, gemm);
    snprintf(sources + strlen(sources), sizeof sources - strlen(sources), "%s%s", *sources ? ", " : "", gemm);
  }
  if (!rc && step_ms > 0) {
    rc = fit_step(&sc, step_ms);
    snprintf(sources + strlen(sources), sizeof sources - strlen(sources),
             "%sa measured step of %.6g ms", *sources ? ", " : "", step_ms);
  }
  char *text = rc ? NULL : preset_text(&sc, sources);
  if (!rc && !text) rc = 1;
  if (!rc && out) { /* through a temporary file, so that no half preset is ever read */
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    FILE *f = fopen(tmp, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    if (!ok || rename(tmp, out) != 0) {
      fprintf(stderr, "rehearsal calibrate: %s: cannot write: %s\n", out, strerror(errno));
      unlink(tmp);
      rc = 1;
    } else {
      printf("# wrote %s\n", out);
    }
  } else if (!rc) {
    fputs(text, stdout);
  }
  free(text);
  rh_scenario_free(&sc);
  return rc;
}
