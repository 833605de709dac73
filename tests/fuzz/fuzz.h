/*
 * fuzz.h: what the libFuzzer targets share.  Every reader under test takes a path, so each input
 * is written to a file of the target's own directory first (one per process, removed at exit).
 */
#ifndef REHEARSAL_FUZZ_H
#define REHEARSAL_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Writes size bytes to the file `name` of this process's directory; returns its path (static
 * storage, one per name slot 0..3), or NULL when it cannot be written. */
const char *fuzz_file(int slot, const char *name, const uint8_t *data, size_t size);

#endif
