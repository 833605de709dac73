/*
 * test_collective_cli.c: `rehearsal collective` as someone used to nccl-tests runs it.  -b, -e
 * with -f or -i give exactly the sizes nccl-tests would step through (K, M, G in powers of 1024);
 * -n and -w are taken and change nothing on the deterministic simulator; GPUs per process other
 * than one, unknown flags and two step rules are refused with exit 2 and the flag named; --help
 * goes to stdout; every row has out-of-place and in-place columns, both checked; collective.json
 * carries the cluster, the network model and the line rate; a scenario with only a cluster is
 * enough; the progress line appears on stderr only when asked for; --mem-limit checks a size only
 * when its estimated peak fits, and the process's measured peak stays within it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "collcli");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* `rehearsal collective ARGS...` (NULL-terminated); stdout into out.txt, stderr into err.txt. */
static int collective(const char *first, ...) {
  char *argv[40] = {RH_BINARY, "collective"};
  int n = 2;
  va_list ap;
  va_start(ap, first);
  for (const char *a = first; a && n < 39; a = va_arg(ap, const char *)) argv[n++] = (char *)a;
  va_end(ap);
  argv[n] = NULL;
  char out[320], err[320];
  snprintf(out, sizeof out, "%s/out.txt", tmpdir);
  snprintf(err, sizeof err, "%s/err.txt", tmpdir);
  return rh_test_spawn(argv, out, err);
}

static char *out_text(void) { return rh_test_slurp(rh_test_path(tmpdir, "out.txt")); }
static char *err_text(void) { return rh_test_slurp(rh_test_path(tmpdir, "err.txt")); }

/* One data row of the table. */
typedef struct row {
  double size, count, time[2], algbw[2], busbw[2];
  char type[16], op[16], wrong[2][16], algo[32];
  int root;
} row;

/* The data rows of the last table printed (at most max); returns how many. */
static int table(row *rows, int max) {
  char *text = out_text();
  assert_non_null(text);
  int n = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    if (line[0] == '#') continue;
    assert_true(n < max);
    row *r = &rows[n++];
    int got = sscanf(line, "%lf %lf %15s %15s %d %lf %lf %lf %15s %lf %lf %lf %15s %31s", &r->size,
                     &r->count, r->type, r->op, &r->root, &r->time[0], &r->algbw[0],
                     &r->busbw[0], r->wrong[0], &r->time[1], &r->algbw[1], &r->busbw[1],
                     r->wrong[1], r->algo);
    if (got != 14) print_error("row: %s\n", line);
    assert_int_equal(got, 14);
  }
  free(text);
  return n;
}

/* The sizes nccl-tests steps through: from min, times factor (or plus step), up to max. */
static int expected_sizes(double min, double max, double factor, double step, double *out) {
  int n = 0;
  for (double s = min; s <= max; s = factor > 1 ? s * factor : s + step) out[n++] = s;
  return n;
}

static void assert_sizes(const double *want, int nwant) {
  row rows[64];
  int n = table(rows, 64);
  if (n != nwant) print_error("%d rows, %d sizes expected\n", n, nwant);
  assert_int_equal(n, nwant);
  for (int i = 0; i < n; i++) {
    if (rows[i].size != want[i]) print_error("row %d: %.0f B, expected %.0f B\n", i, rows[i].size, want[i]);
    assert_true(rows[i].size == want[i]);
    assert_true(rows[i].count == want[i] / 4); /* float */
  }
}

static void test_sizes_as_nccl_tests(void **state) {
  (void)state;
  double want[64];
  /* -b 1K -e 1M -f 4: K and M are 1024 and 1024^2 */
  assert_int_equal(collective("scenarios/default.yaml", "-b", "1K", "-e", "1M", "-f", "4", NULL), 0);
  assert_sizes(want, expected_sizes(1024, 1048576, 4, 0, want));
  /* long forms, and a max that the factor steps past */
  assert_int_equal(collective("scenarios/default.yaml", "--minbytes", "8", "--maxbytes", "100K",
                              "--stepfactor", "8", NULL),
                   0);
  assert_sizes(want, expected_sizes(8, 100 * 1024, 8, 0, want));
  /* -i: a fixed step; KB is 1000 bytes, as the scenario files write it */
  assert_int_equal(collective("scenarios/default.yaml", "-b", "1KB", "-e", "5KB", "-i", "1KB", NULL), 0);
  assert_sizes(want, expected_sizes(1000, 5000, 0, 1000, want));
  assert_int_equal(collective("scenarios/default.yaml", "-b", "4M", "-e", "10M", "--stepbytes",
                              "2M", NULL),
                   0);
  assert_sizes(want, expected_sizes(4 << 20, 10 << 20, 0, 2 << 20, want));
  /* the old flags are aliases: --min/--max with units, doubling by default */
  assert_int_equal(collective("scenarios/default.yaml", "--min", "1KiB", "--max", "64KiB", NULL), 0);
  assert_sizes(want, expected_sizes(1024, 65536, 2, 0, want));
  /* by default: 8 B to 64 MiB, doubling */
  assert_int_equal(collective("scenarios/default.yaml", "-c", "0", NULL), 0);
  assert_sizes(want, expected_sizes(8, 64 << 20, 2, 0, want));
}

