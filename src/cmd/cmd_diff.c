/* cmd_diff.c: `memreport diff BEFORE AFTER [-o FILE] [--format html|json|md|text] [--device N]
 * [--redact-paths] [-q]`.
 *
 * BEFORE and AFTER are each one run: a snapshot (or any single input the report command takes),
 * or a run folder or zip archive holding exactly one run. */
#include "cmd/cmd_diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/output.h"
#include "base/pool.h"
#include "cmd/options.h"
#include "cmd/run_input.h"
#include "cmd/say.h"
#include "render/diff_text.h"
#include "render/render_diff.h"
#include "render/templates.h"
#include "report/diff.h"
#include "report/report.h"

static const char diff_usage[] =
    "usage: memreport diff BEFORE AFTER [-o FILE] [--format html|json|md|text]\n"
    "                      [--device N] [--redact-paths] [-q]\n"
    "BEFORE, AFTER: a snapshot, or a run folder or zip archive holding one run.\n";

static int diff_usage_error(const char *msg)
{
	return cmd_usage_error("memreport diff", msg, diff_usage);
}

typedef struct {
	const cmd_run *side;
	int device;
	rp_report *run; /* built in place: the analysis points into it */
	mr_error err;
	mr_status st;
} side_job;

/* One side loaded, carried through the pipeline and checked for --device. */
static void side_task(void *ctx, void *worker, size_t i)
{
	(void)worker;
	side_job *j = &((side_job *)ctx)[i];
	ld_evidence ev;
	/* the loader names the file; discovery errors name it too */
	if ((j->st = cmd_run_load(j->side, NULL, NULL, &ev, &j->err)) ||
	    (j->st = rp_build(j->run, &ev, &(rp_params){j->device, 0}, &j->err)))
		return;
	if ((j->st = cmd_run_check_device(j->run, j->device, &j->err)))
		rp_free(j->run);
}

/* Both sides found and kept off the output before either is decoded, then loaded and carried
 * through the pipeline at once (one after the other when either is standard input); the
 * first side's error is the one returned, as a sequential load would. loaded[i]: runs[i] was
 * made (the caller frees it). */
static mr_status load_sides(const char *const *paths, const char *out_path, int device,
                            rp_report runs[2], int loaded[2], mr_error *err)
{
	cmd_run sides[2] = {{0}, {0}};
	mr_status st = MR_OK;
	for (int i = 0; i < 2 && !st; i++)
		if (!(st = cmd_run_find(&sides[i], paths + i, 1, err)))
			st = cmd_run_guard(&sides[i], out_path, err);
	side_job jobs[2] = {{&sides[0], device, &runs[0], {0}, MR_OK},
	                    {&sides[1], device, &runs[1], {0}, MR_OK}};
	int stdin_side = strcmp(paths[0], "-") == 0 || strcmp(paths[1], "-") == 0;
	if (!st)
		mr_pool_run(2, stdin_side ? 1 : 2, side_task, jobs, NULL, NULL);
	for (int i = 0; i < 2; i++)
		loaded[i] = !st && !jobs[i].st;
	for (int i = 0; i < 2 && !st; i++)
		if (jobs[i].st) {
			st = jobs[i].st;
			*err = jobs[i].err;
		}
	cmd_run_free(&sides[0]);
	cmd_run_free(&sides[1]);
	return st;
}

/* Loads both runs, compares them and writes the result. Returns the exit status. */
static int write_diff(const cmd_options *opt)
{
	const char *out_path = opt->output, *const *paths = opt->args;
	int loaded[2] = {0, 0};
	rp_report runs[2];
	df_result d = {0};
	mr_buf buf = {0};
	char *default_path = NULL;
	mr_error err = {0};
	mr_status st = MR_OK;
	if (!out_path) {
		static const char *const suffix[] = {"diff.html", "diff.json", "diff.md",
		                                     "diff.txt"};
		default_path = out_default_path(paths[1], suffix[opt->format]);
		if (!default_path)
			st = mr_oom(&err);
		out_path = default_path;
	}
	if (!st)
		st = load_sides(paths, out_path, opt->device, runs, loaded, &err);
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
	if (st) {
		cmd_say("%s", err.msg);
	} else if ((st = out_write(out_path, buf.data ? buf.data : "", buf.len, &err))) {
		cmd_say("%s: %s", out_path, err.msg);
	} else if (default_path && !opt->quiet) {
		cmd_say("wrote %s", default_path);
	}
	for (int i = 0; i < 2; i++)
		if (loaded[i])
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
			cmd_say("%s", err.msg);
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
