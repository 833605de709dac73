/*
 * progress.h: a progress line on stderr for long work (a training replay, a collective sweep, a
 * sweep of scenarios): how far it is, the simulated time reached, the wall time spent and what
 * is left.  It is drawn only for a person watching: when stderr is a terminal, or when
 * RH_PROGRESS=1 asks for it anyway (one line per redraw then); RH_PROGRESS=0 turns it off.
 * Otherwise every call is a no-op, so logs and tests see nothing.  Never writes to stdout.
 */
#ifndef REHEARSAL_PROGRESS_H
#define REHEARSAL_PROGRESS_H

typedef struct rh_progress rh_progress;

/* Starts a progress line for `what` ("run", "collective", "sweep") over `total` units named
 * `unit` ("steps", "sizes", "points").  Returns NULL when the line is not to be drawn; every
 * function here takes NULL and does nothing with it. */
rh_progress *rh_progress_start(const char *what, double total, const char *unit);

/* `done` units so far; sim_time: simulated seconds so far (NAN when none).  Redraws at most
 * about 5 times a second of wall time (and always when done reaches total):
 * "run: 1200/5000 steps (24%), simulated 1:02:03, elapsed 0:12, ETA 0:38". */
void rh_progress_update(rh_progress *p, double done, double sim_time);

/* A message that must be seen as it happens (a stall, a failure): printed on its own line at
 * once, then the progress line is drawn again. */
void rh_progress_note(rh_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears the line (on a terminal) and frees. */
void rh_progress_end(rh_progress *p);

#endif
