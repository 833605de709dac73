/*
 * sweep.c: `rehearsal sweep FILE --out DIR`, the scenario run at every point of one or more axes
 * (the `sweep:` section, and --axis KEY=V1,V2,... on the command line, which replaces an axis of
 * the same key).  Axes multiply: every combination is a point, the first axis outermost.
 *
 * Each point is `rehearsal run FILE --set KEY=VALUE... --out DIR/points/NNN`, a process of its
 * own (the simulator runs once per process), as many at a time as --jobs (default: the cores).
 * Every point's overrides are checked before any runs, so bad input writes nothing.  A point
 * that finished before (its point.json records the same scenario text and overrides) is not
 * run again, so an interrupted sweep resumes where it stopped.  The results are a table on
 * stdout, DIR/sweep.csv and DIR/sweep.json, one row per point, in point order: the same for
 * the same scenario, however many jobs ran them.
 *
 * With --launcher slurm the points are the tasks of a Slurm job array instead (sbatch --array,
 * run_points_slurm below): DIR must be on a file system the cluster's nodes share.  Each task
 * runs the same `rehearsal run` and writes its point.json itself, so a sweep interrupted while
 * its tasks run keeps whatever they finish; the sweep waits, says which points are pending,
 * running, done or failed, and tabulates as the local launcher does.
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "progress.h"
#include "slurm.h"

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: rehearsal sweep FILE --out DIR [--axis KEY=V1,V2,...]... [options]\n"
    "Runs the scenario at every point of its axes (the scenario's `sweep:` section and the\n"
    "--axis flags; several axes give every combination) and tabulates throughput, step time\n"
    "and scaling efficiency per point.\n"
    "  -o, --out DIR        where the points (DIR/points/NNN), sweep.csv and sweep.json go\n"
    "  -a, --axis KEY=V1,V2,...\n"
    "                       one axis: a dotted scenario key and its values (repeatable), e.g.\n"
    "                       cluster.nodes=1,2,4,8 or cluster.network.nic_Gbps=25,100,400;\n"
    "                       gpus=1,2,4,...,64: one node up to its GPUs, then whole nodes\n"
    "  -j, --jobs N         points run at once (default: the number of cores; under Slurm, as\n"
    "                       many as the cluster gives)\n"
    "      --launcher local|slurm\n"
    "                       where the points run: child processes here (default), or the tasks\n"
    "                       of a Slurm job array (sbatch --array; DIR on a shared file system)\n"
    "      --sbatch-arg ARG one more argument for sbatch, e.g. --sbatch-arg=--partition=cpu\n"
    "                       (repeatable)\n"
    "      --force          run every point again, even those finished before\n"
    "      --set KEY=VALUE  override a scenario key at every point (repeatable)\n"
    "      --help, --version\n"
    "Then: rehearsal plot DIR draws throughput and scaling efficiency against the axis.\n"
    "The points run on the simulator: rehearsal-mpi and rehearsal-gpu refuse a sweep.\n"
    "Exit status: 0 every point ran and passed, 1 some point failed, 2 bad input (or DIR is in\n"
    "use by another sweep), 128 + the signal (130 SIGINT, 143 SIGTERM, 129 SIGHUP) when stopped\n"
    "by one: the running points are stopped, and running the sweep again goes on.\n";

typedef struct axis {
  char *key;
  char **values;
  int n;
} axis;

typedef struct sweep_flags {
  const char *out;
  axis *axes;
  int naxes;
  int jobs;
  bool force;
  bool slurm;           /* --launcher slurm */
  const char **sbatch;  /* --sbatch-arg values */
  int nsbatch;
} sweep_flags;

/* Splits "V1,V2,..." at the commas outside brackets (a value may be a YAML list: [30,60]). */
static int split_values(const char *text, axis *a) {
  size_t len = strlen(text);
  a->values = calloc(len + 1, sizeof *a->values);
  if (!a->values) return 1;
  int depth = 0;
  const char *start = text;
  for (const char *p = text;; p++) {
    if (*p == '[' || *p == '{') depth++;
    if (*p == ']' || *p == '}') depth--;
    if (*p == 0 || (*p == ',' && depth == 0)) {
      size_t n = (size_t)(p - start);
      while (n && start[0] == ' ') start++, n--;
      while (n && start[n - 1] == ' ') n--;
      if (n == 0) return 2;
      a->values[a->n++] = strndup(start, n);
      if (*p == 0) return 0;
      start = p + 1;
    }
  }
}

static void clear_axis(axis *a) {
  for (int j = 0; j < a->n; j++) free(a->values[j]);
  free(a->values);
  free(a->key);
  *a = (axis){0};
}

static void free_axes(axis *axes, int n) {
  for (int i = 0; i < n; i++) clear_axis(&axes[i]);
  free(axes);
}

/* Puts `a` into the list, in place of the axes that set any of its keys (the first of them
 * where it was); 0, or 1 out of memory. */
static int put_axis(axis **axes, int *n, axis a) {
  int at = -1;
  for (int i = 0; i < *n; i++) {
    if (!rh_sweep_axes_clash((*axes)[i].key, a.key)) continue;
    clear_axis(&(*axes)[i]);
    if (at < 0) {
      (*axes)[i] = a;
      at = i;
    } else {
      memmove(&(*axes)[i], &(*axes)[i + 1], (size_t)(*n - i - 1) * sizeof **axes);
      (*n)--;
      i--;
    }
  }
  if (at >= 0) return 0;
  axis *grown = realloc(*axes, (size_t)(*n + 1) * sizeof *grown);
  if (!grown) return 1;
  *axes = grown;
  (*axes)[(*n)++] = a;
  return 0;
}

/* An axis from the command line, after the others (check_flag_axes refuses two that set the
 * same key). */
static int add_axis(sweep_flags *f, const char *key, size_t keylen, const char *values) {
  axis a = {.key = strndup(key, keylen)};
  if (!a.key || split_values(values, &a) != 0) {
    clear_axis(&a);
    return 2;
  }
  axis *grown = realloc(f->axes, (size_t)(f->naxes + 1) * sizeof *grown);
  if (!grown) {
    clear_axis(&a);
    return 1;
  }
  f->axes = grown;
  f->axes[f->naxes++] = a;
  return 0;
}

/* Two --axis flags that set the same key: named, 2; or -1 to go on. */
static int check_flag_axes(const sweep_flags *f) {
  for (int i = 0; i < f->naxes; i++)
    for (int j = 0; j < i; j++) {
      const char *both = rh_sweep_axes_clash(f->axes[j].key, f->axes[i].key);
      if (both && strcmp(f->axes[j].key, f->axes[i].key) == 0)
        return rh_cli_error("sweep", "--axis %s=...: appears twice", f->axes[i].key);
      if (both)
        return rh_cli_error("sweep", "--axis %s=...: sets %s, as --axis %s=... does",
                            f->axes[i].key, both, f->axes[j].key);
    }
  return -1;
}

