/* options.h: the one option parser of every command (getopt_long): long options take
 * "--name value" or "--name=value" (or any unique abbreviation), short ones "-o FILE" or
 * "-oFILE"; options and arguments come in any order, and "--" ends the options.
 *
 * Every spelling the commands ever took keeps working: -o/--output, --format, --device,
 * --redact-paths, -q/--quiet, --templates (the report commands); --cache, -j/--jobs (batch);
 * --alloc-conf, --limit (simulate); --budget, --fail-on (the report); -h/--help.
 *
 * Ownership: cmd_options points into argv (which must outlive it) and owns its list of
 * arguments; cmd_options_free releases it. Nothing here prints: the command prints the first
 * mistake in its own words. */
#ifndef MR_OPTIONS_H
#define MR_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef enum { CMD_REPORT, CMD_BATCH, CMD_DIFF, CMD_SIMULATE } cmd_id;

typedef enum { CMD_HTML, CMD_JSON, CMD_MD, CMD_TEXT } cmd_format;

typedef struct {
	const char **args; /* the arguments that are not options, in order */
	size_t arg_count;
	int help;               /* -h, --help */
	const char *output;     /* -o, --output: a file (a folder for batch); NULL when not given */
	cmd_format format;      /* --format; the command's default when not given */
	int device;             /* --device N; -1 when not given */
	int redact_paths;       /* --redact-paths */
	int quiet;              /* -q, --quiet */
	const char *templates;  /* --templates DIR */
	const char *cache;      /* batch: --cache DIR */
	long jobs;              /* batch: -j N (1 to 256); 0 when not given */
	const char *alloc_conf; /* simulate: --alloc-conf CONF */
	uint64_t limit;         /* simulate: --limit SIZE; 0 when not given */
	int fail_on; /* report: --fail-on, the least ad_severity that exits 3; -1 when not given */
	uint64_t budget; /* report: --budget SIZE; 0 when not given */
} cmd_options;

/* Parses argv[1..argc) (argv[0] is the program's or the command's name) for command `which`.
 * An option the command does not take is unknown. On a mistake, returns MR_EINPUT with the
 * first one in err ("unknown option '--x'", "-o needs a file name", ...) after reading the
 * rest, so that the arguments are all known (simulate names its snapshot in the message). */
mr_status cmd_parse(cmd_id which, int argc, char **argv, cmd_options *out, mr_error *err);
void cmd_options_free(cmd_options *o);

#endif
