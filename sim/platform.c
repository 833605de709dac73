/*
 * platform.c: writes the SimGrid platform XML for a cluster description (the C API cannot build a
 * platform in code).  Every number is printed with 17 significant digits so the platform models
 * exactly the values of the scenario.
 */
#include "platform.h"

rh_status rh_sim_platform_write(const rh_cluster *cl, FILE *out) {
  fprintf(out, "<?xml version='1.0'?>\n"
               "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
               "<platform version=\"4.1\">\n"
               "<zone id=\"world\" routing=\"DijkstraCache\">\n");
  int first = 0;
  for (int n = 0; n < cl->nodes; n++) {
    int last = first + cl->gpus_per_node[n] - 1;
    fprintf(out,
            "  <cluster id=\"node%d\" prefix=\"rank\" suffix=\"\" radical=\"%d-%d\" "
            "speed=\"%.17gf\" bw=\"%.17gBps\" lat=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\" "
            "router_id=\"node%d-router\"",
            n, first, last, cl->gpu_flops, cl->intra_bw, cl->intra_lat, n);
    if (cl->intra_backbone_bw > 0)
      fprintf(out, " bb_bw=\"%.17gBps\" bb_lat=\"0s\"", cl->intra_backbone_bw);
    fprintf(out, "/>\n");
    first = last + 1;
  }
  if (cl->nodes > 1) {
    double up = cl->nic_bw * (cl->nics_per_node > 0 ? cl->nics_per_node : 1);
    fprintf(out, "  <zone id=\"fabric\" routing=\"Full\">\n    <router id=\"switch\"/>\n  </zone>\n");
    for (int n = 0; n < cl->nodes; n++)
      fprintf(out,
              "  <link id=\"node%d-uplink\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" "
              "sharing_policy=\"SPLITDUPLEX\"/>\n",
              n, up, cl->nic_lat);
    for (int n = 0; n < cl->nodes; n++) {
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
