/*
 * test_data.c: the training data.  The synthetic set must give the same bits for the same (seed,
 * index), cover and balance its classes, and put samples near their own centre; IDX files must
 * survive a write and load round trip, and each kind of bad file must be refused with its own
 * message naming the file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "data.h"
#include "scenario.h"

#include <zlib.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- synthetic -------------------------------------------------------------------------------- */

static void test_synthetic_deterministic(void **state) {
  (void)state;
  enum { IN = 21, N = 1000 };
  rh_dataset a, b, c;
  assert_int_equal(rh_dataset_synthetic(&a, N, IN, 5, 7, 0.5), RH_OK);
  assert_int_equal(rh_dataset_synthetic(&b, N, IN, 5, 7, 0.5), RH_OK);
  assert_int_equal(rh_dataset_synthetic(&c, N, IN, 5, 8, 0.5), RH_OK);
  assert_null(a.x);
  assert_null(a.y);
  assert_memory_equal(a.centres, b.centres, 5 * IN * sizeof(float));

  float xa[IN], xb[IN], xc[IN];
  int32_t ya, yb, yc;
  int labels_differ = 0;
  /* Sample i is the same whichever data set object, and whatever was asked for before it:
   * b walks the indices backwards. */
  for (long i = 0; i < 100; i++) {
    rh_dataset_get(&a, i, xa, &ya);
    rh_dataset_get(&b, N - 1 - i, xb, &yb);
    rh_dataset_get(&b, i, xb, &yb);
    assert_memory_equal(xa, xb, sizeof xa);
    assert_int_equal(ya, yb);
    rh_dataset_get(&a, i, xb, &yb);
    assert_memory_equal(xa, xb, sizeof xa);
    assert_int_equal(ya, yb);
    /* Another seed gives other features for every sample and another label for most. */
    rh_dataset_get(&c, i, xc, &yc);
    assert_memory_not_equal(xa, xc, sizeof xa);
    labels_differ += ya != yc;
  }
  assert_true(labels_differ > 60); /* 80 expected with 5 classes */

  /* Outside [0, n): zeros and label -1. */
  rh_dataset_get(&a, N, xa, &ya);
  assert_int_equal(ya, -1);
  assert_true(xa[0] == 0.0f && xa[IN - 1] == 0.0f);

  rh_dataset_free(&a);
  rh_dataset_free(&b);
  rh_dataset_free(&c);
  assert_null(a.centres);
}

static void test_synthetic_balanced(void **state) {
  (void)state;
  enum { N = 10000, K = 10, IN = 3 };
  rh_dataset d;
  assert_int_equal(rh_dataset_synthetic(&d, N, IN, K, 12345, 1.0), RH_OK);
  long counts[K] = {0};
  float x[IN];
  int32_t y;
  for (long i = 0; i < N; i++) {
    rh_dataset_get(&d, i, x, &y);
    assert_true(y >= 0 && y < K);
    counts[y]++;
  }
  /* Binomial(10000, 0.1): mean 1000, standard deviation 30; allow 5 deviations. */
  for (int k = 0; k < K; k++) {
    assert_true(counts[k] > 0);
    assert_in_range(counts[k], 850, 1150);
  }
  rh_dataset_free(&d);
}

static double distance(const float *a, const float *b, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
  return sqrt(s);
}

static void test_synthetic_structure(void **state) {
  (void)state;
  enum { N = 4000, K = 4, IN = 16 };
  const double noise = 0.8;
  rh_dataset d;
  assert_int_equal(rh_dataset_synthetic(&d, N, IN, K, 99, noise), RH_OK);
  double own[K] = {0}, other[K] = {0};
  long count[K] = {0};
  double sum = 0.0, sum_sq = 0.0;
  float x[IN];
  int32_t y;
  for (long i = 0; i < N; i++) {
    rh_dataset_get(&d, i, x, &y);
    const float *centre = d.centres + (size_t)y * IN;
    count[y]++;
    own[y] += distance(x, centre, IN);
    for (int k = 0; k < K; k++)
      if (k != y) other[y] += distance(x, d.centres + (size_t)k * IN, IN) / (K - 1);
    for (int j = 0; j < IN; j++) {
      double e = (double)x[j] - centre[j];
      sum += e;
      sum_sq += e * e;
    }
  }
  /* For every class, its samples are nearer their own centre than the others' on average. */
  for (int k = 0; k < K; k++) {
    assert_true(count[k] > 0);
    assert_true(own[k] / count[k] < 0.8 * other[k] / count[k]);
  }
  /* The noise is Gaussian with mean 0 and standard deviation noise / sqrt(1 + noise^2), the
   * scaling that gives features unit variance (64000 draws: the mean's standard error is 0.003,
   * the variance's about 0.6%). */
  double m = sum / (N * IN), sd = sqrt(sum_sq / (N * IN)), want = noise / sqrt(1 + noise * noise);
  print_message("synthetic noise: mean %.4f, standard deviation %.4f (want %.4f)\n", m, sd, want);
  assert_true(fabs(m) < 0.02);
  assert_true(fabs(sd / want - 1.0) < 0.03);
  rh_dataset_free(&d);
}

