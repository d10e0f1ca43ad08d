/* output.h: writing a report so that it is never half-written, and never over its own evidence.
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
 * The guard (out_guard) keeps the evidence safe: it holds the device and inode of every input
 * (links resolved), and out_guard_check refuses an output that is one of them.
 *
 * Ownership: the writers only read the data; out_default_path returns a string the caller
 * frees; an out_guard owns its list (out_guard_free). */
#ifndef MR_OUTPUT_H
#define MR_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

mr_status out_write(const char *path, const char *data, size_t len, mr_error *err);
mr_status out_replace(const char *path, const char *data, size_t len, mr_error *err);

/* Default report path for an input: "<input>.<ext>" beside it when that folder is writable,
 * else "<basename>.<ext>" in the current folder; standard input gives "memreport.<ext>". A
 * folder's trailing slashes are dropped ("runs/" gives "runs.<ext>"). Returns a malloc'd
 * string (NULL on OOM). */
char *out_default_path(const char *input, const char *ext);

typedef struct {
	struct out_input {
		uint64_t dev, ino;
		char *path; /* as given, for the message */
	} * inputs;
	size_t count, cap;
} out_guard;

/* Adds an input (a file or an archive; "-" and paths that do not exist are ignored). Fails
 * only when memory runs out. */
mr_status out_guard_add(out_guard *g, const char *path, mr_error *err);
/* MR_EINPUT, "<output> is the input <path>: ...", when the output path names one of the
 * inputs; MR_OK otherwise (also when the output does not exist yet, or is "-"). */
mr_status out_guard_check(const out_guard *g, const char *output, mr_error *err);
void out_guard_free(out_guard *g);
/* The guard of inputs[0..n) checked against one output, in one call. */
mr_status out_check_inputs(const char *output, const char *const *inputs, size_t n, mr_error *err);

#endif
