/* cmd_report.c: `memreport INPUT... [-o FILE] [--format html|json|md|text] [--device N]
 * [--redact-paths] [--templates DIR] [-q]`: one run, read, analysed and written as a report. */
#include "cmd/cmd_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/output.h"
#include "cmd/options.h"
#include "load/load.h"
#include "render/render_html.h"
#include "render/render_json.h"
#include "render/render_md.h"
#include "render/render_text.h"
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

int cmd_report(int argc, char **argv)
{
	cmd_shared opt = {.device = -1};
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
		int used = cmd_parse_shared(&opt, argc, argv, &i, &oerr);
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

	mr_error err = {0};
	rd_options ropt = {opt.device, opt.redact_paths};
	progress_bar bar = {!opt.quiet && isatty(STDERR_FILENO), (size_t)-1, 0};
	ld_evidence ev;
	rp_report run;
	mr_status st = ld_load(&ev, inputs, n_inputs, show_progress, &bar, &err);
	if (!st && bar.shown)
		fprintf(stderr, "analysing %zu trace events...\n", ev.snap.event_store_count);
	if (!st)
		st = rp_build(&run, &ev, opt.device, &err);
	if (st) {
		fprintf(stderr, "memreport: %s\n", err.msg);
		rc = (int)st;
		goto done;
	}
	mr_buf buf = {0};
	if (bar.shown)
		fprintf(stderr, "writing the %s report...\n", format_ext(fmt));
	switch (fmt) {
	case FMT_JSON: st = rd_render_json(&run, &ropt, &buf, &err); break;
	case FMT_MD: st = rd_render_md(&run, &ropt, &buf, &err); break;
	case FMT_TEXT: st = rd_render_text(&run, &ropt, &buf, &err); break;
	default: st = rd_render_html(&run, &ropt, &buf, &err);
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
