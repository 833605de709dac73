/*
 * test_kernels.c: the kernel model (tool/workload/kernels/).  Each expected value is derived here
 * from the model's definition: a GEMM that fills whole waves of its largest tile runs at the best
 * rate exactly, one more tile costs a wave, the tile model beside the H100's measured cuBLAS
 * sweeps, a narrow grouped convolution runs on the CUDA cores;
 * fused attention at its rate curve; the host's launches and the GPU's kernels played by hand; the
 * kernels and bytes of a convolution, its batch norm and ReLU with and without fusion; the
 * optimizer's bytes and launches; the default framework equal to presets/framework/pytorch.yaml;
 * a one-GPU `rehearsal run` whose step equals the priced one; the input pipeline's wait; and a
 * measured kernel table read in place of the preset's figures.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "kernels/kernels.h"
#include "run_summary.h"
#include "scenario.h"
#include "tables.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

#define assert_near(a, b, rel)                                                                     \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (!(fabs(a_ - b_) <= (rel) * fabs(b_))) fail_msg("%s = %.17g, expected %.17g", #a, a_, b_);  \
  } while (0)

/* a GPU of 4 SMs, 100 TFLOP/s on tensor cores (GEMMs at 0.8 of it), 10 on the CUDA cores */
static rh_kernel_gpu small_gpu(void) {
  return (rh_kernel_gpu){.peak = 100e12, .gemm_efficiency = 0.8, .memory_bw = 1e12, .sms = 4,
                         .simt_peak = 10e12, .simt_efficiency = 0.9, .tensor_cores = true};
}

static void test_gemm_waves(void **state) {
  (void)state;
  rh_kernel_gpu g = small_gpu();
  /* 2 x 2 tiles of 256 x 128 on 4 SMs: one full wave, nothing lost to quantization */
  double m = 512, n = 256, k = 4096;
  assert_near(rh_gemm_seconds(&g, m, n, k, 1), 2 * m * n * k / (100e12 * 0.8), 1e-12);
  /* 8 full tiles: two full waves */
  assert_near(rh_gemm_seconds(&g, 1024, 256, k, 1), 2 * 1024 * 256 * k / (100e12 * 0.8), 1e-12);
  /* one row more: a ninth row of tiles, which no tiling or split of k makes as cheap as the
   * exact work, and no more than a wave of the largest tile more (three waves for two) */
  double t = rh_gemm_seconds(&g, 1025, 256, k, 1), exact = 2 * 1025 * 256 * k / (100e12 * 0.8);
  assert_true(t > exact * 1.01);
  assert_true(t <= 1.5 * 2 * 1024 * 256 * k / (100e12 * 0.8) * (1 + 1e-12));
  /* no SMs known: the best rate */
  g.sms = 0;
  assert_near(rh_gemm_seconds(&g, 1025, 256, k, 1), exact, 1e-12);
}

/* The tile model against the H100's measured cuBLAS sweeps (presets/measured/, squares in bf16 and
 * fp32; each GEMM host-timed, so the small ones are mostly launch): from side 3,072 up the model's
 * rate is within 12% of each measured one, with the GPU's preset figures (132 SMs, the best GEMM
 * 0.818 of 989.4 and 0.80 of 66.9 TFLOP/s). */
static void test_gemm_against_h100(void **state) {
  (void)state;
  const char *files[2] = {RH_SOURCE_DIR "/presets/measured/h100-gemm-bf16.txt",
                          RH_SOURCE_DIR "/presets/measured/h100-gemm-fp32.txt"};
  rh_kernel_gpu g[2] = {{.peak = 989.4e12, .gemm_efficiency = 0.818, .memory_bw = 2985e9, .sms = 132,
                         .tensor_cores = true},
                        {.peak = 66.9e12, .gemm_efficiency = 0.80, .memory_bw = 2985e9, .sms = 132}};
  for (int f = 0; f < 2; f++) {
    rh_gemm_row rows[RH_GEMM_ROWS];
    int n = 0, checked = 0;
    assert_int_equal(rh_read_gemm_table(files[f], 2000, rows, &n), 0);
    for (int i = 0; i < n; i++) {
      double side = round(cbrt(rows[i].flops / 2));
      if (side < 3072) continue;
      double model = rows[i].flops / rh_gemm_seconds(&g[f], side, side, side, 1) / 1e12;
      print_message("%s %5.0f: model %6.1f, measured %6.1f TFLOP/s (%+.1f%%)\n", f ? "fp32" : "bf16",
                    side, model, rows[i].tflops, 100 * (model / rows[i].tflops - 1));
      assert_true(fabs(model / rows[i].tflops - 1) <= 0.12);
      checked++;
    }
    assert_true(checked >= 6);
  }
}

