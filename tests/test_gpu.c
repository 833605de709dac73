/*
 * test_gpu.c: the GPU pieces on a real device: the kernels against the CPU's results (scale in
 * every type, fp16 in both directions, fusion pack and unpack), a one-rank NCCL communicator
 * (NCCL refuses two ranks of one communicator on one GPU), and the synthetic compute step.
 * Without a device it says so and exits 77, which ctest reports as skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpu.h"

#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *upload(const void *host, size_t bytes) {
  void *dev = NULL;
  assert_int_equal(cudaMalloc(&dev, bytes ? bytes : 1), cudaSuccess);
  assert_int_equal(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  return dev;
}

static void download(void *host, const void *dev, size_t bytes) {
  assert_int_equal(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

enum { N = 100003 };

static void test_scale_matches_cpu(void **state) {
  (void)state;
  for (int t = 0; t < RH_DTYPE_COUNT; t++) {
    size_t esz = rh_dtype_size((rh_dtype)t);
    unsigned char *cpu = malloc(N * esz), *gpu = malloc(N * esz);
    for (size_t i = 0; i < N; i++) {
      double v = (double)((long)(i * 2654435761u % 20001) - 10000) / 7.0;
      if (t == RH_FLOAT32) ((float *)cpu)[i] = (float)v;
      if (t == RH_FLOAT64) ((double *)cpu)[i] = v;
      if (t == RH_INT32) ((int32_t *)cpu)[i] = (int32_t)(v * 7);
      if (t == RH_FLOAT16) ((uint16_t *)cpu)[i] = rh_float_to_half((float)v);
    }
    void *dev = upload(cpu, N * esz);
    assert_int_equal(rh_gpu_scale(dev, N, (rh_dtype)t, 0.125, NULL), RH_OK);
    assert_int_equal(rh_gpu_scale(dev, N, (rh_dtype)t, 1.0 / 3.0, NULL), RH_OK);
    download(gpu, dev, N * esz);
    rh__scale(cpu, N, (rh_dtype)t, 0.125);
    rh__scale(cpu, N, (rh_dtype)t, 1.0 / 3.0);
    if (memcmp(cpu, gpu, N * esz) != 0) print_error("scale differs for %s\n", rh_dtype_name(t));
    assert_memory_equal(cpu, gpu, N * esz);
    cudaFree(dev);
    free(cpu);
    free(gpu);
  }
}

static void test_half_matches_cpu(void **state) {
  (void)state;
  float *f = malloc(N * sizeof *f);
  uint16_t *hc = malloc(N * 2), *hg = malloc(N * 2);
  for (size_t i = 0; i < N; i++) f[i] = ldexpf((float)((long)i - N / 2), (int)(i % 40) - 30);
  void *df = upload(f, N * sizeof *f), *dh = NULL;
  assert_int_equal(cudaMalloc(&dh, N * 2), cudaSuccess);
  assert_int_equal(rh_gpu_to_half(dh, df, N, RH_FLOAT32, NULL), RH_OK);
  download(hg, dh, N * 2);
  rh__to_half(hc, f, N, RH_FLOAT32);
  assert_memory_equal(hc, hg, N * 2);
  float *back_c = malloc(N * sizeof *back_c), *back_g = malloc(N * sizeof *back_g);
  assert_int_equal(rh_gpu_from_half(df, dh, N, RH_FLOAT32, NULL), RH_OK);
  download(back_g, df, N * sizeof *back_g);
  rh__from_half(back_c, hc, N, RH_FLOAT32);
  assert_memory_equal(back_c, back_g, N * sizeof *back_c);
  cudaFree(df);
  cudaFree(dh);
  free(f);
  free(hc);
  free(hg);
  free(back_c);
  free(back_g);
}

static void test_pack_unpack_round_trip(void **state) {
  (void)state;
  size_t counts[4] = {1, 1000, 7, 65537}, total = 0;
  float *host[4];
  rh_gpu_span sp[4];
  for (int k = 0; k < 4; k++) {
    host[k] = malloc(counts[k] * sizeof(float));
    for (size_t i = 0; i < counts[k]; i++) host[k][i] = (float)(k * 1000000 + (long)i);
    sp[k] = (rh_gpu_span){upload(host[k], counts[k] * sizeof(float)), counts[k]};
    total += counts[k];
  }
  float *fused = NULL, *out = malloc(total * sizeof(float));
  assert_int_equal(cudaMalloc((void **)&fused, total * sizeof(float)), cudaSuccess);
  assert_int_equal(rh_gpu_pack(fused, sp, 4, sizeof(float), NULL), RH_OK);
  download(out, fused, total * sizeof(float));
  size_t off = 0;
  for (int k = 0; k < 4; k++) {
    assert_memory_equal(out + off, host[k], counts[k] * sizeof(float));
    off += counts[k];
  }
  for (int k = 0; k < 4; k++) assert_int_equal(cudaMemset(sp[k].data, 0, counts[k] * 4), cudaSuccess);
  assert_int_equal(rh_gpu_unpack(fused, sp, 4, sizeof(float), NULL), RH_OK);
  for (int k = 0; k < 4; k++) {
    float *back = malloc(counts[k] * sizeof(float));
    download(back, sp[k].data, counts[k] * sizeof(float));
    assert_memory_equal(back, host[k], counts[k] * sizeof(float));
    free(back);
    cudaFree(sp[k].data);
    free(host[k]);
  }
  cudaFree(fused);
  free(out);
}

/* 70 spans of fp16 (more than one launch's worth), of odd lengths: every copy width is used */
static void test_pack_odd_spans(void **state) {
  (void)state;
  enum { S = 70 };
  size_t counts[S], total = 0;
  rh_gpu_span sp[S];
  uint16_t *host[S];
  for (int k = 0; k < S; k++) {
    counts[k] = (size_t)(k * 37 % 101) + (k % 3 == 0 ? 8 : 1);
    host[k] = malloc(counts[k] * 2);
    for (size_t i = 0; i < counts[k]; i++) host[k][i] = (uint16_t)(k * 1000 + (int)i);
    sp[k] = (rh_gpu_span){upload(host[k], counts[k] * 2), counts[k]};
    total += counts[k];
  }
  uint16_t *fused = NULL, *out = malloc(total * 2);
  assert_int_equal(cudaMalloc((void **)&fused, total * 2), cudaSuccess);
  assert_int_equal(rh_gpu_pack(fused, sp, S, 2, NULL), RH_OK);
  download(out, fused, total * 2);
  size_t off = 0;
  for (int k = 0; k < S; k++) {
    assert_memory_equal(out + off, host[k], counts[k] * 2);
    off += counts[k];
    assert_int_equal(cudaMemset(sp[k].data, 0xff, counts[k] * 2), cudaSuccess);
  }
  assert_int_equal(rh_gpu_unpack(fused, sp, S, 2, NULL), RH_OK);
  for (int k = 0; k < S; k++) {
    uint16_t back[200];
    download(back, sp[k].data, counts[k] * 2);
    assert_memory_equal(back, host[k], counts[k] * 2);
    cudaFree(sp[k].data);
    free(host[k]);
  }
  cudaFree(fused);
  free(out);
}

