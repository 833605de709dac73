/*
 * launch.c: rh_main, the entry point of a user's training program, and `rehearsal platform`.  On
 * the simulator the cluster comes from the scenario named by --scenario FILE (or RH_SCENARIO), and
 * its `collective:` settings apply to the runtime.
 */
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
  rh_launch_config cfg = {.cluster = &sc.cluster, .settings = &sc.settings};
  int rc = rh__launch(&cfg, fn, arg, NULL);
  rh_scenario_free(&sc);
  return rc;
}

int rh_cmd_platform(int argc, char **argv) {
  if (argc != 1) {
    fprintf(stderr, "usage: rehearsal platform FILE\n");
    return 2;
  }
  rh_scenario sc;
  char err[1024];
  if (rh_scenario_load(argv[0], &sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    return 2;
  }
  int rc = rh_sim_platform_write(&sc.cluster, NULL, stdout) == RH_OK ? 0 : 1;
  rh_scenario_free(&sc);
  return rc;
}
