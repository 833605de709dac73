/*
 * output.c: writing result files.  Outputs appear whole or not at all: each goes to a temporary
 * file in the target directory and is renamed into place once complete.
 */
#define _GNU_SOURCE /* nftw, FTW_DEPTH, FTW_PHYS */
#include "output.h"

#include <jansson.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
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

static bool remove_failed; /* rh_remove_tree's walk: an entry that could not go */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  if (remove(path) != 0 && errno != ENOENT) {
    fprintf(stderr, "rehearsal: cannot remove %s: %s\n", path, strerror(errno));
    remove_failed = true;
  }
  return 0; /* on with the rest, as rm -rf goes on */
}

int rh_remove_tree(const char *path) {
  struct stat st;
  if (!path || !*path) return 0;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) return 0;
    fprintf(stderr, "rehearsal: cannot remove %s: %s\n", path, strerror(errno));
    return 1;
  }
  remove_failed = false;
  /* depth first (a folder after its contents), never across a link */
  if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    fprintf(stderr, "rehearsal: cannot remove %s: %s\n", path, strerror(errno));
    return 1;
  }
  return remove_failed ? 1 : 0;
}

/* Removes DIR/.NAME.PID.XXXXXX temporaries of the n names left by a process that no longer runs
 * (one killed before its rename): the PID in the name tells a live writer's from a dead one's. */
static void remove_stale(const char *dir, int n, const char *const *names) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    const char *s = e->d_name, *rest = NULL;
    for (int i = 0; i < n && !rest; i++) {
      size_t len = strlen(names[i]);
      if (s[0] == '.' && strncmp(s + 1, names[i], len) == 0 && s[len + 1] == '.') rest = s + len + 2;
    }
    if (!rest) continue;
    char *end;
    long pid = strtol(rest, &end, 10);
    if (pid <= 0 || *end != '.' || strlen(end) != 7) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to judge */
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", dir, s) < (int)sizeof path) unlink(path);
  }
  closedir(d);
}

int rh_write_outputs(const char *dir, int n, const char *const *names, const char *const *texts) {
  return rh_write_outputs_sized(dir, n, names, texts, NULL);
}

int rh_write_outputs_sized(const char *dir, int n, const char *const *names,
                           const char *const *texts, const size_t *sizes) {
  struct stat st;
  bool existed = stat(dir, &st) == 0;
  if (rh_make_dirs(dir) != 0) return 1;
  mode_t mask = umask(0);
  umask(mask);
  char (*tmp)[4096] = calloc((size_t)n, sizeof *tmp);
  int rc = tmp ? 0 : 1, written = 0;
  remove_stale(dir, n, names);
  /* every file to its temporary first; only when all are whole do they take their names */
  for (; rc == 0 && written < n; written++) {
    snprintf(tmp[written], sizeof tmp[written], "%s/.%s.%ld.XXXXXX", dir, names[written],
             (long)getpid());
    int fd = mkstemp(tmp[written]);
    /* mkstemp makes the file private; a result is for others to read too (0644 less the umask) */
    if (fd >= 0) fchmod(fd, 0666 & ~mask);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    size_t len = sizes && sizes[written] != (size_t)-1 ? sizes[written] : strlen(texts[written]);
    if (!f || fwrite(texts[written], 1, len, f) != len || fclose(f) != 0) {
      fprintf(stderr, "rehearsal: cannot write %s/%s: %s\n", dir, names[written], strerror(errno));
      if (f == NULL && fd >= 0) close(fd);
      if (fd >= 0) unlink(tmp[written]);
      rc = 1;
      break;
    }
  }
  for (int i = 0; i < n && rc == 0; i++) {
    char final[4096];
    snprintf(final, sizeof final, "%s/%s", dir, names[i]);
    if (rename(tmp[i], final) != 0) {
      fprintf(stderr, "rehearsal: cannot write %s: %s\n", final, strerror(errno));
      rc = 1;
    }
  }
  if (rc) {
    for (int i = 0; tmp && i < written; i++) unlink(tmp[i]); /* those not renamed */
    if (!existed) rmdir(dir); /* a directory made for these alone (rmdir leaves a used one) */
  }
  free(tmp);
  return rc;
}

