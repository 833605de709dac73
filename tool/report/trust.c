/*
 * trust.c: see trust.h.  The figures are docs/validation.md's: over the suite's 37 points of
 * published data-parallel scaling (P100, V100 and A100 servers), the predicted scaling efficiency
 * is within 5.8 points on average and 27.5 at worst, each GPU timed by the kernel model; over the
 * one-GPU suite's held-out points the kernel model's throughput is 21.4% off on average.  A
 * roofline's rate is unchecked, and a given rate is as good as its measurement.  test_trust holds
 * the generations below to those of the suite's scenarios, test_validate the kernel model's
 * figures to what the one-GPU suite prints.
 */
#include "trust.h"


#include <stdio.h>
#include <string.h>

/* The GPU generations of the suite's series (rh_arch_names), and its errors in points. */
static const char *const validated_archs[] = {"pascal", "volta", "ampere", NULL};
static const double mean_points = 5.8, worst_points = 27.5;
/* The kernel model's error over the one-GPU suite's held-out points (`rehearsal validate
 * --one-gpu`, docs/validation.md), in percent; test_validate holds these to what it prints. */
const double rh_trust_kernels_mean = 21.4, rh_trust_kernels_worst = 87.0;

/* The GPU generation the scenario names (a GPU preset's, or cluster.gpu.arch); NULL where it
 * names none and the default (ampere, for NCCL's ceilings) stands in: a GPU given by its tflops
 * alone is of no known generation. */
static const char *arch_of(const rh_scenario *sc) {
  int a = sc->cluster.fabric.arch;
  if (!sc->compute.gpu_name && a == RH_ARCH_AMPERE) return NULL;
  return a >= 0 && a < RH_ARCH_COUNT ? rh_arch_names[a] : NULL;
}

bool rh_trust_validated(const rh_scenario *sc) {
  const char *arch = arch_of(sc);
  for (int i = 0; arch && validated_archs[i]; i++)
    if (strcmp(arch, validated_archs[i]) == 0) return true;
  return false;
}

static const char *compute_note(const rh_scenario *sc) {
  static char kernels[160];
  if (sc->compute.kernels) {
    snprintf(kernels, sizeof kernels, "kernel model: %.1f%% off on average over published one-GPU "
             "throughputs, %.0f%% at worst", rh_trust_kernels_mean, rh_trust_kernels_worst);
    return kernels;
  }
  return sc->compute.roofline
             ? "roofline, not validated for this GPU/model family: expect 25-50% error"
             : "at the scenario's tflops: as good as that measured rate";
}

static void scaling_note(const rh_scenario *sc, char *buf, size_t len) {
  const char *arch = arch_of(sc);
  if (rh_trust_validated(sc))
    snprintf(buf, len, "scaling within ±%.1f points (%.1f at worst) on validated setups of this "
                       "kind (%s)", mean_points, worst_points, arch);
  else
    snprintf(buf, len, arch ? "scaling not validated for %s GPUs (the suite's are Pascal, Volta, "
                              "Ampere)"
                            : "scaling not validated: the GPU's generation is not given (a GPU "
                              "preset or cluster.gpu.arch names it)%s", arch ? arch : "");
}

const char *rh_trust_note(const rh_scenario *sc, rh_trust_figure figure, char *buf, size_t len) {
  char scaling[160];
  scaling_note(sc, scaling, sizeof scaling);
  if (figure == RH_TRUST_MFU) snprintf(buf, len, "(compute %s)", compute_note(sc));
  else snprintf(buf, len, "(compute %s; %s)", compute_note(sc), scaling);
  return buf;
}

json_t *rh_trust_json(const rh_scenario *sc) {
  char scaling[160], thr[400], mfu[400];
  scaling_note(sc, scaling, sizeof scaling);
  rh_trust_note(sc, RH_TRUST_THROUGHPUT, thr, sizeof thr);
  rh_trust_note(sc, RH_TRUST_MFU, mfu, sizeof mfu);
  return json_pack("{s:s, s:b, s:s, s:s, s:s}", "compute",
                   sc->compute.kernels    ? "kernels"
                   : sc->compute.roofline ? "roofline"
                                          : "given",
                   "scaling_validated",
                   rh_trust_validated(sc), "scaling", scaling, "throughput", thr, "mfu", mfu);
}