static int sweep_option(int c, const char *v, void *arg) {
  sweep_flags *f = arg;
  switch (c) {
  case 'o': f->out = v; return 0;
  case 'f': f->force = true; return 0;
  case 'L':
    if (strcmp(v, "local") != 0 && strcmp(v, "slurm") != 0) return 2;
    f->slurm = strcmp(v, "slurm") == 0;
    return 0;
  case 'S': {
    const char **more = realloc(f->sbatch, (size_t)(f->nsbatch + 1) * sizeof *more);
    if (!more) return 1;
    f->sbatch = more;
    f->sbatch[f->nsbatch++] = v;
    return 0;
  }
  case 'j': {
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == 0 || *end || n < 1 || n > 1024) return 2;
    f->jobs = (int)n;
    return 0;
  }
  case 'a': {
    const char *eq = strchr(v, '=');
    bool gpus = eq == v + 4 && strncmp(v, "gpus", 4) == 0;
    if (!eq || eq == v || !eq[1] || (!gpus && !memchr(v, '.', (size_t)(eq - v)))) return 2;
    return add_axis(f, v, (size_t)(eq - v), eq + 1);
  }
  default: return 2;
  }
}

/* ---- the points -------------------------------------------------------------------------- */

typedef struct point {
  int index;
  char **sets;  /* the point's own values: KEY=VALUE, one per axis */
  char **runs;  /* the overrides they make (an axis of GPUs makes two) */
  int nruns;
  char dir[4200];
  pid_t pid;
  int exit;     /* -1: not finished */
  bool reused;
} point;

/* FNV-1a of the scenario file, so that a changed scenario runs its points again. */
static uint64_t file_hash(const char *path) {
  uint64_t h = 1469598103934665603ull;
  return rh_cli_fnv_file(path, &h) ? h : 0;
}

