/*
 * test_calibrate.c: `rehearsal calibrate` recovers figures it was not told.  nccl-tests output is
 * made from a cluster with known figures (a slower NVLink, a NIC at 80% of line rate), in
 * nccl-tests' own layout (header, rank lines, out-of-place and in-place columns, NCCL INFO lines,
 * footer); calibrating the preset-written cluster against it must give those figures back, and
 * the fitted preset must then reproduce the measured busbw.  A GEMM sweep made from a known
 * efficiency curve and a measured step twice the simulated one are fitted the same way.  Bad
 * measurement files exit 2 naming the file and line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "run_summary.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

static char tmpdir[64];

/* tmpdir/name, in one of 32 buffers taken in turn (a test holds many paths at once) */
static char *path(const char *name) {
  static char buf[32][320];
  static int k;
  k = (k + 1) % 32;
  snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
  return buf[k];
}

static void write_file(const char *file, const char *text) {
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* A scenario around a cluster mapping (indented two spaces under cluster:). */
static char *scenario_batch(const char *name, const char *cluster, int batch) {
  char file_name[64], text[2048];
  snprintf(file_name, sizeof file_name, "%s.yaml", name);
  char *file = path(file_name);
  snprintf(text, sizeof text,
           "name: %s\ncluster:\n%smodel: {parameters: 1000, forward_gflops_per_sample: 1}\n"
           "data: {train_samples: 100000, validation_samples: 0}\n"
           "recipe: {batch_per_worker: %d, epochs: 1, checkpoint_every_epochs: 0}\n",
           name, cluster, batch);
  write_file(file, text);
  return file;
}

static char *scenario(const char *name, const char *cluster) {
  return scenario_batch(name, cluster, 1);
}

/* `rehearsal collective --coll COLL` on a scenario: its JSON rows (caller decrefs). */
static json_t *sweep_coll(const char *file, const char *tag, const char *coll) {
  char *out = path(tag), json[300];
  char *argv[] = {RH_BINARY, "collective", (char *)file, "--min", "1KiB", "--max", "4GiB",
                  "--mem-limit", "1MiB", "--out", out, "--coll", (char *)coll, NULL};
  assert_int_equal(rh_test_spawn_expect(argv, NULL, 0), 0);
  snprintf(json, sizeof json, "%s/collective.json", out);
  json_error_t err;
  json_t *root = json_load_file(json, 0, &err);
  assert_non_null(root);
  return root;
}

static json_t *sweep(const char *file, const char *tag) { return sweep_coll(file, tag, "allreduce"); }

/* The rows as nccl-tests' `perf` binary (all_reduce_perf ...) prints them, with its header, rank
 * lines and noise. */
static void as_nccl_tests_of(json_t *root, int ranks, const char *file, const char *perf) {
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fprintf(f, "# Collective test starting: %s\n", perf);
  fprintf(f, "# nThread 1 nGpus 1 minBytes 1024 maxBytes 4294967296 step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0\n#\n# Using devices\n");
  for (int r = 0; r < ranks; r++)
    fprintf(f, "#  Rank %2d Group  0 Pid  %d on node0 device %2d [0x%02x] NVIDIA A100-SXM4-80GB\n", r,
            4000 + r, r, 16 * r);
  fprintf(f, "node0:4000:4010 [0] NCCL INFO Channel 00/24 :    0   1   2   3   4   5   6   7\n"
             "#\n#                                                              out-of-place"
             "                       in-place\n"
             "#       size         count      type   redop    root     time   algbw   busbw #wrong"
             "     time   algbw   busbw #wrong\n"
             "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
             "            (us)  (GB/s)  (GB/s)\n");
  json_t *rows = json_object_get(root, "rows");
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *row = json_array_get(rows, i);
    double bytes = json_real_value(json_object_get(row, "bytes"));
    double us = json_real_value(json_object_get(row, "time_us"));
    double alg = json_real_value(json_object_get(row, "algbw_GBps"));
    double bus = json_real_value(json_object_get(row, "busbw_GBps"));
    fprintf(f, "%12.0f %13.0f     float     sum      -1 %8.6g %7.6g %7.6g      0 %8.6g %7.6g %7.6g"
               "      0\n", bytes, bytes / 4, us, alg, bus, us, alg, bus);
  }
  fprintf(f, "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 100.0\n#\n");
  fclose(f);
}

