/* cmd_simulate.h: `memreport simulate SNAPSHOT --alloc-conf CONF`: the trace replayed under other
 * settings.
 *
 * Takes the arguments after the program name (argv[0] is the command's name) and returns the
 * exit status; prints its own errors and progress on standard error.
 *
 * Ownership: nothing outlives the call; argv is only read. */
#ifndef MR_CMD_SIMULATE_H
#define MR_CMD_SIMULATE_H

int cmd_simulate(int argc, char **argv);

#endif