static int compare_text(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The variables that change what a point computes (RH_*, HOROVOD_*, NCCL_*: the settings, the
 * data's place), "NAME=VALUE" sorted, less those a point's run does not take (its progress line,
 * the timeline, the tests' own). */
static json_t *point_environment(void) {
  extern char **environ;
  size_t n = 0;
  for (char **e = environ; *e; e++) n++;
  const char **kept = calloc(n + 1, sizeof *kept);
  size_t k = 0;
  for (char **e = environ; kept && *e; e++) {
    const char *v = *e;
    bool ours = strncmp(v, "RH_", 3) == 0 || strncmp(v, "HOROVOD_", 8) == 0 || strncmp(v, "NCCL_", 5) == 0;
    bool left = strncmp(v, "RH_PROGRESS=", 12) == 0 || strncmp(v, "HOROVOD_TIMELINE=", 17) == 0 ||
                strncmp(v, "RH_TEST_", 8) == 0;
    if (ours && !left) kept[k++] = v;
  }
  json_t *a = json_array();
  if (kept) qsort(kept, k, sizeof *kept, compare_text);
  for (size_t i = 0; kept && i < k; i++) json_array_append_new(a, rh_json_text(kept[i]));
  free(kept);
  return a;
}

/* What a point is: its scenario, every override, the variables that change it and the program
 * that runs it (a rebuilt or upgraded rehearsal prices steps differently, so its points run
 * again), as point.json records it. */
static json_t *point_identity(const char *file, uint64_t hash, const rh_scenario_opts *common,
                              const point *p, int naxes) {
  static uint64_t program;
  if (!program) program = file_hash("/proc/self/exe");
  char hex[17], prog[17];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
  snprintf(prog, sizeof prog, "%016llx", (unsigned long long)program);
  json_t *sets = json_array();
  for (int i = 0; i < common->nsets; i++) json_array_append_new(sets, rh_json_text(common->sets[i]));
  for (int i = 0; i < p->nruns; i++) json_array_append_new(sets, rh_json_text(p->runs[i]));
  return json_pack("{s:o, s:s, s:s, s:o, s:o}", "file", rh_json_text(file), "scenario_fnv1a", hex,
                   "program_fnv1a", prog, "sets", sets, "environment", point_environment());
}

/* A finished point with the same identity: its exit status, or -1. */
static int finished_before(const point *p, json_t *identity) {
  char path[4300];
  snprintf(path, sizeof path, "%s/point.json", p->dir);
  json_t *old = json_load_file(path, 0, NULL);
  int rc = -1;
  json_t *exit = json_object_get(old, "exit");
  json_t *o_id = json_object_get(old, "identity");
  if (old && json_is_integer(exit) && o_id && json_equal(o_id, identity)) {
    snprintf(path, sizeof path, "%s/summary.json", p->dir);
    struct stat st;
    int e = (int)json_integer_value(exit);
    if (e == 2 || stat(path, &st) == 0) rc = e;
  }
  json_decref(old);
  return rc;
}

/* ---- the results ------------------------------------------------------------------------- */

static double num(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The replay at scale's columns (failures.horizon_days): over its seeds, the mean interruptions,
 * effective training time and hours lost to incidents. */
static void failure_columns(json_t *root, json_t *row) {
  json_t *at = json_object_get(json_object_get(root, "failures"), "at_scale");
  json_t *series = json_object_get(at, "series");
  if (!json_is_object(series)) return;
  json_object_set_new(row, "interruptions", json_real(num(series, "interruptions_mean")));
  json_object_set_new(row, "effective_training", json_real(num(series, "effective_mean")));
  json_object_set_new(row, "failures_lost_h", json_real(num(series, "lost_mean_s") / 3600));
  json_t *by = json_object(), *counts = json_object_get(series, "cause_means");
  json_t *lost = json_object_get(series, "cause_lost_mean_s"), *v;
  const char *name;
  json_object_foreach(counts, name, v)
    json_object_set_new(by, name, json_pack("{s:f, s:f}", "count", json_number_value(v), "lost_h",
                                            num(lost, name) / 3600));
  json_object_set_new(row, "failures_by_cause", by);
}

/* One point's row of sweep.json, from its summary.json. */
static json_t *point_row(const point *p, const axis *axes, int naxes) {
  char path[4300];
  snprintf(path, sizeof path, "%s/summary.json", p->dir);
  json_t *root = p->exit == 2 ? NULL : json_load_file(path, 0, NULL);
  json_t *s = json_object_get(root, "summary"), *cl = json_object_get(root, "cluster");
  json_t *set = json_object();
  for (int i = 0; i < naxes; i++)
    json_object_set_new(set, axes[i].key, json_string(strchr(p->sets[i], '=') + 1));
  const char *status = p->exit == 0 ? "ok" : p->exit == 2 || !s ? "error" : "failed";
  const char *rel = strstr(p->dir, "points/");
  json_t *row = json_pack("{s:i, s:o, s:s, s:s, s:i}", "point", p->index, "set", set, "dir",
                          rel ? rel : p->dir, "status", status, "exit", p->exit);
  if (s) {
    double step = num(s, "step_ms"), compute = num(s, "compute_ms"), wait = num(s, "comm_wait_ms");
    json_object_set_new(row, "gpus", json_integer((json_int_t)num(cl, "ranks")));
    json_object_set_new(row, "nodes", json_integer((json_int_t)num(cl, "nodes")));
    json_object_set_new(row, "step_ms", json_real(step));
    json_object_set_new(row, "compute_ms", json_real(compute));
    json_object_set_new(row, "comm_wait_ms", json_real(wait));
    /* the losses beside the network: the framework's work and the wait for the slowest rank */
    double fw = 0;
    if (json_is_number(json_object_get(s, "framework_ms"))) fw += num(s, "framework_ms");
    if (json_is_number(json_object_get(s, "slowest_rank_ms"))) fw += num(s, "slowest_rank_ms");
    json_object_set_new(row, "framework_ms", json_real(fw));
    /* what is none of these: failures, commits and checkpoints */
    double lost = step - compute - wait - fw;
    json_object_set_new(row, "lost_ms", json_real(lost > 1e-9 * step ? lost : 0));
    json_object_set_new(row, "samples_per_s", json_real(num(s, "samples_per_s")));
    json_object_set_new(row, "ideal_samples_per_s", json_real(num(s, "ideal_samples_per_s")));
    json_object_set_new(row, "scaling_efficiency", json_real(num(s, "scaling_efficiency")));
    /* sequence models: tokens/s; shaped models: MFU */
    if (json_object_get(s, "tokens_per_s"))
      json_object_set_new(row, "tokens_per_s", json_real(num(s, "tokens_per_s")));
    if (json_object_get(s, "mfu")) json_object_set_new(row, "mfu", json_real(num(s, "mfu")));
    json_t *mem = json_object_get(root, "memory"); /* sharding, checkpointing: what each holds */
    if (json_is_number(json_object_get(mem, "total_GB")))
      json_object_set_new(row, "memory_GB", json_real(num(mem, "total_GB")));
    failure_columns(root, row);
  }
  json_decref(root);
  return row;
}

static const char *const columns[] = {"gpus", "nodes", "step_ms", "compute_ms", "comm_wait_ms",
                                      "framework_ms", "lost_ms", "samples_per_s",
                                      "ideal_samples_per_s", "scaling_efficiency", NULL};
/* the columns a model with tokens adds (tokens/s, MFU, the memory of one GPU) */
static const char *const token_columns[] = {"tokens_per_s", "mfu", "memory_GB", NULL};
/* the columns of the replay at scale (failures.horizon_days) */
static const char *const at_scale_columns[] = {"interruptions", "effective_training",
                                               "failures_lost_h", NULL};

/* The extra CSV columns of a row (empty where it has none). */
static void extra_fields(FILE *f, json_t *row, const char *const *cols) {
  for (int c = 0; cols && cols[c]; c++) {
    json_t *v = json_object_get(row, cols[c]);
    if (json_is_number(v)) fprintf(f, ",%.9g", json_number_value(v));
    else fprintf(f, ",");
  }
}

/* What sweep.csv and the table show of a scenario's points. */
typedef struct view {
  const rh_scenario *sc;
  const axis *axes;
  int naxes;
  bool gpus_axis, tokens, at_scale;
} view;

/* The replay at scale's table by cause: two columns a cause the scenario replays, its mean count
 * and hours lost (`header`: their names), empty where a point has none. */
static void cause_fields(FILE *f, const view *v, json_t *row, bool header) {
  const rh_scenario *sc = v->sc;
  json_t *by = json_object_get(row, "failures_by_cause");
  for (int i = 0; v->at_scale && i < sc->failures.ncauses; i++) {
    if (!rh_scenario_cause_kept(sc, i)) continue;
    const char *name = sc->failures.causes[i].name;
    json_t *c = json_object_get(by, name);
    if (header) fprintf(f, ",%s_count,%s_lost_h", name, name);
    else if (c) fprintf(f, ",%.9g,%.9g", num(c, "count"), num(c, "lost_h"));
    else fprintf(f, ",,");
  }
}

/* sweep.csv's header and the table's. */
static void headers(FILE *f, const rh_scenario *sc, const char *file, const view *v, size_t n) {
  const axis *axes = v->axes;
  int naxes = v->naxes;
  fprintf(f, "point");
  for (int i = 0; i < naxes; i++) fprintf(f, ",%s", axes[i].key);
  for (int c = 0; columns[c]; c++)
    if (!(v->gpus_axis && c == 0)) fprintf(f, ",%s", columns[c]);
  for (int c = 0; v->tokens && token_columns[c]; c++) fprintf(f, ",%s", token_columns[c]);
  for (int c = 0; v->at_scale && at_scale_columns[c]; c++) fprintf(f, ",%s", at_scale_columns[c]);
  cause_fields(f, v, NULL, true);
  fprintf(f, ",status\n");
  printf("# rehearsal sweep: %s (%s), %zu points\n", sc->name, file, n);
  printf("#%5s", "point");
  for (int i = 0; i < naxes; i++)
    if (strcmp(axes[i].key, "gpus") != 0) printf(" %18s", axes[i].key); /* (the gpus column) */
  printf(" %6s %5s %11s %11s %11s %12s %11s %6s\n", "gpus", "nodes", "step", "compute", "wait",
         "throughput", "efficiency", "status");
  printf("#%5s", "");
  for (int i = 0; i < naxes; i++)
    if (strcmp(axes[i].key, "gpus") != 0) printf(" %18s", "");
  printf(" %6s %5s %11s %11s %11s %12s %11s\n", "", "", "(ms)", "(ms)", "(ms)", "(samples/s)", "(%)");
}

/* One point: its line of sweep.csv and of the table. */
static void row_out(FILE *f, json_t *row, const view *vw) {
  const axis *axes = vw->axes;
  int naxes = vw->naxes;
  bool gpus_axis = vw->gpus_axis, tokens = vw->tokens, at_scale = vw->at_scale;
  json_t *set = json_object_get(row, "set");
  fprintf(f, "%lld", (long long)json_integer_value(json_object_get(row, "point")));
  printf("%6lld", (long long)json_integer_value(json_object_get(row, "point")));
  for (int a = 0; a < naxes; a++) {
    const char *v = json_string_value(json_object_get(set, axes[a].key));
    bool quote = strchr(v, ',') || strchr(v, '"');
    fprintf(f, quote ? ",\"%s\"" : ",%s", v); /* a list value: one CSV field */
    if (strcmp(axes[a].key, "gpus") != 0) printf(" %18s", v);
  }
  for (int c = 0; columns[c]; c++) {
    if (gpus_axis && c == 0) continue;
    json_t *v = json_object_get(row, columns[c]);
    if (json_is_integer(v)) fprintf(f, ",%lld", (long long)json_integer_value(v));
    else if (json_is_number(v)) fprintf(f, ",%.9g", json_number_value(v));
    else fprintf(f, ",");
  }
  extra_fields(f, row, tokens ? token_columns : NULL);
  extra_fields(f, row, at_scale ? at_scale_columns : NULL);
  cause_fields(f, vw, row, false);
  const char *status = json_string_value(json_object_get(row, "status"));
  fprintf(f, ",%s\n", status);
  if (json_object_get(row, "step_ms") && tokens)
    printf(" %6.0f %5.0f %11.4f %11.4f %11.4f %12.1f %11.2f %6s  %.6g tokens/s, MFU %.1f%%, "
           "%.2f GB a GPU\n", num(row, "gpus"), num(row, "nodes"), num(row, "step_ms"),
           num(row, "compute_ms"), num(row, "comm_wait_ms"), num(row, "samples_per_s"),
           100 * num(row, "scaling_efficiency"), status, num(row, "tokens_per_s"),
           100 * num(row, "mfu"), num(row, "memory_GB"));
  else if (json_object_get(row, "step_ms"))
    printf(" %6.0f %5.0f %11.4f %11.4f %11.4f %12.1f %11.2f %6s\n", num(row, "gpus"), num(row, "nodes"),
           num(row, "step_ms"), num(row, "compute_ms"), num(row, "comm_wait_ms"),
           num(row, "samples_per_s"), 100 * num(row, "scaling_efficiency"), status);
  else
    printf(" %6s %5s %11s %11s %11s %12s %11s %6s  (see %s/stderr.txt)\n", "-", "-", "-", "-", "-",
           "-", "-", status, json_string_value(json_object_get(row, "dir")));
  if (json_object_get(row, "interruptions"))
    printf("%6s failures at scale: %.1f interruptions, effective training time %.2f%%, %.1f h "
           "lost (mean over seeds)\n", "", num(row, "interruptions"),
           100 * num(row, "effective_training"), num(row, "failures_lost_h"));
}

/* The cluster the points share, in words, into buf. */
static void shared_cluster(const rh_scenario *sc, const axis *axes, int naxes, char *cluster,
                           size_t size) {
  /* the cluster the points share: what an axis changes is not said (it is the x axis) */
  const rh_cluster *cl = &sc->cluster;
  bool by_nodes = false, by_gpus = false, by_nic = false;
  for (int a = 0; a < naxes; a++) {
    by_nodes = by_nodes || !strcmp(axes[a].key, "gpus") || !strcmp(axes[a].key, "cluster.nodes");
    by_gpus = by_gpus || !strcmp(axes[a].key, "cluster.gpus_per_node");
    by_nic = by_nic || !strncmp(axes[a].key, "cluster.network", 15);
  }
  int at = by_nodes && by_gpus ? snprintf(cluster, size, "GPUs")
           : by_nodes ? snprintf(cluster, size, "nodes of %d GPUs", cl->gpus_per_node[0])
           : by_gpus  ? snprintf(cluster, size, "%d node%s", cl->nodes, cl->nodes == 1 ? "" : "s")
                      : snprintf(cluster, size, "%d node%s x %d GPUs", cl->nodes,
                                 cl->nodes == 1 ? "" : "s", cl->gpus_per_node[0]);
  /* the rate the points were timed at, as `run` names it: a roofline's peak, or the sustained rate
   * (a roofline's sustained rate is only what a model without shapes would run at) */
  if (sc->compute.roofline)
    at += snprintf(cluster + at, size - (size_t)at, " (roofline of %.4g TFLOP/s %s)",
                   sc->compute.peak / 1e12, sc->compute.peak_from >= 0
                   ? rh_precision_names[sc->compute.peak_from] : "peak");
  else
    at += snprintf(cluster + at, size - (size_t)at, " (%.4g TFLOP/s)", cl->gpu_flops / 1e12);
  at += snprintf(cluster + at, size - (size_t)at, ", %.4g GB/s intra-node", cl->intra_bw / 1e9);
  if (!by_nic)
    snprintf(cluster + at, size - (size_t)at, ", %d x %.4g Gb/s NIC", cl->nics_per_node,
             cl->nic_bw * 8 / 1e9);
}

/* The table, sweep.csv and sweep.json. */
static int report(const rh_scenario *sc, const char *file, const char *out, const axis *axes,
                  int naxes, json_t *rows) {
  char *csv = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&csv, &len);
  if (!f) return 1;
  /* an axis of GPU counts is the gpus column itself: one column of that name */
  view vw = {.sc = sc, .axes = axes, .naxes = naxes, .tokens = sc->model.tokens_per_sample > 0,
             .at_scale = sc->failures.horizon_s > 0};
  for (int i = 0; i < naxes; i++) vw.gpus_axis = vw.gpus_axis || strcmp(axes[i].key, "gpus") == 0;
  headers(f, sc, file, &vw, json_array_size(rows));
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) row_out(f, row, &vw);
  if (fclose(f) != 0) return 1;
  char cluster[256];
  shared_cluster(sc, axes, naxes, cluster, sizeof cluster);
  json_t *jaxes = json_array();
  for (int a = 0; a < naxes; a++) {
    json_t *vals = json_array();
    for (int v = 0; v < axes[a].n; v++) json_array_append_new(vals, json_string(axes[a].values[v]));
    json_array_append_new(jaxes, json_pack("{s:s, s:o}", "key", axes[a].key, "values", vals));
  }
  json_t *root = json_pack("{s:s, s:o, s:s, s:o, s:O}", "scenario", sc->name, "file", rh_json_text(file), "cluster",
                           cluster, "axes", jaxes, "points", rows);
  char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
  const char *names[] = {"sweep.csv", "sweep.json"}, *texts[] = {csv, text};
  int rc = !text || rh_write_outputs(out, 2, names, texts);
  if (!rc) printf("\nwrote %s/sweep.csv and %s/sweep.json\n", out, out);
  free(text);
  free(csv);
  json_decref(root);
  return rc;
}

/* ---- the directory's lock ---------------------------------------------------------------- */

/* Takes DIR/sweep.lock for this sweep, so that a second sweep into the same directory does not
 * run the first's points again or report them as its own.  The lock is an flock, which the
 * system lets go of when its holder dies however it dies, so the lock of a sweep that died is
 * free to take; the file holds the holder's PID for the message of a sweep turned away.  The
 * descriptor, or -1: in use (exit 2) or -2: cannot be taken (exit 1), said on stderr. */
static int lock_out(const char *out) {
  char path[4200];
  snprintf(path, sizeof path, "%s/sweep.lock", out);
  for (;;) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      fprintf(stderr, "rehearsal sweep: cannot create %s: %s\n", path, strerror(errno));
      return -2;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int e = errno;
      char text[32] = "";
      ssize_t n = pread(fd, text, sizeof text - 1, 0);
      close(fd);
      if (e != EWOULDBLOCK) {
        fprintf(stderr, "rehearsal sweep: cannot lock %s: %s\n", path, strerror(e));
        return -2;
      }
      long pid = n > 0 ? strtol(text, NULL, 10) : 0;
      if (pid > 0) fprintf(stderr, "rehearsal sweep: %s is in use by sweep PID %ld\n", out, pid);
      else fprintf(stderr, "rehearsal sweep: %s is in use by another sweep\n", out);
      return -1;
    }
    /* A holder that ended removed the file after it was opened here: lock the one at the path. */
    struct stat held, named;
    if (fstat(fd, &held) != 0 || stat(path, &named) != 0 || held.st_ino != named.st_ino ||
        held.st_dev != named.st_dev) {
      close(fd);
      continue;
    }
    char text[32];
    int len = snprintf(text, sizeof text, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
      fprintf(stderr, "rehearsal sweep: cannot write %s: %s\n", path, strerror(errno));
      close(fd);
      return -2;
    }
    return fd;
  }
}

