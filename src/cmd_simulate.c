/* cmd_simulate.c: `memreport simulate`. */
#include <stdio.h>

#include "commands.h"
#include "util.h"

int cmd_simulate(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "memreport: 'simulate' is not available in this version yet\n");
	return MR_EFAIL;
}
