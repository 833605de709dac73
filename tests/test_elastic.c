/*
 * test_elastic.c: elastic training and faults on the simulator, through the public API.  A small
 * program counts, step by step, the ranks taking part (an allreduce of ones) into an accumulator
 * that it commits every 5 steps; what each survivor ends with is derived here from the steps each
 * world ran, independently of the runtime:
 *
 *   a node crashes in step 12's allreduce: steps 0-11 on 6 ranks, back to the commit of step 10,
 *   steps 10-19 on the 4 survivors: 10 x 6 + 10 x 4 = 100, with Horovod's rank reassignment;
 *   a GPU hangs: the collective times out, the rendezvous waits for it, its node leaves;
 *   fewer than min_np remain: a clean end with RH_ERR_TOO_FEW after the slots timeout;
 *   discovery adds a node: the next commit re-forms the world without a restore;
 *   discovery removes a node: its workers leave with RH_ERR_EXCLUDED, nothing is restored;
 *   a fixed-size job relaunches on a spare node after the relaunch time;
 *   a link down for 2 s lengthens the job by 2 s; for good, its node leaves after the timeout;
 *   a straggler at half speed adds half of its compute to every step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 20, COMMIT = 5, SLOTS = 16, MAXEV = 256 };
#define STEP_FLOPS 1e11 /* 10 ms at the test cluster's 10 TFLOP/s */

/* What each worker ended with, by GPU slot (shared with the simulation's child process). */
typedef struct outcome {
  int ran;       /* 1 when the worker returned */
  int rank, size, restarts;
  int status;
  int32_t step;
  double acc;
  double committed[STEPS / COMMIT + 1]; /* when each commit of the first world ended */
} outcome;

static outcome *out;
static rh_event *events;

typedef struct program {
  int32_t step;
  double acc;
  rh_state *state;
} program;

/* The slot of this worker: its host's name is "gpu<slot>" (a test's knowledge of the backend). */
#include <simgrid/host.h>
static int my_slot(void) {
  int slot = -1;
  sscanf(sg_host_get_name(sg_host_self()), "gpu%d", &slot);
  return slot;
}

static rh_status train(rh_ctx *ctx, rh_state *state, void *arg) {
  program *p = arg;
  (void)state;
  while (p->step < STEPS) {
    rh_step_begin(ctx, 0, p->step);
    rh_status st = rh_compute(ctx, STEP_FLOPS);
    double one = 1;
    if (st == RH_OK) st = rh_allreduce(ctx, NULL, NULL, 1 << 18, RH_FLOAT32, RH_SUM, NULL);
    if (st == RH_OK) st = rh_allreduce(ctx, &one, &one, 1, RH_FLOAT64, RH_SUM, NULL);
    if (st != RH_OK) return st;
    p->acc += one;
    p->step++;
    if (p->step % COMMIT == 0) {
      st = rh_state_commit(p->state);
      if (st != RH_OK) return st;
      if (out[my_slot()].committed[p->step / COMMIT] == 0)
        out[my_slot()].committed[p->step / COMMIT] = rh_time(ctx);
    }
  }
  return RH_OK;
}

static int program_main(rh_ctx *ctx, void *arg) {
  (void)arg;
  program p = {0};
  p.state = rh_state_create(ctx);
  rh_state_register(p.state, "step", &p.step, 1, RH_INT32);
  rh_state_register(p.state, "acc", &p.acc, 1, RH_FLOAT64);
  rh_status st = rh_elastic_run(ctx, p.state, train, &p);
  int slot = my_slot();
  outcome o = {.ran = 1, .rank = rh_rank(ctx), .size = rh_size(ctx), .restarts = rh_restarts(ctx),
               .status = st, .step = p.step, .acc = p.acc};
  memcpy(o.committed, out[slot].committed, sizeof o.committed);
  out[slot] = o;
  rh_state_free(p.state);
  return st == RH_OK ? 0 : 1;
}

static rh_elastic_config elastic_defaults(void) {
  return (rh_elastic_config){.min_np = 2, .rendezvous = 1.0, .rendezvous_timeout = 30,
                             .slots_timeout = 60, .worker_start = 0.5, .discovery_interval = 0.01};
}

static rh_fault fault(rh_fault_kind kind, int node, int gpu) {
  return (rh_fault){.kind = kind, .node = node, .gpu = gpu, .at = -1, .epoch = -1,
                    .duration = INFINITY, .factor = 1};
}

