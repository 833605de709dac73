/*
 * cli.c: the flags every command shares, parsed with getopt_long so that each command behaves
 * like its neighbours: --help on stdout with exit 0, --version, unknown flags and bad values named
 * on stderr with exit 2, and --set KEY=VALUE overrides for the scenario.
 */
#include "cli.h"
#include "output.h"

#include <jansson.h>

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int rh_cli_error(const char *command, const char *fmt, ...) {
  fprintf(stderr, "rehearsal %s: ", command);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry 'rehearsal %s --help' for more information.\n", command);
  return 2;
}

const char *rh_cli_target = "simulator";

static char why[512];

void rh_cli_why(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
}

void rh_cli_platform_note(const rh_scenario *sc) {
  const rh_cluster *cl = &sc->cluster;
  long gpus = rh_cluster_first_slot(cl, cl->nodes + cl->spares); /* spares included */
  if (strcmp(rh_cli_target, "simulator") != 0 || gpus < 16384) return;
  double seconds, mib;
  rh_scenario_cost(gpus, &seconds, &mib);
  fprintf(stderr, "rehearsal: building the platform of %ld GPUs: expect about %.0f s and %.0f MiB "
          "for 10 steps on 2 cores, a longer job more (docs/simulation-cost.md)\n", gpus, seconds,
          mib);
}

static int add_set(rh_scenario_opts *opts, const char *command, const char *kv) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv) return rh_cli_error(command, "--set %s: expected KEY=VALUE", kv);
  const char **sets = realloc((void *)opts->sets, (size_t)(opts->nsets + 1) * sizeof *sets);
  if (!sets) return 1;
  sets[opts->nsets++] = kv;
  opts->sets = sets;
  return 0;
}

void rh_cli_opts_free(rh_scenario_opts *opts) {
  free((void *)opts->sets);
  opts->sets = NULL;
  opts->nsets = 0;
}

/* The flag as the user wrote it, for a message: "--name" or "-c". */
static void flag_name(const struct option *all, int longindex, int c, char *buf, size_t len) {
  if (longindex >= 0) snprintf(buf, len, "--%s", all[longindex].name);
  else snprintf(buf, len, "-%c", c);
}

int rh_cli_parse(const char *command, const char *usage, int argc, char **argv,
                 const char *shortopts, const struct option *longopts, rh_cli_option_fn fn,
                 void *arg, rh_scenario_opts *opts, int *first) {
  static const struct option common[] = {RH_CLI_COMMON_OPTIONS};
  size_t n = 0, nc = sizeof common / sizeof common[0];
  while (longopts && longopts[n].name) n++;
  struct option *all = calloc(n + nc + 1, sizeof *all);
  char **args = calloc((size_t)argc + 2, sizeof *args); /* getopt wants a program name first */
  char *shorts = malloc(strlen(shortopts ? shortopts : "") + 2);
  if (!all || !args || !shorts) {
    free(all);
    free(args);
    free(shorts);
    return 1;
  }
  if (n) memcpy(all, longopts, n * sizeof *all);
  memcpy(all + n, common, nc * sizeof *all);
  if (opts) opts->real_target = strcmp(rh_cli_target, "simulator") != 0;
  sprintf(shorts, ":%s", shortopts ? shortopts : ""); /* ':' : a missing value is told apart */
  char prog[64];
  snprintf(prog, sizeof prog, "rehearsal %s", command);
  args[0] = prog;
  memcpy(args + 1, argv, (size_t)argc * sizeof *args);
  optind = 0; /* glibc: a full re-initialisation, as a process may parse more than once */
  opterr = 0;
  int rc = -1;
  for (;;) {
    int longindex = -1;
    int c = getopt_long(argc + 1, args, shorts, all, &longindex);
    if (c == -1) break;
    char flag[80];
    if (c == '?') {
      const char *bad = args[optind - 1];
      if (optopt && optopt < 0x100 && bad[0] == '-' && bad[1] != '-')
        rc = rh_cli_error(command, "unknown flag -%c", optopt);
      else
        rc = rh_cli_error(command, "unknown flag %s", bad);
      break;
    }
    if (c == ':') {
      const char *bad = args[optind - 1];
      if (bad[0] == '-' && bad[1] != '-') rc = rh_cli_error(command, "-%c needs a value", optopt);
      else rc = rh_cli_error(command, "%s needs a value", bad);
      break;
    }
    if (c == RH_OPT_HELP) {
      fputs(usage, stdout);
      rc = 0;
      break;
    }
    if (c == RH_OPT_VERSION) {
      printf("rehearsal %s\n", REHEARSAL_VERSION);
      rc = 0;
      break;
    }
    if (c == RH_OPT_SET) {
      if (!opts) {
        rc = rh_cli_error(command, "--set: this command reads no scenario");
        break;
      }
      int r = add_set(opts, command, optarg);
      if (r) {
        rc = r;
        break;
      }
      continue;
    }
    int r = fn ? fn(c, optarg, arg) : 2;
    if (r == 2) {
      flag_name(all, longindex, c, flag, sizeof flag);
      rc = optarg ? rh_cli_error(command, "cannot use %s %s%s%s", flag, optarg, *why ? ": " : "",
                                 why)
                  : rh_cli_error(command, "cannot use %s here", flag);
      *why = 0;
      break;
    }
    if (r != 0) {
      rc = r;
      break;
    }
  }
  /* the permuted arguments back (the positional ones last), for the caller */
  memcpy(argv, args + 1, (size_t)argc * sizeof *argv);
  if (first) *first = optind > 0 ? optind - 1 : 0;
  free(all);
  free(args);
  free(shorts);
  return rc;
}

