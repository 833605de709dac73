/*
 * test_nccl_model.c: NCCL's cost model (runtime/nccl_model.c) and the choice made with it.
 * Latencies are re-derived from the formulas and figures of NCCL's src/graph/tuning.cc;
 * availability follows NCCL's rules; a sweep over sizes and
 * cluster shapes holds `auto` to the cheapest priced algorithm and protocol and its bus bandwidth
 * to the bottleneck link's, both in the model and in the simulator running the collective.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "scenario.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

/* |a - b| <= eps, with both values in the message when not */
#define assert_near(a, b, eps)                                                                     \
  do {                                                                                             \
    double a_ = (a), b_ = (b);                                                                     \
    if (!(fabs(a_ - b_) <= (eps))) fail_msg("%s = %.17g, expected %.17g", #a, a_, b_);             \
  } while (0)

/* A node of `ppn` GPUs on NVLink at 240 GB/s through NVSwitch, NICs of 200 Gbit/s. */
static rh_cluster cluster(int nodes, int ppn, rh_gpu_arch arch) {
  rh_cluster cl = rh_test_cluster(nodes, ppn, NULL);
  cl.intra_bw = 240e9;
  cl.nics_per_node = ppn;
  cl.nic_bw = 25e9;
  cl.nic_lat = 0.6e-6;
  cl.net_model = RH_NET_NCCL;
  cl.fabric = (rh_fabric){.arch = arch, .nvlink = true, .nvswitch = true, .nic_efficiency = 0.96,
                          .channels = 16, .oversubscription = 1};
  return cl;
}

static void test_ring_latency_and_bandwidth(void **state) {
  (void)state;
  rh_cluster cl = cluster(1, 8, RH_ARCH_AMPERE);
  /* one node: 8.4 + 2(p-1) x 3.4 us (base + NVLink hops, Simple) */
  rh_nccl_price pr = rh__nccl_price(&cl, RH_NC_ALLREDUCE, 8, 1, RH_NA_RING, RH_NP_SIMPLE, 1e9);
  assert_near(pr.latency, (8.4 + 14 * 3.4) * 1e-6, 1e-15);
  /* ring: the algorithm bandwidth is the bus bandwidth times p / 2(p-1) */
  assert_near(pr.bandwidth, 240e9 * 8 / 14.0, 1e-3);
  /* LL: half the bus bandwidth under Ampere's 87.7 GB/s ceiling, 0.6 us per NVLink hop */
  pr = rh__nccl_price(&cl, RH_NC_ALLREDUCE, 8, 1, RH_NA_RING, RH_NP_LL, 1e6);
  assert_near(pr.bus, 87.7e9, 1e-3);
  assert_near(pr.latency, (6.6 + 14 * 0.6) * 1e-6, 1e-15);
  /* four nodes: 2(nodes-1) of the 2(p-1) steps cross the network (14 us plus the wire's two
   * hops for Simple), and the multi-node plateau multiplies by 1.4 on Ampere */
  rh_cluster four = cluster(4, 8, RH_ARCH_AMPERE);
  pr = rh__nccl_price(&four, RH_NC_ALLREDUCE, 32, 4, RH_NA_RING, RH_NP_SIMPLE, 1e9);
  double inter = 14 + 2 * 0.6, want = (8.4 + (62 - 6) * 3.4 + 6 * inter) * 1.4;
  assert_near(pr.latency, want * 1e-6, 1e-15);
  /* the bottleneck across nodes: eight 200G NICs at 96% = 192 GB/s, below NVLink's 240 */
  assert_near(pr.bus, 8 * 25e9 * 0.96, 1e-3);
  free(cl.gpus_per_node);
  free(four.gpus_per_node);
}

static void test_tree_latency(void **state) {
  (void)state;
  rh_cluster cl = cluster(4, 8, RH_ARCH_HOPPER);
  /* 6.8 + 2((ppn-1) x 0.6 + log2(nodes) x 5.0) for LL */
  rh_nccl_price pr = rh__nccl_price(&cl, RH_NC_ALLREDUCE, 32, 4, RH_NA_TREE, RH_NP_LL, 4096);
  assert_near(pr.latency, (6.8 + 2 * (7 * 0.6 + 2 * 5.0)) * 1e-6, 1e-15);
  /* the tree's algorithm bandwidth is half its bus bandwidth, which is 0.92 of the link's */
  pr = rh__nccl_price(&cl, RH_NC_ALLREDUCE, 32, 4, RH_NA_TREE, RH_NP_SIMPLE, 1e9);
  assert_near(pr.bus, fmin(0.92 * 192e9, 16 * 36.0e9), 1e-3);
  assert_near(pr.bandwidth, pr.bus / 2, 1e-3);
  free(cl.gpus_per_node);
}

static void test_availability(void **state) {
  (void)state;
  rh_cluster cl = cluster(1, 8, RH_ARCH_HOPPER);
  /* NVLS: allreduce on one node through NVSwitch with an NVLS efficiency, Simple only */
  assert_true(isnan(rh__nccl_price(&cl, RH_NC_ALLREDUCE, 8, 1, RH_NA_NVLS, RH_NP_SIMPLE, 1e6).seconds));
  cl.fabric.nvls_efficiency = 0.74;
  assert_false(isnan(rh__nccl_price(&cl, RH_NC_ALLREDUCE, 8, 1, RH_NA_NVLS, RH_NP_SIMPLE, 1e6).seconds));
  assert_true(isnan(rh__nccl_price(&cl, RH_NC_ALLREDUCE, 8, 1, RH_NA_NVLS, RH_NP_LL, 1e6).seconds));
  assert_true(isnan(rh__nccl_price(&cl, RH_NC_ALLGATHER, 8, 1, RH_NA_NVLS, RH_NP_SIMPLE, 1e6).seconds));
  cl.fabric.nvswitch = false;
  assert_true(isnan(rh__nccl_price(&cl, RH_NC_ALLREDUCE, 8, 1, RH_NA_NVLS, RH_NP_SIMPLE, 1e6).seconds));
  rh_cluster two = cluster(2, 8, RH_ARCH_HOPPER);
  two.fabric.nvls_efficiency = 0.74;
  assert_true(isnan(rh__nccl_price(&two, RH_NC_ALLREDUCE, 16, 2, RH_NA_NVLS, RH_NP_SIMPLE, 1e6).seconds));
  /* the tree reduces only; LL128 needs NVLink */
  assert_true(isnan(rh__nccl_price(&cl, RH_NC_BROADCAST, 8, 1, RH_NA_TREE, RH_NP_SIMPLE, 1e6).seconds));
  cl.fabric.nvlink = false;
  assert_true(isnan(rh__nccl_price(&cl, RH_NC_ALLREDUCE, 8, 1, RH_NA_RING, RH_NP_LL128, 1e6).seconds));
  /* one rank: nothing to do */
  assert_near(rh__nccl_price(&cl, RH_NC_ALLREDUCE, 1, 1, RH_NA_RING, RH_NP_SIMPLE, 1e6).seconds, 0, 0);
  free(cl.gpus_per_node);
  free(two.gpus_per_node);
}

/* The cheapest price of coll over every algorithm and protocol. */
static double cheapest(const rh_cluster *cl, rh_nccl_coll coll, int ranks, int nodes, double bytes) {
  double best = INFINITY;
  for (int a = 0; a < RH_NA_COUNT; a++)
    for (int q = 0; q < RH_NP_COUNT; q++) {
      rh_nccl_price pr = rh__nccl_price(cl, coll, ranks, nodes, a, q, bytes);
      if (pr.seconds >= 0 && pr.seconds < best) best = pr.seconds;
    }
  return best;
}

/* Horovod's hierarchical allreduce on NCCL: a reduce-scatter in the node, an allreduce of 1/L of
 * the buffer across nodes (the L local ranks' rings sharing the node's NICs: 1/L of them each), an
 * allgather in the node. */
static void test_hierarchical(void **state) {
  (void)state;
  rh_cluster cl = cluster(4, 8, RH_ARCH_AMPERE);
  rh_settings set = rh_test_settings(600);
  set.value[RH_SETTING_ALGORITHM] = RH_ALGO_HIERARCHICAL;
  rh_topology topo;
  assert_int_equal(rh_topology_init(&topo, cl.gpus_per_node, cl.nodes), RH_OK);
  rh_ctx ctx;
  rh_ctx_init(&ctx, 0, &topo, &set, &cl, NULL, NULL);
  double bytes = 256e6;
  rh_plan plan = rh__plan(&ctx, RH_NC_ALLREDUCE, (size_t)bytes);
  assert_int_equal(plan.algo, RH_ALG_ALLREDUCE_HIERARCHICAL);
  rh_cluster share = cl;
  share.nics_per_node = 1;
  share.nic_bw = cl.nic_bw * 8 / 8; /* eight NICs for eight rings: one each */
  share.fabric.pcie_bw = 0;
  double want = cheapest(&cl, RH_NC_REDUCE_SCATTER, 8, 1, bytes) +
                cheapest(&share, RH_NC_ALLREDUCE, 4, 4, bytes / 8) +
                cheapest(&cl, RH_NC_ALLGATHER, 8, 1, bytes);
  assert_near(plan.seconds, want, 1e-15);
  char name[32];
  assert_non_null(strstr(rh__plan_name(&plan, name, sizeof name), "hierarchical/"));
  rh_topology_free(&topo);
  free(cl.gpus_per_node);
}

/* The plan of a world's ctx on `cl` (rank 0) for coll over `scope`'s groups. */
static double plan_in(rh_cluster *cl, int scope, rh_nccl_coll coll, double bytes) {
  rh_settings set = rh_test_settings(600);
  rh_topology topo;
  assert_int_equal(rh_topology_init(&topo, cl->gpus_per_node, cl->nodes), RH_OK);
  rh_ctx ctx;
  rh_ctx_init(&ctx, 0, &topo, &set, cl, NULL, NULL);
  double seconds = rh__plan_in(&ctx, scope, coll, (size_t)bytes).seconds;
  rh_topology_free(&topo);
  return seconds;
}

/* Collectives over groups (HSDP's): a node's 8 ranks are priced as a one-node job of 8, and the
 * ranks of one local rank across 4 nodes as a job of 4 one-GPU nodes whose one NIC is the
 * GPU's share of its node's (8 NICs for 8 rings: one each); for 1 GB the latter moves
 * 2(4-1)/4 of it at 96% of 25 GB/s. */
static void test_scoped_plans(void **state) {
  (void)state;
  rh_cluster four = cluster(4, 8, RH_ARCH_AMPERE), one = cluster(1, 8, RH_ARCH_AMPERE);
  rh_cluster across = cluster(4, 1, RH_ARCH_AMPERE);
  across.nics_per_node = 1;
  double S = 1e9;
  for (int c = RH_NC_ALLREDUCE; c <= RH_NC_REDUCE_SCATTER; c++) {
    if (c == RH_NC_BROADCAST) continue;
    assert_near(plan_in(&four, RH_SCOPE_SHARD, (rh_nccl_coll)c, S),
                plan_in(&one, RH_SCOPE_WORLD, (rh_nccl_coll)c, S), 1e-15);
    assert_near(plan_in(&four, RH_SCOPE_REPLICA, (rh_nccl_coll)c, S),
                plan_in(&across, RH_SCOPE_WORLD, (rh_nccl_coll)c, S), 1e-15);
  }
  double wire = 2.0 * 3 / 4 * S / (0.96 * 25e9);
  double ar = plan_in(&four, RH_SCOPE_REPLICA, RH_NC_ALLREDUCE, S);
  print_message("cross allreduce of 1 GB over 4 nodes: %.4f ms (the wire alone %.4f ms)\n",
                1e3 * ar, 1e3 * wire);
  assert_true(ar >= wire && ar <= 1.05 * wire);
  free(four.gpus_per_node);
  free(one.gpus_per_node);
  free(across.gpus_per_node);
}

/* ---- the sweep: auto against every priced choice and the bottleneck --------------------------- */

typedef struct shape {
  const char *what;
  int nodes, ppn;
  rh_gpu_arch arch;
  bool nvswitch, nvlink;
  double nvls, intra, nic, pcie, oversub;
  int nics, leaf;
} shape;

static const shape shapes[] = {
    {"8 x H100 NVSwitch", 1, 8, RH_ARCH_HOPPER, true, true, 0.74, 370.8e9, 50e9, 48e9, 1, 8, 0},
    {"8 x A100", 1, 8, RH_ARCH_AMPERE, true, true, 0, 240e9, 25e9, 24e9, 1, 8, 0},
    {"4 x 8 A100, 8 x 200G", 4, 8, RH_ARCH_AMPERE, true, true, 0, 240e9, 25e9, 24e9, 1, 8, 0},
    {"2 x 1 GPU, one 100G NIC", 2, 1, RH_ARCH_HOPPER, false, true, 0, 370.8e9, 12.5e9, 48e9, 1, 1, 0},
    {"64 x 8 H100, 2:1 leaves of 16", 64, 8, RH_ARCH_HOPPER, true, true, 0.74, 370.8e9, 50e9, 48e9, 2, 8, 16},
    {"16 x 4 PCIe, one 25G NIC", 16, 4, RH_ARCH_PASCAL, false, false, 0, 12e9, 3.125e9, 12e9, 1, 1, 0},
};

static rh_cluster shape_cluster(const shape *s) {
  rh_cluster cl = rh_test_cluster(s->nodes, s->ppn, NULL);
  cl.intra_bw = s->intra;
  cl.nics_per_node = s->nics;
  cl.nic_bw = s->nic;
  cl.nic_lat = 0.6e-6;
  cl.net_model = RH_NET_NCCL;
  cl.fabric = (rh_fabric){.arch = s->arch, .nvlink = s->nvlink, .nvswitch = s->nvswitch,
                          .nvls_efficiency = s->nvls, .pcie_bw = s->pcie, .nic_efficiency = 0.96,
                          .channels = 16, .nodes_per_leaf = s->leaf,
                          .oversubscription = s->oversub};
  return cl;
}

/* The slowest link of a shape, derived here from its parts: a GPU's NVLink (or PCIe), and
 * across nodes the node's NICs at 96% each no faster than PCIe, over the oversubscription. */
static double bottleneck(const shape *s) {
  double bw = s->ppn > 1 ? (s->nvlink ? s->intra : fmin(s->intra, s->pcie)) : INFINITY;
  if (s->nodes > 1) {
    double node = s->nics * fmin(s->nic * 0.96, s->pcie);
    node = fmin(node, s->pcie * s->ppn);
    if (s->leaf && s->nodes > s->leaf) node /= s->oversub;
    bw = fmin(bw, node);
  }
  return bw;
}

/* Leaves on a fat-tree at 2:1 (64 nodes, 32 a leaf): NCCL's rings run node after node, so packed
 * they leave a leaf once and keep the NICs' bandwidth, scattered every hop crosses the spines and
 * gets half; its trees join far-apart nodes and get half either way; inside one leaf nothing is
 * paid.  Under topology: switch the leaves are the NCCL model's alone and every algorithm pays. */
static void test_leaves_by_algorithm(void **state) {
  (void)state;
  rh_cluster cl = rh_test_cluster(64, 8, NULL);
  cl.intra_bw = 400e9;
  cl.nics_per_node = 8;
  cl.nic_bw = 50e9;
  cl.net_model = RH_NET_NCCL;
  cl.fabric = (rh_fabric){.arch = RH_ARCH_HOPPER, .nvlink = true, .nic_efficiency = 1,
                          .channels = 16, .nodes_per_leaf = 32, .oversubscription = 2,
                          .topology = RH_TOPO_FAT_TREE};
  double node = 8 * 50e9; /* the node's NICs together (NVLink: 400 GB/s a GPU, no lower) */
  assert_float_equal(rh__nccl_bus_bound(&cl, 512, 64, RH_NA_RING), node, 1e-6 * node);
  assert_float_equal(rh__nccl_bus_bound(&cl, 512, 64, RH_NA_TREE), node / 2, 1e-6 * node);
  assert_float_equal(rh__nccl_bus_bound(&cl, 256, 32, RH_NA_TREE), node, 1e-6 * node);
  cl.fabric.placement = RH_PLACE_SCATTERED;
  assert_float_equal(rh__nccl_bus_bound(&cl, 512, 64, RH_NA_RING), node / 2, 1e-6 * node);
  cl.fabric.placement = RH_PLACE_PACKED;
  cl.fabric.topology = RH_TOPO_SWITCH;
  assert_float_equal(rh__nccl_bus_bound(&cl, 512, 64, RH_NA_RING), node / 2, 1e-6 * node);
  free(cl.gpus_per_node);
}

static void test_auto_sweep_model(void **state) {
  (void)state;
  rh_settings set = rh_test_settings(600);
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    const shape *s = &shapes[k];
    rh_cluster cl = shape_cluster(s);
    rh_topology topo;
    assert_int_equal(rh_topology_init(&topo, cl.gpus_per_node, cl.nodes), RH_OK);
    rh_ctx ctx;
    rh_ctx_init(&ctx, 0, &topo, &set, &cl, NULL, NULL);
    int p = s->nodes * s->ppn;
    for (double bytes = 8; bytes <= 8.6e9; bytes *= 2) {
      rh_plan plan = rh__plan(&ctx, RH_NC_ALLREDUCE, (size_t)bytes);
      double best = cheapest(&cl, RH_NC_ALLREDUCE, p, s->nodes, bytes);
      if (plan.seconds != best)
        fail_msg("%s, %.0f B: auto priced %.9g s, the cheapest is %.9g s", s->what, bytes,
                 plan.seconds, best);
      /* busbw of what auto picked, against the bottleneck (NVLS: the switch reduces, so its
       * bound is the link's times 2(p-1)/p) */
      double busbw = bytes / plan.seconds * 2.0 * (p - 1) / p;
      double bound = plan.nalgo == RH_NA_NVLS ? s->intra * 2.0 * (p - 1) / p : bottleneck(s);
      if (busbw > bound * (1 + 1e-12))
        fail_msg("%s, %.0f B: %s/%s gives busbw %.4g GB/s above the bottleneck's %.4g", s->what,
                 bytes, rh_nccl_algo_names[plan.nalgo], rh_nccl_proto_names[plan.nproto],
                 busbw / 1e9, bound / 1e9);
    }
    rh_topology_free(&topo);
    free(cl.gpus_per_node);
  }
}