static int run(int nodes, int spares, const rh_fault *faults, int nfaults,
               const rh_elastic_config *el, const rh_restart_config *rs, double timeout,
               double *end, int *nev) {
  rh_cluster cl = rh_test_cluster(nodes, 2, NULL);
  cl.spares = spares;
  int *g = realloc(cl.gpus_per_node, (size_t)(nodes + spares) * sizeof(int));
  for (int i = 0; i < nodes + spares; i++) g[i] = 2;
  cl.gpus_per_node = g;
  rh_settings s = rh_test_settings(timeout);
  rh_fault_plan plan = {.faults = faults, .nfaults = nfaults, .seed = 1};
  rh_test_job job = {.faults = &plan, .elastic = el, .restart = rs};
  memset(out, 0, SLOTS * sizeof *out); /* the commit times too */
  int rc = rh_test_simulate_job(&cl, &s, &job, program_main, NULL, end, events, MAXEV, nev);
  free(cl.gpus_per_node);
  return rc;
}

static const rh_event *find(int n, rh_event_kind kind, int nth) {
  for (int i = 0; i < n; i++)
    if (events[i].kind == kind && nth-- == 0) return &events[i];
  return NULL;
}

static void show(int n) {
  static const char *names[] = {[RH_EV_FAULT] = "fault",       [RH_EV_HEALED] = "healed",
                                [RH_EV_NOTICED] = "noticed",   [RH_EV_RESTORED] = "restored",
                                [RH_EV_WORLD] = "world",       [RH_EV_SYNCED] = "synced",
                                [RH_EV_LEFT] = "left",         [RH_EV_HOSTS] = "hosts",
                                [RH_EV_STOPPED] = "stopped",   [RH_EV_RELAUNCH] = "relaunch",
                                [RH_EV_ENDED] = "ended",       [RH_EV_RESET] = "reset"};
  for (int i = 0; i < n; i++)
    print_message("  %.6f %-8s gen %u rank %d node %d %s %s a=%g b=%g\n", events[i].time,
                  names[events[i].kind], events[i].generation, events[i].rank, events[i].node,
                  rh_status_string(events[i].status), events[i].text, events[i].a, events[i].b);
}

/* ---- crash ----------------------------------------------------------------------------------- */

static void test_host_crash_mid_allreduce(void **state) {
  (void)state;
  rh_elastic_config el = elastic_defaults();
  rh_fault f = fault(RH_FAULT_HOST_CRASH, 1, -1);
  f.epoch = 0;
  f.step = 12;
  f.during = RH_PHASE_ALLREDUCE;
  f.after = 1e-5;
  int n = 0;
  assert_int_equal(run(3, 0, &f, 1, &el, NULL, 600, NULL, &n), 0);
  show(n);
  /* survivors: nodes 0 and 2 keep their order, node 2's GPUs become ranks 2 and 3 */
  int expect_rank[] = {0, 1, -1, -1, 2, 3};
  for (int slot = 0; slot < 6; slot++) {
    if (slot == 2 || slot == 3) {
      assert_int_equal(out[slot].ran, 0); /* died with the node */
      continue;
    }
    assert_int_equal(out[slot].ran, 1);
    assert_int_equal(out[slot].status, RH_OK);
    assert_int_equal(out[slot].rank, expect_rank[slot]);
    assert_int_equal(out[slot].size, 4);
    assert_int_equal(out[slot].step, STEPS);
    assert_true(out[slot].acc == 10 * 6 + 10 * 4);
  }
  const rh_event *fe = find(n, RH_EV_FAULT, 0), *seen = find(n, RH_EV_NOTICED, 0);
  const rh_event *rest = find(n, RH_EV_RESTORED, 0), *w1 = find(n, RH_EV_WORLD, 1);
  assert_non_null(fe);
  assert_non_null(seen);
  assert_non_null(rest);
  assert_non_null(w1);
  assert_int_equal(fe->step, 12);
  assert_true(seen->status == RH_ERR_PEER_DEAD); /* a neighbour's message failed at once */
  assert_true(seen->time == fe->time);           /* detection: the network error, no timeout */
  assert_true(rest->b == 3);                     /* steps 10, 11 and 12 were rolled back */
  /* the work lost runs from the commit after step 10 to the crash: the state was saved just
   * before the commit's host check (a 24-byte broadcast) returned to the program */
  assert_true(rest->a <= out[0].committed[2] && out[0].committed[2] - rest->a < 1e-4);
  const rh_event *synced = find(n, RH_EV_SYNCED, 1);
  assert_non_null(synced);
  double lost = fe->time - rest->a, cost = synced->time - rest->a;
  print_message("lost work %.6f s; cost %.6f s = lost + detection 0 + rendezvous %.6f + sync %.6f\n",
                lost, cost, w1->time - seen->time, synced->time - w1->time);
  assert_true(fabs(cost - (lost + (seen->time - fe->time) + (w1->time - seen->time) +
                           (synced->time - w1->time))) < 1e-12);
  assert_true(synced->time - w1->time < 1e-4); /* two tiny buffers broadcast among 4 ranks */
  assert_string_equal(w1->text, "nodes 0,2");
  assert_true(w1->a == 4);
  /* the new world forms once the survivors are in, plus the rendezvous time */
  assert_true(w1->time - seen->time >= el.rendezvous - 1e-9 && w1->time - seen->time < el.rendezvous + 1e-3);
  assert_non_null(find(n, RH_EV_LEFT, 0));
  assert_int_equal(find(n, RH_EV_LEFT, 0)->node, 1);
}

