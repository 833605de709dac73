/*
 * test_scenario.c: the scenario loader.  Every malformed file under tests/scenarios/bad/ has
 * exactly one problem and must be rejected with one message "FILE:LINE: FIELD: what is wrong"
 * that names the right line and field; the valid files under tests/scenarios/good/ and the
 * shipped scenarios/default.yaml must load with their values converted to SI units.
 * Runs from the project root, so the paths are relative to it.
 */
#define _XOPEN_SOURCE 700
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "scenario.h"

#include <ctype.h>
#include <dirent.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BAD_DIR "tests/scenarios/bad"
#define GOOD_DIR "tests/scenarios/good"

/* Relative comparison for converted values (2.93 TFLOP/s * 1e12 is not exact in binary). */
#define assert_close(actual, expected)                                                            \
  do {                                                                                            \
    double a_ = (actual), e_ = (expected);                                                        \
    if (!(fabs(a_ - e_) <= 1e-12 * fabs(e_))) {                                                   \
      print_error("%s = %.17g, expected %.17g\n", #actual, a_, e_);                              \
      fail();                                                                                     \
    }                                                                                             \
  } while (0)

/* ---- malformed scenarios ------------------------------------------------------------------ */

typedef struct bad_case {
  const char *name;   /* tests/scenarios/bad/NAME.yaml */
  int line;           /* the line the message must name */
  const char *field;  /* what follows "FILE:LINE: " up to ": "; NULL when the message has none */
  const char *phrase; /* a distinctive part of the explanation */
} bad_case;

static const bad_case bad_cases[] = {
    /* document level */
    {"empty_file", 1, NULL, "the file is empty"},
    {"second_document", 25, "scenario", "a second YAML document"},
    {"unclosed_quote", 2, "YAML syntax error", "while scanning a quoted scalar"},
    {"key_is_list", 5, "cluster", "a key must be a plain word, not a list"},
    {"epochs_fraction", 21, "recipe.epochs", "expected an integer from 1 to 1000000, got \"1.5\""},
    {"batch_fraction", 20, "recipe.batch_per_worker", "got \"10.5\""},
    {"layer_name_not_string", 16, "model.layers[0].name", "expected a non-empty string, got a list"},
    {"layer_duplicate_key", 16, "model.layers[0].parameters", "appears twice"},
    {"negative_fusion_threshold", 23, "collective.fusion_threshold", "expected a non-negative whole size"},
    {"yaml_syntax_error", 4, "YAML syntax error", "mapping values are not allowed"},
    {"bad_indentation", 5, "YAML syntax error", "did not find expected key"},
    {"tab_indentation", 7, "YAML syntax error", "cannot start any token"},
    {"top_level_list", 2, "scenario", "expected a mapping at the top level, got a list"},
    /* keys */
    {"unknown_key", 8, "cluster.gpu.memory_size_GB", "unknown key (expected one of: tflops, tflops_measured_on, name, reduce_GBps, arch, nccl_slowdown, step_spread, peak_tflops, peak_tflops_fp32, peak_tflops_tf32, peak_tflops_fp16, peak_tflops_bf16, peak_tflops_fp8, memory_GB, memory_GBps, gemm_efficiency, gemm_half_gflop, gemm_best, gemm_best_fp32, conv_efficiency_tf32, kernel_table, sms, kernel_floor_us, attention_fwd_tflops, attention_bwd_tflops, attention_seq_half, preset)"},
    {"duplicate_key", 6, "cluster.nodes", "appears twice"},
    /* a missing key is reported at the first line of the mapping that lacks it */
    {"missing_nodes", 3, "cluster.nodes", "missing (required)"},
    {"missing_section", 2, "data", "missing (required)"},
    /* node types */
    {"wrong_type_mapping_for_scalar", 4, "cluster.nodes", "got a mapping"},
    {"scalar_for_mapping", 6, "cluster.gpu", "no gpu preset \"10\""},
    {"list_for_string", 2, "name", "expected a non-empty string, got a list"},
    {"empty_name", 2, "name", "expected a non-empty string, got \"\""},
    /* numbers */
    {"nodes_not_integer", 4, "cluster.nodes", "expected an integer from 1 to 65536, got \"1.5\""},
    {"tflops_not_number", 7, "cluster.gpu.tflops", "expected a number > 0 and <= 1000000000, got \"fast\""},
    {"negative_bandwidth", 9, "cluster.intra.bandwidth_GBps", "-20 is out of range"},
    {"zero_tflops", 7, "cluster.gpu.tflops", "0 is out of range: expected a number > 0"},
    {"tflops_above_max", 7, "cluster.gpu.tflops", "1e308 is out of range: expected a number > 0 and <= 1000000000"},
    {"nodes_too_many", 4, "cluster.nodes", "100000 is out of range"},
    {"epochs_zero", 21, "recipe.epochs", "0 is out of range"},
    /* cluster.gpus_per_node as a list */
    {"gpus_list_length_mismatch", 5, "cluster.gpus_per_node", "has 3 entries but cluster.nodes is 2"},
    {"gpus_list_item_zero", 5, "cluster.gpus_per_node[1]", "0 is out of range: expected an integer from 1 to 1024"},
    {"gpus_list_empty", 5, "cluster.gpus_per_node", "the list of GPUs per node is empty"},
    /* enumerations */
    {"bad_network_model", 14, "cluster.network_model", "expected one of exact, realistic, nccl, got \"fast\""},
    /* presets and fabrics */
    {"unknown_preset", 4, "cluster.node", "no node preset \"dgx-z9\""},
    {"preset_not_a_name", 4, "cluster.node", "a preset is a name (as in presets/node/NAME.yaml) or a path ending in .yaml"},
    {"preset_bad_value", 4, "cluster.node", "broken-node.yaml:6: cluster.intra.nvls_efficiency: 1.5 is out of range"},
    {"preset_empty", 6, "cluster.gpu", "expected the name of a gpu preset or a mapping, got nothing"},
    {"preset_two_documents", 4, "cluster.node", "two-documents.yaml:6: a second YAML document"},
    {"cycle_too_long", 12, "collective.cycle_time", "Horovod's cycle is milliseconds (at most 10 s)"},
    {"peak_too_small", 8, "cluster.gpu.peak_tflops", "1e-09 is below any GPU's (0: no roofline)"},
    {"bad_transport", 11, "cluster.network.transport", "expected one of ib, roce, tcp, got \"infiniband\""},
    {"leaf_larger_than_cluster", 12, "cluster.network.nodes_per_leaf", "a leaf of 8 nodes is larger than the cluster (4 nodes)"},
    {"oversubscription_zero", 13, "cluster.network.oversubscription", "0 is out of range: expected a number from 1 to 1000"},
    {"rails_not_nics", 10, "cluster.network.nics_per_node", "one NIC per GPU: node 0 has 2 GPUs and 1 NIC"},
    {"fat_tree_without_leaves", 11, "cluster.network.nodes_per_leaf", "missing: fat_tree puts the nodes under leaves"},
    {"placement_on_a_switch", 11, "cluster.network.placement", "topology is switch (fat_tree and rail have leaves)"},
    /* the replay at scale */
    {"cause_negative_count", 15, "failures.causes[0].count", "-3 is out of range: expected a number >= 0"},
    {"zero_detection_timeout", 16, "restart.collective_timeout_s", "0 is out of range: expected a number > 0"},
    {"cause_link_one_node", 13, "failures.causes[0]", "cable takes out a link, but the cluster's one node has no network link"},
    {"causes_without_horizon", 12, "failures.causes", "the causes are replayed over failures.horizon_days: give it"},
    {"cause_two_rates", 14, "failures.causes[0]", "give one of count (with failures.exposure), mtbf_hours or at_hours, not several"},
    {"only_per_keeps_none", 13, "failures.only_per", "keeps none of the 1 causes"},
    {"cause_zero_detect", 15, "failures.causes[0].detect_s", "expected a number > 0"},
    {"only_per_empty", 13, "failures.only_per", "an empty list keeps no cause"},
    {"planned_with_detect", 15, "failures.causes[0]", "a planned stop is neither detected nor diagnosed: no detect_s"},
    {"spares_without_repair", 16, "restart.spare_nodes", "a failed node comes back into the spares after restart.repair_hours: give it"},
    {"tree_needs_nccl", 20, "collective.algorithm", "tree is one of NCCL's algorithms: it needs cluster.network_model: nccl"},
    {"protocol_needs_nccl", 20, "collective.protocol", "NCCL's protocols need cluster.network_model: nccl"},
    /* collective settings */
    {"bad_algorithm", 23, "collective.algorithm", "expected one of auto, ring, hierarchical, tree, nvls, got \"butterfly\""},
    {"bad_fusion_unit", 24, "collective.fusion_threshold", "size in bytes (units B, KiB, MiB, GiB, KB, MB, GB) up to 1099511627776 B, got \"64Mb\""},
    {"pipeline_chunk_huge", 24, "collective.pipeline_chunk", "expected a positive whole size in bytes (units B, KiB, MiB, GiB, KB, MB, GB) up to 1099511627776 B, got \"1e300\""},
    {"fusion_infinite", 24, "collective.fusion_threshold", "up to 1099511627776 B, got \"1e308GiB\""},
    {"fusion_half_byte", 24, "collective.fusion_threshold", "expected a non-negative whole size in bytes"},
    {"zero_timeout", 24, "collective.timeout", "expected a positive duration"},
    {"negative_pipeline_chunk", 24, "collective.pipeline_chunk", "got \"-4MiB\""},
    {"setting_not_scalar", 24, "collective.compression", "expected one of none, fp16, got a list"},
    /* model.layers */
    {"layers_sum_mismatch", 15, "model.parameters", "1000000 does not equal the sum of the layers' parameters (900000)"},
    {"layer_missing_parameters", 18, "model.layers[1]", "missing field 'parameters'"},
    {"unknown_layer_key", 17, "model.layers[0].size", "unknown key (expected name, parameters, forward_gflops_per_sample, memory_MB_per_sample, traffic_per_sample, activations_per_sample)"},
    {"layers_not_list", 15, "model.layers", "expected a list of layers (or a transformer's number of blocks), got a mapping"},
    {"layers_empty", 15, "model.layers", "the list of layers is empty"},
    {"layer_not_mapping", 15, "model.layers[0]", "expected a mapping with name and parameters, got a scalar"},
    {"layers_no_parameters", 15, "model.layers", "no layer has parameters"},
    /* checks across fields */
    {"no_parameters_or_layers", 14, "model.parameters", "give the parameter count or a list of layers"},
    {"batch_too_big_for_data", 18, "data.train_samples", "30 samples give no full step: 4 workers x batch 10 need 40 per step"},
    {"multi_node_without_network", 3, "cluster.network", "a cluster of 2 nodes needs a network section"},
    /* failures */
    {"fault_unknown_node", 19, "failures.events[0].node", "node 7 is not in the cluster (nodes 0-1)"},
    {"fault_gpu_missing", 19, "failures.events[0].gpu", "missing (required: which GPU of node 1 the gpu_crash hits)"},
    {"fault_gpu_out_of_range", 19, "failures.events[0].gpu", "node 0 has 2 GPUs (0-1)"},
    {"fault_factor_zero", 19, "failures.events[0].factor", "0 is out of range: expected a number > 0 and <= 1"},
    {"fault_factor_above_one", 19, "failures.events[0].factor", "1.5 is out of range: expected a number > 0 and <= 1"},
    {"fault_time_in_the_past", 19, "failures.events[0].at_s", "-3 is out of range: expected a number >= 0"},
    {"fault_epoch_after_the_end", 21, "failures.events[0].epoch", "epoch 5 is after the last one (the job runs 2)"},
    {"fault_step_after_the_end", 22, "failures.events[0].step", "step 90 is after the last step of an epoch (25 on the starting 4 GPUs)"},
    {"fault_no_trigger", 19, "failures.events[0].kind", "no trigger: give at_s, or epoch (and step), or during"},
    {"fault_two_triggers", 22, "failures.events[0].epoch", "give at_s or epoch and step, not both"},
    {"fault_link_missing", 19, "failures.events[0].link", "missing (required for link_down: uplink or gpu)"},
    {"fault_duration_on_crash", 23, "failures.events[0].duration_s", "a gpu_crash lasts"},
    {"fault_unknown_kind", 19, "failures.events[0].kind", "expected one of host_crash, gpu_crash, hang, link_down, link_degraded, straggler, got \"meteor\""},
    {"fault_bad_phase", 19, "failures.events[0].during", "got \"lunch\""},
    {"fault_negative_mtbf", 18, "failures.gpu_mtbf_hours", "0 is out of range: expected a number > 0"},
    {"elastic_min_np_too_big", 18, "elastic.min_np", "6 is more than the 4 GPUs the job starts on"},
    {"elastic_discovery_unknown_node", 19, "elastic.discovery[0].add", "node 4 is not in the cluster (nodes 0-1)"},
    {"elastic_discovery_out_of_order", 21, "elastic.discovery[1].at_s", "5 is before the change above it (10)"},
    {"restart_with_elastic", 19, "restart", "an elastic job recovers by itself"},
};
#define NBAD (sizeof bad_cases / sizeof bad_cases[0])

static char bad_messages[NBAD][512];

static void bad_path(char *buf, size_t len, const char *name) {
  snprintf(buf, len, BAD_DIR "/%s.yaml", name);
}

/* Loads every bad file; each must fail with the expected line, field and phrase. */
static void test_bad_scenarios_rejected(void **state) {
  (void)state;
  int failures = 0;
  for (size_t i = 0; i < NBAD; i++) {
    const bad_case *c = &bad_cases[i];
    char path[256], prefix[320], err[512];
    bad_path(path, sizeof path, c->name);
    rh_scenario sc;
    memset(err, 0, sizeof err);
    rh_status st = rh_scenario_load(path, &sc, err, sizeof err);
    int n = snprintf(prefix, sizeof prefix, "%s:%d: ", path, c->line);
    const char *rest = err + n;
    const char *why = NULL;
    if (st != RH_ERR_INVALID)
      why = "status is not RH_ERR_INVALID";
    else if (strncmp(err, prefix, (size_t)n) != 0)
      why = "message does not start with the expected FILE:LINE: ";
    else if (c->field && (strncmp(rest, c->field, strlen(c->field)) != 0 ||
                          strncmp(rest + strlen(c->field), ": ", 2) != 0))
      why = "message does not name the expected field";
    else if (!strstr(err, c->phrase))
      why = "message lacks the expected phrase";
    else if (sc.path || sc.name || sc.cluster.gpus_per_node || sc.model.layers)
      why = "the scenario was not freed and cleared after the failure";
    if (why) {
      print_error("%s: %s\n  status:   %d\n  message:  %s\n  expected: %s%s%s ... %s\n", path, why,
                  (int)st, err, prefix, c->field ? c->field : "", c->field ? ": " : "", c->phrase);
      failures++;
    }
    if (st == RH_OK) rh_scenario_free(&sc);
  }
  assert_int_equal(failures, 0);
}

/* Each file has a different problem, so no two explanations (the text after FILE:LINE:) match. */
static void test_bad_messages_distinct(void **state) {
  (void)state;
  const char *what[NBAD];
  for (size_t i = 0; i < NBAD; i++) {
    char path[256], err[512] = "";
    bad_path(path, sizeof path, bad_cases[i].name);
    rh_scenario sc;
    rh_status st = rh_scenario_load(path, &sc, err, sizeof err);
    if (st == RH_OK) rh_scenario_free(&sc);
    snprintf(bad_messages[i], sizeof bad_messages[i], "%s", err);
    /* skip "PATH:LINE: " */
    const char *p = bad_messages[i] + strlen(path);
    if (*p == ':') p = strchr(p + 1, ':');
    what[i] = p && *p ? p + 1 : bad_messages[i];
  }
  int dups = 0;
  for (size_t i = 0; i < NBAD; i++)
    for (size_t j = i + 1; j < NBAD; j++)
      if (strcmp(what[i], what[j]) == 0) {
        print_error("%s and %s give the same message:%s\n", bad_cases[i].name, bad_cases[j].name,
                    what[i]);
        dups++;
      }
  assert_int_equal(dups, 0);
}

/* Every file in the bad directory has a row in the table, so none is silently skipped. */
static void test_bad_directory_covered(void **state) {
  (void)state;
  DIR *d = opendir(BAD_DIR);
  assert_non_null(d);
  int files = 0, missing = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0) continue;
    files++;
    size_t i;
    for (i = 0; i < NBAD; i++)
      if (strlen(bad_cases[i].name) == len - 5 && strncmp(bad_cases[i].name, e->d_name, len - 5) == 0)
        break;
    if (i == NBAD) {
      print_error("%s/%s has no row in bad_cases\n", BAD_DIR, e->d_name);
      missing++;
    }
  }
  closedir(d);
  assert_int_equal(missing, 0);
  assert_int_equal(files, (int)NBAD);
}