/* The same through the simulator: `rehearsal collective` with auto, then with each algorithm
 * forced (RH_ALGORITHM); auto's time is never above a forced one's, and its busbw never above
 * the bottleneck's. */
static json_t *sweep(const char *file, const char *algo, const char *tag) {
  char *out = rh_test_path(tmpdir, tag), json[300];
  if (algo) setenv("RH_ALGORITHM", algo, 1);
  else unsetenv("RH_ALGORITHM");
  char *argv[] = {RH_BINARY, "collective", (char *)file, "--min", "1KiB", "--max", "4GiB",
                  "--mem-limit", "1MiB", "--out", out, NULL};
  int rc = rh_test_spawn_expect(argv, NULL, 0);
  unsetenv("RH_ALGORITHM");
  if (rc != 0) fail_msg("rehearsal collective %s (%s) exited %d", file, algo ? algo : "auto", rc);
  snprintf(json, sizeof json, "%s/collective.json", out);
  json_error_t err;
  json_t *root = json_load_file(json, 0, &err);
  assert_non_null(root);
  return root;
}

static void test_auto_sweep_simulated(void **state) {
  (void)state;
  static const struct { const char *file; double bottleneck; int ranks; } cases[] = {
      {"scenarios/validation/dgx-h100.yaml", 370.8e9, 8},
      {"scenarios/validation/dgx-a100-4nodes.yaml", 192e9, 32},
  };
  static const char *const forced[] = {"ring", "tree", "nvls"};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char tag[32];
    snprintf(tag, sizeof tag, "auto%zu", k);
    json_t *a = sweep(cases[k].file, NULL, tag);
    json_t *arows = json_object_get(a, "rows");
    size_t nrows = json_array_size(arows);
    assert_true(nrows > 20);
    double p = cases[k].ranks;
    for (size_t i = 0; i < nrows; i++) {
      json_t *row = json_array_get(arows, i);
      double busbw = json_real_value(json_object_get(row, "busbw_GBps")) * 1e9;
      const char *algo = json_string_value(json_object_get(row, "algorithm"));
      double bound = strncmp(algo, "nvls", 4) == 0 ? cases[k].bottleneck * 2 * (p - 1) / p
                                                   : cases[k].bottleneck;
      if (busbw > bound * (1 + 1e-9))
        fail_msg("%s row %zu: %s busbw %.4g above %.4g", cases[k].file, i, algo, busbw, bound);
    }
    for (size_t f = 0; f < sizeof forced / sizeof forced[0]; f++) {
      snprintf(tag, sizeof tag, "%s%zu", forced[f], k);
      json_t *o = sweep(cases[k].file, forced[f], tag);
      json_t *orows = json_object_get(o, "rows");
      assert_int_equal(json_array_size(orows), nrows);
      for (size_t i = 0; i < nrows; i++) {
        double ta = json_real_value(json_object_get(json_array_get(arows, i), "time_us"));
        double to = json_real_value(json_object_get(json_array_get(orows, i), "time_us"));
        if (ta > to * (1 + 1e-9))
          fail_msg("%s row %zu: auto took %.6g us, %s %.6g us", cases[k].file, i, ta, forced[f], to);
      }
      json_decref(o);
    }
    json_decref(a);
  }
}

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "nccl_model");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ring_latency_and_bandwidth),
      cmocka_unit_test(test_tree_latency),
      cmocka_unit_test(test_availability),
      cmocka_unit_test(test_hierarchical),
      cmocka_unit_test(test_scoped_plans),
      cmocka_unit_test(test_leaves_by_algorithm),
      cmocka_unit_test(test_auto_sweep_model),
      cmocka_unit_test(test_auto_sweep_simulated),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