/* Removes the lock, then lets go of it. */
static void unlock_out(const char *out, int fd) {
  char path[4200];
  snprintf(path, sizeof path, "%s/sweep.lock", out);
  unlink(path);
  close(fd);
}

/* SimGrid's entry point: linked into the tool on the simulator, absent (null) from the tool on
 * real processes (rehearsal-mpi, rehearsal-gpu), which shares this file. */
extern void simgrid_init(int *argc, char **argv) __attribute__((weak));

/* ---- the command ------------------------------------------------------------------------- */

/* The overrides an axis value makes: itself, or for the axis `gpus` the nodes and GPUs per node
 * of that many GPUs (one node up to the scenario's GPUs per node, then whole nodes).  -1 to go
 * on, or 2 with the reason. */
static int expand(const rh_scenario *sc, point *p, const char *set) {
  if (strncmp(set, "gpus=", 5) != 0) {
    p->runs[p->nruns++] = strdup(set);
    return -1;
  }
  char *end;
  long n = strtol(set + 5, &end, 10);
  int per = sc->cluster.gpus_per_node[0];
  if (set[5] == 0 || *end || n < 1 || n > 1 << 24)
    return rh_cli_error("sweep", "--axis %s: a GPU count is a whole number from 1", set);
  if (n > per && n % per != 0)
    return rh_cli_error("sweep", "--axis %s: more GPUs than a node's %d come in whole nodes", set, per);
  char buf[96];
  snprintf(buf, sizeof buf, "cluster.nodes=%ld", n > per ? n / per : 1);
  p->runs[p->nruns++] = strdup(buf);
  snprintf(buf, sizeof buf, "cluster.gpus_per_node=%ld", n > per ? (long)per : n);
  p->runs[p->nruns++] = strdup(buf);
  return -1;
}

