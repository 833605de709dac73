/*
 * slurm.c: sbatch, squeue, scancel and scontrol, run as child processes: the commands users have
 * on a cluster's login node, so a sweep's points go through the cluster's own accounting, limits
 * and partitions (no library of Slurm's is linked).
 */
#include "slurm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs argv with its stdout into out (up to len - 1 bytes, NUL-ended; NULL: to /dev/null) and
 * stderr passed through (quiet: to /dev/null); its exit status, or -1. */
static int capture(char *const argv[], char *out, size_t len, bool quiet) {
  int fd[2];
  if (pipe(fd) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], STDOUT_FILENO);
    close(fd[0]);
    close(fd[1]);
    if (quiet && !freopen("/dev/null", "w", stderr)) _exit(126);
    execvp(argv[0], argv);
    fprintf(stderr, "rehearsal: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fd[1]);
  size_t n = 0;
  char sink[4096];
  for (ssize_t got;;) {
    char *to = out && n + 1 < len ? out + n : sink;
    size_t room = out && n + 1 < len ? len - 1 - n : sizeof sink;
    got = read(fd[0], to, room);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (to != sink) n += (size_t)got;
  }
  close(fd[0]);
  if (out && len) out[n] = 0;
  int status;
  while (pid > 0 && waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return pid > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int rh_slurm_submit(const char *const *args, int nargs, const char *script,
                    const char *const *script_args, int nscript_args, char *jobid, size_t len) {
  char **argv = calloc((size_t)(nargs + nscript_args + 4), sizeof *argv);
  if (!argv) return 1;
  int k = 0;
  argv[k++] = "sbatch";
  argv[k++] = "--parsable";
  for (int i = 0; i < nargs; i++) argv[k++] = (char *)args[i];
  argv[k++] = (char *)script;
  for (int i = 0; i < nscript_args; i++) argv[k++] = (char *)script_args[i];
  char out[256] = "";
  int rc = capture(argv, out, sizeof out, false);
  free(argv);
  /* --parsable prints "JOBID" or "JOBID;CLUSTER" */
  out[strcspn(out, ";\n")] = 0;
  if (rc != 0 || !out[0] || strspn(out, "0123456789") != strlen(out)) {
    fprintf(stderr, "rehearsal: sbatch did not take the job (exit %d)\n", rc);
    return 1;
  }
  snprintf(jobid, len, "%s", out);
  return 0;
}

int rh_slurm_tasks(const char *const *jobids, int n,
                   void (*fn)(void *arg, const char *jobid, int task, const char *state), void *arg) {
  size_t cap = 1 << 22;
  char *out = malloc(cap);
  if (!out) return 1;
  /* --me, not -j: squeue exits 1 both for a job it has forgotten (MinJobAge after its end) and for
   * a controller it cannot reach, and only the second is a failure.  -r: an array's tasks one a
   * line; %i "JOB_TASK", %t the state's code */
  char *argv[] = {"squeue", "-h", "-r", "--me", "-o", "%i %t", NULL};
  int rc = capture(argv, out, cap, true);
  for (char *line = rc == 0 ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n")) {
    char id[64], state[8];
    if (sscanf(line, "%63s %7s", id, state) != 2) continue;
    char *us = strchr(id, '_');
    if (!us) continue;
    *us = 0;
    bool ours = false;
    for (int j = 0; j < n && !ours; j++) ours = strcmp(jobids[j], id) == 0;
    char *end;
    long task = strtol(us + 1, &end, 10);
    if (!ours || end == us + 1 || *end) continue;
    fn(arg, id, (int)task, state);
  }
  free(out);
  return rc == 0 ? 0 : 1;
}

void rh_slurm_cancel(const char *const *jobids, int n) {
  char **argv = calloc((size_t)n + 2, sizeof *argv);
  if (!argv) return;
  argv[0] = "scancel";
  for (int i = 0; i < n; i++) argv[i + 1] = (char *)jobids[i];
  capture(argv, NULL, 0, false);
  free(argv);
}

int rh_slurm_ready(const char *who) {
  char out[4096];
  char *argv[] = {"sinfo", "-h", "-o", "%P", NULL};
  int rc = capture(argv, out, sizeof out, true);
  if (rc == 0) return 0;
  fprintf(stderr, "rehearsal %s: Slurm does not answer here (sinfo: %s): run it where sbatch and "
                  "squeue reach the cluster's controller\n", who,
          rc == 127 ? "not found" : rc < 0 ? "did not run" : "failed");
  return 1;
}

int rh_slurm_max_array_index(void) {
  static char out[1 << 16];
  char *argv[] = {"scontrol", "show", "config", NULL};
  if (capture(argv, out, sizeof out, true) != 0) return 1000;
  const char *p = strstr(out, "MaxArraySize");
  int size = 0;
  if (p && sscanf(p, "MaxArraySize = %d", &size) == 1 && size > 1) return size - 1;
  return 1000;
}
