/*
 * steps.c: rank 0's record of every step (what `run --out DIR` writes as steps.csv: the lr, the
 * loss and the time of each step), and the progress line that follows the steps as they happen.
 * Steps the simulator charges without running (a steady run of timing-only steps) are recorded
 * one by one, each with the time of the step they repeat and the lr the recipe gives it.
 */
#include "internal.h"
#include "progress.h"

#include <math.h>
#include <stdlib.h>

void train__record_steps(rank_state *s, int epoch, long step, long count, double start,
                         double compute, double wait) {
  rh_train_result *r = s->res;
  if (s->rank != 0 || !s->recording || count <= 0) return;
  if (r->nsteps + (size_t)count > r->capsteps) {
    size_t cap = r->capsteps ? r->capsteps : 256;
    while (cap < r->nsteps + (size_t)count) cap *= 2;
    rh_step_record *grown = realloc(r->steps, cap * sizeof *grown);
    if (!grown) return; /* a report: losing it must not stop the run */
    r->steps = grown;
    r->capsteps = cap;
  }
  long first = (long)s->pos.global_step + 1 + (step - (long)s->pos.step);
  for (long i = 0; i < count; i++)
    r->steps[r->nsteps++] = (rh_step_record){
        .global_step = first + i, .epoch = epoch, .step = step + i, .size = s->size,
        .start = start + (double)i * (compute + wait), .compute = compute, .wait = wait,
        .lr = rh_recipe_lr(&s->used_lr, epoch, step + i, s->steps_per_epoch),
        .loss = count == 1 ? s->step_loss : NAN};
  rh_progress_update(s->cfg->progress, (double)(first + count - 1),
                     start + (double)count * (compute + wait));
}
