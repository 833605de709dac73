/*
 * fuzz_idx.c: the IDX reader on any bytes.  The input is an images file and a labels file: its
 * first byte says where the images end (as a share of the rest, in 256ths), the rest is split
 * there, so that both files, and a mismatch between them, are explored.
 */
#include "data.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t rest = size - 1, cut = rest * data[0] / 255;
  const char *images = fuzz_file(0, "images-idx3-ubyte", data + 1, cut);
  const char *labels = fuzz_file(1, "labels-idx1-ubyte", data + 1 + cut, rest - cut);
  if (!images || !labels) return 0;
  rh_dataset d;
  char err[512];
  if (rh_dataset_load_idx(&d, images, labels, err, sizeof err) == RH_OK) {
    float x[4096];
    int32_t y;
    if (d.n > 0 && d.inputs <= 4096) {
      rh_dataset_get(&d, 0, x, &y);
      rh_dataset_get(&d, d.n - 1, x, &y);
    }
    rh_dataset_free(&d);
  }
  return 0;
}