/* Checks every point's scenario before any runs: bad input names the point and writes nothing. */
static int check_points(const char *file, const rh_scenario_opts *common, point *pts, int npts) {
  for (int p = 0; p < npts; p++) {
    const char **sets = calloc((size_t)(common->nsets + pts[p].nruns), sizeof *sets);
    if (!sets) return 1;
    for (int i = 0; i < common->nsets; i++) sets[i] = common->sets[i];
    for (int i = 0; i < pts[p].nruns; i++) sets[common->nsets + i] = pts[p].runs[i];
    rh_scenario_opts o = {.sets = sets, .nsets = common->nsets + pts[p].nruns};
    rh_scenario sc;
    char err[1024];
    rh_status st = rh_scenario_load_opts(file, &o, &sc, err, sizeof err);
    free(sets);
    if (st != RH_OK) {
      fprintf(stderr, "rehearsal sweep: point %d: %s\n", p, err);
      return 2;
    }
    rh_scenario_free(&sc);
  }
  return 0;
}

/* The points of the sweep, for a stopping signal's handler to stop those that run, and the
 * signal. */
static point *volatile live_pts;
static volatile int live_npts;
static volatile sig_atomic_t stop_signal;

/* Kills every point that runs: it runs again when the sweep is run again, so nothing of it is
 * kept.  Safe in a signal handler. */
static void stop_points(void) {
  point *pts = live_pts;
  for (int i = 0; pts && i < live_npts; i++)
    if (pts[i].pid > 0 && pts[i].exit < 0) kill(pts[i].pid, SIGKILL);
}

static void on_stop(int sig) {
  stop_signal = sig;
  stop_points();
}

/* The stopping signals a sweep catches, and what they did before it. */
typedef struct stop_catch {
  struct sigaction old_int, old_term, old_hup;
} stop_catch;

/* SIGINT, SIGTERM and SIGHUP stop the running points (the handler kills those of `pts`; NULL:
 * none of its own) and then the sweep; without SA_RESTART, so that a wait returns to see it. */
static void catch_stops(stop_catch *c, point *pts, int npts) {
  live_pts = pts;
  live_npts = npts;
  stop_signal = 0;
  struct sigaction sa = {.sa_handler = on_stop};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &c->old_int);
  sigaction(SIGTERM, &sa, &c->old_term);
  sigaction(SIGHUP, &sa, &c->old_hup);
}

static void release_stops(const stop_catch *c) {
  sigaction(SIGINT, &c->old_int, NULL);
  sigaction(SIGTERM, &c->old_term, NULL);
  sigaction(SIGHUP, &c->old_hup, NULL);
  live_pts = NULL;
}

static const char *stop_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

/* Reaps one finished point, its exit status into its `exit` and its index into *index (-1: not
 * a point's process): the PID, or -1 with errno (EINTR: a signal came first).  The process is
 * reaped with stopping signals held and marked as no longer running before they are let
 * through, so that a handler never kills a reaped point's PID, which another process may have
 * by then. */
static pid_t reap_point(point *pts, int npts, int *index) {
  siginfo_t info = {0};
  if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) return -1;
  sigset_t held, old;
  sigemptyset(&held);
  sigaddset(&held, SIGINT);
  sigaddset(&held, SIGTERM);
  sigaddset(&held, SIGHUP);
  sigprocmask(SIG_BLOCK, &held, &old);
  int status;
  pid_t pid = waitpid(info.si_pid, &status, 0);
  *index = -1;
  for (int i = 0; pid > 0 && i < npts; i++)
    if (pts[i].pid == pid && pts[i].exit < 0) {
      pts[i].exit = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      *index = i;
    }
  sigprocmask(SIG_SETMASK, &old, NULL);
  return pid;
}

/* Each point's identity into ids[] (the caller frees), and the points finished before marked
 * reused (none with force); how many were. */
static int identify_points(const char *file, const char *out, const rh_scenario_opts *common,
                           point *pts, int npts, int naxes, bool force, json_t **ids) {
  uint64_t hash = file_hash(file);
  int done = 0;
  for (int p = 0; p < npts; p++) {
    ids[p] = point_identity(file, hash, common, &pts[p], naxes);
    pts[p].exit = force ? -1 : finished_before(&pts[p], ids[p]);
    pts[p].reused = pts[p].exit >= 0;
    done += pts[p].reused;
  }
  /* the figures of points taken from an earlier run are that run's: said, on stderr so that the
   * table is the same however many of its points ran this time */
  if (done > 0)
    fprintf(stderr, "rehearsal sweep: reused %d of %d points from an earlier run "
                    "(%s/points/NNN/point.json; --force runs them again)\n", done, npts, out);
  return done;
}

/* A point's old files go first, so that none of them is taken for its result. */
static int clear_point(const point *p) {
  return rh_remove_tree(p->dir) != 0 || rh_make_dirs(p->dir) != 0;
}

static int run_points(const char *file, const char *out, const rh_scenario_opts *common,
                      point *pts, int npts, int naxes, int jobs, bool force) {
  int running = 0, next = 0, done = 0;
  json_t **ids = calloc((size_t)npts, sizeof *ids);
  if (!ids) return 1;
  done = identify_points(file, out, common, pts, npts, naxes, force, ids);
  rh_progress *prog = rh_progress_start("sweep", npts, "points");
  rh_progress_update(prog, done, NAN);
  stop_catch stops;
  catch_stops(&stops, pts, npts);
  int rc = 0;
  while (done < npts && rc == 0 && !stop_signal) {
    while (running < jobs && next < npts && !stop_signal) {
      point *p = &pts[next++];
      if (p->reused) continue;
      if (clear_point(p)) {
        rc = 1;
        break;
      }
      p->pid = rh_cli_spawn_run(NULL, file, common, p->runs, p->nruns, p->dir);
      if (p->pid < 0) {
        rc = 1;
        break;
      }
      running++;
    }
    if (running == 0 || stop_signal) break;
    int i;
    pid_t pid = reap_point(pts, npts, &i);
    if (pid < 0) {
      rc = errno == EINTR ? 0 : 1;
      continue;
    }
    if (i < 0) continue;
    running--;
    done++;
    json_t *rec = json_pack("{s:O, s:i}", "identity", ids[i], "exit", pts[i].exit);
    char *text = json_dumps(rec, JSON_INDENT(2));
    if (!text || rh_write_output(pts[i].dir, "point.json", text)) rc = 1;
    free(text);
    json_decref(rec);
    if (pts[i].exit > 1)
      rh_progress_note(prog, "point %d did not run (exit %d): see %s/stderr.txt", i, pts[i].exit,
                       pts[i].dir);
    rh_progress_update(prog, done, NAN);
  }
  /* a point started after the signal's handler ran is stopped here */
  int stopped = stop_signal ? running : 0;
  if (stop_signal) stop_points();
  while (running > 0) {
    int i;
    pid_t pid = reap_point(pts, npts, &i);
    if (pid < 0 && errno != EINTR) break;
    if (pid > 0 && i >= 0) running--;
  }
  release_stops(&stops);
  rh_progress_end(prog);
  if (stop_signal) {
    int sig = stop_signal;
    fprintf(stderr, "rehearsal sweep: stopped by %s: %d running point%s stopped, %d of %d points "
                    "finished; run the sweep again to go on\n",
            stop_name(sig), stopped,
            stopped == 1 ? "" : "s", done, npts);
    rc = 128 + sig;
  }
  for (int p = 0; p < npts; p++) json_decref(ids[p]);
  free(ids);
  return rc;
}

