/*
 * test_timeline.c: the timeline (`--timeline FILE`), a Chrome trace / Perfetto JSON file of what
 * each rank did.  The training of a scenario runs through the launch with a timeline asked for
 * (rh_launch_config.timeline), as `rehearsal run` does, and the file must:
 * - parse (jansson), with a track for every rank, each track's times growing, every slice ending
 *   (no "B" without its "E", no negative "X") and nested in the slices around it;
 * - on rank 0's track, hold compute and wait slices whose sums, epoch by epoch, are the epoch's
 *   compute and comm_wait figures (to 1e-6): repeated steps charged without running included, and
 *   also when a small budget of events makes the steps merge;
 * - show the collectives (negotiate, then the algorithm's phases) and the link tracks;
 * - with a failure, show the fault, who noticed it, the rendezvous and the recovery;
 * - on real processes (mpirun -np 2, when MPI is built) have the same structure.
 *
 * The same source built with RH_TIMELINE_MPI is the program mpirun starts for the last one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "harness.h"
#include "scenario.h"
#include "train/train.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a scenario's training, as `rehearsal run` sets it up for a timing-only model ---------- */

typedef struct training {
  rh_scenario sc;
  rh_scenario_launch launch;
  rh_train_layer *layers;
  rh_train_config cfg;
} training;

