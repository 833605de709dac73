/*
 * test_drills.c: the failure drills of tests/scenarios/drills/, each run as a user runs it.  Each
 * drill ends with its expected exit status and says what a user must read in its report (who
 * noticed, how the world re-formed, what it cost); none crashes, hangs or reports an UNEXPECTED
 * check; no drill loses committed work; each gives the same summary.json bytes twice.
 *
 * Two equivalences hold bit for bit, by an independent route:
 * - an elastic job that loses a node rolls back to its commit and goes on with fewer workers: its
 *   final parameters are those of the same job without the failure checkpointed at that commit
 *   and resumed by `--resume` on the GPUs that remain;
 * - a fixed-size job relaunched from its checkpoint after a crash ends where the same job ends
 *   without the crash.
 *
 * The scenarios shipped in scenarios/failures/ run too, once each, with what each must show (a
 * separate ctest entry: RH_TEST_FILTER=test_shipped_failure*), and the big job (another: test_shipped_big_job).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRILLS "tests/scenarios/drills/"

static char tmpdir[64];

typedef struct drill {
  const char *name;
  int rc;
  const char *says[4]; /* what its output must say (after a '!': must not say) */
} drill;

static const drill drills[] = {
    {"below-min-np", 1,
     {"the job ended: 2 slots remain, min_np is 3 (waited 5 s for hosts)",
      "the elastic job ended before its last step: fewer workers than min_np remain"}},
    {"cascading-failures", 0,
     {"elastic reset: 6 -> 2 ranks, nodes 0 (formed again: a failure hit the recovery)",
      "during the recovery of another failure"}},
    /* a crash in mid-allreduce: every survivor comes to the rendezvous at once */
    {"crash-during-allreduce", 0,
     {"elastic reset: 6 -> 4 ranks, nodes 0,2; node 1 left: failed: its process died\n",
      "rendezvous 1.000000 s + sync"}},
    {"crash-during-broadcast", 0,
     {"collective #1 broadcast (2 x int32, root 0): a peer died",
      "elastic reset: 6 -> 4 ranks, nodes 0,1; node 2 left: failed: its process died\n"}},
    {"crash-during-commit", 0,
     {"broadcast (3 x double, root 0): a peer died", "(0 steps begun since the last commit)"}},
    {"crash-during-recovery", 0,
     {"(formed again: a failure hit the recovery)", "during the recovery of another failure"}},
    {"crash-during-sync", 0,
     {"elastic reset: 6 -> 2 ranks, nodes 1 (formed again: a failure hit the recovery)",
      "elastic reset: 4 -> 2 ranks, nodes 1; node 2 left"}},
    /* a second crash of a node that left after the first: nothing to notice, nothing to judge */
    {"crash-of-a-node-that-left", 0,
     {"2. host_crash of node 1 at 1.006866 s (epoch 2, step 10; scenario line 29)\n"
      "     node 1 had already left the job (event 1)\n",
      "3. gpu_crash of node 1 GPU 1 at 1.007083 s (epoch 2, step 12; scenario line 30)\n"
      "     node 1 had already left the job (event 1)\n",
      "PASS  failures_noticed", "!nobody noticed it"}},
    {"crash-of-a-spare", 1,
     {"nobody noticed it", "FAIL  failures_noticed       the host_crash of node 3 (line 23)"}},
    /* more nodes than the reset line lists: cut after a whole number, the rest counted */
    {"crash-of-many-nodes-listed", 0,
     {"elastic reset: 80 -> 79 ranks, nodes 0,1,2,3,4,6,7,8,",
      ",59,60,61 and 18 more; node 5 left: failed: its process died\n"}},
    {"degraded-uplink", 0, {"link_degraded of node 0's uplink", "s slower in all"}},
    /* discovery changes that leave the assignment as it is cost no reset, as in Horovod */
    {"discovery-adds-a-failed-node", 0,
     {"elastic reset: 6 -> 4 ranks, nodes 0,2; node 1 left: failed: its process died\n",
      "!host change", "!4 -> 4 ranks"}},
    /* changes the driver's poll comes after the job's end to see are said never to happen */
    {"discovery-after-the-end", 0,
     {"1. host change: node 1 removed at 0.002000 s (scenario line 31)\n"
      "     never happened: the job ended at 0.014788 s, before the driver's poll at 1.000000 s "
      "(discovery_interval_s 1)\n",
      "2. host change: node 1 removed at 0.003000 s (scenario line 32)\n     never happened"}},
    /* no rank notices a change the driver's poll saw; the epoch cut short has no metrics */
    {"discovery-removes-every-host", 1,
     {"1. host change at 0.002512 s (epoch 1, step 15)\n"
      "     the job ended: 0 slots remain, min_np is 2 (waited 5 s for hosts)\n",
      "      0.06         -         -         -         -   0.002159      6\n", "!noticed +",
      "!0.06   0.00000"}},
    {"discovery-removes-twice", 0,
     {"1. host change at 0.002512 s (epoch 1, step 15)\n"
      "     elastic reset: 6 -> 4 ranks, nodes 0,2\n"
      "     cost 1.000000 s = rendezvous 1.000000 s + sync 0.000000 s\n",
      "!2. host change", "!formed again"}},
    {"discovery-removes-then-crash", 0,
     {"1. host change at 0.002512 s (epoch 1, step 15)\n"
      "     elastic reset: 6 -> 4 ranks, nodes 0,2\n"
      "     cost 1.000000 s = rendezvous 1.000000 s + sync 0.000000 s\n",
      "elastic reset: 4 -> 2 ranks, nodes 0; node 2 left: failed: its process died\n",
      "!formed again"}},
    {"failure-after-the-end", 1,
     {"never happened: the job ended at", "FAIL  failures_noticed"}},
    {"failure-in-the-first-step", 0,
     {"(epoch 1, step 1; scenario line 22)", "elastic reset: 6 -> 4 ranks"}},
    {"failure-in-the-last-step", 0,
     {"(epoch 3, step 16; scenario line 22)", "rendezvous 1.000000 s + sync",
      "elastic reset: 6 -> 4 ranks, nodes 0,2; node 1 left: failed: its process died\n"}},
    {"hang-during-commit", 0,
     {"ranks 3 never issued it", "node 1 left: failed: did not come back to the rendezvous",
      "detection 20.0000"}},
    {"host-added-then-removed", 0,
     {"elastic reset: 6 -> 8 ranks, nodes 0,1,2,3", "elastic reset: 8 -> 6 ranks, nodes 0,1,2"}},
    {"hung-rank", 0,
     {"ranks 0-4 waited 20 s; ranks 5 never issued it",
      "node 2 left: failed: did not come back to the rendezvous"}},
    {"link-down-for-good", 0, {"timed out waiting for a peer", "node 1 left: failed: unreachable"}},
    {"link-down-then-up", 0,
     {"link_down of node 1's uplink", "1 step ran in the window",
      "SKIP  no_committed_work_lost"}},
    {"no-recovery", 1, {"the job stopped (no restart policy)", "the run stopped on rank"}},
    /* the same events under the NCCL model, where collectives are priced, not simulated */
    {"nccl-crash-during-allreduce", 0,
     {"allreduce 'fc2.bias' (1810 x float, avg): a peer died",
      "elastic reset: 6 -> 4 ranks, nodes 0,2; node 1 left: failed: its process died\n"}},
    {"nccl-degraded-uplink", 0, {"link_degraded of node 0's uplink", "s slower in all"}},
    {"nccl-hung-rank", 0,
     {"ranks 0-2 waited 20 s; ranks 3-5 never issued it",
      "node 2 left: failed: did not come back to the rendezvous"}},
    {"nccl-link-down-for-good", 0,
     {"stall: collective #32: a link on its path is down (20 s, the collective timeout)",
      "node 1 left: failed: unreachable"}},
    {"nccl-link-down-then-up", 0,
     {"link_down of node 1's uplink", "1 step ran in the window, 3.000000 s slower in all"}},
    {"crash-during-coarse-allreduce", 0,
     {"elastic reset: 8 -> 6 ranks, nodes 0,2,3", "elastic reset: 6 -> 4 ranks, nodes 0,3",
      "PASS  failures_noticed"}},
    {"random-failures", 0,
     {"1. host_crash of node 1 at 9.440322 s (epoch 3, step 2; a random failure)",
      "2. gpu_crash of node 2 GPU 1", "PASS  no_committed_work_lost",
      "PASS  state_identical_after_reset after each of 2 resets"}},
    {"rank0-host-crash", 0, {"elastic reset: 6 -> 4 ranks, nodes 1,2; node 0 left"}},
    {"relaunch-exhausted", 1, {"relaunched at 30.", "the job stopped (max_restarts 1 reached)"}},
    /* a relaunch with no delay relaunches at the same instant, as one a nanosecond later does */
    {"relaunch-at-once", 0,
     {"relaunched at 0.000150 s on 4 ranks (nodes 0,1)", "PASS  failures_noticed",
      "!no restart policy"}},
    {"relaunch-no-node-left", 1,
     {"relaunched at 2.002002 s on 2 ranks (nodes 0)",
      "the job stopped (no node left to relaunch on)"}},
    {"relaunch-from-checkpoint", 0, {"relaunched at", "on 6 ranks (nodes 0,2,3)"}},
    {"straggler", 0, {"straggler of node 2 GPU 0", "s slower in all"}},
};

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "drills");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* scenarios/failures/: one per kind of event (big-job, weeks on 4096 GPUs, has its own test) */
static const drill shipped[] = {
    {"below-min-np", 1, {"the job ended: 2 slots remain, min_np is 4 (waited 10 s for hosts)"}},
    {"gpu-crash", 0, {"elastic reset: 6 -> 4 ranks, nodes 0,1; node 2 left: failed: its process died"}},
    {"hang", 0,
     {"noticed +30.000013 s after: ranks 0,1,3-5: timed out waiting for a peer",
      "node 1 left: failed: did not come back to the rendezvous"}},
    {"host-crash", 0, {"elastic reset: 6 -> 4 ranks, nodes 0,2; node 1 left: failed: its process died"}},
    {"hosts-added-and-removed", 0,
     {"elastic reset: 6 -> 8 ranks, nodes 0,1,2,3", "elastic reset: 8 -> 6 ranks, nodes 1,2,3"}},
    {"link-degraded", 0, {"link_degraded of node 0's uplink at 0.003000 s", "7 steps ran in the window"}},
    {"link-down-for-good", 0, {"elastic reset: 6 -> 4 ranks, nodes 0,1; node 2 left: failed: unreachable"}},
    {"link-down", 0, {"link_down of node 2's uplink", "until 5.006522 s: 1 step ran in the window"}},
    {"no-recovery", 1, {"the job stopped (no restart policy)"}},
    {"oci-elastic-host-crash", 0,
     {"elastic reset: 4 -> 2 ranks, nodes 0; node 1 left",
      "PASS  lr_schedule            every step's lr equals Horovod's callbacks (base 0.01 x 2)",
      "PASS  samples_once", "PASS  no_committed_work_lost"}},
    {"relaunch-from-checkpoint", 0, {"relaunched at 60.032259 s on 6 ranks (nodes 0,2,3)"}},
    {"straggler", 0, {"straggler of node 1 GPU 0", "25 steps ran in the window"}},
};

