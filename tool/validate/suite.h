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
/* The largest bound (points) and published efficiency (%) a suite may give: an error cannot pass
 * 100 points, and a published efficiency a little above 100 is superlinear scaling (caches, a
 * smaller per-GPU working set), far above it a typing mistake. */
#define RH_SUITE_MAX_BOUND 100.0
#define RH_SUITE_MAX_EFFICIENCY 110.0

typedef struct rh_suite_series {
  char *name;      /* the series' id (the output folder's name) */
  char *scenario;  /* the scenario's path, resolved against the suite file's folder */
  int scenario_line; /* where the suite file names it */
  char *source;    /* where the figures were published */
  char *setup;     /* hardware and software, in a few words */
  double bound;    /* points of scaling efficiency a prediction may be off by (at most 100) */
  double one_gpu;  /* published samples/s on one GPU; 0 where only efficiencies were published */
  int ncounts;
  int gpus[RH_SUITE_MAX_COUNTS];
  double published[RH_SUITE_MAX_COUNTS]; /* samples/s (one_gpu > 0), else efficiency in %
                                          * (at most RH_SUITE_MAX_EFFICIENCY) */
} rh_suite_series;

/* A one-GPU point: a scenario with overrides (a GPU, a precision, a batch, a framework), priced
 * by the kernel model, against the samples/s its source published on one GPU. */
enum { RH_SUITE_MAX_SETS = 16 };
typedef struct rh_suite_point {
  char *name, *scenario, *source, *setup;
  int scenario_line;
  char *sets[RH_SUITE_MAX_SETS]; /* KEY=VALUE, as --set takes them */
  int nsets;
  double published; /* samples/s on one GPU */
  double bound;     /* percent the prediction may be off by */
  char *calibration; /* why a figure of a preset was set from this point; NULL: held out */
  char *sweep;       /* the batch sweep it belongs to; NULL: none */
} rh_suite_point;

/* A failure series: a replay at scale (failures.horizon_days) against a published incident log:
 * its interruptions (and, where the log gives them, each cause's) within the Poisson 2-sigma band
 * of the published count, its effective training time within `effective_bound` points. */
enum { RH_SUITE_MAX_CAUSES = 32 };
typedef struct rh_suite_failure {
  char *name, *scenario, *source, *setup;
  int scenario_line;
  double interruptions;      /* published, over the scenario's horizon */
  int ncauses, causes_line;
  char *cause[RH_SUITE_MAX_CAUSES]; /* published counts by cause (the replay's names) */
  double cause_count[RH_SUITE_MAX_CAUSES];
  double effective;          /* published effective training time, %; 0: not published */
  double effective_bound;    /* points */
  char *counts_calibration;  /* why the counts are calibration (the log's own rates); NULL: held out */
  char *effective_calibration; /* why the effective time is; NULL: held out */
} rh_suite_failure;

typedef struct rh_suite {
  rh_suite_series *series;
  int nseries;
  rh_suite_point *points; /* one-GPU points */
  int npoints;
  rh_suite_failure *failures;
  int nfailures;
} rh_suite;

/* Reads a suite file (series: [...], points: [...], or both); each scenario must be a readable
 * file.  0, or 2 with
 * "FILE:LINE: FIELD: why" written into err (nothing kept). */
int rh_suite_load(const char *path, rh_suite *out, char *err, size_t errlen);
void rh_suite_free(rh_suite *s);

/* The published scaling efficiency (%) of point k of a series: the source's own, or throughput at
 * N over N times the one-GPU throughput. */
double rh_suite_published_efficiency(const rh_suite_series *s, int k);

/* `rehearsal HEAD... --out DIR [--set K=V]...` (opts' overrides) in a child, its stdout and stderr
 * into DIR.log: its exit status, or -1. */
struct rh_scenario_opts;
int rh_validate_child(const char *const head[], int nhead, const struct rh_scenario_opts *opts,
                      const char *dir);

#endif
