/*
 * device.c: the process's device and the runtime's memory table on it.  Tensors are
 * cudaMallocAsync'd on the process's stream (the stream-ordered pool makes a fusion buffer per
 * collective cheap), and scaling, casts and fusion run as the kernels of kernels.cu on that same
 * stream, so they are ordered with the NCCL collectives without a wait between them.
 */
#include "gpu.h"

#include <cuda_runtime.h>

#include <stdint.h>
#include <stdlib.h>

static struct {
  int device;
  cudaStream_t stream;
  bool open;
} gpu = {-1, NULL, false};

static rh_status check(cudaError_t e) {
  if (e == cudaSuccess) return RH_OK;
  return e == cudaErrorMemoryAllocation ? RH_ERR_NOMEM : RH_ERR_BACKEND;
}

rh_status rh_gpu_open(int device) {
  if (gpu.open) return gpu.device == device ? RH_OK : RH_ERR_INVALID;
  rh_status st = check(cudaSetDevice(device));
  if (st == RH_OK) st = check(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking));
  /* the pool keeps what it was given (by default it hands memory back at every synchronize,
   * and each fusion buffer would be a fresh, device-wide synchronizing cudaMalloc) */
  cudaMemPool_t pool;
  uint64_t keep = UINT64_MAX;
  if (st == RH_OK && cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  if (st != RH_OK) return st;
  gpu.device = device;
  gpu.open = true;
  return RH_OK;
}

void rh_gpu_close(void) {
  if (!gpu.open) return;
  cudaSetDevice(gpu.device);
  cudaStreamSynchronize(gpu.stream);
  cudaStreamDestroy(gpu.stream);
  gpu.open = false;
  gpu.device = -1;
}

int rh_gpu_device(void) { return gpu.device; }
void *rh_gpu_stream(void) { return gpu.stream; }

rh_status rh_gpu_bind(void) {
  if (!gpu.open) return RH_ERR_INVALID;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == gpu.device) return RH_OK;
  return check(cudaSetDevice(gpu.device));
}

/* ---- memory table -------------------------------------------------------------------------- */

static bool dev_owns(const void *p) {
  if (!p) return false;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError(); /* host memory on old drivers: clear the sticky-free error */
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static void *dev_alloc(rh_ctx *ctx, size_t bytes) {
  (void)ctx;
  void *p = NULL;
  if (rh_gpu_bind() != RH_OK) return NULL;
  if (cudaMallocAsync(&p, bytes ? bytes : 1, gpu.stream) != cudaSuccess) return NULL;
  return p;
}

static void dev_release(rh_ctx *ctx, void *p) {
  (void)ctx;
  if (p && rh_gpu_bind() == RH_OK) cudaFreeAsync(p, gpu.stream);
}

static rh_status dev_copy(rh_ctx *ctx, void *dst, const void *src, size_t bytes) {
  (void)ctx;
  if (!bytes || dst == src) return RH_OK;
  rh_status st = rh_gpu_bind();
  if (st == RH_OK) st = check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, gpu.stream));
  /* a host end: done before the caller touches it */
  if (st == RH_OK && !(dev_owns(dst) && dev_owns(src))) st = check(cudaStreamSynchronize(gpu.stream));
  return st;
}

static rh_status dev_scale(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, double f) {
  (void)ctx;
  rh_status st = rh_gpu_bind();
  return st == RH_OK ? rh_gpu_scale(buf, count, dtype, f, gpu.stream) : st;
}

static rh_status dev_divide(rh_ctx *ctx, int32_t *buf, size_t count, int n) {
  (void)ctx;
  rh_status st = rh_gpu_bind();
  return st == RH_OK ? rh_gpu_divide(buf, count, n, gpu.stream) : st;
}

static rh_status dev_to_half(rh_ctx *ctx, uint16_t *dst, const void *src, size_t count,
                             rh_dtype from) {
  (void)ctx;
  rh_status st = rh_gpu_bind();
  return st == RH_OK ? rh_gpu_to_half(dst, src, count, from, gpu.stream) : st;
}

static rh_status dev_from_half(rh_ctx *ctx, void *dst, const uint16_t *src, size_t count,
                               rh_dtype to) {
  (void)ctx;
  rh_status st = rh_gpu_bind();
  return st == RH_OK ? rh_gpu_from_half(dst, src, count, to, gpu.stream) : st;
}

static rh_status dev_pack(rh_ctx *ctx, void *fused, void *const *bufs, const size_t *counts,
                          int n, size_t esz, bool unpack) {
  (void)ctx;
  rh_status st = rh_gpu_bind();
  rh_gpu_span *sp = n > 0 ? malloc((size_t)n * sizeof *sp) : NULL;
  if (n > 0 && !sp) return RH_ERR_NOMEM;
  for (int i = 0; i < n; i++) sp[i] = (rh_gpu_span){bufs[i], counts[i]};
  if (st == RH_OK)
    st = unpack ? rh_gpu_unpack(fused, sp, n, esz, gpu.stream) : rh_gpu_pack(fused, sp, n, esz, gpu.stream);
  free(sp);
  return st;
}

static rh_status dev_sync(rh_ctx *ctx) {
  (void)ctx;
  rh_status st = rh_gpu_bind();
  return st == RH_OK ? check(cudaStreamSynchronize(gpu.stream)) : st;
}

const rh_memory_ops rh_gpu_memory = {
    .name = "cuda",
    .owns = dev_owns,
    .alloc = dev_alloc,
    .release = dev_release,
    .copy = dev_copy,
    .scale = dev_scale,
    .divide = dev_divide,
    .to_half = dev_to_half,
    .from_half = dev_from_half,
    .pack = dev_pack,
    .sync = dev_sync,
};
