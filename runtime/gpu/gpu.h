/*
 * gpu.h: the GPU pieces of the real backend, callable from C: kernels for the fusion buffer
 * (pack, unpack), the averaging scale and fp16 compression, a synthetic compute step that spends
 * FLOPs in cuBLAS GEMMs, and an NCCL communicator whose waits poll NCCL's asynchronous errors and
 * abort it after a timeout.  Device pointers throughout; every call takes the stream it runs on.
 */
#ifndef REHEARSAL_GPU_H
#define REHEARSAL_GPU_H

#include "internal.h"

#include <stddef.h>

/* Devices visible to this process (0 when there is no driver or no device). */
int rh_gpu_device_count(void);

/* One tensor of a fusion bucket: `count` elements at `data` (device memory). */
typedef struct rh_gpu_span {
  void *data;
  size_t count;
} rh_gpu_span;

/* Copies the n spans one after the other into `fused` (pack), or back out of it (unpack), in
 * one kernel launch; elements of `esz` bytes.  Blocks until done. */
rh_status rh_gpu_pack(void *fused, const rh_gpu_span *spans, int n, size_t esz, void *stream);
rh_status rh_gpu_unpack(const void *fused, const rh_gpu_span *spans, int n, size_t esz,
                        void *stream);

/* buf[i] *= factor in the element's own type (int32 truncates toward zero). */
rh_status rh_gpu_scale(void *buf, size_t count, rh_dtype dtype, double factor, void *stream);

/* float32/float64 <-> fp16, rounding to nearest even. */
rh_status rh_gpu_to_half(uint16_t *dst, const void *src, size_t count, rh_dtype from, void *stream);
rh_status rh_gpu_from_half(void *dst, const uint16_t *src, size_t count, rh_dtype to, void *stream);

/* Spends `flops` floating-point operations in square fp32 GEMMs on the current device. */
rh_status rh_gpu_compute(double flops, void *stream);

/* An NCCL communicator of `size` ranks; rank 0's unique id must reach every rank (by MPI).  */
typedef struct rh_nccl rh_nccl;
rh_status rh_nccl_unique_id(void *id, size_t *len); /* id: 128 bytes */
rh_status rh_nccl_init(rh_nccl **out, const void *id, int rank, int size, int device);
/* In-place allreduce of device memory (op SUM, MIN or MAX); waits up to `timeout` seconds,
 * polling NCCL's asynchronous errors; past it, or on an error, the communicator is aborted. */
rh_status rh_nccl_allreduce(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, rh_op op,
                            double timeout);
rh_status rh_nccl_broadcast(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, int root,
                            double timeout);
void rh_nccl_free(rh_nccl *c);

#endif
