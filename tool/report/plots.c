/*
 * plots.c: the figures of `rehearsal plot` (commands/plot.c), drawn by gnuplot from what a command
 * wrote:
 *
 *   collective.json (rehearsal collective --out): busbw and time against message size, both
 *     placements, the algorithm of each size marked, and busbw's line rate;
 *   sweep.json or sweep.csv (rehearsal sweep): throughput against GPUs with the ideal line,
 *     scaling efficiency, and each point's step split into compute, exposed communication and
 *     lost time;
 *   summary.json and steps.csv (rehearsal run --out): each epoch's step split, the lr (and the
 *     loss, for real models) per step, and a measured run against its prediction when the run
 *     compared them.
 *
 * Each figure NAME is written into PLOTDIR (default DIR/plots) as NAME.png and NAME.svg, beside
 * NAME.dat, the plain table it was drawn from, and NAME.gp, the script that draws both from it,
 * so that a reader can change the figure and run gnuplot again in PLOTDIR.
 */
#include "plots.h"
#include "output.h"

#include <jansson.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- figures ------------------------------------------------------------------------------ */

typedef rh_plotter plotter;

/* One figure while it is written: its data table and its script's settings and plot command. */
typedef struct figure {
  char name[64];
  char *data, *body;
  size_t dlen, blen;
  FILE *d, *g;
} figure;

/* A colour per series, one after the other (a palette readable in print and on screens). */
static const char *const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                      "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};
#define NCOLOURS (sizeof colours / sizeof colours[0])

static bool fig_open(figure *f, const char *name) {
  memset(f, 0, sizeof *f);
  snprintf(f->name, sizeof f->name, "%s", name);
  f->d = open_memstream(&f->data, &f->dlen);
  f->g = open_memstream(&f->body, &f->blen);
  return f->d && f->g;
}

static void fig_free(figure *f) {
  if (f->d) fclose(f->d);
  if (f->g) fclose(f->g);
  free(f->data);
  free(f->body);
  f->d = f->g = NULL;
}

/* A gnuplot string: double quotes, so that \n breaks a title's line. */
static void gq(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) {
    if (*s == '\n') {
      fputs("\\n", f);
      continue;
    }
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* A string column of a data table: in double quotes, which such a column may not hold. */
static void dq(FILE *f, const char *s) {
  fputc('"', f);
  for (; s && *s; s++) fputc(*s == '"' ? '\'' : *s == '\n' ? ' ' : *s, f);
  fputc('"', f);
}

/* The title every figure carries: what it shows, the scenario, and the cluster on a second line. */
static void fig_title(figure *f, const char *what, const char *scenario, const char *cluster) {
  char t[1024];
  snprintf(t, sizeof t, "%s: %s%s%s", scenario && *scenario ? scenario : "(unnamed)", what,
           cluster && *cluster ? "\n" : "", cluster ? cluster : "");
  fprintf(f->g, "set title ");
  gq(f->g, t);
  fprintf(f->g, " noenhanced\n");
}

/* Runs gnuplot on NAME.gp in the plot directory; its own messages go to stderr. */
static int run_gnuplot(const plotter *pl, const char *script) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO); /* our stdout lists the files written, no more */
    if (chdir(pl->out) != 0) _exit(126);
    execl(pl->gnuplot, "gnuplot", script, (char *)NULL);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool non_empty(const char *dir, const char *name, const char *ext) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* Writes NAME.dat and NAME.gp, draws NAME.png and NAME.svg, and lists the four on stdout. */
static void fig_draw(plotter *pl, figure *f, const char *source) {
  if (fclose(f->d) != 0 || fclose(f->g) != 0) {
    f->d = f->g = NULL;
    fprintf(stderr, "rehearsal plot: out of memory drawing %s\n", f->name);
    pl->failed++;
    return;
  }
  f->d = f->g = NULL;
  char *script = NULL, file[96];
  size_t slen = 0;
  FILE *s = open_memstream(&script, &slen);
  if (!s) {
    pl->failed++;
    return;
  }
  fprintf(s,
          "# %s.gp: drawn by `rehearsal plot` from %s (its table: %s.dat).\n"
          "# To redraw after a change, in this directory: gnuplot %s.gp (writes %s.png, %s.svg)\n"
          "set encoding utf8\n"
          "set datafile missing 'NaN'\n"
          "set terminal pngcairo size 1000,600 noenhanced font 'Sans,11'\n"
          "set output '%s.png'\n",
          f->name, source, f->name, f->name, f->name, f->name, f->name);
  fputs(f->body, s);
  fprintf(s,
          "set terminal svg size 1000,600 noenhanced font 'Sans,11' background rgb 'white'\n"
          "set output '%s.svg'\n"
          "replot\n"
          "unset output\n",
          f->name);
  if (fclose(s) != 0) {
    free(script);
    pl->failed++;
    return;
  }
  char dat[96];
  snprintf(dat, sizeof dat, "%s.dat", f->name);
  snprintf(file, sizeof file, "%s.gp", f->name);
  const char *names[] = {dat, file}, *texts[] = {f->data, script};
  int rc = rh_write_outputs(pl->out, 2, names, texts);
  free(script);
  if (rc) {
    pl->failed++;
    return;
  }
  int status = run_gnuplot(pl, file);
  if (status != 0 || !non_empty(pl->out, f->name, "png") || !non_empty(pl->out, f->name, "svg")) {
    if (status < 0) fprintf(stderr, "rehearsal plot: cannot run %s: %s\n", pl->gnuplot, strerror(errno));
    else fprintf(stderr, "rehearsal plot: gnuplot failed on %s/%s (exit %d)\n", pl->out, file, status);
    pl->failed++;
    return;
  }
  printf("%s/%s.png\n%s/%s.svg\n%s/%s.gp\n%s/%s.dat\n", pl->out, f->name, pl->out, f->name,
         pl->out, f->name, pl->out, f->name);
  pl->drawn++;
}

/* ---- reading ------------------------------------------------------------------------------ */

static const char *jstr(json_t *o, const char *key, const char *fallback) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : fallback;
}

static double jnum(json_t *o, const char *key, double fallback) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : fallback;
}

static json_t *load_json(const char *path) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) fprintf(stderr, "rehearsal plot: %s:%d: %s\n", path, err.line, err.text);
  else if (!json_is_object(root)) {
    fprintf(stderr, "rehearsal plot: %s: not a JSON object\n", path);
    json_decref(root);
    root = NULL;
  }
  return root;
}

/* "2 nodes x 4 GPUs, 20 GB/s intra-node, 25 Gb/s NIC" from a summary's cluster object (a string
 * is taken as it is). */
