/*
 * data.c: the synthetic data set and the IDX reader and writers (see data.h).  A synthetic sample
 * is a pure function of (seed, index): its label is a hash of the pair and its features come from
 * a splitmix64 stream keyed by the pair through Box-Muller, so nothing per sample is stored and
 * every rank computes the same bits.  IDX files are checked field by field before use.
 */
#include "data.h"

#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- synthetic -------------------------------------------------------------------------------- */

/* The splitmix64 finaliser: a bijective mix of 64 bits. */
static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* splitmix64: one output per call from a 64-bit state. */
static uint64_t next64(uint64_t *state) {
  *state += 0x9e3779b97f4a7c15ULL;
  return mix64(*state);
}

/* A double uniform in (0, 1]: never 0, so that its logarithm is finite. */
static double uniform_open0(uint64_t *state) {
  return (double)((next64(state) >> 11) + 1) * 0x1p-53;
}

/* A double uniform in [0, 1). */
static double uniform01(uint64_t *state) {
  return (double)(next64(state) >> 11) * 0x1p-53;
}

/* Fills out[0..n) with standard normal values by Box-Muller, two per pair of uniforms. */
static void normals(uint64_t *state, double *out, int n) {
  const double two_pi = 6.283185307179586476925286766559;
  for (int i = 0; i < n; i += 2) {
    double r = sqrt(-2.0 * log(uniform_open0(state)));
    double theta = two_pi * uniform01(state);
    out[i] = r * cos(theta);
    if (i + 1 < n) out[i + 1] = r * sin(theta);
  }
}

/* Distinct constants keep the centre stream, the label hash and the feature stream apart. */
#define CENTRE_KEY 0x6a09e667f3bcc908ULL
#define LABEL_KEY 0xbb67ae8584caa73bULL
#define SAMPLE_KEY 0x3c6ef372fe94f82bULL

/* The 64-bit key of sample `index` under `seed`. */
static uint64_t sample_key(uint64_t seed, long index) {
  return mix64(mix64(seed ^ SAMPLE_KEY) + (uint64_t)index * 0x9e3779b97f4a7c15ULL);
}

rh_status rh_dataset_synthetic(rh_dataset *d, long n, int inputs, int classes, uint64_t seed,
                               double noise) {
  if (!d) return RH_ERR_INVALID;
  *d = (rh_dataset){0};
  if (n <= 0 || inputs <= 0 || classes <= 0 || !(noise >= 0.0) || !isfinite(noise))
    return RH_ERR_INVALID;
  /* The centres are owned by d and released by rh_dataset_free. */
  size_t count = (size_t)classes * (size_t)inputs;
  float *centres = malloc(count * sizeof *centres);
  double *z = malloc((size_t)inputs * sizeof *z);
  if (!centres || !z) {
    free(centres);
    free(z);
    return RH_ERR_NOMEM;
  }
  /* Each centre coordinate is standard normal, so two centres are about sqrt(2 * inputs) apart
   * before the scaling by 1 / sqrt(1 + noise^2), which gives every feature unit variance, as
   * normalised images have, whatever the noise. */
  double scale = 1.0 / sqrt(1.0 + noise * noise);
  uint64_t state = mix64(seed ^ CENTRE_KEY);
  for (int c = 0; c < classes; c++) {
    normals(&state, z, inputs);
    for (int i = 0; i < inputs; i++)
      centres[(size_t)c * (size_t)inputs + (size_t)i] = (float)(z[i] * scale);
  }
  free(z);
  *d = (rh_dataset){.n = n, .inputs = inputs, .classes = classes, .channels = 1, .rows = 1,
                    .cols = inputs, .seed = seed, .noise = noise, .centres = centres};
  return RH_OK;
}

/* Generates synthetic sample `index`.  Box-Muller values are produced two at a time, so the
 * loop keeps the spare one instead of needing a scratch array. */
static void synthetic_get(const rh_dataset *d, long index, float *x, int32_t *y) {
  uint64_t key = sample_key(d->seed, index);
  int32_t label = (int32_t)(mix64(key ^ LABEL_KEY) % (uint64_t)d->classes);
  const float *centre = d->centres + (size_t)label * (size_t)d->inputs;
  uint64_t state = key;
  double pair[2];
  for (int i = 0; i < d->inputs; i++) {
    if (i % 2 == 0) normals(&state, pair, 2);
    x[i] = (float)((double)centre[i] + d->noise / sqrt(1.0 + d->noise * d->noise) * pair[i % 2]);
  }
  *y = label;
}

