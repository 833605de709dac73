/* fuzz.c: the input files of the fuzz targets (see fuzz.h). */
#include "fuzz.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];
static char paths[4][128];

static void remove_dir(void) {
  for (int i = 0; i < 4; i++)
    if (paths[i][0]) unlink(paths[i]);
  rmdir(dir);
}

const char *fuzz_file(int slot, const char *name, const uint8_t *data, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "/tmp/rh-fuzz-XXXXXX");
    if (!mkdtemp(dir)) {
      dir[0] = 0;
      return NULL;
    }
    atexit(remove_dir);
  }
  if (slot < 0 || slot > 3) return NULL;
  snprintf(paths[slot], sizeof paths[slot], "%s/%s", dir, name);
  FILE *f = fopen(paths[slot], "wb");
  if (!f) return NULL;
  bool ok = fwrite(data, 1, size, f) == size;
  ok = fclose(f) == 0 && ok;
  return ok ? paths[slot] : NULL;
}