static void test_one_rank_nccl(void **state) {
  (void)state;
  unsigned char id[128];
  size_t len = 0;
  assert_int_equal(rh_nccl_unique_id(id, &len), RH_OK);
  rh_nccl *c = NULL;
  assert_int_equal(rh_nccl_init(&c, id, 0, 1, 0, NULL, 60), RH_OK);
  float host[1000];
  for (int i = 0; i < 1000; i++) host[i] = (float)i;
  void *dev = upload(host, sizeof host);
  assert_int_equal(rh_nccl_allreduce(c, dev, 1000, RH_FLOAT32, RH_SUM, 60), RH_OK);
  assert_int_equal(rh_nccl_broadcast(c, dev, 1000, RH_FLOAT32, 0, 60), RH_OK);
  size_t counts[1] = {1000};
  assert_int_equal(rh_nccl_allgatherv(c, dev, counts, RH_FLOAT32, 60), RH_OK);
  float back[1000];
  download(back, dev, sizeof back);
  assert_memory_equal(back, host, sizeof host); /* one rank: the sum is the value */
  cudaFree(dev);
  rh_nccl_free(c);
}

/* A communicator of two ranks whose second never comes: the creation must end at the timeout
 * with a status, the half-made communicator aborted, instead of hanging the job. */
static void test_absent_peer_times_out(void **state) {
  (void)state;
  unsigned char id[128];
  size_t len = 0;
  assert_int_equal(rh_nccl_unique_id(id, &len), RH_OK);
  rh_nccl *c = NULL;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  rh_status st = rh_nccl_init(&c, id, 0, 2, 0, NULL, 2.0);
  clock_gettime(CLOCK_MONOTONIC, &b);
  double waited = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
  print_message("absent peer: %s after %.2f s\n", rh_status_string(st), waited);
  assert_int_equal(st, RH_ERR_TIMEOUT);
  assert_null(c);
  assert_true(waited >= 2.0 && waited < 30.0);
}

static void test_divide_matches_cpu(void **state) {
  (void)state;
  int32_t *cpu = malloc(N * sizeof *cpu), *gpu = malloc(N * sizeof *gpu);
  for (size_t i = 0; i < N; i++) cpu[i] = (int32_t)(i * 2654435761u % 200001) - 100000;
  void *dev = upload(cpu, N * sizeof *cpu);
  assert_int_equal(rh_gpu_divide(dev, N, 3, NULL), RH_OK);
  download(gpu, dev, N * sizeof *gpu);
  for (size_t i = 0; i < N; i++) cpu[i] /= 3;
  assert_memory_equal(cpu, gpu, N * sizeof *cpu);
  cudaFree(dev);
  free(cpu);
  free(gpu);
}

static void test_compute_spends_time(void **state) {
  (void)state;
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  assert_int_equal(rh_gpu_compute(1e9, NULL), RH_OK); /* the handle and matrices, made once */
  cudaEventRecord(a, NULL);
  assert_int_equal(rh_gpu_compute(2e12, NULL), RH_OK);
  cudaEventRecord(b, NULL);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  print_message("2 TFLOP of fp32 GEMM: %.3f ms (%.1f TFLOP/s)\n", ms, 2e12 / (ms * 1e-3) / 1e12);
  assert_true(ms > 0);
  assert_true(2e12 / (ms * 1e-3) < 2e15); /* no GPU does 2 PFLOP/s of fp32: the work was done */
}

int main(void) {
  if (rh_gpu_device_count() == 0) {
    printf("no CUDA device found: skipping the GPU tests\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scale_matches_cpu),   cmocka_unit_test(test_half_matches_cpu),
      cmocka_unit_test(test_pack_unpack_round_trip), cmocka_unit_test(test_pack_odd_spans),
      cmocka_unit_test(test_divide_matches_cpu),  cmocka_unit_test(test_one_rank_nccl),
      cmocka_unit_test(test_absent_peer_times_out), cmocka_unit_test(test_compute_spends_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
