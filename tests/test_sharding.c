/*
 * test_sharding.c: the memory a sharded job plans for, as a user meets it.  Llama-2-7B in bf16
 * with Adam on 16 nodes of 8 H100 (80 GB): without sharding it does not fit, and the check names
 * the least sharding that does; with each sharding, the state one GPU holds is the bytes a
 * parameter each part takes, divided by the ranks it is sharded over, derived here from the
 * architecture (Touvron et al. 2023) and ZeRO's accounting (Rajbhandari et al. 2020), not from
 * the tool.
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

static char tmpdir[64];

/* Writes `text` to `path` (a scenario). */
static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* Llama-2-7B: 32 blocks of attention (q, k, v, o: 4 x 4096^2), SwiGLU (3 x 4096 x 11008) and two
 * RMSNorms (2 x 4096); embeddings and an untied head of 32000 x 4096, and the last norm. */
static const double block = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2 * 4096;
static const double root = 2.0 * 32000 * 4096 + 4096;
#define PARAMS (32 * block + root)

static const char scenario[] = "name: llama7b-128\n"
                               "cluster: {node: dgx-h100, nodes: 16}\n"
                               "model: {preset: llama2-7b, precision: bf16}\n"
                               "data: {train_samples: 4096, validation_samples: 0}\n"
                               "recipe: {batch_per_worker: 1, optimizer: adam, steps: 2}\n";

/* `rehearsal run` with recipe.sharding=S (and activation checkpointing `ac`): its exit status,
 * console and summary.json */
static json_t *run_with(const char *sharding, const char *ac, int *rc, char **text) {
  char *file = rh_test_path(tmpdir, "llama.yaml"), set[64], tag[64];
  put(file, scenario);
  char acset[64];
  snprintf(set, sizeof set, "recipe.sharding=%s", sharding);
  snprintf(acset, sizeof acset, "recipe.activation_checkpointing=%s", ac);
  snprintf(tag, sizeof tag, "out-%s-%s", sharding, ac);
  char *out = rh_test_path(tmpdir, tag), log[128];
  snprintf(log, sizeof log, "%s.txt", out);
  char *argv[] = {RH_BINARY, "run", file, "--out", out, "--set", set, "--set", acset, NULL};
  *rc = rh_test_spawn(argv, log, NULL);
  *text = rh_test_slurp(log);
  return rh_test_summary_in(out);
}

static json_t *run(const char *sharding, int *rc, char **text) {
  return run_with(sharding, "none", rc, text);
}

static double memory_gb(json_t *js, const char *key) {
  return json_real_value(json_object_get(json_object_get(js, "memory"), key));
}

/* Weights 2, gradients 2, fp32 master 4, Adam's moments 8 bytes a parameter; ZeRO-1 shards the
 * last two, ZeRO-2 the gradients too, hybrid (over a node's 8) and full (over 128) everything,
 * and full sharding gathers the root unit, two blocks and one block's gradients whole. */
static void test_memory_per_sharding(void **state) {
  (void)state;
  static const struct {
    const char *name;
    double d, weights, gradients, sharded; /* degree; bytes a parameter, whole and sharded */
    bool units;
  } cases[] = {{"none", 1, 2, 2, 12, false},     {"optimizer", 128, 2, 2, 12, false},
               {"gradients", 128, 2, 0, 14, false}, {"hybrid", 8, 0, 0, 16, true},
               {"full", 128, 0, 0, 16, true}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc;
    char *text;
    json_t *js = run(cases[i].name, &rc, &text);
    double per = cases[i].weights + cases[i].gradients + cases[i].sharded / cases[i].d;
    double state_b = per * PARAMS;
    double units = cases[i].units ? (root + 2 * block) * 2 + block * 2 : 0;
    double got = (memory_gb(js, "weights_GB") + memory_gb(js, "master_GB") +
                  memory_gb(js, "gradients_GB") + memory_gb(js, "optimizer_GB")) * 1e9;
    print_message("%-9s state %.3f GB (derived %.3f), units %.3f GB (derived %.3f), "
                  "total %.2f GB\n",
                  cases[i].name, got / 1e9, state_b / 1e9, memory_gb(js, "units_GB"), units / 1e9,
                  memory_gb(js, "total_GB"));
    assert_true(fabs(got - state_b) <= 0.01 * state_b);
    assert_true(fabs(memory_gb(js, "units_GB") * 1e9 - units) <= 0.01 * units + 1);
    assert_int_equal((int)json_integer_value(json_object_get(json_object_get(js, "memory"),
                                                             "shard_degree")), (int)cases[i].d);
    bool fits = memory_gb(js, "total_GB") <= 80;
    if (strcmp(cases[i].name, "none") == 0) {
      /* 16 bytes a parameter, 108 GB before any activation: the check fails and names ZeRO-1 */
      assert_false(fits);
      assert_int_equal(rc, 1);
      if (!strstr(text, "FAIL  fits_memory") ||
          !strstr(text, "recipe.sharding: optimizer (ZeRO-1) over 128 ranks would fit"))
        fail_msg("%s", text);
    } else {
      assert_true(fits);
      assert_non_null(strstr(text, "PASS  fits_memory"));
      assert_non_null(strstr(text, "  sharding     "));
    }
    free(text);
    json_decref(js);
  }
}