static void test_iterations(void **state) {
  (void)state;
  row one[8], many[8];
  assert_int_equal(collective("scenarios/default.yaml", "-b", "64K", "-e", "1M", "-f", "4", NULL), 0);
  char *text = out_text();
  assert_non_null(strstr(text, "warmup iters: 0 iters: 1")); /* the simulator's defaults */
  free(text);
  int n = table(one, 8);
  assert_int_equal(collective("scenarios/default.yaml", "-b", "64K", "-e", "1M", "-f", "4", "-n",
                              "3", "-w", "2", NULL),
                   0);
  text = out_text();
  assert_non_null(strstr(text, "warmup iters: 2 iters: 3"));
  free(text);
  assert_int_equal(table(many, 8), n);
  /* the simulator is deterministic: the mean of 3 iterations is the time of one */
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 2; k++) {
      print_message("%.0f B: %.3f us once, %.3f us over 3\n", one[i].size, one[i].time[k], many[i].time[k]);
      assert_true(fabs(many[i].time[k] - one[i].time[k]) <= 1e-3 * one[i].time[k] + 1e-3);
      /* the in-place sum ran 3 times on its own result: its check ran on a fresh run */
      assert_string_equal(many[i].wrong[k], "0");
    }
  /* -n 0 is no iteration at all */
  assert_int_equal(collective("scenarios/default.yaml", "-n", "0", NULL), 2);
  text = err_text();
  assert_non_null(strstr(text, "-n 0"));
  free(text);
}

static void test_refused(void **state) {
  (void)state;
  char *text;
  /* one process per GPU: -g other than 1 is refused, saying why */
  assert_int_equal(collective("scenarios/default.yaml", "-g", "2", NULL), 2);
  text = err_text();
  assert_non_null(strstr(text, "-g/--ngpus 2"));
  assert_non_null(strstr(text, "one GPU"));
  free(text);
  assert_int_equal(collective("scenarios/default.yaml", "--ngpus=4", NULL), 2);
  text = err_text();
  assert_non_null(strstr(text, "ngpus"));
  free(text);
  assert_int_equal(collective("scenarios/default.yaml", "-g", "1", "-t", "1", "-b", "1M", "-e",
                              "1M", NULL),
                   0);
  /* unknown flags, long and short */
  assert_int_equal(collective("scenarios/default.yaml", "--bogus", NULL), 2);
  text = err_text();
  assert_non_null(strstr(text, "--bogus"));
  free(text);
  assert_int_equal(collective("scenarios/default.yaml", "-z", "1", NULL), 2);
  text = err_text();
  assert_non_null(strstr(text, "-z"));
  free(text);
  /* a factor and a step at once; a factor below 2; a size without a number; min above max */
  assert_int_equal(collective("scenarios/default.yaml", "-f", "2", "-i", "1M", NULL), 2);
  text = err_text();
  assert_non_null(strstr(text, "-f/--stepfactor"));
  free(text);
  assert_int_equal(collective("scenarios/default.yaml", "-f", "1", NULL), 2);
  assert_int_equal(collective("scenarios/default.yaml", "-b", "M", NULL), 2);
  assert_int_equal(collective("scenarios/default.yaml", "-b", "2M", "-e", "1M", NULL), 2);
  assert_int_equal(collective("scenarios/default.yaml", "-d", "bfloat16", NULL), 2);
  text = err_text();
  assert_non_null(strstr(text, "bfloat16"));
  free(text);
  assert_int_equal(collective("scenarios/default.yaml", "-o", "prod", NULL), 2);
  assert_int_equal(collective(NULL), 2);
  /* nothing on stdout when refused */
  text = out_text();
  assert_string_equal(text, "");
  free(text);
}