static void cluster_text(json_t *c, char *buf, size_t len) {
  buf[0] = 0;
  if (json_is_string(c)) {
    snprintf(buf, len, "%s", json_string_value(c));
    return;
  }
  if (!json_is_object(c)) return;
  int nodes = (int)jnum(c, "nodes", 0);
  json_t *gpn = json_object_get(c, "gpus_per_node");
  size_t n = 0;
#define ADD(...)                                                                                   \
  do {                                                                                             \
    if (n < len) n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__);                             \
  } while (0)
  bool even = true;
  for (size_t i = 1; i < json_array_size(gpn); i++)
    even = even && json_integer_value(json_array_get(gpn, i)) ==
                       json_integer_value(json_array_get(gpn, 0));
  if (json_array_size(gpn) == 0) {
    ADD("%d ranks", (int)jnum(c, "ranks", 0));
  } else if (even) {
    int g = (int)json_integer_value(json_array_get(gpn, 0));
    ADD("%d node%s x %d GPU%s", nodes, nodes == 1 ? "" : "s", g, g == 1 ? "" : "s");
  } else {
    ADD("%d nodes (", nodes);
    for (size_t i = 0; i < json_array_size(gpn); i++)
      ADD("%s%d", i ? "+" : "", (int)json_integer_value(json_array_get(gpn, i)));
    ADD(" GPUs)");
  }
  double intra = jnum(c, "intra_GBps", NAN), nic = jnum(c, "nic_Gbps", NAN);
  int nics = (int)jnum(c, "nics_per_node", 1);
  if (!isnan(intra)) ADD(", %.4g GB/s intra-node", intra);
  if (nodes > 1 && !isnan(nic)) {
    if (nics > 1) ADD(", %d x %.4g Gb/s NICs", nics, nic);
    else ADD(", %.4g Gb/s NIC", nic);
  }
  const char *model = jstr(c, "network_model", NULL);
  if (model) ADD(", network model %s", model);
#undef ADD
}

/* ---- axes --------------------------------------------------------------------------------- */

/* "8 B", "64 MiB": binary units, as message sizes are given. */
static void bytes_label(double b, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && b >= 1024) b /= 1024, u++;
  snprintf(buf, len, "%g %s", b, units[u]);
}

/* Tics on a log2 axis of bytes from lo to hi: at most about 10 labels, at powers of two whose
 * exponent is a multiple of the step, so that 1 KiB and 1 MiB are among them when they can be;
 * a small tic at every other power of two. */
static void byte_tics(FILE *g, double lo, double hi) {
  int e0 = (int)floor(log2(lo)), e1 = (int)ceil(log2(hi));
  static const int steps[] = {1, 2, 5, 10, 20};
  int step = 20;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
    if ((e1 - e0) / steps[i] + 1 <= 10) {
      step = steps[i];
      break;
    }
  fprintf(g, "set logscale x 2\nset xrange [%.17g:%.17g]\nset xtics (", ldexp(1, e0) / 1.25,
          ldexp(1, e1) * 1.25);
  int first = 1;
  for (int e = e0; e <= e1; e++) {
    char label[32];
    bytes_label(ldexp(1, e), label, sizeof label);
    if (e % step == 0 || (e0 == e1)) fprintf(g, "%s\"%s\" %.17g", first ? "" : ", ", label, ldexp(1, e));
    else fprintf(g, "%s\"\" %.17g 1", first ? "" : ", ", ldexp(1, e));
    first = 0;
  }
  fprintf(g, ")\n");
}

/* The unit a sweep key's name carries (nic_Gbps: Gb/s), or NULL. */
static const char *key_unit(const char *key) {
  static const struct { const char *suffix, *unit; } units[] = {
      {"_Gbps", "Gb/s"}, {"_GBps", "GB/s"}, {"_MBps", "MB/s"}, {"_ms", "ms"},  {"_us", "µs"},
      {"_ns", "ns"},     {"_s", "s"},       {"_h", "h"},       {"_KiB", "KiB"}, {"_MiB", "MiB"},
      {"_GiB", "GiB"},   {"_MB", "MB"},     {"_GB", "GB"},     {"_tflops", "TFLOP/s"},
      {"_percent", "%"}};
  size_t n = strlen(key);
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    size_t m = strlen(units[i].suffix);
    if (n > m && strcmp(key + n - m, units[i].suffix) == 0) return units[i].unit;
  }
  return NULL;
}

/* "cluster.network.nic_Gbps (Gb/s)" */
static void key_label(const char *key, char *buf, size_t len) {
  if (strcmp(key, "gpus") == 0) { /* the sweep's axis of GPU counts */
    snprintf(buf, len, "GPUs");
    return;
  }
  const char *unit = key_unit(key);
  if (unit) snprintf(buf, len, "%s (%s)", key, unit);
  else snprintf(buf, len, "%s", key);
}

/* The last part of a dotted key, for legends: "nic_Gbps". */
static const char *key_short(const char *key) {
  const char *dot = strrchr(key, '.');
  return dot ? dot + 1 : key;
}

static bool numeric(const char *s, double *v) {
  char *end;
  double x = strtod(s, &end);
  if (end == s || *end) return false;
  if (v) *v = x;
  return isfinite(x);
}

/* ---- collective.json ---------------------------------------------------------------------- */

typedef struct coll_row {
  double bytes, time, busbw, ip_time, ip_busbw;
  const char *algo;
} coll_row;

/* The table both collective figures are drawn from. */
static void coll_data(FILE *d, const coll_row *r, size_t n, bool in_place) {
  fprintf(d, "# bytes time_us busbw_GBps in_place_time_us in_place_busbw_GBps algorithm\n");
  for (size_t i = 0; i < n; i++) {
    fprintf(d, "%.17g %.9g %.9g ", r[i].bytes, r[i].time, r[i].busbw);
    if (in_place) fprintf(d, "%.9g %.9g ", r[i].ip_time, r[i].ip_busbw);
    else fprintf(d, "NaN NaN ");
    dq(d, r[i].algo);
    fputc('\n', d);
  }
}

/* The placements as lines, then one series of marks per algorithm (on the out-of-place line),
 * so the legend names what ran at each size. */
static void coll_series(FILE *g, const char *dat, int ycol, int ipcol, bool in_place,
                        const char *const *algos, int nalgos) {
  static const int marks[] = {7, 5, 9, 11, 13, 15, 4, 6};
  fprintf(g, "plot '%s' using 1:%d with lines lw 2 lc rgb '%s' title 'out-of-place'", dat, ycol,
          colours[0]);
  if (in_place)
    fprintf(g, ", \\\n     '' using 1:%d with lines lw 2 dt 2 lc rgb '%s' title 'in-place'", ipcol,
            colours[1]);
  for (int a = 0; a < nalgos; a++) {
    fprintf(g, ", \\\n     '' using 1:(strcol(6) eq ");
    gq(g, algos[a]);
    fprintf(g, " ? $%d : NaN) with points pt %d ps 1.3 lc rgb '%s' title ", ycol,
            marks[a % (sizeof marks / sizeof marks[0])], colours[(a + 2) % NCOLOURS]);
    char t[96];
    snprintf(t, sizeof t, "algorithm: %s", algos[a]);
    gq(g, t);
  }
}

