/*
 * harness.c: see harness.h.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

rh_cluster rh_test_cluster(int nodes, int per_node, const int *slots) {
  int *g = calloc((size_t)nodes, sizeof(int));
  for (int i = 0; i < nodes; i++) g[i] = slots ? slots[i] : per_node;
  return (rh_cluster){.nodes = nodes, .gpus_per_node = g, .gpu_flops = 1e13, .intra_bw = 150e9,
                      .intra_lat = 0.7e-6, .nics_per_node = 2, .nic_bw = 12.5e9, .nic_lat = 5e-6,
                      .exact_network = true};
}

rh_cluster rh_test_bench_cluster(int gpus) {
  rh_cluster cl = rh_test_cluster(gpus / 8, 8, NULL);
  cl.gpu_flops = RH_TEST_BENCH_FLOPS;
  cl.intra_bw = 400e9;
  cl.nic_bw = 400e9 / 8;
  cl.nics_per_node = 8;
  cl.exact_network = true;
  cl.net_model = RH_NET_EXACT;
  return cl;
}

double rh_test_wall(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

bool rh_test_bench_steps(const char *prog, int min, int *steps) {
  const char *env = getenv("BENCH_STEPS");
  if (!env) return true;
  char *end;
  long k = strtol(env, &end, 10);
  if (!*env || *end || k < min || k > 100000) {
    fprintf(stderr, "%s: BENCH_STEPS=%s: a whole number of steps from %d to 100000\n", prog, env,
            min);
    return false;
  }
  *steps = (int)k;
  return true;
}

void *rh_test_shared(size_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

int rh_test_simulate_job(const rh_cluster *cl, const rh_settings *s, const rh_test_job *job,
                         rh_rank_fn fn, void *arg, double *end_time, rh_event *events, int max,
                         int *nevents) {
  double *shared = rh_test_shared(sizeof(double) + sizeof(long) + sizeof(int));
  long *replayed = (long *)(shared + 1);
  int *count = (int *)(replayed + 1);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    rh_launch_config cfg = {.cluster = cl, .settings = s};
    if (job) {
      cfg.faults = job->faults;
      cfg.elastic = job->elastic;
      cfg.restart = job->restart;
    }
    rh_launch_result res = {0};
    int rc = rh__launch(&cfg, fn, arg, &res);
    *shared = res.end_time;
    *replayed = res.replayed;
    for (size_t i = 0; res.log && events && i < res.log->n && (int)i < max; i++) {
      events[i] = res.log->events[i];
      *count = (int)i + 1;
    }
    fflush(NULL);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (end_time) *end_time = *shared;
  if (nevents) *nevents = *count;
  if (job && job->replayed) *job->replayed = *replayed;
  munmap(shared, sizeof(double) + sizeof(long) + sizeof(int));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int rh_test_simulate(const rh_cluster *cl, const rh_settings *s, rh_rank_fn fn, void *arg,
                     double *end_time) {
  return rh_test_simulate_job(cl, s, NULL, fn, arg, end_time, NULL, 0, NULL);
}

int rh_test_spawn_rss(char *const argv[], const char *out_path, const char *err_path,
                      long *maxrss_kib) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1);
    int fe = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fe >= 0) dup2(fe, 2);
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  struct rusage ru = {0};
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return 127;
  if (maxrss_kib) *maxrss_kib = ru.ru_maxrss;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int rh_test_spawn(char *const argv[], const char *out_path, const char *err_path) {
  return rh_test_spawn_rss(argv, out_path, err_path, NULL);
}

/* The most of a child's stderr shown: its end, where a failure says why. */
#define RH_TEST_STDERR_SHOWN 8192

int rh_test_spawn_expect(char *const argv[], const char *out_path, int expect) {
  char err[] = "/tmp/rehearsal-stderr-XXXXXX";
  int fd = mkstemp(err), why = errno;
  if (fd >= 0) close(fd);
  int rc = rh_test_spawn(argv, out_path, fd >= 0 ? err : NULL);
  if (rc != expect) {
    char command[1024];
    size_t k = 0;
    for (int i = 0; argv[i] && k < sizeof command; i++)
      k += (size_t)snprintf(command + k, sizeof command - k, "%s%s", i ? " " : "", argv[i]);
    char *text = fd >= 0 ? rh_test_slurp(err) : NULL;
    size_t len = text ? strlen(text) : 0;
    const char *shown = len > RH_TEST_STDERR_SHOWN ? text + len - RH_TEST_STDERR_SHOWN : text;
    if (fd < 0)
      print_error("%s exited %d, expected %d; its stderr was lost (no temporary file: %s)\n",
                  command, rc, expect, strerror(why));
    else if (!len)
      print_error("%s exited %d, expected %d, with nothing on stderr\n", command, rc, expect);
    else
      print_error("%s exited %d, expected %d; its stderr%s:\n%s%s", command, rc, expect,
                  shown != text ? " (the end)" : "", shown, text[len - 1] == '\n' ? "" : "\n");
    free(text);
  }
  if (fd >= 0) unlink(err);
  return rc;
}

