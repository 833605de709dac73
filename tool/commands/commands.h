/*
 * commands.h: the subcommands of the `rehearsal` program.  Each takes the arguments after its
 * name and returns the process exit code: 0 success, 1 the job failed or a check did not hold,
 * 2 bad input (usage, scenario).
 */
#ifndef REHEARSAL_COMMANDS_H
#define REHEARSAL_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

int rh_cmd_run(int argc, char **argv);
int rh_cmd_sweep(int argc, char **argv); /* the scenario over axes of overrides */
int rh_cmd_plot(int argc, char **argv);  /* gnuplot figures of what a command wrote */
int rh_cmd_collective(int argc, char **argv);
int rh_cmd_platform(int argc, char **argv);
int rh_cmd_schema(int argc, char **argv); /* the scenario reference, from the schema table */
int rh_cmd_model(int argc, char **argv);  /* a model's layers, as its family expands it */
int rh_cmd_validate(int argc, char **argv); /* published scaling results against predictions */
int rh_cmd_calibrate(int argc, char **argv); /* fits the cluster to measurements */
int rh_cmd_kernels(int argc, char **argv);   /* rehearsal-gpu: measures this GPU's kernel rates */
int rh_cmd_elastic(int argc, char **argv);      /* the elastic driver for real processes */
int rh_cmd_elastic_rank(int argc, char **argv); /* one process under it */

/* The step time of another run's summary.json (a simulated run's, to set beside a measured one,
 * `run --compare`): its steady step, or the mean of all its steps where it has none, and the
 * target that ran it.  False, with the reason printed, when the file has none. */
bool rh_summary_step(const char *path, double *step_ms, char *target, size_t len);

/* accuracy_parity's one-worker baselines: the final validation accuracy of `given` (a
 * summary.json, or a pattern naming several: one run a seed), else of the scenario (with opts' overrides) on one GPU from `seeds` seeds
 * (at most 100), run by the simulator into out/baseline/seed-K (reused while the scenario, the
 * overrides and the program are the same) or a temporary folder.  Writes them into acc; returns
 * how many (0 when there are none); `source` says where they came from, or why not. */
struct rh_scenario_opts;
int rh_accuracy_baseline(const char *file, const struct rh_scenario_opts *opts, const char *given,
                         const char *out, int seeds, double *acc, char *source, size_t len);

#endif
