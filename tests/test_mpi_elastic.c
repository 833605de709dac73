/*
 * test_mpi_elastic.c: failures done to real processes (mpirun, one process per node of the
 * scenario, RH_MPI_GPUS_PER_NODE=1).  With RH_TEST_LAUNCHER=slurm the same drills run inside a
 * Slurm allocation (ctest's test_mpi_elastic_slurm: salloc, on the localhost Slurm of
 * tests/slurm/cluster.sh): fixed-size jobs under srun, elastic ones under `rehearsal elastic`,
 * whose mpirun takes the allocation's nodes.
 *
 * - A process SIGKILLed mid-run under `rehearsal elastic -np 4`: the three others finish the
 *   training, every check passes, and the final parameters are the simulator's for the same
 *   scenario, bit for bit (the same commit restored, the same world of three after it).
 * - A process SIGSTOPped in a fixed-size job under plain mpirun: each survivor reports the stall
 *   within the timeout + 1 s, the job ends, and nothing spins while it waits (the CPU time of the
 *   whole job stays far below what one busy core would burn).
 * - The same hang in a job that checkpoints, relaunched with --resume as a scheduler's requeue
 *   would: it reads its last checkpoint back and ends with the parameters of the job that never
 *   failed.
 * - The same hang in an elastic job: the survivors wait the rendezvous timeout for it, go on
 *   without it, and end with the simulator's parameters.
 * - The elastic mistakes (no commit, lr not rescaled, sampler not reset) give the verdicts and
 *   exit codes they give on the simulator.
 * - An elastic job whose driver is gone (its directory says world 0 broke, no driver answers):
 *   each rank says on stderr that no world was formed, and the report says why the job ended.
 * - Three processes of four killed at once with min_np 2: the driver forms no world, and says the
 *   job ended after no reset, short of min_np.
 * - Random failures from gpu_mtbf_hours: the real processes draw the simulator's failure, the
 *   same GPU at the same second of the job, and the job ends with the simulator's verdicts.
 * - Host discovery grows the job: the scenario's discovery adds a spare node a second in, its
 *   process (on standby until then) joins at the next commit, the world grows from 3 to 4 ranks
 *   with nothing committed lost, and the verdicts are the simulator's.  With Horovod's discovery
 *   script instead, a node that died stays blacklisted while the script still lists it; one that
 *   lists fewer slots than min_np ends the job after timeout_s, exit 1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];

static bool under_srun(void) {
  const char *l = getenv("RH_TEST_LAUNCHER");
  return l && strcmp(l, "slurm") == 0;
}

/* The launcher's words that start np processes of a fixed-size job, into argv (at most 8); their
 * count.  Under mpirun the variables named go along with -x; srun passes the whole environment.
 * srun's --kill-on-bad-exit=1 ends the step when a process fails, as mpirun does by default. */
static int launch_words(char **argv, const char *np) {
  int k = 0;
  if (under_srun()) {
    argv[k++] = "srun";
    argv[k++] = "--mpi=pmix";
    argv[k++] = "--kill-on-bad-exit=1";
    argv[k++] = "-O";
    argv[k++] = "-n";
    argv[k++] = (char *)np;
    return k;
  }
  argv[k++] = RH_MPIEXEC;
  argv[k++] = "--oversubscribe";
  argv[k++] = "-np";
  argv[k++] = (char *)np;
  argv[k++] = "-x";
  argv[k++] = "RH_MPI_GPUS_PER_NODE";
  if (getenv("RH_ELASTIC_DIR")) {
    argv[k++] = "-x";
    argv[k++] = "RH_ELASTIC_DIR";
  }
  return k;
}

static int setup(void **state) {
  (void)state;
  setenv("RH_MPI_GPUS_PER_NODE", "1", 1); /* each process a node of the scenario */
  return rh_test_mkdtemp(tmpdir, "mpi-elastic");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs argv with stdout and stderr into files; returns its exit status, the CPU seconds it and
 * everything it waited for used in *cpu, its wall seconds in *wall. */
static int spawn_measured(char *const argv[], const char *out, const char *err, double *cpu,
                          double *wall) {
  fflush(NULL);
  double t0 = seconds();
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr)) _exit(126);
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  assert_true(pid > 0 && wait4(pid, &status, 0, &ru) == pid);
  *wall = seconds() - t0;
  *cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void final_hash(const char *text, char *hash) {
  const char *p = text ? strstr(text, "final parameters: FNV-1a ") : NULL;
  assert_non_null(p);
  assert_int_equal(sscanf(p, "final parameters: FNV-1a %16s", hash), 1);
}