static void test_help(void **state) {
  (void)state;
  assert_int_equal(collective("--help", NULL), 0);
  char *text = out_text(), *err = err_text();
  assert_non_null(strstr(text, "usage: rehearsal collective FILE"));
  assert_non_null(strstr(text, "-b, --minbytes"));
  assert_non_null(strstr(text, "-g, --ngpus"));
  assert_string_equal(err, "");
  free(text);
  free(err);
  assert_int_equal(collective("-h", NULL), 0);
  text = out_text();
  assert_non_null(strstr(text, "usage: rehearsal collective FILE"));
  free(text);
}

/* Every op, type and collective: both placements' results checked and right. */
static void test_in_place_checked(void **state) {
  (void)state;
  static const char *const colls[] = {"allreduce", "reduce_scatter", "allgather", "broadcast"};
  static const char *const types[] = {"float", "half", "int32", "double"};
  static const char *const ops[] = {"sum", "avg", "min", "max"};
  for (int c = 0; c < 4; c++)
    for (int t = 0; t < 4; t++)
      for (int o = 0; o < (c < 2 ? 4 : 1); o++) {
        int rc = collective("tests/scenarios/good/uneven_hosts.yaml", "--coll", colls[c], "-d",
                            types[t], "-o", ops[o], "-r", "3", "-b", "64", "-e", "64K", "-f",
                            "16", NULL);
        if (rc) print_error("%s %s %s: exit %d\n", colls[c], types[t], ops[o], rc);
        assert_int_equal(rc, 0);
        row rows[8];
        int n = table(rows, 8);
        assert_int_equal(n, 3);
        for (int i = 0; i < n; i++) {
          assert_string_equal(rows[i].wrong[0], "0");
          assert_string_equal(rows[i].wrong[1], "0");
          assert_true(rows[i].time[1] > 0);
          /* busbw = algbw x the bus factor, in place as out of place */
          assert_true(fabs(rows[i].algbw[1] - rows[i].size / rows[i].time[1] / 1e3) <=
                      1e-3 * rows[i].algbw[1] + 2e-3);
        }
      }
  char *text = out_text();
  assert_non_null(strstr(text, "out-of-place"));
  assert_non_null(strstr(text, "in-place"));
  assert_non_null(strstr(text, "# Out of bounds values : 0 OK"));
  assert_non_null(strstr(text, "# Avg bus bandwidth    : "));
  free(text);
  /* -c 0: nothing checked */
  assert_int_equal(collective("scenarios/default.yaml", "-c", "0", "-b", "1K", "-e", "1K", NULL), 0);
  row r[2];
  assert_int_equal(table(r, 2), 1);
  assert_string_equal(r[0].wrong[0], "N/A");
  assert_string_equal(r[0].wrong[1], "N/A");
}

static void test_json(void **state) {
  (void)state;
  char *dir = rh_test_path(tmpdir, "json");
  assert_int_equal(collective("scenarios/default.yaml", "-b", "1K", "-e", "4M", "--out", dir, NULL), 0);
  json_error_t err;
  json_t *root = json_load_file(rh_test_path(dir, "collective.json"), 0, &err);
  assert_non_null(root);
  /* two nodes of one 25 Gb/s NIC each: a ring's bottleneck is the node's NIC, 3.125 GB/s */
  assert_true(fabs(json_real_value(json_object_get(root, "line_rate_GBps")) - 3.125) < 1e-9);
  assert_string_equal(json_string_value(json_object_get(root, "network_model")), "exact");
  const char *cluster = json_string_value(json_object_get(root, "cluster"));
  assert_non_null(cluster);
  assert_non_null(strstr(cluster, "2 nodes x 4 GPUs"));
  assert_non_null(strstr(cluster, "25 Gb/s NIC"));
  json_t *rows = json_object_get(root, "rows");
  assert_int_equal(json_array_size(rows), 13);
  for (size_t i = 0; i < json_array_size(rows); i++) {
    json_t *r = json_array_get(rows, i);
    assert_int_equal(json_integer_value(json_object_get(r, "wrong")), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "in_place_wrong")), 0);
    assert_true(json_real_value(json_object_get(r, "in_place_time_us")) > 0);
    assert_true(json_real_value(json_object_get(r, "in_place_busbw_GBps")) > 0);
    assert_non_null(json_string_value(json_object_get(r, "algorithm")));
  }
  json_decref(root);
  /* the NCCL model: the line rate is the ring's bottleneck as that model prices it (one node:
   * the preset's NVLink figure); NVLS, reducing in the switch, shows a busbw above it */
  char *dir2 = rh_test_path(tmpdir, "json2");
  assert_int_equal(collective("scenarios/validation/dgx-h100.yaml", "-b", "1G", "-e", "1G",
                              "--mem-limit", "1M", "--out", dir2, NULL),
                   0);
  root = json_load_file(rh_test_path(dir2, "collective.json"), 0, &err);
  assert_non_null(root);
  double rate = json_real_value(json_object_get(root, "line_rate_GBps"));
  double busbw = json_real_value(json_object_get(json_array_get(json_object_get(root, "rows"), 0),
                                                 "busbw_GBps"));
  print_message("dgx-h100: line rate %.1f GB/s, busbw at 1 GiB %.1f GB/s\n", rate, busbw);
  assert_true(fabs(rate - 370.8) < 1e-6);
  assert_string_equal(json_string_value(json_object_get(root, "network_model")), "nccl");
  json_decref(root);
}

