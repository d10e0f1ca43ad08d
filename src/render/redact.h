/* redact.h: --redact-paths. Only renderers know about redaction: the stages below keep paths as
 * recorded, and the diagnosis marks the paths its prose quotes (ad_paths) instead of rewriting
 * them.
 *
 * A path is rewritten so that it names the code, not the machine: an installed package keeps
 * its path inside site-packages/dist-packages, the standard library its path inside
 * lib/pythonX.Y, a path under a home folder its part inside it with the user name replaced
 * wherever it appears; any other absolute path keeps only its file name; relative paths and
 * non-paths ("<frozen runpy>") are kept.
 *
 * Ownership: rd_path writes into the caller's buffer; the others append to a caller-owned
 * mr_buf. */
#ifndef MR_REDACT_H
#define MR_REDACT_H

#include <stddef.h>

#include "advise/advice.h"
#include "base/buf.h"
#include "render/options.h"

/* A file path as reports show it (unchanged without --redact-paths). Writes into buf (cut to
 * bufsz - 1 bytes), returns buf. */
const char *rd_path(const rd_options *opt, const char *path, char *buf, size_t bufsz);

/* Appends prose of the diagnosis with the paths it quotes (paths may be NULL) redacted: only
 * those, never anything that merely looks like a path (`batch_size //= 2` is code). */
void rd_prose(mr_buf *b, const rd_options *opt, const char *text, const ad_paths *paths);

#endif
