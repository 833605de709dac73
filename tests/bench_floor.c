/*
 * bench_floor.c: what SimGrid alone costs for the job bench_scale simulates, with none of
 * rehearsal's runtime in it.  For each GPU count it builds the very platform the simulator runs on
 * (cluster.c: one zone, one host per GPU; BENCH_PLATFORM=xml: the XML of a zone per node that
 * `rehearsal platform` prints, through SimGrid's loader) under the simulator's own settings
 * (rh_sim_settings), starts the two actors rehearsal gives each GPU (a worker and its
 * collectives' runner), and lets each of them do the least a rank does in every bucket: one timer
 * (the worker's 25 ms backward slice, the runner's collective, here 10 ms).  No message, no
 * negotiation, no route, no check.  It prints the time to load the platform, the time to create
 * the actors and run them, that time per rank and bucket, the peak memory, and how load and run
 * together grow from the first count, against N log N from it.
 *   ./build/tests/bench_floor [GPUS...]        (default 1024 2048 4096 8192 16384)
 *   BENCH_STEPS=2 ./build/tests/bench_floor ... (steps of 4 buckets; 10 by default)
 *   BENCH_PLATFORM=xml ./build/tests/bench_floor ... (the XML platform)
 */
#include "harness.h"
#include "platform.h"

#include <math.h>
#include <simgrid/actor.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

enum { BUCKETS = 4 };
static int steps = 10;

/* argv[1]: the timer's length in seconds */
static void timers(int argc, char **argv) {
  double s = argc > 1 ? strtod(argv[1], NULL) : 0;
  for (int i = 0; i < steps * BUCKETS; i++) sg_actor_sleep_for(s);
}

typedef struct figures {
  double load, run;
  long actors;
} figures;

/* One GPU count, in this (child) process: SimGrid runs once per process. */
static int floor_of(int gpus, figures *f) {
  rh_cluster cl = rh_test_bench_cluster(gpus);
  char *argv[RH_SIM_SETTINGS + 2];
  int argc = rh_sim_settings(&cl, "bench_floor", argv); /* the simulator's own */
  simgrid_init(&argc, argv);
  const char *how = getenv("BENCH_PLATFORM");
  double t0 = rh_test_wall();
  if (!rh_sim_platform_load(&cl, NULL, how && strcmp(how, "xml") == 0, NULL)) return 1;
  f->load = rh_test_wall() - t0;
  t0 = rh_test_wall(); /* the actors' creation, their stacks included, and the run */
  size_t count = sg_host_count();
  sg_host_t *hosts = sg_host_list();
  char wname[] = "worker", wtimer[] = "25e-3", rname[] = "runner", rtimer[] = "10e-3";
  for (size_t i = 0; i < count; i++) {
    if (strncmp(sg_host_get_name(hosts[i]), "gpu", 3) != 0) continue;
    char *wargv[] = {wname, wtimer, NULL}, *rargv[] = {rname, rtimer, NULL};
    sg_actor_create("worker", hosts[i], timers, 2, wargv);
    sg_actor_create("runner", hosts[i], timers, 2, rargv);
    f->actors += 2;
  }
  free(hosts);
  simgrid_run();
  f->run = rh_test_wall() - t0;
  return f->actors == 2L * gpus ? 0 : 1;
}

int main(int argc, char **argv) {
  if (!rh_test_bench_steps("bench_floor", 1, &steps)) return 2;
  static const int defaults[] = {1024, 2048, 4096, 8192, 16384};
  int n = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
  int *counts = malloc((size_t)n * sizeof *counts);
  if (!counts) return 1;
  for (int i = 0; i < n; i++) {
    char *end = NULL;
    long g = argc > 1 ? strtol(argv[i + 1], &end, 10) : defaults[i];
    if ((end && *end) || g < 8 || g % 8 || g > 1 << 20) {
      fprintf(stderr, "bench_floor: %s: a multiple of 8 GPUs\n", argv[i + 1]);
      return 2;
    }
    counts[i] = (int)g;
  }
  const char *how = getenv("BENCH_PLATFORM");
  printf("# bench_floor: SimGrid alone on bench_scale's platform (%s); 2 actors per GPU, each one timer "
         "per bucket, %d steps x %d buckets\n",
         how && strcmp(how, "xml") == 0 ? "XML, a zone per node" : "built in code, one zone", steps,
         BUCKETS);
  printf("#%7s %10s %10s %12s %12s %10s %10s\n", "gpus", "load", "run", "per_bucket", "peak_rss",
         "growth", "NlogN");
  printf("#%7s %10s %10s %12s %12s %10s %10s\n", "", "(s)", "(s)", "(us/rank)", "(MiB)",
         "(total)", "(allowed)");
  /* run: the actors' creation and the simulation; per_bucket: run over GPUs, steps and buckets */
  int rc = 0, first = 0;
  double first_total = 0;
  for (int i = 0; i < n; i++) {
    int gpus = counts[i];
    figures *f = rh_test_shared(sizeof *f);
    if (!f) return 1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(floor_of(gpus, f));
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (WIFEXITED(status)) printf("# %d GPUs: failed, exit %d\n", gpus, WEXITSTATUS(status));
      else printf("# %d GPUs: failed, signal %d\n", gpus, WTERMSIG(status));
      rc = 1;
      continue;
    }
    double total = f->load + f->run;
    if (!first) {
      first = gpus;
      first_total = total;
    }
    double nlogn = (double)gpus * log((double)gpus) / ((double)first * log((double)first));
    printf("%8d %10.4f %10.4f %12.2f %12.0f %10.1f %10.1f\n", gpus, f->load, f->run,
           1e6 * f->run / ((double)gpus * steps * BUCKETS), (double)ru.ru_maxrss / 1024,
           total / first_total, nlogn);
    fflush(stdout);
  }
  if (first)
    printf("# growth: load + run over those of %d GPUs; NlogN: N log N over %d log %d\n", first,
           first, first);
  free(counts);
  return rc;
}
