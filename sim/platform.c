/*
 * platform.c: writes the SimGrid platform XML for a cluster on one switch (a <cluster> zone per
 * node; what the simulator builds in code, zone.cpp, as SimGrid's loader reads it), and gives the
 * settings SimGrid runs it under.  Every number is printed with
 * 17 significant digits so the platform models exactly the values of the scenario.  A straggler
 * fault's slower speed is a pstate of every GPU host (pstate 0 is full speed), which the injector
 * selects while the fault lasts.
 */
#include "platform.h"

#include <stdlib.h>

int rh_sim_straggler_pstate(const rh_fault_plan *plan, double factor) {
  int k = 0;
  for (int i = 0; plan && i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    if (f->kind != RH_FAULT_STRAGGLER) continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = plan->faults[j].kind == RH_FAULT_STRAGGLER && plan->faults[j].factor == f->factor;
    if (seen) continue;
    k++;
    if (f->factor == factor) return k;
  }
  return 0;
}

int rh_sim_settings(const rh_cluster *cl, const char *program, char **argv) {
  static char quiet[] = "--log=root.thres:critical", stack[] = "--cfg=contexts/stack-size:1024",
              no_guard[] = "--cfg=contexts/guard-size:0", cm02[] = "--cfg=network/model:CM02",
              no_cross[] = "--cfg=network/crosstraffic:0", no_gamma[] = "--cfg=network/TCP-gamma:0",
              no_lat_factor[] = "--cfg=network/latency-factor:1";
#ifdef RH_SANITIZE_ADDRESS /* -DRH_SANITIZE=address */
  const bool asan = true;
#else
  const bool asan = false;
#endif
  int slots = rh_cluster_first_slot(cl, cl->nodes + cl->spares), argc = 0; /* spares too */
  argv[argc++] = (char *)program;
  argv[argc++] = quiet;
  argv[argc++] = stack;
  /* Each actor (a worker and its task runner per GPU) has a stack, and a guard page makes two
   * memory mappings of it: past 4,096 GPUs that would pass the kernel's default limit on
   * mappings (vm.max_map_count, 65,530), so big jobs go without the guard page (and so do runs
   * under AddressSanitizer: LeakSanitizer's scan of the actors' stacks stops at a guard page
   * with a fault). */
  if (slots > 4096 || asan) argv[argc++] = no_guard;
  /* the exact network: CM02 (no latency or bandwidth factors), no cross traffic, no TCP window
   * bound */
  if (cl->exact_network) {
    argv[argc++] = cm02;
    argv[argc++] = no_cross;
    argv[argc++] = no_gamma;
  }
  /* the realistic network: LV08's bandwidth factor, cross traffic and TCP window, but its latency
   * factor (13.01, fitted to short TCP flows on Ethernet: slow start, the kernel's stack) only
   * over TCP; RDMA (InfiniBand, RoCE) and the GPUs' own links start a transfer at their latency.
   * Every step of a ring pays it, so 13x the latency took a 25G RoCE ring of 512 GPUs from 99% to
   * 50% scaling efficiency (docs/internals.md). */
  if (!cl->exact_network && !cl->fabric.tcp) argv[argc++] = no_lat_factor;
  argv[argc] = NULL;
  return argc;
}

/* A GPU host's speeds: full, then one pstate per straggler factor of plan in order of first use. */
int rh_sim_gpu_speeds(const rh_cluster *cl, const rh_fault_plan *plan, double *speeds) {
  int n = 0;
  speeds[n++] = cl->gpu_flops;
  for (int i = 0; plan && i < plan->nfaults; i++) {
    const rh_fault *f = &plan->faults[i];
    if (f->kind == RH_FAULT_STRAGGLER && rh_sim_straggler_pstate(plan, f->factor) == n)
      speeds[n++] = cl->gpu_flops * f->factor;
  }
  return n;
}

rh_status rh_sim_platform_write(const rh_cluster *cl, const rh_fault_plan *plan, FILE *out) {
  if (cl->fabric.topology != RH_TOPO_SWITCH) return RH_ERR_UNSUPPORTED;
  double *speeds = malloc(sizeof *speeds * (size_t)(1 + (plan ? plan->nfaults : 0)));
  if (!speeds) return RH_ERR_NOMEM;
  int nspeeds = rh_sim_gpu_speeds(cl, plan, speeds);
  fprintf(out, "<?xml version='1.0'?>\n"
               "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\">\n"
               "<zone id=\"world\" routing=\"DijkstraCache\">\n");
  int nodes = cl->nodes + cl->spares, first = 0;
  for (int n = 0; n < nodes; n++) {
    int last = first + cl->gpus_per_node[n] - 1;
    fprintf(out, "  <cluster id=\"node%d\" prefix=\"gpu\" suffix=\"\" radical=\"%d-%d\" speed=\"", n,
            first, last);
    for (int i = 0; i < nspeeds; i++) fprintf(out, "%s%.17gf", i ? "," : "", speeds[i]);
    fprintf(out,
            "\" bw=\"%.17gBps\" lat=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\" "
            "router_id=\"node%d-router\"",
            cl->intra_bw, cl->intra_lat, n);
    if (cl->intra_backbone_bw > 0)
      fprintf(out, " bb_bw=\"%.17gBps\" bb_lat=\"0s\"", cl->intra_backbone_bw);
    fprintf(out, "/>\n");
    first = last + 1;
  }
  free(speeds);
  /* the launcher: where the driver and the fault injector run; it sends no message */
  fprintf(out, "  <zone id=\"control\" routing=\"None\">\n    <host id=\"launcher\" speed=\"1f\"/>\n  </zone>\n");
  if (nodes > 1) {
    double up = rh_fabric_port_bw(cl);
    fprintf(out, "  <zone id=\"fabric\" routing=\"Full\">\n    <router id=\"switch\"/>\n  </zone>\n");
    for (int n = 0; n < nodes; n++)
      fprintf(out,
              "  <link id=\"node%d-uplink\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" "
              "sharing_policy=\"SPLITDUPLEX\"/>\n",
              n, up, cl->nic_lat);
    for (int n = 0; n < nodes; n++) {
      fprintf(out,
              "  <zoneRoute src=\"node%d\" dst=\"fabric\" gw_src=\"node%d-router\" "
              "gw_dst=\"switch\" symmetrical=\"NO\"><link_ctn id=\"node%d-uplink\" "
              "direction=\"UP\"/></zoneRoute>\n",
              n, n, n);
      fprintf(out,
              "  <zoneRoute src=\"fabric\" dst=\"node%d\" gw_src=\"switch\" "
              "gw_dst=\"node%d-router\" symmetrical=\"NO\"><link_ctn id=\"node%d-uplink\" "
              "direction=\"DOWN\"/></zoneRoute>\n",
              n, n, n);
    }
  }
  fprintf(out, "</zone>\n</platform>\n");
  return ferror(out) ? RH_ERR_IO : RH_OK;
}
