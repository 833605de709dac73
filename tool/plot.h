/*
 * plot.h: `rehearsal plot DIR [--out PLOTDIR]`, figures of what a command wrote into DIR
 * (collective.json, sweep.json or sweep.csv, summary.json with steps.csv), drawn by gnuplot in
 * PNG and SVG, each beside the script and the data it was drawn from.
 */
#ifndef REHEARSAL_PLOT_H
#define REHEARSAL_PLOT_H

/* The command; argv holds the arguments after its name.  Exit codes: 0 drawn, 1 gnuplot failed,
 * 2 bad input (usage, no gnuplot, nothing to draw in DIR, an input that does not parse). */
int rh_cmd_plot(int argc, char **argv);

#endif
