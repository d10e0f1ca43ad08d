/* cmd_report.c: `memreport INPUT... [-o FILE] [--format html|json|md|text] [--device N]
 * [--budget SIZE] [--redact-paths] [--templates DIR] [-q]`: one run, read, analysed and written as
 * a report. */
#include "cmd/cmd_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/output.h"
#include "cmd/options.h"
#include "cmd/run_input.h"
#include "cmd/say.h"
#include "load/load.h"
#include "render/render_html.h"
#include "render/render_json.h"
#include "render/render_md.h"
#include "render/render_text.h"
#include "render/templates.h"
#include "report/report.h"

/* The decoding progress of a large snapshot (over 64 MiB) on a terminal. */
typedef struct {
	int enabled; /* standard error is a terminal and -q was not given */
	size_t last_pct;
	int shown; /* the bar was drawn: the later stages say what they do too */
} progress_bar;

static void show_progress(void *ctx, size_t done, size_t total)
{
	progress_bar *p = ctx;
	if (!p->enabled || total <= (64u << 20))
		return;
	p->shown = 1;
	size_t pct = (size_t)((double)done * 100.0 / (double)total);
	if (pct == p->last_pct)
		return;
	p->last_pct = pct;
	int bar = (int)(pct / 4);
	fprintf(stderr, "\rdecoding [%-25.*s] %3zu%% of %.1f MiB", bar, "#########################",
	        pct, (double)total / (1024.0 * 1024.0));
	if (done >= total)
		fputc('\n', stderr);
}

const char cmd_report_usage[] =
    "usage: memreport INPUT... [-o FILE] [--format html|json|md|text] [--device N]\n"
    "                 [--budget SIZE] [--redact-paths] [--templates DIR] [-q]\n"
    "                 [--fail-on warning|critical]\n"
    "       memreport batch INPUT... -o DIR [--cache DIR] [-j N] [--device N]\n"
    "                 [--redact-paths] [-q]\n"
    "       memreport diff BEFORE AFTER [-o FILE] [--format html|json] [--device N]\n"
    "                 [--redact-paths] [-q]\n"
    "       memreport simulate SNAPSHOT --alloc-conf CONF [--limit SIZE] [--device N]\n"
    "                 [--format json|text] [-o FILE]\n"
    "       memreport --help | --version\n"
    "\n"
    "INPUT is a snapshot pickle (torch.cuda.memory._dump_snapshot), a text file with\n"
    "memory_summary() output or a CUDA out-of-memory error (a whole log is fine), a\n"
    "memory_stats() JSON dump, any of them gzip or xz compressed, or - for standard\n"
    "input. Several inputs are one run; so is a run folder or a zip of one run.\n"
    "\n"
    "Options take --name=VALUE as well as --name VALUE; `memreport COMMAND --help`\n"
    "says more about batch, diff and simulate.\n"
    "\n"
    "  -o FILE          write the report to FILE (- for standard output); default:\n"
    "                   <first input>.html (or .json/.md/.txt) beside the input\n"
    "  --format F       html (default), json (schema memreport/1), md, text; without\n"
    "                   it, the extension of -o FILE chooses\n"
    "  --device N       report only device N\n"
    "  --budget SIZE    plan how large a microbatch fits SIZE (24GiB, 80GB, bytes);\n"
    "                   default: the cap the OOM message shows, if any\n"
    "  --redact-paths   replace home folders, user names and host-specific prefixes\n"
    "                   in file paths, so the report can go into a public ticket\n"
    "  --templates DIR  read templates from DIR instead of the built-in ones\n"
    "  -q               no progress bar\n"
    "  --fail-on S      exit 3 when a finding is at least S (warning or critical)\n"
    "\n"
    "Exit status: 0 success; 2 unusable input (the message names the file and, for\n"
    "pickles, the byte offset and opcode), bad usage, or an output that would\n"
    "overwrite an input; 1 any other failure; 3 --fail-on found a finding (the\n"
    "report is written; 2 and 1 outrank it).\n";

static const char *format_ext(cmd_format f)
{
	switch (f) {
	case CMD_JSON: return "json";
	case CMD_MD: return "md";
	case CMD_TEXT: return "txt";
	default: return "html";
	}
}

static int usage_error(const char *msg)
{
	return cmd_usage_error("memreport", msg, "(see memreport --help)\n");
}

