/*
 * test_mpi_sharded.c: the sharded step on real processes.  The seed's recipe on 4 MPI processes
 * under full sharding (the gradients reduce-scattered by the runtime's ring over MPI's messages,
 * the default `collectives: runtime`, the parameters allgathered) ends on the very bits the
 * simulator's 4 ranks end on, for mnist_net and LeNet-5; ZeRO-1 with the gradients allreduced
 * (reduce_scatter: false) ends on DDP's bits; hybrid sharding (2 hosts of 2) ends on the
 * simulator's bits too.
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
static const char seed[] = "scenarios/seeds/lenet5-mnist-pytorch.yaml";

/* The final parameters' FNV-1a of the seed (one epoch of 8,192 images) with `net` and
 * `sharding` (reduce_scatter `rs`), on the simulator or on 4 processes. */
static void run(bool mpi, const char *net, const char *sharding, const char *rs, char *hash) {
  char set_net[64], set_sh[64], set_rs[64], tag[96];
  snprintf(set_net, sizeof set_net, "model.network=%s", net);
  snprintf(set_sh, sizeof set_sh, "recipe.sharding=%s", sharding);
  snprintf(set_rs, sizeof set_rs, "recipe.reduce_scatter=%s", rs);
  snprintf(tag, sizeof tag, "%s-%s-%s-%s.txt", mpi ? "mpi" : "sim", net, sharding, rs);
  char log[300];
  snprintf(log, sizeof log, "%s", rh_test_path(tmpdir, tag));
  char *sets[] = {"--set", set_net, "--set", set_sh, "--set", set_rs, "--set", "recipe.epochs=1",
                  "--set", "data.train_samples=8192", "--set", "checks.resume_from_epoch=0"};
  char *argv[32];
  int k = 0;
  if (mpi) {
    setenv("RH_MPI_GPUS_PER_NODE", "2", 1); /* the scenario's 2 hosts of 2 GPUs */
    char *head[] = {RH_MPIEXEC, "--oversubscribe", "-np", "4", "-x", "RH_MPI_GPUS_PER_NODE",
                    RH_MPI_BINARY};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) argv[k++] = head[i];
  } else {
    argv[k++] = RH_BINARY;
  }
  argv[k++] = "run";
  argv[k++] = (char *)seed;
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) argv[k++] = sets[i];
  argv[k] = NULL;
  int rc = rh_test_spawn(argv, log, NULL);
  char *text = rh_test_slurp(log);
  bool sharded = strcmp(sharding, "none") != 0;
  if (rc != 0 || (sharded && !strstr(text, "PASS  sharded_equivalence")) || strstr(text, "FAIL"))
    fail_msg("%s: exit %d\n%s", tag, rc, text);
  const char *p = strstr(text, "final parameters: FNV-1a ");
  assert_non_null(p);
  assert_int_equal(sscanf(p, "final parameters: FNV-1a %16s", hash), 1);
  free(text);
}

static void test_full_sharding_same_bits(void **state) {
  (void)state;
  static const char *const nets[] = {"mnist_net", "lenet5"};
  for (int i = 0; i < 2; i++) {
    char sim[17], mpi[17];
    run(false, nets[i], "full", "true", sim);
    run(true, nets[i], "full", "true", mpi);
    print_message("%s full: simulator %s, 4 processes %s\n", nets[i], sim, mpi);
    assert_string_equal(mpi, sim);
  }
}

/* Hybrid: reduce-scattered inside each of the 2 hosts, allreduced across them, gathered inside:
 * the simulator's bits. */
static void test_hybrid_sharding_same_bits(void **state) {
  (void)state;
  char sim[17], mpi[17];
  run(false, "lenet5", "hybrid", "true", sim);
  run(true, "lenet5", "hybrid", "true", mpi);
  print_message("lenet5 hybrid: simulator %s, 4 processes %s\n", sim, mpi);
  assert_string_equal(mpi, sim);
}

static void test_allreduced_shards_are_ddp(void **state) {
  (void)state;
  char ddp[17], mpi[17];
  run(false, "mnist_net", "none", "true", ddp);
  run(true, "mnist_net", "optimizer", "false", mpi);
  assert_string_equal(mpi, ddp);
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "mpi-sharded");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_full_sharding_same_bits),
                                     cmocka_unit_test(test_hybrid_sharding_same_bits),
                                     cmocka_unit_test(test_allreduced_shards_are_ddp)};
  return cmocka_run_group_tests(tests, setup, teardown);
}