static void as_nccl_tests(json_t *root, int ranks, const char *file) {
  as_nccl_tests_of(root, ranks, file, "all_reduce_perf");
}

static int calibrate(const char *file, const char *flag, const char *value, const char *out,
                     const char *log) {
  char *argv[] = {RH_BINARY, "calibrate", (char *)file, (char *)flag, (char *)value, "--out",
                  (char *)out, NULL};
  return rh_test_spawn(argv, NULL, log);
}

/* The value of `key:` in a preset file (first occurrence), or NaN. */
static double preset_value(const char *file, const char *key) {
  char *text = rh_test_slurp(file);
  assert_non_null(text);
  char want[64];
  snprintf(want, sizeof want, "%s:", key);
  const char *at = strstr(text, want);
  double v = at ? strtod(at + strlen(want), NULL) : NAN;
  free(text);
  return v;
}

/* Every row of b within rel of a's. */
static void same_busbw(json_t *a, json_t *b, double rel) {
  json_t *ra = json_object_get(a, "rows"), *rb = json_object_get(b, "rows");
  assert_int_equal(json_array_size(ra), json_array_size(rb));
  for (size_t i = 0; i < json_array_size(ra); i++) {
    double x = json_real_value(json_object_get(json_array_get(ra, i), "busbw_GBps"));
    double y = json_real_value(json_object_get(json_array_get(rb, i), "busbw_GBps"));
    if (fabs(y - x) > rel * x) fail_msg("row %zu: busbw %.6g against %.6g measured", i, y, x);
  }
}

/* nccl-tests output made on the `truth` cluster, calibrated against the `written` one into
 * TAG-fitted.yaml (*fitted); returns the measured rows (caller decrefs). */
static json_t *measure_and_fit(const char *tag, const char *truth, const char *written, int ranks,
                               char **fitted) {
  char name[64];
  snprintf(name, sizeof name, "%s-truth", tag);
  json_t *measured = sweep(scenario(name, truth), name);
  snprintf(name, sizeof name, "%s.txt", tag);
  char *txt = path(name);
  as_nccl_tests(measured, ranks, txt);
  snprintf(name, sizeof name, "%s-fitted.yaml", tag);
  *fitted = path(name);
  snprintf(name, sizeof name, "%s-written", tag);
  char *file = scenario(name, written);
  snprintf(name, sizeof name, "%s.log", tag);
  assert_int_equal(calibrate(file, "--nccl-tests", txt, *fitted, path(name)), 0);
  return measured;
}

static void test_nvlink_round_trip(void **state) {
  (void)state;
  /* measured: a DGX A100 whose NVLink moves 200 GB/s, not NCCL's 235 */
  char *fitted;
  json_t *measured = measure_and_fit("a100", "  node: dgx-a100\n  nodes: 1\n  intra: "
                                             "{bandwidth_GBps: 200, nccl_cap_GBps: 0}\n",
                                     "  node: dgx-a100\n  nodes: 1\n", 8, &fitted);
  /* the ceiling that binds is fitted to the measured 200 */
  double cap = preset_value(fitted, "nccl_cap_GBps");
  print_message("fitted nccl_cap_GBps %.6f (measured cluster: 200)\n", cap);
  assert_true(fabs(cap - 200) < 1e-3);
  /* a scenario naming the fitted preset reproduces the measurement */
  char *again = scenario("again1", "  node: a100-fitted.yaml\n  nodes: 1\n");
  json_t *rerun = sweep(again, "again1");
  same_busbw(measured, rerun, 1e-4);
  json_decref(measured);
  json_decref(rerun);
}

static void test_nic_round_trip(void **state) {
  (void)state;
  /* measured: two DGX A100 whose NICs reach 80% of line rate */
  char *fitted;
  json_t *measured = measure_and_fit("nic", "  node: dgx-a100\n  nodes: 2\n  network: {preset: "
                                            "ib-hdr-200g, nics_per_node: 8, efficiency: 0.8}\n",
                                     "  node: dgx-a100\n  nodes: 2\n", 16, &fitted);
  double eff = preset_value(fitted, "efficiency");
  print_message("fitted network efficiency %.6f (measured cluster: 0.8)\n", eff);
  assert_true(fabs(eff - 0.8) < 1e-4);
  json_decref(measured);
}

