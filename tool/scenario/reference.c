/*
 * reference.c: the scenario reference page (docs/scenario-reference.md), written from the schema
 * table the parser walks (schema.h) and the defaults it starts from: every key with its type,
 * default, accepted values and one line on what it does.  `rehearsal schema` prints it, and a
 * test holds the page in docs/ to that output, so the two cannot drift apart.
 */
#include "schema.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A number as a person writes it in a scenario: 65536, 0.001, 1e12. */
static void number(char *buf, size_t len, double v) {
  int e = (int)lround(log10(fabs(v) > 0 ? fabs(v) : 1));
  if (v >= 1e7 && v == pow(10, e)) snprintf(buf, len, "1e%d", e);
  else if (v == (double)(long long)v && fabs(v) < 1e15) snprintf(buf, len, "%lld", (long long)v);
  else snprintf(buf, len, "%.10g", v);
}

/* Bytes as the settings take them: 128MiB, 4MiB, 1TiB. */
static void bytes(char *buf, size_t len, double v) {
  static const char *const units[] = {"", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && v >= 1024 && fmod(v, 1024) == 0) v /= 1024, u++;
  number(buf, len, v);
  snprintf(buf + strlen(buf), len - strlen(buf), "%s", units[u]);
}

static void choices(char *buf, size_t len, const char *const *names) {
  buf[0] = 0;
  for (int i = 0; names[i]; i++)
    snprintf(buf + strlen(buf), len - strlen(buf), "%s`%s`", i ? ", " : "", names[i]);
}

static const char *type_of(const field *f) {
  switch (f->type) {
  case T_MAP: return "mapping";
  case T_INT: return "integer";
  case T_NUM: return "number";
  case T_COUNT: return "count";
  case T_STR: return "string";
  case T_ENUM: return "one of";
  case T_SLOTS: return "integer, or a list";
  case T_LAYERS: return "list of layers";
  case T_SETTING: return "setting";
  case T_NAMES: return "list of names";
  case T_DECAY: return "list of epochs";
  case T_ITEMS: return "list of mappings";
  case T_PRESET: return rh__scenario_preset_fields(f) ? "preset, or a mapping" : "preset";
  case T_BOOL: return "true or false";
  case T_SWEEP: return "mapping of lists";
  case T_DURATION: return "duration";
  }
  return "";
}

/* What the key accepts, into buf. */
static void accepted(char *buf, size_t len, const field *f) {
  char lo[32], hi[32];
  buf[0] = 0;
  switch (f->type) {
  case T_INT:
  case T_NUM:
  case T_COUNT:
  case T_SLOTS:
    number(lo, sizeof lo, f->min);
    number(hi, sizeof hi, f->max);
    snprintf(buf, len, "%s%s to %s", f->min_open ? "above " : "", lo, hi);
    return;
  case T_ENUM:
  case T_NAMES: choices(buf, len, f->choices); return;
  case T_BOOL: snprintf(buf, len, "`true`, `false`"); return;
  case T_DURATION:
    number(hi, sizeof hi, f->max);
    snprintf(buf, len, "0 to %s s; units `s`, `m`, `h`, `d` (`30d`, `720h`)", hi);
    return;
  case T_PRESET: {
    snprintf(buf, len, "a name in presets/%s/, or a path ending in .yaml", rh__preset_kinds[f->setting]);
    return;
  }
  case T_SETTING: {
    const rh_setting_def *d = &rh__setting_defs[f->setting];
    if (d->kind == RH_KIND_ENUM) choices(buf, len, d->choices);
    else if (d->kind == RH_KIND_BYTES) {
      bytes(hi, sizeof hi, d->max);
      snprintf(buf, len, "%s%s", d->zero_ok ? "0 to " : "above 0 to ", hi);
    } else {
      number(hi, sizeof hi, d->max);
      snprintf(buf, len, "%s%s s (or ms, us)", d->zero_ok ? "0 to " : "above 0 to ", hi);
    }
    return;
  }
  default: return;
  }
}

/* The default of a key, from the scenario the parser starts with (base: that scenario, or NULL
 * inside a list's items, whose defaults the item's own rules give). */