static void test_grouped_direct(void **state) {
  (void)state;
  rh_kernel_gpu g = small_gpu();
  /* 32 groups of 4 outputs: a tensor-core tile of 64 wide is 1/16 used; the direct convolution
   * on the CUDA cores does the exact work at 10 x 0.9 TFLOP/s */
  double m = 1 << 16, n = 4, k = 36, count = 32;
  double direct = 2 * m * n * k * count / (10e12 * 0.9);
  assert_near(rh_gemm_seconds(&g, m, n, k, count), direct, 1e-12);
}

/* A GEMM kernel is priced at its tiles; an fp32 3x3 convolution at the cheaper of its tiles and
 * Winograd's: 2.25 times fewer FLOPs, with its input and output through memory 9 times. */
static void test_pricing(void **state) {
  (void)state;
  rh_kernel_gpu g = small_gpu();
  rh_kernel k[2] = {{.what = "fprop", .kind = RH_KERNEL_GEMM, .m = 1025, .n = 256, .k = 4096, .count = 1,
                     .flops = 2.0 * 1025 * 256 * 4096, .bytes = 1e3, .launches = 1},
                    {.what = "fprop", .kind = RH_KERNEL_GEMM, .m = 1 << 16, .n = 512, .k = 4608,
                     .count = 1, .flops = 2.0 * 65536 * 512 * 4608, .bytes = 1e6, .launches = 1,
                     .winograd = true}};
  rh_kernel_list l = {.v = k, .n = 2};
  rh_kernels_price(&g, &l);
  assert_near(k[0].seconds, rh_gemm_seconds(&g, 1025, 256, 4096, 1), 1e-12);
  assert_int_equal(k[0].bound, RH_BOUND_COMPUTE);
  /* tensor cores: no Winograd */
  assert_near(k[1].seconds, rh_gemm_seconds(&g, 65536, 512, 4608, 1), 1e-12);
  g.tensor_cores = false;
  g.peak = g.simt_peak;
  rh_kernels_price(&g, &l);
  double wino = k[1].flops / 2.25 / (10e12 * 0.8) + 9 * 1e6 / 1e12;
  assert_near(k[1].seconds, fmin(wino, rh_gemm_seconds(&g, 65536, 512, 4608, 1)), 1e-12);
  assert_true(k[1].seconds < rh_gemm_seconds(&g, 65536, 512, 4608, 1));
}

static void test_attention_rate(void **state) {
  (void)state;
  rh_kernel_gpu g = small_gpu();
  g.attn_fwd = 200e12;
  g.attn_bwd = 150e12;
  g.attn_seq_half = 256;
  /* rate(s) = top x s / (s + half); a causal mask runs at the rate of half the sequence */
  assert_near(rh_attention_seconds(&g, 1e12, 1024, false, false), 1e12 / (200e12 * 1024 / 1280), 1e-12);
  assert_near(rh_attention_seconds(&g, 1e12, 1024, true, true), 1e12 / (150e12 * 512 / 768), 1e-12);
}

/* Two layers without shapes (one roofline kernel forward, one backward each) and no parameters:
 * forward kernels of 1 us, backward ones of 2 us (1e8 and 2e8 FLOPs at 100 TFLOP/s). */
static rh_kernel_model two_layers(rh_layer *l, double launch) {
  for (int i = 0; i < 2; i++)
    l[i] = (rh_layer){.name = i ? "b" : "a", .forward_flops = 1e8};
  rh_kernel_model km = {.layers = l, .nlayers = 2, .value_bytes = 4,
                        .gpu = {.peak = 100e12, .gemm_efficiency = 1, .memory_bw = 1e12}};
  km.fw.launch = launch;
  return km;
}

