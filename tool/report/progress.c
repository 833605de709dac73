/*
 * progress.c: the progress line of progress.h.  On a terminal the line is redrawn in place
 * (carriage return, then erase to the end of the line) and cut to the terminal's width, since a
 * line that wraps can no longer be redrawn in place; forced on a pipe or a file (RH_PROGRESS=1)
 * each redraw is a line of its own.  Otherwise, on a pipe or a file, a line every
 * RH_PROGRESS_EVERY seconds of wall time (30), the first after as long, so that a log shows a
 * long run is alive and a short one prints nothing.  Redraws are rate-limited on the wall clock,
 * so a caller may report every step however fast the steps go.
 */
#include "progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define REDRAW_INTERVAL 0.2 /* seconds of wall time between redraws: at most 5 a second */
#define LOG_INTERVAL 30     /* on a pipe or a file, unless forced: a line every 30 s */

struct rh_progress {
  char what[32], unit[32];
  double total;
  double done, sim_time; /* the last update */
  double start, last_draw; /* wall clock; last_draw < 0: never drawn */
  bool tty;
  bool drawn; /* the terminal's current line holds the progress line */
  double every; /* seconds of wall time between lines (REDRAW_INTERVAL, or the log's) */
  bool log;     /* a pipe or a file, not forced: a line every `every`, none at the end */
};

static double wall_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* H:MM:SS, or M:SS under an hour (wall time, whole seconds). */
static void clock_text(double s, char *buf, size_t len) {
  long t = s > 0 ? (long)(s + 0.5) : 0;
  if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

/* Simulated time: a collective's microseconds mean as much as a training run's hours. */
static void sim_text(double s, char *buf, size_t len) {
  if (s < 1e-3) snprintf(buf, len, "%.1f us", s * 1e6);
  else if (s < 1) snprintf(buf, len, "%.1f ms", s * 1e3);
  else if (s < 60) snprintf(buf, len, "%.1f s", s);
  else clock_text(s, buf, len);
}

/* Columns of the terminal on stderr; 0 when unknown. */
static int terminal_width(void) {
  struct winsize ws;
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 0;
}

static void draw(rh_progress *p, double now) {
  char line[256], part[64];
  size_t n = 0;
#define ADD(...)                                                                                   \
  do {                                                                                             \
    if (n < sizeof line) n += (size_t)snprintf(line + n, sizeof line - n, __VA_ARGS__);          \
  } while (0)
  if (p->total > 0)
    ADD("%s: %.0f/%.0f %s (%.0f%%)", p->what, p->done, p->total, p->unit,
        floor(100 * fmin(p->done / p->total, 1)));
  else
    ADD("%s: %.0f %s", p->what, p->done, p->unit);
  if (!isnan(p->sim_time)) {
    sim_text(p->sim_time, part, sizeof part);
    ADD(", simulated %s", part);
  }
  double elapsed = now - p->start;
  clock_text(elapsed, part, sizeof part);
  ADD(", elapsed %s", part);
  if (p->done > 0 && p->total > p->done) {
    clock_text(elapsed * (p->total - p->done) / p->done, part, sizeof part);
    ADD(", ETA %s", part);
  }
#undef ADD
  if (n >= sizeof line) n = sizeof line - 1;
  if (p->tty) {
    int width = terminal_width();
    /* one column short: a line that fills the last column wraps on some terminals */
    if (width > 1 && n > (size_t)width - 1) line[width - 1] = 0;
    fprintf(stderr, "\r%s\033[K", line);
    p->drawn = true;
  } else {
    fprintf(stderr, "%s\n", line);
  }
  fflush(stderr);
  p->last_draw = now;
}

/* The log's interval: RH_PROGRESS_EVERY seconds when it is a positive number, else 30. */
static double log_interval(void) {
  const char *env = getenv("RH_PROGRESS_EVERY");
  char *end;
  double v = env ? strtod(env, &end) : 0;
  return env && *env && !*end && v > 0 && v <= 86400 ? v : LOG_INTERVAL;
}

rh_progress *rh_progress_start(const char *what, double total, const char *unit) {
  const char *env = getenv("RH_PROGRESS");
  bool tty = isatty(STDERR_FILENO);
  bool forced = env && strcmp(env, "1") == 0;
  if (env && strcmp(env, "0") == 0) return NULL;
  rh_progress *p = calloc(1, sizeof *p);
  if (!p) return NULL; /* progress is a courtesy: without memory the work goes on unseen */
  snprintf(p->what, sizeof p->what, "%s", what ? what : "");
  snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
  p->total = total;
  p->sim_time = NAN;
  p->start = wall_now();
  p->last_draw = -1;
  p->tty = tty;
  p->log = !tty && !forced;
  p->every = p->log ? log_interval() : REDRAW_INTERVAL;
  return p;
}

void rh_progress_update(rh_progress *p, double done, double sim_time) {
  if (!p) return;
  p->done = done;
  p->sim_time = sim_time;
  double now = wall_now();
  if (p->log) { /* the first line too waits its interval */
    if (now - (p->last_draw < 0 ? p->start : p->last_draw) >= p->every) draw(p, now);
    return;
  }
  bool finished = p->total > 0 && done >= p->total;
  if (p->last_draw < 0 || now - p->last_draw >= p->every || finished) draw(p, now);
}

void rh_progress_note(rh_progress *p, const char *fmt, ...) {
  if (!p) return;
  if (p->tty && p->drawn) fputs("\r\033[K", stderr); /* the note takes the progress line's place */
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  size_t len = strlen(fmt);
  if (len == 0 || fmt[len - 1] != '\n') fputc('\n', stderr);
  p->drawn = false;
  /* on a terminal the line comes back below the note; in line mode the next update prints it */
  if (p->tty && p->last_draw >= 0) draw(p, wall_now());
  else fflush(stderr);
}

void rh_progress_end(rh_progress *p) {
  if (!p) return;
  if (p->tty && p->drawn) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  free(p);
}
