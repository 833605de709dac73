/*
 * memory.c: see memory.h.
 */
#include "memory.h"

#include "scenario.h"

void rh_memory_estimate(double parameters, double activations, bool known, double micro_batch,
                        int precision, rh_optimizer_kind optimizer, double momentum, bool ddp,
                        double fusion, rh_memory_use *m) {
  double grad = rh_precision_grad_bytes(precision), value = rh_precision_value_bytes(precision);
  bool low = grad < 4; /* bf16 / fp8 weights, updated through an fp32 master copy */
  *m = (rh_memory_use){.activations_known = known};
  m->weights = parameters * (low ? 2 : 4);
  m->master = low ? parameters * 4 : 0;
  m->gradients = parameters * grad;
  double states = optimizer == RH_OPT_ADAM || optimizer == RH_OPT_ADADELTA ? 2
                  : momentum > 0                                         ? 1
                                                                         : 0;
  m->optimizer = parameters * 4 * states; /* fp32 states */
  m->activations = known ? activations * value * micro_batch : 0;
  m->buffers = ddp ? m->gradients : (fusion < m->gradients ? fusion : m->gradients);
  m->total = m->weights + m->master + m->gradients + m->optimizer + m->activations + m->buffers;
}
