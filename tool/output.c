/*
 * output.c: writing result files.  Outputs appear whole or not at all: each goes to a temporary
 * file in the target directory and is renamed into place once complete.
 */
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rh_write_output(const char *dir, const char *name, const char *text) {
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "rehearsal: cannot create %s: %s\n", dir, strerror(errno));
    return 1;
  }
  size_t len = strlen(dir) + strlen(name) + 16;
  char *final = malloc(len), *tmp = malloc(len + 8);
  if (!final || !tmp) {
    free(final);
    free(tmp);
    return 1;
  }
  snprintf(final, len, "%s/%s", dir, name);
  snprintf(tmp, len + 8, "%s/.%s.XXXXXX", dir, name);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  int rc = 0;
  if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, final) != 0) {
    fprintf(stderr, "rehearsal: cannot write %s: %s\n", final, strerror(errno));
    if (fd >= 0) unlink(tmp);
    rc = 1;
  }
  free(final);
  free(tmp);
  return rc;
}
