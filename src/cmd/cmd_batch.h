/* cmd_batch.h: `memreport batch INPUT... -o DIR`: many runs, a report each and an index.
 *
 * Takes the arguments after the program name (argv[0] is the command's name) and returns the
 * exit status; prints its own errors and progress on standard error.
 *
 * Ownership: nothing outlives the call; argv is only read. */
#ifndef MR_CMD_BATCH_H
#define MR_CMD_BATCH_H

int cmd_batch(int argc, char **argv);

#endif
