/*
 * fuzz_summary.c: the reader of another run's summary.json (`run --compare FILE`) on any bytes.
 */
#include "commands.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(0, "summary.json", data, size);
  if (!path) return 0;
  double step_ms;
  char target[64];
  (void)rh_summary_step(path, &step_ms, target, sizeof target);
  return 0;
}
