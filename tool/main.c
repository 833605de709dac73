/*
 * main.c: the `rehearsal` command.  Subcommands: run (replay a scenario's training), collective
 * (nccl-tests-style table on the scenario's cluster), platform (print the generated SimGrid
 * platform), calibrate (fit the cluster to measurements), elastic (the elastic driver for real processes; elastic-rank is its helper).  Exit codes: 0 success, 1 failure of the job or of a check, 2 bad input.
 */
#include "commands.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *f) {
  fprintf(f, "usage: rehearsal COMMAND FILE [options]\n"
             "  run FILE [--out DIR]          replay the scenario's training on the simulator\n"
             "  collective FILE [options]     nccl-tests-style table on the scenario's cluster\n"
             "                                (rehearsal collective --help for options)\n"
             "  platform FILE                 print the SimGrid platform of the scenario\n"
             "  calibrate FILE [options]      fit the scenario's cluster to nccl-tests output, a\n"
             "                                GEMM sweep or a measured step; writes a node preset\n"
             "                                (rehearsal calibrate --help)\n"
             "  elastic FILE [-np N] -- PROGRAM [ARGS]\n"
             "                                run PROGRAM on real processes (mpirun) with the\n"
             "                                scenario's elastic settings: after a failure the\n"
             "                                survivors go on (rehearsal elastic --help)\n");
  return f == stdout ? 0 : 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(stderr);
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) return usage(stdout);
  if (strcmp(cmd, "--version") == 0) {
    printf("rehearsal %s\n", REHEARSAL_VERSION);
    return 0;
  }
  if (strcmp(cmd, "run") == 0) return rh_cmd_run(argc - 2, argv + 2);
  if (strcmp(cmd, "collective") == 0) return rh_cmd_collective(argc - 2, argv + 2);
  if (strcmp(cmd, "platform") == 0) return rh_cmd_platform(argc - 2, argv + 2);
  if (strcmp(cmd, "calibrate") == 0) return rh_cmd_calibrate(argc - 2, argv + 2);
  if (strcmp(cmd, "elastic") == 0) return rh_cmd_elastic(argc - 2, argv + 2);
  if (strcmp(cmd, "elastic-rank") == 0) return rh_cmd_elastic_rank(argc - 2, argv + 2);
  fprintf(stderr, "rehearsal: unknown command '%s'\n", cmd);
  return usage(stderr);
}
