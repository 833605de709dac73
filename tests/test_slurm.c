/*
 * test_slurm.c: jobs on a real Slurm (the localhost slurmctld and slurmd of tests/slurm/cluster.sh,
 * started by ctest's slurm_up fixture; skipped, exit 77, where there is none).
 *
 * - `srun --mpi=pmix -n 4 rehearsal-mpi run` ends with the simulator's parameters, bit for bit:
 *   ranks, local ranks and hosts come from Slurm through PMIx as they come from mpirun.
 * - srun without PMIx is refused with a message that says what to do, exit 2.
 * - A job Slurm cancels mid-run (scancel) leaves no output in its --out directory: results appear
 *   whole at the end or not at all.
 * - A 3-point sweep through `--launcher slurm` writes the same sweep.csv as the local launcher,
 *   byte for byte; run again, it reuses every point and submits nothing.
 * - A Slurm sweep stopped while its tasks wait (held) cancels them, says so, exits 130, and run
 *   again finishes with the local launcher's sweep.csv.
 * - The README's sbatch example for CPUs, `sbatch examples/slurm/cpu.sbatch` as written, on this
 *   one-node cluster (a 4-GPU scenario given through SCENARIO): the batch job ends with the
 *   simulator's parameters and --compare's line.
 * - A second localhost cluster (cluster.sh up and down) takes free ports of its own and, stopped,
 *   leaves the fixture's daemons running.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];

static int setup(void **state) {
  (void)state;
  setenv("RH_MPI_GPUS_PER_NODE", "1", 1); /* each process a node of the scenario */
  return rh_test_mkdtemp(tmpdir, "slurm");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static char *final_hash(const char *text, char *hash) {
  const char *p = text ? strstr(text, "final parameters: FNV-1a ") : NULL;
  assert_non_null(p);
  assert_int_equal(sscanf(p, "final parameters: FNV-1a %16s", hash), 1);
  return hash;
}

static void test_srun_same_parameters(void **state) {
  (void)state;
  const char *scenario = "tests/scenarios/mpi/train.yaml";
  char sim_out[300], mpi_out[300], a[17], b[17];
  snprintf(sim_out, sizeof sim_out, "%s", rh_test_path(tmpdir, "train-sim.txt"));
  snprintf(mpi_out, sizeof mpi_out, "%s", rh_test_path(tmpdir, "train-srun.txt"));
  char *sim[] = {RH_BINARY, "run", (char *)scenario, NULL};
  assert_int_equal(rh_test_spawn_expect(sim, sim_out, 0), 0);
  char *srun[] = {RH_SRUN, "--mpi=pmix", "-O", "-n", "4", RH_MPI_BINARY, "run", (char *)scenario,
                  NULL};
  assert_int_equal(rh_test_spawn_expect(srun, mpi_out, 0), 0);
  char *ts = rh_test_slurp(sim_out), *tm = rh_test_slurp(mpi_out);
  final_hash(ts, a);
  final_hash(tm, b);
  print_message("simulator %s, srun %s\n", a, b);
  assert_string_equal(a, b);
  assert_non_null(strstr(tm, "PASS  identical_parameters"));
  free(ts);
  free(tm);
}

static void test_srun_without_pmix(void **state) {
  (void)state;
  char err[300];
  snprintf(err, sizeof err, "%s", rh_test_path(tmpdir, "nopmix.err"));
  char *srun[] = {RH_SRUN, "--mpi=none", "-O", "-n", "2", RH_MPI_BINARY, "run",
                  "tests/scenarios/mpi/train.yaml", NULL};
  int rc = rh_test_spawn(srun, "/dev/null", err);
  char *text = rh_test_slurp(err);
  assert_non_null(text);
  assert_int_equal(rc, 2);
  assert_non_null(strstr(text, "rehearsal: started by srun without PMIx"));
  assert_non_null(strstr(text, "srun --mpi=pmix"));
  free(text);
}

/* The job's state code as squeue gives it ("" once Slurm no longer holds it). */
static void job_state(const char *job, char *state, size_t len) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "squeue -h -j %s -o %%t 2>/dev/null", job);
  FILE *p = popen(cmd, "r");
  state[0] = 0;
  if (p && !fgets(state, (int)len, p)) state[0] = 0;
  if (p) pclose(p);
  state[strcspn(state, "\n")] = 0;
}

