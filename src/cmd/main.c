/* main.c: the command line: which command runs, and the one exit that checks standard output
 * was written. Each command prints its own errors (only src/cmd/ prints). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/version.h"
#include "cmd/cmd_batch.h"
#include "cmd/cmd_diff.h"
#include "cmd/cmd_merge.h"
#include "cmd/cmd_report.h"
#include "base/pool.h"
#include "cmd/cmd_simulate.h"

int main(int argc, char **argv)
{
	int rc;
	/* MEMREPORT_THREADS=N caps the threads of every command (1: one thread), for tests
	 * that compare outputs and for machines where a second thread does not pay. */
	const char *threads = getenv("MEMREPORT_THREADS");
	if (threads && *threads)
		mr_pool_set_max_threads((size_t)strtoul(threads, NULL, 10));
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(cmd_report_usage, stdout);
		rc = 0;
	} else if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		puts("memreport " MEMREPORT_VERSION);
		rc = 0;
	} else if (argc >= 2 && strcmp(argv[1], "batch") == 0) {
		rc = cmd_batch(argc - 1, argv + 1);
	} else if (argc >= 2 && strcmp(argv[1], "diff") == 0) {
		rc = cmd_diff(argc - 1, argv + 1);
	} else if (argc >= 2 && strcmp(argv[1], "merge") == 0) {
		rc = cmd_merge(argc - 1, argv + 1);
	} else if (argc >= 2 && strcmp(argv[1], "simulate") == 0) {
		rc = cmd_simulate(argc - 1, argv + 1);
	} else {
		rc = cmd_report(argc, argv);
	}
	/* A full disk shows up here at the latest: a report cut short is an error. */
	if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
		if (rc == 0 || rc == CMD_EXIT_FINDINGS) { /* an I/O failure outranks findings */
			fprintf(stderr, "memreport: error writing standard output: %s\n",
			        strerror(errno));
			rc = MR_EFAIL;
		}
	}
	return rc;
}