/* ---- hang ------------------------------------------------------------------------------------ */

static void test_hang_is_a_timeout_then_a_rendezvous_timeout(void **state) {
  (void)state;
  rh_elastic_config el = elastic_defaults();
  rh_fault f = fault(RH_FAULT_HANG, 1, 0);
  f.epoch = 0;
  f.step = 12;
  int n = 0;
  double timeout = 5;
  assert_int_equal(run(3, 0, &f, 1, &el, NULL, timeout, NULL, &n), 0);
  show(n);
  const rh_event *fe = find(n, RH_EV_FAULT, 0), *seen = find(n, RH_EV_NOTICED, 0);
  const rh_event *w1 = find(n, RH_EV_WORLD, 1);
  assert_non_null(fe);
  assert_non_null(seen);
  assert_non_null(w1);
  assert_true(seen->status == RH_ERR_TIMEOUT);
  assert_true(seen->time - fe->time >= timeout && seen->time - fe->time < timeout + 0.02);
  /* the rendezvous waits for the hung worker, then its node leaves */
  assert_true(w1->time - seen->time >= el.rendezvous_timeout + el.rendezvous - 1e-9 &&
              w1->time - seen->time < el.rendezvous_timeout + el.rendezvous + 1e-3);
  assert_string_equal(w1->text, "nodes 0,2");
  assert_int_equal(out[2].ran, 0);                 /* the hung worker was killed */
  assert_int_equal(out[3].status, RH_ERR_EXCLUDED); /* its neighbour left with the node */
  for (int slot = 0; slot < 6; slot++)
    if (slot != 2 && slot != 3) assert_true(out[slot].acc == 100 && out[slot].status == RH_OK);
}

/* ---- min_np ---------------------------------------------------------------------------------- */

static void test_below_min_np_ends_cleanly(void **state) {
  (void)state;
  rh_elastic_config el = elastic_defaults();
  el.min_np = 5;
  rh_fault f = fault(RH_FAULT_HOST_CRASH, 1, -1);
  f.epoch = 0;
  f.step = 7;
  int n = 0;
  assert_int_equal(run(3, 0, &f, 1, &el, NULL, 600, NULL, &n), 1);
  show(n);
  const rh_event *seen = find(n, RH_EV_NOTICED, 0), *end = find(n, RH_EV_ENDED, 0);
  assert_non_null(end);
  assert_true(end->status == RH_ERR_TOO_FEW);
  assert_non_null(strstr(end->text, "4 slots remain, min_np is 5"));
  assert_true(end->time - seen->time >= el.slots_timeout - 1e-9 && end->time - seen->time < el.slots_timeout + 1e-3);
  for (int slot = 0; slot < 6; slot++)
    if (slot != 2 && slot != 3) assert_int_equal(out[slot].status, RH_ERR_TOO_FEW);
}

/* ---- discovery ------------------------------------------------------------------------------- */

static void test_host_added_joins_at_the_next_commit(void **state) {
  (void)state;
  rh_elastic_config el = elastic_defaults();
  rh_host_change add = {.at = 0.02, .node = 2, .added = true};
  el.changes = &add;
  el.nchanges = 1;
  int n = 0;
  assert_int_equal(run(2, 1, NULL, 0, &el, NULL, 600, NULL, &n), 0);
  show(n);
  /* the commit after step 5 (at about 50 ms) sees the change: 5 x 4 + 15 x 6 */
  for (int slot = 0; slot < 6; slot++) {
    assert_int_equal(out[slot].status, RH_OK);
    assert_int_equal(out[slot].size, 6);
    assert_true(out[slot].acc == 5 * 4 + 15 * 6);
  }
  assert_null(find(n, RH_EV_RESTORED, 0)); /* nothing was restored */
  const rh_event *w1 = find(n, RH_EV_WORLD, 1);
  assert_string_equal(w1->text, "nodes 0,1,2");
}

