/* cmd_diff.c: `memreport diff`. */
#include <stdio.h>

#include "commands.h"
#include "util.h"

int cmd_diff(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "memreport: 'diff' is not available in this version yet\n");
	return MR_EFAIL;
}
