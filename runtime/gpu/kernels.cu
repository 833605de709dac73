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

/* Grid-stride over the bytes of every span; span i starts at offsets[i] in the fused buffer. */
__global__ void copy_spans(char *fused, char *const *data, const size_t *bytes,
                           const size_t *offsets, int n, bool pack) {
  for (int s = 0; s < n; s++) {
    char *d = data[s];
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < bytes[s];
         i += (size_t)blockDim.x * gridDim.x) {
      if (pack) fused[offsets[s] + i] = d[i];
      else d[i] = fused[offsets[s] + i];
    }
  }
}

static rh_status spans(void *fused, const rh_gpu_span *sp, int n, size_t esz, bool pack,
                       cudaStream_t stream) {
  if (n <= 0) return RH_OK;
  size_t *host = (size_t *)malloc((size_t)n * 3 * sizeof(size_t));
  if (!host) return RH_ERR_NOMEM;
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    host[i] = (size_t)sp[i].data;
    host[n + i] = sp[i].count * esz;
    host[2 * n + i] = off;
    off += sp[i].count * esz;
  }
  size_t *dev = NULL;
  rh_status st = check(cudaMalloc(&dev, (size_t)n * 3 * sizeof(size_t)));
  if (st == RH_OK)
    st = check(cudaMemcpyAsync(dev, host, (size_t)n * 3 * sizeof(size_t), cudaMemcpyHostToDevice,
                               stream));
  if (st == RH_OK) {
    copy_spans<<<1024, 256, 0, stream>>>((char *)fused, (char *const *)dev, dev + n, dev + 2 * n, n,
                                         pack);
    st = check(cudaGetLastError());
  }
  if (st == RH_OK) st = check(cudaStreamSynchronize(stream));
  cudaFree(dev);
  free(host);
  return st;
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
  rh_status st = check(cudaGetLastError());
  return st == RH_OK ? check(cudaStreamSynchronize(s)) : st;
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
  rh_status st = check(cudaGetLastError());
  return st == RH_OK ? check(cudaStreamSynchronize(s)) : st;
}

extern "C" rh_status rh_gpu_from_half(void *dst, const uint16_t *src, size_t count, rh_dtype to,
                                      void *stream) {
  if (count == 0) return RH_OK;
  cudaStream_t s = (cudaStream_t)stream;
  if (to == RH_FLOAT64) half_to_f64<<<1024, 256, 0, s>>>((double *)dst, (const __half *)src, count);
  else if (to == RH_FLOAT32) half_to_f32<<<1024, 256, 0, s>>>((float *)dst, (const __half *)src, count);
  else return RH_ERR_INVALID;
  rh_status st = check(cudaGetLastError());
  return st == RH_OK ? check(cudaStreamSynchronize(s)) : st;
}

/* ---- synthetic compute ------------------------------------------------------------------------ */

/* Square GEMMs of side 4096 (2 * 4096^3 FLOP each) and one smaller remainder. */
extern "C" rh_status rh_gpu_compute(double flops, void *stream) {
  if (flops <= 0) return RH_OK;
  const int n = 4096;
  float *a = NULL, *b = NULL, *c = NULL;
  cublasHandle_t h = NULL;
  rh_status st = check(cudaMalloc(&a, (size_t)n * n * sizeof(float)));
  if (st == RH_OK) st = check(cudaMalloc(&b, (size_t)n * n * sizeof(float)));
  if (st == RH_OK) st = check(cudaMalloc(&c, (size_t)n * n * sizeof(float)));
  if (st == RH_OK && cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) st = RH_ERR_BACKEND;
  if (st == RH_OK) cublasSetStream(h, (cudaStream_t)stream);
  const float one = 1, zero = 0;
  double per = 2.0 * n * n * (double)n;
  long whole = (long)(flops / per);
  for (long i = 0; i < whole && st == RH_OK; i++)
    if (cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, b, n, &zero, c, n) !=
        CUBLAS_STATUS_SUCCESS)
      st = RH_ERR_BACKEND;
  int rest = (int)cbrt((flops - (double)whole * per) / 2.0);
  if (st == RH_OK && rest > 0 &&
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, rest, rest, rest, &one, a, rest, b, rest, &zero, c,
                  rest) != CUBLAS_STATUS_SUCCESS)
    st = RH_ERR_BACKEND;
  if (st == RH_OK) st = check(cudaStreamSynchronize((cudaStream_t)stream));
  if (h) cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return st;
}
