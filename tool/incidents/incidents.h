/*
 * incidents.h: failures as large clusters have them, replayed over a job's wall time without
 * simulating its steps.  A failure has a cause (a component: a GPU, its HBM, a NIC, a switch or
 * cable, a host, software, planned maintenance...), a rate per unit of the job (per GPU, per node
 * or per job), the way it is noticed (the process exits, a heartbeat stops, a collective times
 * out, a checksum disagrees, or it is planned) and what it takes out (a GPU or a node, which a
 * spare must replace; a link or the job, which a relaunch alone mends).  Each incident then goes
 * through the recovery pipeline of a fixed-size job relaunched from its checkpoint: detection,
 * diagnosis and eviction, a spare node or a wait for a repaired one, the relaunch (the
 * scheduler and the processes' start), the communicator's set-up at N ranks, the checkpoint's
 * read from shared storage, and the work done since the last durable checkpoint, lost.
 *
 * causes.c: the cause table (names, rates from a published log's counts); pipeline.c: one
 * incident's costs; replay.c: the walk over the job's time; report.c: the table by cause.
 */
#ifndef REHEARSAL_INCIDENTS_H
#define REHEARSAL_INCIDENTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { RH_PER_GPU, RH_PER_NODE, RH_PER_JOB, RH_PER_COUNT } rh_cause_scope;
typedef enum {
  RH_DETECT_EXIT,      /* the process exits: the launcher sees it at its next poll */
  RH_DETECT_HEARTBEAT, /* the host goes silent: its heartbeat's timeout */
  RH_DETECT_TIMEOUT,   /* a collective hangs: the watchdog's timeout (NCCL_TIMEOUT) */
  RH_DETECT_CHECKSUM,  /* silent data corruption: found at the next checkpoint's checksum */
  RH_DETECT_PLANNED,   /* maintenance: the job is stopped after a checkpoint, nothing lost */
  RH_DETECT_COUNT
} rh_detection;
typedef enum { RH_OUT_GPU, RH_OUT_NODE, RH_OUT_LINK, RH_OUT_JOB, RH_OUT_COUNT } rh_takes_out;

extern const char *const rh_cause_scope_names[RH_PER_COUNT + 1];
extern const char *const rh_detection_names[RH_DETECT_COUNT + 1];
extern const char *const rh_takes_out_names[RH_OUT_COUNT + 1];

enum { RH_CAUSE_NAME = 48 };

typedef struct rh_cause {
  char name[RH_CAUSE_NAME];
  rh_cause_scope per;
  double rate;         /* failures per unit (GPU, node or job) per second */
  rh_detection detect;
  rh_takes_out out;
  const double *at;    /* scripted: seconds since the start at which it strikes, ascending */
  int nat;
  bool own_detect, own_diagnosis; /* false: the recovery's for its kind (rec.detect, rec.diagnosis) */
  double detect_s, diagnosis_s;   /* its own detection delay and diagnosis */
} rh_cause;

/* Failures per unit per second from a log: `count` failures in `hours` on `units` of them. */
double rh_cause_rate(double count, double units, double hours);

/* The recovery pipeline's settings (seconds unless said). */
typedef struct rh_recovery {
  double detect[RH_DETECT_COUNT]; /* exit: the launcher's poll; heartbeat, timeout: theirs;
                                   * checksum: unused (the next checkpoint finds it) */
  double diagnosis;      /* finding the bad node and evicting it */
  int spares;            /* hot spare nodes; < 0: as many as needed (a larger cluster) */
  double repair;         /* a failed node's time to come back (needed with spares >= 0) */
  double relaunch;       /* the scheduler's requeue and the processes' start */
  double init_per_rank;  /* the communicator's set-up, per rank (it grows with the job) */
  double read;           /* the checkpoint's read from shared storage, whole job */
  double write;          /* the checkpoint's write (sync: training waits for it) */
  double snapshot;       /* async: the copy to host memory training waits for (the write overlaps) */
  bool async;
  double every;          /* seconds of training between checkpoints */
} rh_recovery;

/* The job the replay walks. */
typedef struct rh_incident_job {
  const rh_cause *causes;
  int ncauses;
  long gpus, nodes;
  double horizon;        /* seconds of wall time replayed */
  uint64_t seed;
  rh_recovery rec;
} rh_incident_job;

/* Where an incident's time went, in seconds; `redo` is training thrown away. */
typedef enum {
  RH_COST_REDO, RH_COST_DETECT, RH_COST_DIAGNOSIS, RH_COST_WAIT, RH_COST_RELAUNCH,
  RH_COST_INIT, RH_COST_READ, RH_COST_COUNT
} rh_cost_part;
extern const char *const rh_cost_part_names[RH_COST_COUNT];

typedef struct rh_incident {
  double at;             /* wall seconds since the start */
  int cause;
  bool in_recovery;      /* struck while the job was recovering from another */
  double cost[RH_COST_COUNT];
} rh_incident;

