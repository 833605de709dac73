/*
 * test_fabric.c: the fabrics of network.topology, as the simulator builds them (sim/zone.cpp) and
 * the cost model charges them (decision.c).  The routes are read back from SimGrid and held to
 * the wiring: on the rail fabric a GPU reaches another node through the NICs of the destination's
 * rail, so a ring from GPU 7 of one node to GPU 0 of the next stays on rail 0's leaf, and crosses
 * the spines only between groups; on the fat-tree the spines are crossed between leaves only,
 * and a scattered placement puts neighbours on different leaves.  At 16,384 GPUs on a 2:1 fat-tree,
 * a ring allreduce's time is the formula of its bottleneck link, written here: packed, the node's
 * port; scattered, the leaf's uplinks shared by its 32 nodes' flows (busbw 265 -> 159 GB/s, half
 * the bandwidth beside the same latency), and the simulated step is that time, the compute and
 * the negotiation; `rehearsal collective` (nccl-tests) times the same allreduce.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "platform.h"

#include <jansson.h>
#include <math.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/dynar.h>

/* 8 nodes of 8 GPUs, 8 NICs of 400 Gb/s, leaves of 4 nodes. */
static rh_cluster fabric_cluster(rh_topology_kind topology, rh_placement placement) {
  rh_cluster cl = rh_test_bench_cluster(64);
  cl.intra_lat = 0.7e-6;
  cl.nic_lat = 5e-6;
  cl.fabric.topology = topology;
  cl.fabric.placement = placement;
  cl.fabric.nodes_per_leaf = 4;
  cl.fabric.oversubscription = 2;
  return cl;
}

/* Whether the route from gpu<from> to gpu<to> is the links named (NULL-terminated) with the
 * latency of `hops` network hops besides the two GPU hops; says what differs on stderr. */
static bool route_is(int from, int to, const rh_cluster *cl, int hops, const char *const *names) {
  char a[32], b[32];
  snprintf(a, sizeof a, "gpu%d", from);
  snprintf(b, sizeof b, "gpu%d", to);
  xbt_dynar_t links = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(sg_host_by_name(a), sg_host_by_name(b), links);
  bool same = true;
  size_t n = 0;
  while (names[n]) n++;
  if (xbt_dynar_length(links) != n) same = false;
  for (size_t i = 0; same && i < n; i++)
    same = strcmp(sg_link_get_name(xbt_dynar_get_as(links, i, sg_link_t)), names[i]) == 0;
  if (!same) {
    fprintf(stderr, "route %s -> %s:", a, b);
    for (size_t i = 0; i < xbt_dynar_length(links); i++)
      fprintf(stderr, " %s", sg_link_get_name(xbt_dynar_get_as(links, i, sg_link_t)));
    fprintf(stderr, "\n");
  }
  double lat = sg_host_get_route_latency(sg_host_by_name(a), sg_host_by_name(b));
  double want = 2 * cl->intra_lat + hops * cl->nic_lat;
  if (fabs(lat - want) > 1e-12 * want) {
    fprintf(stderr, "route %s -> %s: latency %.17g, expected %.17g\n", a, b, lat, want);
    same = false;
  }
  xbt_dynar_free(&links);
  return same;
}

/* Builds cl's platform in a child (SimGrid runs once per process) and checks check(cl) there. */
static bool in_child(const rh_cluster *cl, bool (*check)(const rh_cluster *)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[RH_SIM_SETTINGS + 2];
    int argc = rh_sim_settings(cl, "test_fabric", argv);
    simgrid_init(&argc, argv);
    char err[256];
    if (rh_sim_platform_build(cl, NULL, err, sizeof err) != RH_OK) {
      fprintf(stderr, "%s\n", err);
      _exit(2);
    }
    _exit(check(cl) ? 0 : 1);
  }
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* gpu7 is node 0's GPU 7, gpu8 node 1's GPU 0, gpu32 node 4's GPU 0 (the next group of 4). */
static bool rail_routes(const rh_cluster *cl) {
  return route_is(7, 8, cl, 2,
                  (const char *[]){"node0_link_7_UP", "node0-nic0_UP", "node1-nic0_DOWN",
                                   "node1_link_8_DOWN", NULL}) &&
         route_is(3, 13, cl, 2,
                  (const char *[]){"node0_link_3_UP", "node0-nic5_UP", "node1-nic5_DOWN",
                                   "node1_link_13_DOWN", NULL}) &&
         route_is(7, 32, cl, 4,
                  (const char *[]){"node0_link_7_UP", "node0-nic0_UP", "leaf0-rail0-spines_UP",
                                   "leaf1-rail0-spines_DOWN", "node4-nic0_DOWN",
                                   "node4_link_32_DOWN", NULL}) &&
         route_is(1, 2, cl, 0, (const char *[]){"node0_link_1_UP", "node0_link_2_DOWN", NULL});
}

