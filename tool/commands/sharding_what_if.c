/*
 * sharding_what_if.c: what the same job would do with the state sharded one ZeRO stage less or
 * more, or hybrid (FSDP HYBRID_SHARD), for a run whose state is sharded (or does not fit).
 *
 * The stages form a ladder: none (DDP), optimizer (ZeRO-1), gradients (ZeRO-2), full (ZeRO-3);
 * hybrid stands beside full, sharding over a shard group's GPUs instead of the world's.  Each
 * alternative is the run itself, again: `rehearsal run FILE` with the same overrides and
 * recipe.sharding set, in a child process (the simulator runs once per process), all of them at
 * once.  Its step, tokens/s and memory per GPU come from its summary.json.  A sharded step is
 * collectives and compute interleaved unit by unit, so no replay of the parent's buckets can
 * answer it: the child simulates it, as long as the run took (--no-what-if leaves it out).
 */
#include "sharding_what_if.h"

#include "memory.h"
#include "output.h"
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef struct child {
  char dir[40];
  pid_t pid;
} child;

/* The run's overrides with recipe.sharding=`sharding` after them (and, leaving hybrid, its
 * shard_group_size back to none): into sets (room for nsets + 2) and the two texts. */
static rh_scenario_opts with_sharding(const run_job *j, int sharding, const char **sets,
                                      char text[2][48]) {
  rh_scenario_opts o = *j->opts;
  for (int i = 0; i < o.nsets; i++) sets[i] = o.sets[i];
  snprintf(text[0], 48, "recipe.sharding=%s", rh_sharding_names[sharding]);
  snprintf(text[1], 48, "recipe.shard_group_size=0");
  sets[o.nsets++] = text[0];
  if (sharding != RH_SHARD_HYBRID && j->sc.recipe.shard_group > 0) sets[o.nsets++] = text[1];
  o.sets = sets;
  return o;
}

/* Whether the run's scenario takes recipe.sharding=`sharding` too (not with keys of its own
 * sharding that another refuses: reduce_scatter: false with full, sharded checkpoints with DDP,
 * FSDP's wrap keys with ZeRO's stages). */
static bool takes(const run_job *j, int sharding, const char **sets) {
  char text[2][48], err[256];
  rh_scenario_opts o = with_sharding(j, sharding, sets, text);
  rh_scenario sc;
  bool ok = rh_scenario_load_opts(j->file, &o, &sc, err, sizeof err) == RH_OK;
  if (ok) rh_scenario_free(&sc);
  return ok;
}

/* The alternatives to `stage`: the stage below and above on the ladder, and hybrid (on nodes of
 * more than one GPU, beside anything but itself), where the scenario takes them. */
static int alternatives(const run_job *j, rh_sharding_alt *alt, const char **sets) {
  const rh_scenario *sc = &j->sc;
  static const int ladder[] = {RH_SHARD_NONE, RH_SHARD_OPTIMIZER, RH_SHARD_GRADIENTS, RH_SHARD_FULL};
  static const char *const relations[] = {"one stage less", "one stage more", "hybrid"};
  int stage = sc->recipe.state_sharding, at = 3, n = 0;
  for (int i = 0; i < 4; i++)
    if (ladder[i] == stage) at = i;
  bool hybrid = stage == RH_SHARD_HYBRID;
  int less = hybrid ? 2 : at - 1, more = hybrid ? 3 : at + 1;
  int want[RH_SHARDING_ALTS] = {less >= 0 ? ladder[less] : -1, more < 4 ? ladder[more] : -1,
                                hybrid ? -1 : RH_SHARD_HYBRID};
  const rh_cluster *cl = &sc->cluster;
  for (int k = 0; k < RH_SHARDING_ALTS; k++) {
    int s = want[k];
    bool no = s < 0 || (s == RH_SHARD_HYBRID && (cl->nodes < 2 || cl->gpus_per_node[0] < 2));
    if (!no && takes(j, s, sets)) alt[n++] = (rh_sharding_alt){.sharding = s, .relation = relations[k]};
  }
  return n;
}

/* Starts the run with sharding `sharding` in a folder of its own; false when it could not. */
static bool start(const run_job *j, int sharding, child *c, const char **sets) {
  snprintf(c->dir, sizeof c->dir, "/tmp/rehearsal-sharding-XXXXXX");
  c->pid = -1;
  if (!mkdtemp(c->dir)) {
    c->dir[0] = 0;
    return false;
  }
  char text[2][48]; /* (the child has its arguments once started) */
  rh_scenario_opts o = with_sharding(j, sharding, sets, text);
  c->pid = rh_cli_spawn_run(NULL, j->file, &o, NULL, 0, c->dir);
  return c->pid > 0;
}

/* The run's figures from its summary.json, once it ended; its folder goes. */
static void finish(child *c, rh_sharding_alt *a) {
  int status = 0;
  a->ran = c->pid > 0 && waitpid(c->pid, &status, 0) == c->pid && WIFEXITED(status) &&
           WEXITSTATUS(status) <= 1;
  char path[sizeof c->dir + 16];
  snprintf(path, sizeof path, "%.39s/summary.json", c->dir);
  json_t *root = a->ran ? json_load_file(path, 0, NULL) : NULL;
  json_t *sum = json_object_get(root, "summary"), *mem = json_object_get(root, "memory");
  a->step = json_number_value(json_object_get(sum, "step_ms")) / 1e3;
  a->tokens_per_s = json_number_value(json_object_get(sum, "tokens_per_s"));
  a->memory = json_number_value(json_object_get(mem, "total_GB")) * 1e9;
  a->capacity = json_number_value(json_object_get(mem, "gpu_GB")) * 1e9;
  json_decref(root);
  if (c->dir[0]) rh_remove_tree(c->dir);
}

/* Whether the run asks for the what-if: a timing model on two GPUs or more whose state is
 * sharded, or does not fit unsharded. */
static bool wanted(const run_job *j) {
  const rh_scenario *sc = &j->sc;
  if (j->in.cfg.real || rh_scenario_size(sc) < 2) return false;
  if (sc->recipe.state_sharding != RH_SHARD_NONE) return true;
  rh_memory_use m;
  rh_workload_memory(sc, &m);
  return sc->compute.capacity > 0 && m.total > sc->compute.capacity;
}

void rh_sharding_what_if(const run_job *j, rh_sharding_alts *alts) {
  alts->n = 0;
  const char **sets = malloc(((size_t)j->opts->nsets + 2) * sizeof *sets);
  if (!sets || !wanted(j)) {
    free(sets);
    return;
  }
  alts->n = alternatives(j, alts->alt, sets);
  child kids[RH_SHARDING_ALTS];
  for (int k = 0; k < alts->n; k++) /* all at once: the runs are processes of their own */
    start(j, alts->alt[k].sharding, &kids[k], sets);
  free(sets);
  for (int k = 0; k < alts->n; k++) finish(&kids[k], &alts->alt[k]);
}
