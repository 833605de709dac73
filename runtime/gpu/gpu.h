/*
 * gpu.h: the GPU pieces of the real backend, callable from C: kernels for the fusion buffer
 * (pack, unpack), the averaging scale and fp16 compression, a synthetic compute step that spends
 * FLOPs in cuBLAS GEMMs, the device memory table the runtime works in, and an NCCL communicator
 * whose waits poll NCCL's asynchronous errors and abort it after a timeout.
 *
 * Device pointers throughout.  The kernel calls enqueue their work on `stream` and return; work on
 * one stream runs in order, and a copy to the host (or cudaStreamSynchronize) waits for it.
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

/* Copies the n spans one after the other into `fused` (pack), or back out of it (unpack);
 * elements of `esz` bytes.  One launch per 64 spans. */
rh_status rh_gpu_pack(void *fused, const rh_gpu_span *spans, int n, size_t esz, void *stream);
rh_status rh_gpu_unpack(const void *fused, const rh_gpu_span *spans, int n, size_t esz,
                        void *stream);

/* buf[i] *= factor in the element's own type (int32 truncates toward zero). */
rh_status rh_gpu_scale(void *buf, size_t count, rh_dtype dtype, double factor, void *stream);
/* int32 buf[i] /= n, truncating toward zero (an exact average of integers). */
rh_status rh_gpu_divide(int32_t *buf, size_t count, int n, void *stream);

/* float32/float64 <-> fp16, rounding to nearest even. */
rh_status rh_gpu_to_half(uint16_t *dst, const void *src, size_t count, rh_dtype from, void *stream);
rh_status rh_gpu_from_half(void *dst, const uint16_t *src, size_t count, rh_dtype to, void *stream);

/* Spends `flops` floating-point operations in square fp32 GEMMs on the current device; blocks
 * until they are done. */
rh_status rh_gpu_compute(double flops, void *stream);

/* ---- kernel rates (`rehearsal-gpu kernels`, microbench.cu) ---------------------------------- */

/* Seconds of one cuBLAS GEMM of m x n x k (column-major, no transposes) on random inputs in
 * `precision` (0 fp32, 1 tf32, 2 fp16, 3 bf16; fp32 accumulation), the mean of `reps` after a
 * warm-up; blocks. */
rh_status rh_gpu_bench_gemm(int precision, int m, int n, int k, int reps, double *seconds);
/* Seconds of one device-to-device copy of `bytes`, the mean of `reps`; blocks. */
rh_status rh_gpu_bench_copy(size_t bytes, int reps, double *seconds);
/* Seconds a kernel of `kernels` empty kernels launched back to back from a stream (graph 0) or
 * replayed from a CUDA graph (graph 1); blocks. */
rh_status rh_gpu_bench_launch(int kernels, int graph, double *seconds);
/* The current device's name, SMs and CUDA versions, into buf. */
void rh_gpu_describe(char *buf, size_t len);

/* ---- the process's device ---------------------------------------------------------------- */

/* Real hardware runs one rank per process: the process binds one device and one stream, on which
 * the runtime's kernels and NCCL's collectives run in order.  Every call makes the device current
 * on the calling thread first (the runtime's requests run on threads of their own). */
rh_status rh_gpu_open(int device);
void rh_gpu_close(void);
int rh_gpu_device(void);
void *rh_gpu_stream(void); /* a cudaStream_t */
rh_status rh_gpu_bind(void); /* cudaSetDevice(the process's device) on this thread */
/* The device's memory table (internal.h): cudaMallocAsync'd memory on the process's stream. */
extern const rh_memory_ops rh_gpu_memory;

/* ---- NCCL ------------------------------------------------------------------------------------ */

/* An NCCL communicator of `size` ranks; rank 0's unique id must reach every rank (by MPI).  */
typedef struct rh_nccl rh_nccl;
rh_status rh_nccl_unique_id(void *id, size_t *len); /* id: 128 bytes */
/* Creates the communicator without blocking and waits for it up to `timeout` seconds (a rank that
 * never comes: RH_ERR_TIMEOUT, the half-made communicator aborted).  Collectives run on `stream`
 * (NULL: a stream of its own). */
rh_status rh_nccl_init(rh_nccl **out, const void *id, int rank, int size, int device,
                       void *stream, double timeout);
/* In-place collectives on device memory (op SUM, MIN or MAX); each waits up to `timeout`
 * seconds, polling NCCL's asynchronous errors; past it, or on an error, the communicator is
 * aborted (ncclCommAbort) and every later call returns RH_ERR_ABORTED. */
rh_status rh_nccl_allreduce(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, rh_op op,
                            double timeout);
rh_status rh_nccl_broadcast(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, int root,
                            double timeout);
/* buf holds every rank's block in rank order (counts[r] elements), this rank's in place. */
rh_status rh_nccl_allgatherv(rh_nccl *c, void *buf, const size_t *counts, rh_dtype dtype,
                             double timeout);
/* buf holds the ranks' count-element blocks; block `rank` (this one's) receives their reduction. */
rh_status rh_nccl_reduce_scatter(rh_nccl *c, void *buf, size_t count, rh_dtype dtype, rh_op op,
                                 int rank, double timeout);
/* What the last failure was, in NCCL's words ("" when none). */
const char *rh_nccl_error(const rh_nccl *c);
void rh_nccl_free(rh_nccl *c);

#endif
