/*
 * run.h: what `rehearsal run`'s two rooms share.  run.c parses the flags, loads the scenario and
 * its data, and launches the job; run_report.c reports what the job did: the epoch table, the
 * summary, the bottleneck, the failures, the checks' verdicts, and the files under --out.
 */
#ifndef REHEARSAL_RUN_H
#define REHEARSAL_RUN_H

#include "cli.h"
#include "failures.h"
#include "scenario.h"
#include "train/train.h"

typedef struct run_flags {
  const char *out, *compare, *timeline;
  bool timeline_env; /* the timeline's file is HOROVOD_TIMELINE's, --timeline not given */
  bool resume, what_if, samples;
  int warmup; /* steps left out of the steady step */
} run_flags;

/* Everything a run owns besides the scenario. */
typedef struct run_inputs {
  rh_dataset train, validation;
  rh_train_layer *layers;
  rh_step_cache steps; /* the kernel model's priced steps (when the scenario has one) */
  bool has_steps;
  float *init_params; /* model.init_from */
  rh_train_config cfg;
  char checkpoints[1024];
  bool temporary_checkpoints;
  rh_scenario_launch launch; /* with the runtime's forms of the failure sections */
} run_inputs;

/* One run, from its flags to its result: filled by run.c's stages, read by the report. */
typedef struct run_job {
  const char *file;
  const run_flags *fl;
  const rh_scenario_opts *opts;
  double other_step; /* --compare's steady step (ms) and target */
  char other_target[32];
  rh_scenario sc;
  run_inputs in;
  int epochs_cap; /* the epochs the job runs at its starting size */
  rh_train_result res;
  rh_launch_result lres;
  int launch_rc;
} run_job;

/* Reports the job (rank 0's, or the simulator's) on stdout and writes its files under --out;
 * the run's exit status: 0, or 1 when the job failed or a check did not hold. */
int run__report(run_job *j);

/* A data path of the scenario, relative to the scenario file's directory. */
void run__data_path(const rh_scenario *sc, const char *p, char *buf, size_t len);

#endif
