/*
 * bench_network_models.c: how much wall time the NCCL model costs against the exact network,
 * on the same training job at 64, 256 and 1024 GPUs (nodes of 8 H100 on 8 x 400G, ResNet-50 by
 * stages, 64 MiB buckets).  Each job runs `rehearsal run` once per model; the figures printed
 * are the wall seconds of each and their ratio (goal: the NCCL model under 1.5x the exact one).
 *   ./build/tests/bench_network_models [GPUS...]
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes the job at `gpus` GPUs with `model` and runs it; wall seconds, or -1 on a failure. */
static double run_job(const char *dir, int gpus, const char *model, double *step_ms) {
  char file[256], out[256], log[300];
  snprintf(file, sizeof file, "%s/job-%d-%s.yaml", dir, gpus, model);
  snprintf(out, sizeof out, "%s/out-%d-%s", dir, gpus, model);
  snprintf(log, sizeof log, "%s.txt", out);
  FILE *f = fopen(file, "w");
  if (!f) return -1;
  fprintf(f,
          "name: bench-%d-%s\n"
          "cluster:\n"
          "  node: dgx-h100\n"
          "  nodes: %d\n"
          "  network_model: %s\n"
          "model:\n"
          "  name: resnet50\n"
          "  layers:\n"
          "    - {name: conv1, parameters: 9536, forward_gflops_per_sample: 0.118}\n"
          "    - {name: layer1, parameters: 215808, forward_gflops_per_sample: 0.680}\n"
          "    - {name: layer2, parameters: 1219584, forward_gflops_per_sample: 1.030}\n"
          "    - {name: layer3, parameters: 7098368, forward_gflops_per_sample: 1.470}\n"
          "    - {name: layer4, parameters: 14964736, forward_gflops_per_sample: 0.800}\n"
          "    - {name: fc, parameters: 2049000, forward_gflops_per_sample: 0.002}\n"
          "data:\n"
          "  train_samples: %d\n"
          "  validation_samples: 0\n"
          "recipe:\n"
          "  batch_per_worker: 256\n"
          "  epochs: 1\n"
          "  checkpoint_every_epochs: 0\n"
          "collective:\n"
          "  fusion_threshold: 64MiB\n",
          gpus, model, gpus / 8, model, gpus * 256 * 50);
  fclose(f);
  char *argv[] = {RH_BINARY, "run", file, "--out", out, NULL};
  double t0 = rh_test_wall();
  int rc = rh_test_spawn(argv, log, NULL);
  double t = rh_test_wall() - t0;
  *step_ms = -1;
  char *text = rh_test_slurp(log);
  const char *at = text ? strstr(text, "step ") : NULL;
  while (at && sscanf(at, "step %lf ms", step_ms) != 1) at = strstr(at + 1, "step ");
  free(text);
  return rc == 0 ? t : -1;
}

int main(int argc, char **argv) {
  int sizes[8] = {64, 256, 1024}, n = 3;
  if (argc > 1) {
    n = 0;
    for (int i = 1; i < argc && n < 8; i++) sizes[n++] = atoi(argv[i]);
  }
  char dir[64];
  if (rh_test_mkdtemp(dir, "bench_models") != 0) return 1;
  printf("# the same job (ResNet-50, 50 steps, nodes of 8 H100) under both network models\n");
  printf("#%6s %12s %12s %9s %14s %14s\n", "GPUs", "exact (s)", "nccl (s)", "ratio",
         "exact step ms", "nccl step ms");
  int rc = 0;
  for (int i = 0; i < n; i++) {
    double se, sn;
    double e = run_job(dir, sizes[i], "exact", &se), c = run_job(dir, sizes[i], "nccl", &sn);
    if (e < 0 || c < 0) rc = 1;
    printf("%7d %12.2f %12.2f %9.2f %14.3f %14.3f\n", sizes[i], e, c, c / e, se, sn);
    fflush(stdout);
  }
  rh_test_rmdir(dir);
  return rc;
}