/* The scenario on the simulator: its output (caller frees) and exit status. */
static char *on_simulator(const char *scenario, const char *tag, int *rc) {
  char out[300];
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, tag));
  char *argv[] = {RH_BINARY, "run", (char *)scenario, NULL};
  *rc = rh_test_spawn(argv, out, NULL);
  char *text = rh_test_slurp(out);
  assert_non_null(text);
  return text;
}

/* The scenario under `rehearsal elastic` on real processes: stdout (caller frees), stderr in *err
 * (caller frees), exit status. */
static char *under_driver_with(const char *scenario, const char *tag, char **err, int *rc,
                               const char *flag, const char *value);

static char *under_driver(const char *scenario, const char *tag, char **err, int *rc) {
  return under_driver_with(scenario, tag, err, rc, NULL, NULL);
}

/* As under_driver, with one more flag of `rehearsal elastic` (NULL: none). */
static char *under_driver_with(const char *scenario, const char *tag, char **err, int *rc,
                               const char *flag, const char *value) {
  char out[300], errp[300];
  snprintf(out, sizeof out, "%s.out", rh_test_path(tmpdir, tag));
  snprintf(errp, sizeof errp, "%s.err", rh_test_path(tmpdir, tag));
  char *argv[16] = {RH_BINARY, "elastic", (char *)scenario, "--mpirun", RH_MPIEXEC, "--mpirun-arg",
                    "--oversubscribe"};
  int k = 7;
  if (flag) {
    argv[k++] = (char *)flag;
    argv[k++] = (char *)value;
  }
  char *rest[] = {"--", RH_MPI_BINARY, "run", (char *)scenario, NULL};
  for (int i = 0; rest[i]; i++) argv[k++] = rest[i];
  double cpu, wall;
  *rc = spawn_measured(argv, out, errp, &cpu, &wall);
  print_message("%s: exit %d after %.2f s (%.2f s of CPU)\n", scenario, *rc, wall, cpu);
  char *text = rh_test_slurp(out);
  *err = rh_test_slurp(errp);
  assert_non_null(text);
  assert_non_null(*err);
  return text;
}

static void test_killed_rank(void **state) {
  (void)state;
  const char *scenario = "tests/scenarios/mpi/elastic-crash.yaml";
  int rc_sim, rc;
  char *sim = on_simulator(scenario, "crash-sim", &rc_sim), *err;
  char *mpi = under_driver(scenario, "crash-mpi", &err, &rc);
  if (rc != 0) fail_msg("exit %d\n%s\n%s", rc, mpi, err);
  assert_non_null(strstr(err, "rank 3 (node 3) was killed by signal 9"));
  assert_non_null(strstr(err, "world 1: 3 ranks"));
  assert_non_null(strstr(mpi, "PASS  min_np_respected       the job trained on 3 to 4 workers"));
  assert_non_null(strstr(mpi, "PASS  no_committed_work_lost"));
  assert_non_null(strstr(mpi, "PASS  state_identical_after_reset after each of 1 resets"));
  assert_null(strstr(mpi, "FAIL"));
  char a[17], b[17];
  final_hash(sim, a);
  final_hash(mpi, b);
  print_message("simulator %s, real processes %s\n", a, b);
  assert_string_equal(a, b);
  assert_int_equal(rc_sim, 0);
  free(sim);
  free(mpi);
  free(err);
}

/* "rehearsal: rank R, T s into the job: stall: ..." lines: how many, and the latest T. */
static int stall_reports(const char *err, double *latest) {
  int n = 0;
  *latest = 0;
  for (const char *p = err; (p = strstr(p, "rehearsal: rank "));) {
    int rank;
    double t;
    if (sscanf(p, "rehearsal: rank %d, %lf s into the job: stall:", &rank, &t) == 2) {
      n++;
      if (t > *latest) *latest = t;
    }
    p++;
  }
  return n;
}

