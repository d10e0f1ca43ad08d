/* main.c: the command line: which command runs, and the one exit that checks standard output
 * was written. Each command prints its own errors (only src/cmd/ prints). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cmd/cmd_batch.h"
#include "cmd/cmd_diff.h"
#include "cmd/cmd_report.h"
#include "cmd/cmd_simulate.h"

#define MEMREPORT_VERSION "0.1.0"

static const char usage[] =
    "usage: memreport INPUT... [-o FILE] [--format html|json|md|text] [--device N]\n"
    "                 [--redact-paths] [--templates DIR] [-q]\n"
    "       memreport batch INPUT... -o DIR [--cache DIR] [-j N] [-q]\n"
    "       memreport diff BEFORE AFTER [-o FILE] [--format html|json]\n"
    "       memreport simulate SNAPSHOT --alloc-conf CONF [--limit SIZE] [--format json|text]\n"
    "       memreport --help | --version\n"
    "\n"
    "INPUT is a snapshot pickle (torch.cuda.memory._dump_snapshot), a text file with\n"
    "memory_summary() output or a CUDA out-of-memory error (a whole log is fine), a\n"
    "memory_stats() JSON dump, or - for standard input. Several inputs are one run.\n"
    "\n"
    "  -o FILE          write the report to FILE (- for standard output); default:\n"
    "                   <first input>.html (or .json/.md/.txt) beside the input\n"
    "  --format F       html (default), json (schema memreport/1), md, text\n"
    "  --device N       report only device N\n"
    "  --redact-paths   replace home folders, user names and host-specific prefixes\n"
    "                   in file paths, so the report can go into a public ticket\n"
    "  --templates DIR  read templates from DIR instead of the built-in ones\n"
    "  -q               no progress bar\n"
    "\n"
    "Exit status: 0 success; 2 unusable input (the message names the file and, for\n"
    "pickles, the byte offset and opcode); 1 any other failure.\n";

int main(int argc, char **argv)
{
	int rc;
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage, stdout);
		rc = 0;
	} else if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
		puts("memreport " MEMREPORT_VERSION);
		rc = 0;
	} else if (argc >= 2 && strcmp(argv[1], "batch") == 0) {
		rc = cmd_batch(argc - 1, argv + 1);
	} else if (argc >= 2 && strcmp(argv[1], "diff") == 0) {
		rc = cmd_diff(argc - 1, argv + 1);
	} else if (argc >= 2 && strcmp(argv[1], "simulate") == 0) {
		rc = cmd_simulate(argc - 1, argv + 1);
	} else {
		rc = cmd_report(argc, argv);
	}
	/* A full disk shows up here at the latest: a report cut short is an error. */
	if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
		if (rc == 0) {
			fprintf(stderr, "memreport: error writing standard output: %s\n",
			        strerror(errno));
			rc = MR_EFAIL;
		}
	}
	return rc;
}
