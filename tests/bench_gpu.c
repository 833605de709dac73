/*
 * bench_gpu.c: the GPU pieces' speed, printed (a benchmark, not a test): the NCCL wrapper's
 * allreduce (enqueue, then poll the stream and NCCL's asynchronous errors) against raw NCCL with
 * a stream synchronize, from 1 MB to 1 GB; and fusion pack/unpack bandwidth against the device's
 * own copy bandwidth (cudaMemcpy device to device).  One process, one GPU: a one-rank
 * communicator.  Goals: within 3% of raw NCCL at >= 64 MB; pack/unpack >= 80% of the copy.
 *   ./build/tests/bench_gpu
 */
#include "gpu.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>

static double timed(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  cudaEventSynchronize(b);
  cudaEventElapsedTime(&ms, a, b);
  return ms * 1e-3;
}

int main(void) {
  if (rh_gpu_device_count() == 0) {
    printf("no CUDA device found: nothing to measure\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("# device: %s\n", prop.name);
  unsigned char id[128];
  size_t len;
  rh_nccl *wrap = NULL;
  if (rh_nccl_unique_id(id, &len) != RH_OK || rh_nccl_init(&wrap, id, 0, 1, 0) != RH_OK) {
    fprintf(stderr, "cannot make an NCCL communicator\n");
    return 1;
  }
  ncclUniqueId uid;
  ncclComm_t raw;
  cudaStream_t s;
  cudaStreamCreate(&s);
  ncclGetUniqueId(&uid);
  ncclCommInitRank(&raw, 1, uid, 0);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const int reps = 20;
  printf("#%13s %12s %12s %8s\n", "size(B)", "raw(us)", "runtime(us)", "diff(%)");
  for (size_t bytes = 1u << 20; bytes <= (size_t)1 << 30; bytes <<= 1) {
    float *buf;
    if (cudaMalloc((void **)&buf, bytes) != cudaSuccess) break;
    size_t n = bytes / 4;
    ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, raw, s); /* warm-up */
    cudaStreamSynchronize(s);
    cudaEventRecord(a, s);
    for (int i = 0; i < reps; i++) {
      ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, raw, s);
      cudaStreamSynchronize(s);
    }
    cudaEventRecord(b, s);
    double t_raw = timed(a, b) / reps;
    rh_nccl_allreduce(wrap, buf, n, RH_FLOAT32, RH_SUM, 60);
    double t0 = 0;
    cudaEventRecord(a, NULL);
    for (int i = 0; i < reps; i++) rh_nccl_allreduce(wrap, buf, n, RH_FLOAT32, RH_SUM, 60);
    cudaEventRecord(b, NULL);
    t0 = timed(a, b) / reps;
    printf("%14zu %12.1f %12.1f %8.2f\n", bytes, t_raw * 1e6, t0 * 1e6, 100 * (t0 - t_raw) / t_raw);
    cudaFree(buf);
  }
  /* fusion: 64 tensors of 4 MiB into one 256 MiB buffer and back */
  enum { T = 64 };
  size_t each = (size_t)4 << 20, total = T * each;
  rh_gpu_span sp[T];
  for (int i = 0; i < T; i++) {
    cudaMalloc(&sp[i].data, each);
    sp[i].count = each;
  }
  void *fused, *copy;
  cudaMalloc(&fused, total);
  cudaMalloc(&copy, total);
  rh_gpu_pack(fused, sp, T, 1, NULL);
  cudaEventRecord(a, NULL);
  for (int i = 0; i < 10; i++) cudaMemcpy(copy, fused, total, cudaMemcpyDeviceToDevice);
  cudaEventRecord(b, NULL);
  double t_copy = timed(a, b) / 10;
  cudaEventRecord(a, NULL);
  for (int i = 0; i < 10; i++) rh_gpu_pack(fused, sp, T, 1, NULL);
  cudaEventRecord(b, NULL);
  double t_pack = timed(a, b) / 10;
  cudaEventRecord(a, NULL);
  for (int i = 0; i < 10; i++) rh_gpu_unpack(fused, sp, T, 1, NULL);
  cudaEventRecord(b, NULL);
  double t_unpack = timed(a, b) / 10;
  /* a copy reads and writes the bytes once, as pack and unpack do */
  printf("# fusion of %d x %zu B: copy %.1f GB/s, pack %.1f GB/s (%.1f%%), unpack %.1f GB/s (%.1f%%)\n",
         T, each, 2 * total / t_copy / 1e9, 2 * total / t_pack / 1e9, 100 * t_copy / t_pack,
         2 * total / t_unpack / 1e9, 100 * t_copy / t_unpack);
  rh_nccl_free(wrap);
  ncclCommDestroy(raw);
  return 0;
}
