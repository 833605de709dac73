/*
 * microbench.cu: the kernel rates `rehearsal-gpu kernels` measures (gpu.h): cuBLAS GEMMs by shape
 * and precision on random inputs, a device-to-device copy, and the launch of an empty kernel from a
 * stream and from a CUDA graph.  Each is timed with CUDA events around `reps` calls after a
 * warm-up, on a stream of its own.
 */
extern "C" {
#include "gpu.h"
}

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdio.h>

static rh_status ok(cudaError_t e) { return e == cudaSuccess ? RH_OK : RH_ERR_BACKEND; }

/* values in [-0.5, 0.5) from a hash of the index: random enough that the tensor cores do not
 * run faster on them than on real data (zeros do) */
template <typename T> __global__ void fill(T *p, size_t n, unsigned seed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned h = (unsigned)i * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  p[i] = (T)((float)(h & 0xffff) / 65536.0f - 0.5f);
}

static __global__ void empty(void) {}

/* precision: 0 fp32, 1 tf32, 2 fp16, 3 bf16 (rh_precision's order, without fp8) */
static size_t elem_bytes(int precision) { return precision <= 1 ? 4 : 2; }
static cudaDataType_t elem_type(int precision) {
  return precision <= 1 ? CUDA_R_32F : precision == 2 ? CUDA_R_16F : CUDA_R_16BF;
}

static void fill_any(void *p, size_t n, int precision, unsigned seed, cudaStream_t s) {
  unsigned blocks = (unsigned)((n + 255) / 256);
  if (precision <= 1) fill<float><<<blocks, 256, 0, s>>>((float *)p, n, seed);
  else if (precision == 2) fill<__half><<<blocks, 256, 0, s>>>((__half *)p, n, seed);
  else fill<__nv_bfloat16><<<blocks, 256, 0, s>>>((__nv_bfloat16 *)p, n, seed);
}

/* `reps` calls of fn after 3 of warm-up, timed by events on s: seconds a call */
template <typename F> static rh_status timed(cudaStream_t s, int reps, F fn, double *seconds) {
  cudaEvent_t a, b;
  if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) return RH_ERR_BACKEND;
  rh_status st = RH_OK;
  for (int i = 0; i < 3 && st == RH_OK; i++) st = fn();
  cudaEventRecord(a, s);
  for (int i = 0; i < reps && st == RH_OK; i++) st = fn();
  cudaEventRecord(b, s);
  float ms = 0;
  if (st == RH_OK) st = ok(cudaEventSynchronize(b));
  if (st == RH_OK) st = ok(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  *seconds = ms / 1e3 / reps;
  return st;
}

extern "C" rh_status rh_gpu_bench_gemm(int precision, int m, int n, int k, int reps,
                                       double *seconds) {
  if (precision < 0 || precision > 3 || m < 1 || n < 1 || k < 1) return RH_ERR_INVALID;
  size_t e = elem_bytes(precision);
  void *a = NULL, *b = NULL, *c = NULL;
  cudaStream_t s = NULL;
  cublasHandle_t h = NULL;
  rh_status st = ok(cudaStreamCreate(&s));
  if (st == RH_OK && (cudaMalloc(&a, e * m * k) != cudaSuccess || cudaMalloc(&b, e * k * n) != cudaSuccess ||
                      cudaMalloc(&c, e * m * n) != cudaSuccess))
    st = RH_ERR_NOMEM;
  if (st == RH_OK && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) st = RH_ERR_BACKEND;
  if (st == RH_OK) {
    cublasSetStream(h, s);
    fill_any(a, (size_t)m * k, precision, 1, s);
    fill_any(b, (size_t)k * n, precision, 2, s);
    cublasComputeType_t ct = precision == 1 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cudaDataType_t t = elem_type(precision);
    const float one = 1, zero = 0;
    st = timed(s, reps, [&]() {
      return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, t, m, b, t, k, &zero, c, t,
                          m, ct, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS ? RH_OK : RH_ERR_BACKEND;
    }, seconds);
  }
  if (h) cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  if (s) cudaStreamDestroy(s);
  return st;
}

extern "C" rh_status rh_gpu_bench_copy(size_t bytes, int reps, double *seconds) {
  void *a = NULL, *b = NULL;
  cudaStream_t s = NULL;
  rh_status st = ok(cudaStreamCreate(&s));
  if (st == RH_OK && (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess))
    st = RH_ERR_NOMEM;
  if (st == RH_OK) st = ok(cudaMemsetAsync(a, 1, bytes, s));
  if (st == RH_OK)
    st = timed(s, reps, [&]() { return ok(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); },
               seconds);
  cudaFree(a);
  cudaFree(b);
  if (s) cudaStreamDestroy(s);
  return st;
}

/* An empty kernel launched `kernels` times back to back, from the stream or from a CUDA graph
 * holding them: seconds a kernel. */
extern "C" rh_status rh_gpu_bench_launch(int kernels, int graph, double *seconds) {
  cudaStream_t s = NULL;
  cudaGraph_t g = NULL;
  cudaGraphExec_t x = NULL;
  rh_status st = ok(cudaStreamCreate(&s));
  if (st == RH_OK && graph) {
    st = ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < kernels && st == RH_OK; i++) empty<<<1, 1, 0, s>>>();
    if (st == RH_OK) st = ok(cudaStreamEndCapture(s, &g));
    if (st == RH_OK) st = ok(cudaGraphInstantiate(&x, g, 0));
  }
  double per = 0;
  if (st == RH_OK)
    st = timed(s, 10, [&]() {
      if (graph) return ok(cudaGraphLaunch(x, s));
      for (int i = 0; i < kernels; i++) empty<<<1, 1, 0, s>>>();
      return ok(cudaGetLastError());
    }, &per);
  *seconds = per / kernels;
  if (x) cudaGraphExecDestroy(x);
  if (g) cudaGraphDestroy(g);
  if (s) cudaStreamDestroy(s);
  return st;
}

extern "C" void rh_gpu_describe(char *buf, size_t len) {
  cudaDeviceProp p;
  int dev = 0, driver = 0, runtime = 0;
  cudaGetDevice(&dev);
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    snprintf(buf, len, "an unknown device");
    return;
  }
  snprintf(buf, len, "%s, %d SMs, CUDA driver %d.%d, runtime %d.%d", p.name, p.multiProcessorCount,
           driver / 1000, driver % 1000 / 10, runtime / 1000, runtime % 1000 / 10);
}
