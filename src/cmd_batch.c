/* cmd_batch.c: `memreport batch`. */
#include <stdio.h>

#include "commands.h"
#include "util.h"

int cmd_batch(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "memreport: 'batch' is not available in this version yet\n");
	return MR_EFAIL;
}
