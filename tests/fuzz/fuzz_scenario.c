/*
 * fuzz_scenario.c: the scenario parser on any bytes: rh_scenario_load, then for a scenario it
 * accepts, what the commands do next with it: the runtime's forms of its failure, elastic and
 * restart sections, and its sweep axes applied as `--set` overrides (as `rehearsal sweep` sets
 * one point), each axis at its first and its last value.
 */
#include "fuzz.h"
#include "scenario.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(0, "scenario.yaml", data, size);
  if (!path) return 0;
  rh_scenario sc;
  char err[1024];
  if (rh_scenario_load(path, &sc, err, sizeof err) != RH_OK) return 0;
  rh_scenario_launch l;
  if (rh_scenario_launch_init(&sc, &l) == RH_OK) rh_scenario_launch_free(&l);
  int naxes = sc.sweep.naxes < 8 ? sc.sweep.naxes : 8;
  for (int end = 0; end < 2 && naxes > 0; end++) {
    char sets[8][512];
    const char *set[8];
    for (int i = 0; i < naxes; i++) {
      const rh_sweep_axis *a = &sc.sweep.axes[i];
      snprintf(sets[i], sizeof sets[i], "%s=%s", a->key, a->values[end ? a->nvalues - 1 : 0]);
      set[i] = sets[i];
    }
    rh_scenario_opts o = {.sets = set, .nsets = naxes};
    rh_scenario point;
    if (rh_scenario_load_opts(path, &o, &point, err, sizeof err) == RH_OK) rh_scenario_free(&point);
  }
  rh_scenario_free(&sc);
  return 0;
}