/* A reduce-scatter sweep calibrates as an allreduce one does: its own bus factor and price
 * (NCCL's ring, p - 1 steps); an allreduce file given as reduce_scatter is refused. */
static void test_reduce_scatter_round_trip(void **state) {
  (void)state;
  const char *truth = "  node: dgx-a100\n  nodes: 2\n  network: {preset: ib-hdr-200g, "
                      "nics_per_node: 8, efficiency: 0.7}\n";
  json_t *measured = sweep_coll(scenario("rs-truth", truth), "rs-truth", "reduce_scatter");
  char *txt = path("rs.txt"), *fitted = path("rs-fitted.yaml");
  as_nccl_tests_of(measured, 16, txt, "reduce_scatter_perf");
  char *file = scenario("rs-written", "  node: dgx-a100\n  nodes: 2\n");
  char *argv[] = {RH_BINARY, "calibrate", file, "--nccl-tests", txt, "--coll", "reduce_scatter",
                  "--out", fitted, NULL};
  assert_int_equal(rh_test_spawn(argv, NULL, path("rs.log")), 0);
  double eff = preset_value(fitted, "efficiency");
  print_message("fitted network efficiency %.6f from reduce_scatter (measured cluster: 0.7)\n", eff);
  assert_true(fabs(eff - 0.7) < 1e-4);
  char *ar = path("rs-as-ar.txt");
  as_nccl_tests(measured, 16, ar);
  argv[4] = ar;
  assert_int_equal(rh_test_spawn(argv, NULL, path("rs-refused.log")), 2);
  char *log = rh_test_slurp(path("rs-refused.log"));
  if (!strstr(log, "the file is all_reduce_perf, not reduce_scatter")) fail_msg("%s", log);
  free(log);
  json_decref(measured);
}

static void test_gemm_fit(void **state) {
  (void)state;
  /* a GEMM sweep from efficiency(W) = 0.75 W / (W + 20 GFLOP) of a 100 TFLOP/s peak */
  char *table = path("gemm.txt"), *fitted = path("gemm-fitted.yaml"), *log = path("gemm.log");
  FILE *f = fopen(table, "w");
  assert_non_null(f);
  fprintf(f, "# M N K TFLOPS\n");
  for (int m = 256; m <= 16384; m *= 2) {
    double w = 2.0 * m * m * m, eff = 0.75 * w / (w + 20e9);
    fprintf(f, "%d %d %d %.12g\n", m, m, m, 100 * eff);
  }
  fclose(f);
  char *file = scenario("gemm", "  nodes: 1\n  gpus_per_node: 1\n  gpu: {tflops: 50, peak_tflops: "
                                "100}\n  intra: {bandwidth_GBps: 100}\n");
  assert_int_equal(calibrate(file, "--gemm", table, fitted, log), 0);
  assert_true(fabs(preset_value(fitted, "gemm_efficiency") - 0.75) < 1e-6);
  assert_true(fabs(preset_value(fitted, "gemm_half_gflop") - 20) < 1e-4);
}

/* The number after `key:` on the first line that starts (after indentation) with it, or NaN. */
static double yaml_value(const char *file, const char *key) {
  char *text = rh_test_slurp(file);
  assert_non_null(text);
  double v = NAN;
  size_t n = strlen(key);
  for (char *line = text; line && isnan(v); line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    char *p = line + strspn(line, " ");
    if (strncmp(p, key, n) == 0 && p[n] == ':') v = strtod(p + n + 1, NULL);
  }
  free(text);
  return v;
}

/* The H100 figures shipped are what calibrate fits from the measurements shipped beside them
 * (presets/measured/, taken on an H100 by bench_gpu), and the scenario they serve predicts the
 * steps measured there within 5%. */
