/*
 * tables.c: the readers of the measurement tables `rehearsal calibrate` fits (see tables.h).
 */
#include "tables.h"
#include "scenario.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

bool rh_table_number(const char *tok, double *v) {
  char *end;
  errno = 0;
  *v = strtod(tok, &end);
  return tok[0] && !*end && !errno && isfinite(*v) && strncasecmp(tok, "0x", 2) != 0 &&
         strncasecmp(tok, "-0x", 3) != 0;
}

/* Splits line into at most max tokens in place; returns how many. */
static int tokens(char *line, char **tok, int max) {
  int n = 0;
  for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t && n < max;
       t = strtok_r(NULL, " \t\r\n", &save))
    tok[n++] = t;
  return n;
}

/* The table file, open for reading when it is a regular file; else NULL, with the reason said. */
static FILE *open_table(const char *path) {
  FILE *f;
  struct stat st;
  int opened = rh_open_regular(path, "r", &f, &st);
  if (opened != 0)
    fprintf(stderr, "rehearsal calibrate: %s: cannot read: %s%s\n", path,
            opened > 0 ? rh_not_regular(&st) : strerror(errno),
            opened > 0 ? ", not a regular file" : "");
  return f;
}

/* Where a row's columns are: nccl-tests' own layout since 2.0 has `root` after `redop`; older
 * versions (and many published logs) have none, with `error` (a float) in place of `#wrong`. */
typedef struct nccl_layout {
  int time, algbw, busbw; /* token indexes */
  int fields;             /* of a whole row, in-place columns included */
  bool header;            /* found from the header line, not guessed from the row's shape */
} nccl_layout;

static const nccl_layout with_root = {5, 6, 7, 13, false}, without_root = {4, 5, 6, 12, false};

/* The columns a `#  size count type ...` header line names, into *lay; false when the line is not
 * such a header (it names no time, algbw and busbw after size). */
static bool header_layout(char *p, nccl_layout *lay) {
  char *tok[32];
  while (*p == '#') p++;
  int k = tokens(p, tok, 32);
  if (k < 4 || strcmp(tok[0], "size") != 0) return false;
  int time = -1, algbw = -1, busbw = -1;
  for (int i = 1; i < k; i++) {
    if (time < 0 && strcmp(tok[i], "time") == 0) time = i;
    else if (algbw < 0 && strcmp(tok[i], "algbw") == 0) algbw = i;
    else if (busbw < 0 && strcmp(tok[i], "busbw") == 0) busbw = i;
  }
  if (time < 0 || algbw < 0 || busbw < 0) return false;
  *lay = (nccl_layout){time, algbw, busbw, k, true};
  return true;
}

/* The column a row of k fields lacks in layout lay, or "the number of fields" when it has a count
 * neither the whole row nor its out-of-place half has; NULL when its shape is right. */
static const char *row_shape(const nccl_layout *lay, int k) {
  static const char *const cols[] = {"size", "count", "type", "redop", "root", "time",
                                     "algbw", "busbw", "#wrong"};
  /* a header may name the three in any order: the row must reach the last of them */
  int last = lay->busbw;
  if (lay->time > last) last = lay->time;
  if (lay->algbw > last) last = lay->algbw;
  if (k >= last + 2)
    return k == lay->fields || k == last + 2 ? NULL : "the number of fields";
  if (!lay->header) return cols[k < 8 ? k : 8];
  return k <= lay->time    ? "time"
         : k <= lay->algbw ? "algbw"
         : k <= lay->busbw ? "busbw"
                           : "the field after busbw";
}

/* The first column of a row of k fields (tok) that is missing or not a number as it must be,
 * or NULL with its time (us) and busbw (GB/s). */
