/*
 * memory.c: tensor memory.  The host's memory table (plain C: memcpy, and the conversions of
 * dtype.c), and the public calls that allocate and fill tensors wherever the target keeps them:
 * the device of this rank on a GPU target, host memory elsewhere.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static bool host_owns(const void *p) { return p != NULL; }

static void *host_alloc(rh_ctx *ctx, size_t bytes) {
  (void)ctx;
  return malloc(bytes ? bytes : 1);
}

static void host_release(rh_ctx *ctx, void *p) {
  (void)ctx;
  free(p);
}

static rh_status host_copy(rh_ctx *ctx, void *dst, const void *src, size_t bytes) {
  (void)ctx;
  if (dst != src && bytes) memmove(dst, src, bytes);
  return RH_OK;
}

static rh_status host_scale(rh_ctx *ctx, void *buf, size_t count, rh_dtype dtype, double f) {
  (void)ctx;
  rh__scale(buf, count, dtype, f);
  return RH_OK;
}

static rh_status host_divide(rh_ctx *ctx, int32_t *buf, size_t count, int n) {
  (void)ctx;
  for (size_t i = 0; i < count; i++) buf[i] /= n;
  return RH_OK;
}

static rh_status host_to_half(rh_ctx *ctx, uint16_t *dst, const void *src, size_t count,
                              rh_dtype from) {
  (void)ctx;
  rh__to_half(dst, src, count, from);
  return RH_OK;
}

static rh_status host_from_half(rh_ctx *ctx, void *dst, const uint16_t *src, size_t count,
                                rh_dtype to) {
  (void)ctx;
  rh__from_half(dst, src, count, to);
  return RH_OK;
}

static rh_status host_pack(rh_ctx *ctx, void *fused, void *const *bufs, const size_t *counts,
                           int n, size_t esz, bool unpack) {
  (void)ctx;
  char *f = fused;
  for (int i = 0; i < n; i++) {
    size_t bytes = counts[i] * esz;
    if (bytes && unpack) memcpy(bufs[i], f, bytes);
    else if (bytes) memcpy(f, bufs[i], bytes);
    f += bytes;
  }
  return RH_OK;
}

static rh_status host_sync(rh_ctx *ctx) {
  (void)ctx;
  return RH_OK;
}

const rh_memory_ops rh__host_memory = {
    .name = "host",
    .owns = host_owns,
    .alloc = host_alloc,
    .release = host_release,
    .copy = host_copy,
    .scale = host_scale,
    .divide = host_divide,
    .to_half = host_to_half,
    .from_half = host_from_half,
    .pack = host_pack,
    .sync = host_sync,
};

static const rh_memory_ops *tensor_memory(const rh_ctx *ctx) {
  return ctx->ops->device ? ctx->ops->device : &rh__host_memory;
}

bool rh_on_device(const rh_ctx *ctx) { return ctx->ops->device != NULL; }

void *rh_tensor_alloc(rh_ctx *ctx, size_t bytes) {
  const rh_memory_ops *m = tensor_memory(ctx);
  void *p = m->alloc(ctx, bytes);
  if (p && m->sync(ctx) != RH_OK) { /* usable from any stream once this returns */
    m->release(ctx, p);
    p = NULL;
  }
  return p;
}

void rh_tensor_free(rh_ctx *ctx, void *tensor) {
  if (tensor) tensor_memory(ctx)->release(ctx, tensor);
}

rh_status rh_tensor_write(rh_ctx *ctx, void *tensor, const void *host, size_t bytes) {
  if (bytes && (!tensor || !host)) return RH_ERR_INVALID;
  const rh_memory_ops *m = tensor_memory(ctx);
  rh_status st = m->copy(ctx, tensor, host, bytes);
  return st == RH_OK ? m->sync(ctx) : st;
}

rh_status rh_tensor_read(rh_ctx *ctx, void *host, const void *tensor, size_t bytes) {
  if (bytes && (!tensor || !host)) return RH_ERR_INVALID;
  const rh_memory_ops *m = tensor_memory(ctx);
  rh_status st = m->copy(ctx, host, tensor, bytes);
  return st == RH_OK ? m->sync(ctx) : st;
}