const char *rh_cli_timeline_env(void) {
  const char *v = getenv("HOROVOD_TIMELINE");
  if (!v || !*v || strcmp(v, "DYNAMIC") == 0 || strcmp(v, "DISABLED") == 0) return NULL;
  return v;
}

/* The HOROVOD_* and NCCL_* variables set that nothing reads: the runtime's settings leave them,
 * and `run` does not take HOROVOD_TIMELINE for its timeline. */
static char **ignored_variables(const rh_scenario *sc) {
  static const char *const timeline[] = {"HOROVOD_TIMELINE", NULL};
  return rh_settings_ignored(&sc->settings, rh_cli_timeline_env() ? timeline : NULL);
}

/* "environment: HOROVOD_FUSION_THRESHOLD", "scenario"...: where setting i came from; with the
 * variable that the scenario or the command line overrode: "scenario; HOROVOD_FUSION_THRESHOLD=
 * 33554432 set, overridden by the scenario". */
static const char *source_text(const rh_scenario *sc, int i, char *buf, size_t len) {
  const char *source = rh_setting_source_names[sc->settings.source[i]];
  const char *over = sc->settings.overridden[i], *value = over ? getenv(over) : NULL;
  if (over && value)
    snprintf(buf, len, "%s; %s=%.24s%s set, overridden by the %s", source, over, value,
             strlen(value) > 24 ? "..." : "", source);
  else if (sc->settings.source[i] == RH_SOURCE_ENVIRONMENT && sc->settings.variable[i])
    snprintf(buf, len, "%s: %s", source, sc->settings.variable[i]);
  else return source;
  return buf;
}

void rh_cli_print_settings(FILE *f, const rh_scenario *sc, const char *timeline,
                           bool timeline_env) {
  enum { WIDTH = 100, INDENT = 15 };
  int col = fprintf(f, "  settings    ");
  for (int i = 0; i < RH_SETTING_COUNT; i++) {
    const rh_setting_def *d = &rh__setting_defs[i];
    double v = sc->settings.value[i];
    char text[64], source[160], item[260];
    if (d->kind == RH_KIND_ENUM) snprintf(text, sizeof text, "%s", d->choices[(int)v]);
    else if (d->kind == RH_KIND_BYTES) snprintf(text, sizeof text, "%.6g MiB", v / 1048576);
    else snprintf(text, sizeof text, "%.6g s", v);
    int len = snprintf(item, sizeof item, "%s %s (%s)", d->name, text,
                       source_text(sc, i, source, sizeof source));
    /* a line holds what fits in WIDTH columns, the separating comma included */
    if (i > 0 && col + 2 + len + 1 > WIDTH) col = fprintf(f, ",\n%*s", INDENT, "") - 2;
    else if (i > 0) col += fprintf(f, ", ");
    else col += fprintf(f, " ");
    col += fprintf(f, "%s", item);
  }
  fprintf(f, "\n");
  if (timeline)
    fprintf(f, "  timeline     %s (%s)\n", timeline,
            timeline_env ? "environment: HOROVOD_TIMELINE" : "command line");
  char **ignored = ignored_variables(sc);
  if (ignored && ignored[0]) {
    /* said once, by whoever prints the settings: rank 0 of a job on real processes */
    char *note = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&note, &len);
    int n = 0;
    bool nccl = false;
    for (; m && ignored[n]; n++) {
      fprintf(m, "%s%s", n == 0 ? "" : ignored[n + 1] ? ", " : " and ", ignored[n]);
      nccl = nccl || strncmp(ignored[n], "NCCL_", 5) == 0;
    }
    if (m) {
      fprintf(m, " %s set but %s no counterpart here; %s ignored", n > 1 ? "are" : "is",
              n > 1 ? "have" : "has", n > 1 ? "they are" : "it is");
      /* on the GPU target NCCL reads its own variables all the same */
      if (nccl && strcmp(rh_cli_target, "nccl") == 0) fprintf(m, " (NCCL itself still reads them)");
    }
    if (m && fclose(m) == 0) {
      /* words wrapped at WIDTH columns, under the settings */
      col = fprintf(f, "  note        ");
      for (char *w = strtok(note, " "); w; w = strtok(NULL, " ")) {
        if (col + 1 + (int)strlen(w) > WIDTH && col > INDENT)
          col = fprintf(f, "\n%*s", INDENT - 1, "") - 1;
        col += fprintf(f, " %s", w);
      }
      fprintf(f, "\n");
    }
    free(note);
  }
  free(ignored);
}

