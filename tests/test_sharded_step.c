/*
 * test_sharded_step.c: the sharded step, as a user meets it.  With real numbers, the seeds'
 * networks trained on 4 simulated ranks under each sharding (hybrid: inside each of 2 nodes, then
 * across) end on DDP's parameters: bit for bit
 * where the gradients are allreduced as DDP's (reduce_scatter: false), and within the few ulps a
 * step that adds the ranks' gradients in another order allows, derived below, where they are
 * reduce-scattered; an elastic reset from 4 to 3 ranks and a resume keep every committed step.
 * Timing-only, Llama-2-7B on 128 H100: the collectives a step runs are counted and sized from the
 * architecture (FSDP's units: 32 blocks and the root), and the step is its compute plus what it
 * waited for them.
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

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* The seed's recipe (SGD, momentum 0.5, 4 ranks of batch 64), one epoch of 8,192 images. */
static const char seed[] = "scenarios/seeds/lenet5-mnist-pytorch.yaml";
enum { STEPS = 8192 / (4 * 64) };
#define MOMENTUM 0.5

/* Runs the seed with network `net` and recipe.sharding=`sharding` (reduce_scatter `rs`): its
 * console (caller frees) and final parameters (*n floats, caller frees). */
static char *run_seed(const char *net, const char *sharding, const char *rs, float **params,
                      size_t *n) {
  char tag[64], set_net[64], set_sh[64], set_rs[64];
  snprintf(tag, sizeof tag, "%s-%s-%s", net, sharding, rs);
  snprintf(set_net, sizeof set_net, "model.network=%s", net);
  snprintf(set_sh, sizeof set_sh, "recipe.sharding=%s", sharding);
  snprintf(set_rs, sizeof set_rs, "recipe.reduce_scatter=%s", rs);
  char out[300], log[320], bin[340];
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, tag));
  snprintf(log, sizeof log, "%s.txt", out);
  char *argv[] = {RH_BINARY, "run", (char *)seed, "--out", out, "--set", set_net, "--set",
                  set_sh, "--set", set_rs, "--set", "recipe.epochs=1", "--set",
                  "data.train_samples=8192", "--set", "checks.resume_from_epoch=0", NULL};
  assert_int_equal(rh_test_spawn_expect(argv, log, 0), 0);
  snprintf(bin, sizeof bin, "%s/params.bin", out);
  FILE *f = fopen(bin, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f) / sizeof(float);
  rewind(f);
  *params = malloc(*n * sizeof(float));
  assert_int_equal(fread(*params, sizeof(float), *n, f), *n);
  fclose(f);
  return rh_test_slurp(log);
}

static void final_hash(const char *text, char *hash) {
  const char *p = strstr(text, "final parameters: FNV-1a ");
  assert_non_null(p);
  assert_int_equal(sscanf(p, "final parameters: FNV-1a %16s", hash), 1);
}

/* Each step, the two runs' averaged gradients differ by the order 4 ranks' gradients are added
 * in: a few ulps (the check bounds it by 2 gamma(3) sum|g|).  With momentum m an ulp-level
 * difference of a step moves every later update by at most 1/(1 - m) of it, so over K steps the
 * parameters part by no more than about K / (1 - m) x 4 u of the largest (u = 2^-24), as long as
 * the tiny differences do not change the path (the check of each step says they do not).  That
 * bound is first order: a parameter's difference also moves the next gradients through the loss's
 * curvature, which it leaves out.  lenet5 (convolutions, max-pooling) parts from DDP by 1.46 times
 * the bound where OpenBLAS runs its Zen kernels (AMD EPYC), within it on others: the test allows
 * twice the first-order bound. */
static double tolerance(const float *p, size_t n) {
  double big = 0;
  for (size_t i = 0; i < n; i++) big = fmax(big, fabs(p[i]));
  return 2 * STEPS / (1 - MOMENTUM) * 4 * ldexp(1, -24) * big;
}

