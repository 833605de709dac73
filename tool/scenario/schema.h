/*
 * schema.h: the scenario's schema table, inside the scenario room: what each key is (its type,
 * whether it is required, its range or choices, its unit's scale, where its value goes, one line
 * of documentation).  scenario.c walks a file against it; reference.c writes the reference page
 * from it (`rehearsal schema`), so that the page cannot drift from what is parsed.
 */
#ifndef REHEARSAL_SCHEMA_H
#define REHEARSAL_SCHEMA_H

#include "scenario.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
  T_MAP,     /* nested mapping: children */
  T_INT,     /* integer in [min, max] */
  T_NUM,     /* real number in [min, max] (min_open: > min) */
  T_COUNT,   /* integer in [min, max], stored as a double (sample and parameter counts) */
  T_STR,     /* string */
  T_ENUM,    /* one of choices; stored as index */
  T_SLOTS,   /* cluster.gpus_per_node: an integer, or a list of integers */
  T_LAYERS,  /* model.layers: list of {name, parameters} */
  T_SETTING, /* a runtime setting (rh_settings_parse) */
  T_NAMES,   /* a list of names from choices; stored as a bit mask (unsigned) */
  T_DECAY,   /* recipe.lr_decay_epochs: a list of epochs */
  T_ITEMS,   /* a list of mappings, each walked against kids (failures.events, ...) */
  T_PRESET,  /* a preset's name (a file of presets/<kind>/ walked against kids), or a mapping */
  T_BOOL,    /* true or false, stored as a bool */
  T_SWEEP,   /* sweep: KEY: [values] (the axes of `rehearsal sweep`) */
  T_DURATION, /* seconds in [min, max]: a number, or with a unit (90s, 45m, 720h, 30d) */
} ftype;

typedef struct field {
  const char *key;
  ftype type;
  bool required;
  double min, max;
  bool min_open;
  double scale;              /* stored value = parsed value * scale (units in key names) */
  size_t offset;             /* in rh_scenario */
  const struct field *kids;  /* T_MAP */
  const char *const *choices; /* T_ENUM */
  int setting;               /* T_SETTING */
  const char *doc;           /* one line for the reference (`rehearsal schema`) */
} field;

/* A T_PRESET field's kind (its `setting`): the folder of presets/ its names are looked up in. */
enum { PRESET_NODE = 0, PRESET_GPU = 1, PRESET_NETWORK = 2, PRESET_MODEL = 3, PRESET_FRAMEWORK = 4,
       PRESET_FAILURES = 5, PRESET_KINDS };
extern const char *const rh__preset_kinds[PRESET_KINDS];

/* The top-level keys, ending with a NULL key; each map's children under `kids`. */
const field *rh__scenario_schema(void);
/* The keys of the mapping that a preset field (`cluster.gpu`, `cluster.network`) also takes;
 * NULL for the others, and for `node:` and `preset:`, which fill the mapping they are in. */
const field *rh__scenario_preset_fields(const field *f);
/* The values a scenario starts from, before its file and overrides are walked. */
void rh__scenario_defaults(rh_scenario *sc);

/* model.c: after the walk, a timing model's layers: a family's built from its figures, the
 * precision's bytes added to each layer's memory traffic.  NULL, or what is wrong with *field
 * (a dotted key) the scenario's line is reported for; *other: the key it conflicts with, or NULL
 * (the family for a key of another family, hidden for heads that do not divide it...). */
const char *rh__scenario_model_finish(rh_scenario *sc, const char **field, const char **other);
/* model.c: how the layers are timed: on the roofline at the precision's peak (a shaped model on a
 * GPU with that peak, unless the scenario gives its own sustained tflops), or at the sustained
 * rate.  NULL, or an error as above. */
const char *rh__scenario_compute_finish(rh_scenario *sc, const char **field);

#endif
