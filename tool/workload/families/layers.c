/*
 * layers.c: the list of layers a family appends to (see family.h).
 */
#include "family.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rh_layers_add(rh_layers *l, double parameters, double flops, double traffic,
                   double activations, const char *fmt, ...) {
  if (l->failed) return false;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 64;
    rh_layer *v = realloc(l->v, (size_t)cap * sizeof *v);
    if (!v) {
      l->failed = true;
      return false;
    }
    l->v = v;
    l->cap = cap;
  }
  char name[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap);
  va_end(ap);
  char *owned = strdup(name);
  if (!owned) {
    l->failed = true;
    return false;
  }
  l->v[l->n++] = (rh_layer){.name = owned, .parameters = parameters, .forward_flops = flops,
                            .traffic = traffic, .activations = activations, .flops_given = true};
  return true;
}

void rh_layers_shape(rh_layers *l, rh_layer_op op) {
  if (!l->failed && l->n > 0) l->v[l->n - 1].op = op;
}

void rh_layers_free(rh_layers *l) {
  for (int i = 0; i < l->n; i++) free(l->v[i].name);
  free(l->v);
  *l = (rh_layers){0};
}