/* The empty file really is empty (a comment would make it a different case). */
static void test_empty_file_is_empty(void **state) {
  (void)state;
  FILE *f = fopen(BAD_DIR "/empty_file.yaml", "rb");
  assert_non_null(f);
  assert_int_equal(fgetc(f), EOF);
  fclose(f);
}

/* A short error buffer truncates the message but never overflows it. */
static void test_short_error_buffer(void **state) {
  (void)state;
  char err[32];
  memset(err, 'x', sizeof err);
  rh_scenario sc;
  assert_int_equal(rh_scenario_load(BAD_DIR "/zero_tflops.yaml", &sc, err, 20), RH_ERR_INVALID);
  assert_int_equal(strlen(err), 19);
  assert_memory_equal(err, BAD_DIR "/zero_tflops.yaml", 19);
  assert_int_equal(err[20], 'x');
}

static void test_missing_file(void **state) {
  (void)state;
  const char *path = BAD_DIR "/does_not_exist.yaml";
  char err[512] = "";
  rh_scenario sc;
  assert_int_equal(rh_scenario_load(path, &sc, err, sizeof err), RH_ERR_IO);
  if (strncmp(err, path, strlen(path)) != 0 || !strstr(err, "cannot open")) {
    print_error("message: %s\n", err);
    fail();
  }
  assert_null(sc.path);
}