int rh_plot_collective(plotter *pl, const char *path) {
  json_t *root = load_json(path);
  if (!root) return 2;
  json_t *rows = json_object_get(root, "rows");
  size_t n = json_array_size(rows);
  if (n == 0) {
    fprintf(stderr, "rehearsal plot: %s: no rows to draw\n", path);
    json_decref(root);
    return 2;
  }
  coll_row *r = calloc(n, sizeof *r);
  const char **algos = calloc(n, sizeof *algos);
  if (!r || !algos) {
    free(r);
    free(algos);
    json_decref(root);
    return 1;
  }
  int nalgos = 0;
  bool in_place = true;
  double lo = INFINITY, hi = 0;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *row = json_array_get(rows, i);
    coll_row x = {jnum(row, "bytes", NAN), jnum(row, "time_us", NAN), jnum(row, "busbw_GBps", NAN),
                  jnum(row, "in_place_time_us", NAN), jnum(row, "in_place_busbw_GBps", NAN),
                  jstr(row, "algorithm", "?")};
    if (!(x.bytes > 0)) continue; /* an allgather smaller than a rank's element: nothing moved */
    in_place = in_place && !isnan(x.ip_time);
    lo = fmin(lo, x.bytes);
    hi = fmax(hi, x.bytes);
    int a = 0;
    while (a < nalgos && strcmp(algos[a], x.algo) != 0) a++;
    if (a == nalgos) algos[nalgos++] = x.algo;
    r[m++] = x;
  }
  int rc = 0;
  if (m == 0) {
    fprintf(stderr, "rehearsal plot: %s: no row moved any bytes\n", path);
    rc = 2;
  }
  const char *scenario = jstr(root, "scenario", ""), *coll = jstr(root, "collective", "allreduce");
  char cluster[512], what[160];
  snprintf(cluster, sizeof cluster, "%s", jstr(root, "cluster", ""));
  const char *model = jstr(root, "network_model", NULL);
  if (model) {
    size_t k = strlen(cluster);
    snprintf(cluster + k, sizeof cluster - k, "%snetwork model %s", k ? ", " : "", model);
  }
  int ranks = (int)jnum(root, "ranks", 0);
  double rate = jnum(root, "line_rate_GBps", NAN);
  const char *link = jstr(root, "line_rate_link", NULL);

  /* busbw counts the bytes a ring moves; an algorithm that moves fewer over the bottleneck
   * (hierarchical, tree, NVLS) shows more than the line carries.  When some size does, the
   * title says so, naming the algorithms (a note inside the plot would cross some curve). */
  char busbw_cluster[1024];
  snprintf(busbw_cluster, sizeof busbw_cluster, "%s", cluster);
  if (rate > 0) {
    char who[160] = "";
    size_t k = 0;
    for (int a = 0; a < nalgos; a++)
      for (size_t i = 0; i < m; i++)
        if (strcmp(r[i].algo, algos[a]) == 0 &&
            fmax(r[i].busbw, in_place ? r[i].ip_busbw : 0) > rate * 1.001) {
          k += (size_t)snprintf(who + k, k < sizeof who ? sizeof who - k : 0, "%s%s",
                                k ? ", " : "", algos[a]);
          break;
        }
    size_t c = strlen(busbw_cluster);
    if (k)
      snprintf(busbw_cluster + c, sizeof busbw_cluster - c,
               "\nbusbw above the line rate: busbw counts a ring's bytes, %s send%s fewer over "
               "that link", who, strchr(who, ',') ? "" : "s");
  }
  figure f;
  for (int which = 0; which < 2 && rc == 0; which++) {
    bool bus = which == 0;
    if (!fig_open(&f, bus ? "collective-busbw" : "collective-time")) {
      fig_free(&f);
      rc = 1;
      break;
    }
    coll_data(f.d, r, m, in_place);
    snprintf(what, sizeof what, "%s %s (%s, %s, %d ranks)", coll, bus ? "bus bandwidth" : "time",
             jstr(root, "type", "float"), jstr(root, "op", "sum"), ranks);
    fig_title(&f, what, scenario, bus ? busbw_cluster : cluster);
    byte_tics(f.g, lo, hi);
    /* the key beside the plot: inside, whatever corner it takes hides a curve on some cluster */
    fprintf(f.g, "set xlabel 'message size'\nset grid\nset key outside right top vertical box\n");
    if (bus) {
      fprintf(f.g, "set ylabel 'busbw (GB/s)'\nset yrange [0:*]\n"
                   "set offsets 0, 0, graph 0.1, 0\n");
      if (rate > 0) { /* the line says what it is, on the left where busbw is still low */
        char t[320];
        snprintf(t, sizeof t, "line rate %.4g GB/s%s%s", rate, link ? ": " : "", link ? link : "");
        fprintf(f.g, "set label 1 ");
        gq(f.g, t);
        fprintf(f.g, " at graph 0.02, first %.9g offset 0, 0.7 tc rgb '#d62728' noenhanced\n", rate);
      }
    } else {
      fprintf(f.g, "set ylabel 'time (µs)'\nset logscale y 10\nset format y '%%g'\n");
    }
    char dat[80];
    snprintf(dat, sizeof dat, "%s.dat", f.name);
    coll_series(f.g, dat, bus ? 3 : 2, bus ? 5 : 4, in_place, algos, nalgos);
    if (bus && rate > 0) {
      fprintf(f.g, ", \\\n     %.9g with lines lw 2 dt 3 lc rgb '#d62728' title 'line rate %.4g GB/s'",
              rate, rate);
    }
    fprintf(f.g, "\n");
    fig_draw(pl, &f, "collective.json");
    fig_free(&f);
  }
  free(r);
  free(algos);
  json_decref(root);
  return rc;
}

/* ---- sweep.json / sweep.csv --------------------------------------------------------------- */

typedef struct spoint {
  int index;
  char **val; /* one per axis */
  bool ok;
  double gpus, step, compute, wait, framework, lost, thr, ideal, eff;
  int series; /* index into the sweep's series */
  double x;
} spoint;

typedef struct sweep {
  char scenario[256], cluster[512];
  int naxes;
  char **keys;
  int npoints;
  spoint *p;
} sweep;

static void sweep_free(sweep *s) {
  for (int i = 0; i < s->npoints; i++) {
    for (int a = 0; a < s->naxes; a++) free(s->p[i].val[a]);
    free(s->p[i].val);
  }
  for (int a = 0; a < s->naxes; a++) free(s->keys[a]);
  free(s->keys);
  free(s->p);
}