/* ---- the points as a Slurm job array ------------------------------------------------------- */

/* What squeue last said of the array's tasks: each point's state code ("" when Slurm no longer
 * holds it). */
typedef struct slurm_look {
  const char *const *jobids;
  const int *offset; /* each job's first point */
  int njobs;
  char (*state)[8];
  int npts;
} slurm_look;

static void slurm_task(void *arg, const char *jobid, int task, const char *state) {
  slurm_look *l = arg;
  for (int j = 0; j < l->njobs; j++) {
    int p = l->offset[j] + task;
    if (strcmp(l->jobids[j], jobid) == 0 && p >= 0 && p < l->npts)
      snprintf(l->state[p], sizeof l->state[p], "%s", state);
  }
}

/* Counts the tasks of a job Slurm still holds. */
static void count_task(void *arg, const char *jobid, int task, const char *state) {
  (void)jobid, (void)task, (void)state;
  (*(int *)arg)++;
}

/* The Slurm jobs an earlier sweep into DIR submitted (DIR/slurm/jobs) that still hold points:
 * 0 when none does, else 2 with a message (running the points again would have two tasks write
 * one directory). */
static int earlier_jobs_done(const char *out) {
  char path[4300];
  snprintf(path, sizeof path, "%s/slurm/jobs", out);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char ids[64][32];
  int n = 0;
  while (n < 64 && fscanf(f, "%31s", ids[n]) == 1) n++;
  fclose(f);
  const char *list[64];
  for (int i = 0; i < n; i++) list[i] = ids[i];
  int live = 0;
  if (n == 0 || rh_slurm_tasks(list, n, count_task, &live) != 0 || live == 0) return 0;
  fprintf(stderr, "rehearsal sweep: %s: %d point%s of an earlier sweep still %s under Slurm (job%s",
          out, live, live == 1 ? "" : "s", live == 1 ? "runs or waits" : "run or wait",
          n == 1 ? "" : "s");
  for (int i = 0; i < n; i++) fprintf(stderr, " %s", ids[i]);
  fprintf(stderr, "): wait for them, or scancel them, then run the sweep again\n");
  return 2;
}

/* DIR/slurm/points.sh: the array's task i runs point OFFSET + i (OFFSET its first argument), the
 * same `rehearsal run` as the local launcher's, and then writes the point's point.json from the
 * identity the sweep left beside it. */