/* Loads path, which must fail with status `want` and a message holding `phrase`. */
static void load_fails(const char *path, rh_status want, const char *phrase) {
  char err[1024] = "";
  rh_scenario sc;
  rh_status st = rh_scenario_load(path, &sc, err, sizeof err);
  if (st != want || !strstr(err, phrase)) {
    print_error("%s: status %d (expected %d), message: %s\n  expected: ... %s\n", path, (int)st,
                (int)want, err, phrase);
    fail();
  }
  assert_null(sc.path);
}

/* A new temporary file (path a mkstemp template, filled in), open for writing. */
static FILE *temp_file(char *path) {
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  return f;
}

/* A cluster past RH_SCENARIO_MAX_GPUS (spares included) is refused at cluster.nodes with the
 * limit and why: 65,536 x 1,024 GPUs were taken and spent minutes in SimGrid, silent. */
static void test_simulated_gpus_bounded(void **state) {
  (void)state;
  static const struct {
    const char *cluster;
    bool ok;
  } cases[] = {
      {"nodes: 128, gpus_per_node: 1024", true},
      {"nodes: 129, gpus_per_node: 1024", false},
      {"nodes: 127, spare_nodes: 2, gpus_per_node: 1024", false},
      {"nodes: 65536, gpus_per_node: 1024", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char path[] = "/tmp/rh-gpus-XXXXXX";
    FILE *f = temp_file(path);
    fprintf(f, "name: big\ncluster: {%s, gpu: {tflops: 10}, intra: {bandwidth_GBps: 100},\n"
               "  network: {nic_Gbps: 100}}\n"
               "model: {parameters: 1000, forward_gflops_per_sample: 1}\n"
               "data: {train_samples: 1.0e9}\nrecipe: {batch_per_worker: 1, epochs: 1}\n",
            cases[i].cluster);
    fclose(f);
    if (cases[i].ok) {
      char err[1024] = "";
      rh_scenario sc;
      if (rh_scenario_load(path, &sc, err, sizeof err) != RH_OK) fail_msg("%s", err);
      rh_scenario_free(&sc);
    } else {
      load_fails(path, RH_ERR_INVALID, ": cluster.nodes: the cluster has ");
      load_fails(path, RH_ERR_INVALID, "at most 131072 are simulated (131,072 took 128 s");
    }
    unlink(path);
  }
}

/* Nesting 100,000 levels deep took libyaml minutes (its time grows with the square of the
 * depth): the file is refused, naming its line, before libyaml reads it. */
static void test_deep_nesting_refused(void **state) {
  (void)state;
  char path[] = "/tmp/rh-nesting-XXXXXX";
  FILE *f = temp_file(path);
  fputs("name: deep\n# a [ in a comment and one in quotes: \"[\"\ncluster: ", f);
  for (int i = 0; i < 100000; i++) fputc(i % 2 ? '[' : '{', f);
  fclose(f);
  load_fails(path, RH_ERR_INVALID, ":3: YAML: more than 64 levels of [ ] and { } nesting");
  /* 64 levels are not too deep: the file then fails on what it says, not on its shape */
  f = fopen(path, "w");
  fputs("name: deep\ncluster: ", f);
  for (int i = 0; i < 64; i++) fputc('[', f);
  for (int i = 0; i < 64; i++) fputc(']', f);
  fputc('\n', f);
  fclose(f);
  load_fails(path, RH_ERR_INVALID, "cluster: expected a mapping");
  unlink(path);
}

/* A file past 4 MiB is refused without being parsed; a directory is named as one (it was "YAML
 * syntax error: input error"). */
static void test_big_file_and_directory(void **state) {
  (void)state;
  char path[] = "/tmp/rh-big-XXXXXX";
  FILE *f = temp_file(path);
  fputs("name: big\n", f);
  for (int i = 0; i < (4 << 20) / 10; i++) fputs("# padding\n", f);
  fclose(f);
  load_fails(path, RH_ERR_INVALID, "a scenario or preset has at most 4194304 (4 MiB)");
  unlink(path);
  load_fails(BAD_DIR, RH_ERR_INVALID, BAD_DIR ": is a directory, not a YAML file");
}

/* ---- valid scenarios ---------------------------------------------------------------------- */

static void load_ok(const char *path, rh_scenario *sc) {
  char err[512] = "";
  rh_status st = rh_scenario_load(path, sc, err, sizeof err);
  if (st != RH_OK) print_error("%s: status %d: %s\n", path, (int)st, err);
  assert_int_equal(st, RH_OK);
}

static void test_default_scenario(void **state) {
  (void)state;
  rh_scenario sc;
  load_ok("scenarios/default.yaml", &sc);
  assert_string_equal(sc.path, "scenarios/default.yaml");
  assert_string_equal(sc.name, "resnet50-p100-2x4");
  assert_non_null(sc.description);
  assert_int_equal(sc.cluster.nodes, 2);
  assert_int_equal(sc.cluster.gpus_per_node[0], 4);
  assert_int_equal(sc.cluster.gpus_per_node[1], 4);
  assert_int_equal(rh_scenario_size(&sc), 8);
  assert_close(sc.cluster.gpu_flops, 5.86e12);
  assert_close(sc.cluster.intra_bw, 20e9);
  assert_close(sc.cluster.intra_lat, 0.7e-6);
  assert_int_equal(sc.cluster.nics_per_node, 1);
  assert_close(sc.cluster.nic_bw, 25e9 / 8);
  assert_close(sc.cluster.nic_lat, 5e-6);
  assert_int_equal(sc.network_model, 0);
  assert_true(sc.cluster.exact_network);
  assert_string_equal(sc.model.name, "resnet50");
  assert_close(sc.model.parameters, 25557032);
  assert_close(sc.model.forward_flops, 8.2e9); /* 2 FLOPs for each of its 4.1 G multiply-adds */
  /* ResNet-50 by stages: their parameters add up to the model's, their FLOPs make its FLOPs */
  assert_int_equal(sc.model.nlayers, 6);
  assert_string_equal(sc.model.layers[0].name, "conv1");
  assert_string_equal(sc.model.layers[5].name, "fc");
  assert_close(sc.model.layers[4].parameters, 14964736);
  assert_close(sc.model.layers[2].forward_flops, 2.06e9);
  rh_scenario one;
  char err1[512];
  assert_int_equal(rh_scenario_load("tests/scenarios/good/one_tensor.yaml", &one, err1, sizeof err1), RH_OK);
  /* no layers listed: one layer "all" holds every parameter */
  assert_int_equal(one.model.nlayers, 1);
  assert_string_equal(one.model.layers[0].name, "all");
  assert_close(one.model.layers[0].parameters, 25557032);
  rh_scenario_free(&one);
  assert_close(sc.data.train, 128000);
  assert_close(sc.data.validation, 5000);
  assert_close(sc.recipe.batch, 64);
  assert_close(sc.recipe.base_lr, 0.0125);
  assert_close(sc.recipe.epochs, 2);
  assert_int_equal(rh_scenario_steps_per_epoch(&sc), 250); /* 128000 / (8 x 64) */
  assert_close(sc.settings.value[RH_SETTING_ALGORITHM], RH_ALGO_AUTO);
  assert_close(sc.settings.value[RH_SETTING_FUSION_THRESHOLD], 64.0 * 1024 * 1024);
  /* not in the file: the defaults */
  assert_close(sc.settings.value[RH_SETTING_TIMEOUT], rh__setting_defs[RH_SETTING_TIMEOUT].default_value);
  rh_scenario_free(&sc);
  assert_null(sc.path);
}

static void test_uneven_hosts(void **state) {
  (void)state;
  rh_scenario sc;
  load_ok(GOOD_DIR "/uneven_hosts.yaml", &sc);
  assert_string_equal(sc.name, "uneven-3-2");
  assert_int_equal(sc.cluster.nodes, 2);
  assert_int_equal(sc.cluster.gpus_per_node[0], 3);
  assert_int_equal(sc.cluster.gpus_per_node[1], 2);
  assert_int_equal(rh_scenario_size(&sc), 5);
  assert_int_equal(rh_scenario_steps_per_epoch(&sc), 20); /* 800 / (5 x 8) */
  assert_close(sc.cluster.gpu_flops, 10e12);
  assert_close(sc.cluster.nic_bw, 25e9 / 8);
  assert_close(sc.cluster.nic_lat, 5e-6);
  assert_close(sc.cluster.reduce_bw, 0);          /* optional, absent: reduction is free */
  assert_close(sc.cluster.intra_backbone_bw, 0);  /* optional, absent: non-blocking switch */
  assert_true(sc.cluster.exact_network);          /* network_model defaults to exact */
  assert_close(sc.recipe.base_lr, 0.01);          /* default learning rate */
  assert_close(sc.data.validation, 0);
  assert_int_equal(sc.model.nlayers, 1);
  assert_close(sc.model.layers[0].parameters, 1e6);
  rh_scenario_free(&sc);
}

static void test_layers_realistic(void **state) {
  (void)state;
  rh_scenario sc;
  load_ok(GOOD_DIR "/layers_realistic.yaml", &sc);
  assert_int_equal(rh_scenario_size(&sc), 4);
  assert_int_equal(rh_scenario_steps_per_epoch(&sc), 20); /* 1280 / (4 x 16) */
  assert_close(sc.recipe.epochs, 2);
  /* network_model: realistic */
  assert_int_equal(sc.network_model, 1);
  assert_false(sc.cluster.exact_network);
  /* units in key names */
  assert_close(sc.cluster.gpu_flops, 8e12);
  assert_close(sc.cluster.reduce_bw, 100e9);
  assert_close(sc.cluster.intra_bw, 40e9);
  assert_close(sc.cluster.intra_lat, 1e-6);
  assert_close(sc.cluster.intra_backbone_bw, 60e9);
  assert_int_equal(sc.cluster.nics_per_node, 2);
  assert_close(sc.cluster.nic_bw, 25e9 / 8);
  assert_close(sc.cluster.nic_lat, 5e-6);
  assert_close(sc.model.forward_flops, 0.25e9);
  /* the layers, in file order; model.parameters is their sum */
  static const struct { const char *name; double parameters; } layers[] = {
      {"conv1", 9408}, {"block1", 215808}, {"block2", 1219584}, {"fc", 513000}};
  assert_int_equal(sc.model.nlayers, 4);
  for (int i = 0; i < 4; i++) {
    assert_string_equal(sc.model.layers[i].name, layers[i].name);
    assert_close(sc.model.layers[i].parameters, layers[i].parameters);
  }
  assert_close(sc.model.parameters, 9408 + 215808 + 1219584 + 513000);
  assert_close(sc.data.validation, 200);
  assert_close(sc.recipe.base_lr, 0.05);
  /* collective settings with units */
  assert_close(sc.settings.value[RH_SETTING_ALGORITHM], RH_ALGO_RING);
  assert_close(sc.settings.value[RH_SETTING_BCAST_ALGORITHM], RH_BCAST_TREE);
  assert_close(sc.settings.value[RH_SETTING_FUSION_THRESHOLD], 33554432);
  assert_close(sc.settings.value[RH_SETTING_COMPRESSION], RH_WIRE_FP16);
  assert_close(sc.settings.value[RH_SETTING_TIMEOUT], 30);
  assert_close(sc.settings.value[RH_SETTING_GRAIN], RH_GRAIN_FINE);
  assert_close(sc.settings.value[RH_SETTING_PIPELINE_CHUNK], 1048576);
  rh_scenario_free(&sc);
}

/* Defaults, then the environment, then the scenario's collective section. */
/* The failure and elastic sections in the runtime's terms: 0-based steps, seconds, bytes/s. */
static void test_failure_sections(void **state) {
  (void)state;
  rh_scenario sc;
  char err[512];
  assert_int_equal(rh_scenario_load(GOOD_DIR "/failures.yaml", &sc, err, sizeof err), RH_OK);
  assert_int_equal(sc.cluster.spares, 1);
  assert_int_equal(sc.cluster.gpus_per_node[2], 4); /* a spare has the last node's GPUs */
  assert_close(sc.cluster.storage_write_bw, 2e9);
  assert_close(sc.cluster.storage_latency, 5e-3);
  assert_close(sc.recipe.checkpoint_every_steps, 40);
  rh_scenario_launch launch;
  assert_int_equal(rh_scenario_launch_init(&sc, &launch), RH_OK);
  assert_true(launch.config.cluster == &sc.cluster && launch.config.settings == &sc.settings);
  assert_true(launch.config.faults == &launch.plan && launch.config.elastic == &launch.elastic);
  assert_null(launch.config.restart);
  const rh_fault_plan plan = launch.plan;
  const rh_fault *f = plan.faults;
  assert_int_equal(plan.nfaults, 3);
  assert_close(plan.gpu_mtbf, 1000 * 3600.0);
  assert_close(plan.node_mtbf, 4000 * 3600.0);
  assert_true(plan.seed == 9);
  assert_int_equal(f[0].kind, RH_FAULT_HOST_CRASH);
  assert_int_equal(f[0].epoch, 1);
  assert_int_equal(f[0].step, 6);
  assert_int_equal(f[0].during, RH_PHASE_ALLREDUCE);
  assert_close(f[0].after, 2.5e-3);
  assert_true(f[0].at < 0 && isinf(f[0].duration) && f[0].gpu == -1);
  assert_true(f[1].uplink && f[1].node == 2 && f[1].epoch < 0);
  assert_close(f[1].at, 3);
  assert_close(f[1].duration, 4);
  assert_close(f[1].factor, 0.5);
  assert_close(f[1].extra_latency, 20e-6);
  assert_true(f[2].kind == RH_FAULT_STRAGGLER && f[2].gpu == -1 && f[2].factor == 0.25);
  const rh_elastic_config el = launch.elastic;
  const rh_host_change *ch = el.changes;
  assert_true(el.min_np == 4 && el.max_np == 12 && el.nchanges == 1);
  assert_close(el.rendezvous, 2);
  assert_close(el.rendezvous_timeout, 15);
  assert_close(el.slots_timeout, 100);
  assert_close(el.worker_start, 7);
  assert_close(el.discovery_interval, 0.5);
  assert_close(el.commit_bw, 10e9);
  assert_true(ch[0].added && ch[0].node == 2 && ch[0].at == 20);
  rh_scenario_launch_free(&launch);
  rh_scenario_free(&sc);
}

static void test_environment_then_scenario(void **state) {
  (void)state;
  rh_scenario sc;
  setenv("RH_TIMEOUT", "5s", 1);
  setenv("RH_FUSION_THRESHOLD", "1MiB", 1);
  load_ok(GOOD_DIR "/layers_realistic.yaml", &sc); /* sets both */
  assert_close(sc.settings.value[RH_SETTING_TIMEOUT], 30);
  assert_close(sc.settings.value[RH_SETTING_FUSION_THRESHOLD], 33554432);
  rh_scenario_free(&sc);
  load_ok(GOOD_DIR "/uneven_hosts.yaml", &sc); /* has no collective section */
  assert_close(sc.settings.value[RH_SETTING_TIMEOUT], 5);
  assert_close(sc.settings.value[RH_SETTING_FUSION_THRESHOLD], 1048576);
  rh_scenario_free(&sc);

  setenv("RH_TIMEOUT", "soon", 1);
  char err[512] = "";
  assert_int_equal(rh_scenario_load(GOOD_DIR "/uneven_hosts.yaml", &sc, err, sizeof err),
                   RH_ERR_INVALID);
  if (!strstr(err, "RH_TIMEOUT") || !strstr(err, "soon")) {
    print_error("message: %s\n", err);
    fail();
  }
  unsetenv("RH_TIMEOUT");
  unsetenv("RH_FUSION_THRESHOLD");
}

/* Horovod's and NCCL's variables (and the RH_* ones) unset: every HOROVOD_* and NCCL_* there is,
 * as the ones without a counterpart would show in rh_settings_ignored. */
static int clear_horovod_nccl(void **state) {
  (void)state;
  extern char **environ;
  for (int again = 1; again;) { /* unsetenv changes environ: look again from the start */
    again = 0;
    for (char **e = environ; *e && !again; e++) {
      if (strncmp(*e, "HOROVOD_", 8) != 0 && strncmp(*e, "NCCL_", 5) != 0) continue;
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
      unsetenv(name);
      again = 1;
    }
  }
  for (int i = 0; i < RH_SETTING_COUNT; i++) unsetenv(rh__setting_defs[i].env);
  return 0;
}

/* rh_settings_init with the environment as it is now; its status, the message into err. */
static rh_status init_settings(rh_settings *s, char *err, size_t len) {
  err[0] = 0;
  return rh_settings_init(s, err, len);
}

/* The name of enum setting id's value, as the settings block prints it. */
static const char *choice(const rh_settings *s, rh_setting_id id) {
  return rh__setting_defs[id].choices[(int)s->value[id]];
}

/* Horovod's and NCCL's variables give the settings they mean, in the settings' units, and say
 * which variable gave each; RH_* wins over them, the scenario over both. */
static void test_horovod_nccl_variables(void **state) {
  (void)state;
  rh_settings s;
  char err[512];
  setenv("HOROVOD_CYCLE_TIME", "5", 1);                 /* Horovod's milliseconds */
  setenv("HOROVOD_FUSION_THRESHOLD", "67108864", 1);    /* bytes: 64 x 2^20 */
  setenv("NCCL_PROTO", "LL128", 1);
  setenv("HOROVOD_HIERARCHICAL_ALLREDUCE", "1", 1);
  setenv("NCCL_ALGO", "tree", 1);
  assert_int_equal(init_settings(&s, err, sizeof err), RH_OK);
  assert_close(s.value[RH_SETTING_CYCLE_TIME], 5 * 1e-3); /* 5 ms in seconds */
  assert_int_equal(s.source[RH_SETTING_CYCLE_TIME], RH_SOURCE_ENVIRONMENT);
  assert_string_equal(s.variable[RH_SETTING_CYCLE_TIME], "HOROVOD_CYCLE_TIME");
  assert_close(s.value[RH_SETTING_FUSION_THRESHOLD], 64.0 * 1024 * 1024);
  assert_string_equal(s.variable[RH_SETTING_FUSION_THRESHOLD], "HOROVOD_FUSION_THRESHOLD");
  assert_string_equal(choice(&s, RH_SETTING_PROTOCOL), "ll128");
  assert_string_equal(s.variable[RH_SETTING_PROTOCOL], "NCCL_PROTO");
  /* Horovod's hierarchical allreduce over NCCL's algorithm within it */
  assert_string_equal(choice(&s, RH_SETTING_ALGORITHM), "hierarchical");
  assert_string_equal(s.variable[RH_SETTING_ALGORITHM], "HOROVOD_HIERARCHICAL_ALLREDUCE");
  assert_null(s.variable[RH_SETTING_TIMEOUT]); /* nothing gave it */
  assert_int_equal(s.source[RH_SETTING_TIMEOUT], RH_SOURCE_DEFAULT);

  /* Horovod's switch off: NCCL's single algorithm, its name in any case; 3.5 ms */
  setenv("HOROVOD_HIERARCHICAL_ALLREDUCE", "0", 1);
  setenv("NCCL_ALGO", "Tree", 1);
  setenv("NCCL_PROTO", "simple", 1);
  setenv("HOROVOD_CYCLE_TIME", "3.5", 1);
  assert_int_equal(init_settings(&s, err, sizeof err), RH_OK);
  assert_string_equal(choice(&s, RH_SETTING_ALGORITHM), "tree");
  assert_string_equal(s.variable[RH_SETTING_ALGORITHM], "NCCL_ALGO");
  assert_string_equal(choice(&s, RH_SETTING_PROTOCOL), "simple");
  assert_close(s.value[RH_SETTING_CYCLE_TIME], 3.5 / 1000);

  /* a list or an exclusion is NCCL's, but no one algorithm: the default stays */
  static const char *const unmapped[] = {"Tree,Ring", "^Tree", "CollNetDirect", "ring,ring"};
  for (size_t i = 0; i < sizeof unmapped / sizeof unmapped[0]; i++) {
    setenv("NCCL_ALGO", unmapped[i], 1);
    assert_int_equal(init_settings(&s, err, sizeof err), RH_OK);
    assert_string_equal(choice(&s, RH_SETTING_ALGORITHM), "auto");
    assert_int_equal(s.source[RH_SETTING_ALGORITHM], RH_SOURCE_DEFAULT);
    assert_null(s.variable[RH_SETTING_ALGORITHM]);
  }

  /* the setting's own variable wins */
  setenv("RH_FUSION_THRESHOLD", "1MiB", 1);
  setenv("RH_PROTOCOL", "ll", 1);
  assert_int_equal(init_settings(&s, err, sizeof err), RH_OK);
  assert_close(s.value[RH_SETTING_FUSION_THRESHOLD], 1048576);
  assert_string_equal(s.variable[RH_SETTING_FUSION_THRESHOLD], "RH_FUSION_THRESHOLD");
  assert_string_equal(choice(&s, RH_SETTING_PROTOCOL), "ll");
  assert_string_equal(s.variable[RH_SETTING_PROTOCOL], "RH_PROTOCOL");
  assert_close(s.value[RH_SETTING_CYCLE_TIME], 3.5e-3); /* no RH_CYCLE_TIME: Horovod's stays */
  unsetenv("RH_PROTOCOL");
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_ALGO");

  /* the scenario wins over both (layers_realistic.yaml: fusion_threshold 32MiB), --set over all */
  rh_scenario sc;
  load_ok(GOOD_DIR "/layers_realistic.yaml", &sc);
  assert_close(sc.settings.value[RH_SETTING_FUSION_THRESHOLD], 32.0 * 1048576);
  assert_int_equal(sc.settings.source[RH_SETTING_FUSION_THRESHOLD], RH_SOURCE_SCENARIO);
  assert_null(sc.settings.variable[RH_SETTING_FUSION_THRESHOLD]);
  assert_close(sc.settings.value[RH_SETTING_CYCLE_TIME], 3.5e-3); /* the file has none */
  assert_string_equal(sc.settings.variable[RH_SETTING_CYCLE_TIME], "HOROVOD_CYCLE_TIME");
  rh_scenario_free(&sc);
  static const char *const sets[] = {"collective.cycle_time=2ms"};
  rh_scenario_opts opts = {.sets = sets, .nsets = 1};
  assert_int_equal(rh_scenario_load_opts(GOOD_DIR "/layers_realistic.yaml", &opts, &sc, err,
                                         sizeof err),
                   RH_OK);
  assert_close(sc.settings.value[RH_SETTING_CYCLE_TIME], 2e-3);
  assert_int_equal(sc.settings.source[RH_SETTING_CYCLE_TIME], RH_SOURCE_COMMAND_LINE);
  assert_null(sc.settings.variable[RH_SETTING_CYCLE_TIME]);
  rh_scenario_free(&sc);
  clear_horovod_nccl(NULL);
}

/* A value Horovod or NCCL would not take either is refused as a bad RH_* value is, naming the
 * variable and the value; the scenario loader passes the message on. */
static void test_horovod_nccl_bad_values(void **state) {
  (void)state;
  /* each with what its message must say is accepted: 1 TiB is 2^40 bytes, an hour 3600000 ms */
  static const char *const bad[][3] = {
      {"HOROVOD_FUSION_THRESHOLD", "abc", "0 to 1099511627776 (1 TiB), no unit"},
      {"HOROVOD_FUSION_THRESHOLD", "64MiB", "a whole number of bytes in digits alone"},
      {"HOROVOD_FUSION_THRESHOLD", "-1", "0 to 1099511627776"},
      {"HOROVOD_FUSION_THRESHOLD", "2199023255552", "0 to 1099511627776"},
      {"HOROVOD_CYCLE_TIME", "soon", "a number of milliseconds, 0 to 3600000"},
      {"HOROVOD_CYCLE_TIME", "5ms", "milliseconds"},
      {"HOROVOD_CYCLE_TIME", "-5", "0 to 3600000"},
      {"HOROVOD_CYCLE_TIME", "3600001", "0 to 3600000"},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", "yes", "0 off, above 0 on"},
      {"NCCL_ALGO", "Trie", "Ring, Tree, NVLS"},
      {"NCCL_ALGO", "Tree,Rung", "a list with commas"},
      {"NCCL_ALGO", "^", "^ first to exclude"},
      {"NCCL_PROTO", "LL256", "LL, LL128, Simple"},
      {"NCCL_PROTO", ",", "LL, LL128, Simple"},
      {"RH_ALGORITHM", "rung", "one of auto, ring, hierarchical, tree, nvls"},
      {"RH_FUSION_THRESHOLD", "64 furlongs", "units B, KiB, MiB, GiB, KB, MB, GB), up to "
                                             "1099511627776 B"},
      {"RH_CYCLE_TIME", "5 min", "units s, ms, us), up to 3600 s"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    clear_horovod_nccl(NULL);
    setenv(bad[i][0], bad[i][1], 1);
    rh_settings s;
    char err[512], want[256];
    assert_int_equal(init_settings(&s, err, sizeof err), RH_ERR_INVALID);
    snprintf(want, sizeof want, "environment variable %s: cannot use \"%s\": expected ", bad[i][0],
             bad[i][1]);
    if (strncmp(err, want, strlen(want)) != 0 || !strstr(err, bad[i][2]))
      fail_msg("%s=%s: \"%s\", expected \"%s...%s\"", bad[i][0], bad[i][1], err, want, bad[i][2]);
    rh_scenario sc;
    assert_int_equal(rh_scenario_load(GOOD_DIR "/uneven_hosts.yaml", &sc, err, sizeof err),
                     RH_ERR_INVALID);
    assert_non_null(strstr(err, want));
    unsetenv(bad[i][0]);
  }
  clear_horovod_nccl(NULL);
}

/* The HOROVOD_* and NCCL_* variables set that nothing reads are named once each, sorted; those
 * that give a setting, those the caller reads itself and those set empty are not. */
/* NCCL_ALGO=Tree or NCCL_PROTO on a scenario without NCCL's network model: NCCL's own variables,
 * set for the real cluster, apply to nothing the simulator runs there; the settings go back to
 * their defaults and the variables are named as ignored (RH_PROTOCOL asking the same is an
 * error: it is this tool's own). */
static void test_nccl_variables_without_nccl_model(void **state) {
  (void)state;
  clear_horovod_nccl(NULL);
  setenv("NCCL_ALGO", "Tree", 1);
  setenv("NCCL_PROTO", "LL", 1);
  rh_scenario sc;
  char err[1024];
  assert_int_equal(rh_scenario_load("scenarios/default.yaml", &sc, err, sizeof err), RH_OK);
  assert_int_equal((int)sc.settings.value[RH_SETTING_ALGORITHM] == RH_ALGO_TREE, 0);
  assert_int_equal((int)sc.settings.value[RH_SETTING_PROTOCOL], RH_PROTO_AUTO);
  assert_int_equal(sc.settings.source[RH_SETTING_PROTOCOL], RH_SOURCE_DEFAULT);
  char **names = rh_settings_ignored(&sc.settings, NULL);
  assert_non_null(names);
  /* NCCL_ALGO's tree is the scenario's own algorithm's to override (it names one): read, not
   * ignored */
  assert_int_equal(sc.settings.source[RH_SETTING_ALGORITHM], RH_SOURCE_SCENARIO);
  assert_string_equal(names[0], "NCCL_PROTO");
  assert_null(names[1]);
  free(names);
  rh_scenario_free(&sc);
  clear_horovod_nccl(NULL);
  setenv("RH_PROTOCOL", "ll", 1);
  assert_int_equal(rh_scenario_load("scenarios/default.yaml", &sc, err, sizeof err), RH_ERR_INVALID);
  assert_non_null(strstr(err, "(environment variable RH_PROTOCOL) need cluster.network_model: nccl"));
}

static void test_horovod_nccl_ignored(void **state) {
  (void)state;
  clear_horovod_nccl(NULL);
  char **none = rh_settings_ignored(NULL, NULL);
  assert_non_null(none);
  assert_null(none[0]);
  free(none);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("HOROVOD_AUTOTUNE", "1", 1);
  setenv("NCCL_ALGO", "Tree,Ring", 1); /* NCCL's, but no counterpart */
  setenv("NCCL_IB_DISABLE", "1", 1);
  setenv("HOROVOD_FUSION_THRESHOLD", "1024", 1); /* gives fusion_threshold */
  setenv("NCCL_PROTO", "LL", 1);                 /* gives protocol */
  setenv("HOROVOD_TIMELINE", "/tmp/t.json", 1);  /* the caller's, below */
  setenv("NCCL_SOCKET_IFNAME", "", 1);           /* empty: as unset */
  setenv("RH_NOT_A_SETTING", "1", 1);            /* neither Horovod's nor NCCL's */
  static const char *const also[] = {"HOROVOD_TIMELINE", NULL};
  char **names = rh_settings_ignored(NULL, also);
  assert_non_null(names);
  static const char *const want[] = {"HOROVOD_AUTOTUNE", "NCCL_ALGO", "NCCL_DEBUG",
                                     "NCCL_IB_DISABLE", NULL};
  for (int i = 0; want[i] || names[i]; i++) {
    if (!want[i] || !names[i] || strcmp(want[i], names[i]) != 0)
      fail_msg("ignored[%d]: %s, expected %s", i, names[i] ? names[i] : "(end)",
               want[i] ? want[i] : "(end)");
  }
  free(names);
  /* without the caller's reading it, HOROVOD_TIMELINE is ignored too, in its place */
  names = rh_settings_ignored(NULL, NULL);
  assert_non_null(names);
  assert_string_equal(names[0], "HOROVOD_AUTOTUNE");
  assert_string_equal(names[1], "HOROVOD_TIMELINE");
  assert_string_equal(names[2], "NCCL_ALGO");
  free(names);
  unsetenv("RH_NOT_A_SETTING");
  clear_horovod_nccl(NULL);
}

/* The settings' environment variables would change what the files mean: clear them. */
static int clear_environment(void **state) {
  return clear_horovod_nccl(state);
}

/* Presets fill what the scenario leaves out, the scenario's keys win, and the network model
 * follows: NCCL's for a cluster from presets. */
static void test_presets(void **state) {
  (void)state;
  rh_scenario sc;
  load_ok(GOOD_DIR "/presets_and_defaults.yaml", &sc);
  assert_int_equal(sc.cluster.gpus_per_node[0], 8);           /* the node preset's */
  assert_true(fabs(sc.cluster.gpu_flops - 40e12) < 1);         /* the scenario's, over 37 */
  assert_int_equal(sc.cluster.fabric.arch, RH_ARCH_HOPPER);    /* the GPU preset's */
  assert_true(fabs(sc.cluster.intra_bw - 370.8e9) < 1);        /* the node preset's */
  assert_true(fabs(sc.cluster.nic_bw - 50e9) < 1);             /* the network preset's 400 Gbit/s */
  assert_int_equal(sc.cluster.nics_per_node, 8);
  assert_true(fabs(sc.cluster.fabric.nvls_efficiency - 0.74) < 1e-12);
  assert_int_equal(sc.cluster.net_model, RH_NET_NCCL);
  rh_scenario_free(&sc);
  load_ok(GOOD_DIR "/one_tensor.yaml", &sc); /* written by hand: the exact network */
  assert_int_equal(sc.cluster.net_model, RH_NET_EXACT);
  rh_scenario_free(&sc);
}

/* --set checks its KEY for an empty step ("a..b"); its VALUE may hold "..", as a relative path
 * such as ../data/x does. */
static void test_set_value_with_dots(void **state) {
  (void)state;
  static const char *const sets[] = {"name=../runs/a..b"};
  rh_scenario_opts opts = {.sets = sets, .nsets = 1};
  rh_scenario sc;
  char err[512];
  assert_int_equal(rh_scenario_load_opts("scenarios/default.yaml", &opts, &sc, err, sizeof err),
                   RH_OK);
  assert_string_equal(sc.name, "../runs/a..b");
  rh_scenario_free(&sc);
  static const char *const bad[] = {"cluster..nodes=2"};
  opts.sets = bad;
  assert_int_equal(rh_scenario_load_opts("scenarios/default.yaml", &opts, &sc, err, sizeof err),
                   RH_ERR_INVALID);
  assert_non_null(strstr(err, "--set cluster..nodes=2: expected KEY=VALUE"));
}

/* The seed-001 replay: recipe.seed 42 is the script's torch.manual_seed(args.seed); its
 * DistributedSampler(dataset, num_replicas, rank) shuffles from torch's default seed, 0. */
static void test_sampler_seed(void **state) {
  (void)state;
  rh_scenario sc;
  load_ok("scenarios/seeds/oci-pytorch-elastic-mnist.yaml", &sc);
  assert_close(sc.recipe.seed, 42);
  assert_true(sc.recipe.sampler_seed == 0);
  rh_scenario_free(&sc);
}

/* ---- FLOPs, not multiply-adds --------------------------------------------------------------- */

/* torchvision's published forward counts at their image size, in G multiply-adds (its docs'
 * "GFLOPS" column counts one per multiply-add); the tool counts 2 FLOPs a multiply-add. */
static const struct {
  const char *name; /* model.name with everything but letters and digits dropped */
  double gmacs;
} known_models[] = {
    {"resnet50", 4.09},  {"resnet101", 7.80},   {"resnet152", 11.51},
    {"vgg16", 15.47},    {"inceptionv3", 5.71}, {"inception3", 5.71},
};
static int flops_checked, flops_wrong;

static int check_flops(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)ftw;
  size_t len = strlen(path);
  if (type != FTW_F || len < 5 || strcmp(path + len - 5, ".yaml")) return 0;
  rh_scenario sc;
  char err[512];
  if (rh_scenario_load(path, &sc, err, sizeof err) != RH_OK) return 0; /* not one scenario */
  char name[64] = "";
  size_t n = 0;
  for (const char *c = sc.model.name ? sc.model.name : ""; *c && n + 1 < sizeof name; c++)
    if (isalnum((unsigned char)*c)) name[n++] = (char)tolower((unsigned char)*c);
  name[n] = 0;
  for (size_t i = 0; i < sizeof known_models / sizeof *known_models; i++) {
    if (strcmp(name, known_models[i].name) || !(sc.model.forward_flops > 0)) continue;
    double want = 2 * known_models[i].gmacs * 1e9, got = sc.model.forward_flops;
    flops_checked++;
    if (fabs(got - want) > 0.05 * want) {
      print_error("%s: %s: %.4g GFLOP forward, expected 2 x %.4g G multiply-adds = %.4g\n", path,
                  sc.model.name, got / 1e9, known_models[i].gmacs, want / 1e9);
      flops_wrong++;
    }
  }
  rh_scenario_free(&sc);
  return 0;
}

/* Every shipped scenario that gives a known CNN's forward cost counts FLOPs, not multiply-adds:
 * within 5% of twice torchvision's published multiply-adds (a GMAC count is half of it). */
static void test_shipped_flops_are_flops(void **state) {
  (void)state;
  flops_checked = flops_wrong = 0;
  assert_int_equal(nftw("scenarios", check_flops, 16, FTW_PHYS), 0);
  assert_true(flops_checked >= 10); /* the ResNets, VGG-16 and Inception of scenarios/ */
  assert_int_equal(flops_wrong, 0);
}

/* recipe.duration is the simulator's clock: a scenario for real processes that gives it is bad
 * input naming the field and its line (its ranks would not agree on the step that ends it). */
static void test_duration_simulator_only(void **state) {
  (void)state;
  char dir[] = "/tmp/rehearsal-duration-XXXXXX", path[64];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/d.yaml", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  const char *text = "name: d\ncluster: {nodes: 1, gpus_per_node: 2, gpu: {tflops: 10}, intra: "
                     "{bandwidth_GBps: 20}}\nmodel: {parameters: 1000, forward_gflops_per_sample: "
                     "1}\ndata: {train_samples: 1000}\nrecipe:\n  batch_per_worker: 10\n"
                     "  duration: 30d\n";
  fputs(text, f);
  fclose(f);
  rh_scenario sc;
  char err[512];
  rh_scenario_opts opts = {0};
  assert_int_equal(rh_scenario_load_opts(path, &opts, &sc, err, sizeof err), RH_OK);
  assert_true(fabs(sc.recipe.duration - 30 * 86400.0) < 1e-6);
  rh_scenario_free(&sc);
  opts.real_target = true;
  assert_int_equal(rh_scenario_load_opts(path, &opts, &sc, err, sizeof err), RH_ERR_INVALID);
  assert_non_null(strstr(err, ":7: recipe.duration: the simulator's clock"));
  unlink(path);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_scenarios_rejected),
      cmocka_unit_test(test_bad_messages_distinct),
      cmocka_unit_test(test_bad_directory_covered),
      cmocka_unit_test(test_empty_file_is_empty),
      cmocka_unit_test(test_short_error_buffer),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_deep_nesting_refused),
      cmocka_unit_test(test_simulated_gpus_bounded),
      cmocka_unit_test(test_big_file_and_directory),
      cmocka_unit_test(test_default_scenario),
      cmocka_unit_test(test_uneven_hosts),
      cmocka_unit_test(test_layers_realistic),
      cmocka_unit_test(test_presets),
      cmocka_unit_test(test_set_value_with_dots),
      cmocka_unit_test(test_environment_then_scenario),
      cmocka_unit_test_teardown(test_horovod_nccl_variables, clear_horovod_nccl),
      cmocka_unit_test_teardown(test_horovod_nccl_bad_values, clear_horovod_nccl),
      cmocka_unit_test_teardown(test_horovod_nccl_ignored, clear_horovod_nccl),
      cmocka_unit_test_teardown(test_nccl_variables_without_nccl_model, clear_horovod_nccl),
      cmocka_unit_test(test_failure_sections),
      cmocka_unit_test(test_shipped_flops_are_flops),
      cmocka_unit_test(test_sampler_seed),
      cmocka_unit_test(test_duration_simulator_only),
  };
  return cmocka_run_group_tests(tests, clear_environment, NULL);
}
