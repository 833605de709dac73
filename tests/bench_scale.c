/*
 * bench_scale.c: how the simulation's cost grows with the job.  A data-parallel loop of 10 steps
 * of 4 buckets (25 ms of backward, then a 25 MiB allreduce, each) on nodes of 8 GPUs (400 GB/s
 * inside a node, 8 x 400 Gb/s NICs), exact network, grain auto.  For each GPU count it prints the
 * wall time and peak memory of the simulation (a child process per count: SimGrid runs once per
 * process), the simulated step, and the model check: the step the cost model predicts (four
 * backward slices, then the last bucket's allreduce, the others hidden behind backward when
 * they fit) against the simulated one.
 *   ./build/tests/bench_scale [GPUS...]        (default 64 256 1024 4096)
 *   RH_CHECK_COLLECTIVES=off ./build/tests/bench_scale ...   without the negotiation
 *   BENCH_STEPS=2 ./build/tests/bench_scale ...               2 steps (the cost of the first step)
 */
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int steps = 10; /* BENCH_STEPS in the environment: another count (2 or more) */
enum { BUCKETS = 4 };
static const double backward_s = 0.025, bucket_bytes = 25.0 * 1048576;

typedef struct figures {
  double step, predicted; /* seconds */
  int ok;
  long replayed; /* collectives replayed at their price */
} figures;

static int loop_rank(rh_ctx *ctx, void *arg) {
  figures *out = arg;
  size_t count = (size_t)(bucket_bytes / sizeof(float));
  double t0 = 0;
  for (int s = 0; s < steps; s++) {
    if (s == 1) t0 = rh_time(ctx); /* the first step sets things up */
    rh_request *req[BUCKETS];
    for (int b = 0; b < BUCKETS; b++) {
      if (rh_compute(ctx, backward_s * RH_TEST_BENCH_FLOPS) != RH_OK) return 1;
      if (rh_iallreduce(ctx, NULL, NULL, count, RH_FLOAT32, RH_SUM, NULL, &req[b]) != RH_OK) return 1;
    }
    for (int b = 0; b < BUCKETS; b++)
      if (rh_wait(req[b]) != RH_OK) return 1;
  }
  if (rh_rank(ctx) == 0) {
    double a = rh_predict_allreduce(ctx, (size_t)bucket_bytes);
    /* each allreduce runs behind the next backward slice when it fits; the last one is exposed */
    double hidden = fmax(0, a - backward_s) * (BUCKETS - 1);
    out->step = (rh_time(ctx) - t0) / (steps - 1);
    out->predicted = BUCKETS * backward_s + hidden + a;
    out->ok = 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (!rh_test_bench_steps("bench_scale", 2, &steps)) return 2;
  static const int defaults[] = {64, 256, 1024, 4096};
  int n = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
  printf("# bench_scale: %d steps x %d buckets (25 ms backward, 25 MiB allreduce each), nodes of 8 "
         "GPUs, 400 GB/s intra, 8 x 400 Gb/s NICs, exact network, grain auto, negotiation %s\n",
         steps, BUCKETS,
         getenv("RH_CHECK_COLLECTIVES") && !strcmp(getenv("RH_CHECK_COLLECTIVES"), "off") ? "off" : "on");
  /* cpu: the child's user and system time (one thread: about the wall time, unless the machine
   * gave the process less than a core) */
  printf("#%7s %10s %10s %12s %14s %14s %12s %10s\n", "gpus", "wall", "cpu", "peak_rss", "step",
         "predicted", "error", "replayed");
  printf("#%7s %10s %10s %12s %14s %14s %12s %10s\n", "", "(s)", "(s)", "(MiB)", "(ms)", "(ms)",
         "(relative)", "(of all)");
  int rc = 0;
  for (int i = 0; i < n; i++) {
    int gpus = argc > 1 ? atoi(argv[i + 1]) : defaults[i];
    if (gpus < 8 || gpus % 8) {
      fprintf(stderr, "bench_scale: %d: a multiple of 8 GPUs\n", gpus);
      return 2;
    }
    figures *f = rh_test_shared(sizeof *f);
    memset(f, 0, sizeof *f);
    fflush(stdout); /* the child must not print the parent's lines again */
    double t0 = rh_test_wall();
    pid_t pid = fork();
    if (pid == 0) {
      rh_cluster cl = rh_test_bench_cluster(gpus);
      rh_settings s;
      char err[256];
      if (rh_settings_init(&s, err, sizeof err) != RH_OK) _exit(2);
      rh_launch_config cfg = {.cluster = &cl, .settings = &s};
      rh_launch_result res = {0};
      int code = rh__launch(&cfg, loop_rank, f, &res);
      f->replayed = res.replayed;
      _exit(code);
    }
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return 1;
    double t = rh_test_wall() - t0;
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !f->ok) {
      printf("%8d %10.2f %10.2f %12.0f %14s %14s %12s  (the simulation failed: status %d)\n", gpus,
             t, cpu, (double)ru.ru_maxrss / 1024, "-", "-", "-", status);
      rc = 1;
      continue;
    }
    char replayed[32];
    snprintf(replayed, sizeof replayed, "%ld/%d", f->replayed, steps * BUCKETS);
    printf("%8d %10.2f %10.2f %12.0f %14.6f %14.6f %12.2e %10s\n", gpus, t, cpu,
           (double)ru.ru_maxrss / 1024, 1e3 * f->step, 1e3 * f->predicted,
           (f->step - f->predicted) / f->predicted, replayed);
    fflush(stdout);
  }
  return rc;
}
