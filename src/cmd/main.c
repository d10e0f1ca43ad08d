/* main.c: the command line. The only place that prints errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/output.h"
#include "cmd/commands.h"
#include "render/templates.h"
#include "report/report.h"

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

typedef enum { FMT_HTML, FMT_JSON, FMT_MD, FMT_TEXT } out_format;

static const char *format_ext(out_format f)
{
	switch (f) {
	case FMT_JSON: return "json";
	case FMT_MD: return "md";
	case FMT_TEXT: return "txt";
	default: return "html";
	}
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "memreport: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see memreport --help)\n");
	return MR_EINPUT;
}

static int report_main(int argc, char **argv)
{
	rp_options opt = {.device = -1};
	out_format fmt = FMT_HTML;
	const char *out_path = NULL;
	const char **inputs = calloc((size_t)argc, sizeof *inputs);
	size_t n_inputs = 0;
	int rc = 0;
	if (!inputs) {
		fprintf(stderr, "memreport: out of memory\n");
		return MR_EFAIL;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		mr_error oerr = {0};
		int used = rp_parse_option(&opt, argc, argv, &i, &oerr);
		if (used < 0) {
			rc = usage_error("%s", oerr.msg);
			goto done;
		}
		if (used)
			continue;
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
			if (!val) {
				rc = usage_error("%s needs a file name", a);
				goto done;
			}
			out_path = val;
			i++;
		} else if (strcmp(a, "--format") == 0 || strncmp(a, "--format=", 9) == 0) {
			const char *f = a[8] == '=' ? a + 9 : val;
			if (a[8] != '=')
				i++;
			if (!f) {
				rc = usage_error("%s needs html, json, md or text", a);
				goto done;
			}
			if (strcmp(f, "html") == 0)
				fmt = FMT_HTML;
			else if (strcmp(f, "json") == 0)
				fmt = FMT_JSON;
			else if (strcmp(f, "md") == 0 || strcmp(f, "markdown") == 0)
				fmt = FMT_MD;
			else if (strcmp(f, "text") == 0 || strcmp(f, "txt") == 0)
				fmt = FMT_TEXT;
			else {
				rc = usage_error("unknown format '%s' (html, json, md, text)", f);
				goto done;
			}
		} else if (a[0] == '-' && a[1] != '\0') {
			rc = usage_error("unknown option '%s'", a);
			goto done;
		} else {
			inputs[n_inputs++] = a;
		}
	}
	if (n_inputs == 0) {
		rc = usage_error("%s", "no input given");
		goto done;
	}

	rp_run run;
	mr_error err = {0};
	mr_status st = rp_load(&run, inputs, n_inputs, &opt, &err);
	if (st) {
		fprintf(stderr, "memreport: %s\n", err.msg);
		rc = (int)st;
		goto done;
	}
	mr_buf buf = {0};
	if (run.show_progress)
		fprintf(stderr, "writing the %s report...\n", format_ext(fmt));
	switch (fmt) {
	case FMT_JSON: st = rp_render_json(&run, &opt, &buf, &err); break;
	case FMT_MD: st = rp_render_md(&run, &opt, &buf, &err); break;
	case FMT_TEXT: st = rp_render_text(&run, &opt, &buf, &err); break;
	default: st = rp_render_html(&run, &opt, &buf, &err);
	}
	char *default_path = NULL;
	if (!st && !out_path) {
		default_path = out_default_path(inputs[0], format_ext(fmt));
		if (!default_path)
			st = mr_oom(&err);
		out_path = default_path;
	}
	if (!st)
		st = out_write(out_path, buf.data ? buf.data : "", buf.len, &err);
	if (st) {
		fprintf(stderr, "memreport: %s%s%s\n", out_path ? out_path : "",
		        out_path ? ": " : "", err.msg);
		rc = (int)st;
	} else if (default_path && !opt.quiet) {
		fprintf(stderr, "memreport: wrote %s\n", default_path);
	}
	free(default_path);
	mr_buf_free(&buf);
	rp_free(&run);
done:
	free(inputs);
	return rc;
}

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
		rc = report_main(argc, argv);
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
