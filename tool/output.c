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

int rh_make_dirs(const char *dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
    fprintf(stderr, "rehearsal: %s: the path is too long\n", dir);
    return 1;
  }
  /* each parent in turn, as mkdir -p does */
  for (char *p = path + 1;; p++) {
    if (*p != '/' && *p) continue;
    char c = *p;
    *p = 0;
    struct stat st;
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "rehearsal: cannot create %s: %s\n", path, strerror(errno));
      return 1;
    }
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "rehearsal: cannot create %s: a file of that name is in the way\n", path);
      return 1;
    }
    if (!c) return 0;
    *p = c;
  }
}

int rh_write_output(const char *dir, const char *name, const char *text) {
  if (rh_make_dirs(dir) != 0) return 1;
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
  /* mkstemp makes the file private; a result is for others to read too (0644 less the umask) */
  mode_t mask = umask(0);
  umask(mask);
  if (fd >= 0) fchmod(fd, 0666 & ~mask);
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