/* Runs `rehearsal run FILE --out DIR [--resume]`; returns its exit status, its stdout in *text
 * (its stderr is shown when the status is not `expect`). */
static int run(const char *file, const char *out, bool resume, int expect, char **text) {
  char std[300];
  snprintf(std, sizeof std, "%s.txt", out);
  char *argv[] = {RH_BINARY, "run", (char *)file, "--out", (char *)out,
                  resume ? "--resume" : NULL, NULL};
  int rc = rh_test_spawn_expect(argv, std, expect);
  *text = rh_test_slurp(std);
  assert_non_null(*text);
  return rc;
}

static void fnv_of(const char *text, char *fnv) {
  const char *p = strstr(text, "final parameters: FNV-1a ");
  assert_non_null(p);
  assert_int_equal(sscanf(p, "final parameters: FNV-1a %16s", fnv), 1);
}

/* Every scenario file of `dir` has its expectations in `list`, and every expectation its file
 * (but `unlisted`). */
static void every_file_listed(const char *dir, const drill *list, size_t n, const char *unlisted) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  size_t files = 0;
  for (struct dirent *de; (de = readdir(d));) {
    size_t len = strlen(de->d_name);
    if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0) continue;
    if (unlisted && strncmp(de->d_name, unlisted, len - 5) == 0 && strlen(unlisted) == len - 5)
      continue;
    files++;
    bool listed = false;
    for (size_t i = 0; i < n; i++)
      listed |= strlen(list[i].name) == len - 5 && strncmp(list[i].name, de->d_name, len - 5) == 0;
    if (!listed) fail_msg("%s%s has no expectations in test_drills.c", dir, de->d_name);
  }
  closedir(d);
  assert_int_equal(files, n);
}

