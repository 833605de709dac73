/*
 * steps.c: rank 0's record of every step (what `run --out DIR` writes as steps.csv: the lr, the
 * loss and the time of each step), and the progress line that follows the steps as they happen.
 * Steps the simulator charges without running (a steady run of timing-only steps) are one record
 * for the whole run, with the time of the step they repeat and the lr schedule that gives each
 * its lr: the memory follows the runs, not the steps.
 */
#include "internal.h"
#include "progress.h"

#include <math.h>
#include <stdlib.h>

void train__record_steps(rank_state *s, int epoch, long step, long count, double start,
                         double compute, double wait) {
  rh_train_result *r = s->res;
  if (s->rank != 0 || !s->recording || count <= 0) return;
  long first = (long)s->pos.global_step + 1 + (step - (long)s->pos.step);
  if (r->nsteps == r->capsteps) {
    size_t cap = r->capsteps ? 2 * r->capsteps : 256;
    rh_step_record *grown = realloc(r->steps, cap * sizeof *grown);
    if (grown) {
      r->steps = grown;
      r->capsteps = cap;
    }
  }
  if (r->nsteps < r->capsteps) {
    r->steps[r->nsteps++] = (rh_step_record){
        .global_step = first, .epoch = epoch, .step = step, .size = s->size, .start = start,
        .compute = compute, .wait = wait, .alone = s->alone,
        .lr = rh_recipe_lr(&s->used_lr, epoch, step, s->steps_per_epoch),
        .loss = count == 1 ? s->step_loss : NAN, .count = count, .schedule = s->used_lr,
        .steps_per_epoch = s->steps_per_epoch};
    r->recorded += count;
  } else {
    r->unrecorded += count; /* a report: losing it must not stop the run, but it is said */
  }
  rh_progress_update(s->cfg->progress, (double)(first + count - 1),
                     start + (double)count * (compute + wait));
}
