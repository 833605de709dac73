/*
 * child.c: a command of this program run in a child for `rehearsal validate` (a sweep of a
 * series, a run of a failure series), its output in a log file, killed if validate dies.
 */
#include "suite.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

int rh_validate_child(char *const argv[], const char *log) {
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
