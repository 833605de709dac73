/*
 * output.h: how the commands write their files: whole or not at all (a temporary, then a rename),
 * several together, into a directory checked before the work whose results go there; and JSON
 * strings of text that may not be UTF-8.
 */
#ifndef REHEARSAL_OUTPUT_H
#define REHEARSAL_OUTPUT_H

#include <stddef.h>

/* Writes `text` to DIR/NAME through a temporary file and a rename, creating DIR if needed, so a
 * reader never sees half a file.  Returns 0, or prints the reason and returns 1. */
int rh_write_output(const char *dir, const char *name, const char *text);
/* The outputs of one command, together or not at all: each to a temporary file, then, when all
 * are whole, each renamed into place.  On failure none is renamed, and DIR is removed again when
 * this call made it.  Temporaries left by a process killed before its rename are removed. */
int rh_write_outputs(const char *dir, int n, const char *const *names, const char *const *texts);
/* The same with the bytes of each: sizes[i] bytes of texts[i] (binary), or strlen where sizes is
 * NULL or sizes[i] is (size_t)-1. */
int rh_write_outputs_sized(const char *dir, int n, const char *const *names,
                           const char *const *texts, const size_t *sizes);
/* Whether files can be written into DIR (made where missing): checked before the work whose
 * results go there, so that a long run does not end on an unwritable --out.  0, or prints the
 * reason and returns 1. */
int rh_output_dir_ok(const char *dir);
/* Removes DIR/samples-rank<R>.csv for every R >= ranks (0: all of them), an earlier run's record
 * that this one did not write over; no other file is touched. */
void rh_remove_stale_samples(const char *dir, int ranks);
/* Creates DIR and its missing parents (mkdir -p).  0, or prints the reason and returns 1. */
int rh_make_dirs(const char *dir);
/* Removes PATH and, when it is a folder, everything under it (rm -rf, with no shell: a name may
 * hold any byte).  Symbolic links are removed, never followed.  A PATH that does not exist is
 * not an error.  0, or prints the first reason and returns 1 (what could be removed is gone). */
int rh_remove_tree(const char *path);

/* A JSON string of text that may not be UTF-8 (a path, a command-line argument): its bytes that
 * are not UTF-8 written as \xNN, so that the text is never dropped from a JSON file (jansson
 * refuses invalid UTF-8).  NULL text gives JSON null. */
struct json_t *rh_json_text(const char *s);

#endif
