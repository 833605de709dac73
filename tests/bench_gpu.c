/*
 * bench_gpu.c: the GPU path's speed, printed (a benchmark, not a test).  Run one process per GPU:
 *   mpirun -np <GPUs> ./build/tests/bench_gpu
 * 1. The runtime's rh_allreduce on device memory (negotiation, NCCL through the polling wrapper,
 *    the stream-ordered kernels) against raw ncclAllReduce + cudaStreamSynchronize, 1 MB to
 *    1 GB, in place and out of place.  Goal: within 3% at >= 64 MB.
 * 2. Fusion: the pack and unpack kernels (64 tensors of 4 MiB) against the device's own copy
 *    bandwidth (cudaMemcpy device to device).  Goal: >= 80%.
 * 3. With file arguments (mpirun -np 1 ./build/tests/bench_gpu fp32.txt [bf16.txt [calls.txt]]):
 *    cuBLAS GEMMs on rank 0's GPU, squares of side 128 to 16384, fp32 and (second file) bf16
 *    with fp32 accumulation, random inputs, written as rows "M N K TFLOPS" for
 *    `rehearsal calibrate --gemm FILE` (the roofline's efficiency curve).
 * 4. The third file: the GPU target's compute call by call (rh_gpu_compute, its GEMMs with the
 *    launches and the synchronisation of each call), rows of the same form.
 * On one GPU a one-rank communicator moves no bytes between GPUs: in place, both sides time
 * NCCL's fixed cost; out of place, NCCL copies the buffer and the runtime copies it before an
 * in-place allreduce, so both move the same bytes.
 */
#include "gpu.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double event_seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  cudaEventSynchronize(b);
  cudaEventElapsedTime(&ms, a, b);
  return ms * 1e-3;
}

/* `bytes` of values uniform in [-1, 1), fp32 or bf16 (a float's upper half), into a and b: a
 * GEMM of zeros draws less power than one of real values and runs faster, by some 10% on the
 * tensor cores. */
