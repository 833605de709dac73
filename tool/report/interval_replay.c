/*
 * interval_replay.c: see interval_replay.h.  The timeline, for an interval of k steps: segments of
 * k steps and a commit, each done when no failure strikes before its end; a failure throws the
 * segment in progress away and training resumes `recovery` seconds after it (a failure during a
 * recovery starts it again).  Segments between failures are counted in bulk, so a replay costs
 * one pass over the failures, whatever the interval.
 */
#include "interval_replay.h"

#include <math.h>

/* splitmix64: the failures past the run's end, the same stream for every interval */
static uint64_t next_random(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct trace {
  const rh_replay_job *job;
  int i;          /* the next of the run's failures */
  double drawn;   /* the last failure drawn past the horizon */
  uint64_t state;
} trace;

static double next_failure(trace *t) {
  const rh_replay_job *j = t->job;
  if (t->i < j->nfailures) return j->failures[t->i++];
  if (!(j->rate > 0)) return INFINITY;
  double u = ((double)(next_random(&t->state) >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
  t->drawn += -log(u) / j->rate;
  return t->drawn;
}

double rh_replay_time(const rh_replay_job *job, long every, double limit) {
  if (every < 1) every = 1;
  trace tr = {.job = job, .drawn = job->horizon, .state = job->seed};
  double t = 0, done = 0, left = job->steps, k = (double)every;
  double seg = k * job->step + job->cost, f = next_failure(&tr);
  while (done < left) {
    while (f < t) { /* struck during a recovery: it starts again */
      t = f + job->recovery;
      f = next_failure(&tr);
      if (t > limit) return INFINITY;
    }
    double whole = floor((left - done) / k), fit = floor((f - t) / seg);
    if (fit < whole) { /* the failure strikes segment fit + 1 */
      t = f + job->recovery; /* the segments before it are committed */
      done += fit * k;
      f = next_failure(&tr);
      if (t > limit) return INFINITY;
      continue;
    }
    t += whole * seg;
    done += whole * k;
    double rest = left - done, last = rest * job->step + job->cost;
    if (rest <= 0) break;
    if (t + last <= f) {
      t += last;
      done = left;
    } else {
      t = f + job->recovery;
      f = next_failure(&tr);
    }
  }
  return t;
}

double rh_young(double cost, double mtbf) { return sqrt(2 * cost * mtbf); }

double rh_daly(double cost, double mtbf) {
  if (cost >= 2 * mtbf) return mtbf;
  double r = cost / (2 * mtbf);
  return sqrt(2 * cost * mtbf) * (1 + sqrt(r) / 3 + r / 9) - cost;
}

/* A job below 1% goodput is not worth replaying to its end. */
#define HOPELESS 100

/* The trials' failures: drawn at the job's rate from the start, one seed per trial. */
static rh_replay_job trial_job(const rh_replay_job *job, int trial) {
  rh_replay_job t = *job;
  t.failures = NULL;
  t.nfailures = 0;
  t.horizon = 0;
  uint64_t mix = job->seed ^ (0x5851f42d4c957f2dull * (uint64_t)(trial + 1));
  t.seed = next_random(&mix);
  return t;
}

/* Mean seconds over the trials, INFINITY once their sum passes `limit` (a total) or a trial is
 * hopeless. */
static double mean_time(const rh_replay_job *job, long every, double limit) {
  double sum = 0, hopeless = HOPELESS * job->steps * job->step;
  for (int i = 0; i < RH_INTERVAL_TRIALS; i++) {
    rh_replay_job t = trial_job(job, i);
    sum += rh_replay_time(&t, every, fmin(limit - sum, hopeless));
    if (sum > limit) return INFINITY;
  }
  return sum / RH_INTERVAL_TRIALS;
}

static double goodput_of(const rh_replay_job *job, double time) {
  return time > 0 ? job->steps * job->step / time : 1; /* INFINITY: 0 */
}

void rh_interval_study_run(const rh_replay_job *job, long chosen, rh_interval_study *s) {
  double mtbf = job->rate > 0 ? 1 / job->rate : INFINITY;
  double work = job->steps * job->step, hopeless = HOPELESS * work;
  *s = (rh_interval_study){.chosen = chosen, .young = rh_young(job->cost, mtbf),
                           .daly = rh_daly(job->cost, mtbf)};
  s->chosen_goodput = goodput_of(job, mean_time(job, chosen, hopeless * RH_INTERVAL_TRIALS));
  s->replayed_goodput = goodput_of(job, rh_replay_time(job, chosen, hopeless));
  long young = job->step > 0 ? lround(s->young / job->step) : 1;
  s->young_goodput =
      goodput_of(job, mean_time(job, young > 0 ? young : 1, hopeless * RH_INTERVAL_TRIALS));
  s->best = chosen;
  s->best_goodput = s->chosen_goodput;
  long last = 0;
  for (int i = 0;; i++) {
    double k = pow(2, i / 16.0);
    if (k > job->steps * 2) break;
    long every = lround(k);
    if (every == last) continue;
    last = every;
    /* only an interval faster than the best so far matters: the trials stop past its time */
    double best_total = (s->best_goodput > 0 ? work / s->best_goodput : hopeless) *
                        RH_INTERVAL_TRIALS;
    double g = goodput_of(job, mean_time(job, every, best_total));
    s->scanned++;
    if (g > s->best_goodput) {
      s->best_goodput = g;
      s->best = every;
    }
  }
}

void rh_interval_study_report(FILE *out, json_t *failures, const rh_replay_job *job,
                              const rh_interval_study *s, const char *what, double simulated) {
  double chosen_s = (double)s->chosen * job->step, best_s = (double)s->best * job->step;
  double mtbf = job->rate > 0 ? 1 / job->rate : INFINITY;
  if (out) {
    fprintf(out,
            "  interval     a %s every %ld step%s (%.4g s; a %s %.4g s, a recovery %.4g s): "
            "expected goodput %s%.2f%% over %d draws of failures at the job's MTBF of %.4g h "
            "(this run's %d failure%s replayed: %s%.2f%%; the simulation: %.2f%%)\n",
            what, s->chosen, s->chosen == 1 ? "" : "s", chosen_s, what, job->cost, job->recovery,
            s->chosen_goodput > 0 ? "" : "under ", s->chosen_goodput > 0 ? 100 * s->chosen_goodput : 100.0 / HOPELESS,
            RH_INTERVAL_TRIALS, mtbf / 3600, job->nfailures, job->nfailures == 1 ? "" : "s",
            s->replayed_goodput > 0 ? "" : "under ",
            s->replayed_goodput > 0 ? 100 * s->replayed_goodput : 100.0 / HOPELESS, 100 * simulated);
    fprintf(out,
            "               best of %d intervals: every %ld step%s (%.4g s), expected goodput "
            "%.2f%%; Young's sqrt(2 C M) = %.4g s (%.2f%%), Daly's %.4g s: the best is %+.0f%% "
            "from Young's\n",
            s->scanned, s->best, s->best == 1 ? "" : "s", best_s, 100 * s->best_goodput, s->young, 100 * s->young_goodput,
            s->daly, 100 * (best_s - s->young) / s->young);
  }
  if (failures)
    json_object_set_new(
        failures, "interval",
        json_pack("{s:s, s:I, s:f, s:f, s:f, s:f, s:I, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:f, "
                  "s:f, s:f}",
                  "of", what, "chosen_steps", (json_int_t)s->chosen, "chosen_s", chosen_s,
                  "expected_goodput", s->chosen_goodput, "replayed_goodput", s->replayed_goodput,
                  "simulated_goodput", simulated, "best_steps", (json_int_t)s->best, "best_s",
                  best_s, "best_goodput", s->best_goodput, "young_s", s->young, "young_goodput",
                  s->young_goodput, "daly_s", s->daly, "trials", RH_INTERVAL_TRIALS,
                  "failures_replayed", job->nfailures, "cost_s", job->cost, "recovery_s",
                  job->recovery, "mtbf_s", mtbf));
}
