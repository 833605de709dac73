/*
 * settings.c: every tunable of the runtime in one table, with its scenario key, environment
 * variable, default and a one-line description.  The environment overrides the defaults, and a
 * scenario's `collective:` section overrides both.  Besides its RH_* variables the environment
 * gives the Horovod and NCCL variables that mean a setting here (HOROVOD_FUSION_THRESHOLD,
 * NCCL_PROTO...), below the RH_* ones; the other HOROVOD_* and NCCL_* variables set are named as
 * ignored, for the settings block.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ; /* the ignored variables are found by name among all */

static const char *const algorithm_choices[] = {"auto", "ring", "hierarchical", "tree", "nvls",
                                                NULL};
static const char *const protocol_choices[] = {"auto", "ll", "ll128", "simple", NULL};
static const char *const bcast_choices[] = {"auto", "ring", "tree", NULL};
static const char *const compression_choices[] = {"none", "fp16", NULL};
static const char *const grain_choices[] = {"auto", "fine", "coarse", NULL};
static const char *const onoff_choices[] = {"off", "on", NULL};
static const char *const impl_choices[] = {"runtime", "native", NULL};

const rh_setting_def rh__setting_defs[RH_SETTING_COUNT] = {
    [RH_SETTING_ALGORITHM] = {"algorithm", "RH_ALGORITHM", RH_KIND_ENUM, RH_ALGO_AUTO,
                              algorithm_choices, false,
                              "allreduce algorithm; auto picks the cheapest by the cost model; "
                              "tree and nvls are NCCL's (network_model: nccl)", 0},
    [RH_SETTING_BCAST_ALGORITHM] = {"broadcast", "RH_BROADCAST", RH_KIND_ENUM, RH_BCAST_AUTO,
                                    bcast_choices, false, "broadcast algorithm; auto picks by cost", 0},
    [RH_SETTING_FUSION_THRESHOLD] = {"fusion_threshold", "RH_FUSION_THRESHOLD", RH_KIND_BYTES,
                                     128.0 * 1024 * 1024, NULL, true,
                                     "bytes of gradients fused into one allreduce; 0: no fusion", RH_SETTING_MAX_BYTES},
    [RH_SETTING_COMPRESSION] = {"compression", "RH_COMPRESSION", RH_KIND_ENUM, RH_WIRE_NONE,
                                compression_choices, false, "wire compression of float gradients", 0},
    [RH_SETTING_TIMEOUT] = {"timeout", "RH_TIMEOUT", RH_KIND_SECONDS, 600.0, NULL, false,
                            "seconds a collective waits for a peer before it fails", RH_SETTING_MAX_TIMEOUT},
    [RH_SETTING_GRAIN] = {"grain", "RH_GRAIN", RH_KIND_ENUM, RH_GRAIN_AUTO, grain_choices, false,
                          "simulation grain; auto and coarse simulate one step of a uniform ring, and charge "
                          "timing-only training steps that repeat exactly; fine simulates all", 0},
    [RH_SETTING_PIPELINE_CHUNK] = {"pipeline_chunk", "RH_PIPELINE_CHUNK", RH_KIND_BYTES,
                                   4.0 * 1024 * 1024, NULL, false,
                                   "bytes per chunk of a pipelined ring broadcast", RH_SETTING_MAX_BYTES},
    [RH_SETTING_CHECK_COLLECTIVES] = {"check_collectives", "RH_CHECK_COLLECTIVES", RH_KIND_ENUM, 1,
                                      onoff_choices, false,
                                      "ranks agree on each collective before it runs", 0},
    [RH_SETTING_COLLECTIVES] = {"collectives", "RH_COLLECTIVES", RH_KIND_ENUM, RH_IMPL_RUNTIME,
                                impl_choices, false,
                                "runtime: own algorithms (the simulator's order); native: the "
                                "backend's (MPI, NCCL), where it has them", 0},
    [RH_SETTING_PROTOCOL] = {"protocol", "RH_PROTOCOL", RH_KIND_ENUM, RH_PROTO_AUTO,
                             protocol_choices, false,
                             "NCCL's protocol under network_model: nccl (NCCL_PROTO); auto picks "
                             "the cheapest by NCCL's cost model", 0},
    [RH_SETTING_CYCLE_TIME] = {"cycle_time", "RH_CYCLE_TIME", RH_KIND_SECONDS, 0, NULL, true,
                               "Horovod's cycle (HOROVOD_CYCLE_TIME): on the simulator a collective "
                               "starts on the next tick, and gradients ready in one cycle are fused "
                               "together; 0: at once, buckets close when full", RH_SETTING_MAX_CYCLE},
};