static int fill_random(void *a, void *b, size_t bytes, bool bf16) {
  unsigned char *h = malloc(bytes);
  if (!h) return 1;
  uint64_t x = 0x9e3779b97f4a7c15u;
  size_t n = bytes / (bf16 ? 2 : 4);
  for (size_t i = 0; i < n; i++) {
    x = x * 6364136223846793005u + 1442695040888963407u;
    float v = (float)((double)(x >> 40) / (double)(1u << 24)) * 2 - 1;
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    if (bf16) ((uint16_t *)h)[i] = (uint16_t)(bits >> 16);
    else ((float *)h)[i] = v;
  }
  int rc = cudaMemcpy(a, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
           cudaMemcpy(b, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
  free(h);
  return rc;
}

/* Section 3: the GEMM rate by size, fp32 (cublasSgemm, the CUDA cores, as the GPU target's
 * synthetic compute runs) or bf16 in, fp32 accumulate (cublasGemmEx, the tensor cores, as mixed
 * precision training runs), into `path`. */
static int gemm_sweep(const char *path, bool bf16) {
  FILE *f = fopen(path, "w");
  cublasHandle_t h;
  if (!f || cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    if (f) fclose(f);
    return 1;
  }
  fprintf(f, "# %s, column-major NN, random inputs, mean of 10 after a warm-up\n"
             "# M N K TFLOPS\n",
          bf16 ? "bf16 cublasGemmEx, fp32 accumulate" : "fp32 cublasSgemm");
  size_t most = (size_t)16384 * 16384 * sizeof(float);
  void *a = NULL, *b = NULL, *c = NULL;
  const float one = 1, zero = 0;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  int rc = cudaMalloc(&a, most) || cudaMalloc(&b, most) || cudaMalloc(&c, most);
  if (!rc) rc = fill_random(a, b, most, bf16);
  /* squares of side 128 to 16384, in steps of about sqrt(2) */
  static const int sides[] = {128,  192,  256,  384,  512,  768,   1024, 1536,
                              2048, 3072, 4096, 6144, 8192, 12288, 16384};
  for (size_t i = 0; i < sizeof sides / sizeof *sides && !rc; i++) {
    int m = sides[i];
    for (int r = -1; r < 10; r++) {
      if (r == 0) cudaEventRecord(e0, 0);
      cublasStatus_t st =
          bf16 ? cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, CUDA_R_16BF, m, b,
                              CUDA_R_16BF, m, &zero, c, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT)
               : cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, (const float *)a, m,
                             (const float *)b, m, &zero, (float *)c, m);
      if (st != CUBLAS_STATUS_SUCCESS) rc = 1;
    }
    cudaEventRecord(e1, 0);
    double t = event_seconds(e0, e1) / 10;
    fprintf(f, "%d %d %d %.6g\n", m, m, m, 2.0 * m * m * (double)m / t / 1e12);
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cublasDestroy(h);
  fclose(f);
  if (!rc) printf("# GEMM sweep (%s) written to %s\n", bf16 ? "bf16" : "fp32", path);
  return rc;
}

/* Section 4: the GPU target's own compute, call by call: rh_gpu_compute of 2 x 4096 x 4096 x K
 * FLOPs (its GEMMs, their launches and the synchronisation that ends each call, as a training
 * step's layer pays them), timed on the host, written as rows of that GEMM's shape. */
static int compute_sweep(const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "# rh_gpu_compute calls of 2 x 4096 x 4096 x K FLOPs, host-timed, mean of 20 after a "
             "warm-up\n# M N K TFLOPS\n");
  int rc = 0;
  for (int k = 32; k <= 32768 && !rc; k *= 2) {
    double w = 2.0 * 4096 * 4096 * (double)k, t0 = 0;
    for (int r = -1; r < 20 && !rc; r++) {
      if (r == 0) t0 = now();
      rc = rh_gpu_compute(w, rh_gpu_stream()) != RH_OK;
    }
    fprintf(f, "4096 4096 %d %.6g\n", k, w / ((now() - t0) / 20) / 1e12);
  }
  fclose(f);
  if (!rc) printf("# compute calls written to %s\n", path);
  return rc;
}

struct tables {
  const char *fp32, *bf16, *calls;
};

