/*
 * bench_run.c: what `rehearsal run` costs on the shipped data-parallel loop
 * (scenarios/scale/dp-loop.yaml: 10 steps of 4 buckets of 25 MiB after 25 ms of backward each,
 * nodes of 8 GPUs), as a user runs it: for each GPU count, the program in a child process with
 * the what-if and without it (--no-what-if), its wall time, CPU time and peak memory (from
 * wait4), and the simulated step it printed.  The figures of docs/simulation-cost.md.
 *   ./build/tests/bench_run [GPUS...]          (default 1024 4096 16384)
 *   BENCH_REPEAT=3 ./build/tests/bench_run ... each run three times, the median wall time
 *   BENCH_SCENARIO=scenarios/scale/llama2-70b-fsdp.yaml ./build/tests/bench_run ...
 *                                              another scenario of nodes of 8 GPUs
 *   BENCH_SET=collective.grain=fine ./build/tests/bench_run ...   one more --set
 */
#include "harness.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char *scenario(void) {
  char *s = getenv("BENCH_SCENARIO");
  return s && *s ? s : "scenarios/scale/dp-loop.yaml";
}

typedef struct figures {
  double wall, cpu, step_ms;
  long rss_kib;
  int rc;
} figures;

/* Runs the scenario on `gpus` GPUs (with the what-if or not); stdout into `log`. */
static figures run_once(int gpus, bool what_if, const char *log) {
  char nodes[64];
  snprintf(nodes, sizeof nodes, "cluster.nodes=%d", gpus / 8);
  char *extra = getenv("BENCH_SET");
  char *argv[] = {RH_BINARY, "run", scenario(), "--set", nodes, "--no-what-if", NULL, NULL, NULL};
  int k = what_if ? 5 : 6; /* the what-if: no flag */
  if (extra && *extra) {
    argv[k++] = "--set";
    argv[k++] = extra;
  }
  argv[k] = NULL;
  figures f = {.rc = -1};
  double t0 = rh_test_wall();
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    setenv("RH_PROGRESS", "0", 1);
    execv(RH_BINARY, argv);
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return f;
  f.wall = rh_test_wall() - t0;
  f.cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
          (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
  f.rss_kib = ru.ru_maxrss;
  f.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  /* the simulated step, from the summary's line "time ... : step X ms = ..." */
  char *text = rh_test_slurp(log);
  char *at = text ? strstr(text, " steps: step ") : NULL;
  f.step_ms = at ? strtod(at + strlen(" steps: step "), NULL) : -1;
  free(text);
  return f;
}

static int by_wall(const void *a, const void *b) {
  double x = ((const figures *)a)->wall, y = ((const figures *)b)->wall;
  return (x > y) - (x < y);
}

/* The median of `repeat` runs by wall time. */
static figures run(int gpus, bool what_if, int repeat, const char *log) {
  figures all[9];
  for (int i = 0; i < repeat; i++) all[i] = run_once(gpus, what_if, log);
  qsort(all, (size_t)repeat, sizeof all[0], by_wall);
  return all[repeat / 2];
}

int main(int argc, char **argv) {
  static const int defaults[] = {1024, 4096, 16384};
  int repeat = getenv("BENCH_REPEAT") ? atoi(getenv("BENCH_REPEAT")) : 1;
  if (repeat < 1 || repeat > 9) {
    fprintf(stderr, "bench_run: BENCH_REPEAT is 1 to 9\n");
    return 2;
  }
  char log[] = "/tmp/bench_run.XXXXXX";
  int fd = mkstemp(log);
  if (fd < 0) return 1;
  close(fd);
  printf("# rehearsal run %s --set cluster.nodes=GPUS/8%s%s, the median of %d run%s\n",
         scenario(), getenv("BENCH_SET") ? " --set " : "",
         getenv("BENCH_SET") ? getenv("BENCH_SET") : "", repeat, repeat == 1 ? "" : "s");
  printf("#  gpus   wall(s)    cpu(s)  peak(MiB)   step(ms) | with what-if: wall(s)  peak(MiB)  "
         "ratio\n");
  int n = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]), bad = 0;
  for (int i = 0; i < n; i++) {
    int gpus = argc > 1 ? atoi(argv[i + 1]) : defaults[i];
    if (gpus < 8 || gpus % 8) {
      fprintf(stderr, "bench_run: %s: a multiple of 8 GPUs\n", argv[i + 1]);
      return 2;
    }
    figures plain = run(gpus, false, repeat, log), with = run(gpus, true, repeat, log);
    printf("%7d %9.2f %9.2f %10.0f %10.4f | %21.2f %10.0f %6.2f%s\n", gpus, plain.wall, plain.cpu,
           plain.rss_kib / 1024.0, plain.step_ms, with.wall, with.rss_kib / 1024.0,
           with.wall / plain.wall, plain.rc || with.rc ? "  # failed" : "");
    fflush(stdout);
    bad += plain.rc != 0 || with.rc != 0;
  }
  unlink(log);
  return bad ? 1 : 0;
}