static void test_stopped_rank_fixed_size(void **state) {
  (void)state;
  const char *scenario = "tests/scenarios/mpi/hang.yaml";
  char out[300], errp[300];
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "hang.out"));
  snprintf(errp, sizeof errp, "%s", rh_test_path(tmpdir, "hang.err"));
  char *argv[16] = {0};
  int k = launch_words(argv, "4");
  argv[k++] = RH_MPI_BINARY;
  argv[k++] = "run";
  argv[k++] = (char *)scenario;
  double cpu, wall;
  int rc = spawn_measured(argv, out, errp, &cpu, &wall);
  char *err = rh_test_slurp(errp), *text = rh_test_slurp(out);
  assert_non_null(err);
  assert_non_null(text);
  double latest;
  int reports = stall_reports(err, &latest);
  print_message("exit %d after %.2f s; %d survivors reported the stall, the last %.3f s into the "
                "job; %.2f s of CPU in all\n", rc, wall, reports, latest, cpu);
  assert_int_not_equal(rc, 0); /* the job failed */
  assert_int_equal(reports, 3);
  assert_non_null(strstr(err, "ranks 1 never issued it"));
  /* the step it stopped in began well within the first second (about 30 steps of 3 ms) */
  assert_true(latest >= 2.0 && latest <= 2.0 + 1.0);
  assert_non_null(strstr(text, "the run stopped on rank 0: timed out waiting for a peer"));
  /* three ranks wait some 4 s (the timeout, then the job's end): a spinning wait would burn
   * 4 s of CPU for each (8 s on two cores); the whole job, start-up included, uses under one */
  assert_true(cpu < 3.0);
  free(err);
  free(text);
}

/* A fixed-size job's hang on real processes, as the replay at scale prices one: noticed at the
 * collective's timeout, the job ends; the scheduler relaunches it (here the test, as Slurm's
 * requeue would) with --resume in the same --out, it reads the last checkpoint back (whole, or
 * each rank's shard under full sharding), and it ends with the parameters of the job that never
 * failed (the simulator's, bit for bit). */
static void hang_then_relaunch(const char *tag, char **sets) {
  char dir[200], out[300], errp[300];
  snprintf(dir, sizeof dir, "%s", rh_test_path(tmpdir, tag));
  snprintf(out, sizeof out, "%s.0.out", dir);
  snprintf(errp, sizeof errp, "%s.0.err", dir);
  char *argv[24] = {0};
  int k = launch_words(argv, "4");
  char *first[] = {RH_MPI_BINARY, "run", "tests/scenarios/mpi/hang-checkpointed.yaml", "--out", dir};
  memcpy(argv + k, first, sizeof first);
  int n = k + 5;
  for (int i = 0; sets[i]; i++) argv[n++] = sets[i];
  double cpu, wall0, wall1, latest;
  int rc = spawn_measured(argv, out, errp, &cpu, &wall0);
  char *err = rh_test_slurp(errp);
  assert_non_null(err);
  assert_int_not_equal(rc, 0);
  assert_int_equal(stall_reports(err, &latest), 3);
  /* the detection: the collective's timeout, after the hang's step (within a few seconds of the
   * start, later on a loaded machine); rank 1 named as the one that never came */
  assert_non_null(strstr(err, "stall: "));
  assert_non_null(strstr(err, "ranks 1 never"));
  assert_true(latest >= 2.0 && latest <= 6.0);
  free(err);
  snprintf(out, sizeof out, "%s.1.out", dir);
  argv[k + 2] = "tests/scenarios/mpi/train-checkpointed.yaml";
  argv[n++] = "--resume";
  rc = spawn_measured(argv, out, "/dev/null", &cpu, &wall1);
  char *text = rh_test_slurp(out), hash[20], steady[20];
  assert_non_null(text);
  print_message("%s: the hang noticed %.2f s into the job, the job ended after %.2f s; the "
                "relaunch resumed and ended after %.2f s\n", tag, latest, wall0, wall1);
  assert_int_equal(rc, 0);
  assert_non_null(strstr(text, "# resumed after"));
  final_hash(text, hash);
  free(text);
  char *sim[16] = {RH_BINARY, "run", "tests/scenarios/mpi/train-checkpointed.yaml"};
  for (int i = 0; sets[i]; i++) sim[3 + i] = sets[i];
  snprintf(out, sizeof out, "%s.never-failed.out", dir);
  assert_int_equal(rh_test_spawn(sim, out, NULL), 0);
  text = rh_test_slurp(out);
  final_hash(text, steady);
  free(text);
  assert_string_equal(hash, steady);
}

