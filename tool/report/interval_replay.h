/*
 * interval_replay.h: how often to commit (or checkpoint), from a simulated run.  The run gives
 * its step, commit and recovery times and the moments its failures struck; the replay walks the
 * job's timeline again for another interval, the failures striking at the same moments (and,
 * past the run's end, at the job's failure rate, from a seed), and says how long the job would
 * take.  One run's few failures are one draw of chance: the interval that suits them best says
 * little, so an interval's expected goodput is the mean over trials of the job with failures
 * drawn at its rate.  Scanning intervals gives the one that maximises it, to set beside Young's
 * sqrt(2 C M) and Daly's refinement of it.
 */
#ifndef REHEARSAL_INTERVAL_REPLAY_H
#define REHEARSAL_INTERVAL_REPLAY_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rh_replay_job {
  double steps;           /* steps the job needs */
  double step;            /* seconds per step */
  double cost;            /* seconds per commit (checkpoint) */
  double recovery;        /* seconds from a failure to training again, redone work aside */
  const double *failures; /* when failures struck, seconds since the start, ascending */
  int nfailures;
  double horizon;         /* the run's end: later failures come at `rate`, drawn from `seed` */
  double rate;            /* failures per second (1 / the job's MTBF) */
  uint64_t seed;
} rh_replay_job;

/* Seconds the job takes committing every `every` steps (a commit after each `every` steps; a
 * failure loses the work since the last one and the recovery time); INFINITY as soon as it is
 * sure to take longer than `limit` seconds. */
double rh_replay_time(const rh_replay_job *job, long every, double limit);

/* Young's interval sqrt(2 C M), and Daly's: sqrt(2 C M) (1 + sqrt(C / 2M) / 3 + C / 18M) - C for
 * C < 2M (M otherwise), in seconds (Young 1974; Daly 2006). */
double rh_young(double cost, double mtbf);
double rh_daly(double cost, double mtbf);

/* The expected goodput of an interval is the mean over this many trials of the job, each with
 * failures drawn at the job's rate (from the seed: the same draws for every interval). */
#define RH_INTERVAL_TRIALS 100

typedef struct rh_interval_study {
  long chosen;             /* the recipe's interval, in steps */
  double chosen_goodput;   /* expected; 0 when below 1% */
  double replayed_goodput; /* with the run's own failures (then the rate past its end); 0: < 1% */
  long best;               /* the interval of the highest expected goodput of those scanned */
  double best_goodput;
  double young, daly;      /* seconds */
  double young_goodput;    /* expected, at Young's interval */
  int scanned;
} rh_interval_study;

/* Scans intervals from 1 step to all of them (geometric, 16 a doubling) and the chosen one. */
void rh_interval_study_run(const rh_replay_job *job, long chosen, rh_interval_study *out);

/* The study in the failures report ("interval" lines) and in `failures.interval` of the JSON;
 * `what` is "commit" or "checkpoint", `simulated` the run's own goodput. */
void rh_interval_study_report(FILE *out, json_t *failures, const rh_replay_job *job,
                              const rh_interval_study *s, const char *what, double simulated);

#endif
