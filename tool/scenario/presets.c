/*
 * presets.c: where the presets (presets/<kind>/NAME.yaml) are found.  In order: the folder
 * RH_PRESETS names; beside the running program, installed (BIN/../share/rehearsal/presets) or in
 * the tree it was built in (BUILD/tool/rehearsal: the tree's presets/ two folders up); then where
 * `cmake --install` puts them (for a program of one's own linked with the installed libraries);
 * then the source tree the program was configured from.  So a copy of the tree, built in place,
 * reads its own presets, and an installed program reads the installed ones.
 */
#include "scenario.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef REHEARSAL_PRESETS
#define REHEARSAL_PRESETS "presets"
#endif
#ifndef REHEARSAL_INSTALLED_PRESETS
#define REHEARSAL_INSTALLED_PRESETS "/usr/local/share/rehearsal/presets"
#endif

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *rh_presets_root(char *buf, size_t len, const char **source) {
  const char *env = getenv("RH_PRESETS");
  if (env && *env) {
    if (source) *source = "RH_PRESETS";
    snprintf(buf, len, "%s", env);
    return buf;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0; /* the program's folder */
    static const char *const beside[] = {"../share/rehearsal/presets", "../../presets"};
    for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
      snprintf(buf, len, "%s/%s", exe, beside[i]);
      if (is_dir(buf)) {
        if (source) *source = i == 0 ? "installed beside the program" : "the program's tree";
        return buf;
      }
    }
  }
  if (is_dir(REHEARSAL_INSTALLED_PRESETS)) {
    if (source) *source = "installed";
    snprintf(buf, len, "%s", REHEARSAL_INSTALLED_PRESETS);
    return buf;
  }
  if (source) *source = "the source tree";
  snprintf(buf, len, "%s", REHEARSAL_PRESETS);
  return buf;
}
