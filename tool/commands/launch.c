/*
 * launch.c: rh_main, the entry point of a user's training program, and `rehearsal platform`.  On
 * the simulator the cluster comes from the scenario named by --scenario FILE (or RH_SCENARIO), its
 * `collective:` settings apply to the runtime, and its failures, elastic and restart sections to
 * the job: a program that runs its loop in rh_elastic_run recovers as Horovod's elastic mode does.
 */
#include "cli.h"
#include "commands.h"
#include "platform.h"
#include "scenario.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rh_main(int argc, char **argv, rh_rank_fn fn, void *arg) {
  const char *file = getenv("RH_SCENARIO");
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--scenario") == 0) file = argv[i + 1];
  if (!file) {
    fprintf(stderr, "%s: name the cluster with --scenario FILE (or RH_SCENARIO)\n", argv[0]);
    return 2;
  }
  rh_scenario sc;
  char err[1024];
  if (rh_scenario_load(file, &sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "%s: %s\n", argv[0], err);
    return 2;
  }
  rh_scenario_launch launch;
  if (rh_scenario_launch_init(&sc, &launch) != RH_OK) {
    fprintf(stderr, "%s: out of memory\n", argv[0]);
    rh_scenario_free(&sc);
    return 1;
  }
  rh_launch_result res = {0};
  int rc = rh__launch(&launch.config, fn, arg, &res);
  /* a drill that tested nothing says so */
  for (int i = 0; res.rank <= 0 && i < launch.plan.nfaults; i++) {
    bool fired = false;
    for (size_t k = 0; res.log && k < res.log->n && !fired; k++)
      fired = res.log->events[k].kind == RH_EV_FAULT && res.log->events[k].fault == i;
    const rh_fault *f = &launch.plan.faults[i];
    if (!fired)
      fprintf(stderr, "%s: %s:%d: the %s of node %d never happened: the program ended before its "
                      "trigger%s\n", argv[0], file, f->line, rh_fault_names[f->kind], f->node,
              f->epoch >= 0 ? " (a step trigger fires at rh_step_begin)" : "");
  }
  if (res.log) {
    rh__joblog_free(res.log);
    free(res.log);
  }
  rh_scenario_launch_free(&launch);
  rh_scenario_free(&sc);
  return rc;
}

int rh_cmd_platform(int argc, char **argv) {
  static const char usage[] =
      "usage: rehearsal platform FILE [--set KEY=VALUE]...\n"
      "Prints the scenario's simulated cluster as SimGrid platform XML (a <cluster> zone per\n"
      "node; the simulator builds the same network in code, in one zone).  The switch fabric\n"
      "only: fat_tree and rail exist built in code.\n"
      "  --set KEY=VALUE   override a scenario key (repeatable)\n"
      "  --help, --version\n"
      "Exit status: 0 success, 2 bad input.\n";
  rh_scenario_opts opts = {.cluster_only = true};
  int first = 0;
  int prc = rh_cli_parse("platform", usage, argc, argv, "", NULL, NULL, NULL, &opts, &first);
  if (prc < 0 && argc - first != 1) prc = rh_cli_error("platform", "needs one scenario FILE");
  if (prc >= 0) {
    rh_cli_opts_free(&opts);
    return prc;
  }
  rh_scenario sc;
  char err[1024];
  rh_status loaded = rh_scenario_load_opts(argv[first], &opts, &sc, err, sizeof err);
  rh_cli_opts_free(&opts);
  if (loaded != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  int rc = 0;
  if (sc.cluster.fabric.topology != RH_TOPO_SWITCH) {
    fprintf(stderr, "rehearsal: %s: cluster.network.topology: the XML platform has one switch; "
                    "fat_tree and rail are built in code only\n", argv[first]);
    rc = 2;
  } else if (rh_sim_platform_write(&sc.cluster, NULL, stdout) != RH_OK) {
    rc = 1;
  }
  rh_scenario_free(&sc);
  return rc;
}