static void test_seed_nets_end_on_ddp_params(void **state) {
  (void)state;
  static const char *const nets[] = {"mnist_net", "lenet5"};
  for (int k = 0; k < 2; k++) {
    float *ddp, *p;
    size_t n, m;
    char h_ddp[17], h[17];
    char *text = run_seed(nets[k], "none", "true", &ddp, &n);
    final_hash(text, h_ddp);
    /* DDP's allreduce here: Horovod's hierarchical one, whose order of adding is hybrid's */
    bool hierarchical = strstr(text, ": hierarchical, ") != NULL;
    free(text);
    /* allreduced as DDP's, then each rank its shard: DDP's bits */
    text = run_seed(nets[k], "optimizer", "false", &p, &m);
    final_hash(text, h);
    assert_string_equal(h, h_ddp);
    assert_non_null(strstr(text, "PASS  sharded_equivalence"));
    free(text);
    free(p);
    /* reduce-scattered (hybrid: inside each of the seed's 2 nodes, then allreduced across
     * them): DDP's within the order's few ulps */
    static const char *const stages[] = {"optimizer", "gradients", "full", "hybrid"};
    for (int s = 0; s < 4; s++) {
      text = run_seed(nets[k], stages[s], "true", &p, &m);
      if (!strstr(text, "PASS  sharded_equivalence") || strstr(text, "FAIL"))
        fail_msg("%s %s:\n%s", nets[k], stages[s], text);
      if (s == 3 && !strstr(text, "then 1 allreduces of the shards across groups"))
        fail_msg("hybrid without its allreduce across nodes:\n%s", text);
      if (s == 3 && hierarchical) { /* inside each node, then across: DDP's very sums */
        final_hash(text, h);
        assert_string_equal(h, h_ddp);
      }
      assert_int_equal(m, n);
      double worst = 0, tol = tolerance(ddp, n);
      for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)p[i] - ddp[i]));
      print_message("%-9s %-9s largest difference from DDP %.3g (tolerance %.3g)\n", nets[k],
                    stages[s], worst, tol);
      assert_true(worst <= tol);
      free(text);
      free(p);
    }
    free(ddp);
  }
}

/* Four one-GPU nodes, the last one's GPU failing mid-epoch: the elastic job goes on with 3, the
 * sharded state re-cut for 3 from the last commit. */
static const char elastic[] =
    "name: sharded-elastic\n"
    "cluster: {nodes: 4, gpus_per_node: 1, gpu: {tflops: 14},\n"
    "          intra: {bandwidth_GBps: 50, latency_us: 1}, network: {nic_Gbps: 25, latency_us: 5}}\n"
    "model: {kind: net, network: mnist_net}\n"
    "data: {source: fashion-mnist, normalize_mean: 0.1307, normalize_std: 0.3081,\n"
    "       train_samples: 8192, validation_samples: 1000}\n"
    "recipe: {batch_per_worker: 64, base_lr: 0.01, optimizer: sgd, momentum: 0.5, epochs: 2,\n"
    "         steps_per_epoch: loader, checkpoint_every_epochs: 1, sharding: full}\n"
    "failures: {events: [{kind: gpu_crash, node: 3, gpu: 0, at_s: 0.003}]}\n"
    "elastic: {min_np: 2, commit_every_steps: 5}\n";

static void test_elastic_reset_and_resume(void **state) {
  (void)state;
  char file[300], out[300], log[320];
  snprintf(file, sizeof file, "%s", rh_test_path(tmpdir, "elastic.yaml"));
  put(file, elastic);
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "elastic"));
  snprintf(log, sizeof log, "%s.txt", out);
  char *argv[] = {RH_BINARY, "run", file, "--out", out, NULL};
  assert_int_equal(rh_test_spawn_expect(argv, log, 0), 0);
  char *text = rh_test_slurp(log);
  static const char *const want[] = {"PASS  no_committed_work_lost",
                                     "PASS  state_identical_after_reset",
                                     "the job trained on 3 to 4 workers",
                                     "PASS  sharded_equivalence", "PASS  serial_equivalence"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    if (!strstr(text, want[i])) fail_msg("no \"%s\" in:\n%s", want[i], text);
  free(text);
  /* the seed resumed from its first epoch's checkpoint ends on the parameters of the whole run */
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "resume"));
  snprintf(log, sizeof log, "%s.txt", out);
  char *resume[] = {RH_BINARY, "run", (char *)seed, "--out", out, "--set", "recipe.sharding=full",
                    "--set", "recipe.epochs=2", "--set", "data.train_samples=4096", "--set",
                    "checks.resume_from_epoch=1", NULL};
  assert_int_equal(rh_test_spawn_expect(resume, log, 0), 0);
  text = rh_test_slurp(log);
  if (!strstr(text, "PASS  resume_equivalence")) fail_msg("%s", text);
  free(text);
}

