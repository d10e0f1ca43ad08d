/* cmd_diff.h: `memreport diff BEFORE AFTER`: what changed between two runs.
 *
 * Takes the arguments after the program name (argv[0] is the command's name) and returns the
 * exit status; prints its own errors and progress on standard error.
 *
 * Ownership: nothing outlives the call; argv is only read. */
#ifndef MR_CMD_DIFF_H
#define MR_CMD_DIFF_H

int cmd_diff(int argc, char **argv);

#endif
