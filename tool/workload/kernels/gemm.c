/*
 * gemm.c: a GEMM's time by its shape.  cuBLAS and cuDNN split C = A B (m x n, a sum over k) into
 * tiles, one thread block each, and run them in waves over the GPU's SMs:
 *
 *     m = 300, n = 256, tiles of 128 x 128, 4 SMs:   | 0 | 1 |     wave 1: tiles 0-3
 *                                                     | 2 | 3 |     wave 2: tiles 4-5, 2 SMs idle
 *                                                     | 4 | 5 |     (the last row is 44 of 128 full)
 *
 * so a GEMM takes waves x one tile's time, and both the partial tiles and the partial last wave
 * are paid for (NVIDIA, "Matrix Multiplication Background User's Guide": tile and wave
 * quantization).  A tile's time is its 2 tm tn k FLOPs at the SM's share of the best rate a
 * cuBLAS GEMM reaches (gemm_efficiency x peak / SMs), less for small tiles, which reuse each value
 * they load fewer times: their rate scales with tm tn / (tm + tn) up to a 128 x 128 tile's.  The
 * library picks the tile, and a split of k across more blocks (split-K, its partial sums then
 * added in memory), that finish first.  A grouped convolution whose groups are narrower than a
 * tensor-core tile may instead run as a direct convolution on the CUDA cores, each output its own
 * short sum, at their best rate (cuDNN's grouped and depthwise kernels).  No kernel is faster than
 * its bytes at the GPU's memory bandwidth (the caller's floor).
 */
#include "kernels.h"

#include <math.h>

typedef struct tile {
  double m, n;
} tile;

/* tensor-core tiles (CUTLASS's and cuBLAS's usual threadblock shapes), then SIMT ones */
static const tile tc_tiles[] = {{256, 128}, {128, 256}, {128, 128}, {128, 64}, {64, 128}, {64, 64}};
static const tile simt_tiles[] = {{128, 128}, {128, 64}, {64, 64}, {64, 32}, {32, 32}};

static double efficiency(const rh_kernel_gpu *g) {
  return g->gemm_efficiency > 0 ? g->gemm_efficiency : 1;
}

/* the rate of a tile relative to a 128 x 128 one: values reused per value loaded */
static double tile_rate(tile t) {
  double reuse = t.m * t.n / (t.m + t.n);
  return fmin(1, reuse / 64);
}

/* Seconds of `count` GEMMs of m x n x k on tiles t at `rate` FLOP/s per SM, k split in `split`. */
static double tiled(const rh_kernel_gpu *g, tile t, double rate, double m, double n, double k,
                    double count, int split) {
  double tiles = ceil(m / t.m) * ceil(n / t.n) * count * split;
  double waves = ceil(tiles / g->sms);
  double one = 2 * t.m * t.n * ceil(k / split) / (rate * tile_rate(t));
  double reduce = split > 1 ? 2.0 * 4 * m * n * count * split / g->memory_bw : 0;
  return waves * one + reduce;
}

/* The fastest tile and split of k for a GEMM at `peak` FLOP/s. */
static double best_tiling(const rh_kernel_gpu *g, const tile *tiles, int ntiles, double peak,
                          double m, double n, double k, double count) {
  double rate = peak * efficiency(g) / g->sms;
  double best = INFINITY;
  for (int i = 0; i < ntiles; i++)
    for (int split = 1; split <= 16 && (split == 1 || k / split >= 256); split++)
      best = fmin(best, tiled(g, tiles[i], rate, m, n, k, count, split));
  return best;
}

double rh_gemm_seconds(const rh_kernel_gpu *g, double m, double n, double k, double count) {
  if (m <= 0 || n <= 0 || k <= 0 || count <= 0) return 0;
  if (g->sms <= 0) return 2 * m * n * k * count / (g->peak * efficiency(g)); /* no waves known */
  int ntc = (int)(sizeof tc_tiles / sizeof tc_tiles[0]);
  int nsimt = (int)(sizeof simt_tiles / sizeof simt_tiles[0]);
  if (!g->tensor_cores) {
    double t = best_tiling(g, simt_tiles, nsimt, g->peak, m, n, k, count);
    if (count > 1 && n < 64) t = fmin(t, 2 * m * n * k * count / (g->peak * efficiency(g)));
    return t;
  }
  double t = best_tiling(g, tc_tiles, ntc, g->peak, m, n, k, count);
  if (count > 1 && n < 64 && g->simt_peak > 0) /* narrow groups: a direct convolution */
    t = fmin(t, 2 * m * n * k * count / (g->simt_peak * (g->simt_efficiency > 0 ? g->simt_efficiency : efficiency(g))));
  return t;
}