static void test_every_drill_listed(void **state) {
  (void)state;
  every_file_listed(DRILLS, drills, sizeof drills / sizeof drills[0], NULL);
  every_file_listed("scenarios/failures/", shipped, sizeof shipped / sizeof shipped[0], "big-job");
}

/* Runs each scenario of `dir` in `list`: its exit status, what it must say, no unexpected
 * verdict, no committed work lost; `twice`: again, for the same summary.json bytes. */
static void run_all(const char *dir, const drill *list, size_t n, bool twice) {
  for (size_t i = 0; i < n; i++) {
    const drill *dr = &list[i];
    char file[200], out[200], again[220], *text, *text2;
    snprintf(file, sizeof file, "%s%s.yaml", dir, dr->name);
    /* the folder's name in the output's, as two folders hold drills of the same name (one
     * would resume from the other's checkpoints) */
    char tag[160];
    const char *end = dir + strlen(dir) - 1, *start = end;
    while (start > dir && start[-1] != '/') start--;
    snprintf(tag, sizeof tag, "%.*s-%s", (int)(end - start), start, dr->name);
    snprintf(out, sizeof out, "%s", rh_test_path(tmpdir, tag));
    snprintf(again, sizeof again, "%s-again", out);
    int rc = run(file, out, false, dr->rc, &text);
    print_message("%-28s exit %d\n", dr->name, rc);
    if (rc != dr->rc) fail_msg("%s: exit %d, expected %d\n%s", dr->name, rc, dr->rc, text);
    for (int k = 0; k < 4 && dr->says[k]; k++) {
      const char *say = dr->says[k];
      if (say[0] == '!' && strstr(text, say + 1))
        fail_msg("%s says \"%s\":\n%s", dr->name, say + 1, text);
      if (say[0] != '!' && !strstr(text, say))
        fail_msg("%s does not say \"%s\":\n%s", dr->name, say, text);
    }
    if (strstr(text, "UNEXPECTED")) fail_msg("%s: an unexpected verdict:\n%s", dr->name, text);
    if (strstr(text, "FAIL  no_committed_work_lost")) fail_msg("%s lost committed work:\n%s", dr->name, text);
    if (dr->rc == 0 && strstr(text, "FAIL ")) fail_msg("%s: a check failed:\n%s", dr->name, text);
    free(text);
    if (!twice) continue;
    /* the same numbers again, bit for bit */
    assert_int_equal(run(file, again, false, rc, &text2), rc);
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/summary.json", out);
    snprintf(b, sizeof b, "%s/summary.json", again);
    char *ja = rh_test_slurp(a), *jb = rh_test_slurp(b);
    assert_non_null(ja);
    assert_non_null(jb);
    if (strcmp(ja, jb) != 0) fail_msg("%s: two runs wrote different summaries", dr->name);
    free(ja);
    free(jb);
    free(text2);
  }
}

