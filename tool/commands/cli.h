/*
 * cli.h: what every command's flags share.  Commands parse with getopt_long; these helpers give
 * them one behaviour: `--help` prints the usage on stdout and exits 0, `--version` prints the
 * version, an unknown flag or a bad value is named on stderr with exit 2, and `--set KEY=VALUE`
 * overrides collect into the scenario's load options.
 */
#ifndef REHEARSAL_CLI_H
#define REHEARSAL_CLI_H

#include "scenario.h"

#include <getopt.h>
#include <stdio.h>

/* The long options every scenario command takes, to append to its own table (getopt_long values
 * below). */
enum { RH_OPT_HELP = 0x100, RH_OPT_VERSION, RH_OPT_SET };
#define RH_CLI_COMMON_OPTIONS                                                                      \
  {"help", no_argument, NULL, RH_OPT_HELP}, {"version", no_argument, NULL, RH_OPT_VERSION},       \
  {"set", required_argument, NULL, RH_OPT_SET}

/* Runs getopt_long over a subcommand's arguments (argv without the command name).  Each option
 * found goes to `fn(c, optarg, arg)`, which returns 0 to go on or an exit code to stop with; the
 * common ones are handled here: --help prints `usage` to stdout (exit 0), --version (exit 0),
 * --set adds to opts->sets.  An unknown flag, a missing value or a value fn refuses (fn returns
 * 2, with rh_cli_why's reason) is named on stderr with the usage.  The positional arguments are
 * left in argv[*first .. argc).  Returns -1 to go on, or the exit code to return. */
typedef int (*rh_cli_option_fn)(int c, const char *value, void *arg);
int rh_cli_parse(const char *command, const char *usage, int argc, char **argv,
                 const char *shortopts, const struct option *longopts, rh_cli_option_fn fn,
                 void *arg, rh_scenario_opts *opts, int *first);
/* The target this program runs its jobs on: "simulator" (rehearsal), or the real one its main
 * names ("mpi" for rehearsal-mpi, "nccl" for rehearsal-gpu). */
extern const char *rh_cli_target;

/* Why fn refuses the value it is given, said after "cannot use FLAG VALUE: " (the accepted range
 * or names); for fn to call before it returns 2. */
void rh_cli_why(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* On the simulator, for a cluster of 16,384 GPUs or more, a line on stderr before its platform is
 * built, with the time and memory to expect (else nothing is said for many seconds). */
void rh_cli_platform_note(const rh_scenario *sc);
/* Releases what rh_cli_parse added to opts. */
void rh_cli_opts_free(rh_scenario_opts *opts);

/* Starts `rehearsal run FILE` again, in a child process of this program (the simulator runs
 * once per process) or of `program` where not NULL, with opts' overrides, then the nmore in
 * `more`, `--out DIR` and `--no-what-if`; its stdout and stderr go to DIR/stdout.txt and
 * DIR/stderr.txt (DIR exists), and it draws no progress line.  The child's pid, or -1. */
#include <sys/types.h>
/* Writes `s` to f as one shell word (single quotes, a quote inside as '\''). */
void rh_cli_shell_word(FILE *f, const char *s);
/* The arguments of that run (argv[0] "rehearsal", NULL-terminated; *argc their count); the caller
 * frees the array, not the strings (they are the caller's). */
char **rh_cli_run_argv(const char *file, const rh_scenario_opts *opts, char *const *more, int nmore,
                       const char *dir, int *argc);
pid_t rh_cli_spawn_run(const char *program, const char *file, const rh_scenario_opts *opts,
                       char *const *more, int nmore, const char *dir);

/* Folds a file's bytes into the FNV-1a hash *h (start from 1469598103934665603); false, with *h
 * as it was, when the file cannot be read. */
bool rh_cli_fnv_file(const char *path, uint64_t *h);

/* "rehearsal COMMAND: MESSAGE" on stderr and "try 'rehearsal COMMAND --help'"; returns 2. */
int rh_cli_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* HOROVOD_TIMELINE's file, which `run` writes its timeline to when --timeline does not give one;
 * NULL when it is unset, empty, or Horovod's DYNAMIC or DISABLED (no file: no counterpart). */
const char *rh_cli_timeline_env(void);

/* The settings of a run and where each came from (default, environment with the variable,
 * scenario, command line), printed as a table and returned as a JSON object (jansson's json_t *);
 * `timeline`: the run's --timeline FILE, from HOROVOD_TIMELINE when timeline_env, shown with
 * them (NULL: none).  The table ends with a note naming the HOROVOD_* and NCCL_* variables set
 * that nothing here reads; rh_cli_ignored_json gives them as a JSON array. */
struct json_t;
void rh_cli_print_settings(FILE *f, const rh_scenario *sc, const char *timeline, bool timeline_env);
struct json_t *rh_cli_settings_json(const rh_scenario *sc, const char *timeline, bool timeline_env);
struct json_t *rh_cli_ignored_json(const rh_scenario *sc);

#endif