/* A setting as JSON: its value, unit, source and, from the environment, the variable. */
static json_t *setting_json(json_t *value, const char *unit, const char *source,
                            const char *variable) {
  json_t *o = json_pack("{s:o, s:s, s:s}", "value", value, "unit", unit, "source", source);
  if (o && variable) json_object_set_new(o, "variable", json_string(variable));
  return o;
}

json_t *rh_cli_settings_json(const rh_scenario *sc, const char *timeline, bool timeline_env) {
  json_t *o = json_object();
  for (int i = 0; i < RH_SETTING_COUNT; i++) {
    const rh_setting_def *d = &rh__setting_defs[i];
    double v = sc->settings.value[i];
    json_t *val = d->kind == RH_KIND_ENUM ? json_string(d->choices[(int)v]) : json_real(v);
    int source = sc->settings.source[i];
    json_object_set_new(o, d->name,
                        setting_json(val, d->kind == RH_KIND_BYTES     ? "B"
                                          : d->kind == RH_KIND_SECONDS ? "s"
                                                                       : "",
                                     rh_setting_source_names[source],
                                     source == RH_SOURCE_ENVIRONMENT ? sc->settings.variable[i]
                                                                     : NULL));
  }
  if (timeline)
    json_object_set_new(o, "timeline",
                        setting_json(rh_json_text(timeline), "",
                                     rh_setting_source_names[timeline_env ? RH_SOURCE_ENVIRONMENT
                                                                          : RH_SOURCE_COMMAND_LINE],
                                     timeline_env ? "HOROVOD_TIMELINE" : NULL));
  return o;
}

json_t *rh_cli_ignored_json(const rh_scenario *sc) {
  json_t *a = json_array();
  char **ignored = ignored_variables(sc);
  for (int i = 0; ignored && ignored[i]; i++)
    json_array_append_new(a, json_pack("{s:s, s:s}", "variable", ignored[i], "reason",
                                       "no counterpart here"));
  free(ignored);
  for (int i = 0; i < RH_SETTING_COUNT; i++) {
    const char *over = sc->settings.overridden[i];
    if (!over || !getenv(over)) continue;
    char reason[160];
    snprintf(reason, sizeof reason, "overridden by the %s (collective.%s), which comes after the "
             "environment", rh_setting_source_names[sc->settings.source[i]], rh__setting_defs[i].name);
    json_t *o = json_pack("{s:s, s:s, s:s}", "variable", over, "value", getenv(over), "reason",
                         reason);
    json_array_append_new(a, o);
  }
  return a;
}

char **rh_cli_run_argv(const char *file, const rh_scenario_opts *opts, char *const *more, int nmore,
                       const char *dir, int *argc) {
  int n = 0;
  char **argv = calloc((size_t)(2 * (opts->nsets + nmore) + 8), sizeof *argv);
  if (!argv) return NULL;
  argv[n++] = "rehearsal";
  argv[n++] = "run";
  argv[n++] = (char *)file;
  for (int i = 0; i < opts->nsets + nmore; i++) {
    argv[n++] = "--set";
    argv[n++] = i < opts->nsets ? (char *)opts->sets[i] : more[i - opts->nsets];
  }
  argv[n++] = "--out";
  argv[n++] = (char *)dir;
  argv[n++] = "--no-what-if";
  *argc = n;
  return argv;
}

pid_t rh_cli_spawn_run(const char *program, const char *file, const rh_scenario_opts *opts,
                       char *const *more, int nmore, const char *dir) {
  int argc;
  char **argv = rh_cli_run_argv(file, opts, more, nmore, dir, &argc);
  if (!argv) return -1;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    /* The run ends with the process that started it, however that ends (SIGKILL included), so
     * that no point of a killed sweep runs on unseen; a parent gone before the signal was set
     * (the child then belongs to another) ends it now. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
    char out[4300], err[4300];
    snprintf(out, sizeof out, "%s/stdout.txt", dir);
    snprintf(err, sizeof err, "%s/stderr.txt", dir);
    int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fo < 0 || fe < 0) _exit(1);
    dup2(fo, 1);
    dup2(fe, 2);
    setenv("RH_PROGRESS", "0", 1);
    unsetenv("HOROVOD_TIMELINE"); /* the run asked for it, not its sweep points or baseline */
    execv(program ? program : "/proc/self/exe", argv);
    _exit(127);
  }
  free(argv);
  return pid;
}

bool rh_cli_fnv_file(const char *path, uint64_t *h) {
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  for (int c; (c = fgetc(f)) != EOF;) *h = (*h ^ (uint64_t)(unsigned char)c) * 1099511628211ull;
  fclose(f);
  return true;
}

void rh_cli_shell_word(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++)
    if (*s == '\'') fputs("'\\''", f);
    else fputc(*s, f);
  fputc('\'', f);
}