static void test_synthetic_invalid(void **state) {
  (void)state;
  rh_dataset d;
  assert_int_equal(rh_dataset_synthetic(&d, 0, 4, 2, 1, 0.5), RH_ERR_INVALID);
  assert_int_equal(rh_dataset_synthetic(&d, 10, 0, 2, 1, 0.5), RH_ERR_INVALID);
  assert_int_equal(rh_dataset_synthetic(&d, 10, 4, 0, 1, 0.5), RH_ERR_INVALID);
  assert_int_equal(rh_dataset_synthetic(&d, 10, 4, 2, 1, -0.5), RH_ERR_INVALID);
  assert_int_equal(rh_dataset_synthetic(&d, 10, 4, 2, 1, NAN), RH_ERR_INVALID);
  assert_null(d.centres);
}

/* ---- IDX files -------------------------------------------------------------------------------- */

/* A temporary directory for one test, created by setup and removed with its files by teardown.
 * The struct is owned by cmocka's state between the two. */
typedef struct tmpdir {
  char path[64];
} tmpdir;

static int make_tmpdir(void **state) {
  tmpdir *t = malloc(sizeof *t);
  if (!t) return -1;
  strcpy(t->path, "/tmp/rh_test_data_XXXXXX");
  if (!mkdtemp(t->path)) {
    free(t);
    return -1;
  }
  *state = t;
  return 0;
}