static const char *row_problem(const nccl_layout *lay, char **tok, int k, double *time,
                               double *busbw) {
  const char *shape = row_shape(lay, k);
  if (shape) return shape;
  double size, count, algbw;
  rh_table_number(tok[0], &size);
  if (!(size >= 1 && size <= 1e15)) return "size";
  if (!rh_table_number(tok[lay->time], time) || !(*time > 0)) return "time";
  if (!rh_table_number(tok[lay->algbw], &algbw) || !(algbw >= 0)) return "algbw";
  if (!rh_table_number(tok[lay->busbw], busbw) || !(*busbw >= 0)) return "busbw";
  if (!rh_table_number(tok[1], &count) || count < 0) return "count";
  return NULL;
}

int rh_read_nccl_tests(const char *path, rh_nccl_row **out, int *nrows, int *ranks, char *coll,
                       int *unmeasured) {
  FILE *f = open_table(path);
  if (!f) return 2;
  char *line = NULL;
  size_t cap_line = 0;
  int n = 0, cap = 0, lineno = 0, rc = 0;
  rh_nccl_row *rows = NULL;
  nccl_layout header = {0};
  *ranks = 0;
  *unmeasured = 0;
  while (rc == 0 && getline(&line, &cap_line, f) > 0) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#') {
      if (strstr(p, "Rank") && strstr(p, "Pid")) ++*ranks;
      const char *start = strstr(p, "Collective test starting:");
      if (start) sscanf(start + strlen("Collective test starting:"), " %63s", coll);
      header_layout(p, &header);
      continue;
    }
    char *tok[16];
    int k = tokens(p, tok, 16);
    double size;
    if (k == 0 || !rh_table_number(tok[0], &size)) continue; /* not a row: NCCL's INFO lines, text */
    /* size count type redop [root] time algbw busbw #wrong|error [the in-place four]: the header
     * says which; without one, the row's shape (9 or 13 fields with root, 8 or 12 without) */
    nccl_layout lay = header.header ? header : k == 8 || k == 12 ? without_root : with_root;
    double time = 0, busbw = 0;
    const char *bad = row_problem(&lay, tok, k, &time, &busbw);
    if (bad) {
      fprintf(stderr,
              "rehearsal calibrate: %s:%d: %s: expected an nccl-tests row \"size count type redop "
              "root time algbw busbw #wrong ...\" (13 fields, or 9 without the in-place columns; "
              "older versions: 12 or 8, no root, error for #wrong; a header line \"size ... time "
              "algbw busbw\" says which) with numbers (size in bytes, time in us, bandwidths in "
              "GB/s)\n",
              path, lineno, bad);
      rc = 2;
      break;
    }
    /* nccl-tests prints bandwidths to two decimals: a small size's 0.00 says only that it is
     * below 0.005 GB/s, no figure to fit or to compare with */
    if (busbw == 0) {
      ++*unmeasured;
      continue;
    }
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      rh_nccl_row *grown = realloc(rows, (size_t)cap * sizeof *rows);
      if (!grown) {
        rc = 1;
        break;
      }
      rows = grown;
    }
    rows[n++] = (rh_nccl_row){size, time * 1e-6, busbw * 1e9};
  }
  free(line);
  fclose(f);
  if (rc == 0 && n == 0) {
    if (*unmeasured)
      fprintf(stderr, "rehearsal calibrate: %s: every row's busbw is 0.00 GB/s (%d rows): nothing "
                      "to fit; measure larger sizes (nccl-tests -e 1G or more)\n",
              path, *unmeasured);
    else
      fprintf(stderr, "rehearsal calibrate: %s: no nccl-tests rows (size count type redop root "
                      "time algbw busbw ...)\n", path);
    rc = 2;
  }
  if (rc) {
    free(rows);
    return rc;
  }
  *out = rows;
  *nrows = n;
  return 0;
}

/* Field k of a CSV line (empty fields count), cut at its comma or line end; NULL past the last. */
static char *csv_field(char *line, int k) {
  char *p = line;
  for (int i = 0; i < k; i++) {
    p = strchr(p, ',');
    if (!p) return NULL;
    p++;
  }
  p[strcspn(p, ",\r\n")] = 0;
  return p;
}