/* A value as text: strings as they are, numbers without a trailing ".0". */
static char *value_text(json_t *v) {
  char buf[64];
  if (json_is_string(v)) return strdup(json_string_value(v));
  if (json_is_integer(v)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
  else if (json_is_real(v)) snprintf(buf, sizeof buf, "%.10g", json_real_value(v));
  else if (json_is_true(v) || json_is_false(v)) snprintf(buf, sizeof buf, "%s", json_is_true(v) ? "true" : "false");
  else snprintf(buf, sizeof buf, "?");
  return strdup(buf);
}

static int sweep_from_json(const char *path, sweep *s) {
  json_t *root = load_json(path);
  if (!root) return 2;
  snprintf(s->scenario, sizeof s->scenario, "%s", jstr(root, "scenario", ""));
  cluster_text(json_object_get(root, "cluster"), s->cluster, sizeof s->cluster);
  json_t *axes = json_object_get(root, "axes"), *points = json_object_get(root, "points");
  s->naxes = (int)json_array_size(axes);
  s->npoints = (int)json_array_size(points);
  s->keys = calloc((size_t)s->naxes + 1, sizeof *s->keys);
  s->p = calloc((size_t)s->npoints + 1, sizeof *s->p);
  if (!s->keys || !s->p) {
    json_decref(root);
    return 1;
  }
  for (int a = 0; a < s->naxes; a++)
    s->keys[a] = strdup(jstr(json_array_get(axes, a), "key", "?"));
  for (int i = 0; i < s->npoints; i++) {
    json_t *pt = json_array_get(points, i), *set = json_object_get(pt, "set");
    spoint *p = &s->p[i];
    p->index = (int)jnum(pt, "point", i);
    p->val = calloc((size_t)s->naxes + 1, sizeof *p->val);
    if (!p->val) {
      json_decref(root);
      return 1;
    }
    for (int a = 0; a < s->naxes; a++) p->val[a] = value_text(json_object_get(set, s->keys[a]));
    p->ok = strcmp(jstr(pt, "status", "ok"), "ok") == 0;
    p->gpus = jnum(pt, "gpus", NAN);
    p->step = jnum(pt, "step_ms", NAN);
    p->compute = jnum(pt, "compute_ms", NAN);
    p->wait = jnum(pt, "comm_wait_ms", NAN);
    p->framework = jnum(pt, "framework_ms", 0);
    p->lost = jnum(pt, "lost_ms", 0);
    p->thr = jnum(pt, "samples_per_s", NAN);
    p->ideal = jnum(pt, "ideal_samples_per_s", NAN);
    p->eff = jnum(pt, "scaling_efficiency", NAN);
  }
  json_decref(root);
  return 0;
}

/* Splits a CSV line in place on commas (the sweep's values hold none). */
static int csv_split(char *line, char **cols, int max) {
  int n = 0;
  line[strcspn(line, "\r\n")] = 0;
  for (char *c = line; n < max;) {
    cols[n++] = c;
    char *comma = strchr(c, ',');
    if (!comma) break;
    *comma = 0;
    c = comma + 1;
  }
  return n;
}

/* sweep.csv alone: `point,<axis keys...>,gpus,nodes,step_ms,...,status`. */
static int sweep_from_csv(const char *path, sweep *s) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "rehearsal plot: cannot read %s: %s\n", path, strerror(errno));
    return 2;
  }
  char line[4096], *cols[64];
  int rc = 0, ncols = 0, gpus_col = -1;
  enum { C_STEP, C_COMPUTE, C_WAIT, C_FRAMEWORK, C_LOST, C_THR, C_IDEAL, C_EFF, C_STATUS, C_COUNT };
  static const char *const names[C_COUNT] = {"step_ms", "compute_ms", "comm_wait_ms",
                                             "framework_ms", "lost_ms", "samples_per_s",
                                             "ideal_samples_per_s", "scaling_efficiency", "status"};
  int at[C_COUNT];
  for (int k = 0; k < C_COUNT; k++) at[k] = -1;
  if (fgets(line, sizeof line, f)) {
    char *h = line + (line[0] == '#');
    ncols = csv_split(h, cols, 64);
    for (int c = 0; c < ncols; c++) {
      /* the last "gpus": an axis may be named gpus too, and the metrics come after the axes */
      if (strcmp(cols[c], "gpus") == 0) gpus_col = c;
      for (int k = 0; k < C_COUNT; k++)
        if (strcmp(cols[c], names[k]) == 0) at[k] = c;
    }
    if (gpus_col < 1 || strcmp(cols[0], "point") != 0) {
      fprintf(stderr, "rehearsal plot: %s: the header is not `point,<axes...>,gpus,...`\n", path);
      rc = 2;
    } else {
      s->naxes = gpus_col - 1;
      s->keys = calloc((size_t)s->naxes + 1, sizeof *s->keys);
      for (int a = 0; s->keys && a < s->naxes; a++) s->keys[a] = strdup(cols[1 + a]);
      if (!s->keys) rc = 1;
    }
  } else {
    fprintf(stderr, "rehearsal plot: %s is empty\n", path);
    rc = 2;
  }
  while (rc == 0 && fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    int n = csv_split(line, cols, 64);
    if (n < ncols) continue;
    spoint *grown = realloc(s->p, (size_t)(s->npoints + 1) * sizeof *grown);
    if (!grown) {
      rc = 1;
      break;
    }
    s->p = grown;
    spoint *p = &s->p[s->npoints++];
    memset(p, 0, sizeof *p);
    p->index = atoi(cols[0]);
    p->val = calloc((size_t)s->naxes + 1, sizeof *p->val);
    for (int a = 0; p->val && a < s->naxes; a++) p->val[a] = strdup(cols[1 + a]);
#define COL(k, fallback) (at[k] >= 0 && *cols[at[k]] ? strtod(cols[at[k]], NULL) : (fallback))
    p->gpus = strtod(cols[gpus_col], NULL);
    p->step = COL(C_STEP, NAN);
    p->compute = COL(C_COMPUTE, NAN);
    p->wait = COL(C_WAIT, NAN);
    p->framework = COL(C_FRAMEWORK, 0);
    p->lost = COL(C_LOST, 0);
    p->thr = COL(C_THR, NAN);
    p->ideal = COL(C_IDEAL, NAN);
    p->eff = COL(C_EFF, NAN);
#undef COL
    p->ok = at[C_STATUS] < 0 || strcmp(cols[at[C_STATUS]], "ok") == 0;
  }
  fclose(f);
  return rc;
}

/* The sweep's layout in figures: x is the GPU count when it changes from point to point (the
 * axis behind it is then left out of the series), else the first axis; the other axes make one
 * series per combination of their values.  Returns the axis on x, or -1 for GPUs. */
static int sweep_layout(sweep *s, bool *gpus_x, int *driver) {
  double g0 = NAN;
  *gpus_x = false;
  for (int i = 0; i < s->npoints; i++) {
    if (!s->p[i].ok) continue;
    if (isnan(g0)) g0 = s->p[i].gpus;
    else if (s->p[i].gpus != g0) *gpus_x = true;
  }
  *driver = s->naxes > 0 ? 0 : -1;
  if (*gpus_x) {
    /* the first axis whose value alone gives the GPU count, and changes it */
    *driver = -1;
    for (int a = 0; a < s->naxes && *driver < 0; a++) {
      bool function = true, changes = false;
      for (int i = 0; i < s->npoints; i++)
        for (int j = 0; j < s->npoints; j++) {
          const spoint *p = &s->p[i], *q = &s->p[j];
          if (!p->ok || !q->ok) continue;
          if (strcmp(p->val[a], q->val[a]) == 0 && p->gpus != q->gpus) function = false;
          if (p->gpus != q->gpus) changes = true;
        }
      if (function && changes) *driver = a;
    }
    if (*driver < 0 && s->naxes > 0) *driver = 0;
  }
  return *gpus_x ? -1 : *driver;
}

/* The series label of a point: the values of the axes other than `skip` ("" when none). */
static void series_label(const sweep *s, const spoint *p, int skip, char *buf, size_t len) {
  size_t n = 0;
  buf[0] = 0;
  for (int a = 0; a < s->naxes; a++) {
    if (a == skip) continue;
    const char *unit = key_unit(s->keys[a]), *name = key_short(s->keys[a]);
    /* "nic = 100 Gb/s" rather than "nic_Gbps = 100 Gb/s": the unit is said once */
    int keep = (int)strlen(name);
    const char *us = unit ? strrchr(name, '_') : NULL;
    if (us && us > name) keep = (int)(us - name);
    n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%.*s = %s%s%s", n ? ", " : "", keep,
                          name, p->val[a], unit ? " " : "", unit ? unit : "");
    if (n >= len) break;
  }
}