static void test_scancel_leaves_nothing(void **state) {
  (void)state;
  char out[300], wrap[1200], job[64] = {0};
  char cmd[2600];
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "cancelled"));
  /* some 25 s of training on 2 processes, cancelled a second after it runs */
  snprintf(wrap, sizeof wrap,
           "--wrap=srun --mpi=pmix -O -n 4 %s run tests/scenarios/mpi/train.yaml "
           "--set recipe.epochs=300 --out %s", RH_MPI_BINARY, out);
  snprintf(cmd, sizeof cmd, "sbatch --parsable -n 4 -O --output=%s.log '%s'", out, wrap);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  assert_non_null(fgets(job, sizeof job, p));
  assert_int_equal(pclose(p), 0);
  job[strcspn(job, ";\n")] = 0;
  char st[16];
  for (int i = 0; i < 300; i++) { /* until it runs */
    job_state(job, st, sizeof st);
    if (strcmp(st, "R") == 0) break;
    sleep_s(0.1);
  }
  assert_string_equal(st, "R");
  sleep_s(1.5);
  snprintf(cmd, sizeof cmd, "scancel %s", job);
  assert_int_equal(system(cmd), 0);
  for (int i = 0; i < 300; i++) { /* until Slurm lets it go */
    job_state(job, st, sizeof st);
    if (!st[0]) break;
    sleep_s(0.1);
  }
  assert_string_equal(st, "");
  char *log = rh_test_slurp(rh_test_path(tmpdir, "cancelled.log"));
  print_message("job %s cancelled; its log:\n%s", job, log ? log : "(none)\n");
  assert_non_null(log);
  assert_non_null(strstr(log, "CANCELLED"));
  /* nothing in --out: not a result of the run, nor one cut short */
  struct stat sb;
  const char *names[] = {"summary.json", "epochs.txt", "steps.csv", "params.bin"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    assert_int_not_equal(stat(rh_test_path(out, names[i]), &sb), 0);
  free(log);
}

/* `rehearsal sweep` of the default scenario over 3 node counts into dir, with more flags; its
 * exit status, stderr into err. */
static int sweep(const char *dir, const char *err, const char *const *more, int nmore) {
  char *argv[16] = {RH_BINARY, "sweep", "scenarios/default.yaml", "--axis",
                    "cluster.nodes=1,2,4", "--out", (char *)dir};
  int k = 7;
  for (int i = 0; i < nmore; i++) argv[k++] = (char *)more[i];
  return rh_test_spawn(argv, "/dev/null", err);
}

static void assert_same_file(const char *a, const char *b) {
  char *ta = rh_test_slurp(a), *tb = rh_test_slurp(b);
  assert_non_null(ta);
  assert_non_null(tb);
  if (strcmp(ta, tb) != 0) fail_msg("%s and %s differ:\n%s---\n%s", a, b, ta, tb);
  free(ta);
  free(tb);
}

static void test_sweep_same_csv(void **state) {
  (void)state;
  char local[300], slurm[300], err[300];
  snprintf(local, sizeof local, "%s", rh_test_path(tmpdir, "sweep-local"));
  snprintf(slurm, sizeof slurm, "%s", rh_test_path(tmpdir, "sweep-slurm"));
  snprintf(err, sizeof err, "%s", rh_test_path(tmpdir, "sweep-slurm.err"));
  assert_int_equal(sweep(local, NULL, NULL, 0), 0);
  const char *launcher[] = {"--launcher", "slurm"};
  assert_int_equal(sweep(slurm, err, launcher, 2), 0);
  char *said = rh_test_slurp(err);
  print_message("%s", said);
  assert_non_null(strstr(said, "3 points submitted to Slurm as job "));
  assert_non_null(strstr(said, "rehearsal sweep: Slurm: 0 pending, 0 running, 3 done, 0 failed"));
  free(said);
  char a[320], b[320];
  snprintf(a, sizeof a, "%s/sweep.csv", local);
  snprintf(b, sizeof b, "%s/sweep.csv", slurm);
  assert_same_file(a, b);
  /* again: every point reused, nothing submitted */
  assert_int_equal(sweep(slurm, err, launcher, 2), 0);
  said = rh_test_slurp(err);
  assert_non_null(strstr(said, "reused 3 of 3 points"));
  assert_null(strstr(said, "submitted"));
  free(said);
  assert_same_file(a, b);
}

static void test_sweep_stopped_goes_on(void **state) {
  (void)state;
  char local[300], slurm[300], err[300];
  snprintf(local, sizeof local, "%s", rh_test_path(tmpdir, "sweep-local2"));
  snprintf(slurm, sizeof slurm, "%s", rh_test_path(tmpdir, "sweep-held"));
  snprintf(err, sizeof err, "%s", rh_test_path(tmpdir, "sweep-held.err"));
  assert_int_equal(sweep(local, NULL, NULL, 0), 0);
  /* the tasks are held: they wait until the sweep is stopped */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen("/dev/null", "w", stdout) || !freopen(err, "w", stderr)) _exit(126);
    execl(RH_BINARY, RH_BINARY, "sweep", "scenarios/default.yaml", "--axis", "cluster.nodes=1,2,4",
          "--out", slurm, "--launcher", "slurm", "--sbatch-arg=--hold", (char *)NULL);
    _exit(127);
  }
  assert_true(pid > 0);
  char *said = NULL;
  for (int i = 0; i < 300; i++) { /* until it has seen its tasks wait */
    free(said);
    said = rh_test_slurp(err);
    if (said && strstr(said, "Slurm: 3 pending, 0 running, 0 done, 0 failed")) break;
    sleep_s(0.1);
  }
  assert_non_null(strstr(said, "Slurm: 3 pending"));
  kill(pid, SIGINT);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  free(said);
  said = rh_test_slurp(err);
  print_message("%s", said);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 130);
  assert_non_null(strstr(said, "stopped by SIGINT: the Slurm job was cancelled, 0 of 3 points"));
  free(said);
  const char *launcher[] = {"--launcher", "slurm"};
  assert_int_equal(sweep(slurm, err, launcher, 2), 0);
  said = rh_test_slurp(err);
  assert_non_null(strstr(said, "3 points submitted"));
  free(said);
  char a[320], b[320];
  snprintf(a, sizeof a, "%s/sweep.csv", local);
  snprintf(b, sizeof b, "%s/sweep.csv", slurm);
  assert_same_file(a, b);
}