/* --fail-on: CMD_EXIT_FINDINGS, after saying which, when a finding is at least that severe;
 * 0 otherwise. */
static int fail_on(const cmd_options *opt, const ad_advice *a)
{
	if (opt->fail_on < 0)
		return 0;
	size_t count = 0;
	char ids[256] = "";
	for (size_t i = 0; i < a->finding_count; i++) {
		if ((int)a->findings[i].severity < opt->fail_on)
			continue;
		size_t used = strlen(ids);
		if (count < 8)
			snprintf(ids + used, sizeof ids - used, "%s%s", count ? ", " : "",
			         a->findings[i].id);
		count++;
	}
	if (!count)
		return 0;
	if (!opt->quiet)
		cmd_say("--fail-on %s: %zu finding%s at or above it (%s%s)",
		        ad_severity_name((ad_severity)opt->fail_on), count, count == 1 ? "" : "s",
		        ids, count > 8 ? ", ..." : "");
	return CMD_EXIT_FINDINGS;
}

/* Loads the inputs, runs the pipeline and writes the report. Returns the exit status. */
static int write_report(const cmd_options *opt)
{
	mr_error err = {0};
	rd_options ropt = {opt->device, opt->redact_paths};
	progress_bar bar = {!opt->quiet && isatty(STDERR_FILENO), (size_t)-1, 0};
	const char *out_path = opt->output;
	char *default_path = NULL;
	mr_buf buf = {0};
	ld_evidence ev;
	rp_report run = {0};
	cmd_run inputs = {0};
	mr_status st = MR_OK;
	int rc = 0;
	if (!out_path) {
		default_path = out_default_path(opt->args[0], format_ext(opt->format));
		if (!default_path) {
			st = mr_oom(&err);
			cmd_say("%s", err.msg);
			goto done;
		}
		out_path = default_path;
	}
	/* Before anything is decoded: the report must never land on its own evidence. */
	if ((st = cmd_run_find(&inputs, opt->args, opt->arg_count, &err)) ||
	    (st = cmd_run_guard(&inputs, out_path, &err))) {
		cmd_say("%s", err.msg);
		goto done;
	}
	st = cmd_run_load(&inputs, show_progress, &bar, &ev, &err);
	if (!st && bar.shown)
		fprintf(stderr, "analysing %zu trace events...\n", ev.snap.event_store_count);
	if (!st && !(st = rp_build(&run, &ev, &(rp_params){opt->device, opt->budget}, &err)))
		st = cmd_run_check_device(&run, opt->device, &err);
	if (st) {
		cmd_say("%s", err.msg);
		goto done;
	}
	if (bar.shown)
		fprintf(stderr, "writing the %s report...\n", format_ext(opt->format));
	switch (opt->format) {
	case CMD_JSON: st = rd_render_json(&run, &ropt, &buf, &err); break;
	case CMD_MD: st = rd_render_md(&run, &ropt, &buf, &err); break;
	case CMD_TEXT: st = rd_render_text(&run, &ropt, &buf, &err); break;
	default: st = rd_render_html(&run, &ropt, &buf, &err);
	}
	if (!st)
		st = out_write(out_path, buf.data ? buf.data : "", buf.len, &err);
	if (st)
		cmd_say("%s: %s", out_path, err.msg);
	else if (default_path && !opt->quiet)
		cmd_say("wrote %s", default_path);
	if (!st)
		rc = fail_on(opt, &run.advice);
done:
	cmd_run_free(&inputs);
	free(default_path);
	mr_buf_free(&buf);
	rp_free(&run);
	return st ? (int)st : rc;
}

int cmd_report(int argc, char **argv)
{
	cmd_options opt;
	mr_error err = {0};
	int rc = 0;
	if (cmd_parse(CMD_REPORT, argc, argv, &opt, &err)) {
		if (err.status == MR_EINPUT) {
			rc = usage_error(err.msg);
		} else {
			cmd_say("%s", err.msg);
			rc = MR_EFAIL;
		}
	} else if (opt.help) {
		fputs(cmd_report_usage, stdout);
	} else if (opt.arg_count == 0) {
		rc = usage_error("no input given");
	} else {
		if (opt.templates)
			tp_set_dir(opt.templates);
		rc = write_report(&opt);
	}
	cmd_options_free(&opt);
	return rc;
}
