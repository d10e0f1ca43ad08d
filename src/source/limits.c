/* limits.c: the default limits, and the folders a walk skips. */
#include "source/limits.h"

#include <stdlib.h>

#include "base/units.h"

void sr_default_limits(sr_limits *lim)
{
	lim->max_member_bytes = 2 * MR_GIB;
	lim->max_total_bytes = 64 * MR_GIB;
	lim->max_ratio = 1000;
	lim->max_members = 100000;
	const char *inflight = getenv("MEMREPORT_ZIP_MEMORY");
	uint64_t v = 0;
	lim->max_inflight_bytes =
	    inflight && mr_parse_size(inflight, &v) == 0 && v > 0 ? v : MR_GIB;
	lim->max_depth = 32;
	lim->skip_count = 0;
}

void sr_skip_folder(sr_limits *lim, const char *path)
{
	struct stat st;
	if (lim->skip_count >= 2 || stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return;
	lim->skip_dev[lim->skip_count] = (uint64_t)st.st_dev;
	lim->skip_ino[lim->skip_count] = (uint64_t)st.st_ino;
	lim->skip_count++;
}

int sr_skipped(const sr_limits *lim, const struct stat *st)
{
	for (size_t i = 0; i < lim->skip_count; i++)
		if (lim->skip_dev[i] == (uint64_t)st->st_dev &&
		    lim->skip_ino[i] == (uint64_t)st->st_ino)
			return 1;
	return 0;
}
