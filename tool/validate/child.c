/*
 * child.c: a command of this program run in a child for `rehearsal validate` (a sweep of a
 * series, a run of a failure series) with `--out DIR` and the command line's --set overrides, its
 * output in DIR.log, killed if validate dies.
 */
#include "suite.h"
#include "scenario.h"

#include <stdio.h>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs argv in a child, its stdout and stderr into `log`: its exit status, or -1. */
static int spawn(char *const argv[], const char *log) {
  pid_t parent = getpid(), pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(1);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("RH_PROGRESS", "0", 1);
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int status;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int rh_validate_child(const char *const head[], int nhead, const rh_scenario_opts *opts,
                      const char *dir) {
  char **argv = calloc((size_t)(nhead + 4 + 2 * opts->nsets), sizeof *argv);
  if (!argv) return -1;
  int argc = 0;
  argv[argc++] = "rehearsal";
  for (int i = 0; i < nhead; i++) argv[argc++] = (char *)head[i];
  argv[argc++] = "--out";
  argv[argc++] = (char *)dir;
  for (int i = 0; i < opts->nsets; i++) {
    argv[argc++] = "--set";
    argv[argc++] = (char *)opts->sets[i];
  }
  char log[4400];
  snprintf(log, sizeof log, "%s.log", dir);
  int rc = spawn(argv, log);
  free(argv);
  return rc;
}