/* Shard groups of 2 on 4 one-GPU nodes (DeviceMesh (2, 2)): each step reduce-scatters inside
 * the group and allreduces across, the order Horovod's hierarchical allreduce adds in on 2 nodes
 * of 2 GPUs, so the run ends on the bits of DDP there; when a node fails, the 3 left form no
 * groups of 2, and the elastic job goes on fully sharded over 3, keeping every committed step. */
static void test_shard_groups(void **state) {
  (void)state;
  char file[300], out[300], log[320], hash[2][17];
  snprintf(file, sizeof file, "%s", rh_test_path(tmpdir, "groups.yaml"));
  static const char *const runs[][3] = {
      {"2, gpus_per_node: 2", "none", "[]"},
      {"4, gpus_per_node: 1", "hybrid, shard_group_size: 2", "[]"},
      {"4, gpus_per_node: 1", "hybrid, shard_group_size: 2",
       "[{kind: gpu_crash, node: 3, gpu: 0, at_s: 0.003}]"}};
  for (int k = 0; k < 3; k++) {
    char text[1400];
    snprintf(text, sizeof text, "name: groups\n"
             "cluster: {nodes: %s, gpu: {tflops: 14},\n"
             "          intra: {bandwidth_GBps: 50, latency_us: 1}, network: {nic_Gbps: 25, latency_us: 5}}\n"
             "model: {kind: net, network: mnist_net}\n"
             "data: {source: fashion-mnist, normalize_mean: 0.1307, normalize_std: 0.3081,\n"
             "       train_samples: 8192, validation_samples: 1000}\n"
             "recipe: {batch_per_worker: 64, base_lr: 0.01, optimizer: sgd, momentum: 0.5, epochs: 1,\n"
             "         steps_per_epoch: loader, sharding: %s}\n"
             "collective: {algorithm: hierarchical}\n"
             "failures: {events: %s}\n"
             "elastic: {min_np: 2, commit_every_steps: 5}\n", runs[k][0], runs[k][1], runs[k][2]);
    put(file, text);
    snprintf(out, sizeof out, "%s-%d", rh_test_path(tmpdir, "groups"), k);
    snprintf(log, sizeof log, "%s.txt", out);
    char *argv[] = {RH_BINARY, "run", file, "--out", out, NULL};
    assert_int_equal(rh_test_spawn_expect(argv, log, 0), 0);
    char *said = rh_test_slurp(log);
    if (k > 0 && (!strstr(said, "PASS  sharded_equivalence") || strstr(said, "FAIL")))
      fail_msg("%s", said);
    if (k == 2 && (!strstr(said, "PASS  no_committed_work_lost") ||
                   !strstr(said, "the job trained on 3 to 4 workers")))
      fail_msg("%s", said);
    if (k < 2) final_hash(said, hash[k]);
    free(said);
  }
  print_message("DDP on 2 x 2 (hierarchical) %s; groups of 2 on 4 x 1 %s\n", hash[0], hash[1]);
  assert_string_equal(hash[1], hash[0]);
}

