/* cmd_diff.c: `memreport diff BEFORE AFTER [-o FILE] [--format html|json|md|text] [--device N]
 * [--redact-paths] [-q]`.
 *
 * BEFORE and AFTER are each one run: a snapshot (or any single input the report command takes),
 * or a run folder or zip archive holding exactly one run. */
#include "cmd/cmd_diff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/output.h"
#include "cmd/options.h"
#include "decode/sniff.h"
#include "load/discover.h"
#include "render/diff_text.h"
#include "render/render_diff.h"
#include "render/templates.h"
#include "report/diff.h"
#include "report/report.h"

static const char diff_usage[] =
    "usage: memreport diff BEFORE AFTER [-o FILE] [--format html|json|md|text] [--device N]\n"
    "                      [--redact-paths] [-q]\n"
    "BEFORE, AFTER: a snapshot, or a run folder or zip archive holding one run.\n";

static int diff_usage_error(const char *msg)
{
	fprintf(stderr, "memreport diff: %s\n%s", msg, diff_usage);
	return MR_EINPUT;
}

/* Folders and archives go through discovery; anything else is a plain input. */
static int needs_discovery(const char *path)
{
	if (strcmp(path, "-") == 0)
		return 0;
	struct stat st;
	if (stat(path, &st) != 0)
		return 0; /* ld_load reports the error */
	if (S_ISDIR(st.st_mode))
		return 1;
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	uint8_t head[4] = {0};
	size_t n = fread(head, 1, sizeof head, f);
	fclose(f);
	return dc_sniff(head, n) == DC_ZIP;
}

/* One side's evidence: a plain input, or the only run of a folder or an archive. */
static mr_status load_evidence(const char *path, ld_evidence *ev, mr_error *err)
{
	if (!needs_discovery(path)) {
		const char *paths[] = {path};
		return ld_load(ev, paths, 1, NULL, NULL, err);
	}
	sr_limits lim;
	sr_default_limits(&lim);
	ar_set set;
	const char *inputs[] = {path};
	mr_status st = ar_discover(inputs, 1, &lim, &set, err);
	if (st)
		return st;
	if (set.count != 1) {
		mr_buf names = {0};
		for (size_t i = 0; i < set.count && i < 5; i++)
			mr_buf_printf(&names, "%s\"%s\"", i ? ", " : "", set.runs[i].name);
		st = mr_fail(err, MR_EINPUT,
		             "%s holds %zu runs%s%s%s; give one of them (a folder or a snapshot)",
		             path, set.count, set.count ? " (" : "", names.data ? names.data : "",
		             set.count > 5 ? ", ...)"
		             : set.count   ? ")"
		                           : "");
		mr_buf_free(&names);
	} else {
		st = ar_load(NULL, &set.runs[0], &lim, ev, err);
	}
	ar_set_free(&set);
	return st;
}

static mr_status load_side(const char *path, int device, rp_report *run, mr_error *err)
{
	ld_evidence ev;
	mr_status st = load_evidence(path, &ev, err);
	return st ? st : rp_build(run, &ev, &(rp_params){device, 0}, err);
}

/* Loads both runs, compares them and writes the result. Returns the exit status. */
static int write_diff(const cmd_options *opt)
{
	const char *out_path = opt->output, *const *paths = opt->args;
	int loaded = 0;
	rp_report runs[2];
	df_result d = {0};
	mr_buf buf = {0};
	char *default_path = NULL;
	mr_error err = {0};
	mr_status st = MR_OK;
	/* ld_load names the file; discovery errors name it too */
	for (; loaded < 2; loaded++)
		if ((st = load_side(paths[loaded], opt->device, &runs[loaded], &err)))
			break;
	if (!st)
		st = df_compute(&runs[0], &runs[1], opt->device, &d, &err);
	rd_options ropt = {opt->device, opt->redact_paths};
	if (!st)
		st = opt->format == CMD_JSON
		         ? rd_diff_json(&d, &runs[0], &runs[1], &ropt, 1000, &buf, &err)
		     : opt->format == CMD_MD
		         ? rd_diff_md(&d, &runs[0], &runs[1], &ropt, 5, &buf, &err)
		     : opt->format == CMD_TEXT
		         ? rd_diff_text(&d, &runs[0], &runs[1], &ropt, 20, &buf, &err)
		         : rd_diff_html(&d, &runs[0], &runs[1], &ropt, 200, &buf, &err);
	static const char *const suffix[] = {"diff.html", "diff.json", "diff.md", "diff.txt"};
	if (!st && !out_path) {
		default_path = out_default_path(paths[1], suffix[opt->format]);
		if (!default_path)
			st = mr_oom(&err);
		out_path = default_path;
	}
	if (st) {
		fprintf(stderr, "memreport: %s\n", err.msg);
	} else if ((st = out_write(out_path, buf.data ? buf.data : "", buf.len, &err))) {
		fprintf(stderr, "memreport: %s: %s\n", out_path, err.msg);
	} else if (default_path && !opt->quiet) {
		fprintf(stderr, "memreport: wrote %s\n", default_path);
	}
	for (int i = 0; i < loaded; i++)
		rp_free(&runs[i]);
	df_free(&d);
	mr_buf_free(&buf);
	free(default_path);
	return (int)st;
}

int cmd_diff(int argc, char **argv)
{
	cmd_options opt;
	mr_error err = {0};
	int rc = 0;
	if (cmd_parse(CMD_DIFF, argc, argv, &opt, &err)) {
		rc = err.status == MR_EINPUT ? diff_usage_error(err.msg) : MR_EFAIL;
		if (rc == MR_EFAIL)
			fprintf(stderr, "memreport: %s\n", err.msg);
	} else if (opt.help) {
		fputs(diff_usage, stdout);
	} else if (opt.arg_count != 2) {
		rc = diff_usage_error("give exactly two runs: BEFORE and AFTER");
	} else {
		if (opt.templates)
			tp_set_dir(opt.templates);
		rc = write_diff(&opt);
	}
	cmd_options_free(&opt);
	return rc;
}