typedef struct rh_cause_total {
  long count;
  double cost[RH_COST_COUNT];
} rh_cause_total;

typedef struct rh_incident_replay {
  rh_incident *incidents; /* owned, in order */
  long n;
  rh_cause_total *by_cause; /* owned, one per cause */
  double trained;         /* seconds of training that counted (kept or in progress at the end) */
  double checkpointing;   /* seconds training waited for checkpoints */
  double lost;            /* seconds of the incidents' costs, all causes */
  double effective;       /* trained / horizon */
  long checkpoints;
  double spare_wait_max;  /* the longest wait for a node */
} rh_incident_replay;

/* A cause's detection delay and diagnosis: its own, or the recovery's for its kind. */
double rh_cause_detect(const rh_recovery *r, const rh_cause *c);
double rh_cause_diagnosis(const rh_recovery *r, const rh_cause *c);

/* One incident's pipeline, the redone work aside: fills cost[DETECT..READ] (cost[REDO] is left
 * as it is) for a failure of `c` (its detection delay `detect`), the wait for a node given. */
void rh_incident_pipeline(const rh_incident_job *job, const rh_cause *c, double detect,
                          double wait, double cost[RH_COST_COUNT]);

/* Walks the job's horizon; 0, or -1 out of memory. */
int rh_incident_replay_run(const rh_incident_job *job, rh_incident_replay *out);
void rh_incident_replay_free(rh_incident_replay *r);

/* The expected interruptions of the job over its horizon: sum of rate x units x horizon. */
double rh_incident_expected(const rh_incident_job *job);
/* ... and of one cause. */
double rh_cause_expected(const rh_incident_job *job, const rh_cause *c);

/* ---- planner.c: the replay over many seeds, the interval and the size, the what-ifs ---- */

enum {
  RH_PLAN_SEEDS = 20,       /* every figure: the spread, each point of a curve, the what-ifs */
  RH_PLAN_INTERVALS = 25,   /* 30 s to 16 h, geometric */
  RH_PLAN_SIZES = 8,        /* 1/16 to 8 times the job's nodes */
  RH_WHAT_IF_COUNT = 3
};
extern const char *const rh_what_if_names[RH_WHAT_IF_COUNT];

typedef struct rh_incident_series {
  int seeds;               /* the job's seed and the ones after it */
  double n_mean, n_sd;     /* interruptions */
  double eff_mean, eff_min, eff_max;
  double lost_mean;        /* seconds of incidents */
  int n_outside;           /* seeds whose count left the 2-sigma band of the expected count */
  int cause_outside;       /* (seed, cause) counts outside their cause's band */
  double *cause_mean;      /* owned, per cause: its mean count */
  double *cause_lost;      /* owned, per cause: its mean seconds lost (after cause_mean) */
} rh_incident_series;

typedef struct rh_incident_plan {
  rh_incident_series series;
  double mtbf, cost;       /* the job's MTBF (unplanned failures); a checkpoint's cost to training */
  double young, daly;      /* their optimum intervals (NaN without a cost or failures) */
  int nintervals;
  double interval[RH_PLAN_INTERVALS], interval_eff[RH_PLAN_INTERVALS];
  double best, best_eff;   /* the best interval replayed, and its effective training time */
  double daly_eff;         /* at Daly's interval */
  int nsizes;
  long size_gpus[RH_PLAN_SIZES];
  double size_mtbf[RH_PLAN_SIZES], size_daly[RH_PLAN_SIZES];
  double size_eff_given[RH_PLAN_SIZES], size_eff_daly[RH_PLAN_SIZES];
  bool what_if_applies[RH_WHAT_IF_COUNT]; /* false: it changes nothing for this job */
  double what_if_eff[RH_WHAT_IF_COUNT];   /* mean over RH_PLAN_SEEDS */
} rh_incident_plan;

/* 0, or -1 out of memory; rh_incident_plan_free releases it either way. */
int rh_incident_plan_run(const rh_incident_job *job, rh_incident_plan *p);
void rh_incident_plan_free(rh_incident_plan *p);
/* The planner's lines of the report, and `plan` and `series` in at_scale (may be NULL). */
void rh_incident_plan_report(FILE *out, json_t *at_scale, const rh_incident_job *job,
                             const rh_incident_plan *p);

/* The replay's job from a scenario with failures.horizon_days, at the pace of the run that
 * sampled it (step: its steady step, seconds; state_bytes: a checkpoint's).  0, or -1 out of
 * memory; rh_incident_job_free releases its causes. */
struct rh_scenario;
int rh_incident_job_from(const struct rh_scenario *sc, double step, double state_bytes,
                         rh_incident_job *job);
void rh_incident_job_free(rh_incident_job *job);

/* The section of the run's report ("failures at scale"), and `failures.at_scale` in root. */
void rh_incident_report(FILE *out, json_t *root, const rh_incident_job *job,
                        const rh_incident_replay *r);

#endif
