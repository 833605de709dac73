/*
 * plot.c: `rehearsal plot DIR [--out PLOTDIR]`: figures of whatever DIR holds, drawn by gnuplot
 * (report/plots.c draws them).  This file is the command: its flags, finding gnuplot, and which
 * figures DIR's files call for.
 */
#include "cli.h"
#include "commands.h"
#include "output.h"
#include "plots.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the command ---------------------------------------------------------------------------- */

/* Whether DIR/NAME can be read; its path into path either way. */
static bool exists(const char *dir, const char *name, char *path, size_t len) {
  snprintf(path, len, "%s/%s", dir, name);
  return access(path, R_OK) == 0;
}

static const char usage_text[] =
    "usage: rehearsal plot DIR [--out PLOTDIR]\n"
    "Draws what a command wrote into DIR, with gnuplot, as PNG and SVG:\n"
    "  collective.json (rehearsal collective --out DIR): busbw and time by message size\n"
    "  sweep.json or sweep.csv (rehearsal sweep --out DIR): throughput and scaling efficiency\n"
    "      by GPUs (or by the sweep's axis), and each point's step time split\n"
    "  summary.json, steps.csv (rehearsal run --out DIR): step time per epoch, lr and loss per\n"
    "      step, and a measured run against its prediction (run --compare)\n"
    "  -o, --out PLOTDIR   where the figures go (default DIR/plots); beside each NAME.png and\n"
    "                      NAME.svg are NAME.dat, its data, and NAME.gp, the script that draws it\n"
    "      --help, --version\n"
    "It prints the files it wrote.  Exit status: 0 drawn, 1 gnuplot failed, 2 bad input (no\n"
    "gnuplot on PATH, nothing to draw in DIR).\n";

static int option(int c, const char *value, void *arg) {
  if (c != 'o') return 2;
  *(const char **)arg = value;
  return 0;
}

/* The first executable `name` on PATH, into buf; NULL when there is none. */
static const char *find_program(const char *name, char *buf, size_t len) {
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(buf, len, "%.*s/%s", (int)(n ? n : 1), n ? p : ".", name);
    struct stat st;
    if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return buf;
    p += n;
    if (*p == ':') p++;
  }
  return NULL;
}

int rh_cmd_plot(int argc, char **argv) {
  static const struct option longopts[] = {{"out", required_argument, NULL, 'o'},
                                           {NULL, 0, NULL, 0}};
  const char *out = NULL;
  int first = argc;
  int rc = rh_cli_parse("plot", usage_text, argc, argv, "o:", longopts, option, &out, NULL, &first);
  if (rc >= 0) return rc;
  if (argc - first != 1)
    return argc == first ? rh_cli_error("plot", "which directory? (rehearsal plot DIR)")
                         : rh_cli_error("plot", "one directory at a time (got %d)", argc - first);
  rh_plotter pl = {.dir = argv[first]};
  struct stat st;
  if (stat(pl.dir, &st) != 0) {
    fprintf(stderr, "rehearsal plot: %s: %s\n", pl.dir, strerror(errno));
    return 2;
  }
  if (!S_ISDIR(st.st_mode)) {
    fprintf(stderr, "rehearsal plot: %s is not a directory (give the DIR a command wrote)\n", pl.dir);
    return 2;
  }
  char coll[4200], sj[4200], sc[4200], sum[4200], steps[4200];
  bool has_coll = exists(pl.dir, "collective.json", coll, sizeof coll);
  bool has_sj = exists(pl.dir, "sweep.json", sj, sizeof sj);
  bool has_sc = exists(pl.dir, "sweep.csv", sc, sizeof sc);
  bool has_sum = exists(pl.dir, "summary.json", sum, sizeof sum);
  bool has_steps = exists(pl.dir, "steps.csv", steps, sizeof steps);
  if (!has_coll && !has_sj && !has_sc && !has_sum) {
    fprintf(stderr,
            "rehearsal plot: nothing to draw in %s: it holds none of collective.json (from "
            "rehearsal collective --out), sweep.json or sweep.csv (rehearsal sweep --out), "
            "summary.json (rehearsal run --out)\n",
            pl.dir);
    return 2;
  }
  char gnuplot[4200];
  pl.gnuplot = find_program("gnuplot", gnuplot, sizeof gnuplot);
  if (!pl.gnuplot) {
    fprintf(stderr, "rehearsal plot: gnuplot is not on PATH; install it (Debian, Ubuntu: "
                    "apt-get install gnuplot-nox) and run again\n");
    return 2;
  }
  char def[4200];
  if (!out) {
    snprintf(def, sizeof def, "%s/plots", pl.dir);
    out = def;
  }
  pl.out = out;
  if (rh_make_dirs(pl.out) != 0) return 1;
  rc = 0;
  int r;
  if (has_coll && (r = rh_plot_collective(&pl, coll)) > rc) rc = r;
  if ((has_sj || has_sc) && (r = rh_plot_sweep(&pl, has_sj ? sj : NULL, sc)) > rc) rc = r;
  if (has_sum && (r = rh_plot_run(&pl, sum, has_steps ? steps : NULL)) > rc) rc = r;
  if (rc == 0 && pl.failed) rc = 1;
  if (rc == 0 && pl.drawn == 0) {
    fprintf(stderr, "rehearsal plot: %s held nothing that could be drawn\n", pl.dir);
    rc = 2;
  }
  return rc;
}