static double steady_ms(json_t *js) {
  return json_real_value(json_object_get(json_object_get(js, "summary"), "steady_step_ms"));
}

/* Activation checkpointing.  A Llama-2 block keeps, per sample of s = 4,096 tokens (h = 4,096,
 * f = 11,008), 8 s h + 3 s f values (its two norms, q/k/v, the attention's output, the output
 * projection, the residual's; SwiGLU's two up-projections and their product), 2 bytes each.
 * Full checkpointing keeps each of the 32 blocks' input (s h) and one block whole while it is
 * recomputed: 31 (8 s h + 3 s f) - 32 s h values fewer.  Selective recomputes the attention cores
 * (s h each): 31 s h fewer.  Full checkpointing runs each block's forward again in backward: the
 * step grows by the blocks' forward times the report lists. */
static void test_activation_checkpointing(void **state) {
  (void)state;
  const double s = 4096, h = 4096, f = 11008, block_acts = 8 * s * h + 3 * s * f;
  const double saved[] = {0, 31 * s * h * 2, (31 * block_acts - 32 * s * h) * 2};
  const char *modes[] = {"none", "selective", "full"};
  double acts0 = 0, step0 = 0;
  for (int i = 0; i < 3; i++) {
    int rc;
    char *text;
    json_t *js = run_with("full", modes[i], &rc, &text);
    assert_int_equal(rc, 0);
    double acts = memory_gb(js, "activations_GB") * 1e9, step = steady_ms(js);
    if (i == 0) acts0 = acts, step0 = step;
    print_message("%-9s activations %.3f GB (%.3f fewer, derived %.3f), step %.2f ms\n", modes[i],
                  acts / 1e9, (acts0 - acts) / 1e9, saved[i] / 1e9, step);
    assert_true(fabs((acts0 - acts) - saved[i]) <= 1e-6 * acts0);
    if (i == 2) { /* the blocks' forward again */
      json_t *layers = json_object_get(js, "layers");
      double forward = 0;
      for (size_t k = 0; k < json_array_size(layers); k++) {
        json_t *l = json_array_get(layers, k);
        if (strncmp(json_string_value(json_object_get(l, "name")), "blocks.", 7) == 0)
          forward += json_real_value(json_object_get(l, "forward_ms"));
      }
      print_message("full: step +%.2f ms, the blocks' forward %.2f ms\n", step - step0, forward);
      assert_true(fabs(step - step0 - forward) <= 0.01 * forward);
    }
    free(text);
    json_decref(js);
  }
}

/* Eight sequences a GPU on 16 H100: no sharding fits (142.7 GB of activations), so the check
 * names the least sharding that fits with full checkpointing: ZeRO-1 keeps (2 + 2 + 12/16) bytes a
 * parameter, and a sample 32 block inputs (s h each), one block whole (8 s h + 3 s f), and what is
 * outside the blocks (the embedding's and the last norm's s h, the head's and the loss's s V, V =
 * 32,000), 2 bytes a value, plus Horovod's 128 MiB fusion buffer. */
static void test_checkpointing_suggested(void **state) {
  (void)state;
  char *file = rh_test_path(tmpdir, "eight.yaml");
  put(file, "name: eight\ncluster: {node: dgx-h100, nodes: 2}\nmodel: {preset: llama2-7b, "
            "precision: bf16}\ndata: {train_samples: 4096, validation_samples: 0}\nrecipe: "
            "{batch_per_worker: 8, optimizer: adam, steps: 2}\n");
  char out[128], log[160];
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "eight"));
  snprintf(log, sizeof log, "%s.txt", out);
  char *argv[] = {RH_BINARY, "run", file, "--out", out, NULL};
  assert_int_equal(rh_test_spawn(argv, log, NULL), 1);
  char *text = rh_test_slurp(log);
  const double s = 4096, h = 4096, ff = 11008, v = 32000;
  double acts = (32 * s * h + 8 * s * h + 3 * s * ff + 2 * s * h + 2 * s * v) * 2 * 8;
  double total = (2 + 2 + 12.0 / 16) * PARAMS + acts + 128.0 * 1024 * 1024;
  char want[200];
  snprintf(want, sizeof want, "recipe.sharding: optimizer (ZeRO-1) over 16 ranks with "
           "activation_checkpointing: full would fit, %.2f GB per GPU", total / 1e9);
  print_message("derived: %s\n", want);
  if (!strstr(text, want)) fail_msg("%s", text);
  free(text);
}

