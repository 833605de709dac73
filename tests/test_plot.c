/*
 * test_plot.c: `rehearsal plot DIR` on what each command writes: a collective sweep, a training
 * run (with steps.csv, and compared with another run), and a sweep of five points (one failed)
 * written here by hand, over GPUs and over a network axis.  Every figure comes as a PNG (its
 * signature, more than 1 KB) and a well-formed SVG whose text names the scenario, beside the
 * script and the data it was drawn from, readable by others.  A directory with nothing to draw
 * exits 2 naming what was looked for, so does a PATH without gnuplot; a gnuplot that fails makes
 * it exit 1 with gnuplot's message.  Skipped (77) without gnuplot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];

static bool on_path(const char *name) {
  const char *path = getenv("PATH");
  char buf[4096];
  for (const char *p = path ? path : ""; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, name);
    if (n && access(buf, X_OK) == 0) return true;
    p += n;
    if (*p) p++;
  }
  return false;
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "plot");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

static int spawn(const char *out, const char *err, const char *a1, const char *a2,
                 const char *a3, const char *a4, const char *a5, const char *a6) {
  char *argv[] = {RH_BINARY, (char *)a1, (char *)a2, (char *)a3, (char *)a4, (char *)a5,
                  (char *)a6, NULL};
  return rh_test_spawn(argv, out, err);
}

/* `rehearsal plot DIR [--out OUT]`: its exit code; stdout and stderr in plot.out, plot.err. */
static int plot(const char *dir, const char *out) {
  char o[320], e[320];
  snprintf(o, sizeof o, "%s/plot.out", tmpdir);
  snprintf(e, sizeof e, "%s/plot.err", tmpdir);
  return spawn(o, e, "plot", dir, out ? "--out" : NULL, out, NULL, NULL);
}

static char *plot_stdout(void) { return rh_test_slurp(rh_test_path(tmpdir, "plot.out")); }
static char *plot_stderr(void) { return rh_test_slurp(rh_test_path(tmpdir, "plot.err")); }

static void assert_readable_by_others(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  if ((st.st_mode & 0044) != 0044) print_error("%s: mode %o\n", path, st.st_mode & 0777);
  assert_int_equal(st.st_mode & 0044, 0044);
}

/* A well-formed SVG that holds `must_hold` (its title). */
static void assert_svg(const char *path, const char *must_hold) {
  assert_true(rh_test_svg_ok(path));
  char *text = rh_test_slurp(path);
  if (!strstr(text, must_hold)) print_error("%s does not hold '%s'\n", path, must_hold);
  assert_non_null(strstr(text, must_hold));
  free(text);
}

static void assert_png(const char *path) { assert_true(rh_test_png_ok(path)); }

/* Figure NAME in dir: PNG, SVG naming `title`, its script (with the title) and its data. */
static void assert_figure(const char *dir, const char *name, const char *title) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s.png", dir, name);
  assert_png(path);
  assert_readable_by_others(path);
  snprintf(path, sizeof path, "%s/%s.svg", dir, name);
  assert_svg(path, title);
  assert_readable_by_others(path);
  snprintf(path, sizeof path, "%s/%s.gp", dir, name);
  char *script = rh_test_slurp(path);
  assert_non_null(script);
  assert_non_null(strstr(script, "set title"));
  assert_non_null(strstr(script, title));
  assert_non_null(strstr(script, "noenhanced"));
  assert_readable_by_others(path);
  free(script);
  snprintf(path, sizeof path, "%s/%s.dat", dir, name);
  char *data = rh_test_slurp(path);
  assert_non_null(data);
  assert_true(strlen(data) > 10);
  assert_readable_by_others(path);
  free(data);
  /* the files written are listed on stdout */
  char *listed = plot_stdout();
  snprintf(path, sizeof path, "%s/%s.png", dir, name);
  assert_non_null(strstr(listed, path));
  free(listed);
}