static void test_launch_queue(void **state) {
  (void)state;
  rh_layer l[2];
  /* the host issues a kernel every 10 us: each waits for its launch */
  rh_kernel_model km = two_layers(l, 10e-6);
  rh_step_times st;
  assert_true(rh_step_price(&km, 1, &st, NULL));
  /* GPU: [10, 11], [20, 21], backward [30, 32], [40, 42] us */
  assert_near(st.total, 42e-6, 1e-9);
  assert_near(st.forward[0], 11e-6, 1e-9);
  assert_near(st.forward[1], 10e-6, 1e-9);
  assert_near(st.backward[1], 11e-6, 1e-9);
  assert_near(st.backward[0], 10e-6, 1e-9);
  assert_int_equal(st.by_bound[RH_BOUND_LAUNCH], 4);
  rh_step_times_free(&st);
  /* a host 100 times faster: the GPU runs back to back after the first launch */
  km.fw.launch = 0.1e-6;
  km.fw.host_step = 1e-3; /* and the host's own work comes first */
  assert_true(rh_step_price(&km, 1, &st, NULL));
  assert_near(st.total, 1e-3 + 0.1e-6 + 6e-6, 1e-9);
  assert_int_equal(st.by_bound[RH_BOUND_LAUNCH], 1);
  rh_step_times_free(&st);
}

/* conv (3 -> 8 channels, 3x3, on 8 x 8), batch norm, ReLU, on a GPU without tensor cores */
static rh_kernel_model conv_bn_relu(rh_layer *l) {
  double v = 8 * 8 * 8;
  l[0] = (rh_layer){.name = "conv", .parameters = 8 * 27,
                    .op = {.kind = RH_LAYER_GEMM, .sub = 1, .m = 64, .n = 8, .k = 27, .groups = 1,
                           .first = true, .in = 3 * 64}};
  l[1] = (rh_layer){.name = "bn", .parameters = 16, .op = {.kind = RH_LAYER_NORM, .values = v, .n = 8}};
  l[2] = (rh_layer){.name = "relu", .op = {.kind = RH_LAYER_ACT, .values = v}};
  return (rh_kernel_model){.layers = l, .nlayers = 3, .value_bytes = 4,
                           .gpu = {.peak = 10e12, .gemm_efficiency = 1, .memory_bw = 1e12}};
}

static int count_kernels(const rh_kernel_list *l, const char *what) {
  int n = 0;
  for (int i = 0; i < l->n; i++) n += !strcmp(l->v[i].what, what);
  return n;
}

static void test_expansion_fusion(void **state) {
  (void)state;
  rh_layer l[3];
  rh_kernel_model km = conv_bn_relu(l);
  rh_kernel_list k = {0};
  assert_true(rh_kernels_expand(&km, 2, &k));
  /* forward fprop, bn, act; backward act, bn, wgrad (the first layer: no dgrad); the loss is
   * not added (the network ends in a ReLU, not a classifier); SGD over two tensors */
  assert_int_equal(count_kernels(&k, "fprop"), 1);
  assert_int_equal(count_kernels(&k, "dgrad"), 0);
  assert_int_equal(count_kernels(&k, "wgrad"), 1);
  assert_int_equal(count_kernels(&k, "bn"), 1);
  assert_int_equal(count_kernels(&k, "act"), 1);
  assert_int_equal(count_kernels(&k, "act bwd"), 1);
  /* batch norm forward: its input read twice and its output written, 4 bytes a value */
  for (int i = 0; i < k.n; i++)
    if (!strcmp(k.v[i].what, "bn")) assert_near(k.v[i].bytes, 3.0 * 2 * 512 * 4, 1e-12);
    else if (!strcmp(k.v[i].what, "fprop")) assert_near(k.v[i].flops, 2.0 * 2 * 64 * 8 * 27, 1e-12);
  rh_kernel_list_free(&k);
  /* fused: one bn+relu kernel forward, none for the ReLU alone either way */
  km.fw.fuse_bn_relu = true;
  assert_true(rh_kernels_expand(&km, 2, &k));
  assert_int_equal(count_kernels(&k, "bn+relu"), 1);
  assert_int_equal(count_kernels(&k, "act"), 0);
  assert_int_equal(count_kernels(&k, "act bwd"), 0);
  rh_kernel_list_free(&k);
}

