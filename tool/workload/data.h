/*
 * data.h: training data.  A deterministic synthetic, class-structured data set of any size (each
 * sample is computed from the seed and its index, so nothing is stored and every rank sees the
 * same sample i), and loaders for the IDX files of MNIST and Fashion-MNIST (plain or gzip'd) and CIFAR-10's
 * binary batches.
 */
#ifndef REHEARSAL_DATA_H
#define REHEARSAL_DATA_H

#include "rehearsal.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rh_dataset {
  long n;          /* samples */
  int inputs;      /* features per sample */
  int classes;
  int channels, rows, cols; /* images: inputs = channels x rows x cols (synthetic: 1 x 1 x inputs) */
  /* synthetic */
  uint64_t seed;
  double noise;    /* standard deviation of the noise around each class centre */
  float *centres;  /* classes x inputs, owned */
  /* loaded from IDX (NULL for synthetic) */
  float *x;        /* n x inputs, scaled to [0, 1], owned */
  int32_t *y;      /* n labels, owned */
} rh_dataset;

/* A synthetic set: class of sample i is a deterministic function of (seed, i), balanced over
 * classes in expectation; features = (class centre + noise x Gaussian from (seed, i)) /
 * sqrt(1 + noise^2), so that every feature has unit variance, as normalised images have. */
rh_status rh_dataset_synthetic(rh_dataset *d, long n, int inputs, int classes, uint64_t seed,
                               double noise);

/* Loads IDX images (magic 0x00000803, unsigned bytes, n x rows x cols) and labels (magic
 * 0x00000801).  On a bad file returns RH_ERR_IO or RH_ERR_INVALID with a message naming the file
 * and what is wrong in err.  `classes` becomes max label + 1. */
rh_status rh_dataset_load_idx(rh_dataset *d, const char *images, const char *labels, char *err,
                              size_t errlen);

/* Checks IDX labels before a run: the images' header (their count), then the labels file whole,
 * one label an image, each below `classes` (0: any).  RH_OK; else a message naming the file in
 * err, and *which: 0 where the images are at fault, 1 where the labels are. */
rh_status rh_idx_check_labels(const char *images, const char *labels, int classes, int *which,
                              char *err, size_t errlen);

/* Loads CIFAR-10's binary batches (data_batch_1.bin ...; plain or gzip'd): every file the glob
 * pattern matches, in sorted order, each a run of 3073-byte records (a label byte, then the
 * red, green and blue planes of 32 x 32).  Pixels are scaled to [0, 1], channels first.  A
 * pattern matching nothing, a truncated record or a label above 99 is an error naming the file. */
rh_status rh_dataset_load_cifar10(rh_dataset *d, const char *pattern, char *err, size_t errlen);

/* x = (x - mean) / std for every feature of a loaded set (torchvision's Normalize). */
void rh_dataset_normalize(rh_dataset *d, double mean, double std);

/* Computes every sample of a synthetic set once and keeps them (n x inputs floats), so that
 * later reads are copies; the samples are the same bits as before.  No-op for loaded sets. */
rh_status rh_dataset_materialize(rh_dataset *d);

/* Copies sample `index` (0 <= index < n) into x (inputs floats) and *y. */
void rh_dataset_get(const rh_dataset *d, long index, float *x, int32_t *y);

void rh_dataset_free(rh_dataset *d);

/* Writes IDX files (for tests and for users converting data): images are n x rows x cols bytes. */
rh_status rh_idx_write_images(const char *path, const uint8_t *pixels, long n, int rows, int cols);
rh_status rh_idx_write_labels(const char *path, const uint8_t *labels, long n);

#endif
