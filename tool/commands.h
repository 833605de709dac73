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
int rh_cmd_calibrate(int argc, char **argv); /* fits the cluster to measurements */
int rh_cmd_elastic(int argc, char **argv);      /* the elastic driver for real processes */
int rh_cmd_elastic_rank(int argc, char **argv); /* one process under it */

/* Writes `text` to DIR/NAME through a temporary file and a rename, creating DIR if needed, so a
 * reader never sees half a file.  Returns 0, or prints the reason and returns 1. */
int rh_write_output(const char *dir, const char *name, const char *text);
/* The outputs of one command, together or not at all: each to a temporary file, then, when all
 * are whole, each renamed into place.  On failure none is renamed, and DIR is removed again when
 * this call made it.  Temporaries left by a process killed before its rename are removed. */
int rh_write_outputs(const char *dir, int n, const char *const *names, const char *const *texts);
/* Whether files can be written into DIR (made where missing): checked before the work whose
 * results go there, so that a long run does not end on an unwritable --out.  0, or prints the
 * reason and returns 1. */
int rh_output_dir_ok(const char *dir);
/* Creates DIR and its missing parents (mkdir -p).  0, or prints the reason and returns 1. */
int rh_make_dirs(const char *dir);

/* The step time of another run's summary.json (a simulated run's, to set beside a measured one,
 * `run --compare`): its steady step, or the mean of all its steps where it has none, and the
 * target that ran it.  False, with the reason printed, when the file has none. */
bool rh_summary_step(const char *path, double *step_ms, char *target, size_t len);

/* A JSON string of text that may not be UTF-8 (a path, a command-line argument): its bytes that
 * are not UTF-8 written as \xNN, so that the text is never dropped from a JSON file (jansson
 * refuses invalid UTF-8).  NULL text gives JSON null. */
struct json_t *rh_json_text(const char *s);

#endif