/* The seed under `sharding` with these overrides; its final parameters' hash. */
static void seed_run(const char *tag, const char *sharding, const char *format, const char *epochs,
                     const char *nodes, const char *per_node, bool resume, char *hash) {
  char out[300], log[320], set_sh[64], set_fmt[64], set_ep[64], set_nodes[64], set_per[64];
  snprintf(set_sh, sizeof set_sh, "recipe.sharding=%s", sharding);
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, tag));
  snprintf(log, sizeof log, "%s-%s%s.txt", out, epochs, resume ? "-resumed" : "");
  snprintf(set_fmt, sizeof set_fmt, "recipe.checkpoint_format=%s", format);
  snprintf(set_ep, sizeof set_ep, "recipe.epochs=%s", epochs);
  snprintf(set_nodes, sizeof set_nodes, "cluster.nodes=%s", nodes);
  snprintf(set_per, sizeof set_per, "cluster.gpus_per_node=%s", per_node);
  char *argv[] = {RH_BINARY, "run", (char *)seed, "--out", out, "--set", set_sh,
                  "--set", set_fmt, "--set", set_ep, "--set", set_nodes, "--set", set_per,
                  "--set", "data.train_samples=4096", "--set", "checks.resume_from_epoch=0",
                  resume ? "--resume" : NULL, NULL};
  assert_int_equal(rh_test_spawn_expect(argv, log, 0), 0);
  char *text = rh_test_slurp(log);
  final_hash(text, hash);
  free(text);
}

static bool exists(const char *dir, const char *name) {
  char path[400];
  snprintf(path, sizeof path, "%s/checkpoints/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

/* Sharded checkpoints (FSDP's SHARDED_STATE_DICT): each of 4 ranks writes its block beside rank
 * 0's index, and a relaunch on 3 ranks reads the 4 blocks back whole and cuts 3: it ends on the
 * bits the same relaunch from a whole checkpoint ends on, and writes 3 shards. */
static void test_sharded_checkpoints(void **state) {
  (void)state;
  char whole[17], sharded[17], h[17];
  seed_run("ckpt-full", "full", "full", "1", "2", "2", false, h);
  seed_run("ckpt-full", "full", "full", "2", "3", "1", true, whole);
  seed_run("ckpt-sharded", "full", "sharded", "1", "2", "2", false, h);
  char dir[300];
  snprintf(dir, sizeof dir, "%s", rh_test_path(tmpdir, "ckpt-sharded"));
  for (int k = 0; k < 4; k++) {
    char name[64];
    snprintf(name, sizeof name, "checkpoint-1.bin.shard-%d-of-4", k);
    assert_true(exists(dir, name));
  }
  seed_run("ckpt-sharded", "full", "sharded", "2", "3", "1", true, sharded);
  print_message("4 -> 3 ranks: from a whole checkpoint %s, from 4 shards %s\n", whole, sharded);
  assert_string_equal(sharded, whole);
  assert_true(exists(dir, "checkpoint-2.bin.shard-2-of-3"));
  assert_false(exists(dir, "checkpoint-2.bin.shard-3-of-4"));
  /* hybrid on 2 nodes of 2: the first node's 2 ranks write the 2 blocks (the second node holds
   * the same); 3 ranks resume from them as from the whole checkpoint */
  seed_run("hy-full", "hybrid", "full", "1", "2", "2", false, h);
  seed_run("hy-full", "hybrid", "full", "2", "3", "1", true, whole);
  seed_run("hy-sharded", "hybrid", "sharded", "1", "2", "2", false, h);
  snprintf(dir, sizeof dir, "%s", rh_test_path(tmpdir, "hy-sharded"));
  assert_true(exists(dir, "checkpoint-1.bin.shard-0-of-2"));
  assert_true(exists(dir, "checkpoint-1.bin.shard-1-of-2"));
  assert_false(exists(dir, "checkpoint-1.bin.shard-2-of-4"));
  seed_run("hy-sharded", "hybrid", "sharded", "2", "3", "1", true, sharded);
  print_message("hybrid 2x2 -> 3 ranks: from a whole checkpoint %s, from 2 shards %s\n", whole,
                sharded);
  assert_string_equal(sharded, whole);
}

/* Llama-2-7B: 32 blocks (attention 4 x 4096^2, SwiGLU 3 x 4096 x 11008, two norms), and the root
 * unit: embeddings and an untied head of 32000 x 4096, and the last norm. */
static const double block = 4.0 * 4096 * 4096 + 3.0 * 4096 * 11008 + 2 * 4096;
static const double root = 2.0 * 32000 * 4096 + 4096;
static const char llama[] = "name: llama7b-128\n"
                            "cluster: {node: dgx-h100, nodes: 16}\n"
                            "model: {preset: llama2-7b, precision: bf16}\n"
                            "data: {train_samples: 4096, validation_samples: 0}\n"
                            "recipe: {batch_per_worker: 1, optimizer: adam, steps: 3}\n";

static json_t *llama_run(const char *sharding, const char *extra, char **text) {
  char file[300], out[300], log[320], set[64], tag[64];
  snprintf(file, sizeof file, "%s", rh_test_path(tmpdir, "llama.yaml"));
  put(file, llama);
  snprintf(set, sizeof set, "recipe.sharding=%s", sharding);
  snprintf(tag, sizeof tag, "llama-%s%s", sharding, extra ? "-x" : "");
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, tag));
  snprintf(log, sizeof log, "%s.txt", out);
  char *argv[] = {RH_BINARY, "run", file, "--out", out, "--set", set, "--set",
                  (char *)(extra ? extra : "recipe.seed=0"), NULL};
  int rc = rh_test_spawn(argv, log, NULL);
  *text = rh_test_slurp(log);
  if (rc != 0) fail_msg("exit %d:\n%s", rc, *text);
  return rh_test_summary_in(out);
}