static void test_h100_measurements(void **state) {
  (void)state;
  struct {
    const char *shipped, *table; /* where the figures are, what they were fitted from */
  } fits[] = {
      {"presets/gpu/h100-sxm-fp32.yaml", "presets/measured/h100-gemm-fp32.txt"},
      {"presets/gpu/h100-sxm-bf16.yaml", "presets/measured/h100-gemm-bf16.txt"},
      {"scenarios/h100-1gpu.yaml", "presets/measured/h100-compute-calls.txt"},
  };
  for (size_t i = 0; i < sizeof fits / sizeof *fits; i++) {
    const char *shipped = fits[i].shipped, *file = shipped;
    char name[64];
    if (strncmp(shipped, "presets/", 8) == 0) { /* a GPU preset: a scenario around it */
      char preset[64], cluster[256];
      snprintf(preset, sizeof preset, "%.*s", (int)strcspn(strrchr(shipped, '/') + 1, "."),
               strrchr(shipped, '/') + 1);
      snprintf(cluster, sizeof cluster, "  nodes: 1\n  gpus_per_node: 1\n  gpu: {preset: %s}\n"
               "  intra: {bandwidth_GBps: 100}\n", preset);
      snprintf(name, sizeof name, "h100-%zu", i);
      file = scenario(name, cluster);
    }
    snprintf(name, sizeof name, "h100-fit-%zu.yaml", i);
    char *fitted = path(name);
    snprintf(name, sizeof name, "h100-fit-%zu.log", i);
    assert_int_equal(calibrate(file, "--gemm", fits[i].table, fitted, path(name)), 0);
    for (int k = 0; k < 2; k++) {
      const char *key = k ? "gemm_half_gflop" : "gemm_efficiency";
      double want = yaml_value(shipped, key), got = yaml_value(fitted, key);
      if (!(fabs(got - want) <= 1e-5 * want))
        fail_msg("%s: %s %.9g, fitted from %s: %.9g", shipped, key, want, fits[i].table, got);
    }
  }
  /* the prediction against the measured steps */
  json_t *root = rh_test_run_summary("scenarios/h100-1gpu.yaml", path("h100-sim"));
  double predicted =
      json_real_value(json_object_get(json_object_get(root, "summary"), "steady_step_ms"));
  json_decref(root);
  FILE *f = fopen("presets/measured/h100-1gpu-steps.txt", "r");
  assert_non_null(f);
  char line[256];
  int runs = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    double measured = strtod(line, NULL);
    print_message("H100 steady step: predicted %.4f ms, measured %.4f ms (%+.2f%%)\n", predicted,
                  measured, 100 * (predicted - measured) / measured);
    assert_true(fabs(predicted - measured) <= 0.05 * measured);
    runs++;
  }
  fclose(f);
  assert_int_equal(runs, 3);
}

static void test_step_fit(void **state) {
  (void)state;
  /* one GPU at 10 TFLOP/s: a step of batch 10 x 3 GFLOP is 3 ms; measured 6 ms: 5 TFLOP/s */
  char *file = scenario_batch("step", "  nodes: 1\n  gpus_per_node: 1\n  gpu: {tflops: 10}\n  "
                                      "intra: {bandwidth_GBps: 100}\n", 10);
  char *fitted = path("step-fitted.yaml"), *log = path("step.log");
  assert_int_equal(calibrate(file, "--step-ms", "6", fitted, log), 0);
  assert_true(fabs(preset_value(fitted, "tflops") - 5) < 1e-6);
}

/* No path reaches a shell: a scenario named with a quote and `;` (and one with `$( )`) is run
 * for the step fit as any other.  Before, its path went into a command line for system(), and
 * the first name ran `touch PWNED`. */
static void test_scenario_path_reaches_no_shell(void **state) {
  (void)state;
  /* the shell would have run in the test's folder: PWNED would appear there */
  const char *names[] = {"c'; touch PWNED; echo '", "$(touch PWNED)", "new\nline"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *name = names[i];
    char *file = scenario_batch("hostile", "  nodes: 1\n  gpus_per_node: 1\n  gpu: {tflops: 10}\n  "
                                           "intra: {bandwidth_GBps: 100}\n", 10);
    char *moved = path(name);
    char target[400];
    snprintf(target, sizeof target, "%s.yaml", moved);
    assert_int_equal(rename(file, target), 0);
    char *fitted = path("hostile-fitted.yaml"), *log = path("hostile.log");
    int rc = calibrate(target, "--step-ms", "6", fitted, log);
    assert_int_equal(access("PWNED", F_OK), -1);
    assert_int_equal(rc, 0);
    assert_true(fabs(preset_value(fitted, "tflops") - 5) < 1e-6);
  }
}

/* --steps: the spread of measured steps, sd (n - 1) over the mean, worked out here: 90, 100, 110
 * ms have mean 100 and standard deviation 10, a spread of 0.1; a steps.csv's step_ms column (its
 * empty lr and loss fields kept in place) reads the same; bad files are refused, nothing written. */