/* A sweep over sharding and checkpointing lays out each point's memory of one GPU: the CSV's
 * memory_GB is each point's summary.json memory, and it falls from none to full sharding. */
static void test_sweep_columns(void **state) {
  (void)state;
  char file[128], out[128];
  snprintf(file, sizeof file, "%s", rh_test_path(tmpdir, "sweep.yaml"));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "sweep"));
  put(file, "name: sweep\ncluster: {node: dgx-h100, nodes: 1}\nmodel: {preset: gpt2, precision: "
            "bf16}\ndata: {train_samples: 4096, validation_samples: 0}\nrecipe: "
            "{batch_per_worker: 4, optimizer: adam, steps: 1}\n");
  char *argv[] = {RH_BINARY, "sweep", file, "-o", out, "-j", "1", "--axis",
                  "recipe.sharding=none,full", NULL};
  assert_int_equal(rh_test_spawn(argv, NULL, NULL), 0);
  char csv[160];
  snprintf(csv, sizeof csv, "%s/sweep.csv", out);
  char *text = rh_test_slurp(csv);
  assert_non_null(strstr(text, ",tokens_per_s,mfu,memory_GB,status\n"));
  double gb[2];
  for (int p = 0; p < 2; p++) {
    char dir[160];
    snprintf(dir, sizeof dir, "%s/points/%03d", out, p);
    json_t *js = rh_test_summary_in(dir);
    gb[p] = memory_gb(js, "total_GB");
    char cell[64];
    snprintf(cell, sizeof cell, ",%.9g,ok\n", gb[p]);
    if (!strstr(text, cell)) fail_msg("no %s in\n%s", cell, text);
    json_decref(js);
  }
  assert_true(gb[1] < gb[0]);
  free(text);
}

/* The samples' older spelling still reaches the samples; written twice, it is refused; a hybrid
 * group needs the same GPUs on every node; checkpointing needs blocks (a CNN has none). */
static void test_bad_sharding(void **state) {
  (void)state;
  char file[128], out[128], err[128]; /* rh_test_path's buffer is reused by each call */
  snprintf(file, sizeof file, "%s", rh_test_path(tmpdir, "bad.yaml"));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "bad"));
  snprintf(err, sizeof err, "%s", rh_test_path(tmpdir, "bad.err"));
#define TWO_NODES(gpus)                                                                            \
  "name: bad\ncluster: {nodes: 2, gpus_per_node: " gpus ", gpu: {tflops: 10}, intra: "             \
  "{bandwidth_GBps: 100}, network: {nic_Gbps: 100}}\nmodel: {preset: gpt2}\n"
  static const char *const cases[][2] = {
      {TWO_NODES("2") "data: {train_samples: 64, sharding: replicated}\nrecipe: {batch_per_worker: "
                      "4, epochs: 1, sharding: distributed}\n",
       "bad.yaml:5: recipe.sharding: distributed is the samples' sharding, given by data.sharding "
       "too"},
      {TWO_NODES("2") "data: {train_samples: 64}\nrecipe: {batch_per_worker: 4, epochs: 1, "
                      "sharding: zero3}\n",
       "bad.yaml:5: recipe.sharding: expected one of none, optimizer, gradients, hybrid, full"},
      {TWO_NODES("[3, 2]") "data: {train_samples: 64}\nrecipe: {batch_per_worker: 4, epochs: 1, "
                           "sharding: hybrid}\n",
       "recipe.sharding: hybrid shards inside groups of whole nodes"},
      {"name: bad\ncluster: {nodes: 1, gpus_per_node: 2, gpu: {tflops: 10}, intra: "
       "{bandwidth_GBps: 100}}\nmodel: {preset: resnet50}\ndata: {train_samples: 64}\n"
       "recipe: {batch_per_worker: 4, epochs: 1, activation_checkpointing: full}\n",
       "bad.yaml:5: recipe.activation_checkpointing: the model has no transformer blocks"},
  };
#undef TWO_NODES
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    put(file, cases[i][0]);
    char *argv[] = {RH_BINARY, "run", file, "--out", out, NULL};
    assert_int_equal(rh_test_spawn(argv, NULL, err), 2);
    char *text = rh_test_slurp(err);
    if (!strstr(text, cases[i][1])) fail_msg("%s", text);
    free(text);
  }
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "sharding");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_memory_per_sharding),
                                     cmocka_unit_test(test_activation_checkpointing),
                                     cmocka_unit_test(test_checkpointing_suggested),
                                     cmocka_unit_test(test_sweep_columns),
                                     cmocka_unit_test(test_bad_sharding)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