static double num(json_t *o, const char *a, const char *b) {
  json_t *x = json_object_get(o, a);
  return json_number_value(b ? json_object_get(x, b) : x);
}

/* Bytes of a collective of `count` bf16 elements sharded over 128 ranks (padded to equal blocks). */
static double padded(double count) { return ceil(count / 128) * 128 * 2; }

static void test_llama_sharded_step(void **state) {
  (void)state;
  char *text;
  /* full: the root unit gathered once, each block in forward and again in backward; each
   * block's gradients and the root's reduce-scattered */
  json_t *js = llama_run("full", NULL, &text);
  json_t *b = json_object_get(js, "bottleneck"), *sh = json_object_get(b, "sharded");
  assert_non_null(sh);
  assert_int_equal(json_integer_value(json_object_get(sh, "allgathers")), 2 * 32 + 1);
  assert_int_equal(json_integer_value(json_object_get(sh, "reduce_scatters")), 32 + 1);
  double ag = padded(root) + 2 * 32 * padded(block), rs = padded(root) + 32 * padded(block);
  print_message("full: allgathers %.4f GB (derived %.4f), reduce-scatters %.4f GB (derived %.4f)\n",
                num(sh, "allgather_GB", NULL), ag / 1e9, num(sh, "reduce_scatter_GB", NULL), rs / 1e9);
  assert_true(fabs(num(sh, "allgather_GB", NULL) * 1e9 - ag) <= 1e-6 * ag);
  assert_true(fabs(num(sh, "reduce_scatter_GB", NULL) * 1e9 - rs) <= 1e-6 * rs);
  /* the step is its compute and what it waited: the allgathers in the passes, the
   * reduce-scatters after */
  double step = num(b, "step_ms", NULL), compute = num(b, "compute_ms", NULL);
  double waits = num(sh, "allgather_wait_ms", NULL) + num(sh, "reduce_scatter_wait_ms", NULL);
  assert_true(fabs(step - compute - num(b, "waiting_for_gradients_ms", NULL)) <= 1e-6 * step);
  assert_true(fabs(num(b, "waiting_for_gradients_ms", NULL) - waits) <= 1e-6 * step);
  /* the what-ifs: one stage less (gradients) and hybrid, each the run with that sharding */
  json_t *alts = json_object_get(json_object_get(b, "what_if"), "sharding");
  assert_int_equal(json_array_size(alts), 2);
  double what_if_hybrid = num(json_array_get(alts, 1), "step_ms", NULL);
  assert_string_equal(json_string_value(json_object_get(json_array_get(alts, 0), "sharding")),
                      "gradients");
  assert_string_equal(json_string_value(json_object_get(json_array_get(alts, 1), "sharding")),
                      "hybrid");
  if (!strstr(text, "what if      sharding gradients  one stage less")) fail_msg("%s", text);
  json_decref(js);
  free(text);
  /* ZeRO-1: DeepSpeed's buckets of 5e8 gradients reduce-scattered, then the parameters
   * allgathered in 5e8 after the optimizer, the same bytes each way */
  js = llama_run("optimizer", NULL, &text);
  sh = json_object_get(json_object_get(js, "bottleneck"), "sharded");
  double P = 32 * block + root;
  assert_int_equal(json_integer_value(json_object_get(sh, "allgathers")), (int)ceil(P / 5e8));
  assert_true(fabs(num(sh, "allgather_GB", NULL) * 1e9 - 2 * P) <= 1e-3 * 2 * P);
  assert_true(fabs(num(sh, "reduce_scatter_GB", NULL) * 1e9 - 2 * P) <= 1e-3 * 2 * P);
  double step_rs = num(json_object_get(js, "bottleneck"), "step_ms", NULL);
  json_decref(js);
  free(text);
  /* reduce_scatter: false allreduces the same buckets, moving twice the bytes a rank */
  js = llama_run("optimizer", "recipe.reduce_scatter=false", &text);
  sh = json_object_get(json_object_get(js, "bottleneck"), "sharded");
  assert_non_null(strstr(text, "allreduces of the gradients"));
  assert_true(fabs(num(sh, "reduce_scatter_GB", NULL) * 1e9 - 2 * P) <= 1e-3 * 2 * P);
  assert_true(num(json_object_get(js, "bottleneck"), "step_ms", NULL) >= step_rs);
  json_decref(js);
  free(text);
  /* hybrid: the same units gathered and reduce-scattered inside each node of 8, and each
   * reduce-scattered shard (1/8 of its unit) allreduced across the 16 nodes */
  js = llama_run("hybrid", NULL, &text);
  sh = json_object_get(json_object_get(js, "bottleneck"), "sharded");
  double ag8 = ceil(root / 8) * 16 + 2 * 32 * ceil(block / 8) * 16;
  double ar8 = ceil(root / 8) * 2 + 32 * ceil(block / 8) * 2;
  assert_int_equal(json_integer_value(json_object_get(sh, "allgathers")), 2 * 32 + 1);
  assert_int_equal(json_integer_value(json_object_get(sh, "reduce_scatters")), 32 + 1);
  assert_int_equal(json_integer_value(json_object_get(sh, "allreduces_across_groups")), 32 + 1);
  print_message("hybrid: allgathers %.4f GB (derived %.4f), allreduces %.4f GB (derived %.4f)\n",
                num(sh, "allgather_GB", NULL), ag8 / 1e9, num(sh, "allreduce_GB", NULL), ar8 / 1e9);
  assert_true(fabs(num(sh, "allgather_GB", NULL) * 1e9 - ag8) <= 1e-6 * ag8);
  assert_true(fabs(num(sh, "allreduce_GB", NULL) * 1e9 - ar8) <= 1e-6 * ar8);
  if (!strstr(text, "over shard groups of 8 GPUs, replicated across the groups")) fail_msg("%s", text);
  json_decref(js);
  free(text);
  /* shard groups of 16 GPUs (two nodes): blocks of 1/16, allreduced across 8 groups */
  js = llama_run("hybrid", "recipe.shard_group_size=16", &text);
  sh = json_object_get(json_object_get(js, "bottleneck"), "sharded");
  double ag16 = ceil(root / 16) * 32 + 2 * 32 * ceil(block / 16) * 32;
  double ar16 = ceil(root / 16) * 2 + 32 * ceil(block / 16) * 2;
  assert_true(fabs(num(sh, "allgather_GB", NULL) * 1e9 - ag16) <= 1e-6 * ag16);
  assert_true(fabs(num(sh, "allreduce_GB", NULL) * 1e9 - ar16) <= 1e-6 * ar16);
  assert_int_equal(num(json_object_get(js, "memory"), "shard_degree", NULL), 16);
  if (!strstr(text, "over shard groups of 16 GPUs")) fail_msg("%s", text);
  json_decref(js);
  free(text);
  js = llama_run("hybrid", NULL, &text);
  print_message("hybrid step %.6f ms; full's what-if of it %.6f ms\n",
                num(json_object_get(js, "bottleneck"), "step_ms", NULL), what_if_hybrid);
  assert_true(num(json_object_get(js, "bottleneck"), "step_ms", NULL) == what_if_hybrid);
  json_decref(js);
  free(text);
  /* size_based_auto_wrap_policy(1e8): each block's MLP (3 x 4096 x 11008) reaches 1e8, its
   * attention (4 x 4096^2) and the block's rest do not and fall to the root unit with the
   * norms; the embedding and the head (32000 x 4096 each) are units of their own */
  js = llama_run("full", "recipe.wrap_policy=size", &text);
  sh = json_object_get(json_object_get(js, "bottleneck"), "sharded");
  int units = 32 + 2;
  assert_int_equal(json_integer_value(json_object_get(sh, "allgathers")), 2 * units + 1);
  assert_int_equal(json_integer_value(json_object_get(sh, "reduce_scatters")), units + 1);
  double mlp = 3.0 * 4096 * 11008, rest = 32 * (block - mlp) + 4096;
  double gathered = padded(rest) + 2 * (32 * padded(mlp) + 2 * padded(32000.0 * 4096));
  assert_true(fabs(num(sh, "allgather_GB", NULL) * 1e9 - gathered) <= 1e-6 * gathered);
  json_decref(js);
  free(text);
  /* on a slow network the verdict names the collective the step waits for */
  js = llama_run("full", "cluster.network.nic_Gbps=25", &text);
  if (!strstr(text, "waits for the sharded state's collectives, the most for its allgathers"))
    fail_msg("%s", text);
  json_decref(js);
  free(text);
}