int rh_write_output(const char *dir, const char *name, const char *text) {
  return rh_write_outputs(dir, 1, &name, &text);
}

/* The length of the valid UTF-8 character at s (1 to 4), or 0 when the bytes there are not one
 * (a stray continuation byte, a truncated or overlong sequence, a surrogate, past U+10FFFF). */
static int utf8_char(const unsigned char *s) {
  unsigned c = s[0];
  if (c < 0x80) return 1;
  int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? (c < 0xf0 ? 3 : 0) : c >= 0xc2 ? 2 : 0;
  for (int i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (len == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0;
  if (len == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
  return len;
}

json_t *rh_json_text(const char *s) {
  if (!s) return json_null();
  size_t n = strlen(s);
  char *out = malloc(4 * n + 1), *o = out;
  if (!out) return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int len = utf8_char(p);
    if (len) {
      memcpy(o, p, (size_t)len);
      o += len;
      p += len;
    } else {
      o += sprintf(o, "\\x%02x", *p++);
    }
  }
  *o = 0;
  json_t *j = json_string(out);
  free(out);
  return j;
}

/* Whether an entry can be made in the directory `path` (on the way to dir): access() answers
 * from the permission bits alone, which root passes everywhere, and not for file systems that
 * take nothing (/proc, a read-only mount), so a directory is made there and removed again. */
static int probe(const char *dir, const char *path) {
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s/.rehearsal-probe.%ld.XXXXXX", path, (long)getpid());
  if (!mkdtemp(tmp)) {
    fprintf(stderr, "rehearsal: cannot write into %s: cannot create anything in %s: %s\n", dir,
            path, strerror(errno));
    return 1;
  }
  rmdir(tmp);
  return 0;
}

int rh_output_dir_ok(const char *dir) {
  char path[4096];
  if (!*dir) {
    fprintf(stderr, "rehearsal: the output directory is an empty name: give a directory\n");
    return 1;
  }
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
    fprintf(stderr, "rehearsal: %s: the path is too long\n", dir);
    return 1;
  }
  /* the directory, or the nearest of its parents that exists: a directory one may write in */
  for (;;) {
    struct stat st;
    if (stat(path, &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "rehearsal: cannot write into %s: %s is not a directory\n", dir, path);
        return 1;
      }
      if (access(path, W_OK | X_OK) != 0) {
        fprintf(stderr, "rehearsal: cannot write into %s: %s: %s\n", dir, path, strerror(errno));
        return 1;
      }
      return probe(dir, path);
    }
    if (errno != ENOENT && errno != ENOTDIR) { /* ENOTDIR: a file on the way, found above */
      fprintf(stderr, "rehearsal: cannot write into %s: %s: %s\n", dir, path, strerror(errno));
      return 1;
    }
    char target[4096];
    ssize_t len = readlink(path, target, sizeof target - 1);
    if (len >= 0) { /* a link to nothing: mkdir would not follow it, and nothing is made there */
      target[len] = 0;
      fprintf(stderr, "rehearsal: cannot write into %s: %s is a symbolic link to %s, which does "
              "not exist\n", dir, path, target);
      return 1;
    }
    char *slash = strrchr(path, '/');
    while (slash && slash > path && slash[1] == 0) { /* trailing slashes */
      *slash = 0;
      slash = strrchr(path, '/');
    }
    if (!slash) snprintf(path, sizeof path, ".");
    else if (slash == path) path[1] = 0;
    else *slash = 0;
  }
}

void rh_remove_stale_samples(const char *dir, int ranks) {
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    int rank, end = 0;
    /* exactly samples-rank<R>.csv, as the run names them: nothing else of the folder is touched */
    if (sscanf(e->d_name, "samples-rank%d.csv%n", &rank, &end) != 1 || end == 0 ||
        e->d_name[end] != 0 || rank < ranks)
      continue;
    char path[4200];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
  }
  closedir(d);
}