static void test_collective(void **state) {
  (void)state;
  char *d = strdup(rh_test_path(tmpdir, "coll"));
  assert_int_equal(spawn(NULL, NULL, "collective", "scenarios/default.yaml", "-e", "4M", "--out", d), 0);
  assert_int_equal(plot(d, NULL), 0);
  char plots[400];
  snprintf(plots, sizeof plots, "%s/plots", d);
  assert_figure(plots, "collective-busbw", "resnet50-p100-2x4");
  assert_figure(plots, "collective-time", "resnet50-p100-2x4");
  /* the legend names the placements, the algorithms and the line rate; never a file */
  char *gp = rh_test_slurp(rh_test_path(plots, "collective-busbw.gp"));
  assert_non_null(strstr(gp, "title 'out-of-place'"));
  assert_non_null(strstr(gp, "title 'in-place'"));
  assert_non_null(strstr(gp, "algorithm: hierarchical"));
  assert_non_null(strstr(gp, "line rate 3.125 GB/s"));
  assert_null(strstr(gp, "title 'collective"));
  free(gp);
  char *svg = rh_test_slurp(rh_test_path(plots, "collective-busbw.svg"));
  assert_non_null(strstr(svg, "1 MiB")); /* size tics in bytes' units */
  assert_non_null(strstr(svg, "busbw (GB/s)"));
  free(svg);
  free(d);
}

static void test_run(void **state) {
  (void)state;
  char *d = strdup(rh_test_path(tmpdir, "run")), *d2 = strdup(rh_test_path(tmpdir, "run2"));
  char summary[400];
  assert_int_equal(spawn(NULL, NULL, "run", "scenarios/default.yaml", "--out", d, NULL, NULL), 0);
  /* a second run compared with the first: the measured-against-predicted figure */
  snprintf(summary, sizeof summary, "%s/summary.json", d);
  assert_int_equal(spawn(NULL, NULL, "run", "scenarios/default.yaml", "--out", d2, "--compare",
                         summary),
                   0);
  char *out = strdup(rh_test_path(tmpdir, "run-plots"));
  assert_int_equal(plot(d2, out), 0); /* --out: elsewhere than DIR/plots */
  assert_figure(out, "run-epochs", "resnet50-p100-2x4");
  assert_figure(out, "run-compared", "resnet50-p100-2x4");
  char *gp = rh_test_slurp(rh_test_path(out, "run-epochs.gp"));
  assert_non_null(strstr(gp, "title 'compute'"));
  assert_non_null(strstr(gp, "time per step (ms)"));
  free(gp);
  if (access(rh_test_path(d2, "steps.csv"), F_OK) == 0) assert_figure(out, "run-lr", "resnet50-p100-2x4");
  else print_message("no steps.csv in %s: no lr figure\n", d2);
  free(d);
  free(d2);
  free(out);
}

