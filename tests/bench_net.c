/*
 * bench_net.c: what one epoch of a real network costs.  For each network it runs one epoch of
 * Fashion-MNIST (60,000 images, batch 32 per rank) on 4 simulated ranks (one node of 4 GPUs,
 * scenarios/accuracy/lenet5-fmnist-16gpu-scaled-warmup.yaml with its checks), in a child process,
 * and prints the wall time and peak memory.  The goal: LeNet-5 within 20 s on 2 cores.
 *   ./build/tests/bench_net [NETWORK...]            (default lenet5 mnist_net keras_fmnist_cnn)
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  static const char *const defaults[] = {"lenet5", "mnist_net", "keras_fmnist_cnn"};
  int n = argc > 1 ? argc - 1 : (int)(sizeof defaults / sizeof defaults[0]);
  const char *binary = getenv("BENCH_BINARY") ? getenv("BENCH_BINARY") : RH_BINARY;
  printf("# bench_net: %s run scenarios/accuracy/lenet5-fmnist-16gpu-scaled-warmup.yaml on 1 node "
         "of 4 GPUs, 1 epoch of 60000 images\n", binary);
  printf("#%-17s %10s %12s %6s\n", "network", "wall", "peak_rss", "exit");
  printf("#%-17s %10s %12s %6s\n", "", "(s)", "(MiB)", "");
  int rc = 0;
  for (int i = 0; i < n; i++) {
    const char *net = argc > 1 ? argv[i + 1] : defaults[i];
    char dir[64], set[96];
    if (rh_test_mkdtemp(dir, "bench-net") != 0) return 1;
    snprintf(set, sizeof set, "model.network=%s", net);
    char *args[] = {(char *)binary, "run", "scenarios/accuracy/lenet5-fmnist-16gpu-scaled-warmup.yaml",
                    "--no-what-if", "--out", dir, "--set", set, "--set", "cluster.nodes=1",
                    "--set", "cluster.gpus_per_node=4", "--set", "recipe.epochs=1", "--set",
                    "checks.accuracy_parity=false", "--set", "checks.expect_fail=[]", NULL};
    long rss = 0;
    fflush(stdout);
    double t0 = rh_test_wall();
    int code = rh_test_spawn_rss(args, "/dev/null", NULL, &rss);
    printf(" %-17s %10.2f %12.0f %6d\n", net, rh_test_wall() - t0, (double)rss / 1024, code);
    fflush(stdout);
    rh_test_rmdir(dir);
    if (code != 0) rc = 1;
  }
  return rc;
}
