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
 *                     step's compute, plus the communication it leaves exposed, takes MS;
 *   --steps FILE      measured step times, one a line (or a steps.csv): their relative standard
 *                     deviation is the GPU's step_spread, what a step of N ranks waits for the
 *                     slowest one (workload/losses.h).
 * Each fit prints the residuals before and after, by size.
 */
#include "cli.h"
#include "commands.h"
#include "compute_model.h"
#include "losses.h"
#include "internal.h"
#include "output.h"
#include "scenario.h"
#include "tables.h"

#include <jansson.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* --coll's names, in rh_nccl_coll's order, and the nccl-tests binaries that measure them */
static const char *const coll_names[] = {"allreduce", "broadcast", "allgather", "reduce_scatter",
                                         NULL};
static const char *const coll_files[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter"};
_Static_assert(RH_NC_ALLREDUCE == 0 && RH_NC_BROADCAST == 1 && RH_NC_ALLGATHER == 2 &&
                   RH_NC_REDUCE_SCATTER == 3, "coll_names follows rh_nccl_coll");

/* The rh_nccl_coll --coll names, or -1. */
static int coll_of(const char *name) {
  for (int i = 0; coll_names[i]; i++)
    if (strcmp(name, coll_names[i]) == 0) return i;
  return -1;
}

static const char usage_text[] =
    "usage: rehearsal calibrate FILE [--nccl-tests OUT]\n"
    "                                [--coll allreduce|allgather|broadcast|reduce_scatter]\n"
    "         [--gemm TABLE] [--step-ms MS] [--steps FILE] [--out PRESET.yaml] [--set KEY=VALUE]...\n"
    "  FILE              the scenario whose cluster the measurements were taken on\n"
    "  --nccl-tests OUT  nccl-tests output (all_reduce_perf by default, see --coll)\n"
    "  --gemm TABLE      rows \"M N K TFLOPS\" of a GEMM sweep on one GPU\n"
    "  --step-ms MS      a measured training step of the scenario, in milliseconds\n"
    "  --steps FILE      measured step times (ms, one a line, or a steps.csv): the spread of a\n"
    "                    GPU's steps (gpu.step_spread), which a step of N ranks waits on\n"
    "  --out PRESET      where the fitted node preset goes (default: standard output)\n"
    "  --set KEY=VALUE   override a scenario key (repeatable)\n"
    "  --help, --version\n"
    "Exit status: 0 success, 1 the fit failed, 2 bad input.\n";

static int usage(void) {
  return rh_cli_error("calibrate",
                      "needs FILE and at least one of --nccl-tests, --gemm, --step-ms, --steps");
}

typedef struct calib_flags {
  const char *nccl, *gemm, *out, *coll, *steps;
  double step_ms;
} calib_flags;

static int calib_option(int c, const char *v, void *arg) {
  calib_flags *f = arg;
  switch (c) {
  case 'n':
  case 'g':
  case 't':
  case 'o': {
    const char **slot = c == 'n' ? &f->nccl : c == 'g' ? &f->gemm : c == 't' ? &f->steps : &f->out;
    if (*slot)
      return rh_cli_error("calibrate", "--%s given twice",
                          c == 'n' ? "nccl-tests" : c == 'g' ? "gemm" : c == 't' ? "steps" : "out");
    *slot = v;
    return 0;
  }
  case 'c':
    if (coll_of(v) < 0)
      return rh_cli_error("calibrate", "--coll: expected allreduce, broadcast, allgather or "
                          "reduce_scatter, got \"%s\"", v);
    f->coll = v;
    return 0;
  case 's':
    if (f->step_ms > 0) return rh_cli_error("calibrate", "--step-ms given twice");
    if (!rh_table_number(v, &f->step_ms) || !(f->step_ms > 0) || f->step_ms > 1e9)
      return rh_cli_error("calibrate", "--step-ms: expected milliseconds > 0 (up to 1e9), got \"%s\"", v);
    return 0;
  default: return 2;
  }
}

/* ---- the model's view ------------------------------------------------------------------------- */

/* The model's busbw for each measured size, and the plan at the largest. */
static void predict(rh_scenario_view *v, rh_nccl_coll coll, const rh_nccl_row *m, int n, double *busbw,
                    rh_plan *largest) {
  int p = v->ctx.world.n;
  for (int i = 0; i < n; i++) {
    rh_plan plan = rh__plan(&v->ctx, coll, (size_t)m[i].bytes);
    busbw[i] = m[i].bytes / plan.seconds * rh__nccl_bus_factor(coll, p);
    if (i == 0 || m[i].bytes >= m[n - 1].bytes) *largest = plan;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of measured / model busbw over the large sizes: within 64x of the largest. */
static double large_ratio(const rh_nccl_row *m, const double *model, int n) {
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

/* The fit scales a bandwidth by the measurements within 64x of the largest size: from fewer than
 * 3 distinct sizes there, one latency-bound row can set it (a lone 1 MiB row gave 2140 GB/s where
 * the whole table gives 314), so the fit is said to rest on little, naming the file. */
enum { FIT_MIN_SIZES = 3 };
static void warn_few_sizes(const char *path, const rh_nccl_row *m, int n) {
  double big = 0;
  for (int i = 0; i < n; i++) big = fmax(big, m[i].bytes);
  int distinct = 0;
  for (int i = 0; i < n; i++) {
    bool seen = false;
    for (int j = 0; j < i && !seen; j++) seen = m[j].bytes == m[i].bytes;
    distinct += !seen && m[i].bytes >= big / 64;
  }
  if (distinct < FIT_MIN_SIZES)
    fprintf(stderr, "rehearsal calibrate: warning: %s: the fit rests on %d size%s (those within 64x "
            "of the largest, %.0f B); a bandwidth needs %d or more large sizes to be fitted "
            "meaningfully (nccl-tests -b 8 -e 8G -f 2 measures them)\n", path, distinct,
            distinct == 1 ? "" : "s", big, FIT_MIN_SIZES);
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
  rh_nccl_row *m = NULL;
  int n = 0, ranks = 0, unmeasured = 0;
  char coll_seen[64] = "";
  int rc = rh_read_nccl_tests(path, &m, &n, &ranks, coll_seen, &unmeasured);
  if (rc) return rc;
  int which = coll_of(coll_name); /* checked by the flag's parser */
  rh_nccl_coll kind = (rh_nccl_coll)which;
  if (*coll_seen && !strstr(coll_seen, coll_files[which])) {
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
    fprintf(stderr, "rehearsal calibrate: %s: cluster.network_model: --nccl-tests fits the NCCL "
                    "model; set network_model: nccl\n", sc->path);
    free(m);
    return 2;
  }
  rh_scenario_view v;
  double *before = malloc((size_t)n * sizeof *before), *after = malloc((size_t)n * sizeof *after);
  if (!before || !after || rh_scenario_view_init(sc, &v) != RH_OK) {
    free(m);
    free(before);
    free(after);
    return 1;
  }
  warn_few_sizes(path, m, n);
  rh_plan plan;
  predict(&v, kind, m, n, before, &plan);
  const char *what = "";
  for (int iter = 0; iter < 4; iter++) { /* the choice may change with the figures */
    predict(&v, kind, m, n, after, &plan);
    double ratio = large_ratio(m, after, n);
    if (fabs(ratio - 1) < 1e-6) break;
    what = scale_bottleneck(&sc->cluster, &plan, size, ratio);
  }
  predict(&v, kind, m, n, after, &plan);
  printf("# rehearsal calibrate: %s busbw from %s on %s (%d ranks); fitted %s\n",
         coll_names[which], path, sc->name, size, *what ? what : "nothing (the model already meets it)");
  if (unmeasured)
    printf("# %d row%s with busbw 0.00 (below the printed precision) left out\n", unmeasured,
           unmeasured == 1 ? "" : "s");
  printf("#%14s %12s %12s %9s %12s %9s  %s\n", "size", "measured", "before", "error", "after",
         "error", "algorithm");
  printf("#%14s %12s %12s %9s %12s %9s\n", "(B)", "(GB/s)", "(GB/s)", "(%)", "(GB/s)", "(%)");
  for (int i = 0; i < n; i++) {
    rh_plan p = rh__plan(&v.ctx, kind, (size_t)m[i].bytes);
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
  if (!(sc->compute.peak > 0)) {
    fprintf(stderr, "rehearsal calibrate: %s: a GEMM fit needs the GPU's cluster.gpu.peak_tflops\n",
            sc->path);
    return 2;
  }
  /* The model's time of a GEMM of W FLOPs is (W + h) / (peak e) = a W + b: a and b such that
   * the relative errors of the times, a R + b / T - 1 with R = W / T the measured rate, have the
   * least sum of squares.  (A line through 1/eff against 1/W, unweighted, lets the smallest
   * GEMMs, whose 1/W is largest, decide it: 10% off on the large ones.) */
  rh_gemm_row rows[RH_GEMM_ROWS];
  int n = 0, rc = rh_read_gemm_table(path, sc->compute.peak / 1e12, rows, &n);
  if (rc) return rc;
  double s11 = 0, s12 = 0, s22 = 0, y1 = 0, y2 = 0, w[RH_GEMM_ROWS], eff[RH_GEMM_ROWS];
  int distinct = 0;
  for (int i = 0; i < n; i++) {
    w[i] = rows[i].flops;
    bool seen = false;
    for (int j = 0; j < i; j++) seen = seen || w[j] == w[i];
    if (!seen) distinct++;
    eff[i] = rows[i].tflops * 1e12 / sc->compute.peak;
    double r = rows[i].tflops * 1e12, inv_t = r / w[i];
    s11 += r * r;
    s12 += r * inv_t;
    s22 += inv_t * inv_t;
    y1 += r;
    y2 += inv_t;
  }
  if (distinct < 2) {
    fprintf(stderr, "rehearsal calibrate: %s: a fit needs two GEMM sizes or more\n", path);
    return 2;
  }
  double den = s11 * s22 - s12 * s12;
  double a = den > 0 ? (y1 * s22 - y2 * s12) / den : 0, b = den > 0 ? (s11 * y2 - s12 * y1) / den : 0;
  if (!(b > 0) || !(a > 0)) { /* no fixed cost to see: the best rate alone */
    a = y1 / s11;
    b = 0;
  }
  sc->compute.gemm_efficiency = fmin(1, 1 / (a * sc->compute.peak));
  sc->compute.gemm_half = b / a;
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

/* Runs the scenario file with the command line's overrides in a child of this program, started
 * with no shell between (rh_cli_spawn_run: the path is one argument, whatever bytes it holds),
 * and reads its summary; the child's output goes to a temporary folder, removed after, its
 * stderr shown first when the run gave no summary. */
static int simulate_step(const char *scenario, const rh_scenario_opts *opts, double *step_ms,
                         double *compute_ms) {
  char dir[] = "/tmp/rehearsal-calibrate-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char summary[128];
  fflush(stdout);
  pid_t pid = rh_cli_spawn_run(NULL, scenario, opts, NULL, 0, dir);
  int status = -1;
  bool ran = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
             WEXITSTATUS(status) == 0;
  snprintf(summary, sizeof summary, "%s/summary.json", dir);
  json_error_t err;
  json_t *root = ran ? json_load_file(summary, 0, &err) : NULL;
  json_t *s = root ? json_object_get(root, "summary") : NULL;
  if (s) {
    *step_ms = json_real_value(json_object_get(s, "step_ms"));
    *compute_ms = json_real_value(json_object_get(s, "compute_ms"));
  }
  json_decref(root);
  if (!s) { /* what the run said: why it gave no step */
    char path[128];
    snprintf(path, sizeof path, "%s/stderr.txt", dir);
    FILE *f = fopen(path, "r");
    for (int c; f && (c = fgetc(f)) != EOF;) fputc(c, stderr);
    if (f) fclose(f);
  }
  return rh_remove_tree(dir) != 0 || !s;
}

static int fit_step(rh_scenario *sc, const rh_scenario_opts *opts, double measured_ms) {
  double step, compute;
  if (simulate_step(sc->path, opts, &step, &compute)) {
    fprintf(stderr, "rehearsal calibrate: %s: its run gave no step to fit (above, what it said)\n",
            sc->path);
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

/* --steps: the spread of measured step times (their standard deviation over their mean), and
 * what a step of N ranks would wait for the slowest at some N. */
static int fit_steps(rh_scenario *sc, const char *path) {
  double *t;
  int n, rc = rh_read_step_times(path, &t, &n);
  if (rc) return rc;
  if (n < 3) {
    fprintf(stderr, "rehearsal calibrate: %s: %d step time%s, at least 3 for a spread\n", path, n,
            n == 1 ? "" : "s");
    free(t);
    return 2;
  }
  double mean = 0, ss = 0;
  for (int i = 0; i < n; i++) mean += t[i];
  mean /= n;
  for (int i = 0; i < n; i++) ss += (t[i] - mean) * (t[i] - mean);
  free(t);
  double sd = sqrt(ss / (n - 1)), spread = sd / mean;
  if (spread > 0.5) {
    fprintf(stderr, "rehearsal calibrate: %s: the steps spread by %.3g of their mean (more than "
                    "half): leave the warm-up steps out\n", path, spread);
    return 2;
  }
  sc->compute.step_spread = spread;
  printf("# steps %s: %d steps, mean %.6g ms, standard deviation %.4g ms: step_spread %.4g\n", path,
         n, mean, sd, spread);
  printf("#   waiting for the slowest rank, in a share of the step's compute:");
  for (int g = 8; g <= 4096; g *= 8)
    printf(" %d GPUs %.2f%%%s", g, 100 * spread * rh_expected_max_normal(g), g < 4096 ? "," : "\n");
  return 0;
}

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
  if (sc->compute.step_spread > 0) PUT("  step_spread: %.6g\n", sc->compute.step_spread);
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

/* Where --out writes: a regular file (through a symbolic link to one), new or not, in a folder
 * that exists, and not one of the measurement files.  Says why not and returns 1. */
static int output_target(const char *out, const char *nccl, const char *gemm, const char *steps,
                         char *target, size_t len) {
  struct stat st, in;
  snprintf(target, len, "%s", out);
  if (lstat(out, &st) == 0 && S_ISLNK(st.st_mode) && !realpath(out, target)) {
    fprintf(stderr, "rehearsal calibrate: --out %s: a link to nowhere\n", out);
    return 1;
  }
  if (stat(target, &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      fprintf(stderr, "rehearsal calibrate: --out %s: not a regular file\n", out);
      return 1;
    }
    const char *inputs[] = {nccl, gemm, steps};
    for (int i = 0; i < 3; i++)
      if (inputs[i] && stat(inputs[i], &in) == 0 && in.st_dev == st.st_dev && in.st_ino == st.st_ino) {
        fprintf(stderr, "rehearsal calibrate: --out %s: is the measurement file %s\n", out, inputs[i]);
        return 1;
      }
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", target);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  if (access(slash ? (*dir ? dir : "/") : ".", W_OK) != 0) {
    fprintf(stderr, "rehearsal calibrate: --out %s: cannot write in %s: %s\n", out,
            slash ? (*dir ? dir : "/") : ".", strerror(errno));
    return 1;
  }
  return 0;
}

/* Every fitted figure finite and positive where the model needs it so, every bandwidth at least
 * 0.1 GB/s (slower than any link a GPU cluster has: a misread table gives such figures), every
 * efficiency at most 1; else says which is not, in the unit the preset writes it in. */
static int figures_sound(const rh_scenario *sc) {
  const rh_cluster *cl = &sc->cluster;
  const rh_fabric *fab = &cl->fabric;
  const double link = 0.1e9; /* B/s */
  const struct {
    const char *name;
    double v, unit, least; /* the figure and its least in B/s (FLOP/s, a fraction) */
    bool used;
  } f[] = {
      {"gpu.tflops", cl->gpu_flops, 1e12, 1e-9, true},
      {"intra.bandwidth_GBps", cl->intra_bw, 1e9, link, true},
      {"network.nic_Gbps", cl->nic_bw, 1e9 / 8, link, cl->nodes > 1},
      {"network.efficiency", fab->nic_efficiency, 1, 1e-9, true},
      {"intra.nvls_efficiency", fab->nvls_efficiency, 1, 1e-9, fab->nvls_efficiency > 0},
      {"intra.pcie_GBps", fab->pcie_bw, 1e9, link, fab->pcie_bw > 0},
      {"intra.nccl_cap_GBps", fab->intra_cap, 1e9, link, fab->intra_cap > 0},
      {"gpu.gemm_efficiency", sc->compute.gemm_efficiency, 1, 1e-9,
       sc->compute.gemm_efficiency > 0}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    if (!f[i].used) continue;
    bool fraction = strstr(f[i].name, "efficiency") != NULL;
    if (!isfinite(f[i].v) || !(f[i].v >= f[i].least) || f[i].v > 1e18 ||
        (fraction && f[i].v > 1.0000001)) {
      fprintf(stderr, "rehearsal calibrate: the fit gives %s = %g, which no cluster has%s: check "
                      "the measurements\n", f[i].name, f[i].v / f[i].unit,
              f[i].least == link ? " (every link moves at least 0.1 GB/s)" : "");
      return 2;
    }
  }
  return 0;
}

int rh_cmd_calibrate(int argc, char **argv) {
  static const struct option options[] = {
      {"nccl-tests", required_argument, NULL, 'n'}, {"coll", required_argument, NULL, 'c'},
      {"gemm", required_argument, NULL, 'g'},       {"step-ms", required_argument, NULL, 's'},
      {"steps", required_argument, NULL, 't'},      {"out", required_argument, NULL, 'o'},
      {NULL, 0, NULL, 0}};
  calib_flags fl = {.coll = "allreduce"};
  rh_scenario_opts opts = {0};
  int first = 0;
  int prc = rh_cli_parse("calibrate", usage_text, argc, argv, "", options, calib_option, &fl,
                         &opts, &first);
  if (prc >= 0) {
    rh_cli_opts_free(&opts);
    return prc;
  }
  const char *file = argc - first == 1 ? argv[first] : NULL;
  const char *nccl = fl.nccl, *gemm = fl.gemm, *out = fl.out, *coll = fl.coll;
  double step_ms = fl.step_ms;
  if (!file || (!nccl && !gemm && step_ms <= 0 && !fl.steps)) {
    rh_cli_opts_free(&opts);
    return usage();
  }
  char target[4096];
  if (out && output_target(out, nccl, gemm, fl.steps, target, sizeof target)) {
    rh_cli_opts_free(&opts);
    return 2;
  }
  rh_scenario sc;
  char err[1024];
  rh_status loaded = rh_scenario_load_opts(file, &opts, &sc, err, sizeof err);
  if (loaded != RH_OK) {
    rh_cli_opts_free(&opts);
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
    rc = fit_step(&sc, &opts, step_ms);
    snprintf(sources + strlen(sources), sizeof sources - strlen(sources),
             "%sa measured step of %.6g ms", *sources ? ", " : "", step_ms);
  }
  if (!rc && fl.steps) {
    rc = fit_steps(&sc, fl.steps);
    snprintf(sources + strlen(sources), sizeof sources - strlen(sources), "%s%s", *sources ? ", " : "",
             fl.steps);
  }
  if (!rc) rc = figures_sound(&sc);
  char *text = rc ? NULL : preset_text(&sc, sources);
  if (!rc && !text) rc = 1;
  if (!rc && out) { /* through a temporary file beside it, so that no half preset is ever read */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", target);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    if (f) chmod(tmp, 0644);
    if (!ok || rename(tmp, target) != 0) {
      fprintf(stderr, "rehearsal calibrate: %s: cannot write: %s\n", out, strerror(errno));
      if (fd >= 0) unlink(tmp);
      rc = 1;
    } else {
      printf("# wrote %s\n", out);
    }
  } else if (!rc) {
    fputs(text, stdout);
  }
  free(text);
  rh_scenario_free(&sc);
  rh_cli_opts_free(&opts);
  return rc;
}