static bool fat_tree_routes(const rh_cluster *cl) {
  return route_is(7, 8, cl, 2,
                  (const char *[]){"node0_link_7_UP", "node0-uplink_UP", "node1-uplink_DOWN",
                                   "node1_link_8_DOWN", NULL}) &&
         route_is(0, 32, cl, 4,
                  (const char *[]){"node0_link_0_UP", "node0-uplink_UP", "leaf0-spines_UP",
                                   "leaf1-spines_DOWN", "node4-uplink_DOWN", "node4_link_32_DOWN",
                                   NULL});
}

/* Scattered over 2 leaves: node 1 is on leaf 1, node 2 back on leaf 0. */
static bool scattered_routes(const rh_cluster *cl) {
  return route_is(7, 8, cl, 4,
                  (const char *[]){"node0_link_7_UP", "node0-uplink_UP", "leaf0-spines_UP",
                                   "leaf1-spines_DOWN", "node1-uplink_DOWN", "node1_link_8_DOWN",
                                   NULL}) &&
         route_is(0, 16, cl, 2,
                  (const char *[]){"node0_link_0_UP", "node0-uplink_UP", "node2-uplink_DOWN",
                                   "node2_link_16_DOWN", NULL});
}

/* The leaves' uplinks carry a leaf's nodes' bandwidth over the oversubscription. */
static bool leaf_bandwidths(const rh_cluster *cl) {
  bool rail = cl->fabric.topology == RH_TOPO_RAIL;
  double port = rail ? cl->nic_bw : cl->nic_bw * cl->nics_per_node;
  double leaf = cl->fabric.nodes_per_leaf * port / cl->fabric.oversubscription;
  sg_link_t up = sg_link_by_name(rail ? "leaf1-rail3-spines_UP" : "leaf1-spines_UP");
  sg_link_t nic = sg_link_by_name(rail ? "node2-nic3_DOWN" : "node2-uplink_DOWN");
  return up && nic && sg_link_get_bandwidth(up) == leaf && sg_link_get_bandwidth(nic) == port;
}

static bool rail_checks(const rh_cluster *cl) { return rail_routes(cl) && leaf_bandwidths(cl); }
static bool fat_tree_checks(const rh_cluster *cl) { return fat_tree_routes(cl) && leaf_bandwidths(cl); }

static void test_rail_routes(void **state) {
  (void)state;
  rh_cluster cl = fabric_cluster(RH_TOPO_RAIL, RH_PLACE_PACKED);
  assert_true(in_child(&cl, rail_checks));
  free(cl.gpus_per_node);
}

static void test_fat_tree_routes(void **state) {
  (void)state;
  rh_cluster cl = fabric_cluster(RH_TOPO_FAT_TREE, RH_PLACE_PACKED);
  assert_true(in_child(&cl, fat_tree_checks));
  cl.fabric.placement = RH_PLACE_SCATTERED;
  assert_true(in_child(&cl, scattered_routes));
  free(cl.gpus_per_node);
}

/* `rehearsal run FILE --set S...`: its simulated time (summary.json's time_s), or -1. */
static double run_time(const char *file, const char *const *sets) {
  char dir[64];
  if (rh_test_mkdtemp(dir, "fabric") != 0) return -1;
  char *argv[24] = {RH_BINARY, "run", (char *)file, "--out", dir, "--no-what-if"};
  int argc = 6;
  for (int i = 0; sets[i] && argc < 21; i++) {
    argv[argc++] = "--set";
    argv[argc++] = (char *)sets[i];
  }
  argv[argc] = NULL;
  double t = -1;
  if (rh_test_spawn_expect(argv, "/dev/null", 0) == 0) {
    json_t *j = json_load_file(rh_test_path(dir, "summary.json"), 0, NULL);
    t = json_number_value(json_object_get(json_object_get(j, "summary"), "time_s"));
    json_decref(j);
  }
  rh_test_rmdir(dir);
  return t;
}

/* A node's uplink down for 5 s is each of its NICs down under the rail fabric: the job stalls for
 * the 5 s, as on one switch. */
static void test_rail_uplink_fault(void **state) {
  (void)state;
  const char *rail[] = {"cluster.network.topology=rail", "cluster.network.nics_per_node=2",
                        "cluster.network.nodes_per_leaf=3", NULL, NULL};
  double with = run_time("scenarios/failures/link-down.yaml", rail);
  rail[3] = "failures.events=[]";
  double without = run_time("scenarios/failures/link-down.yaml", rail);
  print_message("rail, node 2's uplink down for 5 s: %.3f s, without the fault %.3f s\n", with, without);
  assert_true(without > 0 && without < 1);
  assert_true(with - without > 5 - 0.1 && with - without < 5 + 0.1);
}

/* ---- an allreduce at 16,384 GPUs on a 2:1 fat-tree ------------------------------------------ */

/* `rehearsal run` of the 2:1 scenario, placed so; its one bucket's priced time (ms) and whether
 * the simulated steady step is the compute, that and the bucket's negotiation, to 1e-9. */
