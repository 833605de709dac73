/*
 * tables.c: the readers of the measurement tables `rehearsal calibrate` fits (see tables.h).
 */
#include "tables.h"

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
  FILE *f = fopen(path, "r");
  struct stat st;
  if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    fprintf(stderr, "rehearsal calibrate: %s: cannot read: %s\n", path,
            f ? "not a regular file" : strerror(errno));
    if (f) fclose(f);
    return NULL;
  }
  return f;
}

int rh_read_nccl_tests(const char *path, rh_nccl_row **out, int *nrows, int *ranks, char *coll,
                       int *unmeasured) {
  FILE *f = open_table(path);
  if (!f) return 2;
  char *line = NULL;
  size_t cap_line = 0;
  int n = 0, cap = 0, lineno = 0, rc = 0;
  rh_nccl_row *rows = NULL;
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
      continue;
    }
    char *tok[16];
    int k = tokens(p, tok, 16);
    double size, v;
    if (k == 0 || !rh_table_number(tok[0], &size)) continue; /* not a row: NCCL's INFO lines, text */
    /* size count type redop root time algbw busbw #wrong [the in-place four] */
    static const char *const cols[] = {"size", "count", "type", "redop", "root", "time",
                                       "algbw", "busbw", "#wrong"};
    double time = 0, busbw = 0;
    const char *bad = NULL;
    if (k < 9) bad = k < 8 ? cols[k] : cols[8];
    else if (!(size >= 1 && size <= 1e15)) bad = "size";
    else if (!rh_table_number(tok[5], &time) || !(time > 0)) bad = "time";
    else if (!rh_table_number(tok[7], &busbw) || !(busbw >= 0)) bad = "busbw";
    else if (!rh_table_number(tok[1], &v) || v < 0) bad = "count";
    if (bad) {
      fprintf(stderr,
              "rehearsal calibrate: %s:%d: %s: expected an nccl-tests row \"size count type redop "
              "root time algbw busbw #wrong ...\" with numbers (size in bytes, time in us, "
              "busbw in GB/s)\n",
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

int rh_read_gemm_table(const char *path, double peak_tflops, rh_gemm_row rows[RH_GEMM_ROWS], int *n) {
  FILE *f = open_table(path);
  if (!f) return 2;
  int lineno = 0, rc = 0;
  char *line = NULL;
  size_t cap_line = 0;
  *n = 0;
  while (rc == 0 && getline(&line, &cap_line, f) > 0) {
    lineno++;
    char *p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '#') continue;
    char *tok[8];
    int k = tokens(p, tok, 8);
    if (k == 0) continue;
    double M, N, K, tf;
    bool whole = k == 4 && rh_table_number(tok[0], &M) && rh_table_number(tok[1], &N) &&
                 rh_table_number(tok[2], &K) && rh_table_number(tok[3], &tf) && M >= 1 && N >= 1 &&
                 K >= 1 && M <= 1e7 && N <= 1e7 && K <= 1e7 && M == floor(M) && N == floor(N) &&
                 K == floor(K) && tf > 0;
    if (!whole) {
      fprintf(stderr, "rehearsal calibrate: %s:%d: expected \"M N K TFLOPS\": three whole sizes "
                      "and a positive rate\n", path, lineno);
      rc = 2;
    } else if (tf > peak_tflops) {
      fprintf(stderr, "rehearsal calibrate: %s:%d: TFLOPS: %g is above the GPU's peak_tflops %g\n",
              path, lineno, tf, peak_tflops);
      rc = 2;
    } else if (*n == RH_GEMM_ROWS) {
      fprintf(stderr, "rehearsal calibrate: %s:%d: more than %d GEMM sizes\n", path, lineno,
              RH_GEMM_ROWS);
      rc = 2;
    } else {
      rows[(*n)++] = (rh_gemm_row){2 * M * N * K, tf};
    }
  }
  free(line);
  fclose(f);
  return rc;
}