static int cmp_x(const void *a, const void *b) {
  const spoint *p = *(spoint *const *)a, *q = *(spoint *const *)b;
  return p->x < q->x ? -1 : p->x > q->x;
}

/* Throughput and efficiency against x, one block (gnuplot's index) per series. */
static int plot_sweep_lines(plotter *pl, sweep *s, const char *source) {
  bool gpus_x;
  int driver;
  int xaxis = sweep_layout(s, &gpus_x, &driver);
  int skip = gpus_x ? driver : xaxis;
  /* x: GPUs; or the axis's value; or, for words, the value's place among the axis's values */
  bool num_x = true;
  for (int i = 0; i < s->npoints && xaxis >= 0; i++)
    if (s->p[i].ok && !numeric(s->p[i].val[xaxis], NULL)) num_x = false;
  char **cats = calloc((size_t)s->npoints + 1, sizeof *cats);
  char (*labels)[256] = calloc((size_t)s->npoints + 1, sizeof *labels);
  spoint **order = calloc((size_t)s->npoints + 1, sizeof *order);
  if (!cats || !labels || !order) {
    free(cats);
    free(labels);
    free(order);
    return 1;
  }
  int ncats = 0, nseries = 0, nok = 0;
  double xmin = INFINITY, xmax = -INFINITY;
  for (int i = 0; i < s->npoints; i++) {
    spoint *p = &s->p[i];
    if (!p->ok) continue;
    if (gpus_x || xaxis < 0) p->x = p->gpus;
    else if (num_x) numeric(p->val[xaxis], &p->x);
    else {
      int c = 0;
      while (c < ncats && strcmp(cats[c], p->val[xaxis]) != 0) c++;
      if (c == ncats) cats[ncats++] = p->val[xaxis];
      p->x = c;
    }
    xmin = fmin(xmin, p->x);
    xmax = fmax(xmax, p->x);
    char label[256];
    series_label(s, p, skip, label, sizeof label);
    int k = 0;
    while (k < nseries && strcmp(labels[k], label) != 0) k++;
    if (k == nseries) snprintf(labels[nseries++], sizeof labels[0], "%s", label);
    p->series = k;
    order[nok++] = p;
  }
  qsort(order, (size_t)nok, sizeof *order, cmp_x);
  bool logx = (gpus_x || num_x) && xmin > 0 && xmax / xmin >= 16;
  char xlabel[300];
  if (gpus_x || xaxis < 0) snprintf(xlabel, sizeof xlabel, "GPUs");
  else key_label(s->keys[xaxis], xlabel, sizeof xlabel);

  int rc = 0;
  for (int which = 0; which < 2 && rc == 0; which++) {
    bool thr = which == 0;
    figure f;
    if (!fig_open(&f, thr ? "sweep-throughput" : "sweep-efficiency")) {
      fig_free(&f);
      rc = 1;
      break;
    }
    fprintf(f.d, "# x (%s) samples_per_s ideal_samples_per_s scaling_efficiency_percent gpus\n",
            xlabel);
    for (int k = 0; k < nseries; k++) {
      /* the ideal of a series on GPUs: linear from its smallest point */
      const spoint *base = NULL;
      for (int i = 0; i < nok; i++)
        if (order[i]->series == k && (!base || order[i]->gpus < base->gpus)) base = order[i];
      fprintf(f.d, "%s# series %d: ", k ? "\n\n" : "", k);
      dq(f.d, labels[k][0] ? labels[k] : "all points");
      fputc('\n', f.d);
      for (int i = 0; i < nok; i++) {
        const spoint *p = order[i];
        if (p->series != k) continue;
        double ideal = gpus_x ? base->thr / base->gpus * p->gpus : p->ideal;
        fprintf(f.d, "%.9g %.9g %.9g %.9g %.9g\n", p->x, p->thr, ideal, 100 * p->eff, p->gpus);
      }
    }
    fig_title(&f, thr ? "throughput" : "scaling efficiency", s->scenario, s->cluster);
    fprintf(f.g, "set xlabel ");
    gq(f.g, xlabel);
    fprintf(f.g, "\nset grid\n");
    if (logx) fprintf(f.g, "set logscale x 2\nset xrange [%.9g:%.9g]\n", xmin / 1.3, xmax * 1.3);
    else if (xmax > xmin) {
      double pad = 0.06 * (xmax - xmin);
      fprintf(f.g, "set xrange [%.9g:%.9g]\n", xmin - pad, xmax + pad);
    } else {
      fprintf(f.g, "set xrange [%.9g:%.9g]\n", xmin - 1, xmax + 1);
    }
    if (xaxis >= 0 && !gpus_x && !num_x) {
      fprintf(f.g, "set xtics (");
      for (int c = 0; c < ncats; c++) {
        fprintf(f.g, "%s", c ? ", " : "");
        gq(f.g, cats[c]);
        fprintf(f.g, " %d", c);
      }
      fprintf(f.g, ")\n");
    } else if (gpus_x || num_x) {
      /* a tic at every point's x, as the sweep chose them, unless they are many */
      double seen[64];
      int nseen = 0;
      for (int i = 0; i < nok && nseen < 64; i++)
        if (!nseen || seen[nseen - 1] != order[i]->x) seen[nseen++] = order[i]->x;
      if (nseen <= 16) {
        fprintf(f.g, "set xtics (");
        for (int i = 0; i < nseen; i++) fprintf(f.g, "%s\"%g\" %.9g", i ? ", " : "", seen[i], seen[i]);
        fprintf(f.g, ")\n");
      }
    }
    if (thr) {
      double most = 0;
      for (int i = 0; i < nok; i++) most = fmax(most, fmax(order[i]->thr, order[i]->ideal));
      fprintf(f.g, "set ylabel 'throughput (samples/s)'\n");
      /* on GPUs doubling from point to point, log-log: linear scaling is a straight line, and
       * the top left is empty; on a linear axis from 0 the lines run high, the bottom is free */
      if (logx && gpus_x) fprintf(f.g, "set logscale y 10\nset key top left box opaque\n");
      else fprintf(f.g, "set yrange [0:*]\nset key bottom right box opaque\n");
      fprintf(f.g, "set format y '%s'\n", most >= 1e6 ? "%.1s%c" : "%.0f");
    } else {
      fprintf(f.g, "set ylabel 'scaling efficiency (%%, against the same GPUs with free "
                   "communication)'\nset yrange [0:105]\nset key bottom left box opaque\n");
    }
    fprintf(f.g, "plot ");
    for (int k = 0; k < nseries; k++) {
      char title[320];
      snprintf(title, sizeof title, "%s", labels[k][0] ? labels[k] : thr ? "throughput" : "scaling efficiency");
      fprintf(f.g, "%s'%s.dat' index %d using 1:%d with linespoints lw 2 pt 7 lc rgb '%s' title ",
              k ? ", \\\n     " : "", f.name, k, thr ? 2 : 4, colours[k % NCOLOURS]);
      gq(f.g, title);
    }
    /* the ideal lines after the measured ones, dashed in their colours; one legend entry says
     * what they are */
    for (int k = 0; k < nseries && thr; k++) {
      const spoint *base = NULL;
      for (int i = 0; i < nok; i++)
        if (order[i]->series == k && (!base || order[i]->gpus < base->gpus)) base = order[i];
      char title[320];
      if (gpus_x && nseries == 1)
        snprintf(title, sizeof title, "ideal: linear from %g GPU%s", base->gpus,
                 base->gpus == 1 ? "" : "s");
      else if (gpus_x)
        snprintf(title, sizeof title, "ideal, linear from its fewest GPUs");
      else
        snprintf(title, sizeof title, "ideal, no time spent communicating");
      /* one line: dark grey, so that it shows over the measured one it may lie on; several:
       * each in its line's colour, with a key of its own in that colour */
      if (nseries > 1) {
        char one[sizeof title];
        snprintf(one, sizeof one, "%.200s: %.100s", labels[k][0] ? labels[k] : "series", title);
        snprintf(title, sizeof title, "%s", one);
      }
      fprintf(f.g, ", \\\n     '' index %d using 1:3 with lines lw 2 dt 2 lc rgb '%s' title ", k,
              nseries == 1 ? "#303030" : colours[k % NCOLOURS]);
      gq(f.g, title);
    }
    if (!thr) fprintf(f.g, ", \\\n     100 with lines lw 1 dt 3 lc rgb '#7f7f7f' title '100%%'");
    fprintf(f.g, "\n");
    fig_draw(pl, &f, source);
    fig_free(&f);
  }
  free(cats);
  free(labels);
  free(order);
  return rc;
}