static void test_steps_spread(void **state) {
  (void)state;
  char *file = scenario_batch("spread", "  nodes: 1\n  gpus_per_node: 8\n  gpu: {tflops: 10}\n  "
                                        "intra: {bandwidth_GBps: 100}\n", 10);
  char *lines = path("steps.txt"), *csv = path("steps.csv"), *log = path("steps.log");
  write_file(lines, "# measured\n90\n\n100\n110\n");
  write_file(csv, "step,epoch,lr,loss,step_ms,compute_ms,wait_ms,ranks,start_s\n"
                  "1,0,,,90,1,0,1,0\n2,0,,,100,1,0,1,0\n3,0,,,110,1,0,1,0\n");
  char *a = path("spread-a.yaml"), *b = path("spread-b.yaml");
  assert_int_equal(calibrate(file, "--steps", lines, a, log), 0);
  assert_int_equal(calibrate(file, "--steps", csv, b, log), 0);
  assert_true(fabs(preset_value(a, "step_spread") - 0.1) < 1e-6);
  assert_true(fabs(preset_value(b, "step_spread") - 0.1) < 1e-6);
  /* bad step files: a word, a zero, two steps, a CSV without step_ms */
  const char *bad[] = {"90\nfast\n100\n", "90\n0\n100\n", "90\n100\n", "a,b\n1,2\n"};
  const char *said_[] = {"bad-steps.txt:2: step_ms", "bad-steps.txt:2: step_ms", "2 step times",
                         "without a step_ms column"};
  for (int i = 0; i < 4; i++) {
    char *f = path("bad-steps.txt"), *never = path("never-steps.yaml");
    write_file(f, bad[i]);
    assert_int_equal(calibrate(file, "--steps", f, never, log), 2);
    char *said = rh_test_slurp(log);
    if (!strstr(said, said_[i])) fail_msg("case %d: %s", i, said);
    free(said);
    struct stat st;
    assert_int_not_equal(stat(never, &st), 0);
  }
}

static void test_bad_measurements(void **state) {
  (void)state;
  char *file = scenario("bad", "  node: dgx-a100\n  nodes: 1\n"), *out = path("never.yaml");
  char *log = path("bad.log");
  /* a file that is not there, a row cut short, no rows at all, other ranks */
  assert_int_equal(calibrate(file, "--nccl-tests", path("missing.txt"), out, log), 2);
  char *cut = path("cut.txt");
  write_file(cut, "# header\n     1024   256   float   sum   -1   12.5\n");
  assert_int_equal(calibrate(file, "--nccl-tests", cut, out, log), 2);
  char *said = rh_test_slurp(log);
  assert_non_null(strstr(said, "cut.txt:2: algbw: expected an nccl-tests row"));
  free(said);
  char *none = path("none.txt");
  write_file(none, "# nothing measured\n");
  assert_int_equal(calibrate(file, "--nccl-tests", none, out, log), 2);
  char *four = path("four.txt");
  write_file(four, "#  Rank  0 Group  0 Pid 1 on a device 0 [0x1] GPU\n#  Rank  1 Group  0 Pid 2 on a "
                   "device 1 [0x2] GPU\n 1024 256 float sum -1 10.0 0.1 0.2 0\n");
  assert_int_equal(calibrate(file, "--nccl-tests", four, out, log), 2);
  said = rh_test_slurp(log);
  assert_non_null(strstr(said, "measured on 2 ranks, but"));
  free(said);
  assert_int_equal(calibrate(file, "--step-ms", "-3", out, log), 2);
  assert_int_equal(calibrate(file, "--step-ms", "inf", out, log), 2);
  /* numbers that are not: infinite, hexadecimal, with units */
  const char *rows[] = {" 1024 256 float sum -1 10.0 0.1 inf 0\n", " 1024 256 float sum -1 0x10 0.1 0.2 0\n",
                        " 1024 256 float sum -1 10.0 0.1 0.2GB 0\n", " 1024 256 float sum -1 10.0 0.1 -5 0\n"};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    char *odd = path("odd.txt");
    write_file(odd, rows[i]);
    if (calibrate(file, "--nccl-tests", odd, out, log) != 2) fail_msg("accepted: %s", rows[i]);
  }
  /* an INFO line longer than any buffer is not read as rows */
  char *longline = path("long.txt");
  FILE *lf = fopen(longline, "w");
  assert_non_null(lf);
  fprintf(lf, "node0:1:2 [0] NCCL INFO Channel 00/24 :");
  for (int i = 0; i < 2000; i++) fprintf(lf, " %d", i % 8);
  fprintf(lf, " 8589934592 2147483648 float sum -1 1 8589.9 1.0 0\n");
  fclose(lf);
  assert_int_equal(calibrate(file, "--nccl-tests", longline, out, log), 2); /* no rows at all */
  said = rh_test_slurp(log);
  assert_non_null(strstr(said, "no nccl-tests rows"));
  free(said);
  /* --out: not into a folder, not over the measurement, not into a folder that is not there */
  assert_int_equal(calibrate(file, "--nccl-tests", cut, tmpdir, log), 2);
  assert_int_equal(calibrate(file, "--nccl-tests", cut, cut, log), 2);
  assert_int_equal(calibrate(file, "--nccl-tests", cut, path("no/such/dir/p.yaml"), log), 2);
  /* nothing was written */
  FILE *f = fopen(out, "r");
  assert_null(f);
}