int rh_settings_find(const char *name) {
  for (int i = 0; i < RH_SETTING_COUNT; i++)
    if (strcmp(rh__setting_defs[i].name, name) == 0) return i;
  return -1;
}

/* Accepts a plain number or one with a unit: B, KiB, MiB, GiB, KB, MB, GB for bytes; s, ms, us
 * for seconds. */
static rh_status parse_quantity(rh_setting_kind kind, const char *text, double *out) {
  errno = 0;
  char *end;
  double v = strtod(text, &end);
  if (end == text || errno || !isfinite(v) || v < 0) return RH_ERR_INVALID;
  while (*end == ' ') end++;
  double unit = 1;
  if (*end) {
    static const struct { const char *s; double f; rh_setting_kind k; } units[] = {
        {"B", 1, RH_KIND_BYTES},         {"KiB", 1024.0, RH_KIND_BYTES},
        {"MiB", 1048576.0, RH_KIND_BYTES}, {"GiB", 1073741824.0, RH_KIND_BYTES},
        {"KB", 1e3, RH_KIND_BYTES},       {"MB", 1e6, RH_KIND_BYTES},
        {"GB", 1e9, RH_KIND_BYTES},       {"s", 1, RH_KIND_SECONDS},
        {"ms", 1e-3, RH_KIND_SECONDS},    {"us", 1e-6, RH_KIND_SECONDS}};
    size_t i;
    for (i = 0; i < sizeof units / sizeof units[0]; i++)
      if (units[i].k == kind && strcmp(units[i].s, end) == 0) break;
    if (i == sizeof units / sizeof units[0]) return RH_ERR_INVALID;
    unit = units[i].f;
  }
  *out = v * unit;
  if (!isfinite(*out) || (kind == RH_KIND_BYTES && *out != floor(*out))) return RH_ERR_INVALID;
  return RH_OK;
}

rh_status rh_settings_parse(rh_setting_id id, const char *text, double *out) {
  if ((int)id < 0 || id >= RH_SETTING_COUNT || !text) return RH_ERR_INVALID;
  const rh_setting_def *d = &rh__setting_defs[id];
  if (d->kind == RH_KIND_ENUM) {
    for (int i = 0; d->choices[i]; i++)
      if (strcmp(d->choices[i], text) == 0) {
        *out = i;
        return RH_OK;
      }
    return RH_ERR_INVALID;
  }
  rh_status st = parse_quantity(d->kind, text, out);
  if (st == RH_OK && ((*out == 0 && !d->zero_ok) || *out > d->max)) return RH_ERR_INVALID;
  return st;
}

const char *const rh_setting_source_names[] = {"default", "environment", "scenario",
                                               "command line", NULL};

/* ---- Horovod's and NCCL's variables --------------------------------------------------------- */

/* What a Horovod or NCCL variable's value says here: a value for its setting; nothing (a switch
 * that is off); a value NCCL or Horovod knows that has no counterpart here (it is named as
 * ignored); or a value they would not take either (an error, as for an RH_* variable). */
typedef enum foreign_read { READ_VALUE, READ_NOTHING, READ_UNMAPPED, READ_BAD } foreign_read;

/* A whole number of bytes, in digits alone, as Horovod's strtol takes it (no units). */
static foreign_read read_fusion_threshold(const char *text, double *out) {
  if (!*text || strspn(text, "0123456789") != strlen(text)) return READ_BAD;
  errno = 0;
  double v = strtod(text, NULL);
  if (errno || v > RH_SETTING_MAX_BYTES) return READ_BAD;
  *out = v;
  return READ_VALUE;
}

/* Horovod's cycle is in milliseconds ("5", "3.5"); the setting is in seconds. */
static foreign_read read_cycle_time(const char *text, double *out) {
  if (!strchr("0123456789.", text[0]) || !text[0]) return READ_BAD; /* no sign, space, inf, nan */
  errno = 0;
  char *end;
  double ms = strtod(text, &end);
  if (end == text || *end || errno || !isfinite(ms)) return READ_BAD;
  *out = ms / 1000;
  return *out > RH_SETTING_MAX_CYCLE ? READ_BAD : READ_VALUE;
}

