/* output.h: writing a report so that it is never half-written.
 *
 * out_write writes where a user pointed -o:
 *   - "-" is standard output;
 *   - a character device, FIFO or socket (/dev/null, /dev/full, a named pipe) is opened and
 *     written directly: it is never replaced by a regular file, and a write that fails (a full
 *     device: "No space left on device") is an error;
 *   - a symbolic link is written through: the file it points to (followed to the end of the
 *     chain, created when the link dangles) is replaced, and the link stays;
 *   - a regular file, or a new name, is written to a temporary file beside it, every write and
 *     the close checked (a full disk is an error), then renamed into place; an existing file
 *     keeps its permission bits, a new one gets 0644.
 * out_replace is for memreport's own files (batch reports and indexes, cache entries): always
 * the temporary file and the rename, so a link or a device at the path is replaced, never
 * followed.
 *
 * Ownership: the writers only read the data; out_default_path returns a string the caller
 * frees. */
#ifndef MR_OUTPUT_H
#define MR_OUTPUT_H

#include <stddef.h>

#include "base/error.h"

mr_status out_write(const char *path, const char *data, size_t len, mr_error *err);
mr_status out_replace(const char *path, const char *data, size_t len, mr_error *err);

/* Default report path for an input: "<input>.<ext>" beside it when that folder is writable,
 * else "<basename>.<ext>" in the current folder; standard input gives "memreport.<ext>". A
 * folder's trailing slashes are dropped ("runs/" gives "runs.<ext>"). Returns a malloc'd
 * string (NULL on OOM). */
char *out_default_path(const char *input, const char *ext);

#endif
