/*
 * kernels.cu: the CUDA kernels of the GPU data path (see gpu.h), checked against the CPU's
 * results by tests/test_gpu.c on a machine with a device.  CUDA errors become rh_status here.
 */
extern "C" {
#include "gpu.h"
}

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdlib.h>

static rh_status check(cudaError_t e) { return e == cudaSuccess ? RH_OK : RH_ERR_BACKEND; }

extern "C" int rh_gpu_device_count(void) {
  int n = 0; /* left untouched when there is no driver */
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

/* ---- fusion buffer -------------------------------------------------------------------------- */

/* Up to SPANS tensors per launch, passed by value (no table to upload, nothing to free).  Block
 * row y copies span y; its blocks stride over the span in the widest word both ends allow. */
enum { SPANS = 64 };
struct span_table {
  char *tensor[SPANS];
  size_t bytes[SPANS];
  size_t offset[SPANS];
};

template <typename W> __device__ void copy_words(W *dst, const W *src, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    dst[i] = src[i];
}

__global__ void copy_spans(char *fused, span_table t, bool pack) {
  int s = blockIdx.y;
  char *a = fused + t.offset[s], *b = t.tensor[s];
  char *dst = pack ? a : b;
  const char *src = pack ? b : a;
  size_t n = t.bytes[s];
  uintptr_t both = (uintptr_t)dst | (uintptr_t)src | n;
  if (both % 16 == 0) copy_words((uint4 *)dst, (const uint4 *)src, n / 16);
  else if (both % 4 == 0) copy_words((uint32_t *)dst, (const uint32_t *)src, n / 4);
  else copy_words(dst, src, n);
}

static rh_status spans(void *fused, const rh_gpu_span *sp, int n, size_t esz, bool pack,
                       cudaStream_t stream) {
  size_t off = 0;
  for (int first = 0; first < n; first += SPANS) {
    span_table t;
    int k = n - first < SPANS ? n - first : SPANS;
    size_t largest = 0;
    for (int i = 0; i < k; i++) {
      t.tensor[i] = (char *)sp[first + i].data;
      t.bytes[i] = sp[first + i].count * esz;
      t.offset[i] = off;
      off += t.bytes[i];
      if (t.bytes[i] > largest) largest = t.bytes[i];
    }
    if (largest == 0) continue;
    /* about 16 KiB per block per pass, at most 1024 blocks per span */
    size_t blocks = (largest + 16383) / 16384;
    dim3 grid((unsigned)(blocks < 1024 ? blocks : 1024), (unsigned)k);
    copy_spans<<<grid, 256, 0, stream>>>((char *)fused, t, pack);
    if (cudaGetLastError() != cudaSuccess) return RH_ERR_BACKEND;
  }
  return RH_OK;
}

extern "C" rh_status rh_gpu_pack(void *fused, const rh_gpu_span *sp, int n, size_t esz,
                                 void *stream) {
  return spans(fused, sp, n, esz, true, (cudaStream_t)stream);
}

extern "C" rh_status rh_gpu_unpack(const void *fused, const rh_gpu_span *sp, int n, size_t esz,
                                   void *stream) {
  return spans((void *)fused, sp, n, esz, false, (cudaStream_t)stream);
}

/* ---- scaling and compression ------------------------------------------------------------------ */

template <typename T> __global__ void scale_kernel(T *b, size_t n, double f) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    b[i] = (T)((double)b[i] * f);
}

__global__ void scale_float(float *b, size_t n, float f) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    b[i] *= f;
}

__global__ void scale_int(int32_t *b, size_t n, double f) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    b[i] = (int32_t)trunc((double)b[i] * f);
}

__global__ void scale_half(__half *b, size_t n, double f) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    b[i] = __float2half_rn((float)((double)__half2float(b[i]) * f));
}

extern "C" rh_status rh_gpu_scale(void *buf, size_t count, rh_dtype dtype, double factor,
                                  void *stream) {
  if (factor == 1.0 || count == 0) return RH_OK;
  cudaStream_t s = (cudaStream_t)stream;
  switch (dtype) {
  case RH_FLOAT32: scale_float<<<1024, 256, 0, s>>>((float *)buf, count, (float)factor); break;
  case RH_FLOAT64: scale_kernel<double><<<1024, 256, 0, s>>>((double *)buf, count, factor); break;
  case RH_INT32: scale_int<<<1024, 256, 0, s>>>((int32_t *)buf, count, factor); break;
  case RH_FLOAT16: scale_half<<<1024, 256, 0, s>>>((__half *)buf, count, factor); break;
  default: return RH_ERR_INVALID;
  }
  return check(cudaGetLastError());
}

__global__ void divide_int(int32_t *b, size_t n, int d) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    b[i] /= d;
}

extern "C" rh_status rh_gpu_divide(int32_t *buf, size_t count, int n, void *stream) {
  if (n == 1 || count == 0) return RH_OK;
  divide_int<<<1024, 256, 0, (cudaStream_t)stream>>>(buf, count, n);
  return check(cudaGetLastError());
}

