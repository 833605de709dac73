/*
 * test_mpi_targets.c: the same scenario on both targets.  A seed recipe run for real through MPI
 * (4 processes, pretend hosts of 2 as the scenario's) ends with the parameters it ends with on the
 * simulator, bit for bit: the runtime runs the same algorithms over both, so the reductions happen
 * in the same order.  A real run sets its measured step time beside the simulated one, a process
 * count that is not the scenario's is refused, and a placement that is not its nodes is said.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

static char *in_tmp(const char *name) { return rh_test_path(tmpdir, name); }

/* The run's "final parameters: FNV-1a X" into hash (17 bytes). */
static void final_hash(const char *text, char *hash) {
  const char *p = text ? strstr(text, "final parameters: FNV-1a ") : NULL;
  assert_non_null(p);
  assert_int_equal(sscanf(p, "final parameters: FNV-1a %16s", hash), 1);
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "targets");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

static void test_seed_recipe_same_bits_on_both_targets(void **state) {
  (void)state;
  const char *scenario = "scenarios/seeds/lenet5-mnist-pytorch.yaml";
  char sim_dir[300], hash_sim[17], hash_mpi[17];
  snprintf(sim_dir, sizeof sim_dir, "%s", in_tmp("sim"));
  /* two epochs of 6,000 images: the Net trains in C on both targets (minutes for the whole set) */
  char *sim[] = {RH_BINARY, "run", (char *)scenario, "--out", sim_dir, "--set",
                 "data.train_samples=6000", "--set", "recipe.epochs=2", "--set",
                 "checks.resume_from_epoch=1", NULL};
  assert_int_equal(rh_test_spawn_expect(sim, in_tmp("sim.txt"), 0), 0);
  char *text = rh_test_slurp(in_tmp("sim.txt"));
  final_hash(text, hash_sim);
  free(text);

  char compare[320];
  snprintf(compare, sizeof compare, "%s/summary.json", sim_dir);
  setenv("RH_MPI_GPUS_PER_NODE", "2", 1); /* the scenario's 2 hosts of 2 GPUs */
  char *mpi[] = {RH_MPIEXEC, "--oversubscribe", "-np", "4", "-x", "RH_MPI_GPUS_PER_NODE",
                 RH_MPI_BINARY, "run", (char *)scenario, "--compare", compare, "--set",
                 "data.train_samples=6000", "--set", "recipe.epochs=2", "--set",
                 "checks.resume_from_epoch=1", NULL};
  int rc = rh_test_spawn(mpi, in_tmp("mpi.txt"), in_tmp("mpi.err"));
  text = rh_test_slurp(in_tmp("mpi.txt"));
  if (rc != 0) {
    char *err = rh_test_slurp(in_tmp("mpi.err"));
    print_error("mpirun: exit %d\n%s\n%s\n", rc, text ? text : "", err ? err : "");
    free(err);
  }
  assert_int_equal(rc, 0);
  final_hash(text, hash_mpi);
  print_message("final parameters: simulator %s, MPI %s\n", hash_sim, hash_mpi);
  assert_string_equal(hash_sim, hash_mpi);
  assert_null(strstr(text, "FAIL"));
  /* the measured step beside the simulated one */
  assert_non_null(strstr(text, "compared     steady step"));
  assert_non_null(strstr(text, "(measured) against"));
  free(text);
}

static void test_wrong_process_count_is_refused(void **state) {
  (void)state;
  char *mpi[] = {RH_MPIEXEC, "--oversubscribe", "-np", "2", RH_MPI_BINARY, "run",
                 "scenarios/seeds/lenet5-mnist-pytorch.yaml", NULL};
  int rc = rh_test_spawn(mpi, NULL, in_tmp("np.err"));
  char *err = rh_test_slurp(in_tmp("np.err"));
  assert_non_null(err);
  assert_non_null(strstr(err, "the scenario's cluster has 4 GPUs but 2 processes were started"));
  assert_int_not_equal(rc, 0);
  free(err);
}

/* Four processes on this one machine, for a scenario of 2 nodes of 2 GPUs: the placement that
 * differs from the scenario is said (it was used silently, and the parameters then differed from
 * the simulator's); with RH_MPI_GPUS_PER_NODE=2 the placement is the scenario's and nothing is
 * said. */
static void test_other_placement_is_said(void **state) {
  (void)state;
  char *mpi[] = {RH_MPIEXEC, "--oversubscribe", "-np", "4", "-x", "RH_MPI_GPUS_PER_NODE",
                 RH_MPI_BINARY, "collective", "scenarios/seeds/lenet5-mnist-pytorch.yaml", "--max",
                 "1KiB", NULL};
  setenv("RH_MPI_GPUS_PER_NODE", "2", 1);
  assert_int_equal(rh_test_spawn(mpi, NULL, in_tmp("placed.err")), 0);
  char *err = rh_test_slurp(in_tmp("placed.err"));
  assert_null(strstr(err, "note: the 4 processes"));
  free(err);
  setenv("RH_MPI_GPUS_PER_NODE", "4", 1); /* one host of 4: as an unset variable on one machine */
  assert_int_equal(rh_test_spawn(mpi, NULL, in_tmp("other.err")), 0);
  err = rh_test_slurp(in_tmp("other.err"));
  assert_non_null(strstr(err, "note: the 4 processes run on 1 host (4 processes each) where the "
                              "scenario has 2 nodes (2, 2 GPUs each)"));
  free(err);
  unsetenv("RH_MPI_GPUS_PER_NODE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seed_recipe_same_bits_on_both_targets),
      cmocka_unit_test(test_wrong_process_count_is_refused),
      cmocka_unit_test(test_other_placement_is_said),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