rh_status rh_dataset_materialize(rh_dataset *d) {
  if (!d || d->x) return RH_OK;
  float *x = malloc((size_t)d->n * (size_t)d->inputs * sizeof *x);
  int32_t *y = malloc((size_t)d->n * sizeof *y);
  if (!x || !y) {
    free(x);
    free(y);
    return RH_ERR_NOMEM;
  }
  for (long i = 0; i < d->n; i++) synthetic_get(d, i, x + (size_t)i * (size_t)d->inputs, &y[i]);
  d->x = x; /* owned by d from now on, like a loaded set's */
  d->y = y;
  return RH_OK;
}

void rh_dataset_get(const rh_dataset *d, long index, float *x, int32_t *y) {
  /* Outside [0, n) is a caller error: give zeros and label -1 rather than reading past arrays. */
  if (index < 0 || index >= d->n) {
    memset(x, 0, (size_t)d->inputs * sizeof *x);
    *y = -1;
    return;
  }
  if (!d->x) {
    synthetic_get(d, index, x, y);
    return;
  }
  memcpy(x, d->x + (size_t)index * (size_t)d->inputs, (size_t)d->inputs * sizeof *x);
  *y = d->y[index];
}

void rh_dataset_free(rh_dataset *d) {
  if (!d) return;
  free(d->centres);
  free(d->x);
  free(d->y);
  *d = (rh_dataset){0};
}

/* ---- IDX reading ------------------------------------------------------------------------------ */

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u

/* Writes "PATH: message" into err (when there is room) and returns status. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static rh_status fail(char *err, size_t errlen, rh_status status, const char *path,
                      const char *fmt, ...) {
  if (err && errlen > 0) {
    int used = snprintf(err, errlen, "%s: ", path);
    if (used >= 0 && (size_t)used < errlen) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + used, errlen - (size_t)used, fmt, ap);
      va_end(ap);
    }
  }
  return status;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* One IDX file of unsigned bytes read whole: dims[0..ndims) from the header and the data, owned
 * by the caller (free(data)). */
typedef struct idx_file {
  uint32_t dims[3];
  uint64_t count; /* product of the dimensions */
  unsigned char *data;
} idx_file;

/* Opens a data file, plain or gzip'd (zlib reads both), with a large read buffer. */
static rh_status open_data(const char *path, gzFile *gz, char *err, size_t errlen) {
  errno = 0;
  *gz = gzopen(path, "rb");
  if (!*gz)
    return fail(err, errlen, RH_ERR_IO, path, "cannot open: %s",
                errno ? strerror(errno) : "out of memory");
  gzbuffer(*gz, 1 << 17);
  return RH_OK;
}

/* Reads and checks the header of an IDX file open in gz whose magic must be `magic` (type byte
 * 0x08, ndims in the low byte): f's dims and count. */
static rh_status idx_head(gzFile gz, const char *path, uint32_t magic, const char *what,
                         idx_file *f, char *err, size_t errlen) {
  int ndims = (int)(magic & 0xffu);
  unsigned char head[16];
  size_t head_len = 4 + 4 * (size_t)ndims;
  int got_head = gzread(gz, head, (unsigned)head_len);
  if (got_head < 4)
    return fail(err, errlen, RH_ERR_INVALID, path, "too short for an IDX header (%d bytes)",
                got_head < 0 ? 0 : got_head);
  uint32_t got = be32(head);
  if ((got & 0xffffff00u) != (magic & 0xffffff00u))
    return fail(err, errlen, RH_ERR_INVALID, path,
                "bad magic number 0x%08x (expected 0x%08x for IDX %s of unsigned bytes)", got,
                magic, what);
  if ((got & 0xffu) != (uint32_t)ndims)
    return fail(err, errlen, RH_ERR_INVALID, path,
                "wrong number of dimensions %u in the magic number 0x%08x (expected %d for %s)",
                got & 0xffu, got, ndims, what);
  if ((size_t)got_head < head_len)
    return fail(err, errlen, RH_ERR_INVALID, path,
                "truncated header: %d bytes, expected at least %zu", got_head, head_len);
  f->count = 1;
  for (int i = 0; i < ndims; i++) {
    f->dims[i] = be32(head + 4 + 4 * i);
    if (f->dims[i] == 0) return fail(err, errlen, RH_ERR_INVALID, path, "dimension %d is 0", i + 1);
    /* Each dimension is below 2^32, so the product of three stays below 2^96; check as it grows. */
    if (f->count > UINT64_MAX / f->dims[i])
      return fail(err, errlen, RH_ERR_INVALID, path, "dimensions too large");
    f->count *= f->dims[i];
  }
  return RH_OK;
}