__global__ void f32_to_half(__half *d, const float *s, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    d[i] = __float2half_rn(s[i]);
}

__global__ void f64_to_half(__half *d, const double *s, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    d[i] = __double2half(s[i]);
}

__global__ void half_to_f32(float *d, const __half *s, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    d[i] = __half2float(s[i]);
}

__global__ void half_to_f64(double *d, const __half *s, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)blockDim.x * gridDim.x)
    d[i] = (double)__half2float(s[i]);
}

extern "C" rh_status rh_gpu_to_half(uint16_t *dst, const void *src, size_t count, rh_dtype from,
                                    void *stream) {
  if (count == 0) return RH_OK;
  cudaStream_t s = (cudaStream_t)stream;
  if (from == RH_FLOAT64) f64_to_half<<<1024, 256, 0, s>>>((__half *)dst, (const double *)src, count);
  else if (from == RH_FLOAT32) f32_to_half<<<1024, 256, 0, s>>>((__half *)dst, (const float *)src, count);
  else return RH_ERR_INVALID;
  return check(cudaGetLastError());
}

extern "C" rh_status rh_gpu_from_half(void *dst, const uint16_t *src, size_t count, rh_dtype to,
                                      void *stream) {
  if (count == 0) return RH_OK;
  cudaStream_t s = (cudaStream_t)stream;
  if (to == RH_FLOAT64) half_to_f64<<<1024, 256, 0, s>>>((double *)dst, (const __half *)src, count);
  else if (to == RH_FLOAT32) half_to_f32<<<1024, 256, 0, s>>>((float *)dst, (const __half *)src, count);
  else return RH_ERR_INVALID;
  return check(cudaGetLastError());
}

/* ---- synthetic compute ------------------------------------------------------------------------ */

/* Square fp32 GEMMs of side 4096 (2 * 4096^3 FLOP each) and the remainder.  The cuBLAS
 * handle and the matrices are made on the first call and kept for the process (one device). */
static struct {
  cublasHandle_t handle;
  float *a, *b, *c;
  int device;
} gemm = {NULL, NULL, NULL, NULL, -1};

enum { SIDE = 4096 };

static rh_status gemm_ready(void) {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return RH_ERR_BACKEND;
  if (gemm.handle && gemm.device == device) return RH_OK;
  size_t bytes = (size_t)SIDE * SIDE * sizeof(float);
  if (cudaMalloc(&gemm.a, bytes) != cudaSuccess || cudaMalloc(&gemm.b, bytes) != cudaSuccess ||
      cudaMalloc(&gemm.c, bytes) != cudaSuccess)
    return RH_ERR_NOMEM;
  /* defined inputs: zeros (the time of a GEMM does not depend on the values) */
  cudaMemset(gemm.a, 0, bytes);
  cudaMemset(gemm.b, 0, bytes);
  if (cublasCreate(&gemm.handle) != CUBLAS_STATUS_SUCCESS) return RH_ERR_BACKEND;
  gemm.device = device;
  return RH_OK;
}

extern "C" rh_status rh_gpu_compute(double flops, void *stream) {
  if (flops <= 0) return RH_OK;
  rh_status st = gemm_ready();
  if (st != RH_OK) return st;
  cublasSetStream(gemm.handle, (cudaStream_t)stream);
  const float one = 1, zero = 0;
  const int n = SIDE;
  double per = 2.0 * n * n * (double)n;
  long whole = (long)(flops / per);
  for (long i = 0; i < whole && st == RH_OK; i++)
    if (cublasSgemm(gemm.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, gemm.a, n, gemm.b, n,
                    &zero, gemm.c, n) != CUBLAS_STATUS_SUCCESS)
      st = RH_ERR_BACKEND;
  /* the rest as one GEMM of n x n x k, which runs near the rate of the big ones, then the few
   * FLOPs left as a small cube */
  double left = flops - (double)whole * per;
  int k = (int)(left / (2.0 * n * n)) / 64 * 64;
  if (st == RH_OK && k > 0) {
    if (cublasSgemm(gemm.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, k, &one, gemm.a, n, gemm.b, k,
                    &zero, gemm.c, n) != CUBLAS_STATUS_SUCCESS)
      st = RH_ERR_BACKEND;
    left -= 2.0 * n * n * (double)k;
  }
  int rest = (int)cbrt(left / 2.0);
  if (st == RH_OK && rest > 0 &&
      cublasSgemm(gemm.handle, CUBLAS_OP_N, CUBLAS_OP_N, rest, rest, rest, &one, gemm.a, rest,
                  gemm.b, rest, &zero, gemm.c, rest) != CUBLAS_STATUS_SUCCESS)
    st = RH_ERR_BACKEND;
  if (st == RH_OK) st = check(cudaStreamSynchronize((cudaStream_t)stream));
  return st;
}
