/*
 * settings.c: every tunable of the runtime in one table, with its scenario key, environment
 * variable, default and a one-line description.  The environment overrides the defaults, and a
 * scenario's `collective:` section overrides both.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

rh_status rh_settings_init(rh_settings *s, char *err, size_t errlen) {
  for (int i = 0; i < RH_SETTING_COUNT; i++) {
    s->value[i] = rh__setting_defs[i].default_value;
    s->source[i] = RH_SOURCE_DEFAULT;
  }
  for (int i = 0; i < RH_SETTING_COUNT; i++) {
    const char *v = getenv(rh__setting_defs[i].env);
    if (!v || !*v) continue;
    if (rh_settings_parse((rh_setting_id)i, v, &s->value[i]) != RH_OK) {
      snprintf(err, errlen, "environment variable %s: cannot use \"%s\"", rh__setting_defs[i].env,
               v);
      return RH_ERR_INVALID;
    }
    s->source[i] = RH_SOURCE_ENVIRONMENT;
  }
  return RH_OK;
}

double rh_setting(const rh_ctx *ctx, rh_setting_id id) {
  if ((int)id < 0 || id >= RH_SETTING_COUNT) return 0;
  return ctx->settings->value[id];
}