/* The README's command as written, `sbatch examples/slurm/cpu.sbatch`, on this one-node cluster:
 * its directives fit it (they asked for 2 nodes, and the job stayed PENDING).  The environment
 * picks a 4-GPU scenario of seconds, the build's binaries and the output directory. */
static void test_sbatch_cpu_example(void **state) {
  (void)state;
  char out[300], bin[600], cmd[2600];
  snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, "example"));
  snprintf(bin, sizeof bin, "%s", RH_BINARY);
  *strrchr(bin, '/') = 0;
  const char *scenario = "tests/scenarios/mpi/train.yaml";
  setenv("SCENARIO", scenario, 1);
  setenv("OUT", out, 1);
  setenv("REHEARSAL_BIN", bin, 1);
  /* -W waits for the job (and --parsable names it); a job still pending after 5 minutes fails */
  int rc = system("timeout 300 sbatch -W --parsable examples/slurm/cpu.sbatch > example.jobid");
  char *id = rh_test_slurp("example.jobid");
  unlink("example.jobid");
  assert_non_null(id);
  id[strcspn(id, "\n")] = 0;
  char log[64];
  snprintf(log, sizeof log, "rehearsal-cpu-%s.log", id); /* the script's --output */
  char *text = rh_test_slurp(log);
  print_message("sbatch -W: %d\n%s", rc, text ? text : "(no log)\n");
  if (rc != 0) {
    snprintf(cmd, sizeof cmd, "scancel %s; squeue -j %s", id, id);
    if (system(cmd) != 0) print_message("scancel %s failed\n", id);
  }
  unlink(log);
  free(id);
  assert_int_equal(rc, 0);
  assert_non_null(text);
  char a[17], b[17];
  final_hash(text, a);
  char simcmd[1200];
  snprintf(simcmd, sizeof simcmd, "%s/rehearsal run %s > %s", bin, scenario,
           rh_test_path(tmpdir, "example-sim.txt"));
  assert_int_equal(system(simcmd), 0);
  char *ts = rh_test_slurp(rh_test_path(tmpdir, "example-sim.txt"));
  final_hash(ts, b);
  assert_string_equal(a, b);
  assert_non_null(strstr(text, "  compared     steady step"));
  free(ts);
  free(text);
}

/* A second localhost Slurm (cluster.sh up, then down) beside the fixture's: it takes other ports,
 * and stopping it leaves the fixture's daemons, munged included, answering. */
static void test_second_cluster_beside(void **state) {
  (void)state;
  char dir[300], cmd[1200], conf[340];
  snprintf(dir, sizeof dir, "%s", rh_test_path(tmpdir, "second"));
  snprintf(conf, sizeof conf, "%s/slurm.conf", dir);
  unsetenv("RH_SLURMCTLD_PORT");
  unsetenv("RH_SLURMD_PORT");
  snprintf(cmd, sizeof cmd, "tests/slurm/cluster.sh up '%s' >/dev/null", dir);
  int up = system(cmd);
  snprintf(cmd, sizeof cmd, "grep -h Port= '%s' '%s' | sort | uniq -d | grep -q .", conf,
           getenv("SLURM_CONF"));
  bool shared = system(cmd) == 0; /* a port both configurations name */
  snprintf(cmd, sizeof cmd, "tests/slurm/cluster.sh down '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(up, 0);
  assert_false(shared);
  snprintf(cmd, sizeof cmd, "pgrep -f '[m]unged --key-file=%s/' >/dev/null", dir);
  if (system(cmd) == 0) fail_msg("the second cluster's munged is still running");
  /* the fixture's controller, slurmd and munged (srun authenticates through it) still answer */
  assert_int_equal(system("sinfo -h >/dev/null && srun -n 1 true"), 0);
}

int main(void) {
  /* the fixture's cluster: its configuration, and a controller that answers */
  const char *conf = getenv("SLURM_CONF");
  struct stat sb;
  if (!conf || stat(conf, &sb) != 0 || system("sinfo -h >/dev/null 2>&1") != 0) {
    printf("no Slurm cluster to run on (tests/slurm/cluster.sh up DIR, then SLURM_CONF): "
           "skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_srun_same_parameters),
      cmocka_unit_test(test_srun_without_pmix),
      cmocka_unit_test(test_scancel_leaves_nothing),
      cmocka_unit_test(test_sweep_same_csv),
      cmocka_unit_test(test_sweep_stopped_goes_on),
      cmocka_unit_test(test_sbatch_cpu_example),
      cmocka_unit_test(test_second_cluster_beside),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