static int remove_tmpdir(void **state) {
  tmpdir *t = *state;
  DIR *dir = opendir(t->path);
  if (dir) {
    struct dirent *e;
    char file[512];
    while ((e = readdir(dir)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      snprintf(file, sizeof file, "%s/%s", t->path, e->d_name);
      unlink(file);
    }
    closedir(dir);
  }
  int rc = rmdir(t->path);
  free(t);
  return rc;
}

/* path = dir/name, in a buffer of 512 bytes. */
static void join(char *path, const tmpdir *t, const char *name) {
  snprintf(path, 512, "%s/%s", t->path, name);
}

static void put32(unsigned char *b, uint32_t v) {
  b[0] = (unsigned char)(v >> 24);
  b[1] = (unsigned char)(v >> 16);
  b[2] = (unsigned char)(v >> 8);
  b[3] = (unsigned char)v;
}

/* Writes an IDX-like file by hand: a magic number, ndims dimensions, and `data_len` data bytes
 * (value i % 256 for byte i), so that each field can be made wrong on its own. */
static void write_raw(const char *path, uint32_t magic, const uint32_t *dims, int ndims,
                      size_t data_len) {
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  unsigned char b[4];
  put32(b, magic);
  assert_int_equal(fwrite(b, 1, 4, fp), 4);
  for (int i = 0; i < ndims; i++) {
    put32(b, dims[i]);
    assert_int_equal(fwrite(b, 1, 4, fp), 4);
  }
  for (size_t i = 0; i < data_len; i++) assert_int_not_equal(fputc((int)(i % 256), fp), EOF);
  assert_int_equal(fclose(fp), 0);
}

static long file_size(const char *path) {
  FILE *fp = fopen(path, "rb");
  assert_non_null(fp);
  assert_int_equal(fseek(fp, 0, SEEK_END), 0);
  long size = ftell(fp);
  fclose(fp);
  return size;
}

static void test_idx_round_trip(void **state) {
  const tmpdir *t = *state;
  enum { N = 5, ROWS = 3, COLS = 4, PIX = ROWS * COLS };
  uint8_t pixels[N * PIX], labels[N] = {3, 0, 7, 1, 3};
  for (int i = 0; i < N * PIX; i++) pixels[i] = (uint8_t)((i * 37 + 11) % 256);
  pixels[0] = 0;
  pixels[1] = 255;
  char images_path[512], labels_path[512];
  join(images_path, t, "images-idx3-ubyte");
  join(labels_path, t, "labels-idx1-ubyte");
  assert_int_equal(rh_idx_write_images(images_path, pixels, N, ROWS, COLS), RH_OK);
  assert_int_equal(rh_idx_write_labels(labels_path, labels, N), RH_OK);

  /* The header is big-endian: magic, then the dimensions. */
  assert_int_equal(file_size(images_path), 16 + N * PIX);
  assert_int_equal(file_size(labels_path), 8 + N);
  unsigned char head[16];
  FILE *fp = fopen(images_path, "rb");
  assert_non_null(fp);
  assert_int_equal(fread(head, 1, 16, fp), 16);
  fclose(fp);
  const unsigned char expect[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, ROWS, 0, 0, 0, COLS};
  assert_memory_equal(head, expect, 16);

  rh_dataset d;
  char err[512] = "unchanged";
  assert_int_equal(rh_dataset_load_idx(&d, images_path, labels_path, err, sizeof err), RH_OK);
  assert_string_equal(err, "");
  assert_int_equal(d.n, N);
  assert_int_equal(d.inputs, PIX);
  assert_int_equal(d.classes, 8); /* max label + 1 */
  assert_null(d.centres);
  for (int i = 0; i < N * PIX; i++) {
    assert_true(d.x[i] >= 0.0f && d.x[i] <= 1.0f);
    assert_true(fabs(d.x[i] - pixels[i] / 255.0) < 1e-7);
  }
  assert_true(d.x[0] == 0.0f && d.x[1] == 1.0f);
  float x[PIX];
  int32_t y;
  for (long i = 0; i < N; i++) {
    assert_int_equal(d.y[i], labels[i]);
    rh_dataset_get(&d, i, x, &y);
    assert_int_equal(y, labels[i]);
    assert_memory_equal(x, d.x + i * PIX, sizeof x);
  }
  rh_dataset_free(&d);
  assert_null(d.x);
  assert_null(d.y);
}

/* Loads a bad pair, expecting `status` and a message that begins with "bad_path: " and contains
 * `phrase`; the message is copied to msg (512 bytes) for the distinctness check. */
static void expect_error(const char *images, const char *labels, const char *bad_path,
                         rh_status status, const char *phrase, char *msg) {
  rh_dataset d;
  char err[512] = "";
  assert_int_equal(rh_dataset_load_idx(&d, images, labels, err, sizeof err), status);
  print_message("error: %s\n", err);
  size_t len = strlen(bad_path);
  assert_true(strncmp(err, bad_path, len) == 0 && strncmp(err + len, ": ", 2) == 0);
  if (!strstr(err, phrase)) fail_msg("message \"%s\" lacks \"%s\"", err, phrase);
  /* A failed load leaves nothing allocated. */
  assert_null(d.x);
  assert_null(d.y);
  assert_int_equal(d.n, 0);
  strcpy(msg, err);
}

static void test_idx_errors(void **state) {
  const tmpdir *t = *state;
  enum { N = 5, ROWS = 3, COLS = 4 };
  char good_images[512], good_labels[512], missing[512], missing2[512], bad_magic[512];
  char truncated[512];
  char short_labels[512], two_dims[512], labels_as_images[512], trailing[512], zero_dim[512];
  join(good_images, t, "good-images");
  join(good_labels, t, "good-labels");
  join(missing, t, "no-such-images");
  join(missing2, t, "no-such-labels");
  join(bad_magic, t, "bad-magic");
  join(truncated, t, "truncated");
  join(short_labels, t, "short-labels");
  join(two_dims, t, "two-dims");
  join(labels_as_images, t, "labels-as-images");
  join(trailing, t, "trailing");
  join(zero_dim, t, "zero-dim");

  const uint32_t dims3[3] = {N, ROWS, COLS}, dims2[2] = {N, ROWS * COLS};
  const uint32_t dims1[1] = {N}, dims1_short[1] = {N - 1}, dims3_zero[3] = {N, 0, COLS};
  write_raw(good_images, 0x00000803, dims3, 3, N * ROWS * COLS);
  write_raw(good_labels, 0x00000801, dims1, 1, N);
  write_raw(bad_magic, 0x12340803, dims3, 3, N * ROWS * COLS);
  write_raw(truncated, 0x00000803, dims3, 3, N * ROWS * COLS - 7);
  write_raw(short_labels, 0x00000801, dims1_short, 1, N - 1);
  write_raw(two_dims, 0x00000802, dims2, 2, N * ROWS * COLS);
  write_raw(labels_as_images, 0x00000803, dims3, 3, N * ROWS * COLS);
  write_raw(trailing, 0x00000803, dims3, 3, N * ROWS * COLS + 3);
  write_raw(zero_dim, 0x00000803, dims3_zero, 3, 0);

  /* The good pair loads; the good files are the partners in each bad case below. */
  rh_dataset d;
  char err[512];
  assert_int_equal(rh_dataset_load_idx(&d, good_images, good_labels, err, sizeof err), RH_OK);
  rh_dataset_free(&d);

  enum { CASES = 9 };
  char msgs[CASES][512];
  expect_error(missing, good_labels, missing, RH_ERR_IO, "cannot open", msgs[0]);
  expect_error(good_images, missing2, missing2, RH_ERR_IO, "cannot open", msgs[1]);
  expect_error(bad_magic, good_labels, bad_magic, RH_ERR_INVALID, "bad magic", msgs[2]);
  expect_error(truncated, good_labels, truncated, RH_ERR_INVALID, "truncated", msgs[3]);
  expect_error(good_images, short_labels, short_labels, RH_ERR_INVALID, "4 labels, but", msgs[4]);
  expect_error(two_dims, good_labels, two_dims, RH_ERR_INVALID, "wrong number of dimensions",
               msgs[5]);
  expect_error(good_images, labels_as_images, labels_as_images, RH_ERR_INVALID,
               "wrong number of dimensions", msgs[6]);
  expect_error(trailing, good_labels, trailing, RH_ERR_INVALID, "trailing", msgs[7]);
  expect_error(zero_dim, good_labels, zero_dim, RH_ERR_INVALID, "is 0", msgs[8]);
  assert_non_null(strstr(msgs[4], good_images)); /* the mismatch names both files */
  for (int i = 0; i < CASES; i++)
    for (int j = i + 1; j < CASES; j++) assert_string_not_equal(msgs[i], msgs[j]);

  /* A short err buffer is filled without overflow, and err may be NULL. */
  char small[8];
  memset(small, 'x', sizeof small);
  assert_int_equal(rh_dataset_load_idx(&d, bad_magic, good_labels, small, 6), RH_ERR_INVALID);
  assert_int_equal(strlen(small), 5);
  assert_int_equal(small[6], 'x');
  assert_int_equal(rh_dataset_load_idx(&d, bad_magic, good_labels, NULL, 0), RH_ERR_INVALID);
}

/* gzip's copy of a file, written through zlib (the same format as Debian's dataset files). */
static void gzip_copy(const char *from, const char *to, long keep) {
  FILE *in = fopen(from, "rb");
  assert_non_null(in);
  gzFile out = gzopen(to, "wb");
  assert_non_null(out);
  int c;
  long n = 0;
  while ((c = fgetc(in)) != EOF && (keep < 0 || n < keep)) {
    assert_int_equal(gzputc(out, c), c);
    n++;
  }
  fclose(in);
  assert_int_equal(gzclose(out), Z_OK);
}

/* Debian's Fashion-MNIST is gzip'd IDX: the reader takes it through zlib, the same values as the
 * plain file; a gzip'd file cut short is truncated, as a plain one is. */
static void test_idx_gzip(void **state) {
  const tmpdir *t = *state;
  enum { N = 4, ROWS = 5, COLS = 3, PIX = ROWS * COLS };
  uint8_t pixels[N * PIX], labels[N] = {9, 2, 0, 4};
  for (int i = 0; i < N * PIX; i++) pixels[i] = (uint8_t)(i * 53 % 256);
  char im[512], lb[512], imz[512], lbz[512], cut[512];
  join(im, t, "im");
  join(lb, t, "lb");
  join(imz, t, "im.gz");
  join(lbz, t, "lb.gz");
  join(cut, t, "cut.gz");
  assert_int_equal(rh_idx_write_images(im, pixels, N, ROWS, COLS), RH_OK);
  assert_int_equal(rh_idx_write_labels(lb, labels, N), RH_OK);
  gzip_copy(im, imz, -1);
  gzip_copy(lb, lbz, -1);
  assert_true(file_size(imz) != file_size(im)); /* really compressed */
  rh_dataset a, b;
  char err[512];
  assert_int_equal(rh_dataset_load_idx(&a, im, lb, err, sizeof err), RH_OK);
  assert_int_equal(rh_dataset_load_idx(&b, imz, lbz, err, sizeof err), RH_OK);
  assert_int_equal(b.n, N);
  assert_int_equal(b.rows, ROWS);
  assert_int_equal(b.cols, COLS);
  assert_int_equal(b.channels, 1);
  assert_memory_equal(a.x, b.x, sizeof(float) * N * PIX);
  assert_memory_equal(a.y, b.y, sizeof(int32_t) * N);
  rh_dataset_free(&a);
  rh_dataset_free(&b);
  gzip_copy(im, cut, 16 + N * PIX - 5);
  expect_error(cut, lbz, cut, RH_ERR_INVALID, "truncated", err);
}

/* CIFAR-10's binary batches: records of a label byte and 3 x 32 x 32 pixels, read from every file
 * a pattern matches in sorted order; a short record, a wrong label, or no file is an error that
 * names the file. */
static void test_cifar10(void **state) {
  const tmpdir *t = *state;
  enum { REC = 3073 };
  char b1[512], b2[512], pattern[512], bad[512], badlabel[512];
  join(b1, t, "data_batch_1.bin");
  join(b2, t, "data_batch_2.bin");
  join(pattern, t, "data_batch_*.bin");
  join(bad, t, "short.bin");
  join(badlabel, t, "label.bin");
  const char *files[2] = {b1, b2};
  for (int f = 0; f < 2; f++) {
    FILE *fp = fopen(files[f], "wb");
    assert_non_null(fp);
    for (int r = 0; r < 3; r++) {
      fputc(f * 3 + r, fp); /* labels 0..5 over the two files */
      for (int i = 0; i < REC - 1; i++) fputc((f * 3 + r + i) % 256, fp);
    }
    fclose(fp);
  }
  rh_dataset d;
  char err[512];
  assert_int_equal(rh_dataset_load_cifar10(&d, pattern, err, sizeof err), RH_OK);
  assert_int_equal(d.n, 6);
  assert_int_equal(d.inputs, 3072);
  assert_int_equal(d.channels, 3);
  assert_int_equal(d.rows, 32);
  assert_int_equal(d.classes, 6);
  for (int k = 0; k < 6; k++) {
    assert_int_equal(d.y[k], k); /* data_batch_1 before data_batch_2 */
    /* pixel i of record k is (k + i) % 256, red plane first: channel-first as NCHW */
    assert_true(d.x[(size_t)k * 3072 + 1024] == (float)((k + 1024) % 256) / 255.0f);
  }
  rh_dataset_free(&d);

  FILE *fp = fopen(bad, "wb");
  for (int i = 0; i < REC + 100; i++) fputc(1, fp);
  fclose(fp);
  assert_int_equal(rh_dataset_load_cifar10(&d, bad, err, sizeof err), RH_ERR_INVALID);
  assert_non_null(strstr(err, "truncated: record 2"));
  assert_int_equal(strncmp(err, bad, strlen(bad)), 0);
  assert_null(d.x);
  fp = fopen(badlabel, "wb");
  fputc(200, fp);
  for (int i = 0; i < REC - 1; i++) fputc(0, fp);
  fclose(fp);
  assert_int_equal(rh_dataset_load_cifar10(&d, badlabel, err, sizeof err), RH_ERR_INVALID);
  assert_non_null(strstr(err, "label 200"));
  char none[512];
  join(none, t, "test_batch_*.bin");
  assert_int_equal(rh_dataset_load_cifar10(&d, none, err, sizeof err), RH_ERR_IO);
  assert_non_null(strstr(err, "cannot open"));
}

static void test_idx_write_invalid(void **state) {
  const tmpdir *t = *state;
  char path[512], nodir[512];
  join(path, t, "w");
  join(nodir, t, "no-such-dir/w");
  uint8_t b[4] = {0};
  assert_int_equal(rh_idx_write_images(path, b, -1, 2, 2), RH_ERR_INVALID);
  assert_int_equal(rh_idx_write_images(path, b, 1, 0, 2), RH_ERR_INVALID);
  assert_int_equal(rh_idx_write_labels(path, b, -1), RH_ERR_INVALID);
  assert_int_equal(rh_idx_write_images(nodir, b, 1, 2, 2), RH_ERR_IO);
  assert_int_equal(rh_idx_write_labels(nodir, b, 4), RH_ERR_IO);
}

/* A scenario's IDX labels are checked as it loads, each error at its own field and line: a label
 * not below an explicit data.classes (the CIFAR-10 reader refuses the same), a labels file one
 * short of its images or not IDX labels at all; the images' fault stays data.train_images. */
static void test_idx_labels_in_scenario(void **state) {
  const tmpdir *t = *state;
  enum { N = 8 };
  uint8_t pixels[N * 4] = {0}, good[N] = {0, 1, 2, 3, 4, 5, 6, 9}, bad[N] = {0, 1, 200, 3};
  char path[5][200];
  const char *names[5] = {"img", "good", "bad", "short", "d.yaml"};
  for (int i = 0; i < 5; i++) snprintf(path[i], sizeof path[i], "%s/%s", t->path, names[i]);
  assert_int_equal(rh_idx_write_images(path[0], pixels, N, 2, 2), RH_OK);
  assert_int_equal(rh_idx_write_labels(path[1], good, N), RH_OK);
  assert_int_equal(rh_idx_write_labels(path[2], bad, N), RH_OK);
  assert_int_equal(rh_idx_write_labels(path[3], good, N - 1), RH_OK);
  static const struct {
    const char *train, *validation, *images, *field, *phrase;
    int line;
  } cases[] = {
      {"bad", NULL, "img", "data.train_labels", "label 200 (of sample 2) is not below data.classes 10", 7},
      {"short", NULL, "img", "data.train_labels", "7 labels, but", 7},
      {"img", NULL, "img", "data.train_labels", "(expected 1 for labels)", 7},
      {"good", "bad", "img", "data.validation_labels", "label 200", 9},
      {"good", NULL, "good", "data.train_images", "(expected 3 for images)", 6},
      {"good", NULL, "img", NULL, NULL, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FILE *f = fopen(path[4], "w");
    assert_non_null(f);
    fprintf(f, "name: d\ncluster: {nodes: 1, gpus_per_node: 1, gpu: {tflops: 1}, intra: "
               "{bandwidth_GBps: 50}}\nmodel: {kind: softmax}\ndata:\n  source: idx\n"
               "  train_images: %s\n  train_labels: %s\n  classes: 10\n",
            cases[i].images, cases[i].train);
    if (cases[i].validation)
      fprintf(f, "  validation_labels: %s\n  validation_images: img\n", cases[i].validation);
    fprintf(f, "recipe: {batch_per_worker: 1, epochs: 1}\n");
    fclose(f);
    rh_scenario sc;
    char err[1024], want[400];
    rh_status st = rh_scenario_load(path[4], &sc, err, sizeof err);
    if (!cases[i].field) {
      assert_int_equal(st, RH_OK);
      assert_int_equal(sc.data.classes, 10);
      rh_scenario_free(&sc);
      continue;
    }
    assert_int_equal(st, RH_ERR_INVALID);
    snprintf(want, sizeof want, "%s:%d: %s: ", path[4], cases[i].line, cases[i].field);
    if (!strstr(err, want) || !strstr(err, cases[i].phrase))
      fail_msg("case %zu: \"%s\", expected \"%s...%s\"", i, err, want, cases[i].phrase);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_synthetic_deterministic),
      cmocka_unit_test(test_synthetic_balanced),
      cmocka_unit_test(test_synthetic_structure),
      cmocka_unit_test(test_synthetic_invalid),
      cmocka_unit_test_setup_teardown(test_idx_round_trip, make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_idx_errors, make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_idx_write_invalid, make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_idx_gzip, make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_cifar10, make_tmpdir, remove_tmpdir),
      cmocka_unit_test_setup_teardown(test_idx_labels_in_scenario, make_tmpdir, remove_tmpdir),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