static int write_slurm_script(const char *file, const char *out, const rh_scenario_opts *common,
                              const point *pts, int npts, char *script, size_t len) {
  char self[4096] = {0};
  if (!realpath("/proc/self/exe", self)) return 1;
  char *text = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&text, &size);
  if (!f) return 1;
  fputs("#!/bin/sh\n"
        "# The points of a sweep as the tasks of a Slurm job array: task i runs point $1 + i.\n"
        "# Written by `rehearsal sweep --launcher slurm`; a point writes its point.json at its end.\n"
        "export RH_PROGRESS=0\n"
        "unset HOROVOD_TIMELINE\n"
        "p=$((${1:-0} + ${SLURM_ARRAY_TASK_ID:?not a task of a job array}))\n"
        "case $p in\n", f);
  for (int i = 0; i < npts; i++) {
    if (pts[i].reused) continue;
    int argc;
    char **argv = rh_cli_run_argv(file, common, pts[i].runs, pts[i].nruns, pts[i].dir, &argc);
    if (!argv) {
      fclose(f);
      free(text);
      return 1;
    }
    fprintf(f, "%d) d=", i);
    rh_cli_shell_word(f, pts[i].dir);
    fputs("; set --", f);
    for (int a = 0; a < argc; a++) {
      fputc(' ', f);
      rh_cli_shell_word(f, a == 0 ? self : argv[a]);
    }
    fputs(" ;;\n", f);
    free(argv);
  }
  fputs("*) echo \"rehearsal sweep: no point $p\" >&2; exit 2 ;;\n"
        "esac\n"
        "\"$@\" >\"$d/stdout.txt\" 2>\"$d/stderr.txt\"\n"
        "rc=$?\n"
        "printf '{\"identity\": %s, \"exit\": %d}\\n' \"$(cat \"$d/.identity.json\")\" \"$rc\" "
        ">\"$d/.point.json.$$\" &&\n"
        "  mv -f \"$d/.point.json.$$\" \"$d/point.json\"\n"
        "exit $rc\n", f);
  if (fclose(f) != 0) {
    free(text);
    return 1;
  }
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/slurm", out);
  int rc = rh_write_output(dir, "points.sh", text);
  free(text);
  snprintf(script, len, "%s/points.sh", dir);
  return rc;
}

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_points_slurm(const char *file, const char *out, const rh_scenario_opts *common,
                            point *pts, int npts, int naxes, int jobs, bool force,
                            const char *const *sbatch, int nsbatch) {
  json_t **ids = calloc((size_t)npts, sizeof *ids);
  char (*state)[8] = calloc((size_t)npts, sizeof *state);
  int *gone = calloc((size_t)npts, sizeof *gone); /* looks that found neither task nor result */
  int maxidx = rh_slurm_max_array_index();
  int maxjobs = npts / (maxidx + 1) + 1;
  char (*jobid)[32] = calloc((size_t)maxjobs, sizeof *jobid);
  const char **jobids = calloc((size_t)maxjobs, sizeof *jobids);
  int *offset = calloc((size_t)maxjobs, sizeof *offset);
  int done = 0, rc = ids && state && gone && jobid && jobids && offset ? 0 : 1;
  if (rc == 0) done = identify_points(file, out, common, pts, npts, naxes, force, ids);
  /* every point to run: its old files go, its identity goes beside it (the task's point.json
   * takes it), then the script */
  for (int p = 0; p < npts && rc == 0; p++) {
    if (pts[p].reused) continue;
    char *id = json_dumps(ids[p], JSON_COMPACT);
    if (!id || clear_point(&pts[p]) || rh_write_output(pts[p].dir, ".identity.json", id)) rc = 1;
    free(id);
  }
  char script[4300];
  if (rc == 0 && done < npts) rc = write_slurm_script(file, out, common, pts, npts, script, sizeof script);
  /* one array for every maxidx + 1 points (the cluster's MaxArraySize) */
  int njobs = 0;
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd)) rc = 1;
  for (int first = 0; rc == 0 && first < npts; first += maxidx + 1) {
    int last = first + maxidx < npts - 1 ? first + maxidx : npts - 1;
    size_t cap = 16 + 12 * (size_t)(last - first + 1);
    char *list = malloc(cap);
    if (!list) {
      rc = 1;
      break;
    }
    int k = snprintf(list, cap, "--array=");
    bool any = false;
    for (int p = first; p <= last; p++)
      if (!pts[p].reused) {
        k += snprintf(list + k, cap - (size_t)k, "%s%d", any ? "," : "", p - first);
        any = true;
      }
    if (jobs > 0) snprintf(list + k, cap - (size_t)k, "%%%d", jobs);
    if (!any) {
      free(list);
      continue;
    }
    char log[4300], chdir_arg[4200], off[16], after[64];
    snprintf(log, sizeof log, "--output=%s/slurm/job-%%A_%%a.log", out);
    /* a throttle holds across arrays: each starts when the one before has ended */
    snprintf(after, sizeof after, "--dependency=afterany:%s", njobs > 0 ? jobids[njobs - 1] : "");
    snprintf(chdir_arg, sizeof chdir_arg, "--chdir=%s", cwd);
    snprintf(off, sizeof off, "%d", first);
    const char **args = calloc((size_t)nsbatch + 8, sizeof *args);
    int n = 0;
    if (args) {
      args[n++] = "--job-name=rehearsal-sweep";
      args[n++] = list;
      args[n++] = log;
      args[n++] = chdir_arg;
      args[n++] = "--ntasks=1";
      if (jobs > 0 && njobs > 0) args[n++] = after;
      for (int i = 0; i < nsbatch; i++) args[n++] = sbatch[i];
    }
    const char *script_args[] = {off};
    if (!args || rh_slurm_submit(args, n, script, script_args, 1, jobid[njobs], sizeof jobid[njobs])) {
      rc = 1;
    } else {
      jobids[njobs] = jobid[njobs];
      offset[njobs++] = first;
    }
    free(args);
    free(list);
  }
  if (njobs > 0) { /* for a later sweep into DIR, which must not run what these still run */
    char *ids_text = calloc((size_t)njobs + 1, 32);
    for (int j = 0; ids_text && j < njobs; j++) strcat(strcat(ids_text, jobids[j]), "\n");
    char slurm_dir[4200];
    snprintf(slurm_dir, sizeof slurm_dir, "%s/slurm", out);
    if (!ids_text || rh_write_output(slurm_dir, "jobs", ids_text)) rc = 1;
    free(ids_text);
    fprintf(stderr, "rehearsal sweep: %d point%s submitted to Slurm as job%s", npts - done,
            npts - done == 1 ? "" : "s", njobs == 1 ? "" : "s");
    for (int j = 0; j < njobs; j++) fprintf(stderr, " %s", jobids[j]);
    fprintf(stderr, " (scancel stops them; running the sweep again goes on)\n");
  }
  rh_progress *prog = rc == 0 ? rh_progress_start("sweep", npts, "points") : NULL;
  rh_progress_update(prog, done, NAN);
  stop_catch stops;
  catch_stops(&stops, NULL, 0); /* the tasks are Slurm's: a signal cancels them below */
  slurm_look look = {.jobids = jobids, .offset = offset, .njobs = njobs, .state = state, .npts = npts};
  int said[4] = {-1, -1, -1, -1}, failed = 0;
  double next_look = 0;
  while (rc == 0 && done < npts && !stop_signal) {
    /* results first: a task that ended has written its point.json */
    for (int p = 0; p < npts; p++) {
      if (pts[p].reused || pts[p].exit >= 0) continue;
      char path[4300];
      snprintf(path, sizeof path, "%s/point.json", pts[p].dir);
      json_t *rec = json_load_file(path, 0, NULL);
      json_t *e = json_object_get(rec, "exit");
      if (json_is_integer(e)) {
        pts[p].exit = (int)json_integer_value(e);
        done++;
        failed += pts[p].exit != 0;
        if (pts[p].exit > 1)
          rh_progress_note(prog, "point %d did not run (exit %d): see %s/stderr.txt", p,
                           pts[p].exit, pts[p].dir);
        rh_progress_update(prog, done, NAN);
      }
      json_decref(rec);
    }
    if (done == npts) break;
    if (wall() >= next_look) {
      for (int p = 0; p < npts; p++) state[p][0] = 0;
      if (rh_slurm_tasks(jobids, njobs, slurm_task, &look) != 0) {
        fprintf(stderr, "rehearsal sweep: squeue cannot be asked; the points go on under Slurm "
                        "(run the sweep again to collect them)\n");
        rc = 1;
        break;
      }
      int pending = 0, running = 0;
      for (int p = 0; p < npts; p++) {
        if (pts[p].reused || pts[p].exit >= 0) continue;
        if (state[p][0]) gone[p] = 0;
        if (strcmp(state[p], "PD") == 0) pending++;
        else if (state[p][0]) running++;
        /* neither held by Slurm nor finished for half a minute of looks a second apart (a
         * result written on a shared file system may take that long to be seen here):
         * cancelled, past its time limit, its node lost */
        else if (++gone[p] >= 30) {
          pts[p].exit = 1;
          done++;
          failed++;
          int j = 0; /* the array that holds it */
          while (j + 1 < njobs && offset[j + 1] <= p) j++;
          rh_progress_note(prog, "point %d ended under Slurm without a result (cancelled, past "
                           "its time limit, or its node failed): see %s/slurm/job-%s_%d.log", p,
                           out, jobids[j], p - offset[j]);
          rh_progress_update(prog, done, NAN);
        }
      }
      int now[4] = {pending, running, done - failed, failed};
      if (memcmp(now, said, sizeof now) != 0) {
        /* said whether or not a progress line is drawn: it is the sweep's state */
        if (prog)
          rh_progress_note(prog, "rehearsal sweep: Slurm: %d pending, %d running, %d done, %d failed", pending,
                           running, done - failed, failed);
        else
          fprintf(stderr, "rehearsal sweep: Slurm: %d pending, %d running, %d done, %d failed\n",
                  pending, running, done - failed, failed);
        memcpy(said, now, sizeof now);
      }
      next_look = wall() + 1;
    }
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
  }
  int last[4] = {0, 0, done - failed, failed};
  if (rc == 0 && !stop_signal && njobs > 0 && memcmp(last, said, sizeof last) != 0)
    fprintf(stderr, "rehearsal sweep: Slurm: 0 pending, 0 running, %d done, %d failed\n",
            done - failed, failed);
  if (stop_signal && njobs > 0) {
    rh_slurm_cancel(jobids, njobs);
    /* stopped means stopped: until Slurm has let the tasks go (half a minute at most) */
    int live = 1;
    for (double t0 = wall(); live > 0 && wall() - t0 < 30;) {
      live = 0;
      if (rh_slurm_tasks(jobids, njobs, count_task, &live) != 0) break;
      struct timespec ts = {0, 200000000};
      if (live > 0) nanosleep(&ts, NULL);
    }
  }
  release_stops(&stops);
  rh_progress_end(prog);
  if (stop_signal) {
    int sig = stop_signal;
    fprintf(stderr, "rehearsal sweep: stopped by %s: the Slurm job%s cancelled, %d of %d points "
                    "finished; run the sweep again to go on\n",
            stop_name(sig), njobs == 1 ? " was" : "s were", done, npts);
    rc = 128 + sig;
  }
  for (int p = 0; ids && p < npts; p++) json_decref(ids[p]);
  free(ids);
  free(state);
  free(gone);
  free(jobid);
  free(jobids);
  free(offset);
  return rc;
}