/* A sweep as `rehearsal sweep` writes it: 5 points over cluster.nodes, the last one failed. */
static void write_sweep(const char *dir, const char *key, const char *const *values, const int *gpus,
                        int n, int failed) {
  mkdir(dir, 0755);
  char path[400];
  snprintf(path, sizeof path, "%s/sweep.json", dir);
  FILE *j = fopen(path, "w");
  snprintf(path, sizeof path, "%s/sweep.csv", dir);
  FILE *c = fopen(path, "w");
  assert_non_null(j);
  assert_non_null(c);
  fprintf(j, "{\"scenario\": \"resnet50_sweep\", \"file\": \"scenarios/default.yaml\", "
             "\"cluster\": \"2 nodes x 4 GPUs, 20 GB/s intra-node, 25 Gb/s NIC\", "
             "\"axes\": [{\"key\": \"%s\", \"values\": [", key);
  for (int i = 0; i < n; i++) fprintf(j, "%s\"%s\"", i ? ", " : "", values[i]);
  fprintf(j, "]}], \"points\": [\n");
  fprintf(c, "point,%s,gpus,nodes,step_ms,compute_ms,comm_wait_ms,lost_ms,samples_per_s,"
             "ideal_samples_per_s,scaling_efficiency,status\n", key);
  for (int i = 0; i < n; i++) {
    bool ok = i != failed;
    double compute = 85, wait = 2.0 + 3.0 * i, lost = i == 2 ? 1.5 : 0, step = compute + wait + lost;
    double thr = gpus[i] * 64 / (step / 1e3), ideal = gpus[i] * 64 / (compute / 1e3);
    fprintf(j, "%s  {\"point\": %d, \"set\": {\"%s\": \"%s\"}, \"dir\": \"points/%03d\", "
               "\"status\": \"%s\"",
            i ? ",\n" : "", i, key, values[i], i, ok ? "ok" : "failed");
    if (ok)
      fprintf(j, ", \"gpus\": %d, \"nodes\": %d, \"step_ms\": %g, \"compute_ms\": %g, "
                 "\"comm_wait_ms\": %g, \"lost_ms\": %g, \"samples_per_s\": %g, "
                 "\"ideal_samples_per_s\": %g, \"scaling_efficiency\": %g",
              gpus[i], gpus[i] / 4 ? gpus[i] / 4 : 1, step, compute, wait, lost, thr, ideal,
              thr / ideal);
    fprintf(j, "}");
    if (ok)
      fprintf(c, "%d,%s,%d,%d,%g,%g,%g,%g,%g,%g,%g,ok\n", i, values[i], gpus[i],
              gpus[i] / 4 ? gpus[i] / 4 : 1, step, compute, wait, lost, thr, ideal, thr / ideal);
    else
      fprintf(c, "%d,%s,%d,%d,,,,,,,,failed\n", i, values[i], gpus[i], gpus[i] / 4 ? gpus[i] / 4 : 1);
  }
  fprintf(j, "\n]}\n");
  fclose(j);
  fclose(c);
}

static void test_sweep(void **state) {
  (void)state;
  /* over GPUs: throughput against GPUs with the ideal line */
  static const char *const nodes[] = {"1", "2", "4", "8", "16"};
  static const int gpus[] = {4, 8, 16, 32, 64};
  char *d = strdup(rh_test_path(tmpdir, "sweep"));
  write_sweep(d, "cluster.nodes", nodes, gpus, 5, 4);
  assert_int_equal(plot(d, NULL), 0);
  char *err = plot_stderr();
  assert_non_null(strstr(err, "point 4 (cluster.nodes=16) failed"));
  free(err);
  char plots[400];
  snprintf(plots, sizeof plots, "%s/plots", d);
  assert_figure(plots, "sweep-throughput", "resnet50_sweep");
  assert_figure(plots, "sweep-efficiency", "resnet50_sweep");
  assert_figure(plots, "sweep-step", "resnet50_sweep");
  char *gp = rh_test_slurp(rh_test_path(plots, "sweep-throughput.gp"));
  assert_non_null(strstr(gp, "set xlabel \"GPUs\""));
  assert_non_null(strstr(gp, "ideal: linear from 4 GPUs"));
  free(gp);
  /* the failed point is in no line */
  char *dat = rh_test_slurp(rh_test_path(plots, "sweep-throughput.dat"));
  assert_null(strstr(dat, "\n64 "));
  free(dat);

  /* the same GPUs at every point: the axis, with its unit, is x */
  static const char *const nic[] = {"10", "25", "50", "100", "400"};
  static const int same[] = {8, 8, 8, 8, 8};
  char *d2 = strdup(rh_test_path(tmpdir, "sweep-nic"));
  write_sweep(d2, "cluster.network.nic_Gbps", nic, same, 5, -1);
  assert_int_equal(plot(d2, NULL), 0);
  snprintf(plots, sizeof plots, "%s/plots", d2);
  assert_figure(plots, "sweep-throughput", "resnet50_sweep");
  gp = rh_test_slurp(rh_test_path(plots, "sweep-throughput.gp"));
  assert_non_null(strstr(gp, "cluster.network.nic_Gbps (Gb/s)"));
  free(gp);

  /* sweep.csv alone is enough */
  char *d3 = strdup(rh_test_path(tmpdir, "sweep-csv"));
  write_sweep(d3, "cluster.nodes", nodes, gpus, 5, 4);
  unlink(rh_test_path(d3, "sweep.json"));
  assert_int_equal(plot(d3, NULL), 0);
  snprintf(plots, sizeof plots, "%s/plots", d3);
  assert_figure(plots, "sweep-step", "sweep-csv");
  free(d);
  free(d2);
  free(d3);
}