static void test_host_removed_leaves_without_restore(void **state) {
  (void)state;
  rh_elastic_config el = elastic_defaults();
  rh_host_change rm = {.at = 0.02, .node = 0, .added = false};
  el.changes = &rm;
  el.nchanges = 1;
  int n = 0;
  assert_int_equal(run(3, 0, NULL, 0, &el, NULL, 600, NULL, &n), 0);
  show(n);
  assert_int_equal(out[0].status, RH_ERR_EXCLUDED);
  assert_int_equal(out[1].status, RH_ERR_EXCLUDED);
  for (int slot = 2; slot < 6; slot++) {
    assert_int_equal(out[slot].status, RH_OK);
    assert_int_equal(out[slot].rank, slot - 2); /* node 1 now holds rank 0 */
    assert_true(out[slot].acc == 5 * 6 + 15 * 4);
  }
  assert_null(find(n, RH_EV_RESTORED, 0));
  assert_null(find(n, RH_EV_SYNCED, 1)); /* removing hosts needs no sync (Horovod's skip_sync) */
}

/* ---- relaunch -------------------------------------------------------------------------------- */

static void test_fixed_size_job_relaunches_on_a_spare(void **state) {
  (void)state;
  rh_restart_config rs = {.relaunch = 10, .max_restarts = 1};
  rh_fault f = fault(RH_FAULT_GPU_CRASH, 1, 1);
  f.epoch = 0;
  f.step = 12;
  int n = 0;
  assert_int_equal(run(3, 1, &f, 1, NULL, &rs, 600, NULL, &n), 0);
  show(n);
  const rh_event *stop = find(n, RH_EV_STOPPED, 0), *again = find(n, RH_EV_RELAUNCH, 0);
  assert_non_null(stop);
  assert_non_null(again);
  assert_true(again->time - stop->time == rs.relaunch);
  /* nodes 0 and 2, then the spare node 3; node 1 failed */
  assert_string_equal(find(n, RH_EV_WORLD, 1)->text, "nodes 0,2,3");
  for (int slot = 0; slot < 8; slot++) {
    if (slot == 2 || slot == 3) continue;
    assert_int_equal(out[slot].restarts, 1);
    assert_int_equal(out[slot].size, 6);
    assert_true(out[slot].acc == STEPS * 6); /* the program started again from nothing */
  }
}

/* ---- links and stragglers -------------------------------------------------------------------- */

static void test_link_down_for_a_while_is_a_delay(void **state) {
  (void)state;
  rh_elastic_config el = elastic_defaults();
  double base = 0, slow = 0;
  int n = 0;
  assert_int_equal(run(3, 0, NULL, 0, &el, NULL, 5, &base, &n), 0);
  rh_fault f = fault(RH_FAULT_LINK_DOWN, 1, -1);
  f.uplink = true;
  f.epoch = 0;
  f.step = 5;
  f.during = RH_PHASE_ALLREDUCE;
  f.after = 1e-5;
  f.duration = 2;
  assert_int_equal(run(3, 0, &f, 1, &el, NULL, 5, &slow, &n), 0);
  show(n);
  print_message("base %.9f s, link down for 2 s: %.9f s\n", base, slow);
  assert_null(find(n, RH_EV_NOTICED, 0)); /* nothing failed */
  /* the stalled messages wait out the window, less the few microseconds of latency they were
   * already paying when it began */
  assert_true(slow - base <= 2.0 && slow - base > 2.0 - 1e-5);
  for (int slot = 0; slot < 6; slot++) assert_true(out[slot].acc == STEPS * 6);
}

static void test_link_down_for_good_removes_its_node(void **state) {
  (void)state;
  rh_elastic_config el = elastic_defaults();
  rh_fault f = fault(RH_FAULT_LINK_DOWN, 2, -1);
  f.uplink = true;
  f.epoch = 0;
  f.step = 12;
  int n = 0;
  assert_int_equal(run(3, 0, &f, 1, &el, NULL, 5, NULL, &n), 0);
  show(n);
  assert_true(find(n, RH_EV_NOTICED, 0)->status == RH_ERR_TIMEOUT);
  assert_string_equal(find(n, RH_EV_WORLD, 1)->text, "nodes 0,1");
  assert_int_equal(out[4].status, RH_ERR_EXCLUDED);
  for (int slot = 0; slot < 4; slot++) assert_true(out[slot].acc == 100);
}