int rh_cmd_sweep(int argc, char **argv) {
  static const struct option options[] = {
      {"out", required_argument, NULL, 'o'},  {"axis", required_argument, NULL, 'a'},
      {"jobs", required_argument, NULL, 'j'}, {"force", no_argument, NULL, 'f'},
      {"launcher", required_argument, NULL, 'L'}, {"sbatch-arg", required_argument, NULL, 'S'},
      {NULL, 0, NULL, 0}};
  sweep_flags cmd = {0};
  rh_scenario_opts opts = {0};
  int first = 0;
  int rc = rh_cli_parse("sweep", usage_text, argc, argv, "o:a:j:", options, sweep_option, &cmd,
                        &opts, &first);
  /* each point is this program's `run`, which on real processes needs mpirun and the cluster's
   * processes: the sweep is the simulator's alone */
  if (rc < 0 && !simgrid_init)
    rc = rh_cli_error("sweep", "a sweep runs its points on the simulator: use `rehearsal sweep` "
                      "(this program runs on real processes)");
  if (rc < 0 && argc - first != 1) rc = rh_cli_error("sweep", "needs one scenario FILE");
  if (rc < 0 && !cmd.out) rc = rh_cli_error("sweep", "needs --out DIR (the points and results go there)");
  if (rc < 0 && rh_output_dir_ok(cmd.out) != 0) rc = 2;
  if (rc < 0) rc = check_flag_axes(&cmd);
  if (rc < 0 && cmd.nsbatch > 0 && !cmd.slurm)
    rc = rh_cli_error("sweep", "--sbatch-arg goes with --launcher slurm");
  rh_scenario sc = {0};
  char err[1024];
  if (rc < 0 && rh_scenario_load_opts(argv[first], &opts, &sc, err, sizeof err) != RH_OK) {
    fprintf(stderr, "rehearsal: %s\n", err);
    rc = 2;
  }
  /* the scenario's axes, then the command line's (which replace those that set their keys) */
  sweep_flags all = {0};
  for (int i = 0; rc < 0 && i < sc.sweep.naxes; i++) {
    const rh_sweep_axis *a = &sc.sweep.axes[i];
    axis copy = {.key = strdup(a->key), .values = calloc((size_t)a->nvalues, sizeof(char *)), .n = a->nvalues};
    for (int v = 0; v < a->nvalues; v++) copy.values[v] = strdup(a->values[v]);
    if (put_axis(&all.axes, &all.naxes, copy)) rc = 1;
  }
  for (int i = 0; rc < 0 && i < cmd.naxes; i++) {
    if (put_axis(&all.axes, &all.naxes, cmd.axes[i])) rc = 1;
    cmd.axes[i] = (axis){0};
  }
  if (rc < 0 && all.naxes == 0)
    rc = rh_cli_error("sweep", "no axis: give --axis KEY=V1,V2,... or a sweep: section in %s", argv[first]);
  /* the count in 64 bits, each product checked: in int, 2^32 + 4 points wrapped to 4 */
  uint64_t count = 1;
  bool past = false;
  for (int i = 0; rc < 0 && i < all.naxes && !past; i++)
    past = __builtin_mul_overflow(count, (uint64_t)all.axes[i].n, &count);
  if (rc < 0 && past)
    rc = rh_cli_error("sweep", "more than %llu points: too many for one sweep",
                      (unsigned long long)UINT64_MAX);
  else if (rc < 0 && count > 100000)
    rc = rh_cli_error("sweep", "%llu points: too many for one sweep", (unsigned long long)count);
  int npts = rc < 0 ? (int)count : 0;
  point *pts = rc < 0 ? calloc((size_t)npts, sizeof *pts) : NULL;
  if (rc < 0 && !pts) rc = 1;
  for (int p = 0; rc < 0 && p < npts; p++) {
    pts[p] = (point){.index = p, .exit = -1, .sets = calloc((size_t)all.naxes, sizeof(char *)),
                     .runs = calloc((size_t)(2 * all.naxes), sizeof(char *))};
    if (!pts[p].sets || !pts[p].runs) {
      rc = 1;
      break;
    }
    snprintf(pts[p].dir, sizeof pts[p].dir, "%s/points/%03d", cmd.out, p);
    /* the first axis outermost: the last one changes fastest */
    for (int a = all.naxes - 1, k = p; a >= 0; a--) {
      const axis *ax = &all.axes[a];
      const char *v = ax->values[k % ax->n];
      k /= ax->n;
      size_t len = strlen(ax->key) + strlen(v) + 2;
      pts[p].sets[a] = malloc(len);
      snprintf(pts[p].sets[a], len, "%s=%s", ax->key, v);
    }
    for (int a = 0; rc < 0 && a < all.naxes; a++)
      rc = expand(&sc, &pts[p], pts[p].sets[a]);
  }
  if (rc < 0) rc = check_points(argv[first], &opts, pts, npts) ? 2 : -1;
  /* the cluster first: a sweep that cannot submit leaves DIR as it was */
  if (rc < 0 && cmd.slurm && rh_slurm_ready("sweep")) rc = 1;
  if (rc < 0 && cmd.out && earlier_jobs_done(cmd.out)) rc = 2;
  /* one sweep at a time in a directory: the lock is taken once the points are known good */
  int lock = -2;
  if (rc < 0) {
    lock = rh_make_dirs(cmd.out) ? -2 : lock_out(cmd.out);
    if (lock < 0) rc = lock == -1 ? 2 : 1;
  }
  if (rc < 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int jobs = cmd.jobs > 0 ? cmd.jobs : cores > 0 ? (int)cores : 1;
    rc = cmd.slurm ? run_points_slurm(argv[first], cmd.out, &opts, pts, npts, all.naxes,
                                      cmd.jobs, cmd.force, cmd.sbatch, cmd.nsbatch)
                   : run_points(argv[first], cmd.out, &opts, pts, npts, all.naxes, jobs, cmd.force);
    json_t *rows = json_array();
    bool failed = false;
    for (int p = 0; p < npts; p++) {
      json_array_append_new(rows, point_row(&pts[p], all.axes, all.naxes));
      failed = failed || pts[p].exit != 0;
    }
    if (!rc) rc = report(&sc, argv[first], cmd.out, all.axes, all.naxes, rows);
    json_decref(rows);
    if (!rc && failed) rc = 1;
  }
  if (lock >= 0) unlock_out(cmd.out, lock);
  /* a bad value stops the points' making: those after it have no values to free */
  for (int p = 0; pts && p < npts; p++) {
    for (int a = 0; pts[p].sets && a < all.naxes; a++) free(pts[p].sets[a]);
    for (int a = 0; a < pts[p].nruns; a++) free(pts[p].runs[a]);
    free(pts[p].sets);
    free(pts[p].runs);
  }
  free(pts);
  free_axes(all.axes, all.naxes);
  free_axes(cmd.axes, cmd.naxes);
  free(cmd.sbatch);
  rh_scenario_free(&sc);
  rh_cli_opts_free(&opts);
  return rc;
}
