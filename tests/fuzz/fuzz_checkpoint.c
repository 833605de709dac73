/*
 * fuzz_checkpoint.c: the checkpoint reader on any bytes, for the state of a small real model (10
 * parameters, Adam's two floats each, the samples_once evidence of 64 samples, rank flags for 4
 * ranks) when the input's first byte is even, of a timing-only one when it is odd.  A checkpoint
 * the reader accepts replaces the state; one it refuses must leave it as it was.
 */
#include "fuzz.h"
#include "train/internal.h"

#include <stdlib.h>
#include <string.h>

enum { PARAMS = 10, SAMPLES = 64, RANKS = 4 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *path = fuzz_file(0, "checkpoint-1.bin", data + 1, size - 1);
  if (!path) return 0;
  bool real = (data[0] & 1) == 0;
  rh_train_config cfg = {.real = real, .train_samples = SAMPLES, .max_size = RANKS};
  rank_state s = {.cfg = &cfg, .rank = 0, .size = 2, .recording = true};
  float params[PARAMS] = {0}, before[PARAMS];
  int32_t count[SAMPLES] = {0}, owner[SAMPLES] = {0};
  uint8_t involved[RANKS] = {0};
  if (real) {
    s.nparams = PARAMS;
    s.params = params;
    s.sample_count = count;
    s.sample_owner = owner;
    s.involved = involved;
    if (rh_optimizer_init(&s.opt, RH_OPT_ADAM, PARAMS, 0, 0.9, 0.999, 1e-8, 0) != RH_OK) return 0;
  }
  memcpy(before, params, sizeof before);
  double *rows = NULL;
  int epoch, nrows;
  int rc = train__checkpoint_read(&s, path, &epoch, &rows, &nrows);
  if (rc != 0 && memcmp(before, params, sizeof before) != 0) abort(); /* refused, yet changed */
  if (rc == 0 && nrows > 0) {
    volatile double last = rows[3 * nrows - 1]; /* every row it says it read is there */
    (void)last;
  }
  free(rows);
  rh_optimizer_free(&s.opt);
  return 0;
}