static void test_optimizer_kernels(void **state) {
  (void)state;
  rh_layer l[3];
  rh_kernel_model km = conv_bn_relu(l);
  km.optimizer = RH_KOPT_MOMENTUM;
  double P = 8 * 27 + 16, T = 3; /* the conv's weight, batch norm's weight and bias */
  struct {
    int mode;
    double bytes, launches;
  } cases[] = {{RH_OPT_FUSED, 20 * P, 1}, {RH_OPT_FOREACH, 32 * P, 3},
               {RH_OPT_PER_TENSOR, 32 * P, 3 * T}, {RH_OPT_PER_TENSOR_FUSED, 20 * P, T}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    km.fw.optimizer = cases[c].mode;
    rh_kernel_list k = {0};
    assert_true(rh_kernels_expand(&km, 1, &k));
    const rh_kernel *opt = &k.v[k.n - 1];
    assert_string_equal(opt->what, "sgd momentum");
    assert_near(opt->bytes, cases[c].bytes, 1e-12);
    assert_int_equal(opt->launches, (int)cases[c].launches);
    rh_kernel_list_free(&k);
  }
}

static void write_scenario(const char *path, const char *framework) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "name: kernels\n"
             "cluster: {nodes: 1, gpus_per_node: 1, gpu: a100-sxm4, intra: {bandwidth_GBps: 300}}\n"
             "model: {family: cnn, name: resnet50, precision: amp_fp16}\n"
             "data: {train_samples: 640, validation_samples: 0}\n"
             "recipe: {batch_per_worker: 64, epochs: 1, checkpoint_every_epochs: 0, momentum: 0.9%s%s}\n",
          framework ? ", framework: " : "", framework ? framework : "");
  fclose(f);
}

/* Without recipe.framework, the kernels are presets/framework/pytorch.yaml's. */
static void test_default_framework(void **state) {
  (void)state;
  char *a = rh_test_path(tmpdir, "default.yaml"), *b = rh_test_path(tmpdir, "pytorch.yaml");
  write_scenario(a, NULL);
  write_scenario(b, "pytorch");
  rh_scenario sa, sb;
  char err[1024];
  assert_int_equal(rh_scenario_load(a, &sa, err, sizeof err), RH_OK);
  assert_int_equal(rh_scenario_load(b, &sb, err, sizeof err), RH_OK);
  const rh_framework *fa = &sa.framework, *fb = &sb.framework;
  assert_true(fa->launch == fb->launch && fa->backward_launch == fb->backward_launch &&
              fa->host_step == fb->host_step && fa->layout == fb->layout &&
              fa->fuse_bn_relu == fb->fuse_bn_relu && fa->fuse_bias_act == fb->fuse_bias_act &&
              fa->fuse_dropout_add == fb->fuse_dropout_add && fa->fuse_norm == fb->fuse_norm &&
              fa->fuse_softmax == fb->fuse_softmax && fa->fuse_loss == fb->fuse_loss &&
              fa->optimizer == fb->optimizer && fa->zero_grad == fb->zero_grad &&
              fa->amp_weight_casts == fb->amp_weight_casts);
  assert_true(sa.compute.kernels);
  rh_scenario_free(&sa);
  rh_scenario_free(&sb);
}