/* Stacked bars fill the width: their key goes inside, across the top, in room left above the
 * tallest bar (beside the plot it would squeeze the bars; below it, it meets the x label). */
static void bar_key(FILE *g, double tallest) {
  if (tallest > 0) fprintf(g, "set yrange [0:%.9g]\n", tallest * 1.3);
  else fprintf(g, "set yrange [0:*]\n");
  fprintf(g, "set key inside top center horizontal box opaque\n");
}

/* Each point's step: compute, exposed communication, the framework's losses and lost time, as
 * stacked bars. */
static int plot_sweep_steps(plotter *pl, sweep *s, const char *source) {
  figure f;
  if (!fig_open(&f, "sweep-step")) {
    fig_free(&f);
    return 1;
  }
  bool lost = false, framework = false;
  size_t longest = 0;
  int bars = 0;
  double tallest = 0;
  fprintf(f.d, "# point label compute_ms exposed_comm_ms lost_ms step_ms framework_ms\n");
  for (int i = 0; i < s->npoints; i++) {
    const spoint *p = &s->p[i];
    if (!p->ok) continue;
    char label[256] = "";
    size_t n = 0;
    for (int a = 0; a < s->naxes && n < sizeof label; a++)
      n += (size_t)snprintf(label + n, sizeof label - n, "%s%s", a ? ", " : "", p->val[a]);
    if (s->naxes == 0) snprintf(label, sizeof label, "%d", p->index);
    longest = strlen(label) > longest ? strlen(label) : longest;
    fprintf(f.d, "%d ", p->index);
    dq(f.d, label);
    fprintf(f.d, " %.9g %.9g %.9g %.9g %.9g\n", p->compute, p->wait, p->lost, p->step, p->framework);
    tallest = fmax(tallest, p->compute + p->wait + p->lost + p->framework);
    lost = lost || p->lost > 0;
    framework = framework || p->framework > 0;
    bars++;
  }
  char xlabel[600] = "";
  size_t n = 0;
  for (int a = 0; a < s->naxes && n < sizeof xlabel; a++) {
    char k[300];
    key_label(s->keys[a], k, sizeof k);
    n += (size_t)snprintf(xlabel + n, sizeof xlabel - n, "%s%s", a ? ", " : "", k);
  }
  if (s->naxes == 0) snprintf(xlabel, sizeof xlabel, "point");
  fig_title(&f, "step time", s->scenario, s->cluster);
  fprintf(f.g, "set xlabel ");
  gq(f.g, xlabel);
  fprintf(f.g, "\nset ylabel 'time per step (ms)'\nset grid ytics\n"
               "set style data histograms\nset style histogram rowstacked\n"
               "set style fill solid 0.85 border -1\nset boxwidth 0.7\n");
  bar_key(f.g, tallest);
  /* labels side by side while they fit; slanted beyond */
  if ((size_t)bars * (longest + 2) > 90) fprintf(f.g, "set xtics rotate by -35 left\n");
  fprintf(f.g,
          "plot '%s.dat' using 3:xtic(2) lc rgb '%s' title 'compute', \\\n"
          "     '' using 4 lc rgb '%s' title 'exposed communication'",
          f.name, colours[0], colours[1]);
  if (framework)
    fprintf(f.g, ", \\\n     '' using 7 lc rgb '#9467bd' title 'framework, slowest rank'");
  if (lost) fprintf(f.g, ", \\\n     '' using 5 lc rgb '#d62728' title 'lost (failures)'");
  fprintf(f.g, "\n");
  fig_draw(pl, &f, source);
  fig_free(&f);
  return 0;
}

int rh_plot_sweep(plotter *pl, const char *json_path, const char *csv_path) {
  sweep s;
  memset(&s, 0, sizeof s);
  int rc = json_path ? sweep_from_json(json_path, &s) : sweep_from_csv(csv_path, &s);
  const char *source = json_path ? "sweep.json" : "sweep.csv";
  if (rc == 0 && !s.scenario[0]) {
    /* a sweep.csv alone names no scenario: the directory's name stands for it */
    const char *slash = strrchr(pl->dir, '/');
    snprintf(s.scenario, sizeof s.scenario, "%s", slash && slash[1] ? slash + 1 : pl->dir);
  }
  int ok = 0;
  for (int i = 0; rc == 0 && i < s.npoints; i++) {
    if (s.p[i].ok) {
      ok++;
      continue;
    }
    char set[512] = "";
    size_t n = 0;
    for (int a = 0; a < s.naxes && n < sizeof set; a++)
      n += (size_t)snprintf(set + n, sizeof set - n, "%s%s=%s", a ? " " : "", s.keys[a], s.p[i].val[a]);
    fprintf(stderr, "rehearsal plot: point %d (%s) failed: left out of the figures\n",
            s.p[i].index, set);
  }
  if (rc == 0 && ok == 0) {
    fprintf(stderr, "rehearsal plot: %s: no point of the sweep succeeded; nothing to draw\n",
            json_path ? json_path : csv_path);
    rc = 2;
  }
  if (rc == 0) rc = plot_sweep_lines(pl, &s, source);
  if (rc == 0) rc = plot_sweep_steps(pl, &s, source);
  sweep_free(&s);
  return rc;
}

/* ---- summary.json and steps.csv ------------------------------------------------------------ */