static bool run_2to1(const char *placement, double *model_ms) {
  char dir[64], set[80];
  if (rh_test_mkdtemp(dir, "fabric") != 0) return false;
  snprintf(set, sizeof set, "cluster.network.placement=%s", placement);
  char *argv[] = {RH_BINARY, "run", "tests/scenarios/fabric-2to1.yaml", "--out", dir, "--no-what-if",
                  "--set", set, NULL};
  bool ok = rh_test_spawn_expect(argv, "/dev/null", 0) == 0;
  json_t *j = ok ? json_load_file(rh_test_path(dir, "summary.json"), 0, NULL) : NULL;
  json_t *bucket = json_array_get(json_object_get(j, "buckets"), 0);
  json_t *summary = json_object_get(j, "summary");
  *model_ms = json_number_value(json_object_get(bucket, "model_ms"));
  double step = json_number_value(json_object_get(summary, "steady_step_ms"));
  double parts = json_number_value(json_object_get(summary, "compute_ms")) + *model_ms +
                 json_number_value(json_object_get(bucket, "negotiation_ms"));
  if (ok && fabs(step - parts) > 1e-9 * step)
    print_error("%s: the simulated step %.9f ms is not compute + allreduce + negotiation %.9f ms\n",
                placement, step, parts);
  ok = ok && bucket && *model_ms > 0 && fabs(step - parts) <= 1e-9 * step;
  json_decref(j);
  rh_test_rmdir(dir);
  return ok;
}

static void test_oversubscribed_16384(void **state) {
  (void)state;
  /* the scenario: 2,048 nodes of 8 GPUs (400 GB/s each inside, 0.7 us), 8 x 400 Gb/s NICs (5 us
   * a hop), leaves of 32 nodes at 2:1, one 256 GiB bucket allreduced by the ring */
  const double p = 16384, bytes = 256.0 * (1 << 30), intra = 400e9, port = 8 * 400e9 / 8;
  const double leaf_up = 32 * port / 2, intra_lat = 0.7e-6, hop = 5e-6;
  /* a ring's 2(p-1) steps each wait for the slowest edge: its latency (a GPU hop at each end, a
   * node port at each end, and the spines' links where the ring leaves a leaf, which it does in
   * both placements) and its bandwidth: packed, a leaf sends one flow to the next (the port and
   * the GPU link bind); scattered, all 32 of its nodes' flows leave through the leaf's uplinks */
  double lat = 2 * intra_lat + 4 * hop;
  double packed = 2 * (p - 1) * lat + 2 * (p - 1) / p * bytes / fmin(intra, port);
  double scattered = 2 * (p - 1) * lat + 2 * (p - 1) / p * bytes / fmin(fmin(intra, port), leaf_up / 32);
  double model_packed, model_scattered;
  assert_true(run_2to1("packed", &model_packed));
  assert_true(run_2to1("scattered", &model_scattered));
  print_message("ring allreduce of 256 GiB on 16,384 GPUs, 2:1: packed %.3f ms (formula %.3f), "
                "scattered %.3f ms (formula %.3f); busbw %.1f -> %.1f GB/s\n",
                model_packed, packed * 1e3, model_scattered, scattered * 1e3,
                bytes * 2 * (p - 1) / p / model_packed / 1e6,
                bytes * 2 * (p - 1) / p / model_scattered / 1e6);
  assert_true(fabs(model_packed - packed * 1e3) < 1e-9 * packed * 1e3);
  assert_true(fabs(model_scattered - scattered * 1e3) < 1e-9 * scattered * 1e3);
  /* nccl-tests' view, `rehearsal collective`: the same time, simulated, and its busbw */
  char dir[64];
  assert_int_equal(rh_test_mkdtemp(dir, "fabric"), 0);
  char *argv[] = {RH_BINARY, "collective", "tests/scenarios/fabric-2to1.yaml", "-b", "256G", "-e",
                  "256G", "-c", "0", "--set", "cluster.network.placement=scattered", "--out", dir,
                  NULL};
  assert_int_equal(rh_test_spawn_expect(argv, "/dev/null", 0), 0);
  json_t *j = json_load_file(rh_test_path(dir, "collective.json"), 0, NULL);
  json_t *row = json_array_get(json_object_get(j, "rows"), 0);
  double us = json_number_value(json_object_get(row, "time_us"));
  double busbw = json_number_value(json_object_get(row, "busbw_GBps"));
  print_message("rehearsal collective, scattered: %.3f us, busbw %.2f GB/s\n", us, busbw);
  assert_true(fabs(us - scattered * 1e6) < 1e-6 * scattered * 1e6);
  assert_true(fabs(busbw - bytes * 2 * (p - 1) / p / scattered / 1e9) < 1e-3);
  json_decref(j);
  rh_test_rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rail_routes),
      cmocka_unit_test(test_fat_tree_routes),
      cmocka_unit_test(test_rail_uplink_fault),
      cmocka_unit_test(test_oversubscribed_16384),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  if (getenv("RH_TEST_SKIP")) cmocka_set_skip_filter(getenv("RH_TEST_SKIP"));
  return cmocka_run_group_tests(tests, NULL, NULL);
}
