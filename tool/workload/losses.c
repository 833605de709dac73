/*
 * losses.c: see losses.h.
 */
#include "losses.h"

#include <math.h>

/* E[max] = integral of x n phi(x) Phi(x)^(n-1) dx, by the midpoint rule on [-12, 12] (the tails
 * beyond hold less than 1e-30 of the mass for any n this runs at). */
double rh_expected_max_normal(int n) {
  if (n <= 1) return 0;
  const double lo = -12, hi = 12, h = 1e-3;
  double sum = 0;
  for (double x = lo + h / 2; x < hi; x += h) {
    double phi = exp(-0.5 * x * x) / sqrt(2 * M_PI);
    double cdf = 0.5 * erfc(-x / sqrt(2));
    sum += x * n * phi * pow(cdf, n - 1);
  }
  return sum * h;
}

double rh_loss_copy(const rh_losses *l, int size, double bytes) {
  return size > 1 && l->copy_bw > 0 && bytes > 0 ? 2 * bytes / l->copy_bw : 0;
}

double rh_loss_framework(const rh_losses *l, int size, double bytes) {
  return size > 1 && l->reducer_per_byte > 0 && bytes > 0 ? l->reducer_per_byte * bytes : 0;
}
