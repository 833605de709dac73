/*
 * main.c: the `rehearsal` command.  Subcommands: run (replay a scenario's training), sweep (run it
 * over axes of settings), collective (nccl-tests-style table on the scenario's cluster), plot
 * (draw what a run, sweep or collective wrote), platform (print the generated SimGrid platform),
 * schema (the scenario reference), model (a model's layers as its family expands it),
 * calibrate (fit the cluster to measurements), elastic (the elastic driver for real processes;
 * elastic-rank is its helper).  Exit codes: 0 success, 1 failure of the job or of a check, 2 bad
 * input.  Every command takes --help (stdout, exit 0) and --version.
 */
#include "cli.h"
#include "commands.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *f) {
#ifdef RH_REAL_TARGET
  /* the commands that run on real processes; the others are the simulator's (`rehearsal`) */
  fprintf(f, "usage: %s COMMAND FILE [options]   (COMMAND --help for each)\n"
             "  run FILE [--out DIR]          run the scenario's training on the processes mpirun\n"
             "                                started (one a GPU)\n"
             "  collective FILE [options]     nccl-tests-style table on those processes\n"
#ifdef RH_GPU_KERNELS
             "  kernels [--out FILE]          measure this GPU's kernel rates (GEMMs, copy,\n"
             "                                launches) as a table for cluster.gpu.kernel_table\n"
#endif
             "Sweeps, plots, platforms, calibration and the elastic driver are `rehearsal`'s.\n"
             "Options every scenario command takes: --set KEY=VALUE (override a scenario key),\n"
             "--help, --version.\n"
             "Exit status: 0 success, 1 the job failed or a check did not hold, 2 bad input.\n",
          strcmp(RH_REAL_TARGET, "nccl") == 0 ? "rehearsal-gpu" : "rehearsal-mpi");
  return f == stdout ? 0 : 2;
#endif
  fprintf(f, "usage: rehearsal COMMAND FILE [options]   (rehearsal COMMAND --help for each)\n"
             "  run FILE [--out DIR]          replay the scenario's training on the simulator\n"
             "  sweep FILE [--axis KEY=V1,V2,...]... --out DIR\n"
             "                                run the scenario at every point of the axes, in\n"
             "                                parallel; a table, sweep.csv and sweep.json\n"
             "  collective FILE [options]     nccl-tests-style table on the scenario's cluster\n"
             "  plot DIR                      draw what a run, sweep or collective wrote (PNG, SVG)\n"
             "  platform FILE                 print the SimGrid platform of the scenario\n"
             "  schema                        print the scenario reference (every key)\n"
             "  model FILE|NAME [--json]      a model's layers: parameters, FLOPs, memory\n"
             "  model FILE --kernels          a step's kernels on the scenario's GPU and framework\n"
             "  validate [SUITE | --one-gpu]  the suite of published scaling (or one-GPU) results:\n"
             "                                published, predicted and error per point\n"
             "  calibrate FILE [options]      fit the scenario's cluster to nccl-tests output, a\n"
             "                                GEMM sweep or a measured step; writes a node preset\n"
             "  elastic FILE [-np N] -- PROGRAM [ARGS]\n"
             "                                run PROGRAM on real processes (mpirun) with the\n"
             "                                scenario's elastic settings: after a failure the\n"
             "                                survivors go on\n"
             "Options every scenario command takes: --set KEY=VALUE (override a scenario key; the\n"
             "command line wins over the scenario, which wins over RH_* environment variables,\n"
             "which win over Horovod's and NCCL's (HOROVOD_FUSION_THRESHOLD, NCCL_PROTO...),\n"
             "which win over the defaults), --help, --version.\n"
             "Exit status: 0 success, 1 the job failed or a check did not hold, 2 bad input.\n");
  return f == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
#ifdef RH_REAL_TARGET
  rh_cli_target = RH_REAL_TARGET;
#endif
  if (argc < 2) return usage(stderr);
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0)
    return usage(stdout);
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    printf("rehearsal %s\n", REHEARSAL_VERSION);
    return 0;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } commands[] = {{"run", rh_cmd_run},           {"sweep", rh_cmd_sweep},
                  {"collective", rh_cmd_collective}, {"plot", rh_cmd_plot},
                  {"platform", rh_cmd_platform}, {"schema", rh_cmd_schema},
                  {"model", rh_cmd_model},       {"validate", rh_cmd_validate},
                  {"calibrate", rh_cmd_calibrate},
                  {"elastic", rh_cmd_elastic},   {"elastic-rank", rh_cmd_elastic_rank},
#ifdef RH_GPU_KERNELS
                  {"kernels", rh_cmd_kernels},
#endif
  };
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(cmd, commands[i].name) == 0) return commands[i].fn(argc - 2, argv + 2);
  fprintf(stderr, "rehearsal: unknown command '%s'\n", cmd);
  return usage(stderr);
}
