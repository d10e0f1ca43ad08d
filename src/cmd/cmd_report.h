/* cmd_report.h: `memreport INPUT...`: one run, read, analysed and written as a report.
 *
 * Takes the arguments after the program name (argv[0] is the command's name) and returns the
 * exit status; prints its own errors and progress on standard error.
 *
 * Ownership: nothing outlives the call; argv is only read. */
#ifndef MR_CMD_REPORT_H
#define MR_CMD_REPORT_H

/* The exit status of --fail-on SEVERITY when a finding at or above it is present (the report
 * is written all the same); an unusable input (2) or any other failure (1) outranks it. */
enum { CMD_EXIT_FINDINGS = 3 };

int cmd_report(int argc, char **argv);

/* memreport --help: every command, and this one's options. */
extern const char cmd_report_usage[];

#endif
