/* output.h: writing a report so that it is never half-written.
 *
 * out_write writes to a temporary file beside the destination, checks every write and the
 * close (a full disk is an error), then renames it into place. "-" is standard output.
 *
 * Ownership: out_write only reads the data; out_default_path returns a string the caller
 * frees. */
#ifndef MR_OUTPUT_H
#define MR_OUTPUT_H

#include <stddef.h>

#include "base/error.h"

mr_status out_write(const char *path, const char *data, size_t len, mr_error *err);

/* Default report path for an input: "<input>.<ext>" beside it when that folder is writable,
 * else "<basename>.<ext>" in the current folder; standard input gives "memreport.<ext>".
 * Returns a malloc'd string (NULL on OOM). */
char *out_default_path(const char *input, const char *ext);

#endif