static void test_hang_relaunched_from_checkpoint(void **state) {
  (void)state;
  char *whole[] = {NULL};
  char *sharded[] = {"--set", "recipe.sharding=full", "--set", "recipe.checkpoint_format=sharded",
                     NULL};
  hang_then_relaunch("relaunch-whole", whole);
  hang_then_relaunch("relaunch-sharded", sharded);
}

static void test_stopped_rank_elastic(void **state) {
  (void)state;
  const char *scenario = "tests/scenarios/mpi/elastic-hang.yaml";
  int rc_sim, rc;
  char *sim = on_simulator(scenario, "hang-sim", &rc_sim), *err;
  char *mpi = under_driver(scenario, "hang-mpi", &err, &rc);
  if (rc != 0) fail_msg("exit %d\n%s\n%s", rc, mpi, err);
  double latest;
  assert_int_equal(stall_reports(err, &latest), 3);
  assert_true(latest <= 2.0 + 1.0);
  assert_non_null(strstr(err, "rank 1 (node 1) did not come to the rendezvous"));
  assert_null(strstr(mpi, "FAIL"));
  char a[17], b[17];
  final_hash(sim, a);
  final_hash(mpi, b);
  assert_string_equal(a, b);
  free(sim);
  free(mpi);
  free(err);
}

static void test_mistakes_same_verdicts(void **state) {
  (void)state;
  const char *mistakes[] = {"scenarios/mistakes/no-commit.yaml",
                            "scenarios/mistakes/lr-not-rescaled-on-reset.yaml",
                            "scenarios/mistakes/sampler-not-reset.yaml"};
  for (size_t i = 0; i < sizeof mistakes / sizeof mistakes[0]; i++) {
    int rc_sim, rc;
    char tag[32], *err;
    snprintf(tag, sizeof tag, "mistake%zu", i);
    char *sim = on_simulator(mistakes[i], tag, &rc_sim);
    snprintf(tag, sizeof tag, "mistake%zu-mpi", i);
    char *mpi = under_driver(mistakes[i], tag, &err, &rc);
    char *vs = rh_test_verdicts(sim, false), *vm = rh_test_verdicts(mpi, false);
    if (strcmp(vs, vm) != 0 || rc != rc_sim)
      fail_msg("%s: exit %d on the simulator, %d on real processes\n%s---\n%s\n%s", mistakes[i],
               rc_sim, rc, vs, vm, err);
    assert_non_null(strstr(vm, "[expected]"));
    free(vs);
    free(vm);
    free(sim);
    free(mpi);
    free(err);
  }
}

static void test_driver_gone(void **state) {
  (void)state;
  const char *scenario = "tests/scenarios/mpi/elastic-no-driver.yaml";
  char dir[300], out[300], errp[300];
  snprintf(dir, sizeof dir, "%s", rh_test_path(tmpdir, "no-driver"));
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "no-driver.out"));
  snprintf(errp, sizeof errp, "%s", rh_test_path(tmpdir, "no-driver.err"));
  assert_int_equal(mkdir(dir, 0755), 0);
  /* what a driver writes when it sees a process die, before it is killed in turn */
  FILE *f = fopen(rh_test_path(dir, "w0.broken"), "w");
  assert_non_null(f);
  fputs("a process died\n", f);
  assert_int_equal(fclose(f), 0);
  setenv("RH_ELASTIC_DIR", dir, 1);
  char *argv[16] = {0};
  int k = launch_words(argv, "2");
  argv[k++] = RH_MPI_BINARY;
  argv[k++] = "run";
  argv[k++] = (char *)scenario;
  double cpu, wall;
  int rc = spawn_measured(argv, out, errp, &cpu, &wall);
  unsetenv("RH_ELASTIC_DIR");
  char *err = rh_test_slurp(errp), *text = rh_test_slurp(out);
  assert_non_null(err);
  assert_non_null(text);
  print_message("exit %d after %.2f s\n%s", rc, wall, err);
  assert_int_not_equal(rc, 0);
  const char *why = "the elastic driver formed no world in";
  const char *said = strstr(err, why);
  assert_non_null(said); /* by both ranks */
  assert_non_null(strstr(said + 1, why));
  assert_non_null(strstr(text, "failures\n"));
  assert_non_null(strstr(strstr(text, "failures\n"), "the job ended on rank 0: the elastic driver "
                                                       "formed no world in"));
  free(err);
  free(text);
}