/* Runs the sweep argv (into d) and plots it; sweep-throughput.gp's text (caller frees). */
static char *sweep_plot(char *const argv[], const char *d) {
  assert_int_equal(rh_test_spawn(argv, "/dev/null", "/dev/null"), 0);
  assert_int_equal(plot(d, NULL), 0);
  char plots[400];
  snprintf(plots, sizeof plots, "%s/plots", d);
  char *gp = rh_test_slurp(rh_test_path(plots, "sweep-throughput.gp"));
  assert_non_null(gp);
  return gp;
}

/* Every key's sample is drawn as its line is: no stand-in entry in a colour of its own, each
 * dashed ideal line keyed in its series' colour (a sweep of two series over a network axis). */
static void test_keys_match_their_lines(void **state) {
  (void)state;
  char *d = strdup(rh_test_path(tmpdir, "keys"));
  char *argv[] = {RH_BINARY, "sweep", "scenarios/default.yaml", "--axis",
                  "cluster.network.nic_Gbps=10,25", "--axis", "collective.fusion_threshold=8MiB,64MiB",
                  "--out", d, NULL};
  char *gp = sweep_plot(argv, d);
  assert_null(strstr(gp, "NaN with")); /* a key drawn from no data */
  /* each series' ideal line: dashed, in the colour of the series' own line, with its own key */
  int dashed = 0;
  for (char *l = strstr(gp, "dt 2"); l; l = strstr(l + 1, "dt 2")) {
    char *rgb = strstr(l, "lc rgb '"), colour[16] = "";
    assert_non_null(rgb);
    sscanf(rgb + 8, "%15[^']", colour);
    char solid[64];
    snprintf(solid, sizeof solid, "pt 7 lc rgb '%s' title", colour);
    if (!strstr(gp, solid)) print_error("the dashed line in %s has no solid line of its colour\n", colour);
    assert_non_null(strstr(gp, solid));
    char *eol = strchr(l, '\n');
    char *title = strstr(l, " title ");
    assert_true(title && (!eol || title < eol));
    dashed++;
  }
  assert_int_equal(dashed, 2);
  free(gp);
  free(d);
}

/* A sweep of a model timed on the roofline (ResNet-50 in amp_fp16 on an A100): the subtitle names
 * the rate its points were timed at, the A100 datasheet's dense fp16 peak of 312 TFLOP/s, not the
 * preset's sustained 64 TFLOP/s that only a model without shapes runs at. */
static void test_sweep_names_the_roofline(void **state) {
  (void)state;
  char *d = strdup(rh_test_path(tmpdir, "roofline"));
  char *argv[] = {RH_BINARY, "sweep", "scenarios/models/resnet50-1gpu-a100.yaml", "--axis",
                  "cluster.gpus_per_node=1,2", "--out", d, NULL};
  char *gp = sweep_plot(argv, d);
  assert_non_null(strstr(gp, "roofline of 312 TFLOP/s amp_fp16"));
  assert_null(strstr(gp, "(64 TFLOP/s)"));
  free(gp);
  free(d);
}

/* A failure that made one epoch's steps a hundred times longer: the epochs are drawn on a log
 * axis, so that the normal epochs still show. */