static int training_init(training *t, const char *file) {
  char err[1024];
  memset(t, 0, sizeof *t);
  if (rh_scenario_load(file, &t->sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  const rh_scenario *sc = &t->sc;
  if (sc->model.kind != 0 || rh_scenario_launch_init(sc, &t->launch) != RH_OK) return 1;
  t->layers = calloc((size_t)sc->model.nlayers, sizeof *t->layers);
  if (!t->layers) return 1;
  for (int i = 0; i < sc->model.nlayers; i++)
    t->layers[i] = (rh_train_layer){sc->model.layers[i].name, sc->model.layers[i].parameters,
                                    sc->model.layers[i].forward_flops,
                                    sc->model.layers[i].memory_bytes, false};
  const rh_elastic_config *el = t->launch.config.elastic;
  int slots = 0;
  for (int n = 0; n < sc->cluster.nodes + sc->cluster.spares; n++) slots += sc->cluster.gpus_per_node[n];
  t->cfg = (rh_train_config){
      .parameters = sc->model.parameters, .forward_flops = sc->model.forward_flops,
      .layers = t->layers, .nlayers = sc->model.nlayers, .train_samples = (long)sc->data.train,
      .validation_samples = (long)sc->data.validation, .batch = (long)sc->recipe.batch,
      .base_lr = sc->recipe.base_lr, .lr_scaling = (rh_lr_scaling)sc->recipe.lr_scaling,
      .warmup_epochs = sc->recipe.warmup_epochs, .decay_epochs = sc->recipe.decay_epochs,
      .ndecay = sc->recipe.ndecay, .decay_factor = sc->recipe.decay_factor,
      .optimizer = (rh_optimizer_kind)sc->recipe.optimizer, .epochs = (int)sc->recipe.epochs,
      .epochs_divided = sc->recipe.epochs_rule == 1, .steps_rule = (rh_steps_rule)sc->recipe.steps_rule,
      .val_rule = (rh_val_rule)sc->recipe.val_rule, .stop_at_step = (long)sc->recipe.stop_at_step,
      .seed = (uint64_t)sc->recipe.seed, .sampler_seed = (uint64_t)sc->recipe.sampler_seed,
      .shuffle = sc->recipe.shuffle != 0,
      .val_batch = sc->recipe.val_batch > 0 ? (long)sc->recipe.val_batch : (long)sc->recipe.batch,
      .checkpoint_every = sc->recipe.checkpoint_every,
      .gpu = {.sustained = sc->cluster.gpu_flops, .peak = sc->compute.peak,
              .memory_bw = sc->compute.memory_bw, .gemm_efficiency = sc->compute.gemm_efficiency,
              .gemm_half = sc->compute.gemm_half, .overhead = sc->compute.overhead},
      .faults = t->launch.has_plan, .elastic = t->launch.has_elastic,
      .min_np = el ? el->min_np : rh_scenario_size(sc), .commit_every = (long)sc->elastic.commit_every,
      .max_size = el && el->max_np > 0 && el->max_np < slots ? el->max_np : slots,
      .optimizer_state = sc->recipe.optimizer == RH_OPT_SGD ? 1 : 2};
  t->cfg.check[RH_CHECK_COLLECTIVES] = true;
  return 0;
}

static void training_free(training *t) {
  free(t->layers);
  rh_scenario_launch_free(&t->launch);
  rh_scenario_free(&t->sc);
}

/* What the run reports, per epoch (rank 0's figures, as summary.json has them). */
typedef struct report {
  int rc, epochs;
  double compute[64], wait[64];
  double end, commit[64]; /* when the job ended; each epoch's commits */
} report;

/* Trains `file` with a timeline into `out` (events per rank: 0, the default); returns rank 0's
 * report (that of this process's rank under mpirun; rank -1 there marks the other ranks). */
static int train(const char *file, const char *out, long events, report *rep, int *rank) {
  training t;
  if (training_init(&t, file) != 0) return 1;
  int size = rh_scenario_size(&t.sc);
  rh_train_result res;
  if (rh_train_result_init(&res, rh_recipe_epochs(t.cfg.epochs, t.cfg.epochs_divided, size)) != RH_OK)
    return 1;
  t.launch.config.timeline = out;
  t.launch.config.timeline_events = events;
  rh_train_job job = {.cfg = &t.cfg, .result = &res};
  rh_launch_result lres = {0};
  rep->rc = rh__launch(&t.launch.config, rh_train_rank, &job, &lres);
  rep->epochs = res.epochs < 64 ? res.epochs : 64;
  for (int e = 0; e < rep->epochs; e++) {
    rep->compute[e] = res.epochs_stats[e].compute;
    rep->wait[e] = res.epochs_stats[e].exposed_comm;
    rep->commit[e] = res.epochs_stats[e].commit;
  }
  rep->end = lres.end_time;
  if (rank) *rank = lres.rank;
  if (lres.log) rh__joblog_free(lres.log);
  free(lres.log);
  rh_train_result_free(&res);
  training_free(&t);
  return 0;
}

#ifdef RH_TIMELINE_MPI
/* Under mpirun: trains FILE with a timeline into OUT; rank 0 prints its epochs' figures. */
int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: mpirun -np N test_timeline_mpi SCENARIO TIMELINE\n");
    return 2;
  }
  report rep = {0};
  int rank = -1;
  if (train(argv[1], argv[2], 0, &rep, &rank) != 0) return 1;
  for (int e = 0; rank == 0 && e < rep.epochs; e++)
    printf("epoch %d %.17g %.17g\n", e + 1, rep.compute[e], rep.wait[e]);
  return rep.rc;
}
#else

static char tmpdir[64];

/* "tmpdir/name" in a buffer of the caller's. */
static char *path_in(char *buf, const char *name) {
  snprintf(buf, 128, "%s/%s", tmpdir, name);
  return buf;
}