/* Reads and checks an IDX file whose magic must be `magic` (type byte 0x08, ndims in the low
 * byte), plain or gzip'd (zlib reads both).  The data must be exactly the product of the
 * dimensions: fewer bytes are a truncated file, more are trailing bytes. */
static rh_status idx_read(const char *path, uint32_t magic, const char *what, idx_file *f,
                          char *err, size_t errlen) {
  *f = (idx_file){0};
  gzFile gz;
  rh_status opened = open_data(path, &gz, err, errlen);
  if (opened != RH_OK) return opened;

  rh_status st = idx_head(gz, path, magic, what, f, err, errlen);
  if (st != RH_OK) goto done;
  /* memory grows with the data that come, so that a header claiming more than the file holds
   * (a gzip'd file's size is not known before it is read) takes no more than the file's bytes */
  if (f->count > SIZE_MAX) {
    st = fail(err, errlen, RH_ERR_NOMEM, path, "too large to load (%llu bytes)",
              (unsigned long long)f->count);
    goto done;
  }
  uint64_t have = 0, cap = 0;
  for (;;) {
    if (have == cap) {
      if (cap == f->count) break;
      uint64_t grown = cap ? 2 * cap : (uint64_t)1 << 20;
      if (grown > f->count) grown = f->count;
      unsigned char *bigger = realloc(f->data, (size_t)grown);
      if (!bigger) {
        st = fail(err, errlen, RH_ERR_NOMEM, path, "out of memory for %llu bytes",
                  (unsigned long long)grown);
        goto done;
      }
      f->data = bigger;
      cap = grown;
    }
    uint64_t room = cap - have;
    int n = gzread(gz, f->data + have, room > (1u << 30) ? (1u << 30) : (unsigned)room);
    if (n <= 0) break;
    have += (uint64_t)n;
  }
  int zerr = Z_OK;
  const char *zmsg = gzerror(gz, &zerr);
  if (zerr != Z_OK && zerr != Z_STREAM_END && zerr != Z_BUF_ERROR) {
    st = fail(err, errlen, zerr == Z_ERRNO ? RH_ERR_IO : RH_ERR_INVALID, path,
              "read error after %llu bytes of data: %s", (unsigned long long)have,
              zerr == Z_ERRNO ? strerror(errno) : zmsg);
    goto done;
  }
  if (have < f->count) {
    st = fail(err, errlen, RH_ERR_INVALID, path,
              "truncated: %llu bytes of data after the header, expected %llu",
              (unsigned long long)have, (unsigned long long)f->count);
    goto done;
  }
  unsigned char extra[64];
  int more = gzread(gz, extra, sizeof extra);
  if (more > 0) {
    st = fail(err, errlen, RH_ERR_INVALID, path,
              "more than %llu bytes of data after the header (trailing bytes)",
              (unsigned long long)f->count);
    goto done;
  }
done:
  gzclose(gz);
  if (st != RH_OK) {
    free(f->data);
    *f = (idx_file){0};
  }
  return st;
}

rh_status rh_idx_check_labels(const char *images, const char *labels, int classes, int *which,
                              char *err, size_t errlen) {
  if (err && errlen > 0) err[0] = '\0';
  *which = 0;
  gzFile gz;
  idx_file im = {0}, lb;
  rh_status st = open_data(images, &gz, err, errlen);
  if (st != RH_OK) return st;
  st = idx_head(gz, images, IDX_IMAGES, "images", &im, err, errlen);
  gzclose(gz);
  if (st != RH_OK) return st;
  *which = 1;
  st = idx_read(labels, IDX_LABELS, "labels", &lb, err, errlen);
  if (st != RH_OK) return st;
  if (lb.dims[0] != im.dims[0])
    st = fail(err, errlen, RH_ERR_INVALID, labels, "%u labels, but %s holds %u images",
              lb.dims[0], images, im.dims[0]);
  for (uint64_t i = 0; st == RH_OK && classes > 0 && i < lb.count; i++)
    if (lb.data[i] >= classes)
      st = fail(err, errlen, RH_ERR_INVALID, labels,
                "label %d (of sample %llu) is not below data.classes %d", lb.data[i],
                (unsigned long long)i, classes);
  free(lb.data);
  return st;
}

