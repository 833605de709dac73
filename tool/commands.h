/*
 * commands.h: the subcommands of the `rehearsal` program.  Each takes the arguments after its
 * name and returns the process exit code: 0 success, 1 the job failed or a check did not hold,
 * 2 bad input (usage, scenario).
 */
#ifndef REHEARSAL_COMMANDS_H
#define REHEARSAL_COMMANDS_H

int rh_cmd_run(int argc, char **argv);
int rh_cmd_sweep(int argc, char **argv); /* the scenario over axes of overrides */
int rh_cmd_plot(int argc, char **argv);  /* gnuplot figures of what a command wrote */
int rh_cmd_collective(int argc, char **argv);
int rh_cmd_platform(int argc, char **argv);
int rh_cmd_calibrate(int argc, char **argv); /* fits the cluster to measurements */
int rh_cmd_elastic(int argc, char **argv);      /* the elastic driver for real processes */
int rh_cmd_elastic_rank(int argc, char **argv); /* one process under it */

/* Writes `text` to DIR/NAME through a temporary file and a rename, creating DIR if needed, so a
 * reader never sees half a file.  Returns 0, or prints the reason and returns 1. */
int rh_write_output(const char *dir, const char *name, const char *text);
/* Creates DIR and its missing parents (mkdir -p).  0, or prints the reason and returns 1. */
int rh_make_dirs(const char *dir);

#endif
