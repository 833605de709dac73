/*
 * tables.h: the measurement tables `rehearsal calibrate` reads: nccl-tests' standard output and a
 * GEMM sweep of "M N K TFLOPS" rows.  Each reader names the file, line and column of a bad row on
 * stderr and returns 2; 1 when memory runs out; 0 with the rows.
 */
#ifndef REHEARSAL_TABLES_H
#define REHEARSAL_TABLES_H

#include <stdbool.h>
#include <stddef.h>

/* One row of an nccl-tests table (its out-of-place columns). */
typedef struct rh_nccl_row {
  double bytes, seconds, busbw; /* bytes, s, B/s */
} rh_nccl_row;

/* The rows of an nccl-tests output: lines whose first word is a number; the rest (the `#`
 * header and footer, NCCL's INFO lines) are not rows.  The columns are where the header line
 * ("#  size count type redop root time algbw busbw ...") puts them; without one, the row's shape
 * tells nccl-tests' layout (13 fields, 9 without the in-place ones) from the older one without
 * `root` (12 or 8).  Rows whose busbw prints as 0.00 (below the two decimals nccl-tests prints)
 * are counted in *unmeasured and left out.  *ranks: the "#  Rank ... Pid" lines seen; coll (64
 * bytes): the collective the header names ("Collective test starting: NAME"), or left as it was.
 * *out is the caller's to free. */
int rh_read_nccl_tests(const char *path, rh_nccl_row **out, int *nrows, int *ranks, char *coll,
                       int *unmeasured);

/* One GEMM of a sweep: 2 M N K FLOPs at a measured rate. */
typedef struct rh_gemm_row {
  double flops, tflops;
} rh_gemm_row;
enum { RH_GEMM_ROWS = 256 };

/* The rows of a GEMM sweep ("M N K TFLOPS", whole sizes from 1 to 1e7, a positive rate no
 * higher than peak_tflops; `#` lines and blank lines are not rows), at most RH_GEMM_ROWS. */
int rh_read_gemm_table(const char *path, double peak_tflops, rh_gemm_row rows[RH_GEMM_ROWS], int *n);

/* Measured step times in ms: one number a line (`#` lines and blank lines are not steps), or a
 * CSV whose header names a step_ms column (rehearsal's steps.csv), that column; each above 0 and
 * at most 1e9.  *out is the caller's to free. */
int rh_read_step_times(const char *path, double **out, int *n);

/* What `rehearsal-gpu kernels` measured on a GPU (presets/measured/NAME-kernels.txt), rows of
 *   gemm PRECISION M N K TFLOPS     a cuBLAS GEMM (fp32, tf32, fp16, bf16, fp8)
 *   copy BYTES GBPS                 a device-to-device copy, bytes read and written a second
 *   launch STREAM_US GRAPH_US       an empty kernel back to back, from a stream and from a graph
 * (`#` lines are its provenance).  The kernel model takes each precision's best GEMM, the copy
 * rate and the stream launch in place of the GPU preset's public figures. */
typedef struct rh_kernel_table {
  double best[5];        /* TFLOP/s: the best GEMM of each precision (rh_precision's order) */
  double copy_GBps;      /* the best copy */
  double launch_us, graph_us;
  int gemms;
} rh_kernel_table;
/* 0, or 2 with "FILE:LINE: why" in err. */
int rh_read_kernel_table(const char *path, rh_kernel_table *t, char *err, size_t errlen);

/* A whole token as a finite decimal number (no hexadecimal), or false. */
bool rh_table_number(const char *tok, double *v);

#endif
