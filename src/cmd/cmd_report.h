/* cmd_report.h: `memreport INPUT...`: one run, read, analysed and written as a report.
 *
 * Takes the arguments after the program name (argv[0] is the command's name) and returns the
 * exit status; prints its own errors and progress on standard error.
 *
 * Ownership: nothing outlives the call; argv is only read. */
#ifndef MR_CMD_REPORT_H
#define MR_CMD_REPORT_H

int cmd_report(int argc, char **argv);

/* memreport --help: every command, and this one's options. */
extern const char cmd_report_usage[];

#endif