/* calibrate FILE --nccl-tests TABLE --out tmpdir/TAG-fitted.yaml: its exit code; its stdout and
 * stderr in tmpdir/TAG.out and TAG.err, the preset's path in *fitted. */
static int calibrate_table(const char *file, const char *table, const char *tag, char **fitted) {
  char name[64];
  snprintf(name, sizeof name, "%s-fitted.yaml", tag);
  *fitted = path(name);
  char *argv[] = {RH_BINARY, "calibrate", (char *)file, "--nccl-tests", (char *)table, "--out",
                  *fitted, NULL};
  char out[64], err[64];
  snprintf(out, sizeof out, "%s.out", tag);
  snprintf(err, sizeof err, "%s.err", tag);
  return rh_test_spawn(argv, path(out), path(err));
}

static bool file_says(const char *tag, const char *ext, const char *what) {
  char name[64];
  snprintf(name, sizeof name, "%s.%s", tag, ext);
  char *text = rh_test_slurp(path(name));
  bool found = text && strstr(text, what);
  if (!found) print_message("%s: %s\n", name, text ? text : "(none)");
  free(text);
  return found;
}

/* nccl-tests prints bandwidths with two decimals, so an output from its default -b 8 starts with
 * rows whose busbw is 0.00.  Two such outputs fit, those rows left out: one in nccl-tests' format
 * from 8 B to 1 GiB on 2 H100, and one published as printed (all_reduce_perf -b 8 -e 8G -f 2 -g 1
 * on 2 x 8 H100, github.com/lessizzmore/create-a3mega-ztan-fork, ztan-NCCL-test-result). */
static void test_outputs_from_8_bytes(void **state) {
  (void)state;
  char *fitted;
  char *two = scenario("h100x2", "  node: dgx-h100\n  nodes: 1\n  gpus_per_node: 2\n"
                                 "  network_model: nccl\n");
  assert_int_equal(calibrate_table(two, "tests/data/nccl-tests/h100-2gpu-from-8B.txt", "from8",
                                   &fitted), 0);
  assert_true(file_says("from8", "out", "# 3 rows with busbw 0.00"));
  char *a3 = scenario("a3mega", "  node: dgx-h100\n  nodes: 2\n  gpus_per_node: 8\n"
                                "  network_model: nccl\n");
  assert_int_equal(calibrate_table(a3, "tests/data/nccl-tests/a3mega-2x8-h100.txt", "a3mega",
                                   &fitted), 0);
  assert_true(file_says("a3mega", "out", "# 6 rows with busbw 0.00"));
  double intra = yaml_value(fitted, "bandwidth_GBps");
  print_message("a3mega: fitted intra.bandwidth_GBps %.6g\n", intra);
  assert_true(intra > 250 && intra < 400); /* the 8 GiB row measured 338.82 GB/s of busbw */
  /* nothing but 0.00: nothing to fit, and said so */
  char *zeros = path("zeros.txt");
  write_file(zeros, "           8             2     float     sum      -1     8.00    0.00    0.00"
                    "       0     8.00    0.00    0.00       0\n");
  assert_int_equal(calibrate_table(two, zeros, "zeros", &fitted), 2);
  assert_true(file_says("zeros", "err", "every row's busbw is 0.00 GB/s"));
}