/* The scenario `text` as a file of the test's folder, its path into buf (128 bytes). */
static const char *scenario(char *buf, const char *name, const char *text) {
  FILE *f = fopen(path_in(buf, name), "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return buf;
}

/* Trains in a child process (the simulator runs once per process). */
static report simulate(const char *file, const char *out, long events) {
  report *shared = rh_test_shared(sizeof *shared);
  assert_non_null(shared);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = train(file, out, events, shared, NULL);
    fflush(NULL);
    _exit(rc ? 100 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  assert_true(WIFEXITED(status));
  assert_int_not_equal(WEXITSTATUS(status), 100);
  return *shared;
}

/* ---- reading the file ------------------------------------------------------------------ */

typedef struct track {
  json_int_t pid, tid;
  const char *name;
  json_t **ev; /* its events in file order */
  size_t n, cap;
} track;

typedef struct trace {
  json_t *root;
  track *tracks;
  size_t n;
} trace;

static track *track_of(trace *t, json_int_t pid, json_int_t tid) {
  for (size_t i = 0; i < t->n; i++)
    if (t->tracks[i].pid == pid && t->tracks[i].tid == tid) return &t->tracks[i];
  t->tracks = realloc(t->tracks, (t->n + 1) * sizeof *t->tracks);
  assert_non_null(t->tracks);
  t->tracks[t->n] = (track){.pid = pid, .tid = tid, .name = ""};
  return &t->tracks[t->n++];
}

static double num(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }
static const char *str(json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

/* A time of an event (microseconds in the file) in nanoseconds: it must be a whole number of them. */
static long long whole_ns(const track *k, json_t *ev, const char *key) {
  double us = num(ev, key), ns = us * 1e3;
  if (!(fabs(ns - round(ns)) <= 1e-3 * fmax(1, fabs(ns) * 1e-12)))
    fail_msg("track %s: %s's %s %.9f us is not a whole number of nanoseconds", k->name,
             str(ev, "name"), key, us);
  return llround(ns);
}

/* Loads the file and checks the format: every event's phase and fields, each track's times in
 * order, every B ended by its E in order, every X nested in the slices it begins in. */
static trace load(const char *path) {
  json_error_t err;
  trace t = {.root = json_load_file(path, 0, &err)};
  if (!t.root) fail_msg("%s:%d: %s", path, err.line, err.text);
  assert_string_equal(str(t.root, "displayTimeUnit"), "ms");
  json_t *events = json_object_get(t.root, "traceEvents");
  assert_true(json_is_array(events));
  assert_true(json_array_size(events) > 0);
  size_t i;
  json_t *e;
  json_array_foreach(events, i, e) {
    const char *ph = str(e, "ph");
    assert_true(json_is_integer(json_object_get(e, "pid")));
    if (strcmp(ph, "M") == 0) {
      if (strcmp(str(e, "name"), "thread_name") == 0)
        track_of(&t, json_integer_value(json_object_get(e, "pid")),
                 json_integer_value(json_object_get(e, "tid")))
            ->name = str(json_object_get(e, "args"), "name");
      continue;
    }
    assert_true(strchr("BEXiC", ph[0]) && ph[1] == 0);
    assert_true(json_is_number(json_object_get(e, "ts")));
    track *k = track_of(&t, json_integer_value(json_object_get(e, "pid")),
                        json_integer_value(json_object_get(e, "tid")));
    if (k->n == k->cap) {
      k->cap = k->cap ? 2 * k->cap : 64;
      k->ev = realloc(k->ev, k->cap * sizeof *k->ev);
      assert_non_null(k->ev);
    }
    k->ev[k->n++] = e;
  }
  /* times are whole nanoseconds (microseconds with three decimals), and a slice nests in its
   * parent and follows its sibling exactly, with no tolerance: a slice that ends where the next
   * begins must not overlap it once rounded */
  for (size_t j = 0; j < t.n; j++) {
    track *k = &t.tracks[j];
    long long last = LLONG_MIN, ends[64];
    int depth = 0, open = 0;
    for (size_t m = 0; m < k->n; m++) {
      json_t *ev = k->ev[m];
      const char *ph = str(ev, "ph");
      long long ts = whole_ns(k, ev, "ts");
      if (ts < last) fail_msg("track %s: time goes back at %s (%lld < %lld ns)", k->name, str(ev, "name"), ts, last);
      last = ts;
      if (ph[0] == 'B') open++;
      if (ph[0] == 'E' && --open < 0) fail_msg("track %s: an E without its B", k->name);
      if (ph[0] != 'X') continue;
      long long dur = whole_ns(k, ev, "dur");
      if (dur < 0) fail_msg("track %s: %s lasts %lld ns", k->name, str(ev, "name"), dur);
      while (depth > 0 && ts >= ends[depth - 1]) depth--; /* slices that ended */
      if (depth > 0 && ts + dur > ends[depth - 1])
        fail_msg("track %s: %s [%lld, %lld] ns overlaps the end of its parent or sibling at %lld",
                 k->name, str(ev, "name"), ts, ts + dur, ends[depth - 1]);
      if (depth < 64) ends[depth++] = ts + dur;
    }
    if (open != 0) fail_msg("track %s: %d B without their E", k->name, open);
  }
  return t;
}

static void unload(trace *t) {
  for (size_t i = 0; i < t->n; i++) free(t->tracks[i].ev);
  free(t->tracks);
  json_decref(t->root);
}

/* The track whose name begins with `prefix` (and contains `also`), or NULL. */
static track *named(trace *t, const char *prefix, const char *also) {
  for (size_t i = 0; i < t->n; i++)
    if (strncmp(t->tracks[i].name, prefix, strlen(prefix)) == 0 &&
        (!also || strstr(t->tracks[i].name, also)))
      return &t->tracks[i];
  return NULL;
}

/* How many events of a track are named `name` (prefix, when `prefix`). */
static int count(const track *k, const char *name, bool prefix) {
  int n = 0;
  for (size_t i = 0; k && i < k->n; i++) {
    const char *s = str(k->ev[i], "name");
    n += prefix ? strncmp(s, name, strlen(name)) == 0 : strcmp(s, name) == 0;
  }
  return n;
}

/* Every rank 0..n-1 has its track ("rank R (gpu G)", or "rank R, then ..." for a worker whose
 * rank changed) and its collectives' track. */
static void every_rank(trace *t, int n) {
  char prefix[32], changed[32];
  for (int r = 0; r < n; r++) {
    snprintf(prefix, sizeof prefix, "rank %d ", r);
    snprintf(changed, sizeof changed, "rank %d,", r);
    if (!named(t, prefix, "(gpu ") && !named(t, changed, "(gpu ")) fail_msg("no track for rank %d", r);
    snprintf(prefix, sizeof prefix, "rank %d collectives", r);
    if (!named(t, prefix, NULL)) fail_msg("no collectives' track for rank %d", r);
  }
}

/* Rank 0's compute and wait slices, epoch by epoch, against the run's figures. */
static void sums_match(trace *t, const report *rep) {
  track *k = named(t, "rank 0 ", "(gpu ");
  assert_non_null(k);
  assert_true(rep->epochs > 0);
  for (int e = 0; e < rep->epochs; e++) {
    double compute = 0, wait = 0;
    for (size_t i = 0; i < k->n; i++) {
      json_t *ev = k->ev[i];
      if (strcmp(str(ev, "ph"), "X") != 0 || num(json_object_get(ev, "args"), "epoch") != e + 1) continue;
      if (strcmp(str(ev, "cat"), "compute") == 0) compute += num(ev, "dur") * 1e-6;
      if (strcmp(str(ev, "cat"), "wait") == 0) wait += num(ev, "dur") * 1e-6;
    }
    double want = rep->compute[e] + rep->wait[e], got = compute + wait;
    if (!(fabs(got - want) <= 1e-6 * want))
      fail_msg("epoch %d: the timeline's compute %.9f + wait %.9f = %.9f s; the run's %.9f + %.9f = %.9f s",
               e + 1, compute, wait, got, rep->compute[e], rep->wait[e], want);
    assert_true(fabs(compute - rep->compute[e]) <= 1e-6 * want);
  }
}

/* ---- the tests ---------------------------------------------------------------------------- */

/* An elastic job of 3 nodes x 2 GPUs that loses node 1 in epoch 1 step 12, in an allreduce. */
#define CRASH \
  "name: crash\n" \
  "cluster: {nodes: 3, gpus_per_node: 2, gpu: {tflops: 10},\n" \
  "  intra: {bandwidth_GBps: 20}, network: {nic_Gbps: 25},\n" \
  "  network_model: exact}\n" \
  "model:\n" \
  "  layers:\n" \
  "    - {name: a, parameters: 100000, forward_gflops_per_sample: 0.05}\n" \
  "    - {name: b, parameters: 300000, forward_gflops_per_sample: 0.1}\n" \
  "data: {train_samples: 6144}\n" \
  "recipe: {batch_per_worker: 32, epochs: 2}\n" \
  "failures:\n" \
  "  events:\n" \
  "    - {kind: host_crash, node: 1, epoch: 1, step: 12, during: allreduce}\n" \
  "elastic: {min_np: 2, commit_every_steps: 4}\n"

static int setup(void **state) {
  (void)state;
  return rh_test_mkdtemp(tmpdir, "timeline");
}

static int teardown(void **state) {
  (void)state;
  return rh_test_rmdir(tmpdir);
}

/* The default scenario (2 nodes x 4 GPUs): most steps of each epoch repeat and are charged at
 * once; the first ones are in full, with their layers and collectives. */
static void test_default_scenario(void **state) {
  (void)state;
  char out[128];
  path_in(out, "default.json");
  report rep = simulate("scenarios/default.yaml", out, 0);
  assert_int_equal(rep.rc, 0);
  trace t = load(out);
  every_rank(&t, 8);
  sums_match(&t, &rep);
  assert_string_equal(str(json_object_get(t.root, "otherData"), "target"), "simulator");
  track *r0 = named(&t, "rank 0 ", "(gpu 0)");
  assert_true(count(r0, "epoch 1 step 1", false) == 1);
  assert_true(count(r0, "layer4", false) >= 1); /* backward by layer */
  assert_true(count(r0, "epoch 1 steps ", true) == 1); /* the repeated steps, charged */
  /* collectives: negotiated, then the algorithm's phases; on both nodes' links */
  track *c0 = named(&t, "rank 0 collectives", NULL);
  assert_true(count(c0, "allreduce layer4", false) >= 1);
  assert_true(count(c0, "negotiate", false) >= 1);
  assert_true(count(c0, "reduce-scatter", true) + count(c0, "local reduce-scatter", false) >= 1);
  size_t nvlink = 0, uplink = 0;
  for (size_t i = 0; i < t.n; i++) {
    nvlink += strcmp(t.tracks[i].name, "NVLink") == 0;
    uplink += strcmp(t.tracks[i].name, "uplink") == 0;
  }
  assert_int_equal(nvlink, 2);
  assert_int_equal(uplink, 2);
  unload(&t);
}

/* Without repeats (the fine grain) and with 48 events per rank: the steps merge into one slice
 * per epoch, whose compute and wait sums are still the epoch's. */
static void test_budget_merges_steps(void **state) {
  (void)state;
  char file[128], out[128];
  scenario(file, "fine.yaml",
                              "name: fine\n"
                              "cluster: {nodes: 2, gpus_per_node: 2, gpu: {tflops: 10},\n"
                              "  intra: {bandwidth_GBps: 20}, network: {nic_Gbps: 25},\n"
                              "  network_model: exact}\n"
                              "model:\n"
                              "  layers:\n"
                              "    - {name: a, parameters: 100000, forward_gflops_per_sample: 0.05}\n"
                              "    - {name: b, parameters: 300000, forward_gflops_per_sample: 0.1}\n"
                              "data: {train_samples: 4096}\n"
                              "recipe: {batch_per_worker: 32, epochs: 3}\n"
                              "collective: {grain: fine, fusion_threshold: 1MiB}\n");
  path_in(out, "merged.json");
  report rep = simulate(file, out, 48);
  assert_int_equal(rep.rc, 0);
  assert_int_equal(rep.epochs, 3);
  trace t = load(out);
  every_rank(&t, 4);
  sums_match(&t, &rep);
  track *r0 = named(&t, "rank 0 ", "(gpu 0)");
  assert_true(count(r0, "epoch 3: ", true) >= 1); /* merged steps */
  assert_true(r0->n < 48);
  json_t *other = json_object_get(t.root, "otherData");
  assert_int_equal((int)num(other, "events_per_rank"), 48);
  assert_true(num(other, "events_merged") > 0);
  unload(&t);
}

/* An elastic job losing a node: the fault, the ranks that noticed it, their rendezvous, the
 * restore of the last commit and the recovery; the job's worlds. */
static void test_failure_shows(void **state) {
  (void)state;
  char file[128], out[128];
  scenario(file, "crash.yaml", CRASH);
  path_in(out, "crash.json");
  report rep = simulate(file, out, 0);
  assert_int_equal(rep.rc, 0);
  trace t = load(out);
  every_rank(&t, 6);
  track *faults = named(&t, "faults", NULL), *job = named(&t, "events", NULL);
  assert_non_null(faults);
  assert_int_equal(count(faults, "host_crash of node 1", false), 1);
  assert_non_null(job);
  assert_int_equal(count(job, "world 1: 4 ranks", true), 1);
  assert_true(count(job, "node 1 left", true) == 1);
  int noticed = 0, rendezvous = 0, restored = 0, recovered = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (strncmp(t.tracks[i].name, "rank ", 5) != 0) continue;
    noticed += count(&t.tracks[i], "noticed: ", true);
    rendezvous += count(&t.tracks[i], "rendezvous", false);
    restored += count(&t.tracks[i], "restored the last commit", false);
    recovered += count(&t.tracks[i], "recovery", true);
  }
  assert_true(noticed >= 1);
  /* the steps the failure threw away are marked, and the others add up to the epoch table */
  track *r0 = named(&t, "rank 0 ", "(gpu ");
  int rolled = 0;
  for (size_t i = 0; r0 && i < r0->n; i++)
    rolled += strcmp(str(r0->ev[i], "cat"), "rolled back") == 0 &&
              strncmp(str(r0->ev[i], "name"), "epoch 1 step ", 13) == 0;
  assert_true(rolled >= 1); /* steps 9 to 12 began after the commit of step 8 */
  sums_match(&t, &rep);
  assert_int_equal(rendezvous, 4); /* the survivors */
  assert_int_equal(restored, 4);
  assert_int_equal(recovered, 4);
  unload(&t);
}

/* Recording costs no simulated time: the same figures, bit for bit, with a timeline and
 * without, for the default scenario (charged steps), a priced (NCCL model) one and a failure. */
static void test_numbers_unchanged(void **state) {
  (void)state;
  char crash[128], nccl[128], out[128];
  scenario(crash, "crash.yaml", CRASH);
  scenario(nccl, "nccl.yaml",
           "name: nccl\n"
           "cluster: {nodes: 2, node: dgx-h100}\n"
           "model:\n"
           "  layers:\n"
           "    - {name: a, parameters: 1000000, forward_gflops_per_sample: 0.5}\n"
           "    - {name: b, parameters: 3000000, forward_gflops_per_sample: 1}\n"
           "data: {train_samples: 16384}\n"
           "recipe: {batch_per_worker: 64, epochs: 2}\n");
  const char *files[] = {"scenarios/default.yaml", nccl, crash};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    report with = simulate(files[i], path_in(out, "same.json"), 0);
    report without = simulate(files[i], NULL, 0);
    assert_int_equal(with.rc, 0);
    assert_int_equal(without.rc, 0);
    assert_true(with.epochs > 0);
    if (memcmp(&with, &without, sizeof with) != 0)
      fail_msg("%s: the timeline changed the figures (end %.17g s against %.17g s)", files[i],
               with.end, without.end);
  }
}

/* Asked for where it cannot be written: refused before the run, as bad input. */
static void test_unwritable_path(void **state) {
  (void)state;
  report rep = simulate("scenarios/default.yaml", "/nonexistent/dir/t.json", 0);
  assert_int_equal(rep.rc, 2);
}

/* Real processes: two ranks of rehearsal's MPI target, with RH_MPI_GPUS_PER_NODE=1 two nodes. */
static void test_mpi_same_structure(void **state) {
  (void)state;
#if defined(RH_MPIEXEC) && defined(RH_TIMELINE_MPI_BINARY)
  char file[128], out[128], printed[128], errors[128];
  scenario(file, "mpi.yaml",
                              "name: mpi\n"
                              "cluster: {nodes: 2, gpus_per_node: 1, gpu: {tflops: 50},\n"
                              "  intra: {bandwidth_GBps: 20}, network: {nic_Gbps: 25}}\n"
                              "model:\n"
                              "  layers:\n"
                              "    - {name: a, parameters: 100000, forward_gflops_per_sample: 0.01}\n"
                              "    - {name: b, parameters: 300000, forward_gflops_per_sample: 0.02}\n"
                              "data: {train_samples: 1024}\n"
                              "recipe: {batch_per_worker: 32, epochs: 2}\n");
  path_in(out, "mpi.json");
  path_in(printed, "mpi.txt");
  path_in(errors, "mpi.err");
  setenv("RH_MPI_GPUS_PER_NODE", "1", 1);
  char *argv[] = {RH_MPIEXEC, "--oversubscribe", "-np", "2", "-x", "RH_MPI_GPUS_PER_NODE",
                  RH_TIMELINE_MPI_BINARY, file, out, NULL};
  int rc = rh_test_spawn(argv, printed, errors);
  if (rc != 0) {
    char *err = rh_test_slurp(errors);
    fail_msg("mpirun exited %d: %s", rc, err ? err : "");
  }
  report rep = {0};
  FILE *f = fopen(printed, "r");
  assert_non_null(f);
  int e;
  double c, w;
  while (fscanf(f, "epoch %d %lf %lf\n", &e, &c, &w) == 3 && rep.epochs < 64) {
    rep.compute[rep.epochs] = c;
    rep.wait[rep.epochs++] = w;
  }
  fclose(f);
  assert_int_equal(rep.epochs, 2);
  trace t = load(out);
  every_rank(&t, 2);
  sums_match(&t, &rep);
  assert_string_equal(str(json_object_get(t.root, "otherData"), "target"), "mpi");
  track *r1 = named(&t, "rank 1 ", "(gpu 0)");
  assert_true(count(r1, "epoch 1 step 1", false) == 1);
  track *c1 = named(&t, "rank 1 collectives", NULL);
  assert_true(count(c1, "negotiate", false) >= 1);
  assert_true(count(c1, "allgather", false) >= 1); /* the phases of the ring allreduce */
  unload(&t);
#else
  skip();
#endif
}

/* `rehearsal run --timeline FILE`, against the summary.json of the same run. */
static void test_command_line(void **state) {
  (void)state;
  char out[128], file[128], summary_path[160];
  path_in(out, "cli");
  path_in(file, "nested/dirs/cli.json"); /* made as --out makes its directory */
  snprintf(summary_path, sizeof summary_path, "%s/summary.json", out);
  char *argv[] = {RH_BINARY, "run", "scenarios/default.yaml", "--out", out, "--timeline", file,
                  NULL};
  assert_int_equal(rh_test_spawn_expect(argv, NULL, 0), 0);
  assert_int_equal(access(file, F_OK), 0);
  json_error_t err;
  json_t *summary = json_load_file(summary_path, 0, &err);
  assert_non_null(summary);
  report rep = {0};
  size_t i;
  json_t *ep;
  json_array_foreach(json_object_get(summary, "epochs"), i, ep) {
    rep.compute[rep.epochs] = num(ep, "compute_s");
    rep.wait[rep.epochs++] = num(ep, "comm_wait_s");
  }
  json_decref(summary);
  trace t = load(file);
  every_rank(&t, 8);
  sums_match(&t, &rep);
  unload(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_scenario),
      cmocka_unit_test(test_budget_merges_steps),
      cmocka_unit_test(test_failure_shows),
      cmocka_unit_test(test_numbers_unchanged),
      cmocka_unit_test(test_unwritable_path),
      cmocka_unit_test(test_mpi_same_structure),
      cmocka_unit_test(test_command_line),
  };
  if (getenv("RH_TEST_FILTER")) cmocka_set_test_filter(getenv("RH_TEST_FILTER"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
#endif