/* Horovod's switch: a whole number, on when above 0 (its SetBoolFromEnv). */
static foreign_read read_hierarchical(const char *text, double *out) {
  if (!*text || strspn(text, "0123456789") != strlen(text)) return READ_BAD;
  if (strspn(text, "0") == strlen(text)) return READ_NOTHING;
  *out = RH_ALGO_HIERARCHICAL;
  return READ_VALUE;
}

/* NCCL's names in NCCL_ALGO and NCCL_PROTO, matched without case as NCCL does; `to`: the setting's
 * choice, -1 where the setting has none. */
typedef struct nccl_name { const char *name; int to; } nccl_name;
static const nccl_name nccl_algos[] = {
    {"ring", RH_ALGO_RING}, {"tree", RH_ALGO_TREE}, {"nvls", RH_ALGO_NVLS}, {"nvlstree", -1},
    {"collnet", -1},        {"collnetdirect", -1},  {"collnetchain", -1},   {"pat", -1},
    {NULL, 0}};
static const nccl_name nccl_protos[] = {
    {"ll", RH_PROTO_LL}, {"ll128", RH_PROTO_LL128}, {"simple", RH_PROTO_SIMPLE}, {NULL, 0}};

/* NCCL's list: one name maps to its choice; a list ("Tree,Ring"), an exclusion ("^Tree") or a
 * name without a choice here is NCCL's but has no counterpart; a name NCCL does not know is bad.
 * NCCL 2.24's per-collective form ("allreduce:tree;broadcast:ring") has none either. */
static foreign_read read_nccl_list(const char *text, const nccl_name *names, double *out) {
  if (strpbrk(text, ":;")) return READ_UNMAPPED;
  bool exclude = text[0] == '^';
  const char *p = text + exclude;
  int count = 0, to = -1;
  while (*p) {
    size_t len = strcspn(p, ",");
    if (len > 0) {
      int i = 0;
      while (names[i].name && !(strlen(names[i].name) == len &&
                                strncasecmp(names[i].name, p, len) == 0))
        i++;
      if (!names[i].name) return READ_BAD;
      to = names[i].to;
      count++;
    }
    p += len + (p[len] == ',');
  }
  if (count == 0) return READ_BAD;
  if (exclude || count > 1 || to < 0) return READ_UNMAPPED;
  *out = to;
  return READ_VALUE;
}

static foreign_read read_nccl_algo(const char *text, double *out) {
  return read_nccl_list(text, nccl_algos, out);
}

static foreign_read read_nccl_proto(const char *text, double *out) {
  return read_nccl_list(text, nccl_protos, out);
}

/* The variables Horovod's and NCCL's users already set, each read as the setting it means.  A
 * setting's own RH_* variable wins over them, and an earlier row over a later one of the same
 * setting: HOROVOD_HIERARCHICAL_ALLREDUCE over NCCL_ALGO, as Horovod picks the allreduce and
 * NCCL's algorithm then applies within its steps. */
static const struct foreign_var {
  const char *env;
  rh_setting_id id;
  foreign_read (*read)(const char *text, double *out);
  const char *accepts; /* what a bad value's message says is taken */
} foreign_vars[] = {
    {"HOROVOD_FUSION_THRESHOLD", RH_SETTING_FUSION_THRESHOLD, read_fusion_threshold,
     "a whole number of bytes in digits alone, 0 to 1099511627776 (1 TiB), no unit"},
    {"HOROVOD_CYCLE_TIME", RH_SETTING_CYCLE_TIME, read_cycle_time,
     "a number of milliseconds, 0 to 3600000 (1 hour), no unit (5 or 3.5)"},
    {"HOROVOD_HIERARCHICAL_ALLREDUCE", RH_SETTING_ALGORITHM, read_hierarchical,
     "a whole number in digits: 0 off, above 0 on"},
    {"NCCL_ALGO", RH_SETTING_ALGORITHM, read_nccl_algo,
     "NCCL's names Ring, Tree, NVLS, NVLSTree, CollNet, CollNetDirect, CollNetChain, PAT in any "
     "case, one or a list with commas, ^ first to exclude"},
    {"NCCL_PROTO", RH_SETTING_PROTOCOL, read_nccl_proto,
     "NCCL's names LL, LL128, Simple in any case, one or a list with commas, ^ first to exclude"},
};
#define FOREIGN_COUNT (sizeof foreign_vars / sizeof foreign_vars[0])

/* What setting id's RH_* variable takes, for a bad value's message: its choices, or its unit and
 * range. */