/* A table of one row (1 MiB of the 2-H100 table) still fits, but the fit rests on one size, and
 * stderr says so naming the file; the whole table (sizes up to 1 GiB) gives no such warning. */
static void test_few_sizes_warned(void **state) {
  (void)state;
  char *fitted;
  char *two = scenario("few", "  node: dgx-h100\n  nodes: 1\n  gpus_per_node: 2\n"
                              "  network_model: nccl\n");
  char *one = strdup(path("one-row.txt"));
  write_file(one, "     1048576        262144     float     sum      -1    11.50   91.22   91.22"
                  "       0    11.50   91.22   91.22       0\n");
  assert_int_equal(calibrate_table(two, one, "one-row", &fitted), 0);
  char want[400];
  snprintf(want, sizeof want, "warning: %s: the fit rests on 1 size (those within 64x of the "
           "largest, 1048576 B)", one);
  assert_true(file_says("one-row", "err", want));
  assert_int_equal(calibrate_table(two, "tests/data/nccl-tests/h100-2gpu-from-8B.txt", "all-rows",
                                   &fitted), 0);
  assert_false(file_says("all-rows", "err", "the fit rests on"));
  free(one);
}

/* Older nccl-tests print no `root` column and a float `error` for #wrong: the columns are where
 * the header line puts them, or, without a header, where the row's shape (12 fields, not 13) puts
 * them; a row of neither shape is refused, and so is a fit slower than any link (a misread table
 * gave 2e-7 GB/s). */
static void test_old_format_without_root(void **state) {
  (void)state;
  char *fitted;
  char *two = scenario("old", "  node: dgx-h100\n  nodes: 1\n  gpus_per_node: 2\n"
                              "  network_model: nccl\n");
  const char *table = "tests/data/nccl-tests/h100-2gpu-no-root.txt";
  assert_int_equal(calibrate_table(two, table, "old", &fitted), 0);
  double with_header = yaml_value(fitted, "bandwidth_GBps");
  print_message("no root, with its header: fitted intra.bandwidth_GBps %.6g\n", with_header);
  assert_true(with_header > 250 && with_header < 400); /* busbw measured up to 299 GB/s */
  assert_true(file_says("old", "out", "1073741824      299.330"));
  /* its rows alone */
  char *text = rh_test_slurp(table), *rows = path("old-rows.txt");
  assert_non_null(text);
  FILE *f = fopen(rows, "w");
  assert_non_null(f);
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
    if (line[strspn(line, " ")] != '#') fprintf(f, "%s\n", line);
  fclose(f);
  free(text);
  assert_int_equal(calibrate_table(two, rows, "old-rows", &fitted), 0);
  assert_true(fabs(yaml_value(fitted, "bandwidth_GBps") - with_header) < 1e-9 * with_header);
  /* eleven fields: neither layout */
  char *odd = path("eleven.txt");
  write_file(odd,
             "  1048576  262144  float  sum  11.50  91.22  91.22  2e-07  11.50  91.22  91.22\n");
  assert_int_equal(calibrate_table(two, odd, "eleven", &fitted), 2);
  assert_true(file_says("eleven", "err", "eleven.txt:1: the number of fields"));
  /* 0.05 GB/s at 1 GiB: slower than any link */
  char *slow = path("slow.txt");
  write_file(slow, "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                   " 1073741824 268435456 float sum -1 2e7 0.05 0.05 0 2e7 0.05 0.05 0\n");
  assert_int_equal(calibrate_table(two, slow, "slow", &fitted), 2);
  assert_true(file_says("slow", "err", "every link moves at least 0.1 GB/s"));
  assert_null(fopen(fitted, "r"));
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "calibrate");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nvlink_round_trip), cmocka_unit_test(test_nic_round_trip),
      cmocka_unit_test(test_reduce_scatter_round_trip),
      cmocka_unit_test(test_gemm_fit),          cmocka_unit_test(test_step_fit),
      cmocka_unit_test(test_scenario_path_reaches_no_shell),
      cmocka_unit_test(test_steps_spread),
      cmocka_unit_test(test_bad_measurements), cmocka_unit_test(test_h100_measurements),
      cmocka_unit_test(test_outputs_from_8_bytes), cmocka_unit_test(test_old_format_without_root),
      cmocka_unit_test(test_few_sizes_warned),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