/* Each epoch's step, split into compute, waiting for gradients, lost time and the rest. */
static void plot_epochs(plotter *pl, json_t *root, const char *scenario, const char *cluster) {
  json_t *epochs = json_object_get(root, "epochs");
  size_t n = json_array_size(epochs);
  if (n == 0) return;
  figure f;
  if (!fig_open(&f, "run-epochs")) {
    fig_free(&f);
    pl->failed++;
    return;
  }
  double most = 0, least = INFINITY, other_most = 0;
  bool lost = false;
  size_t every = n <= 20 ? 1 : (n + 19) / 20; /* at most some 20 labels under the bars */
  fprintf(f.d, "# epoch label compute_ms waiting_ms lost_ms other_ms step_ms (per step; other: the rest\n"
               "# of the epoch's time, validation, checkpoints, recovery)\n");
  for (size_t i = 0; i < n; i++) {
    json_t *e = json_array_get(epochs, i);
    double steps = jnum(e, "steps", 0);
    if (!(steps > 0)) continue;
    double step = jnum(e, "step_ms", 1e3 * jnum(e, "time_s", 0) / steps);
    double compute = 1e3 * jnum(e, "compute_s", 0) / steps;
    double wait = 1e3 * jnum(e, "comm_wait_s", 0) / steps;
    double lo = 1e3 * jnum(e, "lost_s", 0) / steps;
    if (isnan(lo)) lo = 0;
    double other = fmax(0, step - compute - wait - lo);
    most = fmax(most, step);
    if (step > 0) least = fmin(least, step);
    other_most = fmax(other_most, other);
    lost = lost || lo > 0;
    int epoch = (int)jnum(e, "epoch", (double)i + 1);
    char label[16] = "";
    if (i % every == 0) snprintf(label, sizeof label, "%d", epoch);
    fprintf(f.d, "%d ", epoch);
    dq(f.d, label);
    fprintf(f.d, " %.9g %.9g %.9g %.9g %.9g\n", compute, wait, lo, other, step);
  }
  fig_title(&f, "step time per epoch", scenario, cluster);
  fprintf(f.g, "set xlabel 'epoch'\nset ylabel 'time per step (ms)'\n"
               "set grid ytics\nset style data histograms\nset style histogram rowstacked\n"
               "set style fill solid 0.85 border -1\nset boxwidth 0.7\n");
  bool others = other_most > 0.005 * most;
  const char *other_title = lost || json_object_get(json_array_get(epochs, 0), "commit_s")
                                ? "other (validation, checkpoints, recovery)"
                                : "other (validation, checkpoints)";
  if (most > 20 * least) {
    /* an epoch a failure made 20 times longer than the others would flatten them to nothing on
     * a linear axis: the axis is logarithmic, from below the shortest step.  gnuplot stacks no
     * histogram on a log axis, so each bar is drawn as its running sums, tallest first. */
    fprintf(f.g, "set logscale y\nset yrange [%.9g:%.9g]\n"
                 "set ylabel 'time per step (ms, log scale)'\nset style data boxes\n"
                 "set key inside top center horizontal box opaque\nset xtics nomirror\n",
            least / 4, most * 8);
    fprintf(f.g, "plot '%s.dat' using 0:($3+$4+$5+$6):xtic(2) lc rgb '%s' title '%s', \\\n"
                 "     '' using 0:($3+$4+$5) lc rgb '#d62728' title 'lost (failures)', \\\n"
                 "     '' using 0:($3+$4) lc rgb '%s' title 'waiting for gradients', \\\n"
                 "     '' using 0:3 lc rgb '%s' title 'compute'",
            f.name, colours[8], others ? other_title : "", colours[1], colours[0]);
    if (!others) fprintf(f.g, " # no other time: its boxes are those of the lost time");
  } else {
    bar_key(f.g, most);
    fprintf(f.g,
            "plot '%s.dat' using 3:xtic(2) lc rgb '%s' title 'compute', \\\n"
            "     '' using 4 lc rgb '%s' title 'waiting for gradients'",
            f.name, colours[0], colours[1]);
    if (lost) fprintf(f.g, ", \\\n     '' using 5 lc rgb '#d62728' title 'lost (failures)'");
    /* the rest of an epoch's time (validation, checkpoints, and with failures commits and
     * recovery): drawn when it is a visible share of a step */
    if (others) fprintf(f.g, ", \\\n     '' using 6 lc rgb '%s' title '%s'", colours[8], other_title);
  }
  fprintf(f.g, "\n");
  fig_draw(pl, &f, "summary.json");
  fig_free(&f);
}

/* The lr, and the loss when the model is real, per step from steps.csv. */
static void plot_steps(plotter *pl, const char *path, const char *scenario, const char *cluster) {
  FILE *in = fopen(path, "r");
  if (!in) {
    fprintf(stderr, "rehearsal plot: cannot read %s: %s\n", path, strerror(errno));
    pl->failed++;
    return;
  }
  char line[4096], *cols[64];
  int step_col = -1, lr_col = -1, loss_col = -1, ncols = 0;
  if (fgets(line, sizeof line, in)) {
    char *h = line;
    while (*h == '#' || *h == ' ') h++;
    ncols = csv_split(h, cols, 64);
    for (int c = 0; c < ncols; c++) {
      if (strcmp(cols[c], "step") == 0) step_col = c;
      if (strcmp(cols[c], "lr") == 0) lr_col = c;
      if (strcmp(cols[c], "loss") == 0) loss_col = c;
    }
  }
  if (step_col < 0 || lr_col < 0) {
    fprintf(stderr, "rehearsal plot: %s: no step and lr columns in its header\n", path);
    fclose(in);
    pl->failed++;
    return;
  }
  figure lr, loss;
  bool ok = fig_open(&lr, "run-lr");
  ok = fig_open(&loss, "run-loss") && ok; /* both opened either way, so both can be freed */
  long rows = 0, losses = 0;
  if (ok) {
    fprintf(lr.d, "# step lr\n");
    fprintf(loss.d, "# step loss (training, rank 0's batch)\n");
  }
  while (ok && fgets(line, sizeof line, in)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    if (csv_split(line, cols, 64) < ncols) continue;
    fprintf(lr.d, "%s %s\n", cols[step_col], cols[lr_col]);
    rows++;
    if (loss_col >= 0 && numeric(cols[loss_col], NULL)) {
      fprintf(loss.d, "%s %s\n", cols[step_col], cols[loss_col]);
      losses++;
    }
  }
  fclose(in);
  if (ok && rows > 0) {
    fig_title(&lr, "learning rate per step", scenario, cluster);
    fprintf(lr.g, "set xlabel 'step'\nset ylabel 'lr'\nset yrange [0:*]\nset grid\n"
                  "set offsets 0, 0, graph 0.12, 0\n" /* a constant lr clear of the border */
                  "set format y '%%g'\nset key top right box opaque\n"
                  "plot '%s.dat' using 1:2 with lines lw 2 lc rgb '%s' title 'lr (the recipe)'\n",
            lr.name, colours[0]);
    fig_draw(pl, &lr, "steps.csv");
  }
  if (ok && losses > 0) {
    fig_title(&loss, "training loss per step", scenario, cluster);
    fprintf(loss.g, "set xlabel 'step'\nset ylabel 'loss'\nset grid\nset key top right box opaque\n"
                    "plot '%s.dat' using 1:2 with lines lw 1.5 lc rgb '%s' title 'training loss'\n",
            loss.name, colours[1]);
    fig_draw(pl, &loss, "steps.csv");
  }
  if (!ok) pl->failed++;
  fig_free(&lr);
  fig_free(&loss);
}

