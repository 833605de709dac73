/*
 * test_mpi_collectives.c: every collective exact on real processes, through the MPI backend, with
 * the same checks as on the simulator.  ctest runs it under mpirun with 2, 3 and 4 processes
 * (and pretend hosts of 2, so that hierarchical allreduce runs too).  Every rank prints its count
 * of failures; the exit code is non-zero when any rank saw one.  Linked with the GPU flavour of
 * the backend it is test_gpu_collectives: the same checks through NCCL on device memory (exit 77,
 * skipped, where there is no GPU).
 */
#include "collective_checks.h"
#include "harness.h"

#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int provided, size, rank;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  /* the cluster the cost model and the modelled compute use: one node of `size` GPUs */
  rh_cluster cl = rh_test_cluster(1, size, NULL);
  rh_settings s;
  char err[128];
  rh_settings_init(&s, err, sizeof err);
  s.value[RH_SETTING_PIPELINE_CHUNK] = 64; /* many chunks in the pipelined broadcast */
  const char *algo = getenv("RH_TEST_ALGORITHM");
  if (algo) rh_settings_parse(RH_SETTING_ALGORITHM, algo, &s.value[RH_SETTING_ALGORITHM]);
  rh_launch_config cfg = {.cluster = &cl, .settings = &s};
  rh_launch_result res;
  int rc = rh__launch(&cfg, rh_test_all_collectives, NULL, &res);
  /* the plain closing line ctest's readers understand, from rank 0 */
  if (rc == 77) printf("no CUDA device found: skipping the GPU collectives\n");
  else if (res.rank == 0)
    printf("mpi collectives on %d processes: %d passed, %d failed\n", size,
           res.failed_ranks ? size - res.failed_ranks : size, res.failed_ranks);
  free(cl.gpus_per_node);
  return rc;
}
