/*
 * sharded_equivalence.c: a sharded step applies DDP's update.  Before the gradients are reduced,
 * every rank's own gradients are gathered (at no simulated cost); once the sharded step has
 * averaged them, each rank compares the average of its block with DDP's: every rank's gradient
 * added in rank order, divided by the ranks.  Two orders of adding n floats differ by at most
 * 2 gamma(n-1) sum|g| (gamma(k) = k u / (1 - k u), u = 2^-24: Higham, Accuracy and Stability of
 * Numerical Algorithms, 2nd ed., section 4.2), and the division by one rounding each; a block
 * averaged from other gradients, other ranks or another divisor is off by far more.  The blocks
 * of each shard group's ranks (the world; under hybrid sharding each node's, every node being a
 * replica) must cover the parameters once, in rank order; the parameters every rank holds
 * after the allgather are compared by identical_parameters.
 */
#include "../internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool sharded(const rank_state *s) {
  return s->cfg->sharding != 0 && train__shard_degree(s) > 1;
}

rh_status train__shard_note(rank_state *s) {
  if (!train__checking(s, RH_CHECK_SHARDED) || !sharded(s)) return RH_OK;
  size_t need = (size_t)s->size * s->nparams;
  if (s->raw_cap < need) {
    float *grown = realloc(s->raw_grads, need * sizeof(float));
    if (!grown) return RH_ERR_NOMEM;
    s->raw_grads = grown;
    s->raw_cap = need;
  }
  return rh_check_allgather(s->ctx, s->grad, s->nparams * sizeof(float), s->raw_grads);
}

/* The worst |average - DDP's| over its bound, over this rank's block [lo, hi). */
static double worst_ratio(const rank_state *s, size_t lo, size_t hi) {
  const double u = ldexp(1, -24);
  int n = s->size;
  double gamma = (n - 1) * u / (1 - (n - 1) * u), worst = 0;
  for (size_t j = lo; j < hi; j++) {
    float sum = 0;
    double mags = 0;
    for (int r = 0; r < n; r++) {
      float g = s->raw_grads[(size_t)r * s->nparams + j];
      sum += g;
      mags += fabs(g);
    }
    double ddp = (double)(sum / (float)n);
    double bound = (2 * gamma * mags + 2 * u * fabs((double)sum)) / n + 1e-45;
    double r = fabs((double)s->grad[j] - ddp) / bound;
    if (r > worst) worst = r;
  }
  return worst;
}

rh_status train__shard_evidence(rank_state *s, size_t lo, size_t hi) {
  if (!train__checking(s, RH_CHECK_SHARDED) || !s->raw_grads) return RH_OK;
  double mine[3] = {worst_ratio(s, lo, hi), (double)lo, (double)hi};
  double *all = malloc(3 * sizeof(double) * (size_t)s->size);
  rh_status st = all ? rh_check_allgather(s->ctx, mine, sizeof mine, all) : RH_ERR_NOMEM;
  int D = train__shard_degree(s); /* each shard group: the world, or (hybrid) a node's ranks */
  for (int r = 0; st == RH_OK && r < s->size; r++) {
    const double *x = all + 3 * r;
    if (x[0] > s->ev.shard_worst) s->ev.shard_worst = x[0];
    double expect_lo = r % D == 0 ? 0 : all[3 * (r - 1) + 2];
    if (x[1] != expect_lo || x[2] < x[1] || (r % D == D - 1 && x[2] != (double)s->nparams))
      s->ev.shard_gap = true;
  }
  s->ev.shard_steps++;
  free(all);
  return st;
}

static void finish(rank_state *s) {
  if (!s->cfg->check[RH_CHECK_SHARDED]) return;
  if (!s->cfg->real || !sharded(s)) {
    train__skip(s, RH_CHECK_SHARDED, s->cfg->real ? "the state is not sharded (recipe.sharding: "
                "none, or hybrid with one GPU a node)" : "a timing-only model has no numbers to compare");
    return;
  }
  if (s->ev.shard_steps == 0) return;
  bool ok = s->ev.shard_worst <= 1 && !s->ev.shard_gap;
  train__verdict(s, RH_CHECK_SHARDED, ok,
                 "%ld step%s, each rank's averaged gradients of its block against DDP's (every "
                 "rank's added in rank order): largest difference %.3g of the bound the order of "
                 "the sums allows; the blocks %s the %zu parameters once", s->ev.shard_steps,
                 s->ev.shard_steps == 1 ? "" : "s", s->ev.shard_worst,
                 s->ev.shard_gap ? "do NOT cover" : "cover", s->nparams);
}

const train_check train__check_sharded = {.id = RH_CHECK_SHARDED, .finish = finish};