static int bench(rh_ctx *ctx, void *arg) {
  const struct tables *gemm = arg;
  int rank = rh_rank(ctx), n = rh_size(ctx);
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, rh_gpu_device());
  ncclUniqueId uid;
  if (rank == 0) ncclGetUniqueId(&uid);
  MPI_Bcast(&uid, sizeof uid, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t raw;
  cudaStream_t s;
  cudaSetDevice(rh_gpu_device());
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (ncclCommInitRank(&raw, n, uid, rank) != ncclSuccess) return 1;
  if (rank == 0) {
    printf("# device: %s, %d rank%s (one GPU each)\n", prop.name, n, n == 1 ? "" : "s");
    printf("# allreduce float32 sum, mean of 20 after a warm-up; times in us\n");
    printf("#%13s %10s %10s %8s %10s %10s %8s\n", "size(B)", "raw-in", "rh-in", "diff%",
           "raw-out", "rh-out", "diff%");
  }
  const int reps = 20;
  for (size_t bytes = (size_t)1 << 20; bytes <= (size_t)1 << 30; bytes <<= 1) {
    size_t count = bytes / 4;
    float *a = rh_tensor_alloc(ctx, bytes), *b = rh_tensor_alloc(ctx, bytes);
    if (!a || !b) break;
    double t[4];
    for (int mode = 0; mode < 4; mode++) {
      bool out_of_place = mode >= 2, runtime = mode % 2;
      float *src = a, *dst = out_of_place ? b : a;
      double t0 = 0;
      for (int i = -1; i < reps; i++) {
        if (i == 0) {
          MPI_Barrier(MPI_COMM_WORLD);
          t0 = now();
        }
        if (runtime) {
          rh_allreduce(ctx, src, dst, count, RH_FLOAT32, RH_SUM, NULL);
        } else {
          ncclAllReduce(src, dst, count, ncclFloat32, ncclSum, raw, s);
          cudaStreamSynchronize(s);
        }
      }
      t[mode] = (now() - t0) / reps;
    }
    if (rank == 0)
      printf("%14zu %10.1f %10.1f %8.2f %10.1f %10.1f %8.2f\n", bytes, t[0] * 1e6, t[1] * 1e6,
             100 * (t[1] - t[0]) / t[0], t[2] * 1e6, t[3] * 1e6, 100 * (t[3] - t[2]) / t[2]);
    rh_tensor_free(ctx, a);
    rh_tensor_free(ctx, b);
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
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  double t_copy = 0, t_pack = 0, t_unpack = 0;
  for (int what = 0; what < 3; what++) {
    for (int i = -1; i < 10; i++) {
      if (i == 0) cudaEventRecord(e0, s);
      if (what == 0) cudaMemcpyAsync(copy, fused, total, cudaMemcpyDeviceToDevice, s);
      if (what == 1) rh_gpu_pack(fused, sp, T, 1, s);
      if (what == 2) rh_gpu_unpack(fused, sp, T, 1, s);
    }
    cudaEventRecord(e1, s);
    double sec = event_seconds(e0, e1) / 10;
    if (what == 0) t_copy = sec;
    if (what == 1) t_pack = sec;
    if (what == 2) t_unpack = sec;
  }
  /* a copy reads and writes each byte once, as pack and unpack do */
  if (rank == 0)
    printf("# fusion of %d x %zu B: copy %.0f GB/s; pack %.0f GB/s (%.1f%% of copy); "
           "unpack %.0f GB/s (%.1f%%)\n",
           T, each, 2 * total / t_copy / 1e9, 2 * total / t_pack / 1e9, 100 * t_copy / t_pack,
           2 * total / t_unpack / 1e9, 100 * t_copy / t_unpack);

  /* the same 256 MiB reduced as 64 fused tensors, against one tensor of that size */
  size_t counts[T];
  void *bufs[T];
  for (int i = 0; i < T; i++) {
    counts[i] = each / 4;
    bufs[i] = sp[i].data;
  }
  double t_one = 0, t_group = 0;
  for (int what = 0; what < 2; what++) {
    double t0 = 0;
    for (int i = -1; i < 10; i++) {
      if (i == 0) t0 = now();
      if (what == 0) rh_allreduce(ctx, fused, fused, total / 4, RH_FLOAT32, RH_AVERAGE, NULL);
      else rh_allreduce_group(ctx, bufs, counts, T, RH_FLOAT32, RH_AVERAGE, NULL);
    }
    if (what == 0) t_one = (now() - t0) / 10;
    else t_group = (now() - t0) / 10;
  }
  if (rank == 0)
    printf("# average of 256 MiB: one tensor %.1f us; 64 fused tensors %.1f us (pack, allreduce, "
           "unpack)\n",
           t_one * 1e6, t_group * 1e6);
  for (int i = 0; i < T; i++) cudaFree(sp[i].data);
  cudaFree(fused);
  cudaFree(copy);
  ncclCommDestroy(raw);
  cudaStreamDestroy(s);
  if (rank == 0 && gemm->fp32 && gemm_sweep(gemm->fp32, false) != 0) return 1;
  if (rank == 0 && gemm->bf16 && gemm_sweep(gemm->bf16, true) != 0) return 1;
  if (rank == 0 && gemm->calls && compute_sweep(gemm->calls) != 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  rh_settings settings;
  char err[128];
  if (rh_settings_init(&settings, err, sizeof err) != RH_OK) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  rh_launch_config cfg = {.settings = &settings};
  struct tables gemm = {argc > 1 ? argv[1] : NULL, argc > 2 ? argv[2] : NULL,
                        argc > 3 ? argv[3] : NULL};
  int rc = rh__launch(&cfg, bench, &gemm, NULL);
  if (rc == 77) printf("no CUDA device found: nothing to measure\n");
  return rc;
}