static void test_drills(void **state) {
  (void)state;
  run_all(DRILLS, drills, sizeof drills / sizeof drills[0], true);
}

static void test_shipped_failure_scenarios(void **state) {
  (void)state;
  /* once each: the drills show the reruns are bit-identical */
  run_all("scenarios/failures/", shipped, sizeof shipped / sizeof shipped[0], false);
}

/* Three weeks on 2048 GPUs with a real cluster's failure rate: it ends, every check passes, the
 * best commit interval of the replay is near Young's, and the recipe's loses a little goodput. */
static void test_shipped_big_job(void **state) {
  (void)state;
  char *text;
  assert_int_equal(run("scenarios/failures/big-job.yaml", rh_test_path(tmpdir, "big-job"), false, 0,
                       &text), 0);
  assert_null(strstr(text, "FAIL "));
  assert_non_null(strstr(text, "PASS  no_committed_work_lost"));
  assert_non_null(strstr(text, "PASS  commit_interval"));
  const char *best = strstr(text, "the best is ");
  assert_non_null(best);
  double off = 0, chosen = 0, top = 0;
  assert_int_equal(sscanf(best, "the best is %lf%% from Young's", &off), 1);
  const char *g = strstr(text, "expected goodput ");
  assert_non_null(g);
  assert_int_equal(sscanf(g, "expected goodput %lf%%", &chosen), 1);
  g = strstr(g + 1, "expected goodput ");
  assert_non_null(g);
  assert_int_equal(sscanf(g, "expected goodput %lf%%", &top), 1);
  print_message("best interval %+.0f%% from Young's; goodput %.2f%% chosen, %.2f%% best\n", off,
                chosen, top);
  assert_true(off > -25 && off < 25);
  assert_true(top >= chosen && chosen > 99);
  free(text);
}