rh_status rh_dataset_load_idx(rh_dataset *d, const char *images, const char *labels, char *err,
                              size_t errlen) {
  if (!d || !images || !labels) return RH_ERR_INVALID;
  *d = (rh_dataset){0};
  if (err && errlen > 0) err[0] = '\0';

  idx_file im, lb;
  rh_status st = idx_read(images, IDX_IMAGES, "images", &im, err, errlen);
  if (st != RH_OK) return st;
  st = idx_read(labels, IDX_LABELS, "labels", &lb, err, errlen);
  if (st != RH_OK) {
    free(im.data);
    return st;
  }
  float *x = NULL;
  int32_t *y = NULL;
  uint64_t pixels = (uint64_t)im.dims[1] * im.dims[2];
  if (lb.dims[0] != im.dims[0]) {
    st = fail(err, errlen, RH_ERR_INVALID, labels, "%u labels, but %s holds %u images",
              lb.dims[0], images, im.dims[0]);
    goto done;
  }
  if (pixels > (uint64_t)INT32_MAX) {
    st = fail(err, errlen, RH_ERR_INVALID, images, "images too large (%u x %u)", im.dims[1],
              im.dims[2]);
    goto done;
  }
#if LONG_MAX < UINT32_MAX
  /* Where long has 32 bits, a count above LONG_MAX does not fit in d->n. */
  if (im.dims[0] > (uint32_t)LONG_MAX) {
    st = fail(err, errlen, RH_ERR_INVALID, images, "too many images (%u)", im.dims[0]);
    goto done;
  }
#endif
  /* x and y become owned by d, released by rh_dataset_free. */
  x = malloc((size_t)im.count * sizeof *x);
  y = malloc((size_t)lb.count * sizeof *y);
  if (!x || !y) {
    st = fail(err, errlen, RH_ERR_NOMEM, images, "out of memory");
    goto done;
  }
  for (uint64_t i = 0; i < im.count; i++) x[i] = (float)im.data[i] / 255.0f;
  int max_label = 0;
  for (uint64_t i = 0; i < lb.count; i++) {
    y[i] = lb.data[i];
    if (y[i] > max_label) max_label = y[i];
  }
  *d = (rh_dataset){.n = (long)im.dims[0], .inputs = (int)pixels, .classes = max_label + 1,
                    .channels = 1, .rows = (int)im.dims[1], .cols = (int)im.dims[2], .x = x, .y = y};
  x = NULL;
  y = NULL;
done:
  free(x);
  free(y);
  free(im.data);
  free(lb.data);
  return st;
}

/* ---- CIFAR-10's binary format ----------------------------------------------------------------- */

/* A record: the label byte, then 1024 red, 1024 green and 1024 blue bytes, rows of 32. */
#define CIFAR_SIDE 32
#define CIFAR_PIXELS (3 * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR_RECORD (1 + CIFAR_PIXELS)

/* Appends the records of one file (plain or gzip'd) to *d's x and y (grown as they come). */
static rh_status cifar_file(const char *path, rh_dataset *d, long *cap, char *err, size_t errlen) {
  gzFile gz;
  rh_status opened = open_data(path, &gz, err, errlen);
  if (opened != RH_OK) return opened;
  rh_status st = RH_OK;
  unsigned char rec[CIFAR_RECORD];
  long records = 0;
  for (;;) {
    int n = gzread(gz, rec, CIFAR_RECORD);
    if (n == 0) {
      int zerr;
      const char *msg = gzerror(gz, &zerr);
      if (zerr != Z_OK && zerr != Z_STREAM_END) /* a gzip stream cut short, even between records */
        st = fail(err, errlen, RH_ERR_INVALID, path, "truncated after %ld records: %s", records,
                  msg);
      break;
    }
    if (n < 0) {
      int zerr;
      const char *msg = gzerror(gz, &zerr);
      st = fail(err, errlen, RH_ERR_IO, path, "read error after %ld records: %s", records,
                zerr == Z_ERRNO ? strerror(errno) : msg);
      break;
    }
    if (n < CIFAR_RECORD) {
      st = fail(err, errlen, RH_ERR_INVALID, path,
                "truncated: record %ld has %d of its %d bytes (a label byte and 3 x 32 x 32 "
                "pixels)", records + 1, n, CIFAR_RECORD);
      break;
    }
    if (rec[0] > 9) {
      st = fail(err, errlen, RH_ERR_INVALID, path,
                "record %ld: label %d (CIFAR-10's labels are 0-9; CIFAR-100's records are 3074 "
                "bytes and not read here)", records + 1, rec[0]);
      break;
    }
    if (d->n == *cap) {
      long grown = *cap ? 2 * *cap : 10000;
      float *x = realloc(d->x, (size_t)grown * CIFAR_PIXELS * sizeof *x);
      if (x) d->x = x;
      int32_t *y = x ? realloc(d->y, (size_t)grown * sizeof *y) : NULL;
      if (y) d->y = y;
      if (!x || !y) {
        st = fail(err, errlen, RH_ERR_NOMEM, path, "out of memory at record %ld", records + 1);
        break;
      }
      *cap = grown;
    }
    float *x = d->x + (size_t)d->n * CIFAR_PIXELS;
    for (int i = 0; i < CIFAR_PIXELS; i++) x[i] = (float)rec[1 + i] / 255.0f;
    d->y[d->n] = rec[0];
    if (rec[0] + 1 > d->classes) d->classes = rec[0] + 1;
    d->n++;
    records++;
  }
  if (st == RH_OK && records == 0)
    st = fail(err, errlen, RH_ERR_INVALID, path, "empty: no CIFAR-10 record");
  gzclose(gz);
  return st;
}