int rh_read_step_times(const char *path, double **out, int *n) {
  FILE *f = open_table(path);
  if (!f) return 2;
  int lineno = 0, rc = 0, column = -1, cap = 0;
  char *line = NULL;
  size_t cap_line = 0;
  *out = NULL;
  *n = 0;
  while (rc == 0 && getline(&line, &cap_line, f) > 0) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#' || *p == '\n' || *p == '\r' || !*p) continue;
    char *tok = NULL;
    /* a CSV's header (before any step): the step_ms column is read from the rows after it */
    if (column == -1 && *n == 0 && strchr(p, ',') && !isdigit((unsigned char)*p) && *p != '.') {
      column = -2;
      int k = 0;
      for (const char *q = p, *end; q && column < 0; q = end ? end + 1 : NULL, k++) {
        end = strchr(q, ',');
        size_t len = end ? (size_t)(end - q) : strcspn(q, "\r\n");
        if (len == 7 && !strncmp(q, "step_ms", 7)) column = k;
      }
      if (column < 0) {
        fprintf(stderr, "rehearsal calibrate: %s:%d: a CSV header without a step_ms column\n",
                path, lineno);
        rc = 2;
      }
      continue;
    }
    if (column >= 0) {
      tok = csv_field(p, column);
    } else {
      char *toks[2];
      if (tokens(p, toks, 2) == 1) tok = toks[0];
    }
    double v;
    if (!tok || !rh_table_number(tok, &v) || !(v > 0) || v > 1e9) {
      fprintf(stderr, "rehearsal calibrate: %s:%d: step_ms: expected one step time in ms (above 0, "
                      "at most 1e9)%s\n", path, lineno, column >= 0 ? " in the step_ms column" : ", one a line");
      rc = 2;
      break;
    }
    if (*n == cap) {
      int c = cap ? 2 * cap : 256;
      double *grown = c < (1 << 26) ? realloc(*out, (size_t)c * sizeof **out) : NULL;
      if (!grown) {
        rc = 1;
        break;
      }
      *out = grown;
      cap = c;
    }
    (*out)[(*n)++] = v;
  }
  free(line);
  fclose(f);
  if (rc) {
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

typedef struct gemm_reading {
  const char *path;
  double peak;
  rh_gemm_row *rows;
  int *n;
} gemm_reading;

static int gemm_line(char **tok, int k, int lineno, void *arg) {
  gemm_reading *g = arg;
  double M, N, K, tf;
  bool whole = k == 4 && rh_table_number(tok[0], &M) && rh_table_number(tok[1], &N) &&
               rh_table_number(tok[2], &K) && rh_table_number(tok[3], &tf) && M >= 1 && N >= 1 &&
               K >= 1 && M <= 1e7 && N <= 1e7 && K <= 1e7 && M == floor(M) && N == floor(N) &&
               K == floor(K) && tf > 0;
  if (!whole) {
    fprintf(stderr, "rehearsal calibrate: %s:%d: expected \"M N K TFLOPS\": three whole sizes "
                    "and a positive rate\n", g->path, lineno);
    return 2;
  }
  if (tf > g->peak) {
    fprintf(stderr, "rehearsal calibrate: %s:%d: TFLOPS: %g is above the GPU's peak_tflops %g\n",
            g->path, lineno, tf, g->peak);
    return 2;
  }
  if (*g->n == RH_GEMM_ROWS) {
    fprintf(stderr, "rehearsal calibrate: %s:%d: more than %d GEMM sizes\n", g->path, lineno,
            RH_GEMM_ROWS);
    return 2;
  }
  g->rows[(*g->n)++] = (rh_gemm_row){2 * M * N * K, tf};
  return 0;
}

static int each_row(FILE *f, int (*row)(char **tok, int k, int lineno, void *arg), void *arg);

int rh_read_gemm_table(const char *path, double peak_tflops, rh_gemm_row rows[RH_GEMM_ROWS], int *n) {
  FILE *f = open_table(path);
  if (!f) return 2;
  *n = 0;
  gemm_reading g = {path, peak_tflops, rows, n};
  int rc = each_row(f, gemm_line, &g);
  fclose(f);
  return rc;
}

/* ---- the kernel table of `rehearsal-gpu kernels` ------------------------------------------- */

static const char *const table_precisions[] = {"fp32", "tf32", "fp16", "bf16", "fp8", NULL};

/* One row of a kernel table into t; NULL, or what is wrong with it. */
/* tok[from .. from + n) as positive numbers into v */
static bool positives(char **tok, int from, int n, double *v) {
  for (int i = 0; i < n; i++)
    if (!rh_table_number(tok[from + i], &v[i]) || !(v[i] > 0)) return false;
  return true;
}

static const char *kernel_row(char **tok, int k, rh_kernel_table *t) {
  double v[4];
  if (!strcmp(tok[0], "gemm")) {
    if (k != 6) return "expected \"gemm PRECISION M N K TFLOPS\"";
    int p = -1;
    for (int i = 0; table_precisions[i]; i++)
      if (!strcmp(tok[1], table_precisions[i])) p = i;
    if (p < 0) return "the precision is one of fp32, tf32, fp16, bf16, fp8";
    if (!positives(tok, 2, 4, v)) return "M, N, K and TFLOPS are positive numbers";
    if (v[3] > t->best[p]) t->best[p] = v[3];
    t->gemms++;
    return NULL;
  }
  if (!strcmp(tok[0], "copy")) {
    if (k != 3) return "expected \"copy BYTES GBPS\"";
    if (!positives(tok, 1, 2, v)) return "BYTES and GBPS are positive numbers";
    if (v[1] > t->copy_GBps) t->copy_GBps = v[1];
    return NULL;
  }
  if (!strcmp(tok[0], "launch")) {
    if (k != 3) return "expected \"launch STREAM_US GRAPH_US\"";
    if (!positives(tok, 1, 2, v)) return "STREAM_US and GRAPH_US are positive numbers";
    t->launch_us = v[0];
    t->graph_us = v[1];
    return NULL;
  }
  return "a row is gemm, copy or launch";
}

/* Calls row(tok, k, lineno, arg) for each row of f (lines that are not blank or `#`), until one
 * returns non-zero; that, or 0. */
static int each_row(FILE *f, int (*row)(char **tok, int k, int lineno, void *arg), void *arg) {
  int lineno = 0, rc = 0;
  char *line = NULL;
  size_t cap = 0;
  while (rc == 0 && getline(&line, &cap, f) > 0) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#') continue;
    char *tok[8];
    int k = tokens(p, tok, 8);
    if (k > 0) rc = row(tok, k, lineno, arg);
  }
  free(line);
  return rc;
}

typedef struct kernel_reading {
  const char *path;
  rh_kernel_table *t;
  char *err;
  size_t errlen;
} kernel_reading;

static int kernel_line(char **tok, int k, int lineno, void *arg) {
  kernel_reading *kr = arg;
  const char *why = kernel_row(tok, k, kr->t);
  if (!why) return 0;
  snprintf(kr->err, kr->errlen, "%s:%d: %s", kr->path, lineno, why);
  return 2;
}

int rh_read_kernel_table(const char *path, rh_kernel_table *t, char *err, size_t errlen) {
  *t = (rh_kernel_table){0};
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return 2;
  }
  kernel_reading kr = {path, t, err, errlen};
  int rc = each_row(f, kernel_line, &kr);
  fclose(f);
  if (rc == 0 && !t->gemms && !(t->copy_GBps > 0) && !(t->launch_us > 0)) {
    snprintf(err, errlen, "%s: no gemm, copy or launch rows", path);
    rc = 2;
  }
  return rc;
}