/* A measured run beside its prediction (summary.json's "compared"). */
static void plot_compared(plotter *pl, json_t *root, const char *scenario, const char *cluster) {
  json_t *c = json_object_get(root, "compared");
  if (!json_is_object(c)) return;
  figure f;
  if (!fig_open(&f, "run-compared")) {
    fig_free(&f);
    pl->failed++;
    return;
  }
  const char *here = jstr(root, "target", "simulator"), *there = jstr(c, "target", "?");
  double this_ms = jnum(c, "this_step_ms", NAN), other_ms = jnum(c, "step_ms", NAN);
  double err = jnum(c, "error_percent", 100 * (this_ms - other_ms) / other_ms);
  /* the simulator predicts; the other targets measure */
  char a[128], b[128];
  snprintf(a, sizeof a, "%s: %s (this run)", strcmp(here, "simulator") ? "measured" : "predicted", here);
  snprintf(b, sizeof b, "%s: %s (compared)", strcmp(there, "simulator") ? "measured" : "predicted", there);
  fprintf(f.d, "# label step_ms\n");
  dq(f.d, a);
  fprintf(f.d, " %.9g\n", this_ms);
  dq(f.d, b);
  fprintf(f.d, " %.9g\n", other_ms);
  char what[160];
  snprintf(what, sizeof what, "step time, %s (this run) against %s: %+.2f%%", here, there, err);
  fig_title(&f, what, scenario, cluster);
  fprintf(f.g, "set ylabel 'time per step (ms)'\nset yrange [0:*]\nset grid ytics\n"
               "set style fill solid 0.85 border -1\nset boxwidth 0.5\nset xrange [-0.6:1.6]\n"
               "unset key\nset offsets 0, 0, graph 0.12, 0\n"
               "plot '%s.dat' every ::0::0 using 0:2:xtic(1) with boxes lc rgb '%s', \\\n"
               "     '' every ::1::1 using ($0 + 1):2:xtic(1) with boxes lc rgb '%s', \\\n"
               "     '' using 0:2:(sprintf('%%.4g ms', $2)) with labels offset 0, 1\n",
          f.name, colours[0], colours[1]);
  fig_draw(pl, &f, "summary.json");
  fig_free(&f);
}

/* The replay at scale's planner (summary.json's failures.at_scale.plan): effective training time
 * against the checkpoint interval, Young's and Daly's optimum and the interval given marked. */
static void plot_interval_plan(plotter *pl, json_t *plan, const char *scenario, const char *cluster) {
  json_t *iv = json_object_get(plan, "intervals");
  figure f;
  if (json_array_size(iv) == 0) return;
  if (!fig_open(&f, "failures-interval")) {
    fig_free(&f);
    pl->failed++;
    return;
  }
  fprintf(f.d, "# every_min effective_percent\n");
  for (size_t i = 0; i < json_array_size(iv); i++) {
    json_t *e = json_array_get(iv, i);
    fprintf(f.d, "%.9g %.9g\n", jnum(e, "every_s", NAN) / 60, 100 * jnum(e, "effective", NAN));
  }
  fig_title(&f, "effective training time against the checkpoint interval (replay at scale)",
            scenario, cluster);
  fprintf(f.g, "set xlabel 'training between checkpoints (minutes, log scale)'\n"
               "set ylabel 'effective training time (%%)'\nset logscale x\nset grid\n"
               "set key bottom center\n");
  const char *marks[] = {"young_s", "daly_s", "given_s"};
  const char *names[] = {"Young", "Daly", "given"};
  for (int k = 0; k < 3; k++) {
    double x = jnum(plan, marks[k], NAN) / 60;
    if (isfinite(x) && x > 0)
      fprintf(f.g, "set arrow from %.9g, graph 0 to %.9g, graph 1 nohead dt %d lc rgb '%s'\n"
                   "set label '%s %.3g min' at %.9g, graph %.2f left offset 0.5, 0\n",
              x, x, k + 2, colours[k + 1], names[k], x, x, 0.95 - 0.06 * k);
  }
  fprintf(f.g, "plot '%s.dat' using 1:2 with linespoints lc rgb '%s' pt 7 title "
               "'replayed (mean over seeds)'\n", f.name, colours[0]);
  fig_draw(pl, &f, "summary.json");
  fig_free(&f);
}

/* ... and against the cluster's size, at the interval given and at each size's Daly interval. */
static void plot_size_plan(plotter *pl, json_t *plan, const char *scenario, const char *cluster) {
  json_t *sz = json_object_get(plan, "sizes");
  figure f;
  if (json_array_size(sz) == 0) return;
  if (!fig_open(&f, "failures-size")) {
    fig_free(&f);
    pl->failed++;
    return;
  }
  fprintf(f.d, "# gpus effective_given_percent effective_daly_percent daly_min\n");
  for (size_t i = 0; i < json_array_size(sz); i++) {
    json_t *e = json_array_get(sz, i);
    fprintf(f.d, "%.0f %.9g %.9g %.9g\n", jnum(e, "gpus", NAN), 100 * jnum(e, "effective_given", NAN),
            100 * jnum(e, "effective_daly", NAN), jnum(e, "daly_s", NAN) / 60);
  }
  fig_title(&f, "effective training time against the cluster's size (replay at scale)", scenario,
            cluster);
  fprintf(f.g, "set xlabel 'GPUs (log scale)'\nset ylabel 'effective training time (%%)'\n"
               "set logscale x 2\nset grid\nset key bottom left\n"
               "plot '%s.dat' using 1:2 with linespoints lc rgb '%s' pt 7 title "
               "'checkpoint interval as given (%.3g min)', \\\n"
               "     '' using 1:3 with linespoints lc rgb '%s' pt 5 title "
               "'at each size''s Daly interval'\n",
          f.name, colours[0], jnum(plan, "given_s", NAN) / 60, colours[2]);
  fig_draw(pl, &f, "summary.json");
  fig_free(&f);
}

static void plot_at_scale(plotter *pl, json_t *root, const char *scenario, const char *cluster) {
  json_t *plan = json_object_get(json_object_get(json_object_get(root, "failures"), "at_scale"), "plan");
  if (!json_is_object(plan)) return;
  plot_interval_plan(pl, plan, scenario, cluster);
  plot_size_plan(pl, plan, scenario, cluster);
}

int rh_plot_run(plotter *pl, const char *summary, const char *steps) {
  json_t *root = load_json(summary);
  if (!root) return 2;
  char cluster[512];
  cluster_text(json_object_get(root, "cluster"), cluster, sizeof cluster);
  const char *scenario = jstr(root, "scenario", "");
  plot_epochs(pl, root, scenario, cluster);
  if (steps) plot_steps(pl, steps, scenario, cluster);
  plot_compared(pl, root, scenario, cluster);
  plot_at_scale(pl, root, scenario, cluster);
  json_decref(root);
  return 0;
}