/* Writes a scenario of a name and a cluster of 2 x 2 GPUs (all a collective needs) to the
 * temporary directory's `name`; returns its path. */
static char *two_nodes_scenario(const char *name) {
  char *file = rh_test_path(tmpdir, name);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fprintf(f, "name: two-nodes\ncluster:\n  nodes: 2\n  gpus_per_node: 2\n  gpu:\n    tflops: 10\n"
             "  intra:\n    bandwidth_GBps: 50\n  network:\n    nic_Gbps: 100\n");
  fclose(f);
  return file;
}

/* A scenario of a name and a cluster: all a collective needs. */
static void test_cluster_only_scenario(void **state) {
  (void)state;
  char *file = two_nodes_scenario("cluster-only.yaml");
  int rc = collective(file, "-b", "1K", "-e", "64K", NULL);
  if (rc != 0) {
    char *err = err_text();
    print_error("cluster-only scenario: exit %d: %s\n", rc, err);
    free(err);
  }
  assert_int_equal(rc, 0);
  row rows[16];
  assert_int_equal(table(rows, 16), 7);
  char *text = out_text();
  assert_non_null(strstr(text, "two-nodes"));
  free(text);
}

/* --mem-limit checks a size only when its checked run's estimated peak fits: on the simulator each
 * rank holds its input and result three times (host memory, tensor memory, messages in flight),
 * and SimGrid 32 MiB and 64 KiB a rank besides.  On 2 x 2 GPUs an allreduce of S bytes is 6 x S a
 * rank, 24 x S over the job: 768 KiB at 32 KiB and 1.5 MiB at 64 KiB, plus 32.25 MiB, so 33 and
 * 33.75 MiB: a 34,000 KiB limit (33.2 MiB) checks the first and runs the second timing-only; at
 * 768 KiB, where the buffers of 32 KiB alone would fit, nothing is checked. */
static void test_mem_limit_counts_all_buffers(void **state) {
  (void)state;
  char *file = two_nodes_scenario("mem-limit.yaml");
  assert_int_equal(collective(file, "-b", "32K", "-e", "64K", "--mem-limit", "34000KiB", NULL), 0);
  row rows[4];
  assert_int_equal(table(rows, 4), 2);
  assert_true(rows[0].size == 32768 && rows[1].size == 65536);
  assert_string_equal(rows[0].wrong[0], "0");
  assert_string_equal(rows[0].wrong[1], "0");
  assert_string_equal(rows[1].wrong[0], "N/A");
  assert_string_equal(rows[1].wrong[1], "N/A");
  assert_int_equal(collective(file, "-b", "32K", "-e", "32K", "--mem-limit", "768KiB", NULL), 0);
  assert_int_equal(table(rows, 4), 1);
  assert_string_equal(rows[0].wrong[0], "N/A");
  assert_string_equal(rows[0].wrong[1], "N/A");
}

/* The process stays within --mem-limit, as the operating system counts it.  256 GPUs (64 of the
 * default scenario's nodes), 64 KiB to 1 MiB under 512 MiB: by the rule above 64, 128 and 256 KiB
 * are checked (144, 240 and 432 MiB) and 512 KiB (816 MiB) and 1 MiB are not; the child's peak
 * resident memory must not pass 512 MiB.  (Not under AddressSanitizer, whose shadow memory and
 * quarantine are counted too.) */
static void test_mem_limit_holds_the_peak(void **state) {
  (void)state;
  char *argv[] = {RH_BINARY, "collective", "scenarios/default.yaml", "--set", "cluster.nodes=64",
                  "-b", "64K", "-e", "1M", "--mem-limit", "512MiB", NULL};
  long peak_kib = 0;
  int rc = rh_test_spawn_rss(argv, rh_test_path(tmpdir, "out.txt"), rh_test_path(tmpdir, "err.txt"),
                             &peak_kib);
  assert_int_equal(rc, 0);
  row rows[8];
  assert_int_equal(table(rows, 8), 5);
  static const char *const wrong[] = {"0", "0", "0", "N/A", "N/A"};
  for (int i = 0; i < 5; i++) {
    assert_true(rows[i].size == 65536.0 * (1 << i));
    assert_string_equal(rows[i].wrong[0], wrong[i]);
    assert_string_equal(rows[i].wrong[1], wrong[i]);
  }
  print_message("peak %.0f MiB under a 512 MiB limit\n", (double)peak_kib / 1024);
#ifndef RH_SANITIZE_ADDRESS
  assert_true(peak_kib <= 512 * 1024);
#endif
}