/* Every rank's full-sharding step is alike, so each works it out for itself (the compute stream
 * slowed by NCCL's share while a collective runs, the collectives on one queue in issue order)
 * and the ranks charge it together; collective.grain=fine simulates every kernel and collective
 * instead.  The two give the same step, on the presets' network and on one slow enough that the
 * step waits for its allgathers. */
static void test_worked_out_step_is_simulated_step(void **state) {
  (void)state;
  static const char *const nets[] = {"recipe.seed=0", "cluster.network.nic_Gbps=25",
                                     "cluster.network.nic_Gbps=25", "recipe.shard_group_size=16"};
  for (int i = 0; i < 4; i++) {
    char *a, *b, fine[96], how[64];
    /* hybrid: its allreduces across nodes; then shard groups of two nodes */
    const char *sharding = i >= 2 ? "hybrid" : "full";
    json_t *worked = llama_run(sharding, nets[i], &a);
    snprintf(how, sizeof how, "recipe.sharding=%s", sharding);
    snprintf(fine, sizeof fine, "collective.grain=fine");
    char file[300], out[300], log[320], set[64];
    snprintf(file, sizeof file, "%s", rh_test_path(tmpdir, "llama.yaml"));
    snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "llama-fine"));
    snprintf(log, sizeof log, "%s.txt", out);
    snprintf(set, sizeof set, "%s", nets[i]);
    char *argv[] = {RH_BINARY, "run", file, "--out", out, "--set", how, "--set", set, "--set",
                    fine, NULL};
    assert_int_equal(rh_test_spawn_expect(argv, log, 0), 0);
    b = rh_test_slurp(log);
    json_t *simulated = rh_test_summary_in(out);
    json_t *w = json_object_get(worked, "bottleneck"), *f = json_object_get(simulated, "bottleneck");
    static const char *const keys[] = {"step_ms", "compute_ms", "waiting_for_gradients_ms"};
    for (int k = 0; k < 3; k++) {
      double x = num(w, keys[k], NULL), y = num(f, keys[k], NULL);
      print_message("%s %s %s: worked out %.12g, simulated %.12g\n", sharding, nets[i], keys[k], x, y);
      assert_true(fabs(x - y) <= 1e-9 * num(f, "step_ms", NULL));
    }
    /* the one worked its steps out, the other simulated every one */
    assert_true(num(json_object_get(w, "sharded"), "worked_out_steps", NULL) >= 1);
    assert_true(num(json_object_get(f, "sharded"), "worked_out_steps", NULL) == 0);
    double ag = num(json_object_get(f, "sharded"), "allgather_wait_ms", NULL);
    assert_true(fabs(num(json_object_get(w, "sharded"), "allgather_wait_ms", NULL) - ag) <=
                1e-9 * num(f, "step_ms", NULL));
    if (i == 1 || i == 2) assert_true(ag > 1); /* the slow network: the step waits for them */
    json_decref(worked);
    json_decref(simulated);
    free(a);
    free(b);
  }
}