/* One GPU through `rehearsal run`: its step is the priced step. */
static void test_run_step(void **state) {
  (void)state;
  char *file = rh_test_path(tmpdir, "run.yaml"), *out = rh_test_path(tmpdir, "run");
  write_scenario(file, "pytorch-amp-nhwc");
  rh_scenario sc;
  char err[1024];
  assert_int_equal(rh_scenario_load(file, &sc, err, sizeof err), RH_OK);
  rh_step_times st;
  assert_true(rh_step_price(&sc.compute.km, 64, &st, NULL));
  json_t *root = rh_test_run_summary(file, out);
  json_t *sum = json_object_get(root, "summary");
  double step = json_real_value(json_object_get(sum, "step_ms"));
  double compute = json_real_value(json_object_get(sum, "compute_ms"));
  print_message("run step %.6f ms (compute %.6f), priced %.6f ms\n", step, compute, st.total * 1e3);
  assert_near(step, st.total * 1e3, 1e-9);
  assert_near(compute, st.total * 1e3, 1e-9);
  json_t *k = json_object_get(root, "kernels");
  assert_non_null(k);
  assert_int_equal(json_integer_value(json_object_get(k, "kernels")), st.kernels);
  json_decref(root);
  rh_step_times_free(&st);
  rh_scenario_free(&sc);
}

/* Eight GPUs of a DGX A100 fed by its 256 CPU threads at 20 images/s each: 640 a GPU, so a step
 * of 256 takes 0.4 s whatever the GPU could do, and the verdict says input-bound; a loader on
 * the CPUs of a node whose threads are not known is bad input. */
static void test_input_pipeline(void **state) {
  (void)state;
  char *file = rh_test_path(tmpdir, "input.yaml"), *out = rh_test_path(tmpdir, "input");
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fprintf(f, "name: input\n"
             "cluster: {node: dgx-a100, nodes: 1}\n"
             "model: {family: cnn, name: resnet50, precision: amp_fp16}\n"
             "data: {train_samples: 20480, validation_samples: 0, loader: cpu, decode_per_thread: 20}\n"
             "recipe: {batch_per_worker: 256, epochs: 1, checkpoint_every_epochs: 0, momentum: 0.9}\n");
  fclose(f);
  json_t *root = rh_test_run_summary(file, out);
  json_t *sum = json_object_get(root, "summary");
  assert_near(json_real_value(json_object_get(sum, "step_ms")), 256.0 / (256 * 20 / 8) * 1e3, 1e-9);
  const char *verdict = json_string_value(json_object_get(json_object_get(root, "bottleneck"), "verdict"));
  assert_non_null(verdict);
  assert_true(strncmp(verdict, "input-bound", 11) == 0);
  json_decref(root);
  f = fopen(file, "w");
  assert_non_null(f);
  fprintf(f, "name: input\n"
             "cluster: {nodes: 1, gpus_per_node: 1, gpu: a100-sxm4, intra: {bandwidth_GBps: 300}}\n"
             "model: {family: cnn, name: resnet50}\n"
             "data: {train_samples: 2560, validation_samples: 0, loader: cpu}\n"
             "recipe: {batch_per_worker: 256, epochs: 1}\n");
  fclose(f);
  rh_scenario sc;
  char err[1024];
  assert_int_equal(rh_scenario_load(file, &sc, err, sizeof err), RH_ERR_INVALID);
  assert_non_null(strstr(err, ":4: data.loader: "));
  assert_non_null(strstr(err, "cpu_threads"));
}

/* A measured kernel table: its rows read, a bad one named by file and line, and a scenario that
 * names it takes its best GEMM, copy and launch in place of the preset's. */
