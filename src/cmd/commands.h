/* commands.h: the subcommands of the command line. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the exit status; each prints its own errors. */
#ifndef MR_COMMANDS_H
#define MR_COMMANDS_H

int cmd_batch(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_simulate(int argc, char **argv);

#endif
