/*
 * plots.h: the figures of `rehearsal plot`, drawn by gnuplot in PNG and SVG, each beside the
 * script and the data it was drawn from: a collective's busbw and time by size, a sweep's
 * throughput, efficiency and step split, a run's epochs, steps and measured-against-predicted.
 */
#ifndef REHEARSAL_PLOTS_H
#define REHEARSAL_PLOTS_H

/* Where figures are drawn from and to, and what came of them.  The caller owns the strings. */
typedef struct rh_plotter {
  const char *dir;     /* what is drawn */
  const char *out;     /* where the figures go (made by the caller) */
  const char *gnuplot; /* the program */
  int drawn, failed;   /* figures drawn, figures gnuplot failed on */
} rh_plotter;

/* Each draws the figures of one kind of file into pl->out, counting them in pl.  0, or 2 when
 * the file does not parse (the reason printed); a gnuplot failure counts in pl->failed. */
int rh_plot_collective(rh_plotter *pl, const char *path);                      /* collective.json */
int rh_plot_sweep(rh_plotter *pl, const char *json_path, const char *csv_path); /* sweep.json/.csv */
int rh_plot_run(rh_plotter *pl, const char *summary, const char *steps); /* summary.json, steps.csv */

#endif