static void test_kernel_table(void **state) {
  (void)state;
  char *table = rh_test_path(tmpdir, "k.txt");
  FILE *f = fopen(table, "w");
  assert_non_null(f);
  fprintf(f, "# rehearsal-gpu kernels: a test\n"
             "gemm fp16 4096 4096 4096 250\ngemm fp16 8192 8192 8192 260.5\ngemm fp32 4096 4096 4096 18\n"
             "copy 1073741824 1500\nlaunch 3 1.5\n");
  fclose(f);
  rh_kernel_table t;
  char err[1200];
  assert_int_equal(rh_read_kernel_table(table, &t, err, sizeof err), 0);
  assert_near(t.best[2], 260.5, 1e-12);
  assert_near(t.best[0], 18, 1e-12);
  assert_near(t.copy_GBps, 1500, 1e-12);
  assert_near(t.launch_us, 3, 1e-12);
  char *scen = rh_test_path(tmpdir, "measured.yaml");
  f = fopen(scen, "w");
  assert_non_null(f);
  fprintf(f, "name: measured\n"
             "cluster: {nodes: 1, gpus_per_node: 1, gpu: {preset: a100-sxm4, kernel_table: k.txt},\n"
             "          intra: {bandwidth_GBps: 300}}\n"
             "model: {family: cnn, name: resnet50, precision: amp_fp16}\n"
             "data: {train_samples: 640, validation_samples: 0}\n"
             "recipe: {batch_per_worker: 64, epochs: 1}\n");
  fclose(f);
  rh_scenario sc;
  assert_int_equal(rh_scenario_load(scen, &sc, err, sizeof err), RH_OK);
  assert_near(sc.compute.km.gpu.gemm_efficiency, 260.5 / 312, 1e-12);
  assert_near(sc.compute.km.gpu.simt_efficiency, 18 / 19.5, 1e-12);
  assert_near(sc.compute.km.gpu.memory_bw, 1500e9, 1e-12);
  assert_near(sc.compute.km.gpu.kernel_floor, 3e-6, 1e-12);
  rh_scenario_free(&sc);
  f = fopen(table, "w");
  assert_non_null(f);
  fprintf(f, "gemm fp16 4096 4096 4096 250\ngemm fp64 1 1 1 1\n");
  fclose(f);
  assert_int_equal(rh_read_kernel_table(table, &t, err, sizeof err), 2);
  assert_non_null(strstr(err, "k.txt:2: "));
  assert_int_equal(rh_scenario_load(scen, &sc, err, sizeof err), RH_ERR_INVALID);
  assert_non_null(strstr(err, "cluster.gpu.kernel_table"));
  assert_non_null(strstr(err, "k.txt:2: the precision"));
}

/* `rehearsal model FILE --kernels`: a row a kernel and the step's totals; --json the same as
 * summary.json's object; a preset alone (no GPU, no framework) is refused. */
static void test_model_kernels_command(void **state) {
  (void)state;
  char *file = strdup(rh_test_path(tmpdir, "cmd.yaml")), *out = strdup(rh_test_path(tmpdir, "cmd.txt"));
  write_scenario(file, "pytorch-amp-nhwc");
  char *argv[] = {RH_BINARY, "model", file, "--kernels", "--batch", "8", NULL};
  assert_int_equal(rh_test_spawn_expect(argv, out, 0), 0);
  char *text = rh_test_slurp(out);
  assert_non_null(strstr(text, "\nconv1 "));
  assert_non_null(strstr(text, "# step "));
  assert_non_null(strstr(text, "launch-bound"));
  free(text);
  char *argj[] = {RH_BINARY, "model", file, "--kernels", "--json", NULL};
  assert_int_equal(rh_test_spawn_expect(argj, out, 0), 0);
  json_error_t err;
  json_t *root = json_load_file(out, 0, &err);
  assert_non_null(root);
  assert_true(json_integer_value(json_object_get(root, "kernels")) > 500);
  json_decref(root);
  char *bad[] = {RH_BINARY, "model", "resnet50", "--kernels", NULL};
  assert_int_equal(rh_test_spawn(bad, "/dev/null", "/dev/null"), 2);
  free(file);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_waves),       cmocka_unit_test(test_gemm_against_h100),
      cmocka_unit_test(test_grouped_direct),
      cmocka_unit_test(test_pricing),          cmocka_unit_test(test_input_pipeline),
      cmocka_unit_test(test_attention_rate),   cmocka_unit_test(test_launch_queue),
      cmocka_unit_test(test_expansion_fusion), cmocka_unit_test(test_optimizer_kernels),
      cmocka_unit_test(test_default_framework), cmocka_unit_test(test_run_step),
      cmocka_unit_test(test_kernel_table),     cmocka_unit_test(test_model_kernels_command),
  };
  if (rh_test_mkdtemp(tmpdir, "kernels") != 0) return 1;
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  rh_test_rmdir(tmpdir);
  return rc;
}