/* Writes `text` to the bad scenario and runs it: exit 2 and `want` (its file:line and field) on
 * stderr. */
static void expect_bad(const char *text, const char *want) {
  char file[300], err[320];
  snprintf(file, sizeof file, "%s", rh_test_path(tmpdir, "bad.yaml"));
  snprintf(err, sizeof err, "%s", rh_test_path(tmpdir, "bad.err"));
  put(file, text);
  char *argv[] = {RH_BINARY, "run", file, "--out", rh_test_path(tmpdir, "bad"), NULL};
  assert_int_equal(rh_test_spawn(argv, NULL, err), 2);
  char *said = rh_test_slurp(err);
  if (!strstr(said, want)) fail_msg("%s", said);
  free(said);
}

/* What the sharded step cannot take: an allreduce of gradients full sharding does not keep,
 * sharded checkpoints of an unsharded state, FSDP's wrap keys on another sharding or without the
 * size policy, and a wrap policy that finds no unit in the model. */
static void test_bad_sharding_input(void **state) {
  (void)state;
  static const char *const recipes[][2] = {
      {"sharding: full, reduce_scatter: false}",
       "bad.yaml:6: recipe.reduce_scatter: false allreduces the whole gradients"},
      {"checkpoint_format: sharded}",
       "bad.yaml:6: recipe.checkpoint_format: sharded checkpoints are the shards"},
      {"sharding: full, wrap_policy: size, min_num_params: 3e8}",
       "bad.yaml:6: recipe.wrap_policy: size wraps no module of the model"},
      {"sharding: gradients, wrap_policy: size}",
       "bad.yaml:6: recipe.wrap_policy: FSDP's units are full and hybrid sharding's"},
      {"sharding: hybrid, min_num_params: 1e7}",
       "bad.yaml:6: recipe.min_num_params: applies to wrap_policy: size"},
      {"sharding: hybrid, shard_group_size: 12}",
       "bad.yaml:6: recipe.shard_group_size: 12 is not whole nodes"},
      {"sharding: hybrid, shard_group_size: 24}",
       "bad.yaml:6: recipe.shard_group_size: 24 does not divide the job's GPUs"},
      {"sharding: full, shard_group_size: 8}",
       "bad.yaml:6: recipe.shard_group_size: applies to sharding: hybrid"}};
  for (size_t k = 0; k < sizeof recipes / sizeof recipes[0]; k++) {
    char text[600];
    snprintf(text, sizeof text, "name: bad\n"
             "cluster: {node: dgx-h100, nodes: 2}\n"
             "model: {preset: llama2-7b, precision: bf16}\n"
             "data: {train_samples: 64}\n"
             "recipe: {batch_per_worker: 1,\n"
             "         %s\n", recipes[k][0]);
    expect_bad(text, recipes[k][1]);
  }
  expect_bad("name: bad\n"
             "cluster: {nodes: 2, gpus_per_node: 2, gpu: {tflops: 14},\n"
             "          intra: {bandwidth_GBps: 50}, network: {nic_Gbps: 25}}\n"
             "model: {kind: net, network: lenet5}\n"
             "data: {source: fashion-mnist, train_samples: 64}\n"
             "recipe: {batch_per_worker: 16, sharding: full, wrap_policy: transformer}\n",
             "bad.yaml:6: recipe.wrap_policy: transformer wraps each transformer block, and the "
             "model has none");
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "sharded-step");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_seed_nets_end_on_ddp_params),
                                     cmocka_unit_test(test_elastic_reset_and_resume),
                                     cmocka_unit_test(test_sharded_checkpoints),
                                     cmocka_unit_test(test_shard_groups),
                                     cmocka_unit_test(test_llama_sharded_step),
                                     cmocka_unit_test(test_worked_out_step_is_simulated_step),
                                     cmocka_unit_test(test_bad_sharding_input)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