static void test_too_few_left(void **state) {
  (void)state;
  int rc;
  char *err, *mpi = under_driver("tests/scenarios/mpi/elastic-three-crash.yaml", "three-mpi", &err,
                                 &rc);
  const char *says[] = {"rehearsal elastic: the job ends: 1 worker remains, min_np is 2\n",
                        "rehearsal elastic: the job ended after 0 resets, in ",
                        " s, when no world could form (1 worker remains, min_np is 2); rank 0 of "
                        "the last world exited with 1\n"};
  for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
    if (!strstr(err, says[i])) fail_msg("exit %d; does not say \"%s\":\n%s", rc, says[i], err);
  assert_int_equal(rc, 1);
  assert_non_null(strstr(mpi, "the elastic job ended before its last step: fewer workers than "
                              "min_np remain"));
  free(mpi);
  free(err);
}

static void test_random_failure(void **state) {
  (void)state;
  const char *scenario = "tests/scenarios/mpi/elastic-random.yaml";
  int rc_sim, rc;
  char *sim = on_simulator(scenario, "random-sim", &rc_sim), *err;
  int node_sim = -1, gpu_sim = -1;
  double at_sim = -1;
  const char *f = strstr(sim, "1. gpu_crash of node ");
  assert_non_null(f);
  assert_int_equal(sscanf(f, "1. gpu_crash of node %d GPU %d at %lf s", &node_sim, &gpu_sim,
                          &at_sim), 3);
  assert_non_null(strstr(f, "a random failure"));
  char *mpi = under_driver(scenario, "random-mpi", &err, &rc);
  int rank = -1, node = -1;
  double when = -1, at = -1;
  const char *k = strstr(err, "a random gpu_crash drawn for");
  assert_non_null(k);
  while (k > err && k[-1] != '\n') k--;
  assert_int_equal(sscanf(k, "rehearsal: rank %d (node %d), %lf s into the job: a random gpu_crash "
                             "drawn for %lf s", &rank, &node, &when, &at), 4);
  print_message("the simulator: node %d at %.6f s; real processes: node %d drawn for %.3f s, "
                "killed %.3f s into the job\n", node_sim, at_sim, node, at, when);
  assert_int_equal(node, node_sim);
  assert_true(fabs(at - at_sim) < 1e-3); /* the same draw, printed to the millisecond */
  assert_true(when >= at);
  char *vs = rh_test_verdicts(sim, true), *vm = rh_test_verdicts(mpi, true);
  if (strcmp(vs, vm) != 0 || rc != rc_sim)
    fail_msg("exit %d on the simulator, %d on real processes\n%s---\n%s\n%s", rc_sim, rc, vs, vm,
             err);
  free(vs);
  free(vm);
  free(sim);
  free(mpi);
  free(err);
}