/* The checkpoints of `dir` after global step `step` (and the epochs' ends after it) go. */
static void keep_checkpoints_until(const char *dir, long step, int epochs_done) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *de; (de = readdir(d));) {
    long g;
    int e;
    char tail[8], path[600];
    bool late = (sscanf(de->d_name, "checkpoint-step-%ld.bi%1s", &g, tail) == 2 && g > step) ||
                (sscanf(de->d_name, "checkpoint-%d.bi%1s", &e, tail) == 2 && e > epochs_done);
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (late) assert_int_equal(remove(path), 0);
  }
  closedir(d);
}

static void test_elastic_equals_resume(void **state) {
  (void)state;
  char *text, fnv_elastic[20], fnv_resumed[20];
  /* node 2 dies in epoch 2, step 7 (16 steps an epoch on 6 GPUs); the commit of step 4 holds */
  assert_int_equal(run(DRILLS "equivalence/elastic.yaml", rh_test_path(tmpdir, "eq-elastic"), false,
                       0, &text), 0);
  assert_non_null(strstr(text, "(3 steps begun since the last commit)"));
  assert_non_null(strstr(text, "elastic reset: 6 -> 4 ranks, nodes 0,1"));
  fnv_of(text, fnv_elastic);
  free(text);
  /* the same job without the failure, checkpointed every 4 steps; cut back to step 16 + 4 */
  char *dir = rh_test_path(tmpdir, "eq-steady");
  assert_int_equal(run(DRILLS "equivalence/steady.yaml", dir, false, 0, &text), 0);
  free(text);
  char ckpt[300];
  snprintf(ckpt, sizeof ckpt, "%s/checkpoints", dir);
  keep_checkpoints_until(ckpt, 20, 1);
  assert_int_equal(run(DRILLS "equivalence/resumed.yaml", dir, true, 0, &text), 0);
  fnv_of(text, fnv_resumed);
  print_message("elastic after the failure %s, resumed on 4 GPUs %s\n", fnv_elastic, fnv_resumed);
  assert_string_equal(fnv_elastic, fnv_resumed);
  free(text);
}

static void test_relaunch_equals_uninterrupted(void **state) {
  (void)state;
  char *text, fnv_relaunched[20], fnv_steady[20];
  assert_int_equal(run(DRILLS "relaunch-from-checkpoint.yaml", rh_test_path(tmpdir, "relaunch"),
                       false, 0, &text), 0);
  assert_non_null(strstr(text, "relaunched at"));
  fnv_of(text, fnv_relaunched);
  free(text);
  assert_int_equal(run(DRILLS "equivalence/steady.yaml", rh_test_path(tmpdir, "steady"), false, 0,
                       &text), 0);
  fnv_of(text, fnv_steady);
  free(text);
  print_message("relaunched %s, without the failure %s\n", fnv_relaunched, fnv_steady);
  assert_string_equal(fnv_relaunched, fnv_steady);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_drill_listed),
      cmocka_unit_test(test_drills),
      cmocka_unit_test(test_elastic_equals_resume),
      cmocka_unit_test(test_relaunch_equals_uninterrupted),
      cmocka_unit_test(test_shipped_failure_scenarios),
      cmocka_unit_test(test_shipped_big_job),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  if (getenv("RH_TEST_SKIP")) cmocka_set_skip_filter(getenv("RH_TEST_SKIP"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