/* The progress line: on stderr when asked for (RH_PROGRESS=1), never on stdout, and absent
 * when stderr is not a terminal and nobody asked. */
static void test_progress(void **state) {
  (void)state;
  setenv("RH_PROGRESS", "1", 1);
  int rc = collective("scenarios/default.yaml", "-b", "1K", "-e", "1M", NULL);
  unsetenv("RH_PROGRESS");
  assert_int_equal(rc, 0);
  char *err = err_text(), *out = out_text();
  assert_non_null(strstr(err, "collective: 11/11 sizes (100%), simulated "));
  assert_null(strstr(out, "sizes ("));
  free(err);
  free(out);
  assert_int_equal(collective("scenarios/default.yaml", "-b", "1K", "-e", "1M", NULL), 0);
  err = err_text();
  assert_string_equal(err, "");
  free(err);
}

/* -n and -w stop at 1000 on the simulator (each iteration is simulated again, and all are alike),
 * saying why; sizes take T and TiB, agree with 1024G, and a refused size gives the range. */
static void test_bounds_said(void **state) {
  (void)state;
  /* 1001 first: a regression runs it in a moment, where 10^9 would run for hours */
  static const char *const flags[] = {"-n", "-w"};
  static const char *const counts[] = {"1001", "1000000000"};
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 2; c++) {
      assert_int_equal(collective("scenarios/default.yaml", "-b", "8", "-e", "8", flags[f],
                                  counts[c], NULL),
                       2);
      char *text = err_text();
      if (!strstr(text, "to 1000: the simulator is deterministic")) fail_msg("%s", text);
      free(text);
    }
  assert_int_equal(collective("scenarios/default.yaml", "-b", "8", "-e", "8", "-n", "1000", NULL),
                   0);
  static const char *const tib[] = {"1T", "1TiB", "1024G", "1099511627776"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(collective("scenarios/default.yaml", "-b", tib[i], "-e", tib[i], "-c", "0",
                                NULL),
                     0);
    row rows[2];
    assert_int_equal(table(rows, 2), 1);
    assert_true(rows[0].size == 1099511627776.0);
  }
  static const char *const beyond[] = {"2048G", "2T", "0", "1.5TiB"};
  for (int i = 0; i < 4; i++) {
    assert_int_equal(collective("scenarios/default.yaml", "-e", beyond[i], NULL), 2);
    char *text = err_text();
    if (!strstr(text, "a size is whole bytes from 1 B to 1 TiB")) fail_msg("%s", text);
    free(text);
  }
}

/* A refused op, type or collective is told with what is accepted, and --help ends with the exit
 * statuses. */
static void test_names_listed(void **state) {
  (void)state;
  static const char *const cases[][3] = {
      {"-d", "bfloat16", "cannot use -d bfloat16: expected float, double, half or int32"},
      {"-o", "prod", "cannot use -o prod: expected sum, avg, min or max"},
      {"--coll", "alltoall",
       "--coll alltoall: expected allreduce, broadcast, allgather or reduce_scatter"},
      {"--coll", "reduce-scatter", "expected allreduce, broadcast, allgather or reduce_scatter"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    assert_int_equal(collective("scenarios/default.yaml", cases[i][0], cases[i][1], NULL), 2);
    char *text = err_text();
    if (!strstr(text, cases[i][2])) fail_msg("%s", text);
    free(text);
  }
  assert_int_equal(collective("--help", NULL), 0);
  char *text = out_text();
  assert_non_null(strstr(text, "Exit status: 0 every result right, 1 a wrong element or the job "
                               "failed, 2 bad input."));
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sizes_as_nccl_tests), cmocka_unit_test(test_iterations),
      cmocka_unit_test(test_refused),             cmocka_unit_test(test_help),
      cmocka_unit_test(test_in_place_checked),    cmocka_unit_test(test_json),
      cmocka_unit_test(test_cluster_only_scenario), cmocka_unit_test(test_progress),
      cmocka_unit_test(test_mem_limit_counts_all_buffers),
      cmocka_unit_test(test_mem_limit_holds_the_peak),
      cmocka_unit_test(test_bounds_said),
      cmocka_unit_test(test_names_listed),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
