/*
 * fuzz_tables.c: the readers of `rehearsal calibrate`'s measurement tables on any bytes: an
 * nccl-tests output when the input's first byte is even, a GEMM sweep when it is 1 modulo 4, a
 * file of step times when it is 3 modulo 4.
 */
#include "fuzz.h"
#include "tables.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *path = fuzz_file(0, "table.txt", data + 1, size - 1);
  if (!path) return 0;
  if ((data[0] & 1) == 0) {
    rh_nccl_row *rows = NULL;
    int n = 0, ranks = 0, unmeasured = 0;
    char coll[64] = "";
    if (rh_read_nccl_tests(path, &rows, &n, &ranks, coll, &unmeasured) == 0 &&
        !(n > 0 && rows[n - 1].bytes >= 1 && rows[n - 1].seconds > 0 && rows[n - 1].busbw > 0))
      abort(); /* a table it accepts has rows, and every row the positive numbers it checked */
    free(rows);
  } else if ((data[0] & 3) == 3) {
    double *steps = NULL;
    int n = 0;
    if (rh_read_step_times(path, &steps, &n) == 0)
      for (int i = 0; i < n; i++)
        if (!(steps[i] > 0 && steps[i] <= 1e9)) abort(); /* every step it accepts is in range */
    free(steps);
  } else {
    rh_gemm_row rows[RH_GEMM_ROWS];
    int n = 0;
    if (rh_read_gemm_table(path, 1000, rows, &n) == 0)
      for (int i = 0; i < n; i++)
        if (!(rows[i].flops >= 2 && rows[i].tflops > 0 && rows[i].tflops <= 1000)) abort();
  }
  return 0;
}