static void test_failure_epochs_on_a_log_axis(void **state) {
  (void)state;
  char *d = strdup(rh_test_path(tmpdir, "failed-run"));
  mkdir(d, 0755);
  FILE *f = fopen(rh_test_path(d, "summary.json"), "w");
  assert_non_null(f);
  fprintf(f, "{\"scenario\": \"host-crash\", \"cluster\": \"3 nodes x 2 GPUs\", \"epochs\": [\n"
             "  {\"epoch\": 1, \"steps\": 32, \"time_s\": 0.0047, \"compute_s\": 0.0004, "
             "\"comm_wait_s\": 0.0039, \"lost_s\": 0},\n"
             "  {\"epoch\": 2, \"steps\": 43, \"time_s\": 1.0055, \"compute_s\": 0.0005, "
             "\"comm_wait_s\": 0.0038, \"lost_s\": 1.0008},\n"
             "  {\"epoch\": 3, \"steps\": 47, \"time_s\": 0.0048, \"compute_s\": 0.0006, "
             "\"comm_wait_s\": 0.0038, \"lost_s\": 0}]}\n");
  fclose(f);
  assert_int_equal(plot(d, NULL), 0);
  char plots[400];
  snprintf(plots, sizeof plots, "%s/plots", d);
  assert_figure(plots, "run-epochs", "host-crash");
  char *gp = rh_test_slurp(rh_test_path(plots, "run-epochs.gp"));
  assert_non_null(strstr(gp, "set logscale y"));
  assert_non_null(strstr(gp, "title 'lost (failures)'"));
  free(gp);
  free(d);
}

static void test_nothing_to_draw(void **state) {
  (void)state;
  char *d = strdup(rh_test_path(tmpdir, "empty"));
  mkdir(d, 0755);
  assert_int_equal(plot(d, NULL), 2);
  char *err = plot_stderr();
  assert_non_null(strstr(err, "collective.json"));
  assert_non_null(strstr(err, "summary.json"));
  assert_non_null(strstr(err, "sweep.json"));
  free(err);
  assert_int_equal(plot(rh_test_path(tmpdir, "no-such-dir"), NULL), 2);
  assert_int_equal(spawn(NULL, NULL, "plot", NULL, NULL, NULL, NULL, NULL), 2);
  assert_int_equal(spawn(rh_test_path(tmpdir, "help.txt"), NULL, "plot", "--help", NULL, NULL,
                         NULL, NULL),
                   0);
  char *help = rh_test_slurp(rh_test_path(tmpdir, "help.txt"));
  assert_non_null(strstr(help, "usage: rehearsal plot DIR"));
  free(help);
  free(d);
}

/* Without gnuplot on PATH: exit 2 saying so; with a gnuplot that fails: exit 1. */
static void test_gnuplot_missing_or_failing(void **state) {
  (void)state;
  char *d = strdup(rh_test_path(tmpdir, "coll-again"));
  assert_int_equal(spawn(NULL, NULL, "collective", "scenarios/default.yaml", "-e", "64K", "--out", d), 0);
  char *saved = strdup(getenv("PATH"));
  char *bin = strdup(rh_test_path(tmpdir, "bin"));
  mkdir(bin, 0755);
  setenv("PATH", bin, 1); /* an empty directory: no gnuplot */
  int rc = plot(d, NULL);
  setenv("PATH", saved, 1);
  assert_int_equal(rc, 2);
  char *err = plot_stderr();
  assert_non_null(strstr(err, "gnuplot is not on PATH"));
  free(err);
  /* a gnuplot that fails */
  FILE *f = fopen(rh_test_path(bin, "gnuplot"), "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\necho 'line 1: something is wrong' >&2\nexit 3\n");
  fclose(f);
  chmod(rh_test_path(bin, "gnuplot"), 0755);
  setenv("PATH", bin, 1);
  rc = plot(d, NULL);
  setenv("PATH", saved, 1);
  assert_int_equal(rc, 1);
  err = plot_stderr();
  assert_non_null(strstr(err, "gnuplot failed on"));
  assert_non_null(strstr(err, "something is wrong")); /* gnuplot's own words come through */
  free(err);
  free(saved);
  free(bin);
  free(d);
}

int main(void) {
  if (!on_path("gnuplot")) {
    printf("gnuplot is not on PATH: skipping\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collective),
      cmocka_unit_test(test_run),
      cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_keys_match_their_lines),
      cmocka_unit_test(test_sweep_names_the_roofline),
      cmocka_unit_test(test_failure_epochs_on_a_log_axis),
      cmocka_unit_test(test_nothing_to_draw),
      cmocka_unit_test(test_gnuplot_missing_or_failing),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