static const char *accepted(rh_setting_id id, char *buf, size_t len) {
  const rh_setting_def *d = &rh__setting_defs[id];
  if (d->kind == RH_KIND_ENUM) {
    int n = snprintf(buf, len, "one of");
    for (int i = 0; d->choices[i] && n > 0 && (size_t)n < len; i++)
      n += snprintf(buf + n, len - (size_t)n, "%s %s", i ? "," : "", d->choices[i]);
    return buf;
  }
  bool bytes = d->kind == RH_KIND_BYTES;
  snprintf(buf, len, "%s %s, up to %.15g %s", d->zero_ok ? "a non-negative" : "a positive",
           bytes ? "whole size in bytes (units B, KiB, MiB, GiB, KB, MB, GB)"
                 : "duration in seconds (units s, ms, us)",
           d->max, bytes ? "B" : "s");
  return buf;
}

rh_status rh_settings_init(rh_settings *s, char *err, size_t errlen) {
  for (int i = 0; i < RH_SETTING_COUNT; i++) {
    s->value[i] = rh__setting_defs[i].default_value;
    s->source[i] = RH_SOURCE_DEFAULT;
    s->variable[i] = NULL;
    s->overridden[i] = NULL;
  }
  s->unused[0] = s->unused[1] = NULL;
  /* Horovod's and NCCL's first, the earlier row last so that it wins; the RH_* ones over them */
  for (size_t k = FOREIGN_COUNT; k-- > 0;) {
    const struct foreign_var *f = &foreign_vars[k];
    const char *v = getenv(f->env);
    if (!v || !*v) continue;
    double x;
    foreign_read r = f->read(v, &x);
    if (r == READ_BAD) {
      snprintf(err, errlen, "environment variable %s: cannot use \"%s\": expected %s", f->env, v,
               f->accepts);
      return RH_ERR_INVALID;
    }
    if (r != READ_VALUE) continue;
    s->value[f->id] = x;
    s->source[f->id] = RH_SOURCE_ENVIRONMENT;
    s->variable[f->id] = f->env;
  }
  for (int i = 0; i < RH_SETTING_COUNT; i++) {
    const char *v = getenv(rh__setting_defs[i].env);
    if (!v || !*v) continue;
    if (rh_settings_parse((rh_setting_id)i, v, &s->value[i]) != RH_OK) {
      char want[200];
      snprintf(err, errlen, "environment variable %s: cannot use \"%s\": expected %s",
               rh__setting_defs[i].env, v, accepted((rh_setting_id)i, want, sizeof want));
      return RH_ERR_INVALID;
    }
    s->source[i] = RH_SOURCE_ENVIRONMENT;
    s->variable[i] = rh__setting_defs[i].env;
  }
  return RH_OK;
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char **rh_settings_ignored(const rh_settings *s, const char *const *also_read) {
  size_t n = 0, bytes = 0;
  for (char **e = environ; e && *e; e++) {
    n++;
    bytes += strlen(*e) + 1;
  }
  char **names = malloc((n + 1) * sizeof *names + bytes);
  if (!names) return NULL;
  char *text = (char *)(names + n + 1);
  size_t count = 0;
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq || !eq[1]) continue; /* unset, or set empty: as an RH_* variable, not there */
    size_t len = (size_t)(eq - *e);
    if (strncmp(*e, "HOROVOD_", 8) != 0 && strncmp(*e, "NCCL_", 5) != 0) continue;
    memcpy(text, *e, len);
    text[len] = 0;
    bool read = false;
    for (size_t k = 0; k < FOREIGN_COUNT && !read; k++) {
      double x;
      read = strcmp(foreign_vars[k].env, text) == 0 &&
             foreign_vars[k].read(eq + 1, &x) != READ_UNMAPPED;
    }
    for (int k = 0; also_read && also_read[k] && !read; k++) read = strcmp(also_read[k], text) == 0;
    for (int k = 0; s && k < 2 && s->unused[k] && read; k++) read = strcmp(s->unused[k], text) != 0;
    if (read) continue;
    names[count++] = text;
    text += len + 1;
  }
  qsort(names, count, sizeof *names, compare_names);
  size_t kept = 0; /* each name once, should the environment hold one twice */
  for (size_t i = 0; i < count; i++)
    if (kept == 0 || strcmp(names[kept - 1], names[i]) != 0) names[kept++] = names[i];
  names[kept] = NULL;
  return names;
}

double rh_setting(const rh_ctx *ctx, rh_setting_id id) {
  if ((int)id < 0 || id >= RH_SETTING_COUNT) return 0;
  return ctx->settings->value[id];
}