#ifdef RH_SANITIZE_ADDRESS /* -DRH_SANITIZE=address */
/* AddressSanitizer's note on SimGrid's stack switching, printed once by a simulation under it
 * (three lines on stderr, not a finding): removed, so that an output checked to be empty is. */
static void drop_asan_notes(char *buf) {
  static const char *const notes[] = {"WARNING: ASan is ignoring requested __asan_handle_no_return",
                                      "False positive error reports may follow",
                                      "For details see https://github.com/google/sanitizers/issues/189"};
  char *out = buf;
  for (char *line = buf; *line;) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) + 1 : strlen(line);
    bool note = false;
    char after = line[len]; /* searched within the line alone: many lines stay linear */
    line[len] = 0;
    for (int i = 0; i < 3 && !note; i++)
      note = strstr(line, notes[i]) && (i > 0 || strncmp(line, "==", 2) == 0);
    line[len] = after;
    if (!note) {
      memmove(out, line, len);
      out += len;
    }
    line += len;
  }
  *out = 0;
}
#endif

char *rh_test_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)(n > 0 ? n : 0) + 1);
  size_t got = buf ? fread(buf, 1, (size_t)(n > 0 ? n : 0), f) : 0;
  if (buf) buf[got] = 0;
  fclose(f);
#ifdef RH_SANITIZE_ADDRESS
  if (buf) drop_asan_notes(buf);
#endif
  return buf;
}

int rh_test_mkdtemp(char *dir, const char *name) {
  snprintf(dir, 64, "/tmp/rehearsal-%s-XXXXXX", name);
  return mkdtemp(dir) ? 0 : -1;
}

int rh_test_rmdir(const char *dir) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd);
}

char *rh_test_path(const char *dir, const char *name) {
  static char buf[4][320];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

rh_settings rh_test_settings(double timeout) {
  rh_settings s;
  for (int i = 0; i < RH_SETTING_COUNT; i++) s.value[i] = rh__setting_defs[i].default_value;
  s.value[RH_SETTING_TIMEOUT] = timeout;
  return s;
}

bool rh_test_png_ok(const char *path) {
  static const unsigned char signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "no %s\n", path);
    return false;
  }
  unsigned char head[8] = {0};
  size_t got = fread(head, 1, 8, f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  bool ok = got == 8 && memcmp(head, signature, 8) == 0 && size > 1024;
  if (!ok) fprintf(stderr, "%s: not a PNG of more than 1 KiB (%ld bytes)\n", path, size);
  return ok;
}

bool rh_test_svg_ok(const char *path) {
  char *text = rh_test_slurp(path);
  bool ok = text && (strncmp(text, "<?xml", 5) == 0 || strncmp(text, "<svg", 4) == 0) &&
            strstr(text, "</svg>");
  if (ok && system("command -v xmllint >/dev/null 2>&1") == 0) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
    ok = system(cmd) == 0;
  } else if (ok) { /* without xmllint: the groups at least balance */
    int open = 0, close = 0;
    for (const char *p = text; (p = strstr(p, "<g")); p++) open += p[2] == ' ' || p[2] == '>';
    for (const char *p = text; (p = strstr(p, "</g>")); p++) close++;
    ok = open == close;
  }
  if (!ok) fprintf(stderr, "%s: not a well-formed SVG\n", path);
  free(text);
  return ok;
}

char *rh_test_verdicts(const char *text, bool names_only) {
  char *v = calloc(1, strlen(text) + 1), *w = v;
  for (const char *p = text; v && *p;) {
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) + 1 : strlen(p);
    bool check = strncmp(p, "  PASS", 6) == 0 || strncmp(p, "  FAIL", 6) == 0 ||
                 strncmp(p, "  SKIP", 6) == 0 || strncmp(p, "  ----", 6) == 0;
    char name[64] = "";
    if (check && len > 8) sscanf(p + 8, "%63s", name);
    bool kept = check && strcmp(name, "failures_noticed") != 0 &&
                !(names_only && strcmp(name, "commit_interval") == 0);
    if (kept && names_only) {
      w += sprintf(w, "%.6s %s\n", p, name);
    } else if (kept) {
      memcpy(w, p, len);
      w += len;
    }
    p += len;
  }
  return v;
}

bool rh_test_same_file(const char *a_dir, const char *b_dir, const char *name) {
  char *a = rh_test_slurp(rh_test_path(a_dir, name));
  char *b = rh_test_slurp(rh_test_path(b_dir, name));
  bool same = a && b && strcmp(a, b) == 0;
  if (!same) print_error("%s differs between %s and %s\n", name, a_dir, b_dir);
  free(a);
  free(b);
  return same;
}
