/* walk.h: the regular files under a folder, in name order, with an explicit stack (the depth is
 * bounded and never reaches the C stack). Links to files are followed, links to folders are
 * not; hidden files and folders (".name") are passed over, and so are the folders the limits
 * skip.
 *
 * Ownership: the paths a visitor is given live until it returns. Nothing here prints. */
#ifndef MR_WALK_H
#define MR_WALK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/error.h"
#include "source/limits.h"

typedef struct {
	/* A regular file: its path on disk and its path inside the root ('/'-separated). */
	mr_status (*file)(void *ctx, const char *path, const char *rel, mr_error *err);
	/* A folder that cannot be opened (rel "" for the root), and why. */
	mr_status (*unreadable)(void *ctx, const char *rel, const char *why, mr_error *err);
	void *ctx;
} wk_visitor;

/* Visits every file under root. Fails only when a visitor fails or memory runs out. */
mr_status wk_walk(const char *root, const sr_limits *lim, const wk_visitor *v, mr_error *err);

/* Reads up to n bytes from the start of a plain file. Returns the count, or -1 with errno
 * set. */
ssize_t wk_read_head(const char *path, uint8_t *buf, size_t n);

#endif