static void test_straggler_slows_every_step(void **state) {
  (void)state;
  double base = 0, slow = 0;
  int n = 0;
  assert_int_equal(run(3, 0, NULL, 0, NULL, NULL, 600, &base, &n), 0);
  rh_fault f = fault(RH_FAULT_STRAGGLER, 0, 1);
  f.at = 0;
  f.factor = 0.5;
  assert_int_equal(run(3, 0, &f, 1, NULL, NULL, 600, &slow, &n), 0);
  /* each step waits for the straggler: its 10 ms of compute take 20 ms */
  print_message("base %.9f s, straggler at half speed: %.9f s\n", base, slow);
  assert_true(fabs((slow - base) - STEPS * 0.010) < 1e-9);
}

/* ---- a degraded link, by the alpha-beta formula ----------------------------------------------- */

static double *allreduce_time;

static int one_allreduce(rh_ctx *ctx, void *arg) {
  size_t count = *(size_t *)arg;
  double t0 = rh_time(ctx);
  rh_status st = rh_allreduce(ctx, NULL, NULL, count, RH_FLOAT32, RH_SUM, NULL);
  if (rh_rank(ctx) == 0) *allreduce_time = rh_time(ctx) - t0;
  return st == RH_OK ? 0 : 1;
}

static double ring_time(double bytes, int p, double alpha, double bw) {
  /* 2(p-1) steps of bytes/p at the pace of the slowest edge */
  return 2.0 * (p - 1) * (alpha + bytes / p / bw);
}

static void test_degraded_uplink_is_the_alpha_beta_amount(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(2, 2, NULL); /* 150 GB/s, 0.7 us GPU links; 2 x 12.5 GB/s NICs, 5 us */
  rh_settings s = rh_test_settings(600);
  s.value[RH_SETTING_GRAIN] = RH_GRAIN_FINE;
  s.value[RH_SETTING_ALGORITHM] = RH_ALGO_RING;
  size_t count = 1 << 22; /* 16 MiB */
  double bytes = 4.0 * (double)count, healthy = 0, degraded = 0;
  rh_fault f = fault(RH_FAULT_LINK_DEGRADED, 0, -1);
  f.uplink = true;
  f.at = 0;
  f.duration = 100;
  f.factor = 0.5;
  f.extra_latency = 20e-6;
  rh_fault_plan plan = {.faults = &f, .nfaults = 1};
  rh_test_job job = {.faults = &plan};
  assert_int_equal(rh_test_simulate_job(&cl, &s, NULL, one_allreduce, &count, NULL, NULL, 0, NULL), 0);
  healthy = *allreduce_time;
  assert_int_equal(rh_test_simulate_job(&cl, &s, &job, one_allreduce, &count, NULL, NULL, 0, NULL), 0);
  degraded = *allreduce_time;
  /* the ring's slowest edge crosses the uplinks: 2 GPU hops and 2 NIC hops of latency, the NICs'
   * bandwidth; degraded, half of it and 20 us more per message */
  double alpha = 2 * cl.intra_lat + 2 * cl.nic_lat, nic = cl.nics_per_node * cl.nic_bw;
  double want_healthy = ring_time(bytes, 4, alpha, nic < cl.intra_bw ? nic : cl.intra_bw);
  double want_degraded = ring_time(bytes, 4, alpha + 20e-6, 0.5 * nic);
  print_message("healthy %.9f s (alpha-beta %.9f), degraded %.9f s (alpha-beta %.9f)\n", healthy,
                want_healthy, degraded, want_degraded);
  assert_true(fabs(healthy - want_healthy) <= 1e-9 * want_healthy);
  assert_true(fabs(degraded - want_degraded) <= 1e-9 * want_degraded);
  free(cl.gpus_per_node);
}

int main(void) {
  out = rh_test_shared(SLOTS * sizeof *out);
  events = rh_test_shared(MAXEV * sizeof *events);
  allreduce_time = rh_test_shared(sizeof *allreduce_time);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_crash_mid_allreduce),
      cmocka_unit_test(test_hang_is_a_timeout_then_a_rendezvous_timeout),
      cmocka_unit_test(test_below_min_np_ends_cleanly),
      cmocka_unit_test(test_host_added_joins_at_the_next_commit),
      cmocka_unit_test(test_host_removed_leaves_without_restore),
      cmocka_unit_test(test_fixed_size_job_relaunches_on_a_spare),
      cmocka_unit_test(test_link_down_for_a_while_is_a_delay),
      cmocka_unit_test(test_link_down_for_good_removes_its_node),
      cmocka_unit_test(test_straggler_slows_every_step),
      cmocka_unit_test(test_degraded_uplink_is_the_alpha_beta_amount),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
