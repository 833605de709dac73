/*
 * bench_repeat.c: how the cost of a training run grows with the job, where the coarse grain
 * charges the steady steps without running them (rh_repeat_steps).  For each GPU count it runs
 * `rehearsal run scenarios/default.yaml --no-what-if` on nodes of 8 GPUs with the NCCL network
 * model and 10^8 samples (hundreds of steps an epoch at 4,096 GPUs), in a child process, and
 * prints the child's wall time and peak memory.  Every step before the steady ones meets all
 * ranks once to agree on what to charge: a cost per meeting that grows faster than the ranks
 * shows here as wall time growing faster than the GPU count.
 *   ./build/tests/bench_repeat [GPUS...]                  (default 1024 4096 16384)
 *   BENCH_BINARY=path/to/rehearsal ./build/tests/bench_repeat ...   another build of the tool
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  static const int defaults[] = {1024, 4096, 16384};
  int n = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
  const char *binary = getenv("BENCH_BINARY") ? getenv("BENCH_BINARY") : RH_BINARY;
  printf("# bench_repeat: %s run scenarios/default.yaml --no-what-if, nodes of 8 GPUs, NCCL "
         "network model, 1e8 training samples\n", binary);
  printf("#%7s %10s %12s %6s\n", "gpus", "wall", "peak_rss", "exit");
  printf("#%7s %10s %12s %6s\n", "", "(s)", "(MiB)", "");
  int rc = 0;
  for (int i = 0; i < n; i++) {
    int gpus = argc > 1 ? atoi(argv[i + 1]) : defaults[i];
    if (gpus < 8 || gpus % 8) {
      fprintf(stderr, "bench_repeat: %d: a multiple of 8 GPUs\n", gpus);
      return 2;
    }
    char dir[64], nodes[64];
    if (rh_test_mkdtemp(dir, "bench-repeat") != 0) return 1;
    snprintf(nodes, sizeof nodes, "cluster.nodes=%d", gpus / 8);
    char *args[] = {(char *)binary, "run", "scenarios/default.yaml", "--no-what-if", "--out", dir,
                    "--set", nodes, "--set", "cluster.gpus_per_node=8", "--set",
                    "cluster.network_model=nccl", "--set", "data.train_samples=1e8", NULL};
    long rss = 0;
    fflush(stdout);
    double t0 = rh_test_wall();
    int code = rh_test_spawn_rss(args, NULL, NULL, &rss);
    printf("%8d %10.2f %12.0f %6d\n", gpus, rh_test_wall() - t0, (double)rss / 1024, code);
    fflush(stdout);
    rh_test_rmdir(dir);
    if (code != 0) rc = 1;
  }
  return rc;
}
