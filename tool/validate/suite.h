/*
 * suite.h: a validation suite: published data-parallel results, each a series of one scenario
 * (scenarios/papers/) at several GPU counts, with the throughput or the scaling efficiency its
 * source published at each and the bound, in points of scaling efficiency, that the prediction
 * must stay within.  `rehearsal validate` runs them (commands/validate.c).
 */
#ifndef RH_VALIDATE_SUITE_H
#define RH_VALIDATE_SUITE_H

#include <stddef.h>

enum { RH_SUITE_MAX_COUNTS = 16 };

typedef struct rh_suite_series {
  char *name;      /* the series' id (the output folder's name) */
  char *scenario;  /* the scenario's path, resolved against the suite file's folder */
  char *source;    /* where the figures were published */
  char *setup;     /* hardware and software, in a few words */
  double bound;    /* points of scaling efficiency a prediction may be off by */
  double one_gpu;  /* published samples/s on one GPU; 0 where only efficiencies were published */
  int ncounts;
  int gpus[RH_SUITE_MAX_COUNTS];
  double published[RH_SUITE_MAX_COUNTS]; /* samples/s (one_gpu > 0), else efficiency in % */
} rh_suite_series;

typedef struct rh_suite {
  rh_suite_series *series;
  int nseries;
} rh_suite;

/* Reads a suite file.  0, or 2 with "FILE:LINE: FIELD: why" written into err (nothing kept). */
int rh_suite_load(const char *path, rh_suite *out, char *err, size_t errlen);
void rh_suite_free(rh_suite *s);

/* The published scaling efficiency (%) of point k of a series: the source's own, or throughput at
 * N over N times the one-GPU throughput. */
double rh_suite_published_efficiency(const rh_suite_series *s, int k);

#endif