static void default_of(char *buf, size_t len, const field *f, const char *base) {
  buf[0] = 0;
  if (f->required) return;
  if (f->type == T_SETTING) {
    const rh_setting_def *d = &rh__setting_defs[f->setting];
    if (d->kind == RH_KIND_ENUM) snprintf(buf, len, "`%s`", d->choices[(int)d->default_value]);
    else if (d->kind == RH_KIND_BYTES) bytes(buf, len, d->default_value);
    else number(buf, len, d->default_value);
    return;
  }
  if (!base) return;
  switch (f->type) {
  case T_INT: {
    int v = *(const int *)(base + f->offset);
    if (v < f->min) snprintf(buf, len, "unset");
    else number(buf, len, v);
    return;
  }
  case T_NUM:
  case T_DURATION:
  case T_COUNT: {
    /* a start outside the accepted range is no value a file could give: the key is unset, and
     * its line says what that means */
    double v = *(const double *)(base + f->offset) / f->scale;
    if (v < f->min || (f->min_open && v <= f->min)) snprintf(buf, len, "unset");
    else number(buf, len, v);
    return;
  }
  case T_ENUM: {
    int i = *(const int *)(base + f->offset), n = 0;
    while (f->choices[n]) n++;
    if (i >= 0 && i < n) snprintf(buf, len, "`%s`", f->choices[i]);
    return; /* otherwise decided later (the line says how) */
  }
  case T_BOOL: snprintf(buf, len, "`%s`", *(const bool *)(base + f->offset) ? "true" : "false"); return;
  case T_NAMES: snprintf(buf, len, "none"); return;
  default: return;
  }
}

static void rows(FILE *out, const field *fields, const char *prefix, const char *base);

/* One key's row, then its children's (a mapping's keys, a list's items' keys). */
static void row(FILE *out, const field *f, const char *prefix, const char *base) {
  char key[256], def[128], acc[512];
  snprintf(key, sizeof key, "%s%s", prefix, f->key);
  default_of(def, sizeof def, f, base);
  accepted(acc, sizeof acc, f);
  fprintf(out, "| `%s` | %s%s | %s | %s | %s |\n", key, type_of(f), f->required ? ", required" : "",
          def, acc, f->doc ? f->doc : "");
  char sub[280];
  const field *kids = f->type == T_PRESET ? rh__scenario_preset_fields(f) : f->kids;
  if (!kids || f->type == T_SETTING) return;
  snprintf(sub, sizeof sub, f->type == T_ITEMS ? "%s[]." : "%s.", key);
  rows(out, kids, sub, f->type == T_ITEMS ? NULL : base);
}

static void rows(FILE *out, const field *fields, const char *prefix, const char *base) {
  for (const field *f = fields; f->key; f++) row(out, f, prefix, base);
}

static void table_head(FILE *out) {
  fprintf(out, "| key | type | default | accepted | what it is |\n|---|---|---|---|---|\n");
}

int rh_scenario_reference(FILE *out) {
  rh_scenario sc = {0};
  rh__scenario_defaults(&sc);
  const field *top = rh__scenario_schema();
  fprintf(out,
          "# Scenario reference\n\n"
          "<!-- Written by `rehearsal schema` from the parser's own table "
          "(tool/scenario/scenario.c); `ctest -R scenario_reference` holds this page to it. "
          "Edit the table, then run `./build/tool/rehearsal schema > docs/scenario-reference.md`. "
          "-->\n\n"
          "Every key a scenario file may hold. Units are in the key names (`_GBps`, `_us`, `_s`); "
          "a key left out takes its default. Keys marked (nccl) count under `network_model: "
          "nccl` alone. A wrong key, type or value is an error naming the file, line and key "
          "(exit 2). [Scenarios](scenarios.md) explains them with examples.\n\n"
          "Sections: [the top level](#the-top-level)");
  for (const field *f = top; f->key; f++)
    if (f->kids) fprintf(out, ", [`%s`](#%s)", f->key, f->key);
  fprintf(out, ".\n\n## The top level\n\n");
  table_head(out);
  for (const field *f = top; f->key; f++)
    if (!f->kids) row(out, f, "", (const char *)&sc);
  for (const field *f = top; f->key; f++) {
    if (!f->kids) continue;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.", f->key);
    fprintf(out, "\n## %s\n\n%s%s.\n\n", f->key, f->doc, f->required ? " (required)" : "");
    table_head(out);
    rows(out, f->kids, prefix, (const char *)&sc);
  }
  return ferror(out) ? 1 : 0;
}