rh_status rh_dataset_load_cifar10(rh_dataset *d, const char *pattern, char *err, size_t errlen) {
  if (!d || !pattern) return RH_ERR_INVALID;
  *d = (rh_dataset){0};
  if (err && errlen > 0) err[0] = '\0';
  glob_t g;
  int rc = glob(pattern, 0, NULL, &g);
  if (rc != 0) {
    if (rc != GLOB_NOMATCH) globfree(&g);
    return fail(err, errlen, RH_ERR_IO, pattern, "cannot open: %s",
                rc == GLOB_NOMATCH ? "no such file" : "the pattern cannot be read");
  }
  rh_status st = RH_OK;
  long cap = 0;
  /* glob sorts its matches: data_batch_1.bin .. data_batch_5.bin in order */
  for (size_t i = 0; i < g.gl_pathc && st == RH_OK; i++)
    st = cifar_file(g.gl_pathv[i], d, &cap, err, errlen);
  globfree(&g);
  if (st != RH_OK) {
    rh_dataset_free(d);
    return st;
  }
  d->inputs = CIFAR_PIXELS;
  d->channels = 3;
  d->rows = d->cols = CIFAR_SIDE;
  return RH_OK;
}

void rh_dataset_normalize(rh_dataset *d, double mean, double std) {
  if (!d->x || !(std > 0)) return;
  size_t n = (size_t)d->n * (size_t)d->inputs;
  for (size_t i = 0; i < n; i++) d->x[i] = (float)(((double)d->x[i] - mean) / std);
}

/* ---- IDX writing ------------------------------------------------------------------------------ */

static void put_be32(unsigned char *b, uint32_t v) {
  b[0] = (unsigned char)(v >> 24);
  b[1] = (unsigned char)(v >> 16);
  b[2] = (unsigned char)(v >> 8);
  b[3] = (unsigned char)v;
}

/* Writes an IDX header with ndims dimensions, then count data bytes. */
static rh_status idx_write(const char *path, uint32_t magic, const uint32_t *dims, int ndims,
                           const uint8_t *data, size_t count) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return RH_ERR_IO;
  unsigned char head[16];
  put_be32(head, magic);
  for (int i = 0; i < ndims; i++) put_be32(head + 4 + 4 * i, dims[i]);
  size_t head_len = 4 + 4 * (size_t)ndims;
  int ok = fwrite(head, 1, head_len, fp) == head_len;
  if (ok && count > 0) ok = fwrite(data, 1, count, fp) == count;
  if (fclose(fp) != 0) ok = 0;
  return ok ? RH_OK : RH_ERR_IO;
}

rh_status rh_idx_write_images(const char *path, const uint8_t *pixels, long n, int rows, int cols) {
  if (!path || n < 0 || rows <= 0 || cols <= 0 || (n > 0 && !pixels)) return RH_ERR_INVALID;
  if ((unsigned long)n > UINT32_MAX) return RH_ERR_INVALID;
  uint32_t dims[3] = {(uint32_t)n, (uint32_t)rows, (uint32_t)cols};
  return idx_write(path, IDX_IMAGES, dims, 3, pixels, (size_t)n * (size_t)rows * (size_t)cols);
}

rh_status rh_idx_write_labels(const char *path, const uint8_t *labels, long n) {
  if (!path || n < 0 || (n > 0 && !labels)) return RH_ERR_INVALID;
  if ((unsigned long)n > UINT32_MAX) return RH_ERR_INVALID;
  uint32_t dims[1] = {(uint32_t)n};
  return idx_write(path, IDX_LABELS, dims, 1, labels, (size_t)n);
}