static void test_discovery_grows(void **state) {
  (void)state;
  const char *scenario = "tests/scenarios/mpi/elastic-grow.yaml";
  int rc_sim, rc;
  char *sim = on_simulator(scenario, "grow-sim", &rc_sim), *err;
  assert_non_null(strstr(sim, "elastic reset: 3 -> 4 ranks, nodes 0,1,2,3"));
  char *mpi = under_driver(scenario, "grow-mpi", &err, &rc);
  if (rc != 0) fail_msg("exit %d\n%s\n%s", rc, mpi, err);
  const char *says[] = {"rehearsal elastic: world 0: 3 ranks on the hosts discovered; 1 process on "
                        "standby\n",
                        "host discovery: node 3 added (1 slot)\n",
                        "hosts were added\n",
                        "rehearsal elastic: world 1: 4 ranks, ranks 0-2 of world 0 in order, then 1 "
                        "from added hosts\n"};
  for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
    if (!strstr(err, says[i])) fail_msg("does not say \"%s\":\n%s", says[i], err);
  assert_non_null(strstr(mpi, "PASS  min_np_respected       the job trained on 3 to 4 workers"));
  assert_non_null(strstr(mpi, "PASS  no_committed_work_lost"));
  assert_non_null(strstr(mpi, "PASS  identical_parameters   parameters identical, bit for bit, on all "
                              "4 ranks"));
  char *vs = rh_test_verdicts(sim, true), *vm = rh_test_verdicts(mpi, true);
  if (strcmp(vs, vm) != 0 || rc != rc_sim)
    fail_msg("exit %d on the simulator, %d on real processes\n%s---\n%s", rc_sim, rc, vs, vm);
  free(vs);
  free(vm);
  free(sim);
  free(mpi);
  free(err);
}

static void test_discovery_script_blacklists(void **state) {
  (void)state;
  int rc;
  char *err, *mpi = under_driver_with("tests/scenarios/mpi/elastic-grow-crash.yaml", "grow-crash",
                                      &err, &rc, "--host-discovery-script",
                                      "tests/scenarios/mpi/discovery-after-reset.sh");
  if (rc != 0) fail_msg("exit %d\n%s\n%s", rc, mpi, err);
  const char *says[] = {"rank 1 (node 1) was killed by signal 9",
                        "rehearsal elastic: world 1: 2 ranks, ranks 0,2 of world 0 in order\n",
                        "host discovery: node 3 added (1 slot)\n",
                        "rehearsal elastic: world 2: 3 ranks, ranks 0,1 of world 1 in order, then 1 "
                        "from added hosts\n"};
  for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
    if (!strstr(err, says[i])) fail_msg("does not say \"%s\":\n%s", says[i], err);
  /* node 1, listed by the script all along, is never taken again */
  assert_null(strstr(err, "node 1 added"));
  assert_non_null(strstr(mpi, "PASS  min_np_respected       the job trained on 2 to 3 workers"));
  assert_non_null(strstr(mpi, "PASS  no_committed_work_lost"));
  assert_null(strstr(mpi, "FAIL"));
  free(mpi);
  free(err);
}

static void test_discovery_too_few_hosts(void **state) {
  (void)state;
  int rc;
  char *err, *mpi = under_driver_with("tests/scenarios/mpi/elastic-grow.yaml", "too-few-hosts",
                                      &err, &rc, "--host-discovery-script", "echo node0:1");
  const char *says[] = {"rehearsal elastic: 1 slot discovered, min_np is 2: waiting up to 2 s "
                        "(timeout_s) for more\n",
                        "rehearsal elastic: the job ends: 1 slot discovered in 2 s, min_np is 2\n",
                        "rehearsal: process 0: the elastic job ended: 1 slot discovered in 2 s, "
                        "min_np is 2\n",
                        "rehearsal elastic: the job ended after 0 resets, in "};
  for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
    if (!strstr(err, says[i])) fail_msg("exit %d; does not say \"%s\":\n%s", rc, says[i], err);
  assert_int_equal(rc, 1);
  free(mpi);
  free(err);
}

int main(void) {
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_stopped_rank_fixed_size),
      cmocka_unit_test(test_hang_relaunched_from_checkpoint),
      cmocka_unit_test(test_stopped_rank_elastic),
      cmocka_unit_test(test_mistakes_same_verdicts),
      cmocka_unit_test(test_driver_gone),
      cmocka_unit_test(test_too_few_left),
      cmocka_unit_test(test_random_failure),
      cmocka_unit_test(test_discovery_grows),
      cmocka_unit_test(test_discovery_script_blacklists),
      cmocka_unit_test(test_discovery_too_few_hosts),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  if (getenv("RH_TEST_SKIP")) cmocka_set_skip_filter(getenv("RH_TEST_SKIP"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
