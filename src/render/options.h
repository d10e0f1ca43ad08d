/* options.h: what every renderer is asked for, besides the report itself.
 *
 * Ownership: a plain value. */
#ifndef MR_RENDER_OPTIONS_H
#define MR_RENDER_OPTIONS_H

typedef struct {
	int device;       /* -1: every device; else only that one */
	int redact_paths; /* --redact-paths (render/redact.h) */
} rd_options;

#endif
