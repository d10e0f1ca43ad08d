/* options.c: the shared options of the commands. */
#include "cmd/options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "render/templates.h"

int cmd_parse_shared(cmd_shared *opt, int argc, char **argv, int *i, mr_error *err)
{
	const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
	if (strcmp(a, "--redact-paths") == 0) {
		opt->redact_paths = 1;
	} else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
		opt->quiet = 1;
	} else if (strcmp(a, "--device") == 0) {
		char *end = NULL;
		errno = 0;
		long v = val ? strtol(val, &end, 10) : -1;
		if (!val || errno || end == val || *end || v < 0 || v > 1024) {
			mr_fail(err, MR_EINPUT, "--device needs a device number, got '%s'",
			        val ? val : "");
			return -1;
		}
		opt->device = (int)v;
		(*i)++;
	} else if (strcmp(a, "--templates") == 0) {
		if (!val) {
			mr_fail(err, MR_EINPUT, "--templates needs a folder");
			return -1;
		}
		opt->templates = val;
		tp_set_dir(val);
		(*i)++;
	} else {
		return 0;
	}
	return 1;
}
