/* options.h: the options every report-writing command shares.
 *
 * Ownership: plain values; strings point into argv. */
#ifndef MR_OPTIONS_H
#define MR_OPTIONS_H

#include "base/error.h"

typedef struct {
	int device;            /* -1: every device */
	int redact_paths;      /* --redact-paths */
	int quiet;             /* -q: no progress */
	const char *templates; /* --templates DIR, or NULL */
} cmd_shared;

/* Reads one of the shared options (--device N, --redact-paths, -q, --templates DIR) at
 * argv[*i]. Returns 1 when it was one (and *i is past its value), 0 when it was not, -1 when
 * its value is bad (the message is in err). */
int cmd_parse_shared(cmd_shared *opt, int argc, char **argv, int *i, mr_error *err);

#endif
